//! The hot loop written out in AVX2+FMA intrinsics, beside the generic lane-array version in
//! [`super::fast`] (as rav1e keeps its assembly beside plain Rust): for a square spot with small
//! integer N on every axis and a nearest-neighbour F grid (or none), one chunk of pixels' samples
//! over every phi step and mosaic domain. Left to itself LLVM split the generic version's
//! three-axis lattice factor across ymm and xmm registers and spilled its chains to the stack in
//! the innermost loop; here every quantity is one register per four (f64) or eight (f32) lanes.
//!
//! Same terms, order of accumulation and meaning as [`super::fast`]'s `sample_chunk`; the
//! arithmetic inside a sample differs by rounding (fused multiply-adds, the sine's argument taken
//! as δ·π/2 in one product, the hardware ceil and gather), so results agree with it and with the
//! reference to the parity tolerance, not bit for bit. Deterministic for any thread count: a
//! pixel's value depends on nothing but the pixel.
//!
//! Both element types come from one body ([`hand_kernel!`]) over a few per-type wrappers.

use super::fast::{HandConsts, HandLattice, Wide};
use std::arch::x86_64::*;

/// The sample loop for element type `$t` in registers `$v` of `$w` lanes, the sine polynomial with
/// `$terms` of the Cephes coefficients; built from the wrappers (`set1`, `_mul`, `lookup`, ...) of
/// the module it is expanded in.
macro_rules! hand_kernel {
    ($t:ty, $v:ty, $w:expr, $terms:expr) => {
        /// One pixel group's `C` lanes, one register of
        #[doc = concat!(stringify!($w), " lanes at a time: add every orientation's F²·F_latt²·weight to `acc`.")]
        /// A register's lanes go through all orientations before the next register's (measured
        /// faster than two registers side by side: fewer spills, and the out-of-order window
        /// overlaps consecutive orientations instead).
        ///
        /// # Safety
        /// The CPU must support AVX2 and FMA.
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn sample_chunk<const C: usize>(
            hand: &HandLattice<$t>,
            default_f: $t,
            scat: &[[$t; C]; 3],
            live: &[bool; C],
            weight: &[$t; C],
            acc: &mut [$t; C],
        ) {
            assert!(C % $w == 0);
            for block in (0..C).step_by($w) {
                if !live[block..block + $w].iter().any(|&l| l) {
                    continue;
                }
                let (sx, sy, sz) = (load(&scat[0][block..]), load(&scat[1][block..]), load(&scat[2][block..]));
                let w = load(&weight[block..]);
                let mask = lane_mask(&live[block..]);
                let mut a = load(&acc[block..]);
                for o in &hand.orient {
                    // the C's order: F_cell²·F_latt², times the oversampling weight; dead lanes add 0
                    a = _add(a, _and(_mul(term(hand, default_f, o, [sx, sy, sz]), w), mask));
                }
                store(&mut acc[block..], a);
            }
        }

        /// F_cell²·F_latt² of one orientation for the lanes' scattering vectors `s`.
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn term(hand: &HandLattice<$t>, default_f: $t, o: &[[Wide<$t>; 3]; 3], s: [$v; 3]) -> $v {
            let c = &hand.consts;
            let one = wide(&c.one);
            // Miller indices (the C's a·s), nearest integers ceil(x − ½), 2cos(πδ), F²
            let mut y = [one; 3];
            let mut idx0 = [one; 3];
            for axis in 0..3 {
                let v = o[axis];
                let x = _fmadd(wide(&v[2]), s[2], _fmadd(wide(&v[1]), s[1], _mul(wide(&v[0]), s[0])));
                let x0 = ceil(_sub(x, wide(&c.half)));
                idx0[axis] = x0;
                y[axis] = two_cos_pi(c, _sub(x, x0));
            }
            let f2 = match &hand.grid {
                Some(g) => {
                    let f = lookup(g, idx0);
                    _mul(f, f)
                }
                None => set1(default_f * default_f),
            };
            // U_{N−1} = y^(N+1 mod 2)·Π(y² − r_k) per axis, 1 for N ≤ 1; with one N on every
            // axis the root loop is outermost, three independent products per step
            let mut u = [one; 3];
            let y2 = y.map(|y| _mul(y, y));
            for axis in 0..3 {
                if hand.axes[axis].even {
                    u[axis] = y[axis];
                }
            }
            if hand.uniform {
                for root in &hand.axes[0].roots {
                    let root = wide(root);
                    for axis in 0..3 {
                        u[axis] = _mul(u[axis], _sub(y2[axis], root));
                    }
                }
            } else {
                for axis in 0..3 {
                    for root in &hand.axes[axis].roots {
                        u[axis] = _mul(u[axis], _sub(y2[axis], wide(root)));
                    }
                }
            }
            let f_latt = _mul(_mul(u[0], u[1]), u[2]);
            _mul(f2, _mul(f_latt, f_latt))
        }

        /// 2cos(πδ) = 2 − 4sin²(πδ/2), the Cephes sine polynomial on |πδ/2| ≤ π/4 (|δ| ≤ ½).
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn two_cos_pi(c: &HandConsts<$t>, delta: $v) -> $v {
            let t = _mul(delta, wide(&c.frac_pi_2));
            let t2 = _mul(t, t);
            let mut p = wide(&c.sin_c[$terms - 1]);
            for k in (0..$terms - 1).rev() {
                p = _fmadd(p, t2, wide(&c.sin_c[k]));
            }
            // 2sin(t) from 2t (an addition, off the multipliers), then 2 − (2sin t)²
            let tt = _add(t, t);
            let sin2 = _fmadd(_mul(tt, t2), p, tt);
            _fnmadd(sin2, sin2, wide(&c.two))
        }
    };
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
    unsafe fn store(x: &mut [f64], v: V) {
        debug_assert!(x.len() >= 4);
        _mm256_storeu_pd(x.as_mut_ptr(), v)
    }
    /// All ones where the lane is live.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lane_mask(live: &[bool]) -> V {
        let m = |i: usize| -(live[i] as i64);
        _mm256_castsi256_pd(_mm256_setr_epi64x(m(0), m(1), m(2), m(3)))
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
    /// F at the integer-valued indices from the padded grid: offsets clamped to the border
    /// (NaN and values beyond i32 convert to i32::MIN and clamp there too).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn lookup(g: &crate::kernel::fast::HandGrid<f64>, idx0: [V; 3]) -> V {
        let d: [__m128i; 3] = std::array::from_fn(|a| {
            let d = _mm_sub_epi32(_mm256_cvtpd_epi32(idx0[a]), _mm_set1_epi32(g.lo[a]));
            _mm_min_epi32(_mm_max_epi32(d, _mm_setzero_si128()), _mm_set1_epi32(g.last[a]))
        });
        let flat = _mm_add_epi32(
            _mm_add_epi32(_mm_mullo_epi32(d[0], _mm_set1_epi32(g.stride_h)), _mm_mullo_epi32(d[1], _mm_set1_epi32(g.stride_k))),
            d[2],
        );
        _mm256_i32gather_pd::<8>(g.data.as_ptr(), flat)
    }

    hand_kernel!(f64, __m256d, 4, 6);
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
    unsafe fn store(x: &mut [f32], v: V) {
        debug_assert!(x.len() >= 8);
        _mm256_storeu_ps(x.as_mut_ptr(), v)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lane_mask(live: &[bool]) -> V {
        let m = |i: usize| -(live[i] as i32);
        _mm256_castsi256_ps(_mm256_setr_epi32(m(0), m(1), m(2), m(3), m(4), m(5), m(6), m(7)))
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
    /// As [`super::f64x4`]'s lookup, eight lanes at a time.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn lookup(g: &crate::kernel::fast::HandGrid<f32>, idx0: [V; 3]) -> V {
        let d: [__m256i; 3] = std::array::from_fn(|a| {
            let d = _mm256_sub_epi32(_mm256_cvtps_epi32(idx0[a]), _mm256_set1_epi32(g.lo[a]));
            _mm256_min_epi32(_mm256_max_epi32(d, _mm256_setzero_si256()), _mm256_set1_epi32(g.last[a]))
        });
        let flat = _mm256_add_epi32(
            _mm256_add_epi32(_mm256_mullo_epi32(d[0], _mm256_set1_epi32(g.stride_h)), _mm256_mullo_epi32(d[1], _mm256_set1_epi32(g.stride_k))),
            d[2],
        );
        _mm256_i32gather_ps::<4>(g.data.as_ptr(), flat)
    }

    hand_kernel!(f32, __m256, 8, 3);
}

#[cfg(test)]
mod tests {
    use crate::config::CrystalShape;
    use crate::kernel::fast::HandLattice;
    use crate::physics::sincg;
    use crate::structure_factors::{HklGrid, NearestF};
    use std::f64::consts::PI;

    /// A small deterministic generator (no test-only dependency for a few numbers).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
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
        for ns in [[10.0, 10.0, 10.0], [5.0, 5.0, 5.0], [1.0, 1.0, 1.0], [7.0, 4.0, 1.0], [24.0, 3.0, 2.0]] {
            for with_grid in [true, false] {
                let f = NearestF::<T>::new(with_grid.then_some(&grid), 3.5);
                let orient: Vec<[[f64; 3]; 3]> = (0..6).map(|_| std::array::from_fn(|_| std::array::from_fn(|_| 40.0 * (rng.next() - 0.5)))).collect();
                let orient_t: Vec<[[T; 3]; 3]> = orient.iter().map(|o| o.map(|v| v.map(T::from_f64))).collect();
                let hand = HandLattice::new(CrystalShape::Square, ns, &orient_t, &f).expect("square, small N");
                let scat: [[f64; 16]; 3] = std::array::from_fn(|_| std::array::from_fn(|_| 0.3 * (rng.next() - 0.5)));
                let live: [bool; 16] = std::array::from_fn(|i| i % 5 != 3);
                let weight: [f64; 16] = std::array::from_fn(|i| if i % 2 == 0 { 1.0 } else { 0.25 + rng.next() });
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
                            let h0 = hkl.map(|x| (x - 0.5).ceil());
                            let latt: f64 = (0..3).map(|a| if ns[a] > 1.0 { sincg(PI * hkl[a], ns[a]).powi(2) } else { 1.0 }).product();
                            let fc = view.get(h0[0] as i64, h0[1] as i64, h0[2] as i64).to_f64();
                            want += fc * fc * latt * weight[l];
                        }
                    }
                    let got = acc[l].to_f64();
                    assert!((got - want).abs() <= tol * want.abs().max(1.0), "N={ns:?} grid={with_grid} lane {l}: {got} vs {want}");
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

    #[test]
    fn hand_kernels_follow_the_c_formulas() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            eprintln!("SKIPPED hand_kernels_follow_the_c_formulas: this CPU has no AVX2+FMA");
            return;
        }
        // SAFETY: AVX2 and FMA checked above
        check::<f64>(1e-11, |h, f, s, l, w, a| unsafe { super::f64x4::sample_chunk(h, f.default_f(), s, l, w, a) });
        check::<f32>(2e-4, |h, f, s, l, w, a| unsafe { super::f32x8::sample_chunk(h, f.default_f(), s, l, w, a) });
    }
}
