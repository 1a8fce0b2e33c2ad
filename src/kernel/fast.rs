//! The fast kernel: `L` adjacent pixels of a row as SIMD lanes, all following the same layer,
//! sub-pixel, source, phi and mosaic loop as the C, with masks for ROI, mask and `-dmin`.
//!
//! The per-pixel geometry (position, unit vector, solid angle, scattering vector) keeps the C's exact
//! operations and order: reciprocals or re-associated sums would move a few float pixels by one ulp,
//! and with them the noise image, which must stay bit-identical to the C's.
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
//! usual crystal (square spot, N ≤ 24, nearest-neighbour F) runs in [`super::avx2`]'s
//! hand-written intrinsics instead of the generic loop here.

use super::lanes::{ceil, cheb_two_x, sincg_sqr, Real, CHEB_MAX_N};
use crate::experiment::params::CrystalShape;
use crate::base::consts::R_E_SQR;
use crate::experiment::Experiment;
use crate::experiment::structure_factors::{interpolate_f, Lookup, NearestF};
use crate::base::vec3::{cross, rotate_axis, unitize, V3};
use super::backend::{RowEnd, RowResult};

/// Whether the fast kernel reproduces this experiment (otherwise the reference kernel runs).
pub fn supports(exp: &Experiment) -> bool {
    // N must be an integer for the reduced-argument lattice factor (it always is: atoi or ceil)
    [exp.na, exp.nb, exp.nc].iter().all(|n| n.fract() == 0.0 && *n < 1e6)
}

/// Per-experiment values the pixel loop reuses, converted once.
pub struct Prepared<'a, T: Real> {
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
}

/// The lattice factor and F grid as the hand-written sample loop ([`super::avx2`]) takes them: a
/// square spot with N ≤ [`CHEB_MAX_N`] on every axis, F nearest-neighbour from a grid whose offsets
/// and flat index fit i32 (or `default_F` alone). The grid is a padded copy (see [`HandGrid`]):
/// (n+7)³ values for a grid of (n+1)³ ([`HAND_GRID_BORDER`]).
pub struct HandLattice<T> {
    /// (a, b, c) per orientation, every component replicated across a register's lanes: the loop
    /// reads them as memory operands, where broadcasting them would take floating-point issue slots.
    pub(super) orient: Vec<[[Wide<T>; 3]; 3]>,
    /// ½, 1, 2, π/2 and the sine polynomial's coefficients, replicated as `orient`.
    pub(super) consts: HandConsts<T>,
    pub(super) axes: [HandAxis<T>; 3],
    /// The same N on every axis (the usual crystal): the three products run in one loop.
    pub(super) uniform: bool,
    pub(super) grid: Option<HandGrid<T>>,
    /// The Miller indices' dot products hoisted out of the source loop (several sources only).
    pub(super) hoist: Option<HandHoist<T>>,
}

/// Several sources: h = a·(d − i_s)/λ_s = A/λ_s + K_s with A = a·(d − i₀) computed once per
/// sub-pixel and orientation ([`hoist_miller`]) and K_s = −a·(i_s − i₀)/λ_s once per run, one
/// fused multiply-add per axis and sample instead of a dot product. i₀ is the first source's
/// direction: with divergence and dispersion i_s − i₀ is small, and A (like h) has the size of
/// the scattering vector, so nothing cancels.
pub struct HandHoist<T> {
    pub(super) inc0: V3,
    /// 1/λ per source, replicated.
    pub(super) inv_lambda: Vec<Wide<T>>,
    /// K per source × orientation (source outer) × axis, replicated.
    pub(super) k: Vec<[Wide<T>; 3]>,
    /// Sources sharing their wavelength (divergence): 2cos(πh) by angle addition.
    pub(super) groups: Option<HandGroups<T>>,
}

/// Sources in groups of one wavelength λ_g (divergence steps at each dispersion step), where
/// h = B + K with B = A/λ_g shared by the group: 2cos(πh) = 2cos(πB)·cos(πK) − 2sin(πB)·sin(πK),
/// the two polynomials once per group, sub-pixel and orientation ([`TWO_COS_PI_Q64`],
/// [`TWO_SIN_PI_P64`]) and per sample a multiply and a fused multiply-add per axis instead of the
/// polynomial's eight dependent operations. B's integer part (the nearest integer n) changes both
/// factors' sign together, (−1)ⁿ, which U_{N−1}² does not see (U_{N−1}(−x) = ±U_{N−1}(x)): the
/// polynomials take B − n, in ±½. With |K| < 1 ([`HAND_GROUPS_MAX_K`]) the F index's clamp is
/// also once per group ([`HAND_GRID_BORDER`]). Only where each wavelength has two sources or more
/// (at most [`HAND_GROUPS_MAX`] wavelengths).
pub struct HandGroups<T> {
    /// 1/λ per group, replicated.
    pub(super) inv_lambda: Vec<Wide<T>>,
    /// The group of each source.
    pub(super) of_source: Vec<usize>,
    /// (cos πK, −sin πK) per source × orientation (source outer) × axis, from K in f64, replicated.
    pub(super) cos_sin: Vec<[[Wide<T>; 2]; 3]>,
}

/// Most wavelength groups [`HandGroups`] takes (the kernel keeps one group's values per
/// orientation on the stack); more, or fewer than two sources per group, keep h = A/λ + K.
pub const HAND_GROUPS_MAX: usize = 16;

/// Largest sources × orientations for [`HandHoist`]'s table (3 MiB of f64); more runs the dot products.
pub const HOIST_MAX_PAIRS: usize = 1 << 14;

impl<T: Real> HandHoist<T> {
    pub(super) fn new(orient: &[crate::experiment::Orientation], sources: &[(V3, f64)]) -> Option<Self> {
        if sources.len() < 2 || sources.len() * orient.len() > HOIST_MAX_PAIRS {
            return None;
        }
        let inc0 = sources[0].0;
        // K in f64, source outer
        let mut k64 = Vec::with_capacity(sources.len() * orient.len());
        for (inc, lambda) in sources {
            let di = [inc[0] - inc0[0], inc[1] - inc0[1], inc[2] - inc0[2]];
            for o in orient {
                k64.push([o.a, o.b, o.c].map(|v| -(v[0] * di[0] + v[1] * di[1] + v[2] * di[2]) / lambda));
            }
        }
        let k = k64.iter().map(|k| k.map(|x| Wide::new(T::from_f64(x)))).collect();
        let inv_lambda = sources.iter().map(|&(_, l)| Wide::new(T::from_f64(1.0 / l))).collect();
        Some(HandHoist { inc0, inv_lambda, k, groups: HandGroups::new(sources, &k64) })
    }
}

impl<T: Real> HandGroups<T> {
    /// `k64`: [`HandHoist`]'s K in f64, per source × orientation (source outer).
    fn new(sources: &[(V3, f64)], k64: &[[f64; 3]]) -> Option<Self> {
        let mut lambdas: Vec<f64> = Vec::new();
        let of_source = sources
            .iter()
            .map(|&(_, l)| {
                lambdas.iter().position(|&x| x.to_bits() == l.to_bits()).unwrap_or_else(|| {
                    lambdas.push(l);
                    lambdas.len() - 1
                })
            })
            .collect();
        if lambdas.len() > HAND_GROUPS_MAX || sources.len() < 2 * lambdas.len() {
            return None;
        }
        // (NaN fails too)
        if !k64.iter().flatten().all(|k| k.abs() <= HAND_GROUPS_MAX_K) {
            return None;
        }
        let cos_sin = k64
            .iter()
            .map(|k| {
                k.map(|k| {
                    let (s, c) = (std::f64::consts::PI * k).sin_cos();
                    [Wide::new(T::from_f64(c)), Wide::new(T::from_f64(-s))]
                })
            })
            .collect();
        Some(HandGroups { inv_lambda: lambdas.iter().map(|l| Wide::new(T::from_f64(1.0 / l))).collect(), of_source, cos_sin })
    }
}

/// A = a·(d − i₀) for every orientation, axis and lane ([`HandHoist`]), laid out as `out[(o·3 +
/// axis)·L + lane]`; in f64, rounded once to T.
#[inline(always)]
pub(super) fn hoist_miller<T: Real, const L: usize>(orient: &[crate::experiment::Orientation], inc0: &V3, d: [&[f64; L]; 3], out: &mut [T]) {
    let mut rel = [[0.0f64; L]; 3];
    for axis in 0..3 {
        for l in 0..L {
            rel[axis][l] = d[axis][l] - inc0[axis];
        }
    }
    for (o, chunk) in orient.iter().zip(out.chunks_exact_mut(3 * L)) {
        for (v, dst) in [o.a, o.b, o.c].iter().zip(chunk.chunks_exact_mut(L)) {
            let mut x = [T::ZERO; L];
            for l in 0..L {
                x[l] = T::from_f64(v[0] * rel[0][l] + v[1] * rel[1][l] + v[2] * rel[2][l]);
            }
            dst.copy_from_slice(&x);
        }
    }
}

/// Where the hand-written loop takes its Miller indices from.
pub enum HandIndices<'a, T, const C: usize> {
    /// h = a·s from the lanes' scattering vectors, for every orientation.
    Scattering(&'a [[T; C]; 3]),
    /// h = A/λ + K from [`hoist_miller`]'s A (for `C` lanes) and these sources' [`HandHoist`]
    /// values (one sub-pixel's sources in one call where their lanes and weights are the same).
    Hoisted { a: &'a [T], sources: std::ops::Range<usize> },
}

/// One axis's U_{N−1} as y^(N+1 mod 2)·Π(y² − r_k) ([`cheb_roots`]); nothing to multiply for N ≤ 1.
/// The roots in pairs, (z − r)(z − r') = z(z − (r + r')) + r·r' with z = y²: a subtraction and a
/// fused multiply-add instead of two subtractions and a multiplication (well conditioned: the
/// value is the product's up to a few ulps of max(z², r·r')).
pub struct HandAxis<T> {
    pub(super) even: bool,
    /// (r + r', r·r') per pair, in f64 then rounded.
    pub(super) pairs: Vec<[Wide<T>; 2]>,
    /// The last root of an odd count.
    pub(super) single: Option<Wide<T>>,
}

impl<T: Real> HandAxis<T> {
    fn new(n: usize) -> Self {
        let roots = cheb_roots::<f64>(n);
        let pairs = roots.chunks_exact(2).map(|p| [Wide::new(T::from_f64(p[0] + p[1])), Wide::new(T::from_f64(p[0] * p[1]))]).collect();
        let single = (roots.len() % 2 == 1).then(|| Wide::new(T::from_f64(roots[roots.len() - 1])));
        HandAxis { even: n % 2 == 0, pairs, single }
    }
}

/// One value in every lane of a register (eight lanes: enough for f32 on AVX2; f64 reads four).
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub struct Wide<T>(pub [T; 8]);

impl<T: Real> Wide<T> {
    fn new(x: T) -> Self {
        Wide([x; 8])
    }
}

/// Constants of the hand-written loop, replicated ([`Wide`]).
pub struct HandConsts<T> {
    pub(super) half: Wide<T>,
    pub(super) one: Wide<T>,
    pub(super) two: Wide<T>,
    /// (2cos(πδ) − 2)/δ² as a polynomial in δ² ([`TWO_COS_PI_Q64`], [`TWO_COS_PI_Q32`], zeros after).
    pub(super) two_cos_pi_q: [Wide<T>; 7],
    /// 2sin(πδ)/δ as a polynomial in δ² ([`TWO_SIN_PI_P64`], [`TWO_SIN_PI_P32`], zeros after).
    pub(super) two_sin_pi_p: [Wide<T>; 8],
}

/// (2cos(π√t) − 2)/t ≈ Q(t) on t ∈ [0, ¼] (|δ| ≤ ½ with t = δ²), constant term first: the minimax
/// polynomial for the absolute error of 2 + t·Q(t), |error| ≤ 4.2e-15 (about ten ulps of 2),
/// from `scripts/fit_two_cos_pi.py` (Remez exchange, 50 digits). Carried into U_{N−1} that is a
/// relative error of (N²−1)/6·4.2e-15 at most (7e-14 for N = 10), the size of the C's own rounding
/// of sin(Nπh) for h ~ 20 (|Nπh|·ε), where its sincg divides two sines of large arguments.
pub const TWO_COS_PI_Q64: [f64; 7] =
    [-9.869604401088, 8.117424252694738, -2.6705255329109425, 0.4706611820531913, -0.0516130926520544, 0.003855817217645295, -0.00020091567100402033];

/// As [`TWO_COS_PI_Q64`] for f32, degree 3: |error| ≤ 1.05e-7, below half an f32 ulp of 2.
pub const TWO_COS_PI_Q32: [f64; 4] = [-9.869591036271823, 8.116902683253906, -2.664187732195756, 0.44016131081862897];

/// 2sin(π√t)/√t ≈ P(t) on t ∈ [0, ¼], constant term first: the minimax polynomial for the
/// absolute error of 2sin(πδ) = δ·P(δ²) on |δ| ≤ ½, |error| ≤ 1.8e-16 (degree 7; degree 6 would
/// be 7.9e-14), from `scripts/fit_two_cos_pi.py`.
pub const TWO_SIN_PI_P64: [f64; 8] = [
    6.28318530717958,
    -10.33542556009877,
    5.1003280796891435,
    -1.1985290569917113,
    0.16429175119292957,
    -0.014740694938119208,
    0.0009318841377836308,
    -4.217137955338026e-05,
];

/// As [`TWO_SIN_PI_P64`] for f32, degree 4: |error| ≤ 6.7e-9.
pub const TWO_SIN_PI_P32: [f64; 5] = [6.283185160089356, -10.335413757849544, 5.100062754526019, -1.1960903480907112, 0.15444025766553876];

/// Width of [`HandGrid`]'s `default_F` border: one cell for an index clamped to the padded range;
/// three so that [`HandGroups`] can clamp B − ½ once per group to one cell inside the padded
/// range, where ceil(B − ½ + K) with |K| < 1 stays within it, and read without a clamp per sample.
pub const HAND_GRID_BORDER: i64 = 3;

/// Largest |K| (cycles) with which [`HandGroups`] applies: below one, as its clamp needs, with margin.
const HAND_GROUPS_MAX_K: f64 = 0.75;

/// The F grid with a border of `default_F` [`HAND_GRID_BORDER`] cells wide on every side, so that a
/// Miller index clamped to the border reads default_F: the lookup needs no inside test and no mask.
pub struct HandGrid<T> {
    /// The padded grid's lower corner (the grid's minus [`HAND_GRID_BORDER`]) and its last offset
    /// (span + 2·[`HAND_GRID_BORDER`]).
    pub(super) lo: [i32; 3],
    pub(super) last: [i32; 3],
    pub(super) stride_h: i32,
    pub(super) stride_k: i32,
    pub(super) data: Vec<T>,
    /// For f64, the same index arithmetic in floating point (every partial sum an exact integer):
    /// clamps and two fused multiply-adds instead of three two-uop conversions, clamps and 32-bit
    /// multiplies. Not for f32, where one conversion covers eight lanes and the integer form
    /// measured faster.
    pub(super) float_index: Option<FloatIndex<T>>,
    /// Where [`HandGroups`] clamps B − ½ (lower, upper): one cell inside the padded range on every
    /// axis; `None` (a clamp per sample) where T cannot hold the indices to half a cell.
    pub(super) group_clamp: Option<([Wide<T>; 3], [Wide<T>; 3])>,
}

/// [`HandGrid`]'s padded bounds, strides and offset in T, replicated: offset = h·stride_h +
/// k·stride_k + l + base with h, k, l clamped to [lo, hi].
pub struct FloatIndex<T> {
    pub(super) lo: [Wide<T>; 3],
    pub(super) hi: [Wide<T>; 3],
    pub(super) stride_h: Wide<T>,
    pub(super) stride_k: Wide<T>,
    pub(super) base: Wide<T>,
}

impl<T: Real> FloatIndex<T> {
    fn new(lo: [i32; 3], last: [i32; 3], stride_h: i32, stride_k: i32) -> Option<Self> {
        if std::mem::size_of::<T>() != 8 {
            return None;
        }
        let (lo, last, sh, sk) = (lo.map(i64::from), last.map(i64::from), stride_h as i64, stride_k as i64);
        let base = -(lo[0] * sh + lo[1] * sk + lo[2]);
        // the partial sums l + base and k·stride_k + l + base over the clamped range, exact in T
        let exact = 1i64 << 53;
        let extremes = [lo[2] + base, lo[2] + last[2] + base, lo[1] * sk + lo[2] + base, (lo[1] + last[1]) * sk + lo[2] + last[2] + base, lo[1] * sk + lo[2] + last[2] + base, (lo[1] + last[1]) * sk + lo[2] + base];
        let fits = extremes.iter().chain(&[base, sh * (lo[0] + last[0]), sh * lo[0]]).all(|x| x.abs() < exact);
        let w = |x: i64| Wide::new(T::from_f64(x as f64));
        fits.then(|| FloatIndex {
            lo: [0, 1, 2].map(|a| w(lo[a])),
            hi: [0, 1, 2].map(|a| w(lo[a] + last[a])),
            stride_h: w(sh),
            stride_k: w(sk),
            base: w(base),
        })
    }
}

impl<T: Real> HandLattice<T> {
    /// `None` where the hand-written loop does not apply (another spot shape, a large or
    /// non-integer N, a grid too large for i32 indices).
    pub(super) fn new(shape: CrystalShape, ns: [f64; 3], orient: &[[[T; 3]; 3]], f: &NearestF<T>) -> Option<Self> {
        if shape != CrystalShape::Square || !ns.iter().all(|&n| n <= CHEB_MAX_N as f64 && n.fract() == 0.0) {
            return None;
        }
        let grid = if f.has_grid() {
            let (min, span, _) = f.layout();
            let pad = HAND_GRID_BORDER;
            let n = span.map(|s| s + 1 + 2 * pad);
            let fits = |x: i64| (-(1i64 << 30)..1 << 30).contains(&x);
            if !(min.iter().chain(&n).all(|&x| fits(x)) && n[0] * n[1] * n[2] < i32::MAX as i64) {
                return None;
            }
            let view = f.view();
            let mut data = Vec::with_capacity((n[0] * n[1] * n[2]) as usize);
            for h in 0..n[0] {
                for k in 0..n[1] {
                    for l in 0..n[2] {
                        data.push(view.get(min[0] + h - pad, min[1] + k - pad, min[2] + l - pad));
                    }
                }
            }
            let (lo, last) = (min.map(|x| (x - pad) as i32), span.map(|s| (s + 2 * pad) as i32));
            let (stride_h, stride_k) = ((n[1] * n[2]) as i32, n[2] as i32);
            // one cell inside the padded range, where B − ½ + K rounds in T to within half a cell
            // (f32: indices below 2²¹)
            let exact = if std::mem::size_of::<T>() == 8 { 1i64 << 50 } else { 1i64 << 21 };
            let group_clamp = (0..3).all(|a| i64::from(lo[a]).abs() < exact && (i64::from(lo[a]) + i64::from(last[a])).abs() < exact).then(|| {
                let lo_in = [0, 1, 2].map(|a| Wide::new(T::from_f64(f64::from(lo[a]) + 1.0)));
                let hi_in = [0, 1, 2].map(|a| Wide::new(T::from_f64(f64::from(lo[a] + last[a]) - 1.0)));
                (lo_in, hi_in)
            });
            Some(HandGrid { lo, last, stride_h, stride_k, data, float_index: FloatIndex::new(lo, last, stride_h, stride_k), group_clamp })
        } else {
            None
        };
        // N ≤ 1 (no lattice factor on that axis) as U_0 = 1: no roots, odd
        let ns = ns.map(|n| n.max(1.0) as usize);
        let axes = ns.map(HandAxis::new);
        let uniform = ns.iter().all(|&n| n == ns[0]);
        let orient = orient.iter().map(|o| o.map(|v| v.map(Wide::new))).collect();
        let consts = HandConsts {
            half: Wide::new(T::HALF),
            one: Wide::new(T::ONE),
            two: Wide::new(T::from_f64(2.0)),
            two_cos_pi_q: replicated_coefficients(&TWO_COS_PI_Q64, &TWO_COS_PI_Q32),
            two_sin_pi_p: replicated_coefficients(&TWO_SIN_PI_P64, &TWO_SIN_PI_P32),
        };
        Some(HandLattice { orient, consts, axes, uniform, grid, hoist: None })
    }
}

/// A polynomial's coefficients for T (`f64s` or, for f32, `f32s`), replicated, zeros after the last.
fn replicated_coefficients<T: Real, const M: usize>(f64s: &[f64], f32s: &[f64]) -> [Wide<T>; M] {
    let c = if std::mem::size_of::<T>() == 8 { f64s } else { f32s };
    std::array::from_fn(|k| Wide::new(T::from_f64(c.get(k).copied().unwrap_or(0.0))))
}

/// The nearest-neighbour F grid's bounds as floats and strides as i32: the SIMD kernel tests the
/// bounds on the rounded Miller indices themselves (no 64-bit integer lanes, which AVX2 cannot
/// multiply) and gathers with 32-bit indices. Same value as [`NearestF`]'s lookup.
#[derive(Clone, Copy)]
struct Grid32<T> {
    lo: [T; 3],
    hi: [T; 3],
    stride_h: i32,
    stride_k: i32,
}

impl<T: Real> Grid32<T> {
    fn new(f: &NearestF<T>) -> Option<Self> {
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

    /// F for `C` lanes of integer-valued (h0, k0, l0); `default_f` outside the grid (or for NaN).
    /// Three passes over the lanes (flat index, load, select) so the index arithmetic and the
    /// selection vectorize; only the loads are one per lane.
    #[inline(always)]
    fn get_lanes<const C: usize>(&self, data: &[T], default_f: T, h0: &[T; C], k0: &[T; C], l0: &[T; C]) -> [T; C] {
        // the flat index in f64 arithmetic (integers below 2^31: exact), which vectorizes where
        // 32-bit integer multiplies across lanes do not
        let mut flat = [0i32; C];
        let mut inside = [false; C];
        for l in 0..C {
            let (h, k, m) = (h0[l], k0[l], l0[l]);
            let ins = (h >= self.lo[0]) & (h <= self.hi[0]) & (k >= self.lo[1]) & (k <= self.hi[1]) & (m >= self.lo[2]) & (m <= self.hi[2]);
            let fl = (h - self.lo[0]).to_f64() * self.stride_h as f64 + (k - self.lo[1]).to_f64() * self.stride_k as f64 + (m - self.lo[2]).to_f64();
            flat[l] = (if ins { fl } else { 0.0 }).small_int();
            inside[l] = ins;
        }
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

impl<'a, T: Real> Prepared<'a, T> {
    /// `hand`: prepare for the hand-written AVX2 loop too (its padded F grid and replicated
    /// constants), for the level that runs it; other levels leave [`Prepared::hand`] empty.
    pub fn new(exp: &'a Experiment, hand: bool) -> Self {
        let f = NearestF::new(exp.fhkl.as_deref(), exp.default_f);
        let orient = exp
            .orientations
            .iter()
            .map(|o| [o.a.map(T::from_f64), o.b.map(T::from_f64), o.c.map(T::from_f64)])
            .collect();
        let sources: Vec<(V3, f64)> = exp.sources.iter().map(|s| ([-s.dir[0], -s.dir[1], -s.dir[2]], s.lambda)).collect();
        let pol = sources
            .iter()
            .map(|(inc, _)| {
                let inc = unitize(inc).0;
                let axis = unitize(&exp.det.polar_vector).0;
                let b_in = unitize(&cross(&axis, &inc)).0;
                let e_in = unitize(&cross(&inc, &b_in)).0;
                (b_in, e_in)
            })
            .collect();
        let n_cheb = [exp.na, exp.nb, exp.nc].map(|n| if n <= CHEB_MAX_N as f64 { n as usize } else { 0 });
        let square = exp.shape == CrystalShape::Square;
        let mut prep = Prepared {
            cheb_roots: n_cheb.map(|n| cheb_roots(n)),
            fused_n: if square && n_cheb[0] > 1 && n_cheb == [n_cheb[0]; 3] { n_cheb[0] } else { 0 },
            square,
            n_cheb,
            orient,
            sources,
            pol,
            na: T::from_f64(exp.na),
            nb: T::from_f64(exp.nb),
            nc: T::from_f64(exp.nc),
            grid32: Grid32::new(&f),
            hand: None,
            f,
        };
        if hand {
            prep.hand = HandLattice::new(exp.shape, [exp.na, exp.nb, exp.nc], &prep.orient, &prep.f).map(|mut h| {
                h.hoist = HandHoist::new(&exp.orientations, &prep.sources);
                h
            });
        }
        prep
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
/// only by a row function compiled with AVX2 and FMA, see `simd.rs`).
#[inline(always)]
pub fn render_row<T: Real, const L: usize, const C: usize, const HAND: bool>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
    let fpixels = exp.det.fpixels;
    let mut omega_row = 0.0;
    // pixel_active with the row's part hoisted: the ROI's columns and this row's mask
    let row_in_roi = (s as i64) >= exp.roi[2] && (s as i64) <= exp.roi[3];
    let cols = crate::io::roi_columns(exp.roi, fpixels);
    let mask_row = exp.mask.as_deref().map(|m| &m[s * fpixels..(s + 1) * fpixels]);
    // the hand loop's hoisted Miller indices (several sources): one sub-pixel's A at a time
    let hoist = if HAND && !interpolate { prep.hand.as_ref().and_then(|h| h.hoist.as_ref()) } else { None };
    let mut hoist_a = vec![T::ZERO; if hoist.is_some() { prep.orient.len() * 3 * L } else { 0 }];
    let mut f0 = 0;
    while f0 < fpixels {
        let mut active = [false; L];
        for (l, a) in active.iter_mut().enumerate() {
            let f = f0 + l;
            *a = row_in_roi & (f >= cols.start) & (f < cols.end);
        }
        if let Some(m) = mask_row {
            for (l, a) in active.iter_mut().enumerate() {
                *a = *a && m[f0 + l] != 0;
            }
        }
        let any = active.iter().any(|&a| a);
        let mut vals = [0.0f64; L];
        if any {
            match render_group::<T, L, C, HAND>(exp, prep, f0, s, &active, interpolate, hoist.map(|h| (h, &mut hoist_a[..])), &mut vals, omega_row) {
                Some(om) => omega_row = om,
                None => return RowResult { omega: omega_row, end: RowEnd::HandOver { from: f0 } },
            }
        }
        let mut px = [0.0f32; L];
        for l in 0..L {
            px[l] = if active[l] { vals[l] as f32 } else { 0.0 };
        }
        let n = L.min(fpixels - f0);
        out[f0..f0 + n].copy_from_slice(&px[..n]);
        f0 += L;
    }
    RowResult { omega: omega_row, end: RowEnd::Complete }
}

#[inline(always)]
/// One group of pixels; the row's omega sum with theirs added (`omega_row` before), `None` when
/// interpolation went out of range (the caller falls back).
#[allow(clippy::too_many_arguments)]
fn render_group<T: Real, const L: usize, const C: usize, const HAND: bool>(
    exp: &Experiment,
    prep: &Prepared<T>,
    f0: usize,
    s: usize,
    active: &[bool; L],
    interpolate: bool,
    mut hoist: Option<(&HandHoist<T>, &mut [T])>,
    vals: &mut [f64; L],
    omega_row: f64,
) -> Option<f64> {
    let det = &exp.det;
    let os = exp.oversample;
    let sub = exp.subpixel_size;
    let (fv, sv, ov, pix0) = (det.fdet_vector, det.sdet_vector, det.odet_vector, det.pix0_vector);
    let dmin = exp.dmin;
    let kahn = exp.polarization;

    let mut i_sum = [T::from_f64(exp.i_bg); L];
    let mut polar = [if exp.nopolar { 1.0 } else { 0.0 }; L];
    let mut omega = [0.0f64; L];
    let mut omega_sum = [0.0f64; L];
    let mut capture = [0.0f64; L];

    // Structure of arrays: one array per vector component, so every per-lane loop vectorizes.
    let mut dx = [0.0f64; L];
    let mut dy = [0.0f64; L];
    let mut dz = [0.0f64; L];
    // R per lane
    let mut airpath = [0.0f64; L];
    let mut fdet = [0.0f64; L];

    for thick_tic in 0..exp.thicksteps {
        let odet = thick_tic as f64 * exp.thickstep;
        capture = [if exp.detector_thick == 0.0 { 1.0 } else { 0.0 }; L];
        for sub_s in 0..os {
            let sdet = sub * ((s * os + sub_s) as f64) + sub / 2.0;
            for sub_f in 0..os {
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
                if det.curved_detector {
                    // every pixel at `distance`: the flat lab y, z taken as angles (the C's rule)
                    let d = det.distance;
                    let b = det.beam_vector;
                    for l in 0..L {
                        let swung = rotate_axis(&rotate_axis(&[d * b[0], d * b[1], d * b[2]], &sv, px[1][l] / d), &fv, px[2][l] / d);
                        [px[0][l], px[1][l], px[2][l]] = swung;
                    }
                }
                for l in 0..L {
                    let (x, y, z) = (px[0][l], px[1][l], px[2][l]);
                    let r = (x * x + y * y + z * z).sqrt();
                    airpath[l] = r;
                    dx[l] = x / r;
                    dy[l] = y / r;
                    dz[l] = z / r;
                }
                for l in 0..L {
                    let r = airpath[l];
                    let new = if det.point_pixel { 1.0 / r / r } else { det.pixel_size * det.pixel_size / r / r * det.close_distance / r };
                    omega[l] = if omega[l] == 0.0 || exp.oversample_omega { new } else { omega[l] };
                    omega_sum[l] += if active[l] { omega[l] } else { 0.0 };
                }
                // (with -oversample_thick and no sensor the C's recomputed capture fraction is 0)
                if exp.detector_thick != 0.0 || exp.oversample_thick {
                    for l in 0..L {
                        if capture[l] == 0.0 || exp.oversample_thick {
                            let parallax = dx[l] * ov[0] + dy[l] * ov[1] + dz[l] * ov[2];
                            capture[l] = (-(thick_tic as f64) * exp.thickstep * exp.detector_mu / parallax).exp()
                                - (-((thick_tic + 1) as f64) * exp.thickstep * exp.detector_mu / parallax).exp();
                        }
                    }
                }

                if let Some((h, a)) = hoist.as_mut() {
                    hoist_miller::<T, L>(&exp.orientations, &h.inc0, [&dx, &dy, &dz], a);
                }
                let weight_of = |polar: &[f64; L]| {
                    let mut weight = [T::ONE; L];
                    if exp.oversample_thick || exp.oversample_polar || exp.oversample_omega {
                        for l in 0..L {
                            let mut w = 1.0;
                            if exp.oversample_thick {
                                w *= capture[l];
                            }
                            if exp.oversample_polar {
                                w *= polar[l];
                            }
                            if exp.oversample_omega {
                                w *= omega[l];
                            }
                            weight[l] = T::from_f64(w);
                        }
                    }
                    weight
                };
                // the Kahn factor of source `si` where it is still unset (the C's last-value rule)
                // or oversampled; once every live lane has its value (after the first sample) nothing to do
                let update_polar = |polar: &mut [f64; L], si: usize, live: &[bool; L]| {
                    let (b_in, e_in) = prep.pol[si];
                    let inc = prep.sources[si].0;
                    let mut new = [0.0f64; L];
                    let needed = exp.oversample_polar || (0..L).any(|l| live[l] & (polar[l] == 0.0));
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
                        let update = live[l] & ((polar[l] == 0.0) | exp.oversample_polar);
                        polar[l] = if update { new[l] } else { polar[l] };
                    }
                };
                // hoisted indices without -dmin or -oversample_polar: every source has the same
                // live lanes and weight, and the hand loop takes them all in one call
                if let (true, Some((_, a))) = (dmin <= 0.0 && !exp.oversample_polar, hoist.as_ref()) {
                    for si in 0..prep.sources.len() {
                        update_polar(&mut polar, si, active);
                    }
                    let idx = HandIndices::Hoisted { a, sources: 0..prep.sources.len() };
                    // SAFETY: a hoist exists only for HAND rows, which run with AVX2 and FMA (simd.rs)
                    let done = prep.hand.as_ref().is_some_and(|h| unsafe { T::hand_chunk(h, prep.f.default_f(), &idx, active, &weight_of(&polar), &mut i_sum) });
                    // (the hoist comes from prep.hand, whose loop takes C lanes)
                    debug_assert!(done);
                    continue;
                }
                for (si, &(inc, lambda)) in prep.sources.iter().enumerate() {
                    let mut live = *active;
                    // the scattering vector (in f64, the C's operations), where -dmin or the
                    // loop needs it (the hoisted hand loop does not)
                    let need_scat = hoist.is_none() || dmin > 0.0;
                    let scattering = || {
                        let mut sv = [[0.0f64; L]; 3];
                        for l in 0..L {
                            sv[0][l] = (dx[l] - inc[0]) / lambda;
                            sv[1][l] = (dy[l] - inc[1]) / lambda;
                            sv[2][l] = (dz[l] - inc[2]) / lambda;
                        }
                        sv
                    };
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
                        // SAFETY: a hoist exists only for HAND rows, which run with AVX2 and FMA (simd.rs)
                        let idx = HandIndices::Hoisted { a, sources: si..si + 1 };
                        if prep.hand.as_ref().is_some_and(|h| unsafe { T::hand_chunk(h, prep.f.default_f(), &idx, &live, &weight, &mut i_sum) }) {
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
                    let in_range = if interpolate {
                        interpolated_sample_loop::<T, L>(exp, prep, &scat, &live, &weight, &mut i_sum)
                    } else if prep.f.has_grid() {
                        sample_loop::<T, L, C, true, HAND>(exp, prep, &scat, &live, &weight, &mut i_sum);
                        true
                    } else {
                        sample_loop::<T, L, C, false, HAND>(exp, prep, &scat, &live, &weight, &mut i_sum);
                        true
                    };
                    if !in_range {
                        return None;
                    }
                }
            }
        }
    }
    let scale = R_E_SQR * exp.fluence;
    let steps = exp.steps as f64;
    // the C's test = r_e²·fluence·I/steps·capture·polar·omega, lane by lane (x/1 is x: skipped)
    let mut test = [0.0f64; L];
    for l in 0..L {
        test[l] = scale * i_sum[l].to_f64();
    }
    if steps != 1.0 {
        for t in test.iter_mut() {
            *t /= steps;
        }
    }
    if !exp.oversample_thick {
        for l in 0..L {
            test[l] *= capture[l];
        }
    }
    if !exp.oversample_polar {
        for l in 0..L {
            test[l] *= polar[l];
        }
    }
    if !exp.oversample_omega {
        for l in 0..L {
            test[l] *= omega[l];
        }
    }
    *vals = test;
    // onto the row's running sum pixel by pixel: the same bits for any group width
    let mut omega_total = omega_row;
    for om in omega_sum {
        omega_total += om;
    }
    Some(omega_total)
}

/// All phi steps and mosaic domains for one sub-pixel and source: the hot loop.
/// Adds F_cell²·F_latt²·weight to `acc` sample by sample, in the C's order (phi outer, domain inner).
///
/// The group's `L` lanes are taken `C` at a time (about two registers per quantity): a chunk's
/// scattering vectors and sums stay in registers across every orientation, and a chunk with no live
/// lane is skipped. Each lane still adds its samples in the C's order, so chunking changes no bit.
#[inline(always)]
fn sample_loop<T: Real, const L: usize, const C: usize, const GRID: bool, const HAND: bool>(
    exp: &Experiment,
    prep: &Prepared<T>,
    scat: &[[T; L]; 3],
    live: &[bool; L],
    weight: &[T; L],
    acc: &mut [T; L],
) {
    // the hand-written loop takes the whole group (it skips registers with no live lane itself)
    // SAFETY: HAND is set only where the row function runs with AVX2 and FMA (simd.rs)
    if HAND && prep.hand.as_ref().is_some_and(|h| unsafe { T::hand_chunk(h, prep.f.default_f(), &HandIndices::Scattering(scat), live, weight, acc) }) {
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
fn sample_chunk<T: Real, const C: usize, const GRID: bool>(
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

/// 4cos²(kπ/n) for k = 1..⌊(n−1)/2⌋: U_{n−1}(y/2) = y^(n+1 mod 2) · Π_k (y² − 4cos²(kπ/n)), the
/// product over the Chebyshev polynomial's roots ±2cos(kπ/n) taken in pairs.
pub(super) fn cheb_roots<T: Real>(n: usize) -> Vec<T> {
    (1..=(n.max(1) - 1) / 2).map(|k| T::from_f64(4.0 * (k as f64 * std::f64::consts::PI / n as f64).cos().powi(2))).collect()
}

/// U_{n−1}(x) from y = 2x as the product over its roots (see [`cheb_roots`]), for `A` arrays of lanes
/// at once. A product of independent factors: short dependency chains, half the operations of the
/// three-term recurrence, and relative accuracy everywhere (no cancellation between large terms).
#[inline(always)]
fn cheb_u<T: Real, const C: usize, const A: usize>(two_x: [[T; C]; A], roots: &[T], even: bool) -> [[T; C]; A] {
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
fn interpolated_sample_loop<T: Real, const L: usize>(
    exp: &Experiment,
    prep: &Prepared<T>,
    scat: &[[T; L]; 3],
    live: &[bool; L],
    weight: &[T; L],
    acc: &mut [T; L],
) -> bool {
    let Some(grid) = exp.fhkl.as_deref() else { return true };
    let water = exp.water_size != 0.0;
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
