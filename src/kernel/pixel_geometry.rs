//! The per-pixel geometry of a dataset's frames, computed once: each pixel's scattering vector,
//! polarization factor and solid angle depend on the detector, the beam and the sampling, not on the
//! crystal's orientation, yet nanoBragg.c recomputes them for every pixel of every image
//! (L2578-L2700: position, `airpath`, `omega_pixel`, `polar`, `scattering`). A `series` run that
//! turns only the crystal reads them back frame after frame (`fast::render_row`), the same bits as
//! computed in place.
//!
//! Kept only for the light, common sampling (one source, one sub-pixel, no sensor layers, no
//! `-dmin`, no `-oversample_*` factor): there the geometry is most of the SIMD kernel's work per pixel,
//! and one value per pixel is all it needs. Built by the kernel that reads it (`fast`).

use crate::base::huge_pages::HugeF64s;
use crate::experiment::Experiment;

/// Bytes kept per pixel: the scattering vector, the polarization factor, the solid angle (f64 each).
pub const BYTES_PER_PIXEL: u64 = 5 * 8;

/// At most this much memory (and an eighth of what the process may still allocate): 40 bytes a
/// pixel, so a detector above about 1.68 M pixels (1296² and up) renders without it.
const MAX_BYTES: u64 = 64 << 20;

/// One value per image pixel (row-major over every panel's rows, as the float image), each array on
/// huge pages where the kernel gives them ([`HugeF64s`]: read whole every frame).
pub struct PixelGeometry {
    key: Vec<u64>,
    /// (d − i)/λ, the C's `scattering` (metres⁻¹), one array per component: a group of pixels
    /// reads each component with vector loads (as `[f64; 3]` per pixel it was a scalar load and
    /// store per lane and component, most of the light series' render, `fast::kept_group`).
    pub(super) scattering: [HugeF64s; 3],
    /// The Kahn factor (1 with `-nopolar`), the C's `polar`.
    pub(super) polar: HugeF64s,
    /// The pixel's solid angle, the C's `omega_pixel`.
    pub(super) omega: HugeF64s,
}

impl PixelGeometry {
    /// Room for `exp`'s geometry where it applies ([`applies`]) and fits the memory allowed, to be
    /// filled row by row (`fast`'s `PixelGeometry::build`); `None` otherwise.
    pub(super) fn allocate(exp: &Experiment) -> Option<PixelGeometry> {
        let pixels = exp.det.fpixels() * exp.det.rows();
        let allowed = MAX_BYTES.min(crate::base::memory::memory_budget() / 8);
        if !applies(exp) || pixels == 0 || pixels as u64 * BYTES_PER_PIXEL > allowed {
            return None;
        }
        Some(PixelGeometry { key: key(exp), scattering: std::array::from_fn(|_| HugeF64s::zeroed(pixels)), polar: HugeF64s::zeroed(pixels), omega: HugeF64s::zeroed(pixels) })
    }

    /// Whether this is `exp`'s geometry (the same detector, beam and sampling, bit for bit).
    pub fn fits(&self, exp: &Experiment) -> bool {
        applies(exp) && self.omega.len() == exp.det.fpixels() * exp.det.rows() && self.key == key(exp)
    }
}

/// The bytes [`PixelGeometry::allocate`] takes for `exp` at most (0 where the geometry does not
/// apply or exceeds [`MAX_BYTES`]), for a run that counts it in its memory check.
pub fn bytes(exp: &Experiment) -> u64 {
    let b = (exp.det.fpixels() * exp.det.rows()) as u64 * BYTES_PER_PIXEL;
    if applies(exp) && b <= MAX_BYTES { b } else { 0 }
}

/// Whether the SIMD kernel can take `exp`'s per-pixel geometry from a [`PixelGeometry`]: one source
/// and one sub-pixel, no sensor layers (capture fraction 1), no `-dmin` (which skips per pixel and
/// source) and no `-oversample_*` weight.
pub fn applies(exp: &Experiment) -> bool {
    let s = &exp.sampling;
    s.oversample == 1
        && !(s.oversample_thick || s.oversample_polar || s.oversample_omega)
        && exp.beam.sources.len() == 1
        && exp.structure_factors.dmin <= 0.0
        && exp.det.panels.iter().all(|p| p.sensor.thick == 0.0 && p.sensor.thicksteps == 1)
}

/// Every value the geometry is computed from (`fast`'s `geometry_row`), as bits.
fn key(exp: &Experiment) -> Vec<u64> {
    let mut k = Vec::with_capacity(32 + 24 * exp.det.panels.len());
    let f = |k: &mut Vec<u64>, xs: &[f64]| k.extend(xs.iter().map(|x| x.to_bits()));
    let s = &exp.sampling;
    k.extend([s.oversample as u64, s.oversample_thick as u64, s.oversample_polar as u64, s.oversample_omega as u64]);
    f(&mut k, &[s.subpixel_size, exp.structure_factors.dmin]);
    let b = &exp.beam;
    k.extend([b.sources.len() as u64, b.nopolar as u64]);
    for src in &b.sources {
        f(&mut k, &src.dir);
        f(&mut k, &[src.lambda]);
    }
    f(&mut k, &[b.polarization]);
    f(&mut k, &b.beam_vector);
    f(&mut k, &b.polar_vector);
    k.extend([exp.det.panels.len() as u64, exp.det.fpixels() as u64, exp.det.rows() as u64]);
    for p in &exp.det.panels {
        k.extend([p.fpixels as u64, p.spixels as u64, p.curved as u64, p.point_pixel as u64, p.sensor.thicksteps as u64]);
        f(&mut k, &[p.pixel_size, p.distance, p.close_distance, p.sensor.thick, p.sensor.mu, p.sensor.thickstep]);
        for v in [p.fdet_vector, p.sdet_vector, p.odet_vector, p.pix0_vector] {
            f(&mut k, &v);
        }
    }
    k
}
