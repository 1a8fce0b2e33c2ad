//! Runtime CPU dispatch for the SIMD backend (as rav1e does): the same generic row function is
//! compiled for AVX-512, AVX2+FMA and the baseline x86-64/other target, and the best level the CPU
//! supports is chosen at run time. Which *backend* renders (reference or SIMD) is a separate choice,
//! [`Backend`]: `NANOBRAGG_SIMD=avx512|avx2|portable` lowers the SIMD level and
//! `NANOBRAGG_SIMD=scalar` (or `reference`) picks the reference backend (for testing and benchmarking).

use super::backend::RowResult;
use super::fast::{render_row, Prepared};
use super::lanes::Real;
pub use crate::base::cpu::{detected_level, SimdLevel};
use crate::experiment::Experiment;

/// Which render backend to use: the planner's input and output (see [`super::kernel_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The scalar reference kernel, a mirror of the C loop (named `scalar` in reports and in
    /// `NANOBRAGG_SIMD`).
    Reference,
    /// The SIMD kernel at this instruction-set level.
    Simd(SimdLevel),
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Reference => "scalar",
            Backend::Simd(level) => level.name(),
        }
    }
    /// `scalar`/`reference`, or a SIMD level's name.
    pub fn parse(s: &str) -> Option<Backend> {
        match s.to_ascii_lowercase().as_str() {
            "scalar" | "reference" => Some(Backend::Reference),
            other => SimdLevel::parse(other).map(Backend::Simd),
        }
    }
}

/// The backend requested for this process: SIMD at the detected level, lowered (never raised) or
/// replaced by the reference through `NANOBRAGG_SIMD`.
pub fn active_backend() -> Backend {
    let detected = detected_level();
    match std::env::var("NANOBRAGG_SIMD").ok().and_then(|v| Backend::parse(&v)) {
        Some(Backend::Reference) => Backend::Reference,
        Some(Backend::Simd(forced)) => Backend::Simd(forced.min(detected)),
        None => Backend::Simd(detected),
    }
}

/// `NANOBRAGG_HAND_LOOP=off` (or `0`, `no`, `false`) keeps every SIMD level on the generic sample
/// loop: the A/B switch for the hand-written one (e.g. the generic 512-bit loop against it on an
/// AVX-512 CPU). Reports name it with the level (`bench::machine`).
pub const HAND_LOOP_ENV: &str = "NANOBRAGG_HAND_LOOP";

/// Whether the hand-written sample loop may run in this process (see [`HAND_LOOP_ENV`]).
pub fn hand_loop_enabled() -> bool {
    !std::env::var(HAND_LOOP_ENV).is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "off" | "0" | "no" | "false"))
}

/// The same as [`active_backend`] (the name it had when SIMD levels and backends were one enum).
pub fn active_level() -> Backend {
    active_backend()
}

/// Name of the backend in use, for reports (`scalar` for the reference).
pub fn simd_level_name() -> &'static str {
    active_backend().name()
}

/// Render one row with the SIMD kernel at `level` (see [`super::fast::render_row`]).
pub fn render_row_at<T: Real>(level: SimdLevel, exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => unsafe { row_avx512(exp, prep, s, interpolate, out) },
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => unsafe { row_avx2(exp, prep, s, interpolate, out) },
        _ => row_portable(exp, prep, s, interpolate, out),
    }
}

fn row_portable<T: Real>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
    if std::mem::size_of::<T>() == 4 {
        render_row::<T, 16, 8, false>(exp, prep, s, interpolate, out)
    } else {
        render_row::<T, 8, 4, false>(exp, prep, s, interpolate, out)
    }
}

/// # Safety
/// The CPU must support AVX2 and FMA (checked by `detected_level`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_avx2<T: Real>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
    if std::mem::size_of::<T>() == 4 {
        render_row::<T, 16, 16, true>(exp, prep, s, interpolate, out)
    } else {
        render_row::<T, 16, 8, true>(exp, prep, s, interpolate, out)
    }
}

/// The per-pixel geometry and the generic loop in 512-bit registers; the usual crystal's samples
/// in the hand-written AVX2 loop (`HAND`), which every AVX-512 CPU also runs. On an AVX2 machine
/// the hand loop renders the heavy case 2.5× (f64) and 2.2× (f32) faster than the generic loop at
/// the same group shape, and within noise of its own time at this level's wider groups (in-process
/// A/B, 2026-11-23); twice the lanes cannot give the generic loop that back. Every pixel's value is
/// the same, bit for bit, at this level's group shapes as at the AVX2 level's (tests/kernels.rs
/// checks both shapes with the hand loop on any AVX2 CPU).
///
/// # Safety
/// The CPU must support AVX-512 F/DQ/VL (checked by `detected_level`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
unsafe fn row_avx512<T: Real>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
    if std::mem::size_of::<T>() == 4 {
        render_row::<T, 32, 32, true>(exp, prep, s, interpolate, out)
    } else {
        render_row::<T, 16, 16, true>(exp, prep, s, interpolate, out)
    }
}
