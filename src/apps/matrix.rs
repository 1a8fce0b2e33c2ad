//! `matrix`: a MOSFLM A-matrix from a unit cell and an orientation, as UBtoA.awk makes it
//! (B matrix from the cell, U from missetting angles applied as U·Rz·Ry·Rx, or a random isotropic
//! rotation, A = U·B, scaled by λ), in UBtoA.awk's nine-line layout, which `simulate -mat` reads.
//!
//! `-mat A.mat` is UBtoA.awk's MATRIX mode: start from an existing A matrix (the first nine numbers
//! of a MOSFLM matrix file, rows x, y, z, as written), instead of one made from `-cell`. Alone, the
//! output is that matrix times λ (`-lambda`, default 1, as the awk's `WAVE`; leave it out to keep the
//! file's scaling) plus the awk's 1e-9, U the identity and the cell line zeros (no CELL), exactly as
//! UBtoA.awk prints `MATRIX` input. With `-misset`/`-umat` the matrix is rotated, A = U·A₀ (U built
//! as UBtoA.awk builds it), where UBtoA.awk would drop the MATRIX and use the B of a CELL line (or
//! zeros without one, a bug).
//!
//! Difference from UBtoA.awk: the random orientation draws its three numbers from the suite's
//! `ran1` with `-seed` (awk's `rand()` differs between awk implementations), so a seed gives the
//! same matrix everywhere.

use crate::base::c::printf::cf;
use crate::io::text::atof;
use crate::base::c::rng::NrRandom;
use crate::{Error, Result};
use std::io::Write;

/// Degrees per radian as UBtoA.awk computes it (180/π, not nanoBragg.c's 180·(1/π): the last bit differs).
const RTD_UBTOA: f64 = 180.0 / std::f64::consts::PI;

type M3 = [[f64; 3]; 3];

fn matmul(a: &M3, b: &M3) -> M3 {
    let mut r = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            r[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
        }
    }
    r
}

/// UBtoA.awk's B matrix (columns a*, b*, c*) for a cell in Å and degrees.
pub fn b_matrix(cell: [f64; 6]) -> M3 {
    let [a, b, c] = [cell[0], cell[1], cell[2]];
    let (alpha, beta, gamma) = (cell[3] / RTD_UBTOA, cell[4] / RTD_UBTOA, cell[5] / RTD_UBTOA);
    let s = (alpha + beta + gamma) / 2.0;
    let mut skew = s.sin() * (s - alpha).sin() * (s - beta).sin() * (s - gamma).sin();
    if skew < 0.0 {
        skew = -skew;
    }
    if skew == 0.0 {
        skew = 1e-30;
    }
    let volume = 2.0 * a * b * c * skew.sqrt();
    let a_star = b * c * alpha.sin() / volume;
    let b_star = c * a * beta.sin() / volume;
    let c_star = a * b * gamma.sin() / volume;
    let cas = (beta.cos() * gamma.cos() - alpha.cos()) / (beta.sin() * gamma.sin());
    let cbs = (gamma.cos() * alpha.cos() - beta.cos()) / (gamma.sin() * alpha.sin());
    let cgs = (alpha.cos() * beta.cos() - gamma.cos()) / (alpha.sin() * beta.sin());
    let sgs = (1.0 - cgs * cgs).sqrt();
    [
        [a_star, b_star * cgs, c_star * cbs],
        [0.0, b_star * sgs, c_star * (cas - cbs * cgs) / sgs],
        [0.0, 0.0, c_star * volume / (a * b * c * sgs)],
    ]
}

/// U = U·Rz·Ry·Rx for missetting angles in degrees (UBtoA.awk's MISSET).
pub fn misset_u(u: &M3, xyz: [f64; 3]) -> M3 {
    let (x, y, z) = (xyz[0] / RTD_UBTOA, xyz[1] / RTD_UBTOA, xyz[2] / RTD_UBTOA);
    let rz = [[z.cos(), -z.sin(), 0.0], [z.sin(), z.cos(), 0.0], [0.0, 0.0, 1.0]];
    let ry = [[y.cos(), 0.0, y.sin()], [0.0, 1.0, 0.0], [-y.sin(), 0.0, y.cos()]];
    let rx = [[1.0, 0.0, 0.0], [0.0, x.cos(), -x.sin()], [0.0, x.sin(), x.cos()]];
    matmul(&matmul(&matmul(u, &rz), &ry), &rx)
}

/// U = U·R for UBtoA.awk's RANDOM with a spread in degrees (90 = isotropic) and r1..r3 in [-1,1].
pub fn random_u(u: &M3, spread: f64, r: [f64; 3]) -> M3 {
    let pi = std::f64::consts::PI;
    let mos = spread / RTD_UBTOA;
    let xyrad = (1.0 - r[1] * r[1]).sqrt();
    let rot = mos * (1.0 - r[2] * r[2]).powf(1.0 / 3.0);
    let (v1, v2, v3) = (xyrad * (pi * r[0]).sin(), xyrad * (pi * r[0]).cos(), r[1]);
    let t1 = rot.cos();
    let t2 = 1.0 - t1;
    let t8 = rot.sin();
    let m = [
        [t1 + t2 * v1 * v1, t2 * v1 * v2 - t8 * v3, t2 * v1 * v3 + t8 * v2],
        [t2 * v1 * v2 + t8 * v3, t1 + t2 * v2 * v2, t2 * v2 * v3 - t8 * v1],
        [t2 * v1 * v3 - t8 * v2, t2 * v2 * v3 + t8 * v1, t1 + t2 * v3 * v3],
    ];
    matmul(u, &m)
}

/// UBtoA.awk's output: λ-scaled A (rows x, y, z; columns a*, b*, c*), zeros, U, the cell, zeros.
pub fn format_matrix(a: &M3, u: &M3, cell: [f64; 6], lambda: f64) -> String {
    let mut s = String::new();
    for row in a {
        for v in row {
            s += &cf("%12.8f", v * lambda + 1e-9);
        }
        s += "\n";
    }
    s += &format!("{}{}{}\n", cf("%12.3f", 0.0), cf("%12.3f", 0.0), cf("%12.3f", 0.0));
    for row in u {
        for v in row {
            s += &cf("%12.7f", *v);
        }
        s += "\n";
    }
    for v in cell {
        s += &cf("%12.4f", v);
    }
    s += "\n";
    s += &format!("{}{}{}\n", cf("%12.3f", 0.0), cf("%12.3f", 0.0), cf("%12.3f", 0.0));
    s
}

/// `nanobragg-rs matrix -cell a b c α β γ [-lambda λ] [-misset x y z | -misset random [-seed N]]
/// [-umat 9 numbers] [-o A.mat]`.
/// Cell edges (Å) `matrix` takes are below this: the cell line's `%12.4f` fills its columns from here.
const MAX_EDGE: f64 = 1e6;

/// Largest matrix element printed: `%12.8f` keeps the columns apart below 100.
const MAX_PRINTED: f64 = 100.0;

pub const MATRIX_USAGE: &str = "usage: matrix -cell a b c alpha beta gamma [-lambda A] [-misset x y z | -misset random [-seed N] [-spread deg]] [-umat 9 numbers] [-o A.mat] | matrix -mat A.mat [-lambda A] [-misset ..] [-umat ..] [-o new.mat]";

pub fn run(args: &[String], out: &mut dyn Write) -> Result<()> {
    let mut cell: Option<[f64; 6]> = None;
    let mut lambda = 1.0;
    let mut u: M3 = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    let mut ops: Vec<Option<[f64; 3]>> = Vec::new(); // None = random
    let mut seed: Option<i64> = None;
    let mut spread = 90.0;
    let mut outfile: Option<String> = None;
    let mut mat_file: Option<std::path::PathBuf> = None;
    let mut a0: Option<M3> = None;
    let num = |flag: &str, s: Option<&String>| -> Result<f64> {
        let s = s.ok_or_else(|| Error::flag(flag, "needs a value"))?;
        let v = atof(s.as_bytes());
        if !v.is_finite() || (v == 0.0 && !s.trim_start().starts_with(['0', '-', '+', '.'])) {
            return Err(Error::flag(flag, format!("'{s}' is not a number")));
        }
        Ok(v)
    };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-cell" => {
                let mut c = [0.0; 6];
                for (k, v) in c.iter_mut().enumerate() {
                    *v = num(a, args.get(i + 1 + k))?;
                }
                if c[..3].iter().any(|&x| !(x > 0.0 && x < MAX_EDGE)) {
                    return Err(Error::flag(a, format!("cell edges must be positive and below {MAX_EDGE} A")));
                }
                let rad = |d: f64| d.to_radians();
                if !crate::experiment::crystal::cell_angles_possible(rad(c[3]), rad(c[4]), rad(c[5])) {
                    return Err(Error::flag(
                        a,
                        format!("impossible unit cell angles {} {} {} (each must be below 180, smaller than the sum of the other two, and all three below 360 degrees)", c[3], c[4], c[5]),
                    ));
                }
                cell = Some(c);
                i += 7;
            }
            "-lambda" | "-wavelength" => {
                lambda = num(a, args.get(i + 1))?;
                if lambda <= 0.0 {
                    return Err(Error::flag(a, "must be positive"));
                }
                i += 2;
            }
            "-misset" => {
                if args.get(i + 1).map(|s| s.as_str()) == Some("random") {
                    ops.push(None);
                    i += 2;
                } else {
                    let mut m = [0.0; 3];
                    for (k, v) in m.iter_mut().enumerate() {
                        *v = num(a, args.get(i + 1 + k))?;
                    }
                    ops.push(Some(m));
                    i += 4;
                }
            }
            "-spread" => {
                spread = num(a, args.get(i + 1))?;
                i += 2;
            }
            "-umat" => {
                for k in 0..9 {
                    u[k / 3][k % 3] = num(a, args.get(i + 1 + k))?;
                }
                i += 10;
            }
            "-seed" => {
                seed = Some(num(a, args.get(i + 1))? as i64);
                i += 2;
            }
            "-mat" => {
                let p = args.get(i + 1).ok_or_else(|| Error::flag(a, "needs an A-matrix file"))?;
                a0 = Some(start_matrix(&crate::base::os_text::os_path(p))?);
                mat_file = Some(crate::base::os_text::os_path(p));
                i += 2;
            }
            "-o" | "-out" | "-matfile" => {
                outfile = Some(args.get(i + 1).ok_or_else(|| Error::flag(a, "needs a file name"))?.clone());
                i += 2;
            }
            _ => return Err(Error::flag(a, format!("unknown matrix flag ({MATRIX_USAGE})"))),
        }
    }
    let (b, cell) = match (a0, cell) {
        (Some(_), Some(_)) => return Err(Error::flag("-mat", "give either -mat or -cell, not both")),
        (Some(m), None) => (m, [0.0; 6]),
        (None, Some(c)) => (b_matrix(c), c),
        (None, None) => return Err(Error::flag("-cell", "matrix needs -cell a b c alpha beta gamma (or -mat A.mat)")),
    };
    let mut rng = NrRandom::new();
    let mut idum: i64 = -seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(1)
    });
    for op in &ops {
        u = match op {
            Some(m) => misset_u(&u, *m),
            None => {
                let r = [0, 1, 2].map(|_| 2.0 * rng.ran1(&mut idum) as f64 - 1.0);
                random_u(&u, spread, r)
            }
        };
    }
    let a = matmul(&u, &b);
    // the file's columns are 12 wide: a value that is not finite or too wide to keep them apart
    // would run the numbers together (or print nan)
    if let Some(v) = a.iter().flatten().map(|v| v * lambda).find(|v| !(v.abs() < MAX_PRINTED)) {
        return Err(Error::flag(
            if a0.is_some() { "-mat" } else { "-cell" },
            format!("the matrix would hold {v:e} (with -lambda {}): more than the file's columns can hold; check the cell, -lambda and -mat", crate::base::c::printf::g(lambda)),
        ));
    }
    let text = format_matrix(&a, &u, cell, lambda);
    if let (Some(m), Some(o)) = (&mat_file, &outfile) {
        crate::io::atomic::check_no_clobber(&[("-mat", m.clone())], &[("-o", crate::base::os_text::os_path(o))])?;
    }
    match outfile {
        Some(p) => crate::io::atomic::write_atomic(&crate::base::os_text::os_path(&p), text.as_bytes()),
        None => out.write_all(text.as_bytes()).map_err(|e| Error::setup(format!("writing stdout: {e}"))),
    }
}

/// The starting matrix of `-mat` (UBtoA.awk's `MATRIX AX BX CX AY BY CY AZ BZ CZ`), checked finite.
fn start_matrix(path: &std::path::Path) -> Result<M3> {
    let m = crate::io::matrix::read_matrix_file(path)?;
    if m.iter().flatten().any(|v| !v.is_finite()) {
        return Err(Error::file(path, "-mat: the A matrix holds a non-finite number"));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent check: for an orthorhombic cell B is diag(1/a, 1/b, 1/c), and a 90° misset about
    /// z maps a* onto y.
    #[test]
    fn orthorhombic_b_and_misset() {
        let b = b_matrix([10.0, 20.0, 40.0, 90.0, 90.0, 90.0]);
        for i in 0..3 {
            for j in 0..3 {
                let want = if i == j { [0.1, 0.05, 0.025][i] } else { 0.0 };
                assert!((b[i][j] - want).abs() < 1e-12);
            }
        }
        let id = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        let u = misset_u(&id, [0.0, 0.0, 90.0]);
        let a = matmul(&u, &b);
        assert!((a[1][0] - 0.1).abs() < 1e-12 && a[0][0].abs() < 1e-12);
    }

    /// UBtoA.awk's MATRIX mode, by hand from its formulas: with MATRIX alone the END block prints
    /// `AX*lambda+1e-9` etc. with %12.8f, U the identity (%12.7f) and, without a CELL line, the cell
    /// as zeros (%12.4f); with a 90° MISSET about z, U = Rz and A = U·A0.
    #[test]
    fn mat_mode_by_hand() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("in.mat");
        std::fs::write(&p, " 0.01 0.002 -0.003\n0.0 0.02 0.001\n -0.004 0.0 0.015\n 0 0 0\n").unwrap();
        let run_s = |args: &[&str]| {
            let mut out = Vec::new();
            let mut v: Vec<String> = vec!["-mat".into(), p.to_string_lossy().into_owned()];
            v.extend(args.iter().map(|s| s.to_string()));
            run(&v, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let want_plain = "  0.01000000  0.00200000 -0.00300000\n  0.00000000  0.02000000  0.00100000\n -0.00400000  0.00000000  0.01500000\n       0.000       0.000       0.000\n   1.0000000   0.0000000   0.0000000\n   0.0000000   1.0000000   0.0000000\n   0.0000000   0.0000000   1.0000000\n      0.0000      0.0000      0.0000      0.0000      0.0000      0.0000\n       0.000       0.000       0.000\n";
        assert_eq!(run_s(&[]), want_plain);
        // -lambda 2: every A entry doubled (awk's WAVE 2), +1e-9 invisible at %12.8f
        assert!(run_s(&["-lambda", "2"]).starts_with("  0.02000000  0.00400000 -0.00600000\n"));
        // MISSET 0 0 90: U = Rz(90°) = [[0,-1,0],[1,0,0],[0,0,1]] (cos 90° = 6.1e-17 prints as 0),
        // A = U·A0: row x = -row y of A0, row y = row x of A0
        let got = run_s(&["-misset", "0", "0", "90"]);
        let want = "  0.00000000 -0.02000000 -0.00100000\n  0.01000000  0.00200000 -0.00300000\n -0.00400000  0.00000000  0.01500000\n       0.000       0.000       0.000\n   0.0000000  -1.0000000   0.0000000\n   1.0000000   0.0000000   0.0000000\n   0.0000000   0.0000000   1.0000000\n";
        assert!(got.starts_with(want), "{got}");
        // -mat with -cell, a missing file: refused
        let mut out = Vec::new();
        assert!(run(&["-mat".into(), p.to_string_lossy().into_owned(), "-cell".into(), "1".into(), "1".into(), "1".into(), "90".into(), "90".into(), "90".into()], &mut out).is_err());
        assert!(run(&["-mat".into(), "/nonexistent/x.mat".into()], &mut out).is_err());
    }
}
