//! What the hand-written sample loop (the AVX2 intrinsics of `kernel::avx2`) takes, prepared once
//! per run: the lattice and padded F grid, the hoisted Miller-index terms, the wavelength groups,
//! replicated constants and the minimax polynomials; and [`HandKernel`], the seam through which the
//! generic kernel calls that loop for its element type.

use super::lanes::{cheb_roots, Real};
use crate::experiment::params::CrystalShape;
use crate::experiment::structure_factors::NearestF;
use crate::base::vec3::V3;

/// The element types whose sample loop has a hand-written version: `hand_chunk` runs it for `C`
/// lanes and returns true, or returns false where `C` is not a whole number of registers (or the
/// target is not x86-64) and the generic loop must run. `W512`: in 512-bit registers where that
/// version applies (the same bits). The x86-64 implementations are in `kernel::avx2`.
pub trait HandKernel: Real {
    /// # Safety
    /// The CPU must support AVX2 and FMA, and with `W512` AVX-512 F/DQ/VL.
    #[allow(clippy::too_many_arguments)]
    unsafe fn hand_chunk<const C: usize, const W512: bool>(
        hand: &HandLattice<Self>,
        default_f: Self,
        idx: &HandIndices<Self, C>,
        live: &[bool; C],
        weight: &[Self; C],
        acc: &mut [Self; C],
    ) -> bool;

    /// A whole row's prefix of pixels from a kept geometry ([`KeptRow`]) in the fused loop of
    /// `kernel::avx2` where this type has one at this width (f64 in 512-bit registers): the values
    /// into `row.out`, the omega sum returned; `None` where it has none (the group loop renders).
    ///
    /// # Safety
    /// As [`HandKernel::hand_chunk`].
    unsafe fn kept_row<const W512: bool>(_hand: &HandLattice<Self>, _row: KeptRow<'_, Self>) -> Option<f64> {
        None
    }
}

/// One row's pixels with every lane live and unit weight, their geometry read from a kept
/// `PixelGeometry` (`fast::render_row`'s fused path): the slices all of one length, a multiple of
/// eight; the C's `test` = r_e²·fluence·I/steps·polar·omega per pixel.
pub struct KeptRow<'a, T> {
    /// (d − i)/λ per component, polar and omega of the pixels (the kept geometry's).
    pub scattering: [&'a [f64]; 3],
    pub polar: &'a [f64],
    pub omega: &'a [f64],
    /// The float image's pixels.
    pub out: &'a mut [f32],
    /// I before the first sample (the background, in T), F (default_F: no grid), r_e²·fluence,
    /// the steps divisor.
    pub i_bg: T,
    pub default_f: T,
    pub scale: f64,
    pub steps: f64,
    /// The row's omega sum before these pixels.
    pub omega_row: f64,
}

/// Without x86-64 there is no hand-written loop: the generic one always runs.
#[cfg(not(target_arch = "x86_64"))]
macro_rules! no_hand_kernel {
    ($t:ty) => {
        impl HandKernel for $t {
            unsafe fn hand_chunk<const C: usize, const W512: bool>(
                _: &HandLattice<$t>,
                _: $t,
                _: &HandIndices<$t, C>,
                _: &[bool; C],
                _: &[$t; C],
                _: &mut [$t; C],
            ) -> bool {
                false
            }
        }
    };
}
#[cfg(not(target_arch = "x86_64"))]
no_hand_kernel!(f64);
#[cfg(not(target_arch = "x86_64"))]
no_hand_kernel!(f32);

/// The lattice factor and F grid as the hand-written sample loop (`kernel::avx2`) takes them: a
/// square spot with N ≤ [`CHEB_MAX_N`](super::lanes::CHEB_MAX_N) on every axis, F nearest-neighbour from a grid whose offsets
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

pub use super::plan::{HAND_GROUPS_MAX, HOIST_MAX_PAIRS};

impl<T: Real> HandHoist<T> {
    pub(super) fn new(orient: &[crate::experiment::Orientation], sources: &[(V3, f64)]) -> Option<Self> {
        if !super::plan::hoist_fits(sources.len(), orient.len()) {
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
        if !super::plan::groups_fit(sources.len(), lambdas.len()) {
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

/// One axis's U_{N−1} as y^(N+1 mod 2)·Π(y² − r_k) ([`super::lanes::cheb_roots`]); nothing to multiply for N ≤ 1.
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
#[allow(clippy::approx_constant)] // a fitted coefficient that happens to lie near 2π, not 2π
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
        if !super::plan::hand_lattice_fits(shape == CrystalShape::Square, ns) {
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
