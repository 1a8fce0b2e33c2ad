//! sin/cos and exp over fixed-width lane arrays (`[f64; L]`), written so that LLVM turns each lane
//! loop into SIMD instructions of the `#[target_feature]` function they are inlined into (as the
//! crystal kernel's `kernel::lanes` does): branch-free, rounding by the 1.5·2⁵² trick, signs and
//! quadrants by bit operations, every multiply-add an explicit `mul_add`.
//!
//! Why hand-written: nearBragg's phases are path lengths over wavelengths, 10⁹–10¹² rad (10 m to the
//! source over 1 Å), where glibc's `sin`/`cos` take their slow Payne–Hanek path (most of
//! nearBragg.c's time) and where the SIMD sin/cos of the stable-Rust crates (`wide`'s Cephes-style
//! reduction without fused multiply-adds) lose every digit. With a fused multiply-add the product
//! k·P1 of a three-part π/2 (Cody–Waite) is exact inside the FMA, so the reduced argument is good to
//! about one ulp of 1 for |x| up to [`SINCOS_MAX`]: sin and cos come out within a few 10⁻¹⁶ of
//! glibc's correctly rounded values (absolute), which the unit tests check against libm.
//!
//! **Only for functions compiled with FMA** (`#[target_feature(enable = "fma")]` or a target that has
//! it): elsewhere `f64::mul_add` is a slow library call (still exact). The callers dispatch on
//! [`crate::base::cpu::detected_level`] and keep libm on CPUs without FMA.

/// The rare lanes beyond [`SINCOS_MAX`]: libm's sin and cos (out of line, off the hot loop; the
/// lanes' own test again, so a lane's value does not depend on its neighbours).
#[cold]
#[inline(never)]
fn libm_sincos<const L: usize>(x: &[f64; L], s: &mut [f64; L], c: &mut [f64; L]) {
    for l in 0..L {
        if x[l].is_nan() || x[l].abs() > SINCOS_MAX {
            (s[l], c[l]) = (x[l].sin(), x[l].cos());
        }
    }
}

/// The rare lanes outside [`exp1`]'s range: libm's exp.
#[cold]
#[inline(never)]
fn libm_exp<const L: usize>(x: &[f64; L], e: &mut [f64; L]) {
    for l in 0..L {
        if !(EXP_MIN..=EXP_MAX).contains(&x[l]) {
            e[l] = x[l].exp();
        }
    }
}

/// 1.5·2⁵²: `x + ROUND_MAGIC - ROUND_MAGIC` is x rounded to the nearest integer (ties to even) for
/// |x| < 2⁵¹, and the low bits of `(x + ROUND_MAGIC).to_bits()` are that integer.
pub const ROUND_MAGIC: f64 = 6755399441055744.0;

/// 2/π.
const TWO_OVER_PI: f64 = std::f64::consts::FRAC_2_PI;
/// π/2 in three parts (P1 the double nearest π/2, P2 the double nearest π/2 − P1, P3 the rest;
/// the remainder π/2 − P1 − P2 − P3 is 5.6·10⁻⁵⁰).
const PIO2_1: f64 = std::f64::consts::FRAC_PI_2;
const PIO2_2: f64 = 6.123233995736766e-17;
const PIO2_3: f64 = -1.4973849048591698e-33;

/// Largest |x| that [`sincos_lanes`] reduces to about one ulp: 2⁴⁵. Up to it, k = round(2x/π) is
/// within 2⁻⁷ of 2x/π (so the reduced argument stays within π/4 + 0.02, where the polynomials
/// keep their accuracy) and k·(π/2 − P1) is below 10⁻² (so rounding x − k·P1 costs at most an
/// ulp of 1). Callers take libm's `sin`/`cos` beyond it.
pub const SINCOS_MAX: f64 = 35184372088832.0;

/// Cephes `sin.c` (S. L. Moshier) minimax coefficients of sin(r) = r + r·z·S(z), z = r², on [−π/4, π/4].
#[allow(clippy::excessive_precision)] // the published coefficients, kept as written
pub const SIN_C: [f64; 6] = [
    -1.66666666666666307295E-1,
    8.33333333332211858878E-3,
    -1.98412698295895385996E-4,
    2.75573136213857245213E-6,
    -2.50507477628578072866E-8,
    1.58962301576546568060E-10,
];
/// Cephes `sin.c` coefficients of cos(r) = 1 − z/2 + z²·C(z), z = r², on [−π/4, π/4].
#[allow(clippy::excessive_precision)] // the published coefficients, kept as written
pub const COS_C: [f64; 6] = [
    4.16666666666665929218E-2,
    -1.38888888888730564116E-3,
    2.48015872888517045348E-5,
    -2.75573141792967388112E-7,
    2.08757008419747316778E-9,
    -1.13585365213876817300E-11,
];

/// Horner's rule with fused multiply-adds, highest coefficient last.
#[inline(always)]
fn horner(z: f64, c: &[f64; 6]) -> f64 {
    let mut p = c[5];
    for k in (0..5).rev() {
        p = p.mul_add(z, c[k]);
    }
    p
}

/// (sin x, cos x) of one lane, |x| ≤ [`SINCOS_MAX`] (beyond it the result is inaccurate, not unsafe).
#[inline(always)]
pub fn sincos1(x: f64) -> (f64, f64) {
    let km = x * TWO_OVER_PI + ROUND_MAGIC;
    let k = km - ROUND_MAGIC;
    let q = km.to_bits();
    // x − k·π/2: each product exact inside its FMA
    let r = (-k).mul_add(PIO2_1, x);
    let r = (-k).mul_add(PIO2_2, r);
    let r = (-k).mul_add(PIO2_3, r);
    let z = r * r;
    let s = (r * z).mul_add(horner(z, &SIN_C), r);
    let c = (z * z).mul_add(horner(z, &COS_C), 1.0 - 0.5 * z);
    // quadrant q mod 4: odd swaps sin and cos; sin negative in quadrants 2, 3, cos in 1, 2
    let odd = (q & 1).wrapping_neg();
    let (sb, cb) = (s.to_bits(), c.to_bits());
    let sv = (sb & !odd) | (cb & odd);
    let cv = (cb & !odd) | (sb & odd);
    let sin = f64::from_bits(sv ^ ((q & 2) << 62));
    let cos = f64::from_bits(cv ^ ((q.wrapping_add(1) & 2) << 62));
    (sin, cos)
}

/// (sin x, cos x) of every lane, each within a few 10⁻¹⁶ of the correctly rounded values for
/// |x| ≤ [`SINCOS_MAX`]; a lane beyond it (or not finite) takes libm's.
#[inline(always)]
pub fn sincos_lanes<const L: usize>(x: &[f64; L]) -> ([f64; L], [f64; L]) {
    let (mut s, mut c) = ([0.0; L], [0.0; L]);
    // one lane loop per stage, the out-of-range test an OR over the lanes: LLVM vectorizes these
    // (not one loop around the whole of sincos1, nor per-lane flags and branches)
    for l in 0..L {
        (s[l], c[l]) = sincos1(x[l]);
    }
    let mut big = 0u64;
    for &v in x {
        big |= (v.is_nan() || v.abs() > SINCOS_MAX) as u64;
    }
    if big != 0 {
        libm_sincos(x, &mut s, &mut c);
    }
    (s, c)
}

/// log 2 in two parts (LN2_HI the double nearest, LN2_LO the double nearest the rest).
const LN2_HI: f64 = std::f64::consts::LN_2;
const LN2_LO: f64 = 2.3190468138462996e-17;
const LOG2_E: f64 = std::f64::consts::LOG2_E;
/// Range of [`exp1`]: 2ⁿ stays a normal double.
pub const EXP_MIN: f64 = -708.0;
pub const EXP_MAX: f64 = 709.0;

/// e^x of one lane for x in [[`EXP_MIN`], [`EXP_MAX`]]: x = n·ln 2 + r (Cody–Waite, |r| ≤ ln 2/2),
/// e^r by its Taylor series to r¹³/13! (truncation below 5·10⁻¹⁸), times 2ⁿ built in the exponent bits.
#[inline(always)]
pub fn exp1(x: f64) -> f64 {
    let km = x * LOG2_E + ROUND_MAGIC;
    let n = km - ROUND_MAGIC;
    let ni = (km.to_bits() as i64).wrapping_sub(ROUND_MAGIC.to_bits() as i64);
    let r = (-n).mul_add(LN2_HI, x);
    let r = (-n).mul_add(LN2_LO, r);
    // 1/k! for k = 13 down to 2
    const INV_FACT: [f64; 12] = [
        1.0 / 6227020800.0,
        1.0 / 479001600.0,
        1.0 / 39916800.0,
        1.0 / 3628800.0,
        1.0 / 362880.0,
        1.0 / 40320.0,
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
    ];
    let mut p = INV_FACT[0];
    for &c in &INV_FACT[1..] {
        p = p.mul_add(r, c);
    }
    let p = p.mul_add(r, 1.0).mul_add(r, 1.0);
    p * f64::from_bits(((ni + 1023) as u64) << 52)
}

/// e^x of every lane, within about an ulp of the correctly rounded value; a lane outside
/// [[`EXP_MIN`], [`EXP_MAX`]] (or not finite) takes libm's.
#[inline(always)]
pub fn exp_lanes<const L: usize>(x: &[f64; L]) -> [f64; L] {
    let mut e = [0.0; L];
    let mut out = 0u64;
    for l in 0..L {
        let inside = x[l] >= EXP_MIN && x[l] <= EXP_MAX;
        e[l] = exp1(if inside { x[l] } else { 0.0 });
        out |= !inside as u64;
    }
    if out != 0 {
        libm_exp(x, &mut e);
    }
    e
}

/// Whether every double within `d` of `x` rounds to one float (rounding is monotonic, so the two
/// ends settle it): a result known within `d` of a libm value then rounds to libm's float. False for
/// NaN.
#[inline(always)]
pub fn rounds_to_one_float(x: f64, d: f64) -> bool {
    (x - d) as f32 == (x + d) as f32
}

/// fdlibm's `e_log.c` minimax coefficients of log(1+f) = f − f²/2 + s·(f²/2 + R(s²)), s = f/(2+f).
#[allow(clippy::excessive_precision)] // the published coefficients, kept as written
const LG: [f64; 7] = [
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
];
/// ln 2 in fdlibm's two parts (the high part's low 32 bits zero, so k·LN2_HI_32 is exact for |k| < 2²⁰).
const LN2_HI_32: f64 = 6.93147180369123816490e-01;
const LN2_LO_32: f64 = 1.90821492927058770002e-10;

/// ln x of one lane for a normal x > 0, by fdlibm's `__ieee754_log` without its special cases (error
/// below an ulp there; here within a few ulps, checked against libm in the tests). No fused
/// operations: the same value compiled for any level.
#[inline(always)]
pub fn ln1(x: f64) -> f64 {
    let bits = x.to_bits();
    let hx = (bits >> 32) as i64;
    let hm = hx & 0x000f_ffff;
    // the mantissa into [√2/2, √2), k counting the halvings
    let i = (hm + 0x9_5f64) & 0x10_0000;
    let k = ((hx >> 20) - 1023) + (i >> 20);
    let m = f64::from_bits((((hm | (i ^ 0x3ff0_0000)) as u64) << 32) | (bits & 0xffff_ffff));
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let dk = k as f64;
    let (z, w) = (s * s, s * s * (s * s));
    let t1 = w * (LG[1] + w * (LG[3] + w * LG[5]));
    let t2 = z * (LG[0] + w * (LG[2] + w * (LG[4] + w * LG[6])));
    let hfsq = 0.5 * f * f;
    dk * LN2_HI_32 - ((hfsq - (s * (hfsq + (t2 + t1)) + dk * LN2_LO_32)) - f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ln1 within 2 ulps of libm's ln over the normal doubles (random bits, and near powers of 2 and 1).
    #[test]
    fn ln1_is_libm_within_two_ulps() {
        let ulps = |x: f64| {
            let (a, b) = (ln1(x), x.ln());
            (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
        };
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2_000_000 {
            let x = f64::from_bits(((r.next() * 2046.0) as u64 + 1) << 52 | (r.next() * (1u64 << 52) as f64) as u64);
            assert!(ulps(x) <= 2, "ln1({x:e}) = {:e}, libm {:e}", ln1(x), x.ln());
        }
        for e in -1020..1020 {
            let p = 2f64.powi(e);
            for x in [p, f64::from_bits(p.to_bits() + 1), f64::from_bits(p.to_bits() - 1), p * std::f64::consts::SQRT_2, 1.0 + e as f64 * 1e-12] {
                if x.is_normal() && x > 0.0 && x != 1.0 {
                    assert!(ulps(x) <= 2, "ln1({x:e}) = {:e}, libm {:e}", ln1(x), x.ln());
                }
            }
        }
        assert_eq!(ln1(1.0), 0.0);
    }

    /// A small deterministic generator (xorshift64*), uniform in [0, 1).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545F4914F6CDD1D) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Distance in ulps between two doubles of the same sign.
    fn ulps(a: f64, b: f64) -> u64 {
        if a == b {
            return 0;
        }
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    /// Worst absolute error (in units of 2⁻⁵², an ulp of 1) and relative error (ulps, for results
    /// above 0.5 in magnitude) of sincos against libm over `n` arguments log-uniform up to `max`.
    fn sincos_errors(seed: u64, n: usize, max: f64) -> (f64, u64) {
        let mut rng = Rng(seed);
        let (mut abs, mut rel) = (0.0f64, 0u64);
        for _ in 0..n {
            let x = (rng.next() * max.ln()).exp() * if rng.next() < 0.5 { -1.0 } else { 1.0 };
            let (s, c) = sincos_lanes(&[x]);
            for (got, want) in [(s[0], x.sin()), (c[0], x.cos())] {
                abs = abs.max((got - want).abs() / f64::EPSILON);
                if want.abs() > 0.5 {
                    rel = rel.max(ulps(got, want));
                }
            }
        }
        (abs, rel)
    }

    #[test]
    fn sincos_agrees_with_libm_over_every_range_nearbragg_uses() {
        for (max, seed) in [(1.0, 1), (100.0, 2), (1e6, 3), (1e10, 4), (1e12, 5), (SINCOS_MAX, 6)] {
            let (abs, rel) = sincos_errors(seed, 200_000, max);
            assert!(abs <= 2.0, "|x| up to {max:e}: absolute error {abs} ulps of 1");
            assert!(rel <= 2, "|x| up to {max:e}: {rel} ulps");
        }
    }

    #[test]
    fn sincos_at_multiples_of_half_pi_and_beyond_the_bound() {
        for k in [1.0, 2.0, 3.0, 4.0, 1e6, 1e9 + 1.0, 1e12 + 3.0, 2e13] {
            let x = k * std::f64::consts::FRAC_PI_2;
            let (s, c) = sincos_lanes(&[x]);
            assert!((s[0] - x.sin()).abs() <= 2.0 * f64::EPSILON && (c[0] - x.cos()).abs() <= 2.0 * f64::EPSILON, "{x}");
        }
        let x = [1e15, -3e20, 0.5, f64::NAN];
        let (s, c) = sincos_lanes(&x);
        for l in 0..3 {
            assert!((s[l] - x[l].sin()).abs() <= 2.0 * f64::EPSILON && (c[l] - x[l].cos()).abs() <= 2.0 * f64::EPSILON);
        }
        assert!(s[3].is_nan() && c[3].is_nan());
        assert_eq!(sincos_lanes(&[0.0]), ([0.0], [1.0]));
    }

    #[test]
    fn exp_agrees_with_libm() {
        let mut rng = Rng(9);
        let mut worst = 0;
        for _ in 0..400_000 {
            let x = EXP_MIN + rng.next() * (EXP_MAX - EXP_MIN);
            worst = worst.max(ulps(exp_lanes(&[x])[0], x.exp()));
            let small = (rng.next() - 0.5) * 2.0;
            worst = worst.max(ulps(exp_lanes(&[small])[0], small.exp()));
        }
        assert!(worst <= 1, "{worst} ulps");
        let x = [-800.0, -708.5, 0.0, 710.0, -1e300];
        let e = exp_lanes(&x);
        for l in 0..x.len() {
            assert_eq!(e[l], x[l].exp(), "{}", x[l]);
        }
    }
}
