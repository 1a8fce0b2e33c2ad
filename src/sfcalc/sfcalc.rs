//! Direct structure-factor summation over a P1-expanded model:
//!
//!   F(h) = Σ_types (f0_t(s) + f′_t + i f″_t) · Σ_{sites of type t} occ · exp(2πi h·x − 2π² hᵀU*h)
//!
//! with x the fractional position after a symmetry operator (x′ = Rx + t, U*′ = R U* Rᵀ) and U* the
//! atomic displacement tensor in the reciprocal basis (U* = A⁻¹ U_cart A⁻ᵀ; isotropic U* = B/(8π²)·G*).
//! Only half of reciprocal space is summed: the other half follows from Friedel's law applied to each
//! type's real-weighted sum, S_t(−h) = conj(S_t(h)), so anomalous terms still give |F(h)| ≠ |F(−h)|.
//!
//! The per-site term is the exponential of a complex quadratic form in (h, k, l); along a row of
//! constant (h, k) it is stepped with two complex multiplications per reflection (term ← term·ratio,
//! ratio ← ratio·exp(−4π²U*₃₃)), starting each row from one exp/sincos. Sites are split over rayon
//! threads, each accumulating its own per-type sums.

use rayon::prelude::*;
use std::f64::consts::PI;

/// Unit cell: orthogonalization matrix A (columns a, b, c in Å, PDB convention: a along x, b in the
/// xy plane), its inverse and the reciprocal metric G* = A⁻¹A⁻ᵀ.
#[derive(Clone, Copy, Debug)]
pub struct Cell {
    pub params: [f64; 6],
    pub a: [[f64; 3]; 3],
    pub a_inv: [[f64; 3]; 3],
    pub g_star: [[f64; 3]; 3],
}

fn mat_mul(x: &[[f64; 3]; 3], y: &[[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let mut o = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            o[i][j] = (0..3).map(|k| x[i][k] * y[k][j]).sum();
        }
    }
    o
}

fn transpose(x: &[[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let mut o = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            o[i][j] = x[j][i];
        }
    }
    o
}

impl Cell {
    /// None when the parameters do not describe a cell.
    pub fn new(p: [f64; 6]) -> Option<Cell> {
        let [a, b, c, al, be, ga] = p;
        let (ca, cb, cg) = (al.to_radians().cos(), be.to_radians().cos(), ga.to_radians().cos());
        let sg = ga.to_radians().sin();
        if !(a > 0.0 && b > 0.0 && c > 0.0) || sg.abs() < 1e-9 {
            return None;
        }
        let cx = c * cb;
        let cy = c * (ca - cb * cg) / sg;
        let cz2 = c * c - cx * cx - cy * cy;
        if !(cz2 > 0.0) {
            return None;
        }
        let cz = cz2.sqrt();
        let am = [[a, b * cg, cx], [0.0, b * sg, cy], [0.0, 0.0, cz]];
        // inverse of the upper-triangular A
        let mut inv = [[0.0; 3]; 3];
        inv[0][0] = 1.0 / am[0][0];
        inv[1][1] = 1.0 / am[1][1];
        inv[2][2] = 1.0 / am[2][2];
        inv[0][1] = -am[0][1] * inv[0][0] * inv[1][1];
        inv[1][2] = -am[1][2] * inv[1][1] * inv[2][2];
        inv[0][2] = -(am[0][1] * inv[1][2] + am[0][2] * inv[2][2]) * inv[0][0];
        let g_star = mat_mul(&inv, &transpose(&inv));
        Some(Cell { params: p, a: am, a_inv: inv, g_star })
    }

    /// Volume (Å³): the determinant of the upper-triangular A.
    pub fn volume(&self) -> f64 {
        self.a[0][0] * self.a[1][1] * self.a[2][2]
    }

    pub fn frac(&self, x: [f64; 3]) -> [f64; 3] {
        let m = &self.a_inv;
        [0, 1, 2].map(|i| m[i][0] * x[0] + m[i][1] * x[1] + m[i][2] * x[2])
    }

    /// 1/d² of reflection h.
    pub fn s_sq(&self, h: [f64; 3]) -> f64 {
        let g = &self.g_star;
        let mut s = 0.0;
        for i in 0..3 {
            for j in 0..3 {
                s += h[i] * g[i][j] * h[j];
            }
        }
        s
    }

    /// U* = A⁻¹ U A⁻ᵀ from Cartesian U (U11 U22 U33 U12 U13 U23).
    pub fn u_star_from_cart(&self, u: [f64; 6]) -> [[f64; 3]; 3] {
        let um = [[u[0], u[3], u[4]], [u[3], u[1], u[5]], [u[4], u[5], u[2]]];
        mat_mul(&mat_mul(&self.a_inv, &um), &transpose(&self.a_inv))
    }
}

/// One atom of the asymmetric unit, ready for expansion: fractional position, occupancy, U* and the
/// index of its scattering type.
#[derive(Clone, Copy, Debug)]
pub struct SfAtom {
    pub frac: [f64; 3],
    pub occ: f64,
    pub u_star: [[f64; 3]; 3],
    pub type_index: usize,
}

/// A scattering type: f0 as a function of stol² plus constant f′ and f″.
pub struct SfType<'a> {
    pub f0: &'a (dyn Fn(f64) -> f64 + Sync),
    pub fp: f64,
    pub fdp: f64,
}

/// Result: every reflection with d ≥ d_min (F000 included, both Friedel mates), with complex F.
pub struct SfResult {
    pub hkl: Vec<[i32; 3]>,
    pub f: Vec<[f64; 2]>,
}

struct Row {
    h: i32,
    k: i32,
    l0: i32,
    len: usize,
    off: usize,
}

fn build_rows(cell: &Cell, d_min: f64) -> (Vec<Row>, usize) {
    let s_max_sq = 1.0 / (d_min * d_min);
    let g = &cell.g_star;
    let hmax = (cell.params[0] / d_min).floor() as i32 + 1;
    let kmax = (cell.params[1] / d_min).floor() as i32 + 1;
    let lmax = (cell.params[2] / d_min).floor() as i32 + 1;
    let mut rows = Vec::new();
    let mut n = 0;
    for h in 0..=hmax {
        for k in -kmax..=kmax {
            if h == 0 && k < 0 {
                continue;
            }
            let (hf, kf) = (h as f64, k as f64);
            let qa = g[2][2];
            let qb = hf * g[0][2] + kf * g[1][2];
            let qc = hf * hf * g[0][0] + kf * kf * g[1][1] + 2.0 * hf * kf * g[0][1] - s_max_sq;
            let disc = qb * qb - qa * qc;
            if disc < 0.0 {
                continue;
            }
            let sq = disc.sqrt();
            let mut l0 = ((-qb - sq) / qa).ceil() as i32 - 1;
            let mut l1 = ((-qb + sq) / qa).floor() as i32 + 1;
            l0 = l0.max(-lmax);
            l1 = l1.min(lmax);
            if h == 0 && k == 0 {
                l0 = l0.max(0);
            }
            let inside = |l: i32| cell.s_sq([hf, kf, l as f64]) <= s_max_sq;
            while l0 <= l1 && !inside(l0) {
                l0 += 1;
            }
            while l1 >= l0 && !inside(l1) {
                l1 -= 1;
            }
            if l0 > l1 {
                continue;
            }
            let len = (l1 - l0 + 1) as usize;
            rows.push(Row { h, k, l0, len, off: n });
            n += len;
        }
    }
    (rows, n)
}

#[derive(Clone, Copy)]
struct Site {
    x: [f64; 3],
    w: f64,
    u: [[f64; 3]; 3],
    t: usize,
}

#[inline(always)]
fn cexp(re: f64, im: f64) -> (f64, f64) {
    let m = re.exp();
    let (s, c) = im.sin_cos();
    (m * c, m * s)
}

/// Sum the structure factors of `atoms` expanded by `ops` (fractional x′ = R x + t) to `d_min` Å.
pub fn structure_factors(
    cell: &Cell,
    ops: &[super::spacegroup::SymOp],
    atoms: &[SfAtom],
    types: &[SfType],
    d_min: f64,
) -> SfResult {
    let (rows, n) = build_rows(cell, d_min);
    let nt = types.len();
    let mut sites = Vec::with_capacity(atoms.len() * ops.len());
    for a in atoms {
        for op in ops {
            let r = &op.r;
            let x = [0, 1, 2].map(|i| r[i][0] * a.frac[0] + r[i][1] * a.frac[1] + r[i][2] * a.frac[2] + op.t[i]);
            let u = mat_mul(&mat_mul(r, &a.u_star), &transpose(r));
            sites.push(Site { x, w: a.occ, u, t: a.type_index });
        }
    }
    let two_pi = 2.0 * PI;
    let m2pi2 = -2.0 * PI * PI;
    let threads = rayon::current_num_threads().max(1);
    let chunk = sites.len().div_ceil(threads * 2).max(1);
    let acc = sites
        .par_chunks(chunk)
        .map(|chunk| {
            let mut acc = vec![0.0f64; 2 * nt * n];
            for s in chunk {
                let base = 2 * s.t * n;
                let u = &s.u;
                let q33 = m2pi2 * u[2][2];
                let (step_re, _) = (2.0 * q33, 0.0);
                let step = step_re.exp();
                for row in &rows {
                    let (h, k, l0) = (row.h as f64, row.k as f64, row.l0 as f64);
                    // Q(l) = c0 + c1 l + q33 l²
                    let c0_re = m2pi2 * (h * h * u[0][0] + k * k * u[1][1] + 2.0 * h * k * u[0][1]);
                    let c0_im = two_pi * (h * s.x[0] + k * s.x[1]);
                    let c1_re = m2pi2 * 2.0 * (h * u[0][2] + k * u[1][2]);
                    let c1_im = two_pi * s.x[2];
                    let (mut tr, mut ti) = cexp(c0_re + c1_re * l0 + q33 * l0 * l0, c0_im + c1_im * l0);
                    tr *= s.w;
                    ti *= s.w;
                    let (mut rr, mut ri) = cexp(c1_re + q33 * (2.0 * l0 + 1.0), c1_im);
                    let out = &mut acc[base + 2 * row.off..base + 2 * (row.off + row.len)];
                    for o in out.chunks_exact_mut(2) {
                        o[0] += tr;
                        o[1] += ti;
                        let nr = tr * rr - ti * ri;
                        ti = tr * ri + ti * rr;
                        tr = nr;
                        rr *= step;
                        ri *= step;
                    }
                }
            }
            acc
        })
        .reduce_with(|mut a, b| {
            for (x, y) in a.iter_mut().zip(&b) {
                *x += y;
            }
            a
        })
        .unwrap_or_else(|| vec![0.0; 2 * nt * n]);

    let mut hkl = Vec::with_capacity(2 * n);
    let mut f = Vec::with_capacity(2 * n);
    for row in &rows {
        for i in 0..row.len {
            let idx = row.off + i;
            let hv = [row.h, row.k, row.l0 + i as i32];
            let stol_sq = cell.s_sq(hv.map(|v| v as f64)) / 4.0;
            let (mut pr, mut pi, mut mr, mut mi) = (0.0, 0.0, 0.0, 0.0);
            for (t, ty) in types.iter().enumerate() {
                let fr = (ty.f0)(stol_sq) + ty.fp;
                let fi = ty.fdp;
                let sr = acc[2 * (t * n + idx)];
                let si = acc[2 * (t * n + idx) + 1];
                // F(h) += (fr + i fi)(sr + i si); F(-h) += (fr + i fi)(sr - i si)
                pr += fr * sr - fi * si;
                pi += fr * si + fi * sr;
                mr += fr * sr + fi * si;
                mi += fi * sr - fr * si;
            }
            hkl.push(hv);
            f.push([pr, pi]);
            if hv != [0, 0, 0] {
                hkl.push([-hv[0], -hv[1], -hv[2]]);
                f.push([mr, mi]);
            }
        }
    }
    SfResult { hkl, f }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sfcalc::spacegroup::parse_op;

    #[test]
    fn volume_is_the_triclinic_formula() {
        let [a, b, c, al, be, ga] = [10.0f64, 12.0, 15.0, 80.0, 95.0, 105.0];
        let (ca, cb, cg) = (al.to_radians().cos(), be.to_radians().cos(), ga.to_radians().cos());
        let v = a * b * c * (1.0 - ca * ca - cb * cb - cg * cg + 2.0 * ca * cb * cg).sqrt();
        assert!((Cell::new([a, b, c, al, be, ga]).unwrap().volume() / v - 1.0).abs() < 1e-12);
    }

    /// Brute-force sum for a tiny anisotropic, anomalous model in a triclinic cell.
    #[test]
    fn recurrence_matches_direct_sum() {
        let cell = Cell::new([10.0, 12.0, 15.0, 80.0, 95.0, 105.0]).unwrap();
        let ops = vec![parse_op("x,y,z").unwrap(), parse_op("-x,y+1/2,-z").unwrap()];
        let u1 = cell.u_star_from_cart([0.2, 0.3, 0.25, 0.05, -0.02, 0.03]);
        let u2 = cell.u_star_from_cart([0.4, 0.4, 0.4, 0.0, 0.0, 0.0]);
        let atoms = vec![
            SfAtom { frac: [0.1, 0.2, 0.3], occ: 1.0, u_star: u1, type_index: 0 },
            SfAtom { frac: [0.7, 0.45, 0.15], occ: 0.6, u_star: u2, type_index: 1 },
        ];
        let f0a = |s: f64| 6.0 * (-3.0 * s).exp();
        let f0b = |s: f64| 26.0 * (-2.0 * s).exp();
        let types = vec![SfType { f0: &f0a, fp: 0.0, fdp: 0.0 }, SfType { f0: &f0b, fp: -1.0, fdp: 3.0 }];
        let r = structure_factors(&cell, &ops, &atoms, &types, 2.0);
        let mut n = 0;
        for (h, f) in r.hkl.iter().zip(&r.f) {
            let hv = h.map(|v| v as f64);
            let stol = cell.s_sq(hv) / 4.0;
            let (mut re, mut im) = (0.0, 0.0);
            for a in &atoms {
                let ty = &types[a.type_index];
                let (fr, fi) = ((ty.f0)(stol) + ty.fp, ty.fdp);
                for op in &ops {
                    let x: Vec<f64> = (0..3).map(|i| (0..3).map(|j| op.r[i][j] * a.frac[j]).sum::<f64>() + op.t[i]).collect();
                    let u = mat_mul(&mat_mul(&op.r, &a.u_star), &transpose(&op.r));
                    let mut q = 0.0;
                    for i in 0..3 {
                        for j in 0..3 {
                            q += hv[i] * u[i][j] * hv[j];
                        }
                    }
                    let dw = (-2.0 * PI * PI * q).exp() * a.occ;
                    let ph = 2.0 * PI * (hv[0] * x[0] + hv[1] * x[1] + hv[2] * x[2]);
                    let (c, s) = (ph.cos() * dw, ph.sin() * dw);
                    re += fr * c - fi * s;
                    im += fr * s + fi * c;
                }
            }
            assert!((re - f[0]).abs() < 1e-9 && (im - f[1]).abs() < 1e-9, "{h:?}: {re} {im} vs {f:?}");
            assert!(cell.s_sq(hv) <= 0.25 + 1e-12);
            n += 1;
        }
        // every reflection inside the sphere is present exactly once
        let mut count = 0;
        for h in -6..=6i32 {
            for k in -7..=7i32 {
                for l in -9..=9i32 {
                    if cell.s_sq([h as f64, k as f64, l as f64]) <= 0.25 {
                        count += 1;
                    }
                }
            }
        }
        assert_eq!(n, count);
    }
}
