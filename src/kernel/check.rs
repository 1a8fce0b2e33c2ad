//! `check-kernels` (a debug feature, as rav1e's `check_asm`): every row a backend other than the
//! reference renders is rendered again with the reference kernel and compared; a disagreement
//! panics with the backend, row and pixel. Slow (the reference runs too): for tests and debugging.

use super::reference::{render_row_from, OutOfRange};
use crate::experiment::params::Precision;
use crate::experiment::Experiment;

/// Largest |backend − reference| allowed, relative to the row's peak |reference| (the backend
/// contract's accuracy, per row: double precision keeps the C's geometry and differs only by the
/// lattice-factor and polarization forms; single precision does the per-sample work in f32).
fn tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::Double => 1e-6,
        Precision::Single => 1e-2,
    }
}

/// Compare one finished row (`row`, with its omega sum and first out-of-range evaluation) against
/// the reference kernel's rendering of it; panic on disagreement.
pub fn check_row(name: &str, precision: Precision, exp: &Experiment, s: usize, interpolate: bool, row: &[f32], done: (f64, Option<OutOfRange>)) {
    let mut want = vec![0.0f32; row.len()];
    let (omega, oob) = render_row_from(exp, s, 0, interpolate, &mut want);
    let peak = want.iter().fold(0.0f64, |m, &v| m.max((v as f64).abs()));
    let tol = tolerance(precision) * peak;
    for (f, (&got, &w)) in row.iter().zip(&want).enumerate() {
        let bad_zero = (got == 0.0) != (w == 0.0);
        let diff = (got as f64 - w as f64).abs();
        if bad_zero || !(diff <= tol) && !(got.is_nan() && w.is_nan()) && got != w {
            panic!(
                "check-kernels: backend {name} disagrees with the reference at pixel ({f}, {s}): {got:e} vs {w:e} \
                 (|diff| {diff:.3e}, allowed {tol:.3e}, interpolation {})",
                if interpolate { "on" } else { "off" }
            );
        }
    }
    let omega_rel = if omega != 0.0 { ((done.0 - omega) / omega).abs() } else { done.0.abs() };
    assert!(omega_rel <= 1e-9, "check-kernels: backend {name} row {s}: omega sum {} vs reference {omega}", done.0);
    // which rows leave the interpolation range decides the whole image; in single precision the
    // backend's Miller indices are f32, so only double precision must agree exactly
    if precision == Precision::Double {
        assert_eq!(
            done.1.is_some(),
            oob.is_some(),
            "check-kernels: backend {name} row {s}: interpolation out of range {:?} vs reference {oob:?}",
            done.1
        );
    }
}
