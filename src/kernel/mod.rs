//! The pixel loop. `reference` mirrors the C one pixel at a time; `render` runs it over the image in
//! parallel rows (rayon) with results independent of the thread count.
//!
//! Interpolation that goes out of range must behave like the single-threaded C (checklist §0.1): the
//! first out-of-range evaluation in raster order switches interpolation off for every later one. Rows
//! are rendered independently with interpolation on; if some row reports an out-of-range evaluation,
//! every row after the earliest such row is rendered again with interpolation off.

pub mod fast;
pub mod lanes;
pub mod reference;
pub mod simd;

use crate::experiment::Experiment;
use rayon::prelude::*;
pub use reference::{InterpState, OutOfRange, Trace};
pub use simd::{active_level, simd_level_name, SimdLevel};

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

/// Render one row into `out` (length fpixels); returns (omega sum, first out-of-range evaluation).
pub fn render_row(exp: &Experiment, s: usize, interpolate: bool, out: &mut [f32]) -> (f64, Option<OutOfRange>) {
    render_row_from(exp, s, 0, interpolate, out)
}

/// Render pixels `from..` of row `s` with the reference kernel (the fast kernel hands a row over to it
/// where interpolation leaves its safe range, so the switch-off happens at exactly the C's evaluation).
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

/// Which kernel renders this experiment at the requested level.
pub fn kernel_for(exp: &Experiment, level: SimdLevel) -> SimdLevel {
    if level == SimdLevel::Scalar || !fast::supports(exp) {
        SimdLevel::Scalar
    } else {
        level
    }
}

/// Render the whole image with the best kernel for this CPU (see [`simd::active_level`]).
pub fn render(exp: &Experiment, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    render_at(exp, active_level(), progress)
}

/// Render the whole image at a given level. `progress` is called with rows finished (any thread).
pub fn render_at(exp: &Experiment, level: SimdLevel, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    match kernel_for(exp, level) {
        SimdLevel::Scalar => render_reference(exp, progress),
        level => match exp.precision {
            crate::config::Precision::Double => render_fast::<f64>(exp, level, progress),
            crate::config::Precision::Single => render_fast::<f32>(exp, level, progress),
        },
    }
}

fn render_fast<T: lanes::Real + Send + Sync>(exp: &Experiment, level: SimdLevel, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    let prep = fast::Prepared::<T>::new(exp);
    render_rows(exp, progress, |s, interpolate, row| simd::render_row_at(level, exp, &prep, s, interpolate, row))
}

/// Render the whole image with the reference kernel.
pub fn render_reference(exp: &Experiment, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    render_rows(exp, progress, |s, interpolate, row| render_row(exp, s, interpolate, row))
}

/// Rows in parallel with any kernel, then the raster-order rule for interpolation: every row after
/// the first one with an out-of-range evaluation is rendered again with interpolation off.
fn render_rows(
    exp: &Experiment,
    progress: &(dyn Fn(usize) + Sync),
    row_fn: impl Fn(usize, bool, &mut [f32]) -> (f64, Option<OutOfRange>) + Sync,
) -> RenderOutput {
    let fp = exp.det.fpixels;
    let sp = exp.det.spixels;
    let mut float = vec![0.0f32; fp * sp];
    let mut rows: Vec<(f64, Option<OutOfRange>)> = float
        .par_chunks_mut(fp)
        .enumerate()
        .map(|(s, row)| {
            let r = row_fn(s, exp.interpolate, row);
            progress(1);
            r
        })
        .collect();
    let first_bad = rows.iter().position(|r| r.1.is_some());
    if let Some(bad) = first_bad {
        let redo: Vec<(f64, Option<OutOfRange>)> = float[(bad + 1) * fp..]
            .par_chunks_mut(fp)
            .enumerate()
            .map(|(i, row)| row_fn(bad + 1 + i, false, row))
            .collect();
        for (i, r) in redo.into_iter().enumerate() {
            rows[bad + 1 + i] = r;
        }
    }
    let omega_sum = rows.iter().map(|r| r.0).sum();
    RenderOutput { float, omega_sum, interp_oob: first_bad.and_then(|b| rows[b].1) }
}
