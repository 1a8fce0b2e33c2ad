//! The pixel loop, behind a backend seam ([`backend::RenderBackend`]): `reference` mirrors the C
//! one pixel at a time, `fast` (dispatched per SIMD level by `simd`) renders groups of pixels as SIMD
//! lanes; [`render`] plans which one runs and [`backend::render_with_backend`] drives it over the
//! image in parallel rows (rayon) with results independent of the thread count, honouring the C's
//! raster-order interpolation switch-off for every backend.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
pub mod backend;
#[cfg(feature = "check-kernels")]
pub mod check;
pub mod fast;
pub mod gpu;
pub mod hand;
pub mod lanes;
pub mod pixel_geometry;
pub mod plan;
pub mod reference;
pub mod simd;
pub mod tangent_lanes;
pub mod tangents;

use std::sync::atomic::{AtomicBool, Ordering};
use crate::experiment::Experiment;
pub use crate::base::cpu::{detected_level, SimdLevel};
pub use backend::{no_row_hook, render_with_backend, render_with_backend_into, ReferenceBackend, RowHook, RenderBackend, RenderOutput, RowEnd, RowResult};
pub use plan::{active_backend, active_level, simd_level_name, Backend, RenderOptions};
pub use reference::{pixel_active, render_row, render_row_from, InterpState, OutOfRange, Trace};
pub use simd::SimdBackend;
pub use pixel_geometry::PixelGeometry;

/// The planner: which backend renders this experiment when `requested` is asked for. The SIMD
/// kernel needs integer N (always true from the flags) and runs at most at the CPU's level;
/// otherwise the reference renders. The GPU renders where the process has a device and the
/// experiment fits it (`gpu::unsupported`), else the CPU's best (a run that asked for the GPU by name
/// was refused before it got here: `run::config::RunOptions::check_backend`).
pub fn kernel_for(exp: &Experiment, requested: Backend) -> Backend {
    match requested {
        Backend::Gpu if gpu::unsupported(exp).is_none() && gpu::device().is_ok() => Backend::Gpu,
        // a CPU level as asked; for the GPU, the CPU this process would use
        other => simd::cpu_kernel_for(exp, other),
    }
}

/// Run `f` with the backend the planner picks for `opts` (a GPU whose tables cannot be uploaded
/// falls back to the CPU's best, with one warning).
/// `geometry`: the pixels' geometry computed once for a dataset, which the SIMD kernel reads where
/// it is this experiment's.
fn with_backend<R>(exp: &Experiment, opts: &RenderOptions, geometry: Option<&PixelGeometry>, f: impl FnOnce(&dyn RenderBackend) -> R) -> R {
    match kernel_for(exp, opts.backend) {
        Backend::Gpu => match gpu::GpuBackend::new(exp, opts.precision) {
            Ok(b) => f(&b),
            Err(e) => {
                eprintln!("warning: GPU backend: {e}; rendering on the CPU instead");
                simd::with_cpu_backend_reusing(exp, Backend::Gpu, opts.precision, geometry, f)
            }
        },
        cpu => simd::with_cpu_backend_reusing(exp, cpu, opts.precision, geometry, f),
    }
}

/// Render the whole image with the backend the planner picks for `opts.backend`, in `opts.precision`.
/// `progress` is called with rows finished (any thread).
pub fn render(exp: &Experiment, opts: &RenderOptions, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    render_reusing(exp, opts, None, progress)
}

/// [`render`], each pixel's geometry read from `geometry` where it is this experiment's (one of a
/// dataset's frames, [`PixelGeometry::build`] from another): the same image.
pub fn render_reusing(exp: &Experiment, opts: &RenderOptions, geometry: Option<&PixelGeometry>, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    let mut float = vec![0.0f32; exp.det.fpixels() * exp.det.rows()];
    let (omega_sum, interp_oob) = with_backend(exp, opts, geometry, |b| render_with_backend_into(b, &mut float, progress, &no_row_hook));
    RenderOutput { float, omega_sum, interp_oob }
}

/// [`render`] into a buffer the caller provides (fpixels × rows values; a memory map of the float
/// output, say), calling `on_row` with each finished row while it is in cache. Returns the omega sum
/// and the first out-of-range interpolation, as [`RenderOutput`] holds them.
pub fn render_into(exp: &Experiment, opts: &RenderOptions, float: &mut [f32], progress: &(dyn Fn(usize) + Sync), on_row: RowHook) -> (f64, Option<OutOfRange>) {
    with_backend(exp, opts, None, |b| render_with_backend_into(b, float, progress, on_row))
}

/// [`render`], stopping early when `stop` is set (from any thread): rows not yet begun are left empty,
/// so the render ends within about one row per thread. `None` when it was stopped.
pub fn render_until(exp: &Experiment, opts: &RenderOptions, progress: &(dyn Fn(usize) + Sync), stop: &AtomicBool) -> Option<RenderOutput> {
    let out = with_backend(exp, opts, None, |inner| render_with_backend(&Stoppable { inner, stop }, progress));
    (!stop.load(Ordering::Relaxed)).then_some(out)
}

/// A backend whose rows come out empty once `stop` is set (Ctrl-C in Python: the workers stop within
/// a row instead of finishing the image).
struct Stoppable<'a> {
    inner: &'a dyn RenderBackend,
    stop: &'a AtomicBool,
}

impl RenderBackend for Stoppable<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn experiment(&self) -> &Experiment {
        self.inner.experiment()
    }
    fn precision(&self) -> crate::experiment::params::Precision {
        self.inner.precision()
    }
    fn is_reference(&self) -> bool {
        // a stopped row is empty, not the reference's: nothing to check it against
        self.inner.is_reference() || self.stop.load(Ordering::Relaxed)
    }
    fn render_row(&self, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
        if self.stop.load(Ordering::Relaxed) {
            return RowResult { omega: 0.0, end: RowEnd::Complete };
        }
        self.inner.render_row(s, interpolate, out)
    }
}

/// Render the whole image with the reference kernel.
pub fn render_reference(exp: &Experiment, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    render_with_backend(&ReferenceBackend::new(exp), progress)
}
