//! The hot loop written out in AVX2+FMA intrinsics, beside the generic lane-array version in
//! [`super::fast`] (as rav1e keeps its assembly beside plain Rust): for a square spot with small
//! integer N on every axis and a nearest-neighbour F grid (or none), one chunk of pixels' samples
//! over every phi step and mosaic domain. Left to itself LLVM split the generic version's
//! three-axis lattice factor across ymm and xmm registers and spilled its chains to the stack in
//! the innermost loop; here every quantity is one register per four (f64) or eight (f32) lanes.
//!
//! Same terms, order of accumulation and meaning as [`super::fast`]'s `sample_chunk` (but for
//! sources in wavelength groups, summed orientation outer); the arithmetic inside a sample differs
//! by rounding (fused multiply-adds, 2cos(πδ) from a minimax polynomial within ten ulps of 2
//! ([`super::hand::TWO_COS_PI_Q64`]), the roots of U_{N−1} multiplied in pairs, (F·F_latt)² for
//! F²·F_latt², the hardware ceil, with several sources the Miller indices from
//! [`super::hand::HandHoist`]'s hoisted dot products, and with divergence 2cos(πh) by angle
//! addition ([`super::hand::HandGroups`])), so results agree with it and with the reference to the
//! parity tolerance, not bit for bit. Deterministic for any thread count: a pixel's value depends
//! on nothing but the pixel.
//!
//! What measured faster on Zen 3 (`reports/benchmarks/2026-11-23-hoisted-kernel`,
//! `reports/benchmarks/2026-11-23-plain-loop`): F read with one broadcast load where a register's
//! lanes share their nearest lattice point (the gather is slow, and neighbouring pixels mostly do),
//! the f64 F index in floating point, the hoisted indices; a loop of its own for the usual group
//! (one N, every lane live, unit weight: no masks, weights or per-sample tests), a sub-pixel's
//! sources in one call, the 2cos(πδ) polynomial (one FMA per axis fewer), and with divergence
//! (`reports/benchmarks/2026-11-23-wavelength-groups`) the polynomials and the F index's clamp
//! once per wavelength group instead of per sample. Fewer operations is what has paid: shorter
//! dependency chains at the price of an operation (Estrin), interleaving two registers, and a
//! branch-free F read (always the gather, or four scalar loads) measured no faster.
//!
//! Both element types come from one body ([`hand_kernel!`]) over a few per-type wrappers.

use super::hand::{FloatIndex, HandAxis, HandConsts, HandGrid, HandGroups, HandIndices, HandKernel, HandLattice, KeptRow, Wide, HAND_GROUPS_MAX};
use std::arch::x86_64::*;

/// The sample loop for element type `$t` in registers `$v` of `$w` lanes, 2cos(πδ) from a polynomial
/// of degree `$terms` in δ²; built from the wrappers (`set1`, `_mul`, `lookup`, ...) of the module
/// it is expanded in, every function compiled with the target features `$feat`.
macro_rules! hand_kernel {
    ($t:ty, $v:ty, $w:expr, $terms:expr, $sterms:expr, $feat:literal) => {
        /// One pixel group's `C` lanes, one register of
        #[doc = concat!(stringify!($w), " lanes at a time: add every orientation's F²·F_latt²·weight to `acc`.")]
        /// A register's lanes go through all orientations before the next register's (measured
        /// faster than two registers side by side: fewer spills, and the out-of-order window
        /// overlaps consecutive orientations instead).
        ///
        /// # Safety
        /// The CPU must support the module's target features (AVX2 and FMA; for the 512-bit
        /// modules AVX-512 F/DQ/VL too).
        #[inline]
        #[target_feature(enable = $feat)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn sample_chunk<const C: usize>(
            hand: &HandLattice<$t>,
            default_f: $t,
            idx: &HandIndices<$t, C>,
            live: &[bool; C],
            weight: &[$t; C],
            acc: &mut [$t; C],
        ) {
            assert!(C % $w == 0);
            // the usual group: one N on every axis, every lane live, unit weight
            if hand.uniform && live.iter().all(|&l| l) && weight.iter().all(|&x| x == 1.0) {
                match hand.grid.as_ref().map(grid_index) {
                    Some(Some(g)) => return plain_chunk::<true, C>(hand, Some(g), default_f, idx, acc),
                    None => return plain_chunk::<false, C>(hand, None, default_f, idx, acc),
                    Some(None) => {}
                }
            }
            any_chunk(hand, default_f, idx, live, weight, acc)
        }

        /// [`sample_chunk`] for any group: dead lanes masked, weights, N per axis.
        #[inline(never)]
        #[target_feature(enable = $feat)]
        unsafe fn any_chunk<const C: usize>(
            hand: &HandLattice<$t>,
            default_f: $t,
            idx: &HandIndices<$t, C>,
            live: &[bool; C],
            weight: &[$t; C],
            acc: &mut [$t; C],
        ) {
            for block in (0..C).step_by($w) {
                let lanes = &live[block..block + $w];
                if !lanes.iter().any(|&l| l) {
                    continue;
                }
                let mut a = load(&acc[block..]);
                let w = load(&weight[block..]);
                let mask = lane_mask(lanes);
                let f_default = set1(default_f);
                // (F·F_latt)²·weight, zero in dead lanes: in a live lane of unit weight the same
                // bits as plain_chunk's (F·F_latt)², so that no pixel's value depends on its
                // neighbours' (masked, out of the ROI, past the row's end) or on the group's width
                let mut add = |idx0: [$v; 3], y: [$v; 3], in_range: bool| {
                    let f_f_latt = term(hand, idx0, y, in_range, f_default);
                    a = _add(a, _and(_mul(_mul(f_f_latt, f_f_latt), w), mask));
                };
                for_each_orientation(hand, idx, block, &mut add);
                store(&mut acc[block..], a);
            }
        }

        /// `add` called with the nearest integers of every orientation's Miller indices (h, k, l)
        /// and 2cos(π·) of each (up to a common sign per axis, see [`HandGroups`]) for the
        /// register of lanes `block..`, of every source with hoisted indices: in the C's order
        /// (source outer), or with wavelength groups orientation outer, sources inner. The third
        /// argument says the integers are already within the padded grid (no clamp needed).
        #[inline(always)]
        unsafe fn for_each_orientation<const C: usize>(hand: &HandLattice<$t>, idx: &HandIndices<$t, C>, block: usize, add: &mut impl FnMut([$v; 3], [$v; 3], bool)) {
            let c = &hand.consts;
            match idx {
                HandIndices::Scattering(scat) => {
                    let s = [load(&scat[0][block..]), load(&scat[1][block..]), load(&scat[2][block..])];
                    for o in &hand.orient {
                        // the C's a·s
                        let (idx0, y) = nearest(c, o.map(|v| _fmadd(wide(&v[2]), s[2], _fmadd(wide(&v[1]), s[1], _mul(wide(&v[0]), s[0])))));
                        add(idx0, y, false);
                    }
                }
                HandIndices::Hoisted { a: hoisted, sources } => {
                    let hoist = hand.hoist.as_ref().expect("a hoisted source without its table");
                    let n = hand.orient.len();
                    assert!(hoisted.len() >= n * 3 * C);
                    if let (Some(groups), true) = (&hoist.groups, *sources == (0..hoist.inv_lambda.len())) {
                        let clamp = hand.grid.as_ref().and_then(|g| g.group_clamp.as_ref());
                        return grouped(c, groups, clamp, &hoist.k, n, hoisted.as_ptr().add(block), C, add);
                    }
                    for (inv_lambda, ks) in hoist.inv_lambda[sources.clone()].iter().zip(hoist.k[sources.start * n..sources.end * n].chunks_exact(n)) {
                        let inv_lambda = wide(inv_lambda);
                        let mut at = hoisted.as_ptr().add(block);
                        for k in ks {
                            // A/λ + K = a·(d − i)/λ; SAFETY: within `hoisted` (asserted above)
                            let (idx0, y) = nearest(c, [0, 1, 2].map(|axis| _fmadd(load_ptr(at.add(axis * C)), inv_lambda, wide(&k[axis]))));
                            add(idx0, y, false);
                            at = at.wrapping_add(3 * C);
                        }
                    }
                }
            }
        }

        /// [`for_each_orientation`] with every source of [`HandGroups`]: per orientation, each
        /// group's B = A/λ_g and 2cos(πB), 2sin(πB) (reduced to ±½), then per source the nearest
        /// integer ceil(h − ½) of h = B + K and 2cos(πh) = 2cos(πB)·cos(πK) + 2sin(πB)·(−sin πK).
        /// With a grid (`clamp`), B − ½ clamped once per group to one cell inside the padded
        /// range: with |K| < 1 every ceil(B − ½ + K) is within it and reads what the unclamped
        /// index reads ([`crate::kernel::hand::HAND_GRID_BORDER`]); without `clamp` the lookup
        /// clamps per sample. `at`: the register's A of the
        /// first orientation (axis stride `stride`, orientation stride 3·`stride`).
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn grouped(
            c: &HandConsts<$t>,
            groups: &HandGroups<$t>,
            clamp: Option<&([Wide<$t>; 3], [Wide<$t>; 3])>,
            k: &[[Wide<$t>; 3]],
            n: usize,
            mut at: *const $t,
            stride: usize,
            add: &mut impl FnMut([$v; 3], [$v; 3], bool),
        ) {
            let ng = groups.inv_lambda.len();
            assert!(ng <= HAND_GROUPS_MAX && groups.cos_sin.len() == groups.of_source.len() * n && k.len() == groups.cos_sin.len());
            // (B − ½ clamped, 2cos πB, 2sin πB) per group and axis; only the first `ng` written and read
            let mut trig = [std::mem::MaybeUninit::<[[$v; 3]; 3]>::uninit(); HAND_GROUPS_MAX];
            for o in 0..n {
                for (g, inv_lambda) in groups.inv_lambda.iter().enumerate() {
                    let inv_lambda = wide(inv_lambda);
                    trig[g].write([0, 1, 2].map(|axis| {
                        // SAFETY: the caller's `hoisted` holds n orientations
                        let b = _mul(load_ptr(at.add(axis * stride)), inv_lambda);
                        let r = _sub(b, round_nearest(b));
                        let t = _mul(r, r);
                        let mut b_half = _sub(b, wide(&c.half));
                        if let Some((lo, hi)) = clamp {
                            // max(NaN, lo) is lo
                            b_half = _min(_max(b_half, wide(&lo[axis])), wide(&hi[axis]));
                        }
                        [b_half, two_cos_pi_t(c, t), two_sin_pi_t(c, r, t)]
                    }));
                }
                for (s, &g) in groups.of_source.iter().enumerate() {
                    let (ks, cs) = (&k[s * n + o], &groups.cos_sin[s * n + o]);
                    // SAFETY: written above for every group g < ng
                    let tr = trig[g].assume_init_ref();
                    let idx0 = [0, 1, 2].map(|axis| ceil(_add(tr[axis][0], wide(&ks[axis]))));
                    let y = [0, 1, 2].map(|axis| _fmadd(tr[axis][1], wide(&cs[axis][0]), _mul(tr[axis][2], wide(&cs[axis][1]))));
                    add(idx0, y, clamp.is_some());
                }
                at = at.wrapping_add(3 * stride);
            }
        }

        /// The usual group (one N on every axis, every lane live, unit weight): every
        /// orientation's (F·F_latt)² added to `acc`, F from `grid` (`GRID`) or default_F. Free of
        /// the general term's per-sample tests, masks and weights, and apart from [`any_chunk`] so
        /// that neither's constants crowd the other's registers: the heavy render 14% faster in an
        /// in-process A/B (`reports/benchmarks/2026-11-23-plain-loop`).
        #[inline(never)]
        #[target_feature(enable = $feat)]
        unsafe fn plain_chunk<const GRID: bool, const C: usize>(
            hand: &HandLattice<$t>,
            grid: Option<GridIndex<'_>>,
            default_f: $t,
            idx: &HandIndices<$t, C>,
            acc: &mut [$t; C],
        ) {
            let c = &hand.consts;
            let axis = &hand.axes[0];
            let f_default = set1(default_f);
            let term = |a: &mut $v, idx0: [$v; 3], y: [$v; 3], in_range: bool| {
                // SAFETY: with GRID the caller passes the grid's index
                let f = match (GRID, in_range) {
                    (true, false) => lookup_plain(hand.grid.as_ref().unwrap_unchecked(), grid.as_ref().unwrap_unchecked(), idx0),
                    (true, true) => lookup_in_range(hand.grid.as_ref().unwrap_unchecked(), idx0),
                    (false, _) => f_default,
                };
                let u = cheb_u_uniform(c, axis, y);
                let x = _mul(f, _mul(_mul(u[0], u[1]), u[2]));
                *a = _add(*a, _mul(x, x));
            };
            for block in (0..C).step_by($w) {
                let mut a = load(&acc[block..]);
                for_each_orientation(hand, idx, block, &mut |idx0, y, in_range| term(&mut a, idx0, y, in_range));
                store(&mut acc[block..], a);
            }
        }

        /// F_cell·F_latt of one orientation for the lanes' nearest integers `idx0` of (h, k, l)
        /// and y = 2cos(π·) of each, F_cell from the grid or `f_default`. The lookup first, so
        /// that the indices' registers are free for the lattice factor.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn term(hand: &HandLattice<$t>, idx0: [$v; 3], y: [$v; 3], in_range: bool, f_default: $v) -> $v {
            let c = &hand.consts;
            let f = match &hand.grid {
                Some(g) if in_range => lookup_in_range(g, idx0),
                Some(g) => lookup(g, idx0),
                None => f_default,
            };
            // U_{N−1} = y^(N+1 mod 2)·Π(y² − r_k) per axis, 1 for N ≤ 1, the roots in pairs
            // (HandAxis)
            let u = if hand.uniform {
                cheb_u_uniform(c, &hand.axes[0], y)
            } else {
                std::array::from_fn(|axis| {
                    let (ax, z) = (&hand.axes[axis], _mul(y[axis], y[axis]));
                    let mut u = if ax.even { y[axis] } else { wide(&c.one) };
                    for p in &ax.pairs {
                        u = _mul(u, _fmadd(z, _sub(z, wide(&p[0])), wide(&p[1])));
                    }
                    if let Some(r) = &ax.single {
                        u = _mul(u, _sub(z, wide(r)));
                    }
                    u
                })
            };
            _mul(f, _mul(_mul(u[0], u[1]), u[2]))
        }

        /// The nearest integers ceil(x − ½) of the Miller indices and 2cos(πδ) of their distance δ.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn nearest(c: &HandConsts<$t>, x: [$v; 3]) -> ([$v; 3], [$v; 3]) {
            let idx0 = x.map(|x| ceil(_sub(x, wide(&c.half))));
            let y = [0, 1, 2].map(|ax| two_cos_pi(c, _sub(x[ax], idx0[ax])));
            (idx0, y)
        }

        /// U_{N−1} on the three axes for one N (`axis`), from y = 2cos(πδ): y^(N+1 mod 2)·Π(y² − r_k),
        /// the roots in pairs (HandAxis), the pair loop outermost.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn cheb_u_uniform(c: &HandConsts<$t>, axis: &HandAxis<$t>, y: [$v; 3]) -> [$v; 3] {
            let z = y.map(|y| _mul(y, y));
            let mut u = if axis.even { y } else { [wide(&c.one); 3] };
            for p in &axis.pairs {
                for ax in 0..3 {
                    u[ax] = _mul(u[ax], _fmadd(z[ax], _sub(z[ax], wide(&p[0])), wide(&p[1])));
                }
            }
            if let Some(r) = &axis.single {
                for ax in 0..3 {
                    u[ax] = _mul(u[ax], _sub(z[ax], wide(r)));
                }
            }
            u
        }

        /// 2cos(πδ) for |δ| ≤ ½ as 2 + t·Q(t), t = δ², Q the minimax polynomial of degree `$terms`
        /// ([`crate::kernel::hand::TWO_COS_PI_Q64`]/`Q32`): one fused multiply-add per
        /// coefficient, one fewer per axis and sample than 2 − (2sin(πδ/2))² from the sine polynomial.
        #[inline]
        #[target_feature(enable = $feat)]
        pub(super) unsafe fn two_cos_pi(c: &HandConsts<$t>, delta: $v) -> $v {
            two_cos_pi_t(c, _mul(delta, delta))
        }

        /// [`two_cos_pi`] of δ from t = δ².
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn two_cos_pi_t(c: &HandConsts<$t>, t: $v) -> $v {
            let mut q = wide(&c.two_cos_pi_q[$terms]);
            for k in (0..$terms).rev() {
                q = _fmadd(q, t, wide(&c.two_cos_pi_q[k]));
            }
            _fmadd(q, t, wide(&c.two))
        }

        /// 2sin(πδ) for |δ| ≤ ½ as δ·P(t), t = δ², P the minimax polynomial of degree `$sterms`
        /// ([`crate::kernel::hand::TWO_SIN_PI_P64`]/`P32`).
        #[inline]
        #[target_feature(enable = $feat)]
        pub(super) unsafe fn two_sin_pi_t(c: &HandConsts<$t>, delta: $v, t: $v) -> $v {
            let mut p = wide(&c.two_sin_pi_p[$sterms]);
            for k in (0..$sterms).rev() {
                p = _fmadd(p, t, wide(&c.two_sin_pi_p[k]));
            }
            _mul(p, delta)
        }
    };
}

// The seam through which the generic kernel runs these loops (kernel::hand).
impl HandKernel for f64 {
    #[inline(always)]
    unsafe fn hand_chunk<const C: usize, const W512: bool>(
        hand: &HandLattice<f64>,
        default_f: f64,
        idx: &HandIndices<f64, C>,
        live: &[bool; C],
        weight: &[f64; C],
        acc: &mut [f64; C],
    ) -> bool {
        if W512 && C.is_multiple_of(8) && hand.grid.is_none() {
            f64x8::sample_chunk::<C>(hand, default_f, idx, live, weight, acc);
            return true;
        }
        if !C.is_multiple_of(4) {
            return false;
        }
        f64x4::sample_chunk::<C>(hand, default_f, idx, live, weight, acc);
        true
    }

    #[inline(always)]
    unsafe fn kept_row<const W512: bool>(hand: &HandLattice<f64>, row: KeptRow<'_, f64>) -> Option<f64> {
        (W512 && hand.uniform && hand.grid.is_none()).then(|| f64x8::kept_row(hand, row))
    }
}

impl HandKernel for f32 {
    #[inline(always)]
    unsafe fn hand_chunk<const C: usize, const W512: bool>(
        hand: &HandLattice<f32>,
        default_f: f32,
        idx: &HandIndices<f32, C>,
        live: &[bool; C],
        weight: &[f32; C],
        acc: &mut [f32; C],
    ) -> bool {
        if W512 && C.is_multiple_of(16) && hand.grid.is_none() {
            f32x16::sample_chunk::<C>(hand, default_f, idx, live, weight, acc);
            return true;
        }
        if !C.is_multiple_of(8) {
            return false;
        }
        f32x8::sample_chunk::<C>(hand, default_f, idx, live, weight, acc);
        true
    }
}

/// Four f64 lanes per `__m256d`.
pub mod f64x4 {
    use super::*;
    type V = __m256d;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn set1(x: f64) -> V {
        _mm256_set1_pd(x)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn wide(x: &Wide<f64>) -> V {
        _mm256_load_pd(x.0.as_ptr())
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load(x: &[f64]) -> V {
        debug_assert!(x.len() >= 4);
        _mm256_loadu_pd(x.as_ptr())
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load_ptr(x: *const f64) -> V {
        _mm256_loadu_pd(x)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store(x: &mut [f64], v: V) {
        debug_assert!(x.len() >= 4);
        _mm256_storeu_pd(x.as_mut_ptr(), v)
    }
    /// All ones where the lane is live.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lane_mask(live: &[bool]) -> V {
        // four bools (bytes 0 or 1) widened to 64-bit lanes and negated: 0 or all ones
        let live = &live[..4];
        let bytes = _mm_cvtsi32_si128(i32::from_ne_bytes(std::array::from_fn(|i| live[i] as u8)));
        _mm256_castsi256_pd(_mm256_sub_epi64(_mm256_setzero_si256(), _mm256_cvtepu8_epi64(bytes)))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _add(a: V, b: V) -> V {
        _mm256_add_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _sub(a: V, b: V) -> V {
        _mm256_sub_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _mul(a: V, b: V) -> V {
        _mm256_mul_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _and(a: V, b: V) -> V {
        _mm256_and_pd(a, b)
    }
    /// a·b + c
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _fmadd(a: V, b: V, c: V) -> V {
        _mm256_fmadd_pd(a, b, c)
    }
    /// c − a·b
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _fnmadd(a: V, b: V, c: V) -> V {
        _mm256_fnmadd_pd(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn ceil(a: V) -> V {
        _mm256_round_pd::<{ _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC }>(a)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn round_nearest(a: V) -> V {
        _mm256_round_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _min(a: V, b: V) -> V {
        _mm256_min_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _max(a: V, b: V) -> V {
        _mm256_max_pd(a, b)
    }
    /// F at the integer-valued indices from the padded grid: offsets clamped to the border
    /// (NaN and values beyond i32 convert to i32::MIN and clamp there too).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn lookup(g: &HandGrid<f64>, idx0: [V; 3]) -> V {
        match &g.float_index {
            Some(fi) => read(g, float_offset(fi, idx0)),
            None => {
                let d: [__m128i; 3] = std::array::from_fn(|a| {
                    let d = _mm_sub_epi32(_mm256_cvtpd_epi32(idx0[a]), _mm_set1_epi32(g.lo[a]));
                    _mm_min_epi32(_mm_max_epi32(d, _mm_setzero_si128()), _mm_set1_epi32(g.last[a]))
                });
                let offset = _mm_add_epi32(
                    _mm_add_epi32(_mm_mullo_epi32(d[0], _mm_set1_epi32(g.stride_h)), _mm_mullo_epi32(d[1], _mm_set1_epi32(g.stride_k))),
                    d[2],
                );
                read(g, offset)
            }
        }
    }
    /// [`lookup`] for indices known to lie in the padded grid ([`HandGroups`]' clamp): no clamp.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lookup_in_range(g: &HandGrid<f64>, idx0: [V; 3]) -> V {
        match &g.float_index {
            Some(fi) => read(g, float_flat(fi, idx0)),
            None => lookup(g, idx0),
        }
    }
    /// The grid offset in floating point ([`FloatIndex`]); max(NaN, lo) is lo: NaN reads the border too.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn float_offset(fi: &FloatIndex<f64>, idx0: [V; 3]) -> __m128i {
        float_flat(fi, std::array::from_fn(|a| _min(_max(idx0[a], wide(&fi.lo[a])), wide(&fi.hi[a]))))
    }
    /// The offset of indices within the padded grid, h·stride_h + k·stride_k + l + base, as i32.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn float_flat(fi: &FloatIndex<f64>, c: [V; 3]) -> __m128i {
        _mm256_cvtpd_epi32(_fmadd(c[0], wide(&fi.stride_h), _fmadd(c[1], wide(&fi.stride_k), _add(c[2], wide(&fi.base)))))
    }
    /// F at four grid offsets: neighbouring pixels mostly share their nearest reciprocal-lattice
    /// point, then one broadcast load instead of the gather (slow on Zen 3).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn read(g: &HandGrid<f64>, offset: __m128i) -> V {
        let first = _mm_shuffle_epi32::<0>(offset);
        if _mm_movemask_epi8(_mm_cmpeq_epi32(offset, first)) == 0xFFFF {
            _mm256_broadcast_sd(&*g.data.as_ptr().add(_mm_cvtsi128_si32(offset) as u32 as usize))
        } else {
            _mm256_i32gather_pd::<8>(g.data.as_ptr(), offset)
        }
    }
    /// What the plain loop indexes the grid with: the floating-point offset only (a grid too
    /// large for it takes the general loop).
    type GridIndex<'a> = &'a FloatIndex<f64>;
    #[inline]
    fn grid_index(g: &HandGrid<f64>) -> Option<GridIndex<'_>> {
        g.float_index.as_ref()
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lookup_plain(g: &HandGrid<f64>, fi: &GridIndex<'_>, idx0: [V; 3]) -> V {
        read(g, float_offset(fi, idx0))
    }

    hand_kernel!(f64, __m256d, 4, 6, 7, "avx2,fma");
}

/// Eight f32 lanes per `__m256` (`-precision single`).
pub mod f32x8 {
    use super::*;
    type V = __m256;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn set1(x: f32) -> V {
        _mm256_set1_ps(x)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn wide(x: &Wide<f32>) -> V {
        _mm256_load_ps(x.0.as_ptr())
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load(x: &[f32]) -> V {
        debug_assert!(x.len() >= 8);
        _mm256_loadu_ps(x.as_ptr())
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load_ptr(x: *const f32) -> V {
        _mm256_loadu_ps(x)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store(x: &mut [f32], v: V) {
        debug_assert!(x.len() >= 8);
        _mm256_storeu_ps(x.as_mut_ptr(), v)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lane_mask(live: &[bool]) -> V {
        let live = &live[..8];
        let bytes = _mm_cvtsi64_si128(i64::from_ne_bytes(std::array::from_fn(|i| live[i] as u8)));
        _mm256_castsi256_ps(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_cvtepu8_epi32(bytes)))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _add(a: V, b: V) -> V {
        _mm256_add_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _sub(a: V, b: V) -> V {
        _mm256_sub_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _mul(a: V, b: V) -> V {
        _mm256_mul_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _and(a: V, b: V) -> V {
        _mm256_and_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _fmadd(a: V, b: V, c: V) -> V {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _fnmadd(a: V, b: V, c: V) -> V {
        _mm256_fnmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn ceil(a: V) -> V {
        _mm256_round_ps::<{ _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC }>(a)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn round_nearest(a: V) -> V {
        _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _min(a: V, b: V) -> V {
        _mm256_min_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn _max(a: V, b: V) -> V {
        _mm256_max_ps(a, b)
    }
    /// As [`super::f64x4`]'s lookup, eight lanes at a time.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn lookup(g: &HandGrid<f32>, idx0: [V; 3]) -> V {
        // the integer index only (HandGrid::float_index is f64's: one conversion covers eight lanes)
        let d: [__m256i; 3] = std::array::from_fn(|a| {
            let d = _mm256_sub_epi32(_mm256_cvtps_epi32(idx0[a]), _mm256_set1_epi32(g.lo[a]));
            _mm256_min_epi32(_mm256_max_epi32(d, _mm256_setzero_si256()), _mm256_set1_epi32(g.last[a]))
        });
        read(g, d)
    }
    /// [`lookup`] for indices known to lie in the padded grid ([`HandGroups`]' clamp): no clamp.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lookup_in_range(g: &HandGrid<f32>, idx0: [V; 3]) -> V {
        read(g, std::array::from_fn(|a| _mm256_sub_epi32(_mm256_cvtps_epi32(idx0[a]), _mm256_set1_epi32(g.lo[a]))))
    }
    /// F at the padded grid's offsets `d` (h, k, l from its corner): one broadcast load where the
    /// lanes share their point, else the gather.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn read(g: &HandGrid<f32>, d: [__m256i; 3]) -> V {
        let flat = _mm256_add_epi32(
            _mm256_add_epi32(_mm256_mullo_epi32(d[0], _mm256_set1_epi32(g.stride_h)), _mm256_mullo_epi32(d[1], _mm256_set1_epi32(g.stride_k))),
            d[2],
        );
        let first = _mm256_permutevar8x32_epi32(flat, _mm256_setzero_si256());
        if _mm256_movemask_epi8(_mm256_cmpeq_epi32(flat, first)) == -1 {
            _mm256_broadcast_ss(&*g.data.as_ptr().add(_mm256_cvtsi256_si32(flat) as u32 as usize))
        } else {
            _mm256_i32gather_ps::<4>(g.data.as_ptr(), flat)
        }
    }

    /// The plain loop's lookup is [`lookup`] (nothing to prepare).
    type GridIndex<'a> = ();
    #[inline]
    fn grid_index(_: &HandGrid<f32>) -> Option<GridIndex<'static>> {
        Some(())
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lookup_plain(g: &HandGrid<f32>, _: &GridIndex<'_>, idx0: [V; 3]) -> V {
        lookup(g, idx0)
    }

    hand_kernel!(f32, __m256, 8, 3, 4, "avx2,fma");
}

/// Eight f64 lanes per `__m512d`: the same loop at the AVX-512 level for `default_F` alone (no
/// grid), where the hand loop's work is the lattice factor and twice the lanes per instruction
/// is what there is to gain. Every lane runs the same operations as in [`f64x4`] (the same
/// multiplies, fused multiply-adds, ceil), so every pixel's value is the same bit for bit. With a
/// grid the 256-bit loop stays: its F read is one broadcast where a register's lanes share their
/// lattice point, which eight lanes do less often than four (the lookup here is the gather, only
/// for completeness of the shared body).
pub mod f64x8 {
    use super::*;
    type V = __m512d;

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn set1(x: f64) -> V {
        _mm512_set1_pd(x)
    }
    /// A replicated constant's first lane, broadcast (an embedded broadcast memory operand).
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn wide(x: &Wide<f64>) -> V {
        _mm512_set1_pd(x.0[0])
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn load(x: &[f64]) -> V {
        debug_assert!(x.len() >= 8);
        _mm512_loadu_pd(x.as_ptr())
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn load_ptr(x: *const f64) -> V {
        _mm512_loadu_pd(x)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn store(x: &mut [f64], v: V) {
        debug_assert!(x.len() >= 8);
        _mm512_storeu_pd(x.as_mut_ptr(), v)
    }
    /// All ones where the lane is live.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn lane_mask(live: &[bool]) -> V {
        let live = &live[..8];
        let bytes = _mm_cvtsi64_si128(i64::from_ne_bytes(std::array::from_fn(|i| live[i] as u8)));
        _mm512_castsi512_pd(_mm512_sub_epi64(_mm512_setzero_si512(), _mm512_cvtepu8_epi64(bytes)))
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _add(a: V, b: V) -> V {
        _mm512_add_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _sub(a: V, b: V) -> V {
        _mm512_sub_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _mul(a: V, b: V) -> V {
        _mm512_mul_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _and(a: V, b: V) -> V {
        _mm512_and_pd(a, b)
    }
    /// a·b + c
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _fmadd(a: V, b: V, c: V) -> V {
        _mm512_fmadd_pd(a, b, c)
    }
    /// c − a·b
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _fnmadd(a: V, b: V, c: V) -> V {
        _mm512_fnmadd_pd(a, b, c)
    }
    /// vroundpd's immediate in vrndscalepd (scale 0): the same ceil.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn ceil(a: V) -> V {
        _mm512_roundscale_pd::<{ _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC }>(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn round_nearest(a: V) -> V {
        _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _min(a: V, b: V) -> V {
        _mm512_min_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _max(a: V, b: V) -> V {
        _mm512_max_pd(a, b)
    }
    /// As [`super::f64x4`]'s lookup (integer offsets clamped to the padded grid), read by the gather.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn lookup(g: &HandGrid<f64>, idx0: [V; 3]) -> V {
        let d: [__m256i; 3] = std::array::from_fn(|a| {
            let d = _mm256_sub_epi32(_mm512_cvtpd_epi32(idx0[a]), _mm256_set1_epi32(g.lo[a]));
            _mm256_min_epi32(_mm256_max_epi32(d, _mm256_setzero_si256()), _mm256_set1_epi32(g.last[a]))
        });
        let flat = _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(d[0], _mm256_set1_epi32(g.stride_h)), _mm256_mullo_epi32(d[1], _mm256_set1_epi32(g.stride_k))), d[2]);
        _mm512_i32gather_pd::<8>(flat, g.data.as_ptr())
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn lookup_in_range(g: &HandGrid<f64>, idx0: [V; 3]) -> V {
        lookup(g, idx0)
    }
    type GridIndex<'a> = ();
    #[inline]
    fn grid_index(_: &HandGrid<f64>) -> Option<GridIndex<'static>> {
        Some(())
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn lookup_plain(g: &HandGrid<f64>, _: &GridIndex<'_>, idx0: [V; 3]) -> V {
        lookup(g, idx0)
    }

    hand_kernel!(f64, __m512d, 8, 6, 7, "avx512f,avx512dq,avx512vl,avx2,fma");

    /// A row's pixels from a kept geometry (one source, one sub-pixel, every lane live, unit
    /// weight, one N on every axis, default_F): for each register of eight pixels the scattering
    /// vectors loaded straight from the geometry, every orientation's (F·F_latt)² in
    /// [`plain_chunk`]'s operations ([`plain_sum`]), the pixel's value in `fast::pixel_values`'
    /// ((r_e²·fluence·I)/steps·polar)·omega (its capture factor, 1 without sensor layers, left out:
    /// x·1 is x), converted to f32 and stored, and the omega sum in
    /// `fast::kept_group`'s order (pixel by pixel, `0.0 + omega`): the same bits as the group loop
    /// (`fast::kept_group` → [`sample_chunk`] → [`plain_chunk`] for every 32-pixel group). What
    /// it saves is that loop's traffic through the stack: each group's scattering vectors, factors
    /// and sums copied into arrays, [`plain_chunk`]'s constants broadcast and spilled again at every
    /// call, the values converted lane by lane (the light 512² series of 60 frames, 2026-11-28, two
    /// threads on Zen 4: the render's CPU about 11.7 -> 3.8 ns a pixel with [`KEPT_PREFETCH`], perf
    /// samples). nanoBragg.c L3033-L3039 (`test`, the corrections, `floatimage[imgidx]`) and
    /// L2729 (`omega_sum`).
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/DQ/VL, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    pub(super) unsafe fn kept_row(hand: &HandLattice<f64>, row: KeptRow<'_, f64>) -> f64 {
        let KeptRow { scattering: [sx, sy, sz], polar, omega, out, i_bg, default_f, scale, steps, mut omega_row } = row;
        let n = out.len();
        assert!(n % 8 == 0 && [sx.len(), sy.len(), sz.len(), polar.len(), omega.len()].iter().all(|&m| m == n));
        let (f, bg, scale_v, steps_v) = (set1(default_f), set1(i_bg), set1(scale), set1(steps));
        for at in (0..n).step_by(8) {
            // the five streams' lines KEPT_PREFETCH pixels ahead (a hint: never faults, and the
            // address is only computed, wrapping, past the slices' end)
            for c in [sx, sy, sz, polar, omega] {
                _mm_prefetch::<_MM_HINT_T0>(c.as_ptr().wrapping_add(at + KEPT_PREFETCH) as *const i8);
            }
            // SAFETY: at + 8 ≤ n, every slice's length (asserted above)
            let s = [load_ptr(sx.as_ptr().add(at)), load_ptr(sy.as_ptr().add(at)), load_ptr(sz.as_ptr().add(at))];
            let i = plain_sum(hand, s, f, bg);
            let mut test = _mul(scale_v, i);
            if steps != 1.0 {
                test = _mm512_div_pd(test, steps_v);
            }
            test = _mul(_mul(test, load_ptr(polar.as_ptr().add(at))), load_ptr(omega.as_ptr().add(at)));
            _mm256_storeu_ps(out.as_mut_ptr().add(at), _mm512_cvtpd_ps(test));
            for &o in &omega[at..at + 8] {
                omega_row += 0.0 + o;
            }
        }
        omega_row
    }

    /// How far ahead [`kept_row`] prefetches its geometry (pixels): 40 bytes a pixel in five
    /// streams, most of whose loads waited on memory while the writer threads (noise, SHA-256, the
    /// files) shared the caches. The light 512² series, 2026-11-28, six alternated pairs: the
    /// render's perf samples 800 -> 670 (median) with 64; 192 measured the same as 64.
    const KEPT_PREFETCH: usize = 64;

    /// `a` plus every orientation's (F·F_latt)² for one register of scattering vectors `s`: the
    /// operations of [`plain_chunk`] with [`HandIndices::Scattering`] and no grid (the C's a·s as
    /// two fused multiply-adds, [`nearest`], [`cheb_u_uniform`], (F·U_h·U_k·U_l)²).
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn plain_sum(hand: &HandLattice<f64>, s: [V; 3], f: V, mut a: V) -> V {
        let (c, axis) = (&hand.consts, &hand.axes[0]);
        for o in &hand.orient {
            let (_, y) = nearest(c, o.map(|v| _fmadd(wide(&v[2]), s[2], _fmadd(wide(&v[1]), s[1], _mul(wide(&v[0]), s[0])))));
            let u = cheb_u_uniform(c, axis, y);
            let x = _mul(f, _mul(_mul(u[0], u[1]), u[2]));
            a = _add(a, _mul(x, x));
        }
        a
    }
}

/// Sixteen f32 lanes per `__m512` (`-precision single`): as [`f64x8`] for [`f32x8`].
pub mod f32x16 {
    use super::*;
    type V = __m512;

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn set1(x: f32) -> V {
        _mm512_set1_ps(x)
    }
    /// A replicated constant's first lane, broadcast (an embedded broadcast memory operand).
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn wide(x: &Wide<f32>) -> V {
        _mm512_set1_ps(x.0[0])
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn load(x: &[f32]) -> V {
        debug_assert!(x.len() >= 16);
        _mm512_loadu_ps(x.as_ptr())
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn load_ptr(x: *const f32) -> V {
        _mm512_loadu_ps(x)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn store(x: &mut [f32], v: V) {
        debug_assert!(x.len() >= 16);
        _mm512_storeu_ps(x.as_mut_ptr(), v)
    }
    /// All ones where the lane is live.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn lane_mask(live: &[bool]) -> V {
        let live = &live[..16];
        let bytes = _mm_loadu_si128(std::array::from_fn::<u8, 16, _>(|i| live[i] as u8).as_ptr() as *const __m128i);
        _mm512_castsi512_ps(_mm512_sub_epi32(_mm512_setzero_si512(), _mm512_cvtepu8_epi32(bytes)))
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _add(a: V, b: V) -> V {
        _mm512_add_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _sub(a: V, b: V) -> V {
        _mm512_sub_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _mul(a: V, b: V) -> V {
        _mm512_mul_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _and(a: V, b: V) -> V {
        _mm512_and_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _fmadd(a: V, b: V, c: V) -> V {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _fnmadd(a: V, b: V, c: V) -> V {
        _mm512_fnmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn ceil(a: V) -> V {
        _mm512_roundscale_ps::<{ _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC }>(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn round_nearest(a: V) -> V {
        _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _min(a: V, b: V) -> V {
        _mm512_min_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn _max(a: V, b: V) -> V {
        _mm512_max_ps(a, b)
    }
    /// As [`super::f32x8`]'s lookup, sixteen lanes, read by the gather.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn lookup(g: &HandGrid<f32>, idx0: [V; 3]) -> V {
        let d: [__m512i; 3] = std::array::from_fn(|a| {
            let d = _mm512_sub_epi32(_mm512_cvtps_epi32(idx0[a]), _mm512_set1_epi32(g.lo[a]));
            _mm512_min_epi32(_mm512_max_epi32(d, _mm512_setzero_si512()), _mm512_set1_epi32(g.last[a]))
        });
        let flat = _mm512_add_epi32(_mm512_add_epi32(_mm512_mullo_epi32(d[0], _mm512_set1_epi32(g.stride_h)), _mm512_mullo_epi32(d[1], _mm512_set1_epi32(g.stride_k))), d[2]);
        _mm512_i32gather_ps::<4>(flat, g.data.as_ptr())
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn lookup_in_range(g: &HandGrid<f32>, idx0: [V; 3]) -> V {
        lookup(g, idx0)
    }
    type GridIndex<'a> = ();
    #[inline]
    fn grid_index(_: &HandGrid<f32>) -> Option<GridIndex<'static>> {
        Some(())
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn lookup_plain(g: &HandGrid<f32>, _: &GridIndex<'_>, idx0: [V; 3]) -> V {
        lookup(g, idx0)
    }

    hand_kernel!(f32, __m512, 16, 3, 4, "avx512f,avx512dq,avx512vl,avx2,fma");
}

#[cfg(test)]
mod tests {
    use crate::experiment::params::CrystalShape;
    use crate::kernel::hand::{HandIndices, HandLattice};
    use crate::experiment::physics::sincg;
    use crate::experiment::structure_factors::{HklGrid, NearestF};
    use std::f64::consts::PI;

    /// A small deterministic generator (no test-only dependency for a few numbers).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// The C's term for Miller indices `hkl`: F(h0, k0, l0)²·Π sincg(πh, N)², F nearest-neighbour
    /// (h0 = ceil(h − ½)), no lattice factor on an axis with N ≤ 1.
    fn c_term<T: crate::kernel::lanes::Real>(view: &crate::experiment::structure_factors::NearestView<'_, T>, hkl: [f64; 3], ns: [f64; 3]) -> f64 {
        let h0 = hkl.map(|x| (x - 0.5).ceil());
        let latt: f64 = (0..3).map(|a| if ns[a] > 1.0 { sincg(PI * hkl[a], ns[a]).powi(2) } else { 1.0 }).product();
        let fc = view.get(h0[0] as i64, h0[1] as i64, h0[2] as i64).to_f64();
        fc * fc * latt
    }

    /// One chunk against the C's formulas term by term: Σ over orientations of
    /// F(h0,k0,l0)²·Π sincg(πh, N)²·weight, with F nearest-neighbour (default_F outside the grid),
    /// dead lanes adding nothing. Covers one N on every axis (even, odd, 1), different N per axis,
    /// and Miller indices inside, on the edge of and far outside the grid.
    fn check<T: crate::kernel::lanes::Real>(tol: f64, run: impl Fn(&HandLattice<T>, &NearestF<T>, &[[T; 16]; 3], &[bool; 16], &[T; 16], &mut [T; 16])) {
        let entries: Vec<(i32, i32, i32, f64)> =
            (-4..=3).flat_map(|h| (-2..=5).flat_map(move |k| (-3..=3).map(move |l| (h, k, l, 10.0 + (h * 7 + k * 3 + l) as f64 * 0.5)))).collect();
        let grid = HklGrid::from_entries(&entries, 0.0).unwrap();
        let mut rng = Lcg(7);
        for ns in [[10.0, 10.0, 10.0], [5.0, 5.0, 5.0], [1.0, 1.0, 1.0], [2.0; 3], [3.0; 3], [24.0; 3], [7.0, 4.0, 1.0], [24.0, 3.0, 2.0]] {
            // every lane live with unit weight takes the plain loop (with one N on every axis)
            for (with_grid, plain) in [(true, false), (true, true), (false, false), (false, true)] {
                let f = NearestF::<T>::new(with_grid.then_some(&grid), 3.5);
                let orient: Vec<[[f64; 3]; 3]> = (0..6).map(|_| std::array::from_fn(|_| std::array::from_fn(|_| 40.0 * (rng.next() - 0.5)))).collect();
                let orient_t: Vec<[[T; 3]; 3]> = orient.iter().map(|o| o.map(|v| v.map(T::from_f64))).collect();
                let hand = HandLattice::new(CrystalShape::Square, ns, &orient_t, &f).expect("square, small N");
                let scat: [[f64; 16]; 3] = std::array::from_fn(|_| std::array::from_fn(|_| 0.3 * (rng.next() - 0.5)));
                let live: [bool; 16] = std::array::from_fn(|i| plain || i % 5 != 3);
                let weight: [f64; 16] = std::array::from_fn(|i| if plain || i % 2 == 0 { 1.0 } else { 0.25 + rng.next() });
                let start: [f64; 16] = std::array::from_fn(|_| rng.next());
                let mut acc: [T; 16] = start.map(T::from_f64);
                run(&hand, &f, &scat.map(|a| a.map(T::from_f64)), &live, &weight.map(T::from_f64), &mut acc);
                let view = f.view();
                for l in 0..16 {
                    let mut want = start[l];
                    if live[l] {
                        for o in &orient_t {
                            let s = [0, 1, 2].map(|a| T::from_f64(scat[a][l]));
                            let hkl = o.map(|v| (v[0] * s[0] + v[1] * s[1] + v[2] * s[2]).to_f64());
                            want += c_term(&view, hkl, ns) * weight[l];
                        }
                    }
                    // large N: h's rounding (and the C formula's own, ~Nπ|h|·ε in sin(Nπh)) weighs
                    // more in the tails, where the sines are small
                    let tol = tol * (ns[0].max(ns[1]).max(ns[2]) / 10.0).powi(2).max(1.0);
                    let got = acc[l].to_f64();
                    assert!((got - want).abs() <= tol * want.abs().max(1.0), "N={ns:?} grid={with_grid} plain={plain} lane {l}: {got} vs {want}");
                }
            }
        }
    }

    /// The padded lookup: NearestF's value inside the grid and on its edges, default_F one past
    /// them, far outside, beyond i32 and for NaN.
    #[test]
    fn padded_lookup_reads_default_f_outside_the_grid() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            eprintln!("SKIPPED padded_lookup_reads_default_f_outside_the_grid: this CPU has no AVX2+FMA");
            return;
        }
        let entries: Vec<(i32, i32, i32, f64)> = (-2..=1).flat_map(|h| (0..=2).flat_map(move |k| (3..=4).map(move |l| (h, k, l, (h * 100 + k * 10 + l) as f64)))).collect();
        let grid = HklGrid::from_entries(&entries, 0.0).unwrap();
        let f = NearestF::<f64>::new(Some(&grid), 7.5);
        let hand = HandLattice::new(CrystalShape::Square, [5.0; 3], &[], &f).unwrap();
        let g = hand.grid.as_ref().unwrap();
        let probes = [-3.0, -2.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, -1e6, 1e6, 3e9, -3e9, 1e300, f64::NAN];
        for &h in &probes {
            for &k in &probes {
                for &l in &probes {
                    let want = if [h, k, l].iter().all(|x| x.is_finite() && x.abs() < 1e7) { f.view().get(h as i64, k as i64, l as i64) } else { 7.5 };
                    // SAFETY: AVX2 checked above
                    let got: [f64; 4] = unsafe {
                        use std::arch::x86_64::*;
                        std::mem::transmute(super::f64x4::lookup(g, [_mm256_set1_pd(h), _mm256_set1_pd(k), _mm256_set1_pd(l)]))
                    };
                    assert_eq!(got, [want; 4], "{h} {k} {l}");
                    let f32g = NearestF::<f32>::new(Some(&grid), 7.5);
                    let h32 = HandLattice::new(CrystalShape::Square, [5.0; 3], &[], &f32g).unwrap();
                    let got32: [f32; 8] = unsafe {
                        use std::arch::x86_64::*;
                        std::mem::transmute(super::f32x8::lookup(h32.grid.as_ref().unwrap(), [_mm256_set1_ps(h as f32), _mm256_set1_ps(k as f32), _mm256_set1_ps(l as f32)]))
                    };
                    assert_eq!(got32, [want as f32; 8], "f32 {h} {k} {l}");
                }
            }
        }
    }

    /// 2cos(πδ) from the minimax polynomial against f64 cos over |δ| ≤ ½ (and a little beyond the
    /// fit's range, where ceil(x − ½) can put δ at ½ exactly).
    #[test]
    fn two_cos_pi_is_within_its_bound() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            eprintln!("SKIPPED two_cos_pi_is_within_its_bound: this CPU has no AVX2+FMA");
            return;
        }
        let f = NearestF::<f64>::new(None, 1.0);
        let hand = HandLattice::new(CrystalShape::Square, [5.0; 3], &[], &f).unwrap();
        let f32f = NearestF::<f32>::new(None, 1.0);
        let hand32 = HandLattice::new(CrystalShape::Square, [5.0; 3], &[], &f32f).unwrap();
        let (mut worst, mut worst32) = (0.0f64, 0.0f64);
        for i in -100_000..=100_000 {
            let d = i as f64 * 0.5e-5;
            let want = 2.0 * (PI * d).cos();
            // SAFETY: AVX2 and FMA checked above
            let got: [f64; 4] = unsafe { std::mem::transmute(super::f64x4::two_cos_pi(&hand.consts, std::arch::x86_64::_mm256_set1_pd(d))) };
            let got32: [f32; 8] = unsafe { std::mem::transmute(super::f32x8::two_cos_pi(&hand32.consts, std::arch::x86_64::_mm256_set1_ps(d as f32))) };
            worst = worst.max((got[0] - want).abs());
            worst32 = worst32.max((got32[0] as f64 - 2.0 * (PI * (d as f32) as f64).cos()).abs());
        }
        assert!(worst < 6e-15, "f64: {worst:e}");
        assert!(worst32 < 3.6e-7, "f32: {worst32:e}");
    }

    /// 2sin(πδ) from the minimax polynomial against f64 sin over |δ| ≤ ½.
    #[test]
    fn two_sin_pi_is_within_its_bound() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            eprintln!("SKIPPED two_sin_pi_is_within_its_bound: this CPU has no AVX2+FMA");
            return;
        }
        let f = NearestF::<f64>::new(None, 1.0);
        let hand = HandLattice::new(CrystalShape::Square, [5.0; 3], &[], &f).unwrap();
        let f32f = NearestF::<f32>::new(None, 1.0);
        let hand32 = HandLattice::new(CrystalShape::Square, [5.0; 3], &[], &f32f).unwrap();
        let (mut worst, mut worst32) = (0.0f64, 0.0f64);
        for i in -100_000..=100_000 {
            let d = i as f64 * 0.5e-5;
            let d32 = d as f32;
            // SAFETY: AVX2 and FMA checked above
            let got: [f64; 4] = unsafe {
                use std::arch::x86_64::*;
                std::mem::transmute(super::f64x4::two_sin_pi_t(&hand.consts, _mm256_set1_pd(d), _mm256_set1_pd(d * d)))
            };
            let got32: [f32; 8] = unsafe {
                use std::arch::x86_64::*;
                std::mem::transmute(super::f32x8::two_sin_pi_t(&hand32.consts, _mm256_set1_ps(d32), _mm256_set1_ps(d32 * d32)))
            };
            worst = worst.max((got[0] - 2.0 * (PI * d).sin()).abs());
            worst32 = worst32.max((got32[0] as f64 - 2.0 * (PI * d32 as f64).sin()).abs());
        }
        // the fit's 1.8e-16 and 6.7e-9 plus the evaluation's rounding (an ulp or two of 2)
        assert!(worst < 1.2e-15, "f64: {worst:e}");
        assert!(worst32 < 3.6e-7, "f32: {worst32:e}");
    }

    #[test]
    fn hand_kernels_follow_the_c_formulas() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            eprintln!("SKIPPED hand_kernels_follow_the_c_formulas: this CPU has no AVX2+FMA");
            return;
        }
        // SAFETY: AVX2 and FMA checked above
        check::<f64>(1e-11, |h, f, s, l, w, a| unsafe { super::f64x4::sample_chunk(h, f.default_f(), &HandIndices::Scattering(s), l, w, a) });
        check::<f32>(2e-4, |h, f, s, l, w, a| unsafe { super::f32x8::sample_chunk(h, f.default_f(), &HandIndices::Scattering(s), l, w, a) });
    }

    /// The hoisted Miller indices (several sources): A = a·(d − i₀) per sub-pixel, then per source
    /// h = A/λ + K, against the C's h = a·(d − i)/λ in f64, summed over sources and orientations.
    /// Sources of five wavelengths (h = A/λ + K per sample), and six sources in two wavelength
    /// groups ([`HandGroups`]: 2cos(πh) by angle addition, the index clamped once per group);
    /// Miller indices inside, on the edge of and far outside the grid; every source in one call
    /// (all lanes live: the plain loop; some dead: the general one) or one at a time.
    fn check_hoisted<T: crate::kernel::lanes::Real>(tol: f64, run: impl Fn(&HandLattice<T>, T, &HandIndices<T, 16>, &[bool; 16], &[T; 16], &mut [T; 16])) {
        use crate::experiment::Orientation;
        use crate::kernel::hand::{hoist_miller, HandHoist};
        let entries: Vec<(i32, i32, i32, f64)> = (-6..=6).flat_map(|h| (-6..=6).flat_map(move |k| (-6..=6).map(move |l| (h, k, l, 5.0 + ((h * 7 + k * 3 + l) as f64).abs())))).collect();
        let grid = HklGrid::from_entries(&entries, 0.0).unwrap();
        let mut rng = Lcg(11);
        let f = NearestF::<T>::new(Some(&grid), 2.5);
        let orient: Vec<Orientation> = (0..7).map(|_| {
            let v = |rng: &mut Lcg| std::array::from_fn(|_| 60.0 * (rng.next() - 0.5));
            Orientation { a: v(&mut rng), b: v(&mut rng), c: v(&mut rng) }
        }).collect();
        let orient_t: Vec<[[T; 3]; 3]> = orient.iter().map(|o| [o.a, o.b, o.c].map(|v| v.map(T::from_f64))).collect();
        // a beam along +x with divergence ~1 mrad: 1 ± 0.05 Å per source, or 0.97 and 1.03 Å
        // for three directions each (the dispersion loop innermost, as the C orders them)
        let direction = |rng: &mut Lcg| {
            let (dy, dz) = (2e-3 * (rng.next() - 0.5), 2e-3 * (rng.next() - 0.5));
            let n = (1.0 + dy * dy + dz * dz).sqrt();
            [1.0 / n, dy / n, dz / n]
        };
        let single: Vec<([f64; 3], f64)> = (0..5).map(|_| (direction(&mut rng), 0.95 + 0.1 * rng.next())).collect();
        let grouped: Vec<([f64; 3], f64)> = (0..3).flat_map(|_| {
            let d = direction(&mut rng);
            [(d, 0.97), (d, 1.03)]
        }).collect();
        for (sources, groups) in [(&single, false), (&grouped, true)] {
            for (ns, one_call, all_live) in [([10.0; 3], false, false), ([10.0; 3], true, true), ([10.0; 3], true, false), ([7.0; 3], true, true), ([5.0, 7.0, 3.0], true, true), ([5.0, 7.0, 3.0], true, false)] {
                let mut hand = HandLattice::new(CrystalShape::Square, ns, &orient_t, &f).unwrap();
                hand.hoist = HandHoist::new(&orient, sources);
                let hoist = hand.hoist.as_ref().expect("several sources");
                assert_eq!(hoist.groups.is_some(), groups, "wavelength groups");
                // diffracted directions of neighbouring pixels, up to ~17° from the beam
                let d: [[f64; 16]; 3] = {
                    let (y0, z0) = (0.6 * (rng.next() - 0.5), 0.6 * (rng.next() - 0.5));
                    let mut d = [[0.0; 16]; 3];
                    for l in 0..16 {
                        let (y, z) = (y0 + 1e-3 * l as f64, z0 - 4e-4 * l as f64);
                        let n = (1.0 + y * y + z * z).sqrt();
                        [d[0][l], d[1][l], d[2][l]] = [1.0 / n, y / n, z / n];
                    }
                    d
                };
                let mut a_hoisted = vec![T::ZERO; orient.len() * 3 * 16];
                hoist_miller::<T, 16>(&orient, &hoist.inc0, [&d[0], &d[1], &d[2]], &mut a_hoisted);
                let live: [bool; 16] = std::array::from_fn(|i| all_live || i % 7 != 2);
                let weight = [T::ONE; 16];
                let mut acc = [T::ZERO; 16];
                // all sources in one call (as the rows without -dmin run) or one at a time
                if one_call {
                    run(&hand, f.default_f(), &HandIndices::Hoisted { a: &a_hoisted, sources: 0..sources.len() }, &live, &weight, &mut acc);
                } else {
                    for si in 0..sources.len() {
                        run(&hand, f.default_f(), &HandIndices::Hoisted { a: &a_hoisted, sources: si..si + 1 }, &live, &weight, &mut acc);
                    }
                }
                let view = f.view();
                for l in 0..16 {
                    let mut want = 0.0;
                    if live[l] {
                        for (inc, lambda) in sources {
                            for o in &orient {
                                let s = [0, 1, 2].map(|a| (d[a][l] - inc[a]) / lambda);
                                let hkl = [o.a, o.b, o.c].map(|v| v[0] * s[0] + v[1] * s[1] + v[2] * s[2]);
                                want += c_term(&view, hkl, ns);
                            }
                        }
                    }
                    let got = acc[l].to_f64();
                    assert!((got - want).abs() <= tol * want.abs().max(1.0), "N={ns:?} groups={groups} one_call={one_call} lane {l}: {got} vs {want}");
                }
            }
        }
    }

    /// Wavelength groups only where they pay and their clamp is safe: at least two sources per
    /// wavelength, |K| < 1 (here a divergence of 0.1 rad with a 60 Å axis: K ~ 3).
    #[test]
    fn wavelength_groups_apply_only_where_safe() {
        use crate::experiment::Orientation;
        use crate::kernel::hand::HandHoist;
        let orient = [Orientation { a: [60.0, 5.0, -3.0], b: [2.0, 70.0, 1.0], c: [-4.0, 3.0, 80.0] }];
        let beam = |dy: f64| {
            let n = (1.0 + dy * dy).sqrt();
            [1.0 / n, dy / n, 0.0]
        };
        let groups = |sources: &[([f64; 3], f64)]| HandHoist::<f64>::new(&orient, sources).and_then(|h| h.groups).map(|g| g.inv_lambda.len());
        assert_eq!(groups(&[(beam(0.0), 1.0), (beam(1e-3), 1.0), (beam(0.0), 1.1), (beam(1e-3), 1.1)]), Some(2));
        // one source per wavelength
        assert_eq!(groups(&[(beam(0.0), 1.0), (beam(0.0), 1.1), (beam(0.0), 1.2)]), None);
        // |K| ~ 60·0.1 cycles: the once-per-group clamp could not hold
        assert_eq!(groups(&[(beam(0.0), 1.0), (beam(0.1), 1.0)]), None);
        // the clamp once per group needs the indices to half a cell in T: f32 only below 2²¹
        for (h0, f32_clamp) in [(-40, true), (2_000_000, true), (3_000_000, false)] {
            let grid = HklGrid::from_entries(&[(h0, 0, 0, 1.0), (h0 + 2, 1, 1, 2.0)], 0.0).unwrap();
            let f64_hand = HandLattice::new(CrystalShape::Square, [5.0; 3], &[], &NearestF::<f64>::new(Some(&grid), 1.0)).unwrap();
            let f32_hand = HandLattice::new(CrystalShape::Square, [5.0; 3], &[], &NearestF::<f32>::new(Some(&grid), 1.0)).unwrap();
            assert!(f64_hand.grid.unwrap().group_clamp.is_some(), "f64 {h0}");
            assert_eq!(f32_hand.grid.unwrap().group_clamp.is_some(), f32_clamp, "f32 {h0}");
        }
    }

    #[test]
    fn hoisted_indices_follow_the_c_formulas() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            eprintln!("SKIPPED hoisted_indices_follow_the_c_formulas: this CPU has no AVX2+FMA");
            return;
        }
        // SAFETY: AVX2 and FMA checked above
        check_hoisted::<f64>(1e-11, |h, d, i, l, w, a| unsafe { super::f64x4::sample_chunk(h, d, i, l, w, a) });
        check_hoisted::<f32>(2e-4, |h, d, i, l, w, a| unsafe { super::f32x8::sample_chunk(h, d, i, l, w, a) });
    }

    /// The 512-bit loops give the 256-bit loops' bits lane for lane (and so, through `check`, the
    /// C's formulas): plain and masked groups, weights, with and without a grid, one N or N per
    /// axis, scattering vectors and hoisted indices with and without wavelength groups.
    #[test]
    fn wide_kernels_are_the_narrow_ones_bit_for_bit() {
        if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq") && is_x86_feature_detected!("avx512vl") && is_x86_feature_detected!("fma")) {
            return;
        }
        fn same<T: crate::kernel::lanes::Real>(narrow: &[T; 16], wide: &[T; 16]) {
            for l in 0..16 {
                assert!(narrow[l].to_f64().to_bits() == wide[l].to_f64().to_bits(), "lane {l}: {} vs {}", narrow[l].to_f64(), wide[l].to_f64());
            }
        }
        // SAFETY (every block below): AVX2, FMA and AVX-512 F/DQ/VL checked above
        check::<f64>(1e-11, |h, f, s, l, w, a| unsafe {
            let mut narrow = *a;
            super::f64x4::sample_chunk(h, f.default_f(), &HandIndices::Scattering(s), l, w, &mut narrow);
            super::f64x8::sample_chunk(h, f.default_f(), &HandIndices::Scattering(s), l, w, a);
            same(&narrow, a);
        });
        check::<f32>(2e-4, |h, f, s, l, w, a| unsafe {
            let mut narrow = *a;
            super::f32x8::sample_chunk(h, f.default_f(), &HandIndices::Scattering(s), l, w, &mut narrow);
            super::f32x16::sample_chunk(h, f.default_f(), &HandIndices::Scattering(s), l, w, a);
            same(&narrow, a);
        });
        check_hoisted::<f64>(1e-11, |h, d, i, l, w, a| unsafe {
            let mut narrow = *a;
            super::f64x4::sample_chunk(h, d, i, l, w, &mut narrow);
            super::f64x8::sample_chunk(h, d, i, l, w, a);
            same(&narrow, a);
        });
        check_hoisted::<f32>(2e-4, |h, d, i, l, w, a| unsafe {
            let mut narrow = *a;
            super::f32x8::sample_chunk(h, d, i, l, w, &mut narrow);
            super::f32x16::sample_chunk(h, d, i, l, w, a);
            same(&narrow, a);
        });
    }
}
