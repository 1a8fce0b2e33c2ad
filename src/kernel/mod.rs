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
pub mod lanes;
pub mod reference;
pub mod simd;

use crate::experiment::Experiment;
pub use backend::{render_with_backend, ReferenceBackend, RenderBackend, RowEnd, RowResult, SimdBackend};
pub use reference::{InterpState, OutOfRange, Trace};
pub use simd::{active_backend, active_level, detected_level, simd_level_name, Backend, SimdLevel};

/// The float image and the by-products of rendering it.
pub struct RenderOutput {
    /// fpixels × spixels, fast axis fastest.
    pub float: Vec<f32>,
    /// Sum of the pixel solid angles over all sub-pixels and layers (for the C's summary line).
    pub omega_sum: f64,
    /// The first out-of-range interpolation, if any (the C prints a warning).
    pub interp_oob: Option<OutOfRange>,
}

/// Whether pixel (f, s) is rendered at all: inside the inclusive ROI and not masked.
#[inline(always)]
pub fn pixel_active(exp: &Experiment, f: usize, s: usize) -> bool {
    let r = exp.roi;
    let (fi, si) = (f as i64, s as i64);
    if fi < r[0] || fi > r[1] || si < r[2] || si > r[3] {
        return false;
    }
    match &exp.mask {
        Some(m) => m[s * exp.det.fpixels + f] != 0,
        None => true,
    }
}

/// Render one row into `out` with the reference kernel; returns (omega sum, first out-of-range
/// evaluation).
pub fn render_row(exp: &Experiment, s: usize, interpolate: bool, out: &mut [f32]) -> (f64, Option<OutOfRange>) {
    render_row_from(exp, s, 0, interpolate, out)
}

/// Render pixels `from..` of row `s` with the reference kernel (the driver finishes a row with it
/// where another backend handed over, so the switch-off happens at exactly the C's evaluation).
pub fn render_row_from(exp: &Experiment, s: usize, from: usize, interpolate: bool, out: &mut [f32]) -> (f64, Option<OutOfRange>) {
    let mut state = InterpState { enabled: interpolate, first_oob: None };
    let mut omega = 0.0;
    for (f, px) in out.iter_mut().enumerate().skip(from) {
        if !pixel_active(exp, f, s) {
            *px = 0.0;
            continue;
        }
        let (v, om) = reference::render_pixel(exp, f, s, &mut state, None);
        *px = v as f32;
        omega += om;
    }
    (omega, state.first_oob)
}

/// The planner: which backend renders this experiment when `requested` is asked for. The SIMD
/// kernel needs integer N (always true from the flags) and runs at most at the CPU's level;
/// otherwise the reference renders.
pub fn kernel_for(exp: &Experiment, requested: Backend) -> Backend {
    match requested {
        Backend::Simd(level) if fast::supports(exp) => Backend::Simd(level.min(detected_level())),
        _ => Backend::Reference,
    }
}

/// Render the whole image with the backend the planner picks for this CPU and `NANOBRAGG_SIMD`
/// (see [`simd::active_backend`]).
pub fn render(exp: &Experiment, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    render_at(exp, active_backend(), progress)
}

/// Render the whole image with the backend the planner picks for `requested`. `progress` is called
/// with rows finished (any thread).
pub fn render_at(exp: &Experiment, requested: Backend, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    match kernel_for(exp, requested) {
        Backend::Reference => render_with_backend(&ReferenceBackend::new(exp), progress),
        Backend::Simd(level) => match exp.precision {
            crate::experiment::params::Precision::Double => render_with_backend(&SimdBackend::<f64>::new(exp, level), progress),
            crate::experiment::params::Precision::Single => render_with_backend(&SimdBackend::<f32>::new(exp, level), progress),
        },
    }
}

/// Render the whole image with the reference kernel.
pub fn render_reference(exp: &Experiment, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    render_with_backend(&ReferenceBackend::new(exp), progress)
}
