//! Fixed-width lane arithmetic for the fast kernel: `[T; L]` arrays with element-wise operations that
//! LLVM turns into SIMD instructions of whatever level the calling function is compiled for (the
//! kernel is instantiated inside `#[target_feature]` functions and picked at run time, see
//! `kernel::simd`). Everything is branch-free so it vectorizes: rounding uses the 1.5·2^52 trick
//! instead of a libm call, selection is a per-lane `if` that becomes a blend.

use std::ops::{Add, Div, Mul, Neg, Sub};

/// The element type of a lane (f64 for the double-precision kernel, f32 for `-precision single`).
pub trait Real:
    Copy + PartialOrd + PartialEq + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> + Neg<Output = Self> + Default + crate::experiment::structure_factors::FValue
{
    const ZERO: Self;
    const ONE: Self;
    const HALF: Self;
    const PI: Self;
    /// Adding and subtracting this rounds to the nearest integer (ties to even) for |x| < 2^(mantissa-1).
    const ROUND_MAGIC: Self;
    /// Cephes minimax coefficients of sin and cos on [-π/4, π/4].
    const SIN_C: [Self; 6];
    const COS_C: [Self; 6];
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn sqrt(self) -> Self;
    /// self·a + b in one rounding (an FMA instruction where the calling function is compiled with
    /// FMA; a libm call elsewhere: use it only there, see `tangent_lanes::mad`).
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// The low bits of (x + ROUND_MAGIC) as an integer: nearest integer of x (two's complement).
    fn magic_int(self) -> i64;
    /// `self` (an integer in 0..2²²) as i32, by the same magic-number addition as
    /// [`Real::magic_int`] but in 32-bit lanes (AVX2 has no 64-bit multiply for index arithmetic).
    fn small_int(self) -> i32;
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const HALF: f64 = 0.5;
    const PI: f64 = std::f64::consts::PI;
    // the Cephes sin/cos coefficients and the rounding constant of base::lane_math (one copy)
    const ROUND_MAGIC: f64 = crate::base::lane_math::ROUND_MAGIC;
    const SIN_C: [f64; 6] = crate::base::lane_math::SIN_C;
    const COS_C: [f64; 6] = crate::base::lane_math::COS_C;
    #[inline(always)]
    fn from_f64(x: f64) -> f64 {
        x
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    #[inline(always)]
    fn mul_add(self, a: f64, b: f64) -> f64 {
        f64::mul_add(self, a, b)
    }
    #[inline(always)]
    fn magic_int(self) -> i64 {
        // low 51 bits of the mantissa hold the integer, offset by 2^51
        ((self + Self::ROUND_MAGIC).to_bits() as i64 & 0x000F_FFFF_FFFF_FFFF) - 0x0008_0000_0000_0000
    }
    #[inline(always)]
    fn small_int(self) -> i32 {
        // the low word of 1.5·2⁵² + x is x (two's complement) for |x| < 2³¹
        (self + Self::ROUND_MAGIC).to_bits() as i32
    }
}

#[allow(clippy::excessive_precision)] // the published Cephes coefficients, kept as written
impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const HALF: f32 = 0.5;
    const PI: f32 = std::f32::consts::PI;
    const ROUND_MAGIC: f32 = 12582912.0;
    const SIN_C: [f32; 6] = [-1.6666654611E-1, 8.3321608736E-3, -1.9515295891E-4, 0.0, 0.0, 0.0];
    const COS_C: [f32; 6] = [4.166664568298827E-2, -1.388731625493765E-3, 2.443315711809948E-5, 0.0, 0.0, 0.0];
    #[inline(always)]
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32) -> f32 {
        f32::mul_add(self, a, b)
    }
    #[inline(always)]
    fn magic_int(self) -> i64 {
        (((self + Self::ROUND_MAGIC).to_bits() as i32 & 0x007F_FFFF) - 0x0040_0000) as i64
    }
    #[inline(always)]
    fn small_int(self) -> i32 {
        ((self + Self::ROUND_MAGIC).to_bits() as i32 & 0x007F_FFFF) - 0x0040_0000
    }
}

/// Nearest integer (ties to even) without a libm call; exact for |x| < 2^51 (f64) or 2^22 (f32).
#[inline(always)]
pub fn round<T: Real>(x: T) -> T {
    (x + T::ROUND_MAGIC) - T::ROUND_MAGIC
}

/// ceil(x) for |x| < 2^51, branch-free.
#[inline(always)]
pub fn ceil<T: Real>(x: T) -> T {
    let r = round(x);
    if r < x {
        r + T::ONE
    } else {
        r
    }
}

/// sin²(πy): reduce y to r = y − q/2 with |r| ≤ 1/4 exactly, then the sine or cosine polynomial.
/// Squared, because the lattice factor only needs sincg² and the sign then drops out.
#[inline(always)]
pub fn sinpi_sqr<T: Real>(y: T) -> T {
    let two_y = y + y;
    let q = round(two_y);
    let r = (two_y - q) * T::HALF; // exact
    let x = r * T::PI;
    let x2 = x * x;
    let s = T::SIN_C;
    let c = T::COS_C;
    let ps = s[0] + x2 * (s[1] + x2 * (s[2] + x2 * (s[3] + x2 * (s[4] + x2 * s[5]))));
    let pc = c[0] + x2 * (c[1] + x2 * (c[2] + x2 * (c[3] + x2 * (c[4] + x2 * c[5]))));
    let sin_x = x + x * x2 * ps;
    let cos_x = T::ONE - T::HALF * x2 + x2 * x2 * pc;
    let odd = (q.magic_int() & 1) != 0;
    let v = if odd { cos_x } else { sin_x };
    v * v
}

/// sincg(π h, N)² for integer N, as (sin(πNδ)/sin(πδ))² with δ = h − h0 (h0 the nearest integer):
/// the same value as the C's sin(πNh)/sin(πh) squared, without evaluating sines of large arguments.
#[inline(always)]
pub fn sincg_sqr<T: Real>(h: T, h0: T, n: T) -> T {
    let delta = h - h0;
    let num = sinpi_sqr(n * delta);
    let den = sinpi_sqr(delta);
    if delta == T::ZERO {
        n * n
    } else {
        num / den
    }
}

/// sin(πy) for |y| ≤ 1/4 (one polynomial, no reduction).
#[inline(always)]
fn sinpi_small<T: Real>(y: T) -> T {
    let x = y * T::PI;
    let x2 = x * x;
    let s = T::SIN_C;
    let ps = s[0] + x2 * (s[1] + x2 * (s[2] + x2 * (s[3] + x2 * (s[4] + x2 * s[5]))));
    x + x * x2 * ps
}

/// sincg(π h, N) for a small integer N as the Chebyshev polynomial U_{N−1}(cos πδ), δ = h − h0:
/// mathematically sin(Nπδ)/sin(πδ) up to sign, with no division and no special case at δ = 0
/// (U_{N−1}(1) = N). cos πδ = 1 − 2 sin²(πδ/2) keeps the argument within [−π/4, π/4].
/// Square the result: the sign differs from the C's sincg by (−1)^(h0(N−1)).
#[inline(always)]
pub fn sincg_cheb<T: Real>(h: T, h0: T, n: usize) -> T {
    let two_x = cheb_two_x(h, h0);
    // U_0 = 1, U_1 = 2x, U_{k+1} = 2x U_k − U_{k−1}
    let mut u_prev = T::ONE;
    let mut u = two_x;
    if n == 1 {
        return T::ONE;
    }
    for _ in 2..n {
        let next = two_x * u - u_prev;
        u_prev = u;
        u = next;
    }
    u
}

/// 2 cos(πδ), δ = h − h0, the argument of the Chebyshev recurrence in [`sincg_cheb`].
#[inline(always)]
pub fn cheb_two_x<T: Real>(h: T, h0: T) -> T {
    let s = sinpi_small((h - h0) * T::HALF);
    let x = T::ONE - (s * s + s * s);
    x + x
}

/// Largest N for which [`sincg_cheb`] is used (the recurrence costs 2 operations per N).
pub const CHEB_MAX_N: usize = 24;

/// 4cos²(kπ/n) for k = 1..⌊(n−1)/2⌋: U_{n−1}(y/2) = y^(n+1 mod 2) · Π_k (y² − 4cos²(kπ/n)), the
/// product over the Chebyshev polynomial's roots ±2cos(kπ/n) taken in pairs.
pub fn cheb_roots<T: Real>(n: usize) -> Vec<T> {
    (1..=(n.max(1) - 1) / 2).map(|k| T::from_f64(4.0 * (k as f64 * std::f64::consts::PI / n as f64).cos().powi(2))).collect()
}

/// a/b rounded to nearest, the same bits as `a / b`, from y = `1.0 / b` (itself a correctly rounded
/// division) and five fused operations instead of a division: where one 1/b serves several
/// quotients (a direction's three components and its solid angle share R; a source's scattering
/// vectors share λ), the divider, whose throughput is a 512-bit division per 16 cycles, stops
/// bounding the per-pixel geometry.
///
/// Why it is exact (Markstein's theorem, reproved for this use; scale a, b into [1, 2)): y is within
/// half an ulp of 1/b, so q0 = RN(a·y) is within 1.5 ulp of a/b; one correction q1 = RN(q0 + r0·y)
/// with r0 = RN(a − b·q0) leaves q1 within ½ ulp + 2⁻⁵² ulp of a/b, i.e. one of the two floats
/// around it (faithful). For a faithful q the remainder r1 = a − b·q1 is exact (a multiple of
/// 2⁻¹⁰⁵ below 2⁻⁵¹ in magnitude) and q1 + r1·y = a/b + r1·(y − 1/b), an error below
/// b·(½ ulp + d)·2⁻⁵⁴ where d is a/b's distance to the nearest midpoint between floats; a/b is
/// never a midpoint and d ≥ 2⁻¹⁰⁵·ulp/b, so for b < 2 the error is below d and RN(q1 + r1·y) is
/// RN(a/b). The theorem needs no underflow or overflow anywhere in the chain: callers take this
/// path only where [`div_operands_outside`] is 0 for every lane (the plain division otherwise).
/// Needs a hardware FMA (`mul_add` is a libm call without one): only in row functions compiled
/// with FMA. `tests::division_by_reciprocal_is_the_division` checks it against `/` on random and
/// near-midpoint quotients.
#[inline(always)]
pub fn div_by_reciprocal(a: f64, b: f64, y: f64) -> f64 {
    let q0 = a * y;
    let r0 = (-q0).mul_add(b, a);
    let q1 = r0.mul_add(y, q0);
    let r1 = (-q1).mul_add(b, a);
    r1.mul_add(y, q1)
}

/// Whether [`div_by_reciprocal`] is exact for numerator `a` and divisor `b`: both finite and
/// nonzero, |a| in [2⁻⁸⁰⁰, 2⁸⁰¹) and |b| in [2⁻¹⁰⁰, 2¹⁰¹), so that every quotient, remainder and
/// correction of the chain is a normal number (a zero numerator is left to the division, which
/// keeps its sign). 0 where it is, 1 where not: in integer arithmetic on the exponents, so that a
/// lane loop OR-ing it vectorizes (a fold of bools did not).
#[inline(always)]
pub fn div_operands_outside(a: f64, b: f64) -> u64 {
    let (ea, eb) = ((a.to_bits() >> 52) & 0x7ff, (b.to_bits() >> 52) & 0x7ff);
    u64::from(ea.wrapping_sub(1023 - 800) > 1600) | u64::from(eb.wrapping_sub(1023 - 100) > 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_without_libm() {
        for &x in &[-2.5f64, -1.5, -0.5, -0.49, 0.0, 0.49, 0.5, 1.5, 2.5, 1e6 + 0.3, -7.7] {
            assert_eq!(round(x), x.round_ties_even(), "{x}");
            assert_eq!(ceil(x), x.ceil(), "{x}");
            assert_eq!(round(x).magic_int(), x.round_ties_even() as i64, "{x}");
        }
        for x in [0.0f64, 1.0, 2.0, 37.0, 4_194_303.0, 2_147_483_647.0] {
            assert_eq!(x.small_int(), x as i32, "{x}");
        }
        for x in [0.0f32, 1.0, 2.0, 37.0, 4_194_303.0] {
            assert_eq!(x.small_int(), x as i32, "{x}");
        }
        for &x in &[-2.5f32, -0.5, 0.5, 3.7, -3.7] {
            assert_eq!(round(x), x.round_ties_even());
            assert_eq!(ceil(x), x.ceil());
            assert_eq!(round(x).magic_int(), x.round_ties_even() as i64);
        }
    }

    #[test]
    fn sinpi_sqr_matches_libm() {
        let mut y = -3.0f64;
        while y < 3.0 {
            let want = (std::f64::consts::PI * y).sin().powi(2);
            assert!((sinpi_sqr(y) - want).abs() < 2e-15, "{y}: {} vs {want}", sinpi_sqr(y));
            let w32 = want as f32;
            assert!((sinpi_sqr(y as f32) - w32).abs() < 2e-6, "{y}");
            y += 0.0137;
        }
    }

    #[test]
    fn sincg_cheb_matches_the_c_formula() {
        let c = |h: f64, n: f64| crate::experiment::physics::sincg(std::f64::consts::PI * h, n).powi(2);
        for n in [2usize, 3, 5, 10, 24] {
            let mut h = -8.3;
            while h < 8.3 {
                let h0 = (h - 0.5f64).ceil();
                let got = sincg_cheb(h, h0, n).powi(2);
                let want = c(h, n as f64);
                assert!((got - want).abs() <= 1e-9 * (1.0 + want), "N={n} h={h}: {got} vs {want}");
                let g32 = sincg_cheb(h as f32, h0 as f32, n).powi(2) as f64;
                assert!((g32 - want).abs() <= 2e-4 * (1.0 + want), "f32 N={n} h={h}: {g32} vs {want}");
                h += 0.0173;
            }
            assert_eq!(sincg_cheb(3.0f64, 3.0, n).powi(2), (n * n) as f64);
        }
    }

    #[test]
    fn sincg_sqr_matches_the_c_formula() {
        let c = |h: f64, n: f64| crate::experiment::physics::sincg(std::f64::consts::PI * h, n).powi(2);
        for &n in &[2.0, 5.0, 10.0, 37.0] {
            let mut h = -8.3;
            while h < 8.3 {
                let h0 = (h - 0.5f64).ceil();
                let got = sincg_sqr(h, h0, n);
                let want = c(h, n);
                assert!((got - want).abs() <= 1e-9 * (1.0 + want), "N={n} h={h}: {got} vs {want}");
                h += 0.0173;
            }
            assert_eq!(sincg_sqr(3.0, 3.0, n), n * n);
        }
    }

    /// The fused-operation quotient is `/`'s, bit for bit: random operands over many binades, divisors
    /// near the binade's top (where the proof's margin is thinnest), and numerators built so that
    /// a/b lies within a few ulps of the product's rounding of a midpoint between two floats.
    #[test]
    fn division_by_reciprocal_is_the_division() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let check = |a: f64, b: f64| {
            if div_operands_outside(a, b) == 0 {
                let want = a / b;
                assert_eq!(div_by_reciprocal(a, b, 1.0 / b).to_bits(), want.to_bits(), "{a:e} / {b:e}");
            }
        };
        let unit = |bits: u64| f64::from_bits((1023 << 52) | (bits >> 12)); // in [1, 2)
        for i in 0..4_000_000u32 {
            let (x, y) = (next(), next());
            let scale_a = f64::from_bits(((1023 + (x % 61) as i64 - 30) as u64) << 52);
            let scale_b = f64::from_bits(((1023 + (y % 41) as i64 - 20) as u64) << 52);
            let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
            let b = match i % 4 {
                0 => 2.0 - f64::from_bits((1023 - 52) << 52) * (1 + (y % 1000)) as f64,
                _ => unit(y),
            };
            check(sign * unit(x) * scale_a, b * scale_b);
            // a ≈ b·(q + ½ ulp(q)): a/b within a few ulps of a midpoint
            let q = unit(next());
            let mid = q + f64::EPSILON; // q + ½ ulp(q) needs 54 bits: take a from the exact product
            let a = b * q + (b * f64::EPSILON / 2.0);
            check(a, b);
            check(a.next_up(), b);
            check(a.next_down(), b);
            check((b * mid).next_down(), b);
        }
        // the geometry's own operands: direction components over R, Δ over λ
        for i in 0..100_000 {
            let r = 0.1 + i as f64 * 1.3e-6;
            for x in [r * 0.3, -r * 0.999, 1e-5 * r, r] {
                check(x, r);
            }
            check((i as f64 - 50_000.0) * 1.7e-6, 6.2e-10);
        }
        let outside = |a: f64, b: f64| div_operands_outside(a, b) == 1;
        assert!(outside(0.0, 1.0) && outside(-0.0, 1.0) && outside(1e-300, 1.0) && outside(1e300, 1.0));
        assert!(outside(f64::NAN, 1.0) && outside(1.0, f64::INFINITY) && outside(1.0, f64::NAN) && outside(1.0, 1e-40));
        assert!(outside(1.0, 0.0) && !outside(-1e-200, -6.2e-10) && !outside(2f64.powi(-800), 2f64.powi(100)));
        assert!(outside(2f64.powi(-800).next_down(), 1.0) && outside(1.0, 2f64.powi(101)));
    }
}
