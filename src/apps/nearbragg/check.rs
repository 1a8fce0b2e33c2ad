//! `check-kernels` for nearbragg (as rav1e's `check_asm`, and `kernel::check` for the crystal
//! kernel): every pixel group the SIMD atom loop sums is summed again by the scalar loop that mirrors
//! nearBragg.c, and a disagreement panics with the pixel. Slow (the scalar loop runs too): for tests
//! and debugging. The unit tests compare whole images with the same rule.

use super::simd::PixelSum;

/// Largest relative difference allowed between a SIMD and a scalar sum. The lanes' path lengths,
/// phases and divisions are the C's to the bit; sin, cos, exp (and the amplitude's order of
/// multiplication) differ by a few 10⁻¹⁶ per atom, so a pixel's intensity differs by about
/// 10⁻¹⁵ of the brightest pixels' around it.
pub const MAX_REL: f64 = 1e-12;

/// The intensity a loop sum stands for: the squared sums so far plus the open amplitude (which
/// `-coherent` squares at the end).
pub fn intensity(p: &PixelSum) -> f64 {
    p.i + p.fa * p.fa + p.fb * p.fb
}

/// Compare a SIMD sum `got` with the scalar `want`: the sub-pixel geometry exactly, the intensity
/// and amplitudes within [`MAX_REL`] of the pixel's intensity, or of 10⁻³ of `peak` for a darker
/// pixel (the "pixels above 1e-3 of the maximum"). `Err` says what differs.
pub fn compare(got: &PixelSum, want: &PixelSum, peak: f64) -> Result<(), String> {
    if got.pos != want.pos || got.omega != want.omega || got.airpath != want.airpath {
        return Err(format!("geometry differs: {:?} {} {} vs {:?} {} {}", got.pos, got.omega, got.airpath, want.pos, want.omega, want.airpath));
    }
    let scale = intensity(want).max(1e-3 * peak);
    let (di, ia) = ((intensity(got) - intensity(want)).abs(), scale.sqrt());
    let (da, db) = ((got.fa - want.fa).abs(), (got.fb - want.fb).abs());
    if !(di <= MAX_REL * scale && da <= MAX_REL * ia && db <= MAX_REL * ia) {
        return Err(format!(
            "I {:e} vs {:e} (rel {:.2e}), Fa {:e} vs {:e}, Fb {:e} vs {:e}",
            intensity(got),
            intensity(want),
            di / scale,
            got.fa,
            want.fa,
            got.fb,
            want.fb
        ));
    }
    Ok(())
}
