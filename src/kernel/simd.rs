//! Runtime CPU dispatch for the SIMD backend (as rav1e does): the same generic row function is
//! compiled for AVX-512, AVX2+FMA and the baseline x86-64/other target, and the best level the CPU
//! supports is chosen at run time; [`SimdBackend`] is the backend that renders with it. Which
//! backend renders (reference or SIMD) is the plan's choice (`kernel::plan`).

use super::backend::{ReferenceBackend, RenderBackend, RowResult};
use super::fast::{render_row, Prepared};
use super::hand::HandKernel;
use super::pixel_geometry::PixelGeometry;
use super::plan::{active_backend, Backend};
pub use crate::base::cpu::{detected_level, SimdLevel};
use crate::experiment::params::Precision;
use crate::experiment::Experiment;

/// The CPU kernel the planner picks for `requested`: the SIMD kernel at that level, at most the
/// CPU's, where it supports the experiment (integer N, `fast::supports`), else the reference. `Gpu`
/// asks for the CPU this process would use (`active_backend`: `NANOBRAGG_SIMD` honoured, the
/// reference included), as every fall-back from the GPU does.
pub fn cpu_kernel_for(exp: &Experiment, requested: Backend) -> Backend {
    match requested {
        Backend::Gpu => cpu_kernel_for(exp, active_backend()),
        Backend::Simd(level) if super::fast::supports(exp) => Backend::Simd(level.min(detected_level())),
        _ => Backend::Reference,
    }
}

/// Run `f` with the CPU backend [`cpu_kernel_for`] picks for `requested`, in `precision`.
pub fn with_cpu_backend<R>(exp: &Experiment, requested: Backend, precision: Precision, f: impl FnOnce(&dyn RenderBackend) -> R) -> R {
    with_cpu_backend_reusing(exp, requested, precision, None, f)
}

/// [`with_cpu_backend`], the SIMD kernel reading each pixel's geometry from `geometry` where it is
/// this experiment's (a dataset's frames: `PixelGeometry`).
pub fn with_cpu_backend_reusing<R>(exp: &Experiment, requested: Backend, precision: Precision, geometry: Option<&PixelGeometry>, f: impl FnOnce(&dyn RenderBackend) -> R) -> R {
    match (cpu_kernel_for(exp, requested), precision) {
        (Backend::Simd(level), Precision::Double) => f(&SimdBackend::<f64>::new(exp, level).reusing(geometry)),
        (Backend::Simd(level), Precision::Single) => f(&SimdBackend::<f32>::new(exp, level).reusing(geometry)),
        _ => f(&ReferenceBackend::new(exp)),
    }
}

/// The SIMD kernel (`fast.rs`) at one instruction-set level, in f64 or f32 (`T`) per the
/// experiment's precision.
pub struct SimdBackend<'a, T: HandKernel> {
    exp: &'a Experiment,
    prep: Prepared<'a, T>,
    level: SimdLevel,
}

impl<'a, T: HandKernel> SimdBackend<'a, T> {
    /// The level is lowered to what this CPU supports. The experiment must be one the SIMD kernel
    /// supports (`fast::supports`; the planner [`cpu_kernel_for`] checks it).
    pub fn new(exp: &'a Experiment, level: SimdLevel) -> Self {
        let level = level.min(detected_level());
        SimdBackend { exp, prep: Prepared::new(exp, level >= SimdLevel::Avx2 && super::plan::hand_loop_enabled()), level }
    }

    /// Read each pixel's geometry from `geometry` where it is this experiment's ([`Prepared::reusing`]).
    pub fn reusing(self, geometry: Option<&'a PixelGeometry>) -> Self {
        let SimdBackend { exp, prep, level } = self;
        SimdBackend { exp, prep: prep.reusing(geometry, exp), level }
    }
}

impl<T: HandKernel + Send + Sync> RenderBackend for SimdBackend<'_, T> {
    fn name(&self) -> &'static str {
        self.level.name()
    }
    fn experiment(&self) -> &Experiment {
        self.exp
    }
    fn precision(&self) -> Precision {
        if std::mem::size_of::<T>() == 4 { Precision::Single } else { Precision::Double }
    }
    fn render_row(&self, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
        render_row_at(self.level, self.exp, &self.prep, s, interpolate, out)
    }
}

/// Render one row with the SIMD kernel at `level` (see [`super::fast::render_row`]).
pub fn render_row_at<T: HandKernel>(level: SimdLevel, exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => unsafe { row_avx512(exp, prep, s, interpolate, out) },
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => unsafe { row_avx2(exp, prep, s, interpolate, out) },
        _ => row_portable(exp, prep, s, interpolate, out),
    }
}

fn row_portable<T: HandKernel>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
    if std::mem::size_of::<T>() == 4 {
        render_row::<T, 16, 8, false, false>(exp, prep, s, interpolate, out)
    } else {
        render_row::<T, 8, 4, false, false>(exp, prep, s, interpolate, out)
    }
}

/// Groups of 32 pixels: the geometry's divisions and square roots of two 16-pixel halves interleave
/// (2048² benchmark crystal, one thread, forced to this level on the AVX-512 Xeon, 2026-11-27: render
/// 63.4 -> 52.4 ms in f64 and 53.5 -> 43.9 ms in f32 against groups of 16; 64 pixels was slower again;
/// the heavy case unchanged). Each pixel's value does not depend on the group's width.
///
/// # Safety
/// The CPU must support AVX2 and FMA (checked by `detected_level`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_avx2<T: HandKernel>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
    if std::mem::size_of::<T>() == 4 {
        render_row::<T, 32, 16, true, false>(exp, prep, s, interpolate, out)
    } else {
        render_row::<T, 32, 8, true, false>(exp, prep, s, interpolate, out)
    }
}

/// The per-pixel geometry and the generic loop in 512-bit registers; the usual crystal's samples
/// in the hand-written loop (`HAND`): with `default_F` alone in its 512-bit form (`W512`,
/// `avx2::f64x8`/`f32x16`; with the geometry's divisions from one reciprocal it halved the 4096²
/// benchmark crystal's render, `reports/benchmarks/2026-11-26-light-kernel`), with a grid in the
/// 256-bit form, whose F read is one broadcast where a register's lanes share their
/// lattice point. On an AVX2 machine the hand loop renders the heavy case 2.5× (f64) and 2.2× (f32)
/// faster than the generic loop at the same group shape (in-process A/B, 2026-11-23). Every pixel's
/// value is the same, bit for bit, at this level's group shapes and register widths as at the AVX2
/// level's (tests/kernels.rs checks both shapes with the hand loop on any AVX2 CPU; the avx2 module's
/// tests the two register widths against each other). Groups of 32 pixels in f64 too (as at the AVX2
/// level: two 16-lane halves whose division and square-root chains overlap; 2048² render 21.2 -> 19.7
/// ms, 2026-11-27); 64 pixels in f32 was no faster.
///
/// # Safety
/// The CPU must support AVX-512 F/DQ/VL (checked by `detected_level`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
unsafe fn row_avx512<T: HandKernel>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
    if std::mem::size_of::<T>() == 4 {
        render_row::<T, 32, 32, true, true>(exp, prep, s, interpolate, out)
    } else {
        render_row::<T, 32, 16, true, true>(exp, prep, s, interpolate, out)
    }
}
