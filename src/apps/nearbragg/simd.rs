//! The atom loop (nearBragg.c lines 1070-1116) over [`LANES`] adjacent pixels at once, each lane one
//! pixel, beside the scalar loop of `render.rs` that mirrors the C (the reference, as rav1e keeps
//! plain Rust beside its assembly). The same lane code is compiled for AVX-512 and for AVX2+FMA and
//! picked at run time ([`crate::base::cpu::detected_level`], lowered by `NANOBRAGG_SIMD`); a CPU
//! without FMA (the `portable` level) keeps the scalar loop, since the vector sin/cos needs FMA.
//!
//! Every lane does the C's operations in the C's order (the two square roots, the phase
//! `twoPI*(s2a+a2p)/lambda + phase`, the amplitude `dwf*cos(phase)/s2a/a2p`): IEEE square roots
//! and divisions are exact, so a lane's path lengths and phases are the scalar loop's bit for bit.
//! Only sin, cos (phases of 10⁹–10¹² rad) and the B factor's exp come from
//! [`crate::base::lane_math`] instead of glibc, within a few 10⁻¹⁶; a pixel's sum runs over the
//! atoms in the C's order, so its value is independent of the lane width, the level and the threads.

use super::atoms::Atoms;
use super::config::{NearBraggConfig, TWO_PI};
use crate::base::cpu::SimdLevel;
use crate::base::lane_math::{exp_lanes, sincos_lanes};
use crate::base::vec3::V3;

/// What one pixel's loop leaves (the scalar loop's, or one lane's): the amplitudes and intensity, and its last sub-pixel's solid angle,
/// air path and position (the C's loop variables after the loop).
#[derive(Clone, Copy)]
pub struct PixelSum {
    pub fa: f64,
    pub fb: f64,
    pub i: f64,
    pub omega: f64,
    pub airpath: f64,
    pub pos: V3,
}

/// Pixels per group: one 512-bit register per quantity at AVX-512, two 256-bit ones at AVX2.
pub const LANES: usize = 8;

/// One group of pixels' positions (structure of arrays: x, y, z of every lane), one source point and
/// wavelength.
pub struct WaveLanes {
    pub src: V3,
    pub lambda: f64,
    pub pix: [[f64; LANES]; 3],
}

/// The level the fast path runs at for `level` (the CPU's, or lower), or `None` for the scalar loop:
/// the vector sin/cos needs FMA, which the portable level does not assume.
pub fn fast_level(level: SimdLevel) -> Option<SimdLevel> {
    let level = level.min(crate::base::cpu::detected_level());
    (level >= SimdLevel::Avx2).then_some(level)
}

/// Add every atom's wave to each lane's (fa, fb) at `level` (from [`fast_level`]).
pub fn atom_sum_lanes(level: SimdLevel, c: &NearBraggConfig, a: &Atoms, w: &WaveLanes, fa: &mut [f64; LANES], fb: &mut [f64; LANES]) {
    match level {
        // SAFETY: `fast_level` returns a level no higher than the CPU's (AVX-512 F/DQ/VL, or AVX2+FMA)
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => unsafe { sum_avx512(c, a, w, fa, fb) },
        // SAFETY: as above
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => unsafe { sum_avx2(c, a, w, fa, fb) },
        _ => unreachable!("nearbragg: no vector atom loop at level {}", level.name()),
    }
}

/// # Safety
/// The CPU must support AVX-512 F/DQ/VL and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
unsafe fn sum_avx512(c: &NearBraggConfig, a: &Atoms, w: &WaveLanes, fa: &mut [f64; LANES], fb: &mut [f64; LANES]) {
    atom_loop(c, a, w, fa, fb)
}

/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sum_avx2(c: &NearBraggConfig, a: &Atoms, w: &WaveLanes, fa: &mut [f64; LANES], fb: &mut [f64; LANES]) {
    atom_loop(c, a, w, fa, fb)
}

/// The lanes' atom loop; inlined into each level's function so that its lane loops are compiled
/// for that level.
#[inline(always)]
fn atom_loop(c: &NearBraggConfig, a: &Atoms, w: &WaveLanes, fa: &mut [f64; LANES], fb: &mut [f64; LANES]) {
    const L: usize = LANES;
    let (src, pix, lambda) = (w.src, &w.pix, w.lambda);
    let far = c.far_source;
    for i in 0..a.len() {
        let (ax, ay, az) = (a.x[i], a.y[i], a.z[i]);
        // the source's path is the same for every lane (line 1076)
        let s2a = if far { ax } else { ((src[0] - ax) * (src[0] - ax) + (src[1] - ay) * (src[1] - ay) + (src[2] - az) * (src[2] - az)).sqrt() };
        let (mut d, mut a2p, mut phase) = ([[0.0; L]; 3], [0.0; L], [0.0; L]);
        for l in 0..L {
            d[0][l] = pix[0][l] - ax;
            d[1][l] = pix[1][l] - ay;
            d[2][l] = pix[2][l] - az;
            a2p[l] = (d[0][l] * d[0][l] + d[1][l] * d[1][l] + d[2][l] * d[2][l]).sqrt();
            phase[l] = TWO_PI * (s2a + a2p[l]) / lambda + a.phase[i];
        }
        let (sin, cos) = sincos_lanes(&phase);
        let s2a = if far { 1.0 } else { s2a };
        // the C's dwf*cos(phase)/s2a/a2p as cos·(dwf/s2a/a2p), added with an FMA: one division per
        // lane instead of four (dwf/s2a is the same for every lane without a B factor)
        let mut w = [0.0; L];
        if a.b[i] != 0.0 {
            let mut dwf = [a.occ[i]; L];
            debye_waller(a.b[i], [ax, ay, az], src, far, s2a, lambda, &d, &a2p, &mut dwf);
            for l in 0..L {
                w[l] = dwf[l] / s2a / a2p[l];
            }
        } else {
            let ws = a.occ[i] / s2a;
            for l in 0..L {
                w[l] = ws / a2p[l];
            }
        }
        for l in 0..L {
            fa[l] = w[l].mul_add(cos[l], fa[l]);
            fb[l] = w[l].mul_add(sin[l], fb[l]);
        }
    }
}

/// Multiply each lane's `dwf` by the atom's Debye–Waller factor exp(−B·stol²) (lines 1090-1106): the
/// C's unit vectors and divisions, the exp from [`exp_lanes`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn debye_waller(b: f64, at: V3, src: V3, far: bool, s2a: f64, lambda: f64, d: &[[f64; LANES]; 3], a2p: &[f64; LANES], dwf: &mut [f64; LANES]) {
    let s0 = if far { [1.0, 0.0, 0.0] } else { [(at[0] - src[0]) / s2a, (at[1] - src[1]) / s2a, (at[2] - src[2]) / s2a] };
    let l10 = lambda * 1e10;
    let mut arg = [0.0; LANES];
    for l in 0..LANES {
        let sx = (d[0][l] / a2p[l] - s0[0]) / l10;
        let sy = (d[1][l] / a2p[l] - s0[1]) / l10;
        let sz = (d[2][l] / a2p[l] - s0[2]) / l10;
        let stol = (sx * sx + sy * sy + sz * sz).sqrt() / 2.0;
        arg[l] = -b * stol * stol;
    }
    let e = exp_lanes(&arg);
    for l in 0..LANES {
        dwf[l] *= e[l];
    }
}
