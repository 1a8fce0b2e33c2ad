//! The fast kernel: `L` adjacent pixels of a row as SIMD lanes, all following the same layer,
//! sub-pixel, source, phi and mosaic loop as the C, with masks for ROI, mask and `-dmin`.
//!
//! The per-pixel geometry (position, unit vector, solid angle, scattering vector) keeps the C's exact
//! operations and order: reciprocals or re-associated sums would move a few float pixels by one ulp,
//! and with them the noise image, which must stay bit-identical to the C's.
//! Where one divisor serves several quotients (R, λ) and the row function has FMA, each quotient is
//! still the division's, bit for bit: from one reciprocal and a corrected product
//! ([`super::lanes::div_by_reciprocal`]), which frees the divider that bounded the geometry.
//!
//! What differs from the reference (all within the parity tolerance, tested against it):
//! * sincg from the reduced argument δ = h − h0: for N ≤ 24 as the Chebyshev polynomial
//!   U_{N−1}(cos πδ), a product over its roots (`cheb_u`), else from a polynomial sin(πx)
//!   (`lanes::sincg_sqr`), instead of two libm sines of large arguments;
//! * the polarization factor from cos 2ψ = (E² − B²)/(E² + B²) instead of atan2 and cos, and without
//!   the C's in-place renormalisation of the diffracted vector (an ulp-level effect);
//! * with `-precision single`, the per-sample work (h, k, l, lattice factor, |F|², sum) in f32.
//!
//! Same meaning as the C: last-value omega/polarization/capture factors per pixel, `-dmin` skips per
//! pixel and source, the same per-pixel summation order, the same `-oversample_*` weighting.
//! Round, gauss and tophat spots use the reference kernel's scalar lattice factor lane by lane, the
//! curved detector its scalar rotations, interpolated F a per-lane tricubic lookup (with the reference
//! kernel finishing any row where interpolation leaves its range).
//!
//! At the AVX2 and AVX-512 levels the innermost loop (all orientations for one sub-pixel and source) of the
//! usual crystal (square spot, N ≤ 24, nearest-neighbour F) runs in `avx2`'s hand-written intrinsics
//! ([`super::hand::HandKernel`]) instead of the generic loop here.

use super::hand::*;
use super::lanes::{ceil, cheb_roots, cheb_two_x, div_by_reciprocal, div_operands_outside, sincg_sqr, Real, CHEB_MAX_N};
use crate::experiment::params::CrystalShape;
use crate::base::consts::R_E_SQR;
use crate::experiment::Experiment;
use crate::experiment::detector::Panel;
use crate::experiment::structure_factors::{interpolate_f, Lookup, NearestF};
use crate::base::vec3::{cross, rotate_axis, unitize, V3};
use super::backend::{RowEnd, RowResult};
use super::pixel_geometry::PixelGeometry;

/// Whether the fast kernel reproduces this experiment (otherwise the reference kernel runs).
pub fn supports(exp: &Experiment) -> bool {
    // N must be an integer for the reduced-argument lattice factor (it always is: atoi or ceil)
    [exp.crystal.na, exp.crystal.nb, exp.crystal.nc].iter().all(|n| n.fract() == 0.0 && *n < 1e6)
}

/// Per-experiment values the pixel loop reuses, converted once.
pub struct Prepared<'a, T: HandKernel> {
    /// (a, b, c) per phi step × mosaic domain, in T.
    orient: Vec<[[T; 3]; 3]>,
    /// Incident unit vectors (towards the sample) and wavelengths.
    sources: Vec<(V3, f64)>,
    /// Polarization geometry per source: unit B_in and E_in (for the algebraic Kahn factor).
    pol: Vec<(V3, V3)>,
    na: T,
    nb: T,
    nc: T,
    /// N per axis as integers when small enough for the Chebyshev form (0 = use the sine ratio).
    n_cheb: [usize; 3],
    /// The usual crystal, a square spot with the same small N (> 1) on every axis: that N, for the
    /// three recurrences run together; else 0.
    fused_n: usize,
    /// Per axis, the squared roots 4cos²(kπ/N) (k = 1..⌊(N−1)/2⌋) of U_{N−1}(y/2) as a polynomial in y².
    cheb_roots: [Vec<T>; 3],
    /// Square spots (the sincg lattice factor); otherwise the reference kernel's, lane by lane.
    square: bool,
    /// The nearest-neighbour F lookup (structure_factors' one implementation), |F| in T.
    f: NearestF<'a, T>,
    /// The same grid's bounds in T, for the lookup in 32-bit lanes (`None`: too large for it).
    grid32: Option<Grid32<T>>,
    /// What the hand-written AVX2 sample loop needs, where it applies and the level runs it (AVX2,
    /// AVX-512; `None`: the generic loop).
    pub(super) hand: Option<HandLattice<T>>,
    /// The dataset's per-pixel geometry computed once, where it is this experiment's
    /// ([`Prepared::reusing`]).
    geometry: Option<&'a PixelGeometry>,
}

/// The nearest-neighbour F grid's bounds as floats and strides as i32: the SIMD kernel tests the
/// bounds on the rounded Miller indices themselves (no 64-bit integer lanes, which AVX2 cannot
/// multiply) and gathers with 32-bit indices. Same value as [`NearestF`]'s lookup.
#[derive(Clone, Copy)]
pub(super) struct Grid32<T> {
    lo: [T; 3],
    hi: [T; 3],
    stride_h: i32,
    stride_k: i32,
}

impl<T: Real> Grid32<T> {
    pub(super) fn new(f: &NearestF<T>) -> Option<Self> {
        let (min, span, [sh, sk]) = f.layout();
        // every offset below 2^22 (Real::small_int) and every flat index below 2^31
        let fits = f.has_grid() && span.iter().all(|&s| (0..1 << 22).contains(&s)) && f.data().len() < i32::MAX as usize;
        fits.then(|| Grid32 {
            lo: min.map(|m| T::from_f64(m as f64)),
            hi: [0, 1, 2].map(|a| T::from_f64((min[a] + span[a]) as f64)),
            stride_h: sh as i32,
            stride_k: sk as i32,
        })
    }

    /// F at the integer-valued (h0, k0, l0); `default_f` outside the grid (or for NaN).
    #[cfg(test)]
    fn get(&self, data: &[T], default_f: T, h0: T, k0: T, l0: T) -> T {
        self.get_lanes::<1>(data, default_f, &[h0], &[k0], &[l0])[0]
    }

    /// The flat index of `C` lanes of integer-valued (h0, k0, l0) (0 outside the grid) and whether
    /// each is inside it. The flat index in f64 arithmetic (integers below 2^31: exact), which
    /// vectorizes where 32-bit integer multiplies across lanes do not.
    #[inline(always)]
    pub(super) fn index_lanes<const C: usize>(&self, h0: &[T; C], k0: &[T; C], l0: &[T; C]) -> ([i32; C], [bool; C]) {
        let mut flat = [0i32; C];
        let mut inside = [false; C];
        for l in 0..C {
            let (h, k, m) = (h0[l], k0[l], l0[l]);
            let ins = (h >= self.lo[0]) & (h <= self.hi[0]) & (k >= self.lo[1]) & (k <= self.hi[1]) & (m >= self.lo[2]) & (m <= self.hi[2]);
            let fl = (h - self.lo[0]).to_f64() * self.stride_h as f64 + (k - self.lo[1]).to_f64() * self.stride_k as f64 + (m - self.lo[2]).to_f64();
            flat[l] = (if ins { fl } else { 0.0 }).small_int();
            inside[l] = ins;
        }
        (flat, inside)
    }

    /// F for `C` lanes of integer-valued (h0, k0, l0); `default_f` outside the grid (or for NaN).
    /// Three passes over the lanes (flat index, load, select) so the index arithmetic and the
    /// selection vectorize; only the loads are one per lane.
    #[inline(always)]
    pub(super) fn get_lanes<const C: usize>(&self, data: &[T], default_f: T, h0: &[T; C], k0: &[T; C], l0: &[T; C]) -> [T; C] {
        let (flat, inside) = self.index_lanes(h0, k0, l0);
        let mut f = [T::ZERO; C];
        for l in 0..C {
            debug_assert!((flat[l] as u32 as usize) < data.len());
            // SAFETY: inside the grid the offsets are within the spans, so the flat index is below
            // the grid's length (NearestF's layout); outside it is 0 and the data is never empty.
            f[l] = unsafe { *data.get_unchecked(flat[l] as u32 as usize) };
        }
        for l in 0..C {
            f[l] = if inside[l] { f[l] } else { default_f };
        }
        f
    }
}

impl<'a, T: HandKernel> Prepared<'a, T> {
    /// `hand`: prepare for the hand-written AVX2 loop too (its padded F grid and replicated
    /// constants), for the level that runs it; other levels leave [`Prepared::hand`] empty.
    pub fn new(exp: &'a Experiment, hand: bool) -> Self {
        let f = NearestF::new(exp.structure_factors.fhkl.as_deref(), exp.structure_factors.default_f);
        let orient = exp
            .crystal.orientations
            .iter()
            .map(|o| [o.a.map(T::from_f64), o.b.map(T::from_f64), o.c.map(T::from_f64)])
            .collect();
        let sources: Vec<(V3, f64)> = exp.beam.sources.iter().map(|s| ([-s.dir[0], -s.dir[1], -s.dir[2]], s.lambda)).collect();
        let pol = sources.iter().map(|(inc, _)| polarization_axes(exp, inc)).collect();
        let n_cheb = [exp.crystal.na, exp.crystal.nb, exp.crystal.nc].map(|n| if n <= CHEB_MAX_N as f64 { n as usize } else { 0 });
        let square = exp.crystal.shape == CrystalShape::Square;
        let mut prep = Prepared {
            cheb_roots: n_cheb.map(|n| cheb_roots(n)),
            fused_n: if square && n_cheb[0] > 1 && n_cheb == [n_cheb[0]; 3] { n_cheb[0] } else { 0 },
            square,
            n_cheb,
            orient,
            sources,
            pol,
            na: T::from_f64(exp.crystal.na),
            nb: T::from_f64(exp.crystal.nb),
            nc: T::from_f64(exp.crystal.nc),
            grid32: Grid32::new(&f),
            hand: None,
            geometry: None,
            f,
        };
        if hand {
            prep.hand = HandLattice::new(exp.crystal.shape, [exp.crystal.na, exp.crystal.nb, exp.crystal.nc], &prep.orient, &prep.f).map(|mut h| {
                h.hoist = HandHoist::new(&exp.crystal.orientations, &prep.sources);
                h
            });
        }
        prep
    }

    /// Take each pixel's geometry from `geometry` instead of computing it, where it is this
    /// experiment's ([`PixelGeometry::fits`]; else it is ignored).
    pub fn reusing(mut self, geometry: Option<&'a PixelGeometry>, exp: &Experiment) -> Self {
        self.geometry = geometry.filter(|g| g.fits(exp));
        self
    }

    /// Whether the hand-written sample loop was prepared (it then runs wherever a row function
    /// with `HAND` meets its usual crystal).
    pub fn uses_hand_loop(&self) -> bool {
        self.hand.is_some()
    }
}

/// Render one row (`out` = fpixels values) in groups of `L` pixels. Where interpolation leaves its
/// safe range in a group, the row stops there with [`RowEnd::HandOver`] at the group's first pixel:
/// the shared driver finishes it with the reference kernel, which switches interpolation off at
/// exactly the C's evaluation. `HAND`: use the hand-written AVX2 sample loop where it applies (set
/// only by a row function compiled with AVX2 and FMA, see `simd.rs`); `W512`: that loop in 512-bit
/// registers where it has that form (set only by the AVX-512 row function; the same bits).
#[inline(always)]
pub fn render_row<T: HandKernel, const L: usize, const C: usize, const HAND: bool, const W512: bool>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
    // the row's first pixel in the image (and in a kept geometry)
    let row_at = s * exp.det.fpixels();
    let (panel, s) = exp.det.locate(s);
    let fpixels = panel.fpixels;
    let mut omega_row = 0.0;
    // pixel_active with the row's part hoisted: the ROI's columns and this row's mask
    let row_in_roi = panel.roi.slow.contains(&s);
    let cols = panel.roi.fast.clone();
    let mask_row = panel.mask.as_deref().map(|m| &m[s * fpixels..(s + 1) * fpixels]);
    // the hand loop's hoisted Miller indices (several sources): one sub-pixel's A at a time
    let hoist = if HAND && !interpolate { prep.hand.as_ref().and_then(|h| h.hoist.as_ref()) } else { None };
    let mut hoist_a = vec![T::ZERO; if hoist.is_some() { prep.orient.len() * 3 * L } else { 0 }];
    // the geometry computed once for the dataset, where the hoisted loop does not take its own
    let kept = prep.geometry.filter(|_| hoist.is_none());
    let mut f0 = 0;
    if let (true, Some(g)) = (HAND && W512 && !interpolate, kept) {
        let live = live_prefix(row_in_roi, &cols, mask_row, fpixels);
        if let Some(om) = kept_row::<T, W512>(exp, prep, g, row_at, live, omega_row, &mut out[..live]) {
            (omega_row, f0) = (om, live);
        }
    }
    while f0 < fpixels {
        // a group inside the ROI's columns (most of them) without building the lanes' booleans one
        // by one: LLVM made that a long chain of mask-register shuffles per group
        let inside = row_in_roi && f0 >= cols.start && f0 + L <= cols.end;
        let mut active = [inside; L];
        if !inside {
            for (l, a) in active.iter_mut().enumerate() {
                let f = f0 + l;
                *a = row_in_roi & (f >= cols.start) & (f < cols.end);
            }
        }
        if let Some(m) = mask_row {
            for (l, a) in active.iter_mut().enumerate() {
                *a = *a && m[f0 + l] != 0;
            }
        }
        let any = active.iter().any(|&a| a);
        let mut vals = [0.0f64; L];
        if any {
            let group = match kept {
                Some(g) => kept_group::<T, L, C, HAND, W512>(exp, prep, g, row_at + f0, L.min(fpixels - f0), &active, interpolate, &mut vals, omega_row),
                None => render_group::<T, L, C, HAND, W512>(exp, panel, prep, f0, s, &active, interpolate, hoist.map(|h| (h, &mut hoist_a[..])), &mut vals, omega_row),
            };
            match group {
                Some(om) => omega_row = om,
                None => return RowResult { omega: omega_row, end: RowEnd::HandOver { from: f0 } },
            }
        }
        let mut px = [0.0f32; L];
        for l in 0..L {
            px[l] = if active[l] { vals[l] as f32 } else { 0.0 };
        }
        let n = L.min(fpixels - f0);
        match out.get_mut(f0..f0 + L) {
            // a whole group: a copy of fixed size, in registers (of `n` values it was a call to memcpy)
            Some(whole) => whole.copy_from_slice(&px),
            None => out[f0..f0 + n].copy_from_slice(&px[..n]),
        }
        f0 += L;
    }
    RowResult { omega: omega_row, end: RowEnd::Complete }
}

/// How many of a row's first pixels are all live (in the ROI, not masked), rounded down to a
/// multiple of eight: what [`kept_row`] may render.
fn live_prefix(row_in_roi: bool, cols: &std::ops::Range<usize>, mask_row: Option<&[u16]>, fpixels: usize) -> usize {
    let end = if row_in_roi && cols.start == 0 { cols.end.min(fpixels) } else { 0 };
    let end = mask_row.map_or(end, |m| m[..end].iter().position(|&x| x == 0).unwrap_or(end));
    end / 8 * 8
}

/// The first `out.len()` pixels of a row (a multiple of eight, every one live) from image pixel
/// `at` of the kept geometry `g` in the hand loop's fused row function ([`HandKernel::kept_row`]),
/// where it has one for this crystal (one N on every axis, no F grid) and element type: the same
/// bits as [`kept_group`] group by group, the row's omega sum (`omega_row` before) returned.
/// `None` where it has none; the group loop then renders them.
#[inline(always)]
fn kept_row<T: HandKernel, const W512: bool>(exp: &Experiment, prep: &Prepared<T>, g: &PixelGeometry, at: usize, n: usize, omega_row: f64, out: &mut [f32]) -> Option<f64> {
    let hand = prep.hand.as_ref().filter(|_| n > 0 && !prep.f.has_grid())?;
    let row = KeptRow {
        scattering: [0, 1, 2].map(|a| &g.scattering[a][at..at + n]),
        polar: &g.polar[at..at + n],
        omega: &g.omega[at..at + n],
        out,
        i_bg: T::from_f64(exp.background.i_bg),
        default_f: prep.f.default_f(),
        // as pixel_values: r_e²·fluence, the steps divisor
        scale: R_E_SQR * exp.beam.fluence,
        steps: exp.sampling.steps as f64,
        omega_row,
    };
    // SAFETY: W512 is set only by the AVX-512 row function (simd.rs)
    unsafe { T::kept_row::<W512>(hand, row) }
}

#[inline(always)]
/// One group of pixels; the row's omega sum with theirs added (`omega_row` before), `None` when
/// interpolation went out of range (the caller falls back).
#[allow(clippy::too_many_arguments)]
fn render_group<T: HandKernel, const L: usize, const C: usize, const HAND: bool, const W512: bool>(
    exp: &Experiment,
    panel: &Panel,
    prep: &Prepared<T>,
    f0: usize,
    s: usize,
    active: &[bool; L],
    interpolate: bool,
    mut hoist: Option<(&HandHoist<T>, &mut [T])>,
    vals: &mut [f64; L],
    omega_row: f64,
) -> Option<f64> {
    let os = exp.sampling.oversample;
    let sub = exp.sampling.subpixel_size;
    let dmin = exp.structure_factors.dmin;

    let mut i_sum = [T::from_f64(exp.background.i_bg); L];
    let mut polar = [if exp.beam.nopolar { 1.0 } else { 0.0 }; L];
    let mut omega = [0.0f64; L];
    let mut omega_sum = [0.0f64; L];
    let mut capture = [0.0f64; L];

    // Structure of arrays: one array per vector component, so every per-lane loop vectorizes.
    let mut dx = [0.0f64; L];
    let mut dy = [0.0f64; L];
    let mut dz = [0.0f64; L];
    // R per lane
    let mut airpath = [0.0f64; L];
    // 1/R per lane, where the divisions by R run as fused operations (see `subpixel_directions`)
    let mut inv_r = [0.0f64; L];

    for thick_tic in 0..panel.sensor.thicksteps {
        let odet = thick_tic as f64 * panel.sensor.thickstep;
        capture = [if panel.sensor.thick == 0.0 { 1.0 } else { 0.0 }; L];
        for sub_s in 0..os {
            let sdet = sub * ((s * os + sub_s) as f64) + sub / 2.0;
            for sub_f in 0..os {
                let by_inv_r = subpixel_directions::<L, HAND>(exp, panel, f0, sdet, sub_f, odet, [&mut dx, &mut dy, &mut dz], &mut airpath, &mut inv_r);
                update_omega(exp, panel, &airpath, by_inv_r.then_some(&inv_r), active, &mut omega, &mut omega_sum);
                update_capture(exp, panel, thick_tic, [&dx, &dy, &dz], &mut capture);

                if let Some((h, a)) = hoist.as_mut() {
                    hoist_miller::<T, L>(&exp.crystal.orientations, &h.inc0, [&dx, &dy, &dz], a);
                }
                let weight_of = |polar: &[f64; L]| sample_weight::<T, L>(exp, &capture, polar, &omega);
                let update_polar = |polar: &mut [f64; L], si: usize, live: &[bool; L]| update_polarization(exp, &prep.sources[si].0, &prep.pol[si], [&dx, &dy, &dz], polar, live);
                // hoisted indices without -dmin or -oversample_polar: every source has the same
                // live lanes and weight, and the hand loop takes them all in one call
                if let (true, Some((_, a))) = (dmin <= 0.0 && !exp.sampling.oversample_polar, hoist.as_ref()) {
                    for si in 0..prep.sources.len() {
                        update_polar(&mut polar, si, active);
                    }
                    let idx = HandIndices::Hoisted { a, sources: 0..prep.sources.len() };
                    // SAFETY: a hoist exists only for HAND rows, which run with AVX2 and FMA, and W512 ones with AVX-512 too (simd.rs)
                    let done = prep.hand.as_ref().is_some_and(|h| unsafe { T::hand_chunk::<L, W512>(h, prep.f.default_f(), &idx, active, &weight_of(&polar), &mut i_sum) });
                    // (the hoist comes from prep.hand, whose loop takes C lanes)
                    debug_assert!(done);
                    continue;
                }
                for (si, &(inc, lambda)) in prep.sources.iter().enumerate() {
                    let mut live = *active;
                    // the scattering vector (in f64, the C's operations), where -dmin or the
                    // loop needs it (the hoisted hand loop does not)
                    let need_scat = hoist.is_none() || dmin > 0.0;
                    let scattering = || scattering_vectors::<L, HAND>([&dx, &dy, &dz], &inc, lambda);
                    let sv = if need_scat { scattering() } else { [[0.0; L]; 3] };
                    if dmin > 0.0 {
                        for l in 0..L {
                            let stol = 0.5 * (sv[0][l] * sv[0][l] + sv[1][l] * sv[1][l] + sv[2][l] * sv[2][l]).sqrt();
                            let cut = stol > 0.0 && dmin > 0.5 / stol;
                            live[l] = active[l] & !cut;
                        }
                        if !live.iter().any(|&x| x) {
                            continue;
                        }
                    }
                    update_polar(&mut polar, si, &live);
                    let weight = weight_of(&polar);
                    // accumulate straight into the pixel sums: the C's summation order
                    if let Some((_, a)) = hoist.as_ref() {
                        // SAFETY: a hoist exists only for HAND rows, which run with AVX2 and FMA, and W512 ones with AVX-512 too (simd.rs)
                        let idx = HandIndices::Hoisted { a, sources: si..si + 1 };
                        if prep.hand.as_ref().is_some_and(|h| unsafe { T::hand_chunk::<L, W512>(h, prep.f.default_f(), &idx, &live, &weight, &mut i_sum) }) {
                            continue;
                        }
                    }
                    // scattering vector per lane, one array per component
                    let sv = if need_scat { sv } else { scattering() };
                    let mut scat = [[T::ZERO; L]; 3];
                    for l in 0..L {
                        scat[0][l] = T::from_f64(sv[0][l]);
                        scat[1][l] = T::from_f64(sv[1][l]);
                        scat[2][l] = T::from_f64(sv[2][l]);
                    }
                    if !samples::<T, L, C, HAND, W512>(exp, prep, &scat, &live, &weight, interpolate, &mut i_sum) {
                        return None;
                    }
                }
            }
        }
    }
    *vals = pixel_values(exp, &i_sum, &capture, &polar, &omega);
    // onto the row's running sum pixel by pixel: the same bits for any group width
    let mut omega_total = omega_row;
    for om in omega_sum {
        omega_total += om;
    }
    Some(omega_total)
}

/// Every sample of one sub-pixel and source added to `i_sum` (interpolated F, the grid's or
/// default_F); false where interpolation left its range.
#[inline(always)]
fn samples<T: HandKernel, const L: usize, const C: usize, const HAND: bool, const W512: bool>(
    exp: &Experiment,
    prep: &Prepared<T>,
    scat: &[[T; L]; 3],
    live: &[bool; L],
    weight: &[T; L],
    interpolate: bool,
    i_sum: &mut [T; L],
) -> bool {
    if interpolate {
        interpolated_sample_loop::<T, L>(exp, prep, scat, live, weight, i_sum)
    } else if prep.f.has_grid() {
        sample_loop::<T, L, C, true, HAND, W512>(exp, prep, scat, live, weight, i_sum);
        true
    } else {
        sample_loop::<T, L, C, false, HAND, W512>(exp, prep, scat, live, weight, i_sum);
        true
    }
}

/// [`render_group`] with the pixels' geometry read from `g` (from image pixel `at`, `n` pixels
/// before the row ends): where it applies ([`super::pixel_geometry::applies`]: one source, one
/// sub-pixel, no sensor layers, no `-dmin`, no `-oversample_*` weight) the same samples, factors and
/// omega sum, bit for bit.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn kept_group<T: HandKernel, const L: usize, const C: usize, const HAND: bool, const W512: bool>(
    exp: &Experiment,
    prep: &Prepared<T>,
    g: &PixelGeometry,
    at: usize,
    n: usize,
    active: &[bool; L],
    interpolate: bool,
    vals: &mut [f64; L],
    omega_row: f64,
) -> Option<f64> {
    let mut i_sum = [T::from_f64(exp.background.i_bg); L];
    let mut polar = [if exp.beam.nopolar { 1.0 } else { 0.0 }; L];
    let mut omega = [0.0f64; L];
    let mut scat = [[T::ZERO; L]; 3];
    kept_lanes::<T, L>(g, at, n, active, &mut scat, &mut polar, &mut omega);
    if !samples::<T, L, C, HAND, W512>(exp, prep, &scat, active, &[T::ONE; L], interpolate, &mut i_sum) {
        return None;
    }
    *vals = pixel_values(exp, &i_sum, &[1.0; L], &polar, &omega);
    // the omega sum as render_group adds it: lane by lane, 0 for an inactive lane
    let mut omega_total = omega_row;
    for l in 0..L {
        omega_total += if active[l] { 0.0 + omega[l] } else { 0.0 };
    }
    Some(omega_total)
}

/// The scattering vectors (in T), polarization factors (active lanes only) and solid angles of `n`
/// pixels of `g` from image pixel `at` into the group's lanes (the lanes past `n` left as they
/// are, as [`render_group`] leaves them). A whole group is read as fixed-size slices, so that each
/// component is a few vector loads with one bounds check (a loop over the lanes with a check per
/// read and a scalar load and store per lane and component was most of the light series' render).
/// Out-parameters: returned by value, the arrays were copied once more through `memcpy`.
#[inline(always)]
fn kept_lanes<T: HandKernel, const L: usize>(g: &PixelGeometry, at: usize, n: usize, active: &[bool; L], scat: &mut [[T; L]; 3], polar: &mut [f64; L], omega: &mut [f64; L]) {
    let whole = |v: &[f64]| -> Option<[f64; L]> { v.get(at..at + L).map(|s| s.try_into().unwrap()) };
    if let (true, Some(sx), Some(sy), Some(sz), Some(p), Some(o)) =
        (n == L, whole(&g.scattering[0]), whole(&g.scattering[1]), whole(&g.scattering[2]), whole(&g.polar), whole(&g.omega))
    {
        for (ax, sv) in [sx, sy, sz].iter().enumerate() {
            for l in 0..L {
                scat[ax][l] = T::from_f64(sv[l]);
            }
        }
        for l in 0..L {
            // (render_group leaves an inactive lane's factor unset; its value is never used)
            polar[l] = if active[l] { p[l] } else { polar[l] };
        }
        *omega = o;
    } else {
        for l in 0..n {
            for (s, from) in scat.iter_mut().zip(&g.scattering) {
                s[l] = T::from_f64(from[at + l]);
            }
            polar[l] = if active[l] { g.polar[at + l] } else { polar[l] };
            omega[l] = g.omega[at + l];
        }
    }
}

impl PixelGeometry {
    /// The geometry of `exp`'s pixels, where the SIMD kernel renders it and a kept geometry applies
    /// ([`super::pixel_geometry::applies`]) and fits the memory allowed; `None` otherwise (the kernel
    /// then computes it in place, as always).
    pub fn build(exp: &Experiment) -> Option<PixelGeometry> {
        use rayon::prelude::*;
        let mut g = PixelGeometry::allocate(exp).filter(|_| supports(exp))?;
        let fp = exp.det.fpixels();
        let PixelGeometry { scattering: [sx, sy, sz], polar, omega, .. } = &mut g;
        sx.par_chunks_mut(fp)
            .zip(sy.par_chunks_mut(fp))
            .zip(sz.par_chunks_mut(fp))
            .zip(polar.par_chunks_mut(fp))
            .zip(omega.par_chunks_mut(fp))
            .enumerate()
            .for_each(|(s, ((((sx, sy), sz), polar), omega))| geometry_row_widest(exp, s, [sx, sy, sz], polar, omega));
        Some(g)
    }
}

/// [`geometry_row`] compiled for the widest vectors the CPU has, as the row functions that read the
/// geometry are (at the baseline it took 2.0 % of a 20-frame 512² series' CPU, 1.2 % so).
fn geometry_row_widest(exp: &Experiment, s: usize, scattering: [&mut [f64]; 3], polar_out: &mut [f64], omega_out: &mut [f64]) {
    crate::base::cpu::widest_call!(geometry_row(exp: &Experiment, s: usize, scattering: [&mut [f64]; 3], polar_out: &mut [f64], omega_out: &mut [f64]) -> ())
}

/// One image row of a [`PixelGeometry`] (image row `s`): each pixel's scattering vector,
/// polarization factor and solid angle as [`render_group`] computes them for its one source and
/// sub-pixel, in the same operations (the plain divisions; the fused ones give the same bits).
#[inline(always)]
fn geometry_row(exp: &Experiment, s: usize, scattering: [&mut [f64]; 3], polar_out: &mut [f64], omega_out: &mut [f64]) {
    const L: usize = 16;
    let (panel, s) = exp.det.locate(s);
    let sub = exp.sampling.subpixel_size;
    let source = &exp.beam.sources[0];
    let (inc, lambda) = ([-source.dir[0], -source.dir[1], -source.dir[2]], source.lambda);
    let pol = polarization_axes(exp, &inc);
    // render_group's first layer and sub-pixel: odet = 0·thickstep, sdet at the row's centre
    let odet = 0_i32 as f64 * panel.sensor.thickstep;
    let sdet = sub * (s as f64) + sub / 2.0;
    let all = [true; L];
    for f0 in (0..panel.fpixels).step_by(L) {
        let [mut dx, mut dy, mut dz, mut airpath, mut inv_r] = [[0.0f64; L]; 5];
        let by_inv_r = subpixel_directions::<L, false>(exp, panel, f0, sdet, 0, odet, [&mut dx, &mut dy, &mut dz], &mut airpath, &mut inv_r);
        let (mut omega, mut omega_sum) = ([0.0f64; L], [0.0f64; L]);
        update_omega(exp, panel, &airpath, by_inv_r.then_some(&inv_r), &all, &mut omega, &mut omega_sum);
        let sv = scattering_vectors::<L, false>([&dx, &dy, &dz], &inc, lambda);
        let mut polar = [if exp.beam.nopolar { 1.0 } else { 0.0 }; L];
        update_polarization(exp, &inc, &pol, [&dx, &dy, &dz], &mut polar, &all);
        for l in 0..L.min(panel.fpixels - f0) {
            scattering[0][f0 + l] = sv[0][l];
            scattering[1][f0 + l] = sv[1][l];
            scattering[2][f0 + l] = sv[2][l];
            polar_out[f0 + l] = polar[l];
            omega_out[f0 + l] = omega[l];
        }
    }
}

/// Unit B_in and E_in of the incident direction `inc` (towards the sample) for the algebraic Kahn
/// factor ([`update_polarization`]).
fn polarization_axes(exp: &Experiment, inc: &V3) -> (V3, V3) {
    let inc = unitize(inc).0;
    let axis = unitize(&exp.beam.polar_vector).0;
    let b_in = unitize(&cross(&axis, &inc)).0;
    let e_in = unitize(&cross(&inc, &b_in)).0;
    (b_in, e_in)
}

/// The unit vector from the sample to sub-pixel (`sub_f`, the row's sub-pixel at `sdet`) of each
/// lane's pixel at depth `odet`, and its distance R (`airpath`): the flat detector's positions in
/// the C's order of operations, swung onto the sphere for `-curved_det` (nanoBragg.c L2578-L2600).
/// With `FMA` (a row function compiled with it) and every lane's operands in range, the three
/// divisions by R as [`div_by_reciprocal`] from one 1/R, left in `inv_r` for the solid angle:
/// returns whether it did (the same bits either way).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn subpixel_directions<const L: usize, const FMA: bool>(
    exp: &Experiment,
    panel: &Panel,
    f0: usize,
    sdet: f64,
    sub_f: usize,
    odet: f64,
    d: [&mut [f64; L]; 3],
    airpath: &mut [f64; L],
    inv_r: &mut [f64; L],
) -> bool {
    let (os, sub) = (exp.sampling.oversample, exp.sampling.subpixel_size);
    let (fv, sv, ov, pix0) = (panel.fdet_vector, panel.sdet_vector, panel.odet_vector, panel.pix0_vector);
    let mut fdet = [0.0f64; L];
    for (l, fd) in fdet.iter_mut().enumerate() {
        *fd = sub * (((f0 + l) * os + sub_f) as f64) + sub / 2.0;
    }
    // flat detector positions (a loop that vectorizes), in the C's order of operations
    let mut px = [[0.0f64; L]; 3];
    for l in 0..L {
        px[0][l] = fdet[l] * fv[0] + sdet * sv[0] + odet * ov[0] + pix0[0];
        px[1][l] = fdet[l] * fv[1] + sdet * sv[1] + odet * ov[1] + pix0[1];
        px[2][l] = fdet[l] * fv[2] + sdet * sv[2] + odet * ov[2] + pix0[2];
    }
    if panel.curved {
        // every pixel at `distance`: the flat lab y, z taken as angles (the C's rule)
        let dist = panel.distance;
        let b = exp.beam.beam_vector;
        for l in 0..L {
            let swung = rotate_axis(&rotate_axis(&[dist * b[0], dist * b[1], dist * b[2]], &sv, px[1][l] / dist), &fv, px[2][l] / dist);
            [px[0][l], px[1][l], px[2][l]] = swung;
        }
    }
    let [dx, dy, dz] = d;
    // R, then the unit vector (nanoBragg.c's `airpath = unitize(pixel_pos,diffracted)`)
    let mut outside = u64::from(!FMA);
    for l in 0..L {
        let (x, y, z) = (px[0][l], px[1][l], px[2][l]);
        let r = (x * x + y * y + z * z).sqrt();
        airpath[l] = r;
        outside |= div_operands_outside(x, r) | div_operands_outside(y, r) | div_operands_outside(z, r);
    }
    let in_range = outside == 0;
    if in_range {
        for l in 0..L {
            let r = airpath[l];
            let y = 1.0 / r;
            inv_r[l] = y;
            dx[l] = div_by_reciprocal(px[0][l], r, y);
            dy[l] = div_by_reciprocal(px[1][l], r, y);
            dz[l] = div_by_reciprocal(px[2][l], r, y);
        }
    } else {
        for l in 0..L {
            let r = airpath[l];
            dx[l] = px[0][l] / r;
            dy[l] = px[1][l] / r;
            dz[l] = px[2][l] / r;
        }
    }
    in_range
}

/// The scattering vectors (d − i)/λ of one source for every lane (nanoBragg.c's
/// `scattering[1] = (diffracted[1]-incident[1])/lambda`, the C's operations), the divisions as [`div_by_reciprocal`] with `FMA` where every lane's operands are
/// in range (the same bits).
#[inline(always)]
fn scattering_vectors<const L: usize, const FMA: bool>(d: [&[f64; L]; 3], inc: &V3, lambda: f64) -> [[f64; L]; 3] {
    let [dx, dy, dz] = d;
    // lanes innermost, one statement per component (a loop over the axes outside the lanes'
    // vectorized across the axes instead, with gathers and scatters)
    let mut delta = [[0.0f64; L]; 3];
    let mut outside = u64::from(!FMA);
    for l in 0..L {
        let (x, y, z) = (dx[l] - inc[0], dy[l] - inc[1], dz[l] - inc[2]);
        [delta[0][l], delta[1][l], delta[2][l]] = [x, y, z];
        outside |= div_operands_outside(x, lambda) | div_operands_outside(y, lambda) | div_operands_outside(z, lambda);
    }
    let mut sv = [[0.0f64; L]; 3];
    if outside == 0 {
        let inv_lambda = 1.0 / lambda;
        for l in 0..L {
            sv[0][l] = div_by_reciprocal(delta[0][l], lambda, inv_lambda);
            sv[1][l] = div_by_reciprocal(delta[1][l], lambda, inv_lambda);
            sv[2][l] = div_by_reciprocal(delta[2][l], lambda, inv_lambda);
        }
    } else {
        for l in 0..L {
            sv[0][l] = delta[0][l] / lambda;
            sv[1][l] = delta[1][l] / lambda;
            sv[2][l] = delta[2][l] / lambda;
        }
    }
    sv
}

/// The pixel's solid angle (the C's last-value rule: set once, or at every sub-pixel with
/// `-oversample_omega`) and the omega sum over the active lanes. With `inv_r` (every lane's 1/R,
/// from [`subpixel_directions`]) and the panel's constants in range, the C's chain of divisions
/// (nanoBragg.c's `pixel_size*pixel_size/airpath/airpath*close_distance/airpath`, or
/// `1.0/airpath/airpath` for `-point_pixel`) as [`div_by_reciprocal`]s: the same bits.
#[inline(always)]
fn update_omega<const L: usize>(exp: &Experiment, panel: &Panel, airpath: &[f64; L], inv_r: Option<&[f64; L]>, active: &[bool; L], omega: &mut [f64; L], omega_sum: &mut [f64; L]) {
    // scalars out of the lane loops (read inside them, LLVM gathered them lane by lane)
    let (point, every) = (panel.point_pixel, exp.sampling.oversample_omega);
    let (area, close) = (panel.pixel_size * panel.pixel_size, panel.close_distance);
    let mut new = [0.0f64; L];
    // with R in [2⁻¹⁰⁰, 2¹⁰¹) (div_operands_outside), area in [2⁻³⁰⁰, 2³⁰⁰] and the distance in
    // [2⁻¹⁰⁰, 2¹⁰¹) every numerator of the chain stays within [2⁻⁶⁰⁰, 2⁶⁰⁰]
    let area_in_range = (area >= 2f64.powi(-300)) & (area <= 2f64.powi(300));
    let constants_in_range = point || (area_in_range && div_operands_outside(1.0, close) == 0);
    match inv_r {
        Some(inv) if constants_in_range => {
            for l in 0..L {
                let (r, y) = (airpath[l], inv[l]);
                new[l] = if point { div_by_reciprocal(y, r, y) } else { div_by_reciprocal(div_by_reciprocal(div_by_reciprocal(area, r, y), r, y) * close, r, y) };
            }
        }
        _ => {
            for l in 0..L {
                let r = airpath[l];
                new[l] = if point { 1.0 / r / r } else { area / r / r * close / r };
            }
        }
    }
    for l in 0..L {
        omega[l] = if omega[l] == 0.0 || every { new[l] } else { omega[l] };
        omega_sum[l] += if active[l] { omega[l] } else { 0.0 };
    }
}

/// The fraction of photons layer `thick_tic` of the sensor captures along each lane's direction (the
/// C's last-value rule, or every sub-pixel with `-oversample_thick`).
#[inline(always)]
fn update_capture<const L: usize>(exp: &Experiment, panel: &Panel, thick_tic: i32, d: [&[f64; L]; 3], capture: &mut [f64; L]) {
    // (with -oversample_thick and no sensor the C's recomputed capture fraction is 0)
    if panel.sensor.thick != 0.0 || exp.sampling.oversample_thick {
        let ov = panel.odet_vector;
        let [dx, dy, dz] = d;
        for l in 0..L {
            if capture[l] == 0.0 || exp.sampling.oversample_thick {
                let parallax = dx[l] * ov[0] + dy[l] * ov[1] + dz[l] * ov[2];
                capture[l] = (-(thick_tic as f64) * panel.sensor.thickstep * panel.sensor.mu / parallax).exp()
                    - (-((thick_tic + 1) as f64) * panel.sensor.thickstep * panel.sensor.mu / parallax).exp();
            }
        }
    }
}

/// The weight of each sample: the factors the `-oversample_*` flags apply per sub-pixel (else 1).
#[inline(always)]
fn sample_weight<T: HandKernel, const L: usize>(exp: &Experiment, capture: &[f64; L], polar: &[f64; L], omega: &[f64; L]) -> [T; L] {
    let mut weight = [T::ONE; L];
    if exp.sampling.oversample_thick || exp.sampling.oversample_polar || exp.sampling.oversample_omega {
        for l in 0..L {
            let mut w = 1.0;
            if exp.sampling.oversample_thick {
                w *= capture[l];
            }
            if exp.sampling.oversample_polar {
                w *= polar[l];
            }
            if exp.sampling.oversample_omega {
                w *= omega[l];
            }
            weight[l] = T::from_f64(w);
        }
    }
    weight
}

/// The Kahn polarization factor of the source along `inc` (B_in, E_in: `pol`) where it is still
/// unset (the C's last-value rule) or oversampled; once every live lane has its value (after the
/// first sample) nothing to do.
#[inline(always)]
fn update_polarization<const L: usize>(exp: &Experiment, inc: &V3, pol: &(V3, V3), d: [&[f64; L]; 3], polar: &mut [f64; L], live: &[bool; L]) {
    let kahn = exp.beam.polarization;
    let [dx, dy, dz] = d;
    let (b_in, e_in) = *pol;
    let mut new = [0.0f64; L];
    let needed = exp.sampling.oversample_polar || (0..L).any(|l| live[l] & (polar[l] == 0.0));
    if needed && kahn != 0.0 {
        for l in 0..L {
            let cos2theta = inc[0] * dx[l] + inc[1] * dy[l] + inc[2] * dz[l];
            let c2 = cos2theta * cos2theta;
            let e = dx[l] * e_in[0] + dy[l] * e_in[1] + dz[l] * e_in[2];
            let b = dx[l] * b_in[0] + dy[l] * b_in[1] + dz[l] * b_in[2];
            let n = e * e + b * b;
            // cos 2psi with psi = -atan2(b, e); atan2(0, 0) = 0 gives 1
            let cos_2psi = if n > 0.0 { (e * e - b * b) / n } else { 1.0 };
            new[l] = 0.5 * (1.0 + c2 - kahn * cos_2psi * (1.0 - c2));
        }
    } else if needed {
        for l in 0..L {
            let cos2theta = inc[0] * dx[l] + inc[1] * dy[l] + inc[2] * dz[l];
            let c2 = cos2theta * cos2theta;
            new[l] = 0.5 * (1.0 + c2);
        }
    }
    for l in 0..L {
        let update = live[l] & ((polar[l] == 0.0) | exp.sampling.oversample_polar);
        polar[l] = if update { new[l] } else { polar[l] };
    }
}

/// The pixels' photons: the C's test = r_e²·fluence·I/steps·capture·polar·omega, lane by lane, with
/// the factors the `-oversample_*` flags already applied per sample left out (x/1 is x: skipped).
#[inline(always)]
fn pixel_values<T: HandKernel, const L: usize>(exp: &Experiment, i_sum: &[T; L], capture: &[f64; L], polar: &[f64; L], omega: &[f64; L]) -> [f64; L] {
    let scale = R_E_SQR * exp.beam.fluence;
    let steps = exp.sampling.steps as f64;
    let mut test = [0.0f64; L];
    for l in 0..L {
        test[l] = scale * i_sum[l].to_f64();
    }
    if steps != 1.0 {
        for t in test.iter_mut() {
            *t /= steps;
        }
    }
    if !exp.sampling.oversample_thick {
        for l in 0..L {
            test[l] *= capture[l];
        }
    }
    if !exp.sampling.oversample_polar {
        for l in 0..L {
            test[l] *= polar[l];
        }
    }
    if !exp.sampling.oversample_omega {
        for l in 0..L {
            test[l] *= omega[l];
        }
    }
    test
}

/// All phi steps and mosaic domains for one sub-pixel and source: the hot loop.
/// Adds F_cell²·F_latt²·weight to `acc` sample by sample, in the C's order (phi outer, domain inner).
///
/// The group's `L` lanes are taken `C` at a time (about two registers per quantity): a chunk's
/// scattering vectors and sums stay in registers across every orientation, and a chunk with no live
/// lane is skipped. Each lane still adds its samples in the C's order, so chunking changes no bit.
#[inline(always)]
fn sample_loop<T: HandKernel, const L: usize, const C: usize, const GRID: bool, const HAND: bool, const W512: bool>(
    exp: &Experiment,
    prep: &Prepared<T>,
    scat: &[[T; L]; 3],
    live: &[bool; L],
    weight: &[T; L],
    acc: &mut [T; L],
) {
    // the hand-written loop takes the whole group (it skips registers with no live lane itself)
    // SAFETY: HAND is set only where the row function runs with AVX2 and FMA, W512 only where it
    // runs with AVX-512 F/DQ/VL too (simd.rs)
    if HAND && prep.hand.as_ref().is_some_and(|h| unsafe { T::hand_chunk::<L, W512>(h, prep.f.default_f(), &HandIndices::Scattering(scat), live, weight, acc) }) {
        return;
    }
    let mut c0 = 0;
    while c0 < L {
        let lv: [bool; C] = std::array::from_fn(|i| live[c0 + i]);
        if lv.iter().any(|&x| x) {
            let sc: [[T; C]; 3] = std::array::from_fn(|ax| std::array::from_fn(|i| scat[ax][c0 + i]));
            let w: [T; C] = std::array::from_fn(|i| weight[c0 + i]);
            let mut a: [T; C] = std::array::from_fn(|i| acc[c0 + i]);
            sample_chunk::<T, C, GRID>(exp, prep, &sc, &lv, &w, &mut a);
            acc[c0..c0 + C].copy_from_slice(&a);
        }
        c0 += C;
    }
}

/// [`sample_loop`] for one chunk of `C` lanes.
#[inline(always)]
fn sample_chunk<T: HandKernel, const C: usize, const GRID: bool>(
    exp: &Experiment,
    prep: &Prepared<T>,
    scat: &[[T; C]; 3],
    live: &[bool; C],
    weight: &[T; C],
    acc: &mut [T; C],
) {
    let (na, nb, nc) = (prep.na, prep.nb, prep.nc);
    let square = prep.square;
    let fused_n = prep.fused_n;
    let f_view = prep.f.view();
    let one = T::ONE;
    let half = T::HALF;
    for o in &prep.orient {
        let [a, b, c] = *o;
        // Miller indices and their nearest integers, one array per axis (every loop runs over lanes)
        let mut idx = [[T::ZERO; C]; 3];
        let mut idx0 = [[T::ZERO; C]; 3];
        for (axis, v) in [a, b, c].iter().enumerate() {
            for l in 0..C {
                let x = v[0] * scat[0][l] + v[1] * scat[1][l] + v[2] * scat[2][l];
                idx[axis][l] = x;
                idx0[axis][l] = ceil(x - half);
            }
        }
        // F_latt = Π sincg over the axes with N > 1; squared, so its sign never matters
        let mut f_latt = [one; C];
        let mut f_latt_sqr = [one; C];
        if fused_n > 0 {
            // U_{N-1}(cos πδ) on the three axes at once (cheb_u's chains side by side); the product
            // in the order of the per-axis path below (1·U_h·U_k·U_l)
            let mut two_x = [[T::ZERO; C]; 3];
            for axis in 0..3 {
                for l in 0..C {
                    two_x[axis][l] = cheb_two_x(idx[axis][l], idx0[axis][l]);
                }
            }
            let u = cheb_u(two_x, &prep.cheb_roots[0], fused_n % 2 == 0);
            for l in 0..C {
                f_latt[l] = u[0][l] * u[1][l] * u[2][l];
            }
        } else {
            if !square {
                // round, gauss and tophat spots: the reference kernel's scalar lattice factor, per lane
                for l in 0..C {
                    let (h, k, m) = (idx[0][l].to_f64(), idx[1][l].to_f64(), idx[2][l].to_f64());
                    let (h0, k0, m0) = (idx0[0][l].magic_int() as i32, idx0[1][l].magic_int() as i32, idx0[2][l].magic_int() as i32);
                    f_latt[l] = T::from_f64(super::reference::lattice_factor(exp, h, k, m, h0, k0, m0));
                }
            }
            for (axis, n) in [na, nb, nc].into_iter().enumerate() {
                if !square || n <= one {
                    continue;
                }
                let n_int = prep.n_cheb[axis];
                if n_int > 0 {
                    // U_{N-1}(cos πδ) by its recurrence, lanes innermost so the loop vectorizes
                    let mut two_x = [T::ZERO; C];
                    for l in 0..C {
                        two_x[l] = cheb_two_x(idx[axis][l], idx0[axis][l]);
                    }
                    let [u] = cheb_u([two_x], &prep.cheb_roots[axis], n_int % 2 == 0);
                    for l in 0..C {
                        f_latt[l] = f_latt[l] * u[l];
                    }
                } else {
                    for l in 0..C {
                        f_latt_sqr[l] = f_latt_sqr[l] * sincg_sqr(idx[axis][l], idx0[axis][l], n);
                    }
                }
            }
        }
        let mut contrib = [T::ZERO; C];
        for l in 0..C {
            contrib[l] = f_latt[l] * f_latt[l] * f_latt_sqr[l];
        }
        if GRID {
            match &prep.grid32 {
                Some(g) => {
                    let (data, default_f) = (prep.f.data(), prep.f.default_f());
                    let f = g.get_lanes(data, default_f, &idx0[0], &idx0[1], &idx0[2]);
                    for l in 0..C {
                        contrib[l] = f[l] * f[l] * contrib[l];
                    }
                }
                None => {
                    for l in 0..C {
                        let f = f_view.get(idx0[0][l].magic_int(), idx0[1][l].magic_int(), idx0[2][l].magic_int());
                        contrib[l] = f * f * contrib[l];
                    }
                }
            }
        } else {
            let f2 = prep.f.default_f() * prep.f.default_f();
            for c in contrib.iter_mut() {
                *c = f2 * *c;
            }
        }
        for l in 0..C {
            let v = contrib[l] * weight[l];
            acc[l] = acc[l] + if live[l] { v } else { T::ZERO };
        }
    }
}

/// U_{n−1}(x) from y = 2x as the product over its roots (see [`super::lanes::cheb_roots`]), for `A` arrays of lanes
/// at once. A product of independent factors: short dependency chains, half the operations of the
/// three-term recurrence, and relative accuracy everywhere (no cancellation between large terms).
#[inline(always)]
fn cheb_u<T: HandKernel, const C: usize, const A: usize>(two_x: [[T; C]; A], roots: &[T], even: bool) -> [[T; C]; A] {
    let mut y2 = [[T::ZERO; C]; A];
    let mut u = [[T::ONE; C]; A];
    for a in 0..A {
        for l in 0..C {
            y2[a][l] = two_x[a][l] * two_x[a][l];
            if even {
                u[a][l] = two_x[a][l];
            }
        }
    }
    for &r in roots {
        for a in 0..A {
            for l in 0..C {
                u[a][l] = u[a][l] * (y2[a][l] - r);
            }
        }
    }
    u
}

/// The sample loop with tricubic structure factors (small crystals): the reference kernel's lattice
/// factor, F from the 4×4×4 Lagrange interpolation in f64 per lane. Returns false as soon as
/// a lane that the C would evaluate (live, F_latt ≠ 0 or water) leaves the interpolation range.
#[inline(always)]
fn interpolated_sample_loop<T: HandKernel, const L: usize>(
    exp: &Experiment,
    prep: &Prepared<T>,
    scat: &[[T; L]; 3],
    live: &[bool; L],
    weight: &[T; L],
    acc: &mut [T; L],
) -> bool {
    let Some(grid) = exp.structure_factors.fhkl.as_deref() else { return true };
    let water = exp.background.water_size != 0.0;
    for o in &prep.orient {
        let [a, b, c] = *o;
        for l in 0..L {
            if !live[l] {
                continue;
            }
            let h = a[0] * scat[0][l] + a[1] * scat[1][l] + a[2] * scat[2][l];
            let k = b[0] * scat[0][l] + b[1] * scat[1][l] + b[2] * scat[2][l];
            let m = c[0] * scat[0][l] + c[1] * scat[1][l] + c[2] * scat[2][l];
            let (hf, kf, mf) = (h.to_f64(), k.to_f64(), m.to_f64());
            let (h0, k0, m0) = ((hf - 0.5).ceil() as i32, (kf - 0.5).ceil() as i32, (mf - 0.5).ceil() as i32);
            let f_latt = super::reference::lattice_factor(exp, hf, kf, mf, h0, k0, m0);
            if f_latt == 0.0 && !water {
                continue;
            }
            let f_cell = match interpolate_f(grid, hf, kf, mf) {
                Lookup::Value(v) => v,
                Lookup::OutOfRange => return false,
            };
            let v = T::from_f64(f_cell * f_cell * f_latt * f_latt) * weight[l];
            acc[l] = acc[l] + v;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::structure_factors::HklGrid;

    /// U_{N−1}(cos πδ) as the product over its roots is the C's sincg(πh, N) up to sign.
    #[test]
    fn chebyshev_product_is_the_c_sincg() {
        for n in 1..=CHEB_MAX_N {
            for (even, roots) in [(n % 2 == 0, cheb_roots::<f64>(n))] {
                let mut h = -7.31;
                while h < 7.3 {
                    let h0 = (h - 0.5f64).ceil();
                    let two_x = [[cheb_two_x(h, h0)]];
                    let u = cheb_u(two_x, &roots, even)[0][0];
                    let want = crate::experiment::physics::sincg(std::f64::consts::PI * h, n as f64).abs();
                    assert!((u.abs() - want).abs() <= 1e-12 * (n * n) as f64, "N={n} h={h}: {u} vs {want}");
                    h += 0.0137;
                }
            }
        }
    }

    /// The 32-bit lookup gives NearestF's value (the C's nearest-neighbour rule) inside the grid,
    /// on its edges, outside it on every side, and for NaN indices.
    #[test]
    fn grid32_lookup_matches_nearest_f() {
        let entries: Vec<(i32, i32, i32, f64)> =
            (-3..=2).flat_map(|h| (-1..=4).flat_map(move |k| (0..=3).map(move |l| (h, k, l, (100 + 7 * h + 3 * k + l) as f64)))).collect();
        let grid = HklGrid::from_entries(&entries, 0.0).unwrap();
        let nearest = NearestF::<f64>::new(Some(&grid), 42.0);
        let g32 = Grid32::new(&nearest).expect("a small grid fits 32-bit indices");
        let view = nearest.view();
        for h in -6..=5 {
            for k in -4..=7 {
                for l in -3..=6 {
                    let want = view.get(h, k, l);
                    assert_eq!(g32.get(nearest.data(), 42.0, h as f64, k as f64, l as f64), want, "{h} {k} {l}");
                    let near32 = NearestF::<f32>::new(Some(&grid), 42.0);
                    let g = Grid32::new(&near32).unwrap();
                    assert_eq!(g.get(near32.data(), 42.0, h as f32, k as f32, l as f32), near32.view().get(h, k, l));
                }
            }
        }
        assert_eq!(g32.get(nearest.data(), 42.0, f64::NAN, 0.0, 0.0), 42.0);
        assert_eq!(g32.get(nearest.data(), 42.0, 1e12, 0.0, 0.0), 42.0);
        assert!(Grid32::new(&NearestF::<f64>::new(None, 42.0)).is_none());
    }
}
