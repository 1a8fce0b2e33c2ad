//! The C program's random numbers (Numerical Recipes `ran1`, `poidev`, `gaussdev`, `gammln`) and the
//! mosaic/misset rotation generators.
//!
//! Users compare noise images and random orientations from the port with the C program's, so every
//! routine here repeats the C bit for bit: `long` is `i64`, `float` is `f32`, and each implicit C
//! conversion (float → double for a libm call or a mixed expression, double → float on assignment or
//! return) is written out at the same place. The libm calls (`sin`, `cos`, `tan`, `exp`, `ln`, `sqrt`,
//! `atan2`, `f32::powf`) go to the platform libm, as the C's do; `mul_add` is never used, since the C
//! reference is built without FMA contraction. Two exceptions give the same floats: poidev's
//! `(float)tan(M_PI*u)` of the uniforms drawn ahead ([`Ran1Ahead`]'s `next_tan_pi`) and the terms of
//! its large means ([`large_mean_terms_lanes`]) are computed eight at a time in vectors, each kept
//! only where libm's result provably rounds to the same float (every float input checked).

use crate::base::lane_math::{ln1, rounds_to_one_float, sincos1};
use std::f64::consts::PI;

const IA: i64 = 16807;
const IM: i64 = 2147483647;
const AM: f64 = 1.0 / IM as f64;
const IQ: i64 = 127773;
const IR: i64 = 2836;
const NTAB: usize = 32;
const NDIV: i64 = 1 + (IM - 1) / NTAB as i64;
const EPS: f64 = 1.2e-7;
const RNMX: f64 = 1.0 - EPS;

/// The uniforms poidev and gaussdev take: ran1's deviates one at a time, and for poidev's rejection
/// loop the next deviate u as its Lorentzian `y=tan(M_PI*ran1(idum))` (double, stored as float).
/// Any `FnMut() -> f32` is one (y from libm's tan); [`Ran1Ahead`] gives y without libm where it can.
pub trait Uniforms {
    fn next(&mut self) -> f32;
    /// [`tan_pi`] of the next deviate.
    fn next_tan_pi(&mut self) -> f32 {
        tan_pi(self.next())
    }
}

impl<F: FnMut() -> f32> Uniforms for F {
    #[inline(always)]
    fn next(&mut self) -> f32 {
        self()
    }
}

/// poidev's `y=tan(M_PI*u)`: in double by libm's tan, as the C's, stored as float.
#[inline]
pub fn tan_pi(u: f32) -> f32 {
    (PI * u as f64).tan() as f32
}

/// Deviates whose [`tan_pi`] [`Ran1Ahead`] computes at once: one 512-bit register of doubles.
const TAN_LANES: usize = 8;

/// [`tan_pi`] of `TAN_LANES` deviates without libm, NaN where it cannot vouch for the float: tan as
/// sin/cos of πu by [`sincos1`] (the reduction exact to about an ulp of the reduced argument, the
/// quotient within a few ulps of the double), rounded to float and kept only where no float rounding
/// boundary lies within 2⁻⁴⁶ of it, so that libm's tan (within an ulp) rounds to the same float.
/// NaN for about one deviate in 2²¹, and for u outside (0, 1) (ran1 gives none). Checked against libm
/// for every float in (0, 1) (`tan_pi_fast_is_libm_for_every_float`).
#[inline(always)]
fn tan_pi_fast_lanes(u: &[f32; TAN_LANES]) -> [f32; TAN_LANES] {
    let mut y = [0.0f32; TAN_LANES];
    for l in 0..TAN_LANES {
        let (s, c) = sincos1(PI * u[l] as f64);
        let t = s / c;
        let d = t.abs() * (1.0 / 70_368_744_177_664.0); // 2^-46 of the value
        let ok = (u[l] > 0.0) & (u[l] < 1.0) & rounds_to_one_float(t, d);
        y[l] = if ok { t as f32 } else { f32::NAN };
    }
    y
}

/// [`tan_pi_fast_lanes`] compiled for the widest vectors the CPU has, with FMA (sincos1's
/// reduction needs it to be fast; without FMA the same values, slowly).
fn tan_pi_fast(u: &[f32; TAN_LANES]) -> [f32; TAN_LANES] {
    crate::base::cpu::widest_call!(tan_pi_fast_lanes(u: &[f32; TAN_LANES]) -> [f32; TAN_LANES])
}

/// poidev's `em=floor(em)` (double, stored as float) of a count `em >= 0` without a libm call, and
/// the count as an index (usize::MAX from 2²³ on): below 2²³ truncation through an integer, from
/// 2²³ on `em` itself (a float that large is whole).
#[inline(always)]
fn floor_count(em: f32) -> (f32, usize) {
    if em < 8_388_608.0 {
        let k = em as i32;
        (k as f32, k as usize)
    } else {
        (em, usize::MAX)
    }
}

/// A seed flag's value as the C programs store it: `seed = -atoi(argv[i+1])` (nanoBragg.c,
/// noisify.c, nonBragg.c) negates in `int`, so −2147483648 wraps to itself before it is widened to
/// `long` (ran1 then starts from it as from any negative seed); plain negation gave +2147483648, a
/// positive seed, and another stream. Seeds beyond an `int` (the library's) are negated as they are.
pub fn c_negated_seed(seed: i64) -> i64 {
    match i32::try_from(seed) {
        Ok(s) => s.wrapping_neg() as i64,
        Err(_) => -seed,
    }
}

/// The process-wide state the C keeps in `static` variables: ran1's shuffle table (shared by every
/// stream: misset, mosaic, noise) and the cached values of poidev and gaussdev.
///
/// One value must be threaded through all streams in the C's order (misset → mosaic → noise): a stream
/// started with a positive seed reuses the table left by the previous one, and poidev/gaussdev keep
/// their caches across streams.
#[derive(Clone, Debug, Default)]
pub struct NrRandom {
    table: Ran1Table,
    cache: DeviateCache,
}

/// ran1's `static long iy, iv[NTAB]`: the shuffle table (iy = 0: not loaded yet).
///
/// Kept apart from [`DeviateCache`] so that poidev/gaussdev can take their uniforms from a source
/// other than the table itself ([`Ran1Ahead`]) while keeping the C's caches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ran1Table {
    iy: i64,
    iv: [i64; NTAB],
}

/// poidev's `static float sq, alxm, g, oldm` and gaussdev's `static int iset; static float gset`.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviateCache {
    /// poidev's statics (`oldm` starts at -1 so the first mean is "new").
    sq: f32,
    alxm: f32,
    g: f32,
    oldm: f32,
    /// gaussdev's spare deviate of the polar method.
    iset: bool,
    gset: f32,
}

impl Default for DeviateCache {
    fn default() -> Self {
        DeviateCache { sq: 0.0, alxm: 0.0, g: 0.0, oldm: -1.0, iset: false, gset: 0.0 }
    }
}

/// One Park–Miller step as the C's `ran1` makes it by Schrage's method (the C's `long` arithmetic;
/// 64-bit, so no overflow).
///
/// For 0 < idum < IM, Schrage's result is exactly IA·idum mod IM (its two terms stay within ±IM), and
/// that is computed here by the Mersenne reduction of IM = 2³¹ − 1 ([`mersenne_step`]): one
/// multiplication instead of a division and three multiplications, so the noise image's serial chain
/// of draws (one step each) is shorter. Any other idum (a huge seed's first steps) takes Schrage's
/// formula itself.
#[inline]
fn park_miller(idum: &mut i64) {
    if 0 < *idum && *idum < IM {
        *idum = mersenne_step(*idum as u64) as i64;
        return;
    }
    schrage(idum);
}

/// IA·idum mod IM for 0 < idum < IM (the result is in the same range).
#[inline(always)]
fn mersenne_step(idum: u64) -> u64 {
    let p = IA as u64 * idum; // < 2^46
    let r = (p & IM as u64) + (p >> 31); // ≡ p (mod 2^31 − 1), at most IM + 2^15
    if r >= IM as u64 {
        r - IM as u64
    } else {
        r
    }
}

/// IA²·idum mod IM for 0 < idum < IM: two steps of [`mersenne_step`] at once (same range).
#[inline(always)]
fn mersenne_step2(idum: u64) -> u64 {
    const IA2: u64 = (IA as u64 * IA as u64) % IM as u64;
    let p = IA2 * idum; // < 2^62
    let r = (p & IM as u64) + (p >> 31); // ≡ p, below 2^32
    let r = (r & IM as u64) + (r >> 31); // ≡ p, at most IM + 1
    if r >= IM as u64 {
        r - IM as u64
    } else {
        r
    }
}

/// The C's step: `k=(*idum)/IQ; *idum=IA*(*idum-k*IQ)-IR*k; if (*idum < 0) *idum += IM;`.
#[inline]
fn schrage(idum: &mut i64) {
    let k = *idum / IQ;
    *idum = IA * (*idum - k * IQ) - IR * k;
    if *idum < 0 {
        *idum += IM;
    }
}

/// ran1's deviate from the table entry it returns: `temp=AM*iy` in double stored in a float, and
/// `if (temp > RNMX) return RNMX;` (the comparison promotes temp back to double).
#[inline(always)]
fn uniform(iy: i64) -> f32 {
    let temp = (AM * iy as f64) as f32;
    if temp as f64 > RNMX {
        RNMX as f32
    } else {
        temp
    }
}

impl NrRandom {
    /// The state at program start: empty table, `oldm = -1`, no spare Gaussian.
    pub fn new() -> Self {
        NrRandom::default()
    }

    /// Uniform deviate in (0,1), exactly as the C `ran1(&idum)`.
    ///
    /// A non-positive `idum` (or a never-loaded table) reloads the shared shuffle table; a positive one
    /// continues with the table left by whichever stream used it last.
    #[inline]
    pub fn ran1(&mut self, idum: &mut i64) -> f32 {
        self.table.ran1(idum)
    }

    /// Gaussian deviate, exactly as the C `gaussdev(&idum)` (polar Box–Muller with a cached spare).
    pub fn gaussdev(&mut self, idum: &mut i64) -> f32 {
        let NrRandom { table, cache } = self;
        cache.gaussdev(&mut || table.ran1(idum))
    }

    /// `poidev` for a mean below 12 whose `exp(-xm)` (as the C computes it: float negation, exp in
    /// double, stored as float) was computed beforehand, e.g. in parallel for a block of pixels. Same
    /// draws, same result and same cached state as [`NrRandom::poidev`].
    #[inline]
    pub fn poidev_small(&mut self, xm: f32, g: f32, idum: &mut i64) -> f32 {
        debug_assert!((xm as f64) < 12.0 && g == ((-xm) as f64).exp() as f32);
        self.cache.note_small(xm, g);
        let mut em: f32 = -1.0;
        let mut t: f32 = 1.0;
        loop {
            em += 1.0;
            t *= self.ran1(idum); // float × float
            if t <= g {
                break;
            }
        }
        em
    }

    /// Poisson deviate, exactly as the C `poidev(xm,&idum)` (see [`DeviateCache::poidev`]).
    pub fn poidev(&mut self, xm: f32, idum: &mut i64) -> f32 {
        let NrRandom { table, cache } = self;
        cache.poidev(xm, &mut || table.ran1(idum))
    }

    /// The two parts: the shuffle table and the poidev/gaussdev caches.
    pub fn into_parts(self) -> (Ran1Table, DeviateCache) {
        (self.table, self.cache)
    }

    /// The state made of the two parts of [`NrRandom::into_parts`].
    pub fn from_parts(table: Ran1Table, cache: DeviateCache) -> Self {
        NrRandom { table, cache }
    }
}

impl Ran1Table {
    /// nanoBragg.c's `ran1`: a non-positive `idum` (or a never-loaded table) reloads the table.
    #[inline]
    pub fn ran1(&mut self, idum: &mut i64) -> f32 {
        if *idum <= 0 || self.iy == 0 {
            // `if(-(*idum) < 1) *idum=1; else *idum = -(*idum);`
            let neg = idum.wrapping_neg();
            *idum = if neg < 1 { 1 } else { neg };
            for j in (0..NTAB + 8).rev() {
                park_miller(idum);
                if j < NTAB {
                    self.iv[j] = *idum;
                }
            }
            self.iy = self.iv[0];
        }
        park_miller(idum);
        let j = (self.iy / NDIV) as usize;
        self.iy = self.iv[j];
        self.iv[j] = *idum;
        uniform(self.iy)
    }

    /// `out.len()` successive [`Ran1Table::ran1`] deviates.
    ///
    /// When `idum`, `iy` and every table entry lie in 1..IM (always so after the first draw of a
    /// stream whose seed is below IM), ran1 never reloads the table, `iy/NDIV` is `iy >> 26` and every
    /// value fits 32 bits: the loop then keeps the table in a local array, so the two serial chains
    /// (idum's step, and iy's look-up of the entry the previous iy chose) run back to back without
    /// the reload test. Anything else takes `ran1` itself.
    pub fn fill(&mut self, idum: &mut i64, out: &mut [f32]) {
        let ok = |v: i64| 0 < v && v < IM;
        if !(ok(*idum) && ok(self.iy) && self.iv.iter().all(|&v| ok(v))) {
            for o in out {
                *o = self.ran1(idum);
            }
            return;
        }
        const _: () = assert!(NDIV == 1 << 26 && NTAB == 32);
        // entries 32..64 are never chosen (iy < 2^31); they make any `iy >> 26` of a u32 an index
        // in bounds, so no mask or bounds check lengthens iy's chain
        let mut iv = [0u32; 2 * NTAB];
        for (t, &v) in iv.iter_mut().zip(&self.iv) {
            *t = v as u32;
        }
        let mut iy = self.iy as u32;
        // idum's chain in two interleaved halves (odd and even steps, each one step of IA² mod IM),
        // so that it is shorter than iy's
        let mut last = *idum as u64; // the idum of the last draw made
        let mut da = mersenne_step(last);
        let mut db = mersenne_step(da);
        let mut pairs = out.chunks_exact_mut(2);
        for pair in &mut pairs {
            for (o, d) in pair.iter_mut().zip([da, db]) {
                let j = (iy >> 26) as usize;
                iy = iv[j];
                iv[j] = d as u32;
                *o = uniform(iy as i64);
            }
            last = db;
            da = mersenne_step2(da);
            db = mersenne_step2(db);
        }
        // da is the next draw's idum
        for o in pairs.into_remainder() {
            let j = (iy >> 26) as usize;
            iy = iv[j];
            iv[j] = da as u32;
            *o = uniform(iy as i64);
            last = da;
        }
        for (v, &t) in self.iv.iter_mut().zip(&iv) {
            *v = t as i64;
        }
        self.iy = iy as i64;
        *idum = last as i64;
    }
}

impl DeviateCache {
    /// Gaussian deviate from the uniforms of `ran1`, exactly as the C `gaussdev`.
    pub fn gaussdev(&mut self, ran1: &mut impl FnMut() -> f32) -> f32 {
        if !self.iset {
            let (mut v1, mut v2, mut rsq): (f32, f32, f32);
            loop {
                // `v1=2.0*ran1(idum)-1.0;`: double arithmetic, stored as float.
                v1 = (2.0 * ran1() as f64 - 1.0) as f32;
                v2 = (2.0 * ran1() as f64 - 1.0) as f32;
                rsq = v1 * v1 + v2 * v2; // float arithmetic
                if !(rsq as f64 >= 1.0 || rsq == 0.0) {
                    break;
                }
            }
            // `fac=sqrt(-2.0*log(rsq)/rsq);` in double, stored as float.
            let r = rsq as f64;
            let fac = (-2.0 * r.ln() / r).sqrt() as f32;
            self.gset = v1 * fac;
            self.iset = true;
            v2 * fac
        } else {
            self.iset = false;
            self.gset
        }
    }

    /// What poidev leaves in its statics after a mean `xm` below 12 whose `g=exp(-xm)` is `g`
    /// (`if (xm != oldm) { oldm=xm; g=exp(-xm); }`): for callers that draw such means themselves.
    #[inline(always)]
    pub fn note_small(&mut self, xm: f32, g: f32) {
        self.oldm = xm;
        self.g = g;
    }

    /// Poisson deviate from the uniforms of `ran1`, exactly as the C `poidev(xm,&idum)`.
    ///
    /// Three regimes as in the C: mean > 1e6 → Gaussian approximation; mean < 12 → product of uniforms
    /// (a mean of 0 still consumes one draw); otherwise Lorentzian rejection. The per-mean constants
    /// are cached in `self` and shared between the two lower regimes, as the C's statics are.
    pub fn poidev(&mut self, xm: f32, ran1: &mut impl Uniforms) -> f32 {
        if xm.is_nan() {
            // the C's rejection loop never ends on a NaN mean; callers refuse non-finite images, and
            // whatever still reaches here gives NaN back (no draw) instead of hanging
            return xm;
        }
        if xm as f64 > 1.0e6 {
            // `return xm+sqrt(xm)*gaussdev(idum);`: double arithmetic, returned as float.
            let gd = self.gaussdev(&mut || ran1.next()) as f64;
            return gaussian_approximation(xm as f64, gd) as f32;
        }
        let mut em: f32;
        if (xm as f64) < 12.0 {
            if xm != self.oldm {
                self.oldm = xm;
                // `g=exp(-xm)`: float negation, exp in double, stored as float.
                self.g = ((-xm) as f64).exp() as f32;
            }
            em = -1.0;
            let mut t: f32 = 1.0;
            loop {
                em += 1.0;
                t *= ran1.next(); // float × float
                if t <= self.g {
                    break;
                }
            }
        } else {
            if xm != self.oldm {
                self.oldm = xm;
                [self.sq, self.alxm, self.g] = large_mean_terms(xm);
            }
            em = self.reject(xm, ran1);
        }
        em
    }

    /// [`DeviateCache::poidev`] of a mean from 12 to 1e6 whose [`large_mean_terms`] were computed
    /// ahead (elsewhere, or on another thread): the same deviate and the same cache afterwards (the
    /// C's statics hold these terms after such a mean, whether it computed them or found them there).
    #[inline(never)] // off the loop of the small means around it (inlined, it slowed that loop)
    pub fn poidev_large(&mut self, xm: f32, terms: [f32; 3], ran1: &mut impl Uniforms) -> f32 {
        debug_assert!(is_large_mean(xm) && terms == large_mean_terms(xm));
        self.oldm = xm;
        [self.sq, self.alxm, self.g] = terms;
        self.reject(xm, ran1)
    }

    /// poidev's Lorentzian rejection loop for a mean of 12 or more, with its terms in `self`.
    fn reject(&self, xm: f32, ran1: &mut impl Uniforms) -> f32 {
        let counts = gammln_counts();
        loop {
            let (mut y, mut em): (f32, f32);
            loop {
                // `y=tan(M_PI*ran1(idum));` in double, stored as float.
                y = ran1.next_tan_pi();
                em = self.sq * y + xm; // float arithmetic, no FMA
                if (em as f64) >= 0.0 {
                    break;
                }
            }
            let k;
            (em, k) = floor_count(em);
            // `t=0.9*(1.0+y*y)*exp(em*alxm-gammln(em+1.0)-g);`: y*y and the exponent's argument
            // in float, the rest in double, the result stored as float.
            let gam = match counts.get(k) {
                Some(&v) => v,
                None => gammln((em as f64 + 1.0) as f32),
            };
            let arg: f32 = em * self.alxm - gam - self.g;
            let t = (0.9 * (1.0 + (y * y) as f64) * (arg as f64).exp()) as f32;
            if ran1.next() <= t {
                return em;
            }
        }
    }
}

/// poidev's deviate above a mean of 1e6, `xm + sqrt(xm)·gd` in double (the C's `return
/// xm+sqrt(xm)*gaussdev(idum);`), except that an infinite mean (a float image times a photon scale
/// beyond a float) gives +infinity, a saturated pixel: the C's inf + inf·gd is NaN for gd <= 0, which
/// its `(unsigned short)` cast wrote as 0 amid saturated pixels. The draw is made either way, so the
/// random stream is the C's.
#[inline]
pub fn gaussian_approximation(xm: f64, gd: f64) -> f64 {
    if xm == f64::INFINITY {
        xm
    } else {
        xm + xm.sqrt() * gd
    }
}

/// A mean that poidev's rejection loop draws from: 12 to 1e6 (below, the product of uniforms; above,
/// the Gaussian approximation; NaN neither).
#[inline(always)]
pub fn is_large_mean(xm: f32) -> bool {
    (12.0..=1.0e6).contains(&(xm as f64))
}

/// poidev's terms of a mean of 12 or more (the C's statics `sq`, `alxm`, `g` for it): `sq=sqrt(2.0*xm)`,
/// `alxm=log(xm)` in double stored as floats, `g=xm*alxm-gammln(xm+1.0)` (a float product; gammln's
/// argument is (float)(double xm + 1.0)). A function of the mean alone, so it can be computed ahead
/// of the serial draws.
#[inline]
pub fn large_mean_terms(xm: f32) -> [f32; 3] {
    let alxm = (xm as f64).ln() as f32;
    [(2.0 * xm as f64).sqrt() as f32, alxm, xm * alxm - gammln((xm as f64 + 1.0) as f32)]
}

/// Means whose terms `large_mean_terms_lanes` computes at once.
pub const TERMS_LANES: usize = 8;

/// [`large_mean_terms`] of `TERMS_LANES` means without libm, NaN (in the first term) where it cannot
/// vouch for the floats: the three logarithms by [`crate::base::lane_math::ln1`] (within a few ulps of
/// libm's), each float kept only where no float rounding boundary lies within 2⁻⁴⁶ of the double
/// it is rounded from (for gammln's result, 2⁻⁴⁶ of the magnitudes its logarithms' errors pass
/// through: libm's within an ulp then rounds to the same float); the square root and every other
/// operation are the C's. NaN too for means outside 12 to 1e6. Checked against libm for every float
/// mean in that range (`large_mean_terms_fast_is_libm_for_every_mean`).
#[inline(always)]
fn large_mean_terms_fast_lanes(xm: &[f32; TERMS_LANES]) -> [[f32; 3]; TERMS_LANES] {
    const MARGIN: f64 = 1.0 / 70_368_744_177_664.0; // 2^-46
    let mut out = [[0.0f32; 3]; TERMS_LANES];
    for l in 0..TERMS_LANES {
        let large = is_large_mean(xm[l]);
        let m = if large { xm[l] } else { 12.0 };
        let la = ln1(m as f64);
        let alxm = la as f32;
        let ok_a = rounds_to_one_float(la, la.abs() * MARGIN);
        // gammln((float)(xm + 1.0)) as `gammln` computes it
        let x = ((m as f64 + 1.0) as f32) as f64;
        let a = x + 5.5;
        let p = (x + 0.5) * ln1(a);
        let tmp = a - p;
        let (mut y, mut ser) = (x, 1.000000000190015);
        for c in GAMMLN_COF {
            y += 1.0;
            ser += c / y;
        }
        let l2 = ln1(2.5066282746310005 * ser / x);
        let r = -tmp + l2;
        let gam = r as f32;
        let e = (p.abs() + tmp.abs() + l2.abs() + r.abs()) * MARGIN;
        let ok_g = rounds_to_one_float(r, e);
        let sq = (2.0 * m as f64).sqrt() as f32;
        out[l] = [if large & ok_a & ok_g { sq } else { f32::NAN }, alxm, m * alxm - gam];
    }
    out
}

/// [`large_mean_terms_fast_lanes`] compiled for the widest vectors the CPU has.
fn large_mean_terms_fast(xm: &[f32; TERMS_LANES]) -> [[f32; 3]; TERMS_LANES] {
    crate::base::cpu::widest_call!(large_mean_terms_fast_lanes(xm: &[f32; TERMS_LANES]) -> [[f32; 3]; TERMS_LANES])
}

/// [`large_mean_terms`] of `TERMS_LANES` means, each libm's (computed in vectors where that is
/// provably the same floats, `large_mean_terms_fast_lanes`). Means outside 12 to 1e6 give NaN.
pub fn large_mean_terms_lanes(xm: &[f32; TERMS_LANES]) -> [[f32; 3]; TERMS_LANES] {
    let mut t = large_mean_terms_fast(xm);
    for (t, &m) in t.iter_mut().zip(xm) {
        if t[0].is_nan() && is_large_mean(m) {
            *t = large_mean_terms(m);
        }
    }
    t
}

/// Uniforms of one ran1 stream drawn ahead in blocks ([`Ran1Table::fill`]) for a consumer that takes
/// them one by one ([`Ran1Ahead::next`]): the same deviates in the same order as calling ran1 for
/// each, whoever consumes them (ran1's sequence does not depend on what its deviates are used for).
/// [`Ran1Ahead::finish`] gives the state after exactly the deviates taken.
pub struct Ran1Ahead {
    /// The state before the buffer's first deviate (what `finish` replays from).
    start: Ran1Table,
    start_idum: i64,
    /// The state after the buffer's last deviate.
    table: Ran1Table,
    idum: i64,
    buf: Box<[f32; AHEAD]>,
    /// Deviates in `buf`, and how many of them were taken.
    len: usize,
    pos: usize,
    /// [`tan_pi_fast`] of `buf`'s deviates from the last one a rejection loop took up to `tan_to`:
    /// computed `TAN_LANES` at a time when that loop first needs one beyond (bright images take
    /// most of them; a lone large mean costs one short vector pass, about a libm tan).
    tan: Box<[f32; AHEAD]>,
    tan_to: usize,
    /// Passes of [`Ran1Ahead::tan_ahead`] over this buffer: from [`TAN_LONG_AFTER`] on (a bright
    /// image, whose rejection loops take deviates all along, or a sparse image's spot) [`TAN_LONG`]
    /// deviates at once, whose registers' chains overlap instead of waiting one on another.
    tan_passes: usize,
}

/// Short passes of `tan_ahead` over one buffer after which it computes [`TAN_LONG`] at a time.
const TAN_LONG_AFTER: usize = 4;
/// Deviates of a long pass: enough registers to overlap, few wasted where a spot ends.
const TAN_LONG: usize = 128;

/// Deviates drawn ahead at a time: 16 KiB, within the L1 cache beside the rows.
pub const AHEAD: usize = 4096;

impl Ran1Ahead {
    /// The stream continuing from `table`/`idum`.
    pub fn new(table: Ran1Table, idum: i64) -> Self {
        Ran1Ahead { start: table.clone(), start_idum: idum, table, idum, buf: Box::new([0.0; AHEAD]), len: 0, pos: 0, tan: Box::new([0.0; AHEAD]), tan_to: 0, tan_passes: 0 }
    }

    /// The stream's next deviate.
    #[inline(always)]
    pub fn next(&mut self) -> f32 {
        let mut pos = self.pos;
        let u = self.next_at(&mut pos);
        self.pos = pos;
        u
    }

    /// The next deviate for a loop that holds the position itself (in a register, not in `self`):
    /// `pos` from [`Ran1Ahead::position`], and given back by [`Ran1Ahead::set_position`] before
    /// any other use of `self`.
    #[inline(always)]
    pub fn next_at(&mut self, pos: &mut usize) -> f32 {
        if *pos == self.len {
            self.refill();
            *pos = 0;
        }
        // pos < len <= AHEAD: the mask only drops the bounds check
        let u = self.buf[*pos & (AHEAD - 1)];
        *pos += 1;
        u
    }

    /// The `n` deviates from `pos` on (see [`Ran1Ahead::next_at`]) where the buffer holds them all,
    /// for a caller that then takes them by moving `pos` past them.
    #[inline(always)]
    pub fn ahead_at(&self, pos: usize, n: usize) -> Option<&[f32]> {
        self.buf[..self.len].get(pos..pos + n)
    }

    /// Deviates taken from the buffer (see [`Ran1Ahead::next_at`]).
    #[inline(always)]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Gives back the position of a loop's [`Ran1Ahead::next_at`] calls.
    #[inline(always)]
    pub fn set_position(&mut self, pos: usize) {
        debug_assert!(pos <= self.len);
        self.pos = pos;
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self) {
        self.start.clone_from(&self.table);
        self.start_idum = self.idum;
        self.table.fill(&mut self.idum, &mut self.buf[..]);
        (self.len, self.pos, self.tan_to, self.tan_passes) = (AHEAD, 0, 0, 0);
    }

    /// [`tan_pi_fast`] of the deviates from `pos` on (within the buffer): `TAN_LANES` of them, or after
    /// [`TAN_LONG_AFTER`] such passes over this buffer, [`TAN_LONG`].
    #[inline(never)]
    fn tan_ahead(&mut self) {
        self.tan_passes += 1;
        let n = if self.tan_passes > TAN_LONG_AFTER { TAN_LONG } else { TAN_LANES };
        let end = (self.pos + n).min(self.len);
        if !crate::base::cpu::fma_is_fast() {
            // sincos1's fused multiply-adds would be library calls: libm's tan is faster
            self.tan[self.pos..end].fill(f32::NAN);
        } else {
            for from in (self.pos..end).step_by(TAN_LANES) {
                let n = TAN_LANES.min(end - from);
                let mut u = [0.5f32; TAN_LANES];
                u[..n].copy_from_slice(&self.buf[from..from + n]);
                self.tan[from..from + n].copy_from_slice(&tan_pi_fast(&u)[..n]);
            }
        }
        self.tan_to = end;
    }

    /// The table and idum after exactly the deviates taken (the untaken rest of the buffer is drawn
    /// again from the buffer's start state).
    pub fn finish(self) -> (Ran1Table, i64) {
        if self.pos == self.len {
            return (self.table, self.idum);
        }
        let (mut table, mut idum) = (self.start, self.start_idum);
        for _ in 0..self.pos {
            table.ran1(&mut idum);
        }
        (table, idum)
    }
}

impl Uniforms for Ran1Ahead {
    #[inline(always)]
    fn next(&mut self) -> f32 {
        Ran1Ahead::next(self)
    }

    /// [`tan_pi`] of the next deviate: computed ahead with its neighbours where that is exact
    /// (`tan_pi_fast`), else libm's.
    #[inline(always)]
    fn next_tan_pi(&mut self) -> f32 {
        if self.pos == self.len {
            self.refill();
        }
        if self.pos >= self.tan_to {
            self.tan_ahead();
        }
        // pos < tan_to <= len <= AHEAD: the masks only drop the bounds checks
        let i = self.pos & (AHEAD - 1);
        let (u, y) = (self.buf[i], self.tan[i]);
        self.pos += 1;
        if y.is_nan() {
            tan_pi(u)
        } else {
            y
        }
    }
}

/// `gammln(em+1.0)` of poidev's rejection loop (the argument `(float)(double em + 1.0)`) for any
/// float `em`, as [`DeviateCache::reject`] takes it: from [`gammln_counts`] for a small count, else
/// computed as the C does (the tests check the table against it).
#[cfg(test)]
fn gammln_count(em: f32) -> f32 {
    // `as` saturates (NaN to 0): k equals em only when em is that integer (or −0, whose argument
    // is 1.0 as 0's is)
    let k = em as usize;
    match gammln_counts().get(k) {
        Some(&v) if k as f32 == em => v,
        _ => gammln((em as f64 + 1.0) as f32),
    }
}

/// `gammln(k+1.0)` of the counts k below 1024 that almost every mean below 1000 gives (the same
/// function of the same argument, so the same floats), computed once.
fn gammln_counts() -> &'static [f32] {
    const COUNTS: usize = 1024;
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| (0..COUNTS).map(|k| gammln((k as f64 + 1.0) as f32)).collect())
}

/// The C `gammln`'s Lanczos coefficients.
const GAMMLN_COF: [f64; 6] = [76.18009172947146, -86.50532032941677, 24.01409824083091, -1.231739572450155, 0.1208650973866179e-2, -0.5395239384953e-5];

/// ln Γ(xx) by the Lanczos series, as the C `gammln`: float in, double inside, float out.
pub fn gammln(xx: f32) -> f32 {
    let x = xx as f64;
    let mut y = x;
    let mut tmp = x + 5.5;
    tmp -= (x + 0.5) * tmp.ln();
    let mut ser = 1.000000000190015;
    for c in GAMMLN_COF {
        y += 1.0;
        ser += c / y;
    }
    (-tmp + (2.5066282746310005 * ser / x).ln()) as f32
}

/// `mosaic_rotation_umat(mosaicity, umat, &seed)`: row-major 3x3 rotation.
///
/// A random rotation about an isotropic axis by an angle up to `mosaicity` (radians; the C's random
/// misset passes 90.0 here, also as radians). The angle is computed in single precision, as the C's
/// `powf` call on float-converted arguments forces.
pub fn mosaic_rotation_umat(rng: &mut NrRandom, mosaicity: f32, idum: &mut i64) -> [f64; 9] {
    // `r1= (double) 2.0*ran1(seed)-1.0;` — three draws, in this order.
    let r1 = 2.0 * rng.ran1(idum) as f64 - 1.0;
    let r2 = 2.0 * rng.ran1(idum) as f64 - 1.0;
    let r3 = 2.0 * rng.ran1(idum) as f64 - 1.0;

    let xyrad = (1.0 - r2 * r2).sqrt();
    // `rot = mosaicity*powf((1.0-r3*r3),(1.0/3.0));`: powf on floats, float product, then double.
    let rot = (mosaicity * ((1.0 - r3 * r3) as f32).powf((1.0f64 / 3.0) as f32)) as f64;

    let v1 = xyrad * (PI * r1).sin();
    let v2 = xyrad * (PI * r1).cos();
    let v3 = r2;

    let t1 = rot.cos();
    let t2 = 1.0 - t1;
    let t3 = v1 * v1;
    let t6 = t2 * v1;
    let t7 = t6 * v2;
    let t8 = rot.sin();
    let t9 = t8 * v3;
    let t11 = t6 * v3;
    let t12 = t8 * v2;
    let t15 = v2 * v2;
    let t19 = t2 * v2 * v3;
    let t20 = t8 * v1;
    let t24 = v3 * v3;

    [
        t1 + t2 * t3,
        t7 - t9,
        t11 + t12,
        t7 + t9,
        t1 + t2 * t15,
        t19 - t20,
        t11 - t12,
        t19 + t20,
        t1 + t2 * t24,
    ]
}

/// Normalises `v` in place when its length is positive (the C's `if(m>0){x/=m;...}`).
#[inline]
fn normalize_if_positive(v: &mut [f64; 3], m: f64) {
    if m > 0.0 {
        v[0] /= m;
        v[1] /= m;
        v[2] /= m;
    }
}

#[inline]
fn norm(v: &[f64; 3]) -> f64 {
    crate::base::vec3::magnitude(v)
}

/// Normalised cross products x×y, y×z, z×x (the C's arithmetic, as `vec3::cross`).
fn crosses(x: &[f64; 3], y: &[f64; 3], z: &[f64; 3]) -> ([f64; 3], [f64; 3], [f64; 3]) {
    let unit = |mut v: [f64; 3]| {
        let m = norm(&v);
        normalize_if_positive(&mut v, m);
        v
    };
    (unit(crate::base::vec3::cross(x, y)), unit(crate::base::vec3::cross(y, z)), unit(crate::base::vec3::cross(z, x)))
}

/// `umat2misset(umat, missets)`: rotations about x, y, z in radians.
///
/// Returns the C's `missets[1..=3]`. The row repair steps are kept even though a matrix from
/// [`mosaic_rotation_umat`] never needs them, so that the normalisations round the same way.
pub fn umat2misset(umat: &[f64; 9]) -> [f64; 3] {
    let mut x = [umat[0], umat[1], umat[2]];
    let mut y = [umat[3], umat[4], umat[5]];
    let mut z = [umat[6], umat[7], umat[8]];

    let mx = norm(&x);
    let my = norm(&y);
    let mz = norm(&z);
    normalize_if_positive(&mut x, mx);
    normalize_if_positive(&mut y, my);
    normalize_if_positive(&mut z, mz);

    if mx >= 0.0 && my <= 0.0 && mz <= 0.0 {
        y = [0.0, 1.0, 0.0];
        z = [0.0, 0.0, 1.0];
    }
    if mx <= 0.0 && my >= 0.0 && mz <= 0.0 {
        x = [1.0, 0.0, 0.0];
        z = [0.0, 0.0, 1.0];
    }
    if mx <= 0.0 && my <= 0.0 && mz >= 0.0 {
        x = [1.0, 0.0, 0.0];
        y = [0.0, 1.0, 0.0];
    }

    // Substitute any empty row by the cross product of the other two; done twice, as in the C.
    for _ in 0..2 {
        let (xcy, ycz, zcx) = crosses(&x, &y, &z);
        if mx <= 0.0 {
            x = ycz;
        }
        if my <= 0.0 {
            y = zcx;
        }
        if mz <= 0.0 {
            z = xcy;
        }
    }

    let mx = norm(&x);
    let my = norm(&y);
    let mz = norm(&z);
    normalize_if_positive(&mut x, mx);
    normalize_if_positive(&mut y, my);
    normalize_if_positive(&mut z, mz);

    let (uxx, uxy) = (x[0], x[1]);
    let (uyx, uyy) = (y[0], y[1]);
    let (uzx, uzy, uzz) = (z[0], z[1], z[2]);
    if uzx * uzx < 1.0 {
        [
            uzy.atan2(uzz),
            (-uzx).atan2((uzy * uzy + uzz * uzz).sqrt()),
            uyx.atan2(uxx),
        ]
    } else {
        [
            1f64.atan2(1.0) * 4.0,
            1f64.atan2(1.0) * 2.0,
            uxy.atan2(-uyy),
        ]
    }
}

#[cfg(test)]
mod tests {
    //! Expected values come from the C functions themselves (copied out of nanoBragg.c into a throwaway
    //! program outside the repository, built with gcc -O2 against glibc 2.36), printed as bit patterns.
    use super::*;

    /// `-atoi` in int: −2147483648 stays negative, as the C's `seed:` line prints it.
    #[test]
    fn seeds_are_negated_as_an_int() {
        assert_eq!(c_negated_seed(5), -5);
        assert_eq!(c_negated_seed(-2147483647), 2147483647);
        assert_eq!(c_negated_seed(-2147483648), -2147483648);
        assert_eq!(c_negated_seed(1 << 40), -(1 << 40));
    }

    /// An infinite mean (a photon scale beyond a float) is a saturated pixel, not NaN (which became 0
    /// in the noise image), and takes the same draws as any mean above 1e6.
    #[test]
    fn an_infinite_mean_gives_an_infinite_deviate() {
        for seed in 1..40 {
            let (mut a, mut b) = (NrRandom::new(), NrRandom::new());
            let (mut ia, mut ib) = (-seed, -seed);
            assert_eq!(a.poidev(f32::INFINITY, &mut ia), f32::INFINITY);
            let _ = b.poidev(2e30, &mut ib);
            assert_eq!(a.ran1(&mut ia), b.ran1(&mut ib));
        }
        for gd in [-2.0, -0.0, 0.0, 1.5] {
            assert_eq!(gaussian_approximation(f64::INFINITY, gd), f64::INFINITY);
        }
        assert_eq!(gaussian_approximation(4e6, -1.0), 4e6 - 2e3);
    }

    /// The reduced step is Schrage's for every idum: at the ends of 0 < idum < IM, around multiples
    /// of IQ and of 2^31/IA, outside the range (Schrage's own path), and along the sequence.
    #[test]
    fn park_miller_is_schrage() {
        let check = |z: i64| {
            let (mut a, mut b) = (z, z);
            park_miller(&mut a);
            schrage(&mut b);
            assert_eq!(a, b, "idum {z}");
        };
        for z in [1, 2, IA, IQ - 1, IQ, IQ + 1, IM / 2, IM - 2, IM - 1, IM, IM + 1, 0, -1, -IM, i64::MAX / IA, 5_000_000_000] {
            check(z);
        }
        for k in 1..20_000i64 {
            check(k * IQ - 1);
            check(k * IQ);
            check(((k << 31) / IA).min(IM - 1));
        }
        let mut z = 12345;
        for _ in 0..2_000_000 {
            check(z);
            park_miller(&mut z);
            assert_eq!(mersenne_step2(z as u64), mersenne_step(mersenne_step(z as u64)), "idum {z}");
        }
        for z in [1u64, 2, IA as u64, (IM - 1) as u64, (IM - 2) as u64, (IM / 2) as u64] {
            assert_eq!(mersenne_step2(z), mersenne_step(mersenne_step(z)), "idum {z}");
        }
    }

    /// A state reached by `seed` after `draws` ran1 calls, with `pre` calls of another stream first.
    fn state(pre: Option<i64>, seed: i64, draws: usize) -> (NrRandom, i64) {
        let mut rng = NrRandom::new();
        if let Some(mut p) = pre {
            for _ in 0..50 {
                rng.ran1(&mut p);
            }
        }
        let mut idum = seed;
        for _ in 0..draws {
            rng.ran1(&mut idum);
        }
        (rng, idum)
    }

    const SEEDS: [i64; 9] = [0, -1, 1, 7, -12345, 2147483647, -2147483647, 2147483646, 5_000_000_000];

    /// poidev of large means with their terms computed ahead (`poidev_large`) is poidev: the same
    /// deviates, stream and statics, for means over the whole range (12 to 1e6, repeated ones, the
    /// edges) between small means that share the statics.
    #[test]
    fn poidev_large_is_poidev() {
        let means = [12.0f32, 12.000001, 13.5, 13.5, 20.0, 0.5, 20.0, 150.0, 1000.0, 1023.5, 4096.7, 65535.0, 999_999.94, 1.0e6, 3.0, 3.0, 37.25];
        for seed in SEEDS {
            let (mut a, mut ia) = state(Some(-3), seed, 5);
            let (mut b, mut ib) = (a.clone(), ia);
            for _ in 0..40 {
                for &m in &means {
                    let want = a.poidev(m, &mut ia);
                    let NrRandom { table, cache } = &mut b;
                    let got = if (12.0..=1.0e6).contains(&(m as f64)) {
                        cache.poidev_large(m, large_mean_terms(m), &mut || table.ran1(&mut ib))
                    } else {
                        cache.poidev(m, &mut || table.ran1(&mut ib))
                    };
                    assert_eq!(got.to_bits(), want.to_bits(), "seed {seed} mean {m}");
                    assert_eq!((format!("{b:?}"), ib), (format!("{a:?}"), ia), "seed {seed} mean {m}");
                }
            }
        }
    }

    /// Blocks of `fill` are ran1's deviates one by one, and leave the same state: from fresh and
    /// loaded tables, at the seeds' edges (0, ±IM, above IM) and mid-stream.
    #[test]
    fn fill_is_ran1() {
        for pre in [None, Some(-3), Some(9_000_000_000)] {
            for seed in SEEDS {
                for draws in [0, 1, 40] {
                    let (mut a, mut ia) = state(pre, seed, draws);
                    let (mut b, mut ib) = (a.clone(), ia);
                    for len in [0, 1, 2, 31, 33, 1000, 4096] {
                        let mut got = vec![0.0f32; len];
                        a.table.fill(&mut ia, &mut got);
                        let want: Vec<f32> = (0..len).map(|_| b.ran1(&mut ib)).collect();
                        assert_eq!(bits(&got), bits(&want), "pre {pre:?} seed {seed} draws {draws} len {len}");
                        assert_eq!((&a.table, ia), (&b.table, ib));
                    }
                }
            }
        }
    }

    /// Deviates taken one by one from [`Ran1Ahead`] are ran1's, and `finish` leaves ran1's state after
    /// exactly those taken, for counts around the block size.
    #[test]
    fn ahead_is_ran1_and_finishes_exactly() {
        for seed in SEEDS {
            for taken in [0, 1, 2, AHEAD - 1, AHEAD, AHEAD + 1, 3 * AHEAD + 17] {
                let (a, ia) = state(Some(-5), seed, 0);
                let (mut b, mut ib) = (a.clone(), ia);
                let mut ahead = Ran1Ahead::new(a.table.clone(), ia);
                for k in 0..taken {
                    assert_eq!(ahead.next().to_bits(), b.ran1(&mut ib).to_bits(), "seed {seed} draw {k}");
                }
                assert_eq!(ahead.finish(), (b.table.clone(), ib), "seed {seed} taken {taken}");
            }
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// `tan_pi_fast` of the floats `from..to` (bit patterns), eight at a time: libm's float wherever
    /// it gives one; the NaNs (libm's used instead) counted.
    fn tan_pi_fast_matches_libm(from: u32, to: u32) -> u64 {
        let mut nans = 0;
        let mut b = from;
        while b < to {
            let u: [f32; TAN_LANES] = std::array::from_fn(|l| f32::from_bits((b + l as u32).min(to - 1)));
            for (l, y) in tan_pi_fast(&u).into_iter().enumerate() {
                if y.is_nan() {
                    nans += 1;
                } else {
                    assert_eq!(y.to_bits(), tan_pi(u[l]).to_bits(), "u = {:e} ({:#x})", u[l], u[l].to_bits());
                }
            }
            b = b.saturating_add(TAN_LANES as u32);
        }
        nans
    }

    /// Against libm's tan: around the pole (u = 1/2), the zeros (0 and 1), the quadrant edges
    /// (1/4, 3/4), and ran1's own deviates; NaN (libm's tan taken) seldom, and outside (0, 1).
    #[test]
    fn tan_pi_fast_is_libm() {
        let mut nans = 0;
        let mut tried = 0;
        for centre in [0.0f32, 0.25, 0.5, 0.75, 1.0] {
            let c = centre.to_bits();
            let (lo, hi) = (c.saturating_sub(1 << 16), (c + (1 << 16)).min(1.0f32.to_bits() + 8));
            nans += tan_pi_fast_matches_libm(lo, hi);
            tried += (hi - lo) as u64;
        }
        let (mut rng, mut idum) = state(None, -7, 0);
        for _ in 0..200_000 {
            let u: [f32; TAN_LANES] = std::array::from_fn(|_| rng.ran1(&mut idum));
            for (l, y) in tan_pi_fast(&u).into_iter().enumerate() {
                tried += 1;
                if y.is_nan() {
                    nans += 1;
                } else {
                    assert_eq!(y.to_bits(), tan_pi(u[l]).to_bits(), "u = {:e}", u[l]);
                }
            }
        }
        // by design u = 0 and the few floats from 1 on; about one in 2^21 of the others
        assert!(nans <= 20 + tried / 100_000, "{nans} of {tried}");
        assert!(tan_pi_fast(&[0.0, -0.0, 1.0, 2.0, -0.5, f32::NAN, f32::INFINITY, f32::MIN_POSITIVE]).iter().take(7).all(|y| y.is_nan()));
    }

    /// Every float in (0, 1) (about 10⁹, a minute in release): run by hand when the fast tan changes
    /// (`cargo test --release --lib -- --ignored tan_pi_fast_is_libm_for_every_float`).
    #[test]
    #[ignore]
    fn tan_pi_fast_is_libm_for_every_float() {
        let nans = tan_pi_fast_matches_libm(1, 1.0f32.to_bits());
        eprintln!("{nans} floats left to libm");
    }

    /// The rejection loop's deviates from [`Ran1Ahead`] (y computed ahead) are ran1's: the same
    /// deviates and y as libm's tan of them, in any mix of plain and Lorentzian draws, across refills.
    #[test]
    fn ahead_tan_pi_is_ran1s() {
        for seed in SEEDS {
            let (a, ia) = state(Some(-5), seed, 0);
            let (mut b, mut ib) = (a.clone(), ia);
            let mut ahead = Ran1Ahead::new(a.table.clone(), ia);
            for k in 0..3 * AHEAD + 40 {
                let want = b.ran1(&mut ib);
                // runs of Lorentzian draws of every length, between plain ones
                if (k * k + k / 7) % 5 < 2 {
                    assert_eq!(Uniforms::next_tan_pi(&mut ahead).to_bits(), tan_pi(want).to_bits(), "seed {seed} draw {k}");
                } else {
                    assert_eq!(ahead.next().to_bits(), want.to_bits(), "seed {seed} draw {k}");
                }
            }
            assert_eq!(ahead.finish(), (b.table.clone(), ib), "seed {seed}");
        }
    }

    /// `large_mean_terms_lanes` of the means `from..to` (bit patterns) against `large_mean_terms`;
    /// returns how many the fast lanes left to libm.
    fn terms_match_libm(from: u32, to: u32, step: u32) -> u64 {
        let mut left = 0;
        let mut b = from;
        while b < to {
            let m: [f32; TERMS_LANES] = std::array::from_fn(|l| f32::from_bits((b + l as u32 * step).min(to - 1)));
            let fast = large_mean_terms_fast(&m);
            let got = large_mean_terms_lanes(&m);
            for l in 0..TERMS_LANES {
                left += fast[l][0].is_nan() as u64;
                assert_eq!(got[l].map(f32::to_bits), large_mean_terms(m[l]).map(f32::to_bits), "mean {:e} ({:#x})", m[l], m[l].to_bits());
            }
            b = b.saturating_add(TERMS_LANES as u32 * step);
        }
        left
    }

    /// The large means' terms in vectors are libm's: every float mean at the ends of the range and
    /// around powers of two, and a stride through the rest; few left to libm; NaN outside the range.
    #[test]
    fn large_mean_terms_lanes_are_libm() {
        let (lo, hi) = (12.0f32.to_bits(), 1.0e6f32.to_bits() + 1);
        let mut left = terms_match_libm(lo, lo + 100_000, 1) + terms_match_libm(hi - 100_000, hi, 1);
        for p in [16.0f32, 32.0, 1024.0, 65536.0, 524288.0] {
            left += terms_match_libm(p.to_bits() - 5000, p.to_bits() + 5000, 1);
        }
        left += terms_match_libm(lo, hi, 97);
        assert!(left < 200, "{left} left to libm");
        let out = large_mean_terms_lanes(&[11.999999, 0.0, -13.0, 1.0e6 * 1.0000001, f32::NAN, f32::INFINITY, 12.0, 1.0e6]);
        assert!(out[..6].iter().all(|t| t[0].is_nan()) && out[6..].iter().all(|t| !t[0].is_nan()));
    }

    /// Every float mean from 12 to 1e6 (about 1.4·10⁸, a few minutes in release): run by hand when
    /// the fast terms change (`cargo test --release --lib -- --ignored large_mean_terms_fast_is_libm_for_every_mean`).
    #[test]
    #[ignore]
    fn large_mean_terms_fast_is_libm_for_every_mean() {
        let left = terms_match_libm(12.0f32.to_bits(), 1.0e6f32.to_bits() + 1, 1);
        eprintln!("{left} means left to libm");
    }

    /// poidev's floor: the double floor stored as float, for every kind of count.
    #[test]
    fn floor_count_is_floor() {
        let mut x = 0.0f32;
        while x < 3.0e7 {
            for v in [x, f32::from_bits(x.to_bits() + 1), (x as f64 + 0.5) as f32] {
                assert_eq!(floor_count(v).0.to_bits(), ((v as f64).floor() as f32).to_bits(), "{v}");
                assert!(floor_count(v).1 == usize::MAX || floor_count(v).1 as f32 == floor_count(v).0, "{v}");
            }
            x = x * 1.01 + 0.37;
        }
        for v in [0.0f32, 0.5, 0.999_999_94, 1.0, 8_388_607.5, 8_388_608.0, 8_388_609.0, 16_777_216.0, 1.0e30, f32::INFINITY] {
            assert_eq!(floor_count(v).0.to_bits(), ((v as f64).floor() as f32).to_bits(), "{v}");
        }
    }


    #[test]
    fn ran1_matches_c() {
        let mut rng = NrRandom::new();
        let mut seed = -12345i64;
        let got: Vec<f32> = (0..8).map(|_| rng.ran1(&mut seed)).collect();
        assert_eq!(
            bits(&got),
            [
                0x3f6c51a1, 0x3eaa9231, 0x3e4aa343, 0x3f730d4d, 0x3f48a724, 0x3f7bdfdd, 0x3f6a046d,
                0x3f15520e
            ]
        );
        assert_eq!(seed, 1523644508);

        // A new non-positive seed reloads the shared table.
        let mut seed = -1i64;
        let got: Vec<f32> = (0..4).map(|_| rng.ran1(&mut seed)).collect();
        assert_eq!(bits(&got), [0x3ed4fdde, 0x3dbc5817, 0x3f41a41e, 0x3f079a6f]);

        // A positive seed keeps the table left by the previous stream.
        let mut seed = 5i64;
        let got: Vec<f32> = (0..3).map(|_| rng.ran1(&mut seed)).collect();
        assert_eq!(bits(&got), [0x3f6e3116, 0x3ec45a62, 0x3f27673c]);
        assert_eq!(seed, 1670799424);
    }

    #[test]
    fn ran1_positive_seed_on_fresh_table_becomes_one() {
        let (mut a, mut b) = (NrRandom::new(), NrRandom::new());
        let (mut sa, mut sb) = (5i64, -1i64);
        for _ in 0..10 {
            assert_eq!(a.ran1(&mut sa).to_bits(), b.ran1(&mut sb).to_bits());
        }
    }

    #[test]
    fn gaussdev_matches_c() {
        let mut rng = NrRandom::new();
        let mut seed = -777i64;
        let got: Vec<f32> = (0..6).map(|_| rng.gaussdev(&mut seed)).collect();
        assert_eq!(
            bits(&got),
            [0x3f24d887, 0x3e7ef9e2, 0xbf55c5e9, 0xbf3f61b1, 0x3c5b7583, 0x3f4cd355]
        );
        assert_eq!(seed, 196843056);
    }

    #[test]
    fn poidev_matches_c() {
        // Covers all three regimes, a repeated mean (cached constants) and a mean of exactly 12.
        let means: [u32; 13] = [
            0x00000000, 0x3f000000, 0x406ccccd, 0x406ccccd, 0x413fd70a, 0x41400000, 0x42220000,
            0x42220000, 0x447a1000, 0x47f1205a, 0x4a189680, 0x4c8b3c88, 0x3c23d70a,
        ];
        let want: [u32; 13] = [
            0x00000000, 0x00000000, 0x40c00000, 0x40400000, 0x41700000, 0x41200000, 0x421c0000,
            0x421c0000, 0x44790000, 0x47f05800, 0x4a187bdf, 0x4c8b3eb8, 0x00000000,
        ];
        let mut rng = NrRandom::new();
        let mut seed = -4242i64;
        let got: Vec<u32> = means
            .iter()
            .map(|&m| rng.poidev(f32::from_bits(m), &mut seed).to_bits())
            .collect();
        assert_eq!(got, want);
        assert_eq!(seed, 1503931509);
    }

    /// The table of counts is gammln's own result for each count, and anything else is computed.
    #[test]
    fn gammln_count_is_gammln() {
        for em in (0..1100).map(|k| k as f32).chain([-0.0, 0.5, 1023.5, 1e6, f32::INFINITY, f32::NAN]) {
            assert_eq!(gammln_count(em).to_bits(), gammln((em as f64 + 1.0) as f32).to_bits(), "{em}");
        }
    }

    #[test]
    fn gammln_matches_c() {
        let got: Vec<f32> = [1.0f32, 2.5, 13.0, 41.5, 1001.25]
            .iter()
            .map(|&x| gammln(x))
            .collect();
        assert_eq!(
            bits(&got),
            [0x00000000, 0x3e91c1f4, 0x419fe5d1, 0x42e05948, 0x45b8ced8]
        );
    }

    #[test]
    fn mosaic_umats_match_c() {
        let want: [[u64; 9]; 3] = [
            [
                0x3fefffeef4d903a1,
                0x3f6404ddb9e3804c,
                0xbf6a44ae837f8c52,
                0xbf641b2be425f784,
                0x3fefffee25223f0c,
                0xbf6b2cadc3d79eab,
                0x3f6a339fccde5de0,
                0x3f6b3d2085afd967,
                0x3fefffe9ae0ee9b3,
            ],
            [
                0x3feffff8ad0e5004,
                0x3f3db9a8209a7322,
                0xbf65543dc8085135,
                0xbf3cf68d18abf50a,
                0x3fefffeae320d0a0,
                0x3f724a40d2f77cea,
                0x3f65586f0f88e7f7,
                0xbf724907c2958b26,
                0x3fefffe3fbd1db56,
            ],
            [
                0x3fefffe3793fdd95,
                0x3f655bad72d67cee,
                0xbf7280e01884d403,
                0xbf655e3c32e91756,
                0x3feffff8cae3e3f0,
                0xbf314ed55bf659af,
                0x3f728023187de427,
                0x3f321476f530d853,
                0x3fefffea87397d15,
            ],
        ];
        let mut rng = NrRandom::new();
        let mut seed = -99i64;
        // The C passes `mosaic_spread` (a double, radians) to a float parameter.
        let mosaic = (0.3 * PI / 180.0) as f32;
        for w in want {
            let u = mosaic_rotation_umat(&mut rng, mosaic, &mut seed);
            assert_eq!(u.map(f64::to_bits), w);
        }
    }

    #[test]
    fn random_misset_matches_c() {
        let mut rng = NrRandom::new();
        let mut seed = -1234i64;
        let u = mosaic_rotation_umat(&mut rng, 90.0, &mut seed);
        assert_eq!(
            u.map(f64::to_bits),
            [
                0x3fd15f4afd20d4aa,
                0xbfdfcbbb11312241,
                0xbfea60cf9d482086,
                0x3fee9898304e9792,
                0x3fa510ca6a5005d4,
                0x3fd29025a227598c,
                0xbfbc34f70f6bf8b0,
                0xbfebbd82cccde2a0,
                0x3fdf1d98bc55c430
            ]
        );
        let m = umat2misset(&u);
        assert_eq!(
            m.map(f64::to_bits),
            [0xbff0f468b59dcb35, 0x3fbc43a80377465f, 0x3ff4b4f4063c5352]
        );
    }

    #[test]
    fn umat2misset_identity_and_gimbal_lock() {
        let id = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        assert_eq!(umat2misset(&id), [0.0, 0.0, 0.0]);
        // uzx = ±1 takes the C's fallback branch: rotx = π, roty = π/2.
        let lock = [0.0, 0.0, -1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0];
        let m = umat2misset(&lock);
        assert_eq!(m[0], PI);
        assert_eq!(m[1], PI / 2.0);
    }
}
