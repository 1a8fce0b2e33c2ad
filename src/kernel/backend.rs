//! The render backend seam: what a kernel must do to render the float image, the two CPU kernels
//! that do it (the scalar reference and the SIMD kernel), and the shared driver that runs any of
//! them over the image with the C's raster-order interpolation rule.
//!
//! A new backend (a GPU kernel, say) implements [`RenderBackend`] and is run by
//! [`render_with_backend`]; the driver, not the backend, owns the parts of the C's semantics that span
//! rows or need the oracle: finishing a row with the reference where interpolation leaves its range,
//! switching interpolation off for every row after the first such row, the omega sum, and (with the
//! `check-kernels` feature) checking every row against the reference.

use super::reference::{render_row_from, OutOfRange};
use crate::experiment::params::Precision;
use crate::experiment::Experiment;
use rayon::prelude::*;

/// The reference backend's name in reports and `NANOBRAGG_SIMD` (`scalar`).
pub const REFERENCE_NAME: &str = "scalar";

/// The float image and the by-products of rendering it.
pub struct RenderOutput {
    /// fpixels × spixels, fast axis fastest.
    pub float: Vec<f32>,
    /// Sum of the pixel solid angles over all sub-pixels and layers (for the C's summary line).
    pub omega_sum: f64,
    /// The first out-of-range interpolation, if any (the C prints a warning).
    pub interp_oob: Option<OutOfRange>,
}

/// How a backend's rendering of one row ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RowEnd {
    /// Every pixel is written; interpolation (if it was on) never left its range in this row.
    Complete,
    /// Every pixel is written; interpolation left its range at this evaluation (h, k, l, h0, k0, l0)
    /// and was switched off there for the rest of the row, exactly as the C does. Only a backend
    /// that evaluates pixels in the C's order can do this itself (the reference does).
    SwitchedOff(OutOfRange),
    /// Interpolation left (or may have left) its range at or after pixel `from` of the row: pixels
    /// before `from` are written, the driver renders `from..` with the reference kernel, which
    /// switches interpolation off at the C's exact evaluation.
    HandOver { from: usize },
}

/// A backend's result for one row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowResult {
    /// Sum of the solid angles the C adds to its omega sum, over the pixels this backend rendered
    /// (those before `from` for [`RowEnd::HandOver`]), added in pixel order.
    pub omega: f64,
    pub end: RowEnd,
}

/// A way to render rows of the float image of one experiment.
///
/// # Contract
/// * **Rows in, f32 pixels out.** A backend is built for one [`Experiment`] (returned by
///   [`RenderBackend::experiment`]). It renders whole rows: `out` holds `fpixels` values per row, fast
///   axis fastest, and every value of a rendered row is written, inactive pixels (outside the ROI or
///   masked, `reference::pixel_active`) as exactly 0.0.
/// * **Interpolation.** `interpolate` says whether tricubic F interpolation is on at the start of each
///   row. With it off the backend returns [`RowEnd::Complete`]. With it on, a row whose evaluations all
///   stay in range is `Complete`; otherwise the backend either switches interpolation off itself at the
///   C's exact evaluation ([`RowEnd::SwitchedOff`]) or stops at a pixel no later than the one whose
///   evaluation left the range ([`RowEnd::HandOver`]). The rule across rows (every row after the first
///   one that left the range is rendered again with interpolation off) is the driver's.
/// * **Determinism.** A row's pixels and result depend only on the experiment, the row index and
///   `interpolate`: never on the number of threads, the order in which rows are rendered or how they
///   are batched. Images are then bit-identical at any thread count.
/// * **Accuracy.** Pixels agree with the reference kernel within the tolerances `tests/kernels.rs`
///   checks (relative 1e-6 of the peak in double precision, 2e-3 in single); the `check-kernels`
///   feature asserts it row by row.
/// * **Progress.** [`RenderBackend::render_rows`] calls `progress(n)` after finishing `n` rows (from
///   any thread).
pub trait RenderBackend: Sync {
    /// The name reports use (`scalar` for the reference, else the SIMD level or the device).
    fn name(&self) -> &'static str;

    /// The experiment this backend renders.
    fn experiment(&self) -> &Experiment;

    /// The arithmetic of the per-sample work (the reference is double throughout).
    fn precision(&self) -> Precision {
        Precision::Double
    }

    /// Whether this is the reference kernel itself (the `check-kernels` feature skips checking it).
    fn is_reference(&self) -> bool {
        false
    }

    /// Render row `s` into `out` (`fpixels` values).
    fn render_row(&self, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult;

    /// Render rows `first..first + out.len() / fpixels` into `out`, one [`RowResult`] per row in row
    /// order, calling `on_row` with every row it finished ([`RowResult::end`] not
    /// [`RowEnd::HandOver`]) right after rendering it. The default renders rows in parallel on the
    /// current rayon pool with [`RenderBackend::render_row`]; a backend that works on batches of rows
    /// (a GPU) overrides it.
    fn render_rows(&self, first: usize, interpolate: bool, out: &mut [f32], progress: &(dyn Fn(usize) + Sync), on_row: RowHook) -> Vec<RowResult> {
        let fp = self.experiment().det.fpixels();
        // rows handed out in raster order, each to the next free thread (`par_bridge` pulls them from
        // the sequential iterator): they finish nearly in order, so whatever follows the render row
        // by row in raster order (the serial noise stream) waits for few of them
        let mut done: Vec<(usize, RowResult)> = out
            .chunks_mut(fp)
            .enumerate()
            .par_bridge()
            .map(|(i, row)| {
                let r = self.render_row(first + i, interpolate, row);
                if !matches!(r.end, RowEnd::HandOver { .. }) {
                    on_row(first + i, row);
                }
                progress(1);
                (i, r)
            })
            .collect();
        done.sort_unstable_by_key(|d| d.0);
        done.into_iter().map(|d| d.1).collect()
    }
}

/// What the driver calls with each finished row (its index and pixels), on the thread that rendered
/// it while the row is still in cache: the run reduces the statistics there instead of in a second
/// pass over the image. A row rendered again (interpolation switched off after an earlier row) is
/// passed again; the last call holds its final pixels.
pub type RowHook<'a> = &'a (dyn Fn(usize, &[f32]) + Sync);

/// A [`RowHook`] that does nothing.
pub fn no_row_hook(_: usize, _: &[f32]) {}

/// The scalar reference kernel (a mirror of the C loop) as a backend.
pub struct ReferenceBackend<'a> {
    exp: &'a Experiment,
}

impl<'a> ReferenceBackend<'a> {
    pub fn new(exp: &'a Experiment) -> Self {
        ReferenceBackend { exp }
    }
}

impl RenderBackend for ReferenceBackend<'_> {
    fn name(&self) -> &'static str {
        REFERENCE_NAME
    }
    fn experiment(&self) -> &Experiment {
        self.exp
    }
    fn is_reference(&self) -> bool {
        true
    }
    fn render_row(&self, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
        let (omega, oob) = render_row_from(self.exp, s, 0, interpolate, out);
        RowResult { omega, end: oob.map_or(RowEnd::Complete, RowEnd::SwitchedOff) }
    }
}

/// Render the whole image with `backend`. `progress` is called with rows finished (any thread).
///
/// Interpolation that goes out of range behaves like the single-threaded C (checklist §0.1): the
/// first out-of-range evaluation in raster order switches interpolation off for every later one.
/// Rows are rendered independently with interpolation on (a row that leaves the range is finished
/// by the reference kernel from where the backend stopped); if some row left the range, every row
/// after the earliest such row is rendered again with interpolation off.
pub fn render_with_backend(backend: &dyn RenderBackend, progress: &(dyn Fn(usize) + Sync)) -> RenderOutput {
    let exp = backend.experiment();
    let mut float = vec![0.0f32; exp.det.fpixels() * exp.det.rows()];
    let (omega_sum, interp_oob) = render_with_backend_into(backend, &mut float, progress, &no_row_hook);
    RenderOutput { float, omega_sum, interp_oob }
}

/// [`render_with_backend`] into `float` (fpixels × rows values, whatever they hold: every pixel is
/// written), calling `on_row` with each finished row. Returns the omega sum and the first
/// out-of-range interpolation.
pub fn render_with_backend_into(backend: &dyn RenderBackend, float: &mut [f32], progress: &(dyn Fn(usize) + Sync), on_row: RowHook) -> (f64, Option<OutOfRange>) {
    let exp = backend.experiment();
    let fp = exp.det.fpixels();
    assert_eq!(float.len(), fp * exp.det.rows(), "the image buffer must hold every row");
    let mut rows = pass(backend, 0, exp.structure_factors.interpolate, float, progress, on_row);
    let first_bad = rows.iter().position(|r| r.1.is_some());
    if let Some(bad) = first_bad {
        let redo = pass(backend, bad + 1, false, &mut float[(bad + 1) * fp..], &|_| {}, on_row);
        rows[bad + 1..].copy_from_slice(&redo);
    }
    let omega_sum = rows.iter().map(|r| r.0).sum();
    (omega_sum, first_bad.and_then(|b| rows[b].1))
}

/// One pass over rows `first..`: the backend's rows, finished where it handed over.
fn pass(backend: &dyn RenderBackend, first: usize, interpolate: bool, out: &mut [f32], progress: &(dyn Fn(usize) + Sync), on_row: RowHook) -> Vec<(f64, Option<OutOfRange>)> {
    let exp = backend.experiment();
    let fp = exp.det.fpixels();
    if fp == 0 {
        return vec![(0.0, None); exp.det.rows().saturating_sub(first)];
    }
    let results = backend.render_rows(first, interpolate, out, progress, on_row);
    assert_eq!(results.len(), out.len() / fp, "backend {} returned a wrong number of rows", backend.name());
    out.par_chunks_mut(fp)
        .zip(results.into_par_iter())
        .enumerate()
        .map(|(i, (row, r))| {
            let s = first + i;
            let handed_over = matches!(r.end, RowEnd::HandOver { .. });
            let done = finish_row(exp, s, interpolate, r, row);
            if handed_over {
                on_row(s, row);
            }
            #[cfg(feature = "check-kernels")]
            if !backend.is_reference() {
                super::check::check_row(backend.name(), backend.precision(), exp, s, interpolate, row, done);
            }
            done
        })
        .collect()
}

/// A backend's row made whole: (omega sum, first out-of-range evaluation).
fn finish_row(exp: &Experiment, s: usize, interpolate: bool, r: RowResult, row: &mut [f32]) -> (f64, Option<OutOfRange>) {
    match r.end {
        RowEnd::Complete => (r.omega, None),
        RowEnd::SwitchedOff(oob) => (r.omega, Some(oob)),
        RowEnd::HandOver { from } => {
            assert!(interpolate, "a backend handed a row over with interpolation off");
            let (omega, oob) = render_row_from(exp, s, from, true, row);
            (r.omega + omega, oob)
        }
    }
}
