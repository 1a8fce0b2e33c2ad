//! Derivative images in SIMD lanes: the forward-mode tangents of `kernel::tangents` (the scalar
//! dual-number reference) without pushing K dual components through every operation. Per sample
//! the pass computes the intensity I = F²·Π U_j² (nanoBragg.c L2822-L2870, U_j = sin(Nπh_j)/sin(πh_j)
//! as the Chebyshev polynomial U_{N−1}(cos πδ_j), δ_j = h_j − h0_j) and its gradient g_j = ∂I/∂h_j by
//! the three fractional Miller indices h_j = o_j·S (S = (d − i)/λ the scattering vector, L2770-L2800);
//! it sums, per pixel lane,
//!
//! * ∂I/∂d = Σ g_j·o_j/λ per sub-pixel (the diffracted unit vector d moves with the detector), and
//! * G_o = Σ g_j ⊗ S per orientation o (the orientation table moves with the crystal),
//!
//! and only then chains to each parameter with its precomputed setup tangents (`experiment::tangents`):
//! dI/dθ = Σ_subpixels ∂I/∂d·dd/dθ + Σ_o G_o : do/dθ, a few dot products per pixel instead of K per
//! sample. The solid angle and polarization of the first sub-pixel (the C reuses them, L2620-L2720)
//! and the fluence chain at the pixel. The kernel never learns what a parameter means.
//!
//! What it takes ([`supports`], [`takes`]): the usual crystal (square spot, integer N ≤
//! `CHEB_MAX_N`, nearest-neighbour F held fixed), a flat detector without sensor layers or
//! `-oversample_*`/`-dmin`, and parameters that move only the panel geometry, the orientation table
//! and the fluence (rot_*, the cell, mosaic, distance, beams, detector rotations, fluence). Anything else
//! is rendered by the dual reference; both agree to 1e-9 of the image's peak in double precision
//! (`check-kernels` compares every pass, `tests/gradients.rs` at every SIMD level).

use super::lanes::{ceil, cheb_roots, Real, CHEB_MAX_N};
use super::reference::pixel_active;
use crate::base::consts::R_E_SQR;
use crate::base::cpu::{detected_level, SimdLevel};
use crate::base::vec3::{cross, unitize, V3};
use crate::experiment::detector::Panel;
use crate::experiment::params::{CrystalShape, Precision};
use crate::experiment::structure_factors::NearestF;
use crate::experiment::tangents::{PanelGeom, Resolved};
use crate::experiment::Experiment;
use rayon::prelude::*;

/// Whether the lane pass reproduces this experiment's derivatives (else the dual reference runs).
pub fn supports(exp: &Experiment) -> bool {
    let c = &exp.crystal;
    let s = &exp.sampling;
    c.shape == CrystalShape::Square
        && [c.na, c.nb, c.nc].iter().all(|&n| n.fract() == 0.0 && (0.0..=CHEB_MAX_N as f64).contains(&n))
        && !exp.structure_factors.interpolate
        && exp.structure_factors.dmin <= 0.0
        && !(s.oversample_thick || s.oversample_polar || s.oversample_omega)
        && exp.det.panels.iter().all(|p| !p.curved && p.sensor.thick == 0.0 && p.sensor.thicksteps == 1)
        && !exp.crystal.orientations.is_empty()
}

/// Whether the lane pass takes a parameter with these setup tangents: it may move the panels' pix0,
/// axes and close distance, the orientation table and the fluence; not the sources, polarization
/// axis, N or background (those parameters go to the dual reference).
pub fn takes(t: &Resolved) -> bool {
    let zero3 = |v: &V3| v.iter().all(|&x| x == 0.0);
    t.sources.iter().all(|(d, l)| zero3(d) && *l == 0.0) && zero3(&t.polar_vector) && t.n.iter().all(|&x| x == 0.0) && t.i_bg == 0.0
}

/// One parameter's tangents as the pass chains them.
struct ParamTangent {
    panels: Vec<PanelGeom>,
    /// do/dθ per orientation, (a, b, c) × xyz flattened; empty when the table does not move.
    orient: Vec<[f64; 9]>,
    fluence: f64,
}

impl ParamTangent {
    fn new(t: &Resolved) -> Self {
        let moves = t.orientations.iter().flatten().flatten().any(|&x| x != 0.0);
        let orient = if moves { t.orientations.iter().map(|o| std::array::from_fn(|k| o[k / 3][k % 3])).collect() } else { Vec::new() };
        ParamTangent { panels: t.panels.clone(), orient, fluence: t.fluence }
    }
    fn moves_panel(&self, p: usize) -> bool {
        let g = &self.panels[p];
        [g.pix0, g.fdet, g.sdet, g.odet].iter().flatten().any(|&x| x != 0.0) || g.close_distance != 0.0
    }
}

/// Sources sharing one wavelength: the first one's incident vector i_g, 1/λ_g, the members.
struct Group<T> {
    inc: V3,
    inv_lambda_f64: f64,
    inv_lambda: T,
    sources: Vec<usize>,
}

/// The sources grouped by wavelength (bit for bit) in order of first appearance, and per source ×
/// orientation × axis (K, cos πK, sin πK) with K = −o_j·(i_s − i_g)/λ_g, in f64 then rounded.
fn groups<T: Real>(sources: &[(V3, f64)], orient: &[crate::experiment::Orientation]) -> (Vec<Group<T>>, Vec<[[T; 3]; 3]>) {
    let mut groups: Vec<Group<T>> = Vec::new();
    let mut of = Vec::with_capacity(sources.len());
    for (si, &(inc, inv_l)) in sources.iter().enumerate() {
        match groups.iter().position(|g| g.inv_lambda_f64.to_bits() == inv_l.to_bits()) {
            Some(g) => {
                groups[g].sources.push(si);
                of.push(g);
            }
            None => {
                groups.push(Group { inc, inv_lambda_f64: inv_l, inv_lambda: T::from_f64(inv_l), sources: vec![si] });
                of.push(groups.len() - 1);
            }
        }
    }
    let mut k = Vec::with_capacity(sources.len() * orient.len());
    for (si, &(inc, _)) in sources.iter().enumerate() {
        let g = &groups[of[si]];
        let di = [inc[0] - g.inc[0], inc[1] - g.inc[1], inc[2] - g.inc[2]];
        for o in orient {
            k.push([o.a, o.b, o.c].map(|v| {
                let kk = -(v[0] * di[0] + v[1] * di[1] + v[2] * di[2]) * g.inv_lambda_f64;
                let (s, c) = (std::f64::consts::PI * kk).sin_cos();
                [T::from_f64(kk), T::from_f64(c), T::from_f64(s)]
            }));
        }
    }
    (groups, k)
}

/// What every pixel reads, converted once: orientations in T, sources, the lattice's Chebyshev roots,
/// the F grid, the polarization geometry of the first source.
struct Setup<'a, T: Real> {
    orient: Vec<[[T; 3]; 3]>,
    /// Incident unit vectors (−source direction) and 1/λ.
    sources: Vec<(V3, f64)>,
    roots: [Roots<T>; 3],
    f: NearestF<'a, T>,
    /// The same grid for lookups in 32-bit lanes (`fast::Grid32`), where it fits.
    grid32: Option<super::fast::Grid32<T>>,
    /// [`cos_sin_coefficients`].
    poly: ([T; 8], [T; 8]),
    /// The sources in groups of one wavelength.
    groups: Vec<Group<T>>,
    /// Per source × orientation (source outer) × axis: K, cos πK, sin πK ([`sweep`]).
    k: Vec<[[T; 3]; 3]>,
    /// (incident, B_in, E_in) of the first source: the polarization the C keeps (L2700).
    pol: (V3, V3, V3),
    params: Vec<ParamTangent>,
}

impl<'a, T: Real> Setup<'a, T> {
    /// F at the nearest integers (h0, k0, l0) of `C` lanes (held fixed: F's derivative is not taken).
    #[inline(always)]
    fn f_lanes<const C: usize, const G: u8>(&self, h0: &[[T; C]; 3]) -> [T; C] {
        match (&self.grid32, self.f.has_grid()) {
            (Some(g), _) => {
                let (flat, inside) = g.index_lanes(&h0[0], &h0[1], &h0[2]);
                let f = gather::<T, C, G>(self.f.data(), &flat);
                std::array::from_fn(|l| if inside[l] { f[l] } else { self.f.default_f() })
            }
            (None, true) => {
                let view = self.f.view();
                std::array::from_fn(|l| view.get(h0[0][l].magic_int(), h0[1][l].magic_int(), h0[2][l].magic_int()))
            }
            (None, false) => [self.f.default_f(); C],
        }
    }

    fn new(exp: &'a Experiment, tangents: &[&Resolved]) -> Self {
        let orient = exp.crystal.orientations.iter().map(|o| [o.a.map(T::from_f64), o.b.map(T::from_f64), o.c.map(T::from_f64)]).collect();
        let sources: Vec<(V3, f64)> = exp.beam.sources.iter().map(|s| ([-s.dir[0], -s.dir[1], -s.dir[2]], 1.0 / s.lambda)).collect();
        let ns = [exp.crystal.na, exp.crystal.nb, exp.crystal.nc].map(|n| n.max(1.0) as usize);
        let inc = unitize(&sources[0].0).0;
        let axis = unitize(&exp.beam.polar_vector).0;
        let b_in = unitize(&cross(&axis, &inc)).0;
        let e_in = unitize(&cross(&inc, &b_in)).0;
        let f = NearestF::new(exp.structure_factors.fhkl.as_deref(), exp.structure_factors.default_f);
        let grid32 = super::fast::Grid32::new(&f);
        let (groups, k) = groups(&sources, &exp.crystal.orientations);
        Setup {
            groups,
            k,
            orient,
            sources,
            roots: ns.map(Roots::new),
            f,
            grid32,
            poly: cos_sin_coefficients(),
            pol: (inc, b_in, e_in),
            params: tangents.iter().map(|t| ParamTangent::new(t)).collect(),
        }
    }
}

/// The coefficients of 2cos(πδ) = 2 + δ²·Q(δ²) and 2sin(πδ) = δ·P(δ²) for |δ| ≤ ½: the hand
/// loop's minimax polynomials (`hand::TWO_COS_PI_Q64`, `TWO_SIN_PI_P64`; the f32 ones in single
/// precision), highest degree first, zeros in front.
fn cos_sin_coefficients<T: Real>() -> ([T; 8], [T; 8]) {
    use super::hand::{TWO_COS_PI_Q32, TWO_COS_PI_Q64, TWO_SIN_PI_P32, TWO_SIN_PI_P64};
    let wide = std::mem::size_of::<T>() == 8;
    let (q, p): (&[f64], &[f64]) = if wide { (&TWO_COS_PI_Q64, &TWO_SIN_PI_P64) } else { (&TWO_COS_PI_Q32, &TWO_SIN_PI_P32) };
    let rev = |c: &[f64]| -> [T; 8] { std::array::from_fn(|k| if k + c.len() >= 8 { T::from_f64(c[7 - k]) } else { T::ZERO }) };
    (rev(q), rev(p))
}

/// `data[idx[l]]` for `C` lanes (every index within `data`): one gather instruction where the
/// level `G` (2: AVX2, 5: AVX-512, 0: none) has one for this T and C, else lane by lane.
#[inline(always)]
fn gather<T: Real, const C: usize, const G: u8>(data: &[T], idx: &[i32; C]) -> [T; C] {
    let mut out = [T::ZERO; C];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        let wide = std::mem::size_of::<T>() == 8;
        let (p, o, ip) = (data.as_ptr(), out.as_mut_ptr(), idx.as_ptr());
        // SAFETY: G is 5 only in functions compiled with AVX-512F and 2 only with AVX2 (row_avx512,
        // row_avx2); the casts match T's size and C lanes; every index is within `data`.
        unsafe {
            if G == 5 && wide && C % 8 == 0 {
                for c in (0..C).step_by(8) {
                    _mm512_storeu_pd(o.add(c) as *mut f64, _mm512_i32gather_pd::<8>(_mm256_loadu_si256(ip.add(c) as *const __m256i), p as *const f64));
                }
                return out;
            }
            if G == 5 && !wide && C % 16 == 0 {
                for c in (0..C).step_by(16) {
                    _mm512_storeu_ps(o.add(c) as *mut f32, _mm512_i32gather_ps::<4>(_mm512_loadu_si512(ip.add(c) as *const _), p as *const f32));
                }
                return out;
            }
            if G == 2 && wide && C % 4 == 0 {
                for c in (0..C).step_by(4) {
                    _mm256_storeu_pd(o.add(c) as *mut f64, _mm256_i32gather_pd::<8>(p as *const f64, _mm_loadu_si128(ip.add(c) as *const __m128i)));
                }
                return out;
            }
            if G == 2 && !wide && C % 8 == 0 {
                for c in (0..C).step_by(8) {
                    _mm256_storeu_ps(o.add(c) as *mut f32, _mm256_i32gather_ps::<4>(p as *const f32, _mm256_loadu_si256(ip.add(c) as *const __m256i)));
                }
                return out;
            }
        }
    }
    for l in 0..C {
        debug_assert!((idx[l] as u32 as usize) < data.len());
        // SAFETY: the caller's indices are within `data`
        out[l] = unsafe { *data.get_unchecked(idx[l] as u32 as usize) };
    }
    out
}

/// a·b + c: one fused multiply-add where the row function is compiled with FMA (`F`), else two
/// operations (`Real::mul_add` would be a libm call there).
#[inline(always)]
fn mad<T: Real, const F: bool>(a: T, b: T, c: T) -> T {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// 2cos(πβ) and 2sin(πβ) for `C` lanes of |β| ≤ ½ ([`cos_sin_coefficients`]).
#[inline(always)]
fn two_cos_sin_pi<T: Real, const C: usize, const F: bool>(beta: &[T; C], (q, p): &([T; 8], [T; 8])) -> ([T; C], [T; C]) {
    let mut t = [T::ZERO; C];
    let mut c = [T::ZERO; C];
    let mut s = [T::ZERO; C];
    for l in 0..C {
        t[l] = beta[l] * beta[l];
    }
    for k in 0..8 {
        for l in 0..C {
            c[l] = mad::<T, F>(c[l], t[l], q[k]);
            s[l] = mad::<T, F>(s[l], t[l], p[k]);
        }
    }
    let two = T::from_f64(2.0);
    for l in 0..C {
        c[l] = mad::<T, F>(t[l], c[l], two);
        s[l] = beta[l] * s[l];
    }
    (c, s)
}

/// The roots of U_{N−1}(y/2) as a polynomial in z = y² (`lanes::cheb_roots`), in pairs
/// (r + r′, r·r′) and the odd one out, as the hand loop takes them (`hand::HandAxis`).
#[derive(Clone, Default)]
struct Roots<T> {
    even: bool,
    pairs: Vec<[T; 2]>,
    single: Option<T>,
}

impl<T: Real> Roots<T> {
    fn new(n: usize) -> Self {
        let r = cheb_roots::<f64>(n);
        let pairs = r.chunks_exact(2).map(|p| [T::from_f64(p[0] + p[1]), T::from_f64(p[0] * p[1])]).collect();
        Roots { even: n % 2 == 0, pairs, single: (r.len() % 2 == 1).then(|| T::from_f64(r[r.len() - 1])) }
    }
}

/// sin(Nπh)/sin(πh) = U_{N−1}(y/2) and its derivative by h for `C` lanes, from y = 2cos πh and
/// s = 2sin πh: U = y^e·P(z), P = Π(z − r_k) over pairs q = z(z − (r + r′)) + r·r′ (z = y²), with
/// dP/dz by the product rule and dU/dy = P + 2z·dP/dz (even N) or 2y·dP/dz (odd), times
/// dy/dh = −π·s. Exact at the Bragg condition (no division), where the C's sincg is N. A common sign
/// of y and s (h shifted by an integer) changes U·dU/dh and U² by nothing.
#[inline(always)]
fn cheb_and_slope<T: Real, const C: usize, const F: bool>(y: &[T; C], s: &[T; C], roots: &Roots<T>) -> ([T; C], [T; C]) {
    let two = T::from_f64(2.0);
    let mut z = [T::ZERO; C];
    let mut p = [T::ONE; C];
    let mut dp = [T::ZERO; C];
    for l in 0..C {
        z[l] = y[l] * y[l];
    }
    for &[sum, prod] in &roots.pairs {
        for l in 0..C {
            let q = mad::<T, F>(z[l], z[l] - sum, prod);
            let dq = mad::<T, F>(z[l], two, -sum);
            dp[l] = mad::<T, F>(dp[l], q, p[l] * dq);
            p[l] = p[l] * q;
        }
    }
    if let Some(r) = roots.single {
        for l in 0..C {
            let q = z[l] - r;
            dp[l] = mad::<T, F>(dp[l], q, p[l]);
            p[l] = p[l] * q;
        }
    }
    let mut u = [T::ZERO; C];
    let mut du = [T::ZERO; C];
    for l in 0..C {
        if roots.even {
            u[l] = y[l] * p[l];
            du[l] = mad::<T, F>(z[l] + z[l], dp[l], p[l]);
        } else {
            u[l] = p[l];
            du[l] = (y[l] + y[l]) * dp[l];
        }
        du[l] = -(du[l] * s[l]) * T::PI;
    }
    (u, du)
}

/// The samples of one sub-pixel for `C` lanes: every orientation (outer), wavelength group and
/// source (inner). h_j = B_j + K_j with B_j = o_j·(d − i_g)/λ_g per group (i_g its first source) and
/// K_j = −o_j·(i_s − i_g)/λ_g per source ([`Group`]), so 2cos πh and 2sin πh come from the group's
/// polynomials by angle addition. Adds each sample's I to `i_acc` and g_j·S_c to
/// `g_acc[o·9 + 3j + c]`; returns ∂I/∂d (Σ g_j·o_j/λ). `rel[g]` = (d − i_g)/λ_g and `scat[s]` = S
/// per lane, `weight` 1 for active lanes and 0 elsewhere.
#[inline(always)]
fn sweep<T: Real, const C: usize, const F: bool, const G: u8>(
    set: &Setup<T>,
    rel: &[[[T; C]; 3]],
    scat: &[[[T; C]; 3]],
    weight: &[T; C],
    g_acc: &mut [[T; C]],
    i_acc: &mut [T; C],
) -> [[T; C]; 3] {
    let mut v = [[T::ZERO; C]; 3];
    let half = T::HALF;
    let n_orient = set.orient.len();
    for (o, ori) in set.orient.iter().enumerate() {
        let mut gs = [[T::ZERO; C]; 9];
        let mut w = [[T::ZERO; C]; 3];
        for (gi, group) in set.groups.iter().enumerate() {
            let r = &rel[gi];
            let mut b = [[T::ZERO; C]; 3];
            let mut cb = [[T::ZERO; C]; 3];
            let mut sb = [[T::ZERO; C]; 3];
            for ax in 0..3 {
                let a = ori[ax];
                let mut beta = [T::ZERO; C];
                for l in 0..C {
                    b[ax][l] = mad::<T, F>(a[2], r[2][l], mad::<T, F>(a[1], r[1][l], a[0] * r[0][l]));
                    beta[l] = b[ax][l] - super::lanes::round(b[ax][l]);
                }
                (cb[ax], sb[ax]) = two_cos_sin_pi::<T, C, F>(&beta, &set.poly);
            }
            let mut wg = [[T::ZERO; C]; 3];
            for &si in &group.sources {
                let k = &set.k[si * n_orient + o];
                let sc = &scat[si];
                let mut u = [[T::ZERO; C]; 3];
                let mut du = [[T::ZERO; C]; 3];
                let mut h0 = [[T::ZERO; C]; 3];
                for ax in 0..3 {
                    let [kk, ck, sk] = k[ax];
                    let mut y = [T::ZERO; C];
                    let mut s2 = [T::ZERO; C];
                    for l in 0..C {
                        h0[ax][l] = ceil(b[ax][l] + kk - half);
                        y[l] = mad::<T, F>(cb[ax][l], ck, -(sb[ax][l] * sk));
                        s2[l] = mad::<T, F>(sb[ax][l], ck, cb[ax][l] * sk);
                    }
                    (u[ax], du[ax]) = cheb_and_slope::<T, C, F>(&y, &s2, &set.roots[ax]);
                }
                let f = set.f_lanes::<C, G>(&h0);
                let mut g = [[T::ZERO; C]; 3];
                for l in 0..C {
                    let f2w = f[l] * f[l] * weight[l];
                    let (a2, b2, c2) = (u[0][l] * u[0][l], u[1][l] * u[1][l], u[2][l] * u[2][l]);
                    let bc = b2 * c2;
                    i_acc[l] = mad::<T, F>(f2w, a2 * bc, i_acc[l]);
                    let two = f2w + f2w;
                    g[0][l] = two * (u[0][l] * du[0][l]) * bc;
                    g[1][l] = two * (u[1][l] * du[1][l]) * (a2 * c2);
                    g[2][l] = two * (u[2][l] * du[2][l]) * (a2 * b2);
                }
                for j in 0..3 {
                    for l in 0..C {
                        wg[j][l] = wg[j][l] + g[j][l];
                    }
                    for c in 0..3 {
                        for l in 0..C {
                            gs[3 * j + c][l] = mad::<T, F>(g[j][l], sc[c][l], gs[3 * j + c][l]);
                        }
                    }
                }
            }
            for j in 0..3 {
                for l in 0..C {
                    w[j][l] = mad::<T, F>(wg[j][l], group.inv_lambda, w[j][l]);
                }
            }
        }
        for k in 0..9 {
            for l in 0..C {
                g_acc[o * 9 + k][l] = g_acc[o * 9 + k][l] + gs[k][l];
            }
        }
        for c in 0..3 {
            for l in 0..C {
                v[c][l] = mad::<T, F>(w[2][l], ori[2][c], mad::<T, F>(w[1][l], ori[1][c], mad::<T, F>(w[0][l], ori[0][c], v[c][l])));
            }
        }
    }
    v
}

/// The first sub-pixel's solid angle and polarization (the C's last-value rule, L2620-L2720) with
/// their gradients by the sub-pixel's position (and by close_distance, for ω).
#[derive(Clone, Copy, Default)]
struct FirstFactors {
    omega: f64,
    domega_dpos: V3,
    domega_dclose: f64,
    polar: f64,
    dpolar_dpos: V3,
}

/// [`FirstFactors`] at position `pos` (unit vector `d`, length `r`).
fn first_factors(exp: &Experiment, panel: &Panel, set_pol: &(V3, V3, V3), d: &V3, r: f64) -> FirstFactors {
    let (omega, radial, domega_dclose) = if panel.point_pixel {
        let om = 1.0 / r / r;
        (om, -2.0 * om / r, 0.0)
    } else {
        let om = panel.pixel_size * panel.pixel_size / r / r * panel.close_distance / r;
        (om, -3.0 * om / r, panel.pixel_size * panel.pixel_size / r / r / r)
    };
    let domega_dpos = d.map(|x| radial * x);
    let (polar, dpolar_dd) = if exp.beam.nopolar { (1.0, [0.0; 3]) } else { polarization_and_slope(exp.beam.polarization, set_pol, d) };
    // d = pos/r: dd/dpos = (I − d dᵀ)/r
    let proj = dpolar_dd[0] * d[0] + dpolar_dd[1] * d[1] + dpolar_dd[2] * d[2];
    let dpolar_dpos = std::array::from_fn(|i| (dpolar_dd[i] - proj * d[i]) / r);
    FirstFactors { omega, domega_dpos, domega_dclose, polar, dpolar_dpos }
}

/// The Kahn factor ½(1 + c² − κ·cos2ψ·(1 − c²)), c = i·d, cos 2ψ = (E² − B²)/(E² + B²) with E = d·E_in,
/// B = d·B_in (`fast::update_polarization`'s form of nanoBragg.c's atan2), and its gradient by d.
fn polarization_and_slope(kahn: f64, (inc, b_in, e_in): &(V3, V3, V3), d: &V3) -> (f64, V3) {
    let dot = |a: &V3, b: &V3| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    let c = dot(inc, d);
    let c2 = c * c;
    let (e, b) = (dot(d, e_in), dot(d, b_in));
    let n = e * e + b * b;
    let (cos_2psi, de, db) = if n > 0.0 { ((e * e - b * b) / n, 4.0 * e * b * b / (n * n), -4.0 * b * e * e / (n * n)) } else { (1.0, 0.0, 0.0) };
    let polar = 0.5 * (1.0 + c2 - kahn * cos_2psi * (1.0 - c2));
    // ∂/∂c = c + κ·cos2ψ·c; ∂/∂cos2ψ = −½κ(1 − c²)
    let dc = c + kahn * cos_2psi * c;
    let dpsi = -0.5 * kahn * (1.0 - c2);
    (polar, std::array::from_fn(|i| dc * inc[i] + dpsi * (de * e_in[i] + db * b_in[i])))
}

/// One row's pixels (fpixels values) and derivative images (one row per parameter), in groups of `C`
/// lanes. `out_grads[p]` holds parameter p's row.
#[inline(always)]
fn render_row<T: Real, const C: usize, const F: bool, const G: u8>(
    exp: &Experiment,
    set: &Setup<T>,
    row: usize,
    out_value: &mut [f64],
    out_grads: &mut [&mut [f64]],
) {
    let (panel, s) = exp.det.locate(row);
    let pi = exp.det.panels.iter().position(|p| std::ptr::eq(p, panel)).unwrap_or(0);
    let mut f0 = 0;
    let mut g_acc = vec![[T::ZERO; C]; set.orient.len() * 9];
    let mut di = vec![[0.0f64; C]; set.params.len()];
    let mut scratch = (vec![[[T::ZERO; C]; 3]; set.sources.len()], vec![[[T::ZERO; C]; 3]; set.groups.len()]);
    let moves: Vec<bool> = set.params.iter().map(|p| p.moves_panel(pi)).collect();
    while f0 < panel.fpixels {
        let active: [bool; C] = std::array::from_fn(|l| f0 + l < panel.fpixels && pixel_active(panel, f0 + l, s));
        if active.iter().any(|&a| a) {
            g_acc.iter_mut().for_each(|g| *g = [T::ZERO; C]);
            di.iter_mut().for_each(|d| *d = [0.0; C]);
            let value = render_group::<T, C, F, G>(exp, set, (panel, pi, &moves), f0, s, &active, &mut g_acc, &mut di, &mut scratch);
            for l in 0..C.min(panel.fpixels - f0) {
                out_value[f0 + l] = if active[l] { value[l] } else { 0.0 };
                for (p, g) in out_grads.iter_mut().enumerate() {
                    g[f0 + l] = if active[l] { di[p][l] } else { 0.0 };
                }
            }
        }
        f0 += C;
    }
}

/// One group of `C` pixels: its values; its derivatives are left in `di` (per parameter, per lane).
/// `g_acc` and `di` come zeroed (per orientation G_o; per parameter dI/dθ); `scratch` holds S per
/// source and (d − i_g)/λ_g per group; `moves[p]`: parameter p moves this panel.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn render_group<T: Real, const C: usize, const F: bool, const G: u8>(
    exp: &Experiment,
    set: &Setup<T>,
    (panel, pi, moves): (&Panel, usize, &[bool]),
    f0: usize,
    s: usize,
    active: &[bool; C],
    g_acc: &mut [[T; C]],
    di: &mut [[f64; C]],
    (scat, rel): &mut ScratchPair<T, C>,
) -> [f64; C] {
    let (os, sub) = (exp.sampling.oversample, exp.sampling.subpixel_size);
    let (fv, sv, ov, pix0) = (panel.fdet_vector, panel.sdet_vector, panel.odet_vector, panel.pix0_vector);
    let weight: [T; C] = std::array::from_fn(|l| if active[l] { T::ONE } else { T::ZERO });
    let mut i_acc = [T::ZERO; C];
    let mut first = [FirstFactors::default(); C];
    let mut first_pos = [[0.0f64; 2]; C];
    for sub_s in 0..os {
        let sdet = sub * ((s * os + sub_s) as f64) + sub / 2.0;
        for sub_f in 0..os {
            let mut d = [[0.0f64; 3]; C];
            let mut r = [0.0f64; C];
            let mut fd = [0.0f64; C];
            for l in 0..C {
                fd[l] = sub * (((f0 + l) * os + sub_f) as f64) + sub / 2.0;
                let pos: V3 = std::array::from_fn(|i| fd[l] * fv[i] + sdet * sv[i] + 0.0 * ov[i] + pix0[i]);
                let (u, len) = unitize(&pos);
                d[l] = u;
                r[l] = len;
                if sub_s == 0 && sub_f == 0 {
                    first[l] = first_factors(exp, panel, &set.pol, &u, len);
                    first_pos[l] = [fd[l], sdet];
                }
            }
            for (si, (inc, inv_l)) in set.sources.iter().enumerate() {
                for l in 0..C {
                    for k in 0..3 {
                        scat[si][k][l] = T::from_f64((d[l][k] - inc[k]) * inv_l);
                    }
                }
            }
            for (gi, g) in set.groups.iter().enumerate() {
                for l in 0..C {
                    for k in 0..3 {
                        rel[gi][k][l] = T::from_f64((d[l][k] - g.inc[k]) * g.inv_lambda_f64);
                    }
                }
            }
            let v = sweep::<T, C, F, G>(set, rel, scat, &weight, g_acc, &mut i_acc);
            // detector parameters: ∂I/∂d · dd/dθ, dd = (dpos − d(d·dpos))/R
            for (p, t) in set.params.iter().enumerate() {
                if !moves[p] {
                    continue;
                }
                let g = &t.panels[pi];
                for l in 0..C {
                    let dpos: V3 = std::array::from_fn(|i| fd[l] * g.fdet[i] + sdet * g.sdet[i] + g.pix0[i]);
                    let along = d[l][0] * dpos[0] + d[l][1] * dpos[1] + d[l][2] * dpos[2];
                    let mut acc = 0.0;
                    for k in 0..3 {
                        acc += v[k][l].to_f64() * (dpos[k] - d[l][k] * along);
                    }
                    di[p][l] += acc / r[l];
                }
            }
        }
    }
    chain(exp, set, pi, &i_acc, g_acc, di, &first, &first_pos)
}

/// Per-row scratch of [`render_group`]: S per source, (d − i_g)/λ_g per group.
type ScratchPair<T, const C: usize> = (Vec<[[T; C]; 3]>, Vec<[[T; C]; 3]>);

/// The pixel's value r_e²·fluence/steps·I·polar·ω (returned) and its derivatives (left in `di`): the
/// orientation table's part of dI/dθ (Σ_o G_o : do/dθ), then the product rule over I,
/// polarization, ω and fluence.
#[allow(clippy::too_many_arguments)]
fn chain<T: Real, const C: usize>(
    exp: &Experiment,
    set: &Setup<T>,
    pi: usize,
    i_acc: &[T; C],
    g_acc: &[[T; C]],
    di: &mut [[f64; C]],
    first: &[FirstFactors],
    first_pos: &[[f64; 2]; C],
) -> [f64; C] {
    let steps = exp.sampling.steps as f64;
    let i_bg = exp.background.i_bg;
    let mut value = [0.0; C];
    for (p, t) in set.params.iter().enumerate() {
        for (o, to) in t.orient.iter().enumerate() {
            for k in 0..9 {
                for l in 0..C {
                    di[p][l] += g_acc[o * 9 + k][l].to_f64() * to[k];
                }
            }
        }
    }
    for l in 0..C {
        let ff = &first[l];
        let i = i_bg + i_acc[l].to_f64();
        let scale = R_E_SQR * exp.beam.fluence / steps;
        value[l] = scale * i * ff.polar * ff.omega;
        for (p, t) in set.params.iter().enumerate() {
            let g = &t.panels[pi];
            let [fd, sd] = first_pos[l];
            let dpos: V3 = std::array::from_fn(|k| fd * g.fdet[k] + sd * g.sdet[k] + g.pix0[k]);
            let dot = |a: &V3| a[0] * dpos[0] + a[1] * dpos[1] + a[2] * dpos[2];
            let domega = dot(&ff.domega_dpos) + ff.domega_dclose * g.close_distance;
            let dpolar = dot(&ff.dpolar_dpos);
            let dscale = R_E_SQR * t.fluence / steps;
            di[p][l] = scale * (di[p][l] * ff.polar * ff.omega + i * dpolar * ff.omega + i * ff.polar * domega) + dscale * i * ff.polar * ff.omega;
        }
    }
    value
}

/// One row at `level` in `T` (the dispatch of `kernel::simd`: the same generic row compiled for
/// AVX-512, AVX2+FMA and the baseline target). Groups of four registers per quantity: the
/// orientation and source constants each sample reads are broadcast once for all of them (the
/// heavy case at 512², AVX-512, f64: 32 lanes render twice as fast as 8 and 10 % faster than 16,
/// 2026-11-26).
fn row_at<T: Real>(level: SimdLevel, exp: &Experiment, set: &Setup<T>, row: usize, value: &mut [f64], grads: &mut [&mut [f64]]) {
    let wide = std::mem::size_of::<T>() == 8;
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is at most the detected one (render_lanes lowers it)
        SimdLevel::Avx512 => unsafe { row_avx512(exp, set, row, value, grads, wide) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above
        SimdLevel::Avx2 => unsafe { row_avx2(exp, set, row, value, grads, wide) },
        _ => {
            if wide {
                render_row::<T, 8, false, 0>(exp, set, row, value, grads)
            } else {
                render_row::<T, 16, false, 0>(exp, set, row, value, grads)
            }
        }
    }
}

/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_avx2<T: Real>(exp: &Experiment, set: &Setup<T>, row: usize, value: &mut [f64], grads: &mut [&mut [f64]], wide: bool) {
    if wide {
        render_row::<T, 16, true, 2>(exp, set, row, value, grads)
    } else {
        render_row::<T, 32, true, 2>(exp, set, row, value, grads)
    }
}

/// # Safety
/// The CPU must support AVX-512 F/DQ/VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
unsafe fn row_avx512<T: Real>(exp: &Experiment, set: &Setup<T>, row: usize, value: &mut [f64], grads: &mut [&mut [f64]], wide: bool) {
    if wide {
        render_row::<T, 32, true, 5>(exp, set, row, value, grads)
    } else {
        render_row::<T, 32, true, 5>(exp, set, row, value, grads)
    }
}

/// The image and the derivative images by the parameters whose tangents are `tangents` (each
/// [`takes`]), rendered in lanes at `level` (lowered to the CPU's) in `precision`; `exp` must be
/// one the pass [`supports`]. (value, one image per tangent), fast axis fastest.
pub fn render_lanes(exp: &Experiment, tangents: &[&Resolved], level: SimdLevel, precision: Precision) -> (Vec<f64>, Vec<Vec<f64>>) {
    let level = level.min(detected_level());
    match precision {
        Precision::Double => render_in::<f64>(exp, tangents, level),
        Precision::Single => render_in::<f32>(exp, tangents, level),
    }
}

fn render_in<T: Real + Send + Sync>(exp: &Experiment, tangents: &[&Resolved], level: SimdLevel) -> (Vec<f64>, Vec<Vec<f64>>) {
    let set = Setup::<T>::new(exp, tangents);
    let (fp, rows, k) = (exp.det.fpixels(), exp.det.rows(), tangents.len());
    // written in place, row by row (fresh zeroed pages: touched once)
    let mut value = vec![0.0; fp * rows];
    let mut grads: Vec<Vec<f64>> = (0..k).map(|_| vec![0.0; fp * rows]).collect();
    let mut per_row: Vec<Vec<&mut [f64]>> = (0..rows).map(|_| Vec::with_capacity(k)).collect();
    for g in grads.iter_mut() {
        for (s, chunk) in g.chunks_mut(fp.max(1)).enumerate() {
            per_row[s].push(chunk);
        }
    }
    value.par_chunks_mut(fp.max(1)).zip(per_row.into_par_iter()).enumerate().for_each(|(s, (v, mut g))| row_at(level, exp, &set, s, v, &mut g));
    (value, grads)
}

/// The summary line's solid-angle sum for a run the pass renders (`fast::update_omega`'s sum): per
/// active pixel the first sub-pixel's ω (the C's last-value rule, L2620), once per sub-pixel.
pub fn omega_sum(exp: &Experiment) -> f64 {
    let (os, sub) = (exp.sampling.oversample, exp.sampling.subpixel_size);
    let mut total = 0.0;
    for row in 0..exp.det.rows() {
        let (panel, s) = exp.det.locate(row);
        let (fv, sv, pix0) = (panel.fdet_vector, panel.sdet_vector, panel.pix0_vector);
        let sd = sub * ((s * os) as f64) + sub / 2.0;
        let mut row_sum = 0.0;
        for f in (0..panel.fpixels).filter(|&f| pixel_active(panel, f, s)) {
            let fd = sub * ((f * os) as f64) + sub / 2.0;
            let pos: V3 = std::array::from_fn(|i| fd * fv[i] + sd * sv[i] + pix0[i]);
            let r = unitize(&pos).1;
            let omega = if panel.point_pixel { 1.0 / r / r } else { panel.pixel_size * panel.pixel_size / r / r * panel.close_distance / r };
            row_sum += omega * (os * os) as f64;
        }
        total += row_sum;
    }
    total
}

/// Largest |lane − reference| of a derivative image, relative to the image's peak |reference|: the
/// lane pass (`tangent_lanes`) and the dual reference differ in double precision only by the order of
/// the sums and the lattice factor's polynomial form; in single precision the per-sample work
/// (Miller indices, lattice factor and its slope, the sums) is in f32.
pub fn tangent_tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::Double => 1e-9,
        Precision::Single => 1e-4,
    }
}

/// (max |got − want|, max |want|) of two derivative images.
pub fn tangent_difference(got: &[f64], want: &[f64]) -> (f64, f64) {
    let peak = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let err = got.iter().zip(want).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    (err, peak)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slope_at(d: f64, roots: &Roots<f64>) -> ([f64; 1], [f64; 1]) {
        let (y, s) = two_cos_sin_pi::<f64, 1, false>(&[d], &cos_sin_coefficients());
        cheb_and_slope::<f64, 1, false>(&y, &s, roots)
    }

    /// U and dU/dδ against sin(Nπδ)/sin(πδ) and its central difference, for every N the pass takes.
    #[test]
    fn sincg_and_slope_match_the_ratio_of_sines() {
        let pi = std::f64::consts::PI;
        let ratio = |d: f64, n: usize| if d == 0.0 { n as f64 } else { (n as f64 * pi * d).sin() / (pi * d).sin() };
        for n in 1..=CHEB_MAX_N {
            let roots = Roots::<f64>::new(n);
            let scale = (n * n * n) as f64;
            let mut d = -0.5;
            while d <= 0.5 {
                let ([u], [du]) = slope_at(d, &roots);
                let h = 1e-5;
                let fd = (8.0 * (ratio(d + h, n) - ratio(d - h, n)) - (ratio(d + 2.0 * h, n) - ratio(d - 2.0 * h, n))) / (12.0 * h);
                assert!((u - ratio(d, n)).abs() <= 1e-12 * scale, "N={n} δ={d}: {u}");
                assert!((du - fd).abs() <= 1e-7 * scale, "N={n} δ={d}: {du} vs {fd}");
                d += 0.0173;
            }
            let ([u0], [d0]) = slope_at(0.0, &roots);
            assert!((u0 - n as f64).abs() <= 1e-13 * scale && d0 == 0.0, "N={n}: {u0} {d0}");
            // h shifted by an integer: y and s change sign together, U² and U·dU/dh do not
            let (u1, d1) = slope_at(0.137, &roots);
            let (y, s) = two_cos_sin_pi::<f64, 1, false>(&[0.137], &cos_sin_coefficients());
            let (u2, d2) = cheb_and_slope::<f64, 1, false>(&[-y[0]], &[-s[0]], &roots);
            assert!((u1[0] * u1[0] - u2[0] * u2[0]).abs() <= 1e-12 * scale && (u1[0] * d1[0] - u2[0] * d2[0]).abs() <= 1e-10 * scale);
        }
    }

    /// The polarization's gradient by d against central differences (the pass keeps d on the
    /// sphere, so only the tangential part matters; the difference is taken along tangents).
    #[test]
    fn polarization_slope_matches_differences() {
        let inc = unitize(&[1.0, 0.02, -0.01]).0;
        let axis = [0.0, 0.0, 1.0];
        let b_in = unitize(&cross(&axis, &inc)).0;
        let e_in = unitize(&cross(&inc, &b_in)).0;
        let geom = (inc, b_in, e_in);
        for kahn in [0.0, 0.99] {
            let d = unitize(&[0.9, 0.3, -0.25]).0;
            let (_, g) = polarization_and_slope(kahn, &geom, &d);
            for dir in [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]] {
                let h = 1e-6;
                let at = |t: f64| polarization_and_slope(kahn, &geom, &std::array::from_fn(|i| d[i] + t * dir[i])).0;
                let fd = (at(h) - at(-h)) / (2.0 * h);
                let an = g[0] * dir[0] + g[1] * dir[1] + g[2] * dir[2];
                assert!((fd - an).abs() < 1e-8, "kahn {kahn}: {fd} vs {an}");
            }
        }
    }
}
