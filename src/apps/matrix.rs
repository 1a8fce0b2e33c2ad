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
//! Differences from UBtoA.awk: the random orientation draws its three numbers from the suite's
//! `ran1` with `-seed` (awk's `rand()` differs between awk implementations), so a seed gives the
//! same matrix everywhere; the B matrix's last element is 1/c ([`b_matrix`]: the awk's is wrong for
//! triclinic cells).

use crate::base::c::printf::cf;
use crate::base::c::rng::NrRandom;
use crate::{Error, Result};
use std::io::Write;

/// Degrees per radian as UBtoA.awk computes it (180/π, not nanoBragg.c's 180·(1/π): the last bit differs).
const RTD_UBTOA: f64 = 180.0 / std::f64::consts::PI;

pub use crate::base::vec3::M3;
use crate::base::vec3::{cross, dot, magnitude, mat3_mul as matmul};

/// The B matrix (columns a*, b*, c*) for a cell in Å and degrees, as UBtoA.awk lays it out (a* along
/// x, b* in the xy plane), with the textbook third row 1/c: UBtoA.awk's B_CZ = c*·V/(abc·sin γ*) is
/// c*·sin α·sin β where c*·sin α·sin β* is meant, so its triclinic cells read back wrong (30 40 50 100
/// 110 120 gave c = 45.99); the two agree wherever sin β = sin β* (orthogonal and monoclinic cells).
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
        [0.0, 0.0, 1.0 / c],
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

/// `nanobragg-rs matrix`'s flags.
pub const MATRIX_USAGE: &str = "usage: matrix -cell a b c alpha beta gamma [-lambda A] [-misset x y z | -misset random [-seed N] [-spread deg]] [-umat 9 numbers] [-o A.mat] | matrix -mat A.mat [-lambda A] [-misset ..] [-umat ..] [-o new.mat]";

/// What `matrix`'s command line asks for (parsed by `cli::matrix`).
#[derive(Clone, Debug)]
pub struct MatrixConfig {
    /// `-cell a b c α β γ` (Å, degrees)
    pub cell: Option<[f64; 6]>,
    /// `-lambda` (Å): the A matrix is scaled by it
    pub lambda: f64,
    /// `-umat`: the starting orientation (a rotation)
    pub u: M3,
    /// `-misset` rotations in order of the command line; None = `-misset random`
    pub ops: Vec<Option<[f64; 3]>>,
    /// `-seed` of the random orientation (the time when None)
    pub seed: Option<i64>,
    /// `-spread` of the random orientation, degrees (90 = isotropic)
    pub spread: f64,
    /// `-o` (standard output when None)
    pub outfile: Option<String>,
    /// `-mat`: the starting A matrix's file
    pub mat_file: Option<std::path::PathBuf>,
}

impl Default for MatrixConfig {
    fn default() -> Self {
        MatrixConfig {
            cell: None,
            lambda: 1.0,
            u: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            ops: Vec::new(),
            seed: None,
            spread: 90.0,
            outfile: None,
            mat_file: None,
        }
    }
}

pub fn run(c: &MatrixConfig, out: &mut dyn Write) -> Result<()> {
    let MatrixConfig { cell, lambda, mut u, ref ops, seed, spread, ref outfile, ref mat_file } = *c;
    let a0 = mat_file.as_deref().map(start_matrix).transpose()?;
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
    for op in ops {
        u = match op {
            Some(m) => misset_u(&u, *m),
            None => {
                let r = [0, 1, 2].map(|_| 2.0 * rng.ran1(&mut idum) as f64 - 1.0);
                random_u(&u, spread, r)
            }
        };
    }
    let a = matmul(&u, &b);
    let flag = if a0.is_some() { "-mat" } else { "-cell" };
    check_columns(&a, lambda, flag)?;
    check_precision(&a, lambda, flag)?;
    let text = format_matrix(&a, &u, cell, lambda);
    if let (Some(m), Some(o)) = (&mat_file, &outfile) {
        crate::io::atomic::check_no_clobber(&[("-mat", m.clone())], &[("-o", crate::base::os_text::os_path(o))])?;
    }
    match outfile {
        Some(p) => crate::io::atomic::write_atomic(&crate::base::os_text::os_path(&p), text.as_bytes()),
        None => out.write_all(text.as_bytes()).map_err(|e| Error::setup(format!("writing stdout: {e}"))),
    }
}

/// The A matrix's `%12.8f` fields (λ-scaled, as [`format_matrix`] prints them) must each keep a
/// leading blank, or the numbers run together (`-15.00000000`, `100.00000000`: 12 characters) and no
/// reader, `simulate -mat` included, can split them; a value that is not finite would print `nan`.
fn check_columns(a: &M3, lambda: f64, flag: &str) -> Result<()> {
    for v in a.iter().flatten().map(|v| v * lambda) {
        let field = cf("%12.8f", v + 1e-9);
        if !v.is_finite() || !field.starts_with(' ') {
            let g = crate::base::c::printf::g;
            return Err(Error::flag(
                flag,
                format!("the A matrix would hold {} (with -lambda {}), printed '{}': more than the file's columns can hold (%12.8f keeps a blank before a value only above -10 and below 100); check the cell, -lambda and -mat", g(v), g(lambda), field.trim()),
            ));
        }
    }
    Ok(())
}

/// Most relative error of a real-space cell vector read back from the printed matrix.
const CELL_PRECISION: f64 = 1e-3;

/// The real-space vectors a, b, c of an A matrix (columns a*, b*, c*), or `None` when it is singular.
fn real_vectors(m: &M3) -> Option<[[f64; 3]; 3]> {
    let col = |j: usize| [m[0][j], m[1][j], m[2][j]];
    let (s0, s1, s2) = (col(0), col(1), col(2));
    let v = dot(&s0, &cross(&s1, &s2));
    if !(v.abs() > 0.0 && v.is_finite()) {
        return None;
    }
    Some([cross(&s1, &s2), cross(&s2, &s0), cross(&s0, &s1)].map(|x| x.map(|e| e / v)))
}

/// The printed matrix (8 decimals) must give back the cell: entries so small that their digits are
/// lost (`-lambda 1e-6`: 70 80 90 read back as 50 100 100; `-lambda 1e-7`: all zeros, singular) are
/// refused. Each real-space vector from the printed values is within [`CELL_PRECISION`] of the exact one.
fn check_precision(a: &M3, lambda: f64, flag: &str) -> Result<()> {
    let exact = a.map(|row| row.map(|v| v * lambda));
    let printed = exact.map(|row| row.map(|v| cf("%12.8f", v + 1e-9).trim().parse::<f64>().unwrap_or(f64::NAN)));
    let g = crate::base::c::printf::g;
    let largest = exact.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
    let why = match (real_vectors(&printed), real_vectors(&exact)) {
        (Some(p), Some(e)) => {
            let err = (0..3).map(|k| magnitude(&[0, 1, 2].map(|i| p[k][i] - e[k][i])) / magnitude(&e[k])).fold(0.0f64, |m, r| if r.is_nan() { f64::NAN } else { m.max(r) });
            if err <= CELL_PRECISION {
                return Ok(());
            }
            format!("the cell read back would be off by {} (more than {})", g(err), g(CELL_PRECISION))
        }
        _ => "it would read back as a singular matrix (no cell)".to_string(),
    };
    Err(Error::flag(
        flag,
        format!("the A matrix (with -lambda {}, largest value {}) is too small for the file's 8 decimals (%12.8f): {why}; give a larger -lambda, or check the cell and -mat", g(lambda), g(largest)),
    ))
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

    /// Independent check of a triclinic cell: BᵀB is the reciprocal metric tensor, whatever the
    /// orientation convention (cctbx's `unit_cell((30,40,50,100,110,120)).reciprocal_metrical_matrix()`:
    /// a*², b*², c*², a*·b*, a*·c*, b*·c*). UBtoA.awk's B gave c*² 8 % off.
    #[test]
    fn triclinic_b_has_cctbxs_reciprocal_metric() {
        let b = b_matrix([30.0, 40.0, 50.0, 100.0, 110.0, 120.0]);
        let col = |j: usize| [b[0][j], b[1][j], b[2][j]];
        let dot = |x: [f64; 3], y: [f64; 3]| x[0] * y[0] + x[1] * y[1] + x[2] * y[2];
        let got = [dot(col(0), col(0)), dot(col(1), col(1)), dot(col(2), col(2)), dot(col(0), col(1)), dot(col(0), col(2)), dot(col(1), col(2))];
        let cctbx = [0.0019828001976472998, 0.0010154772430213349, 0.00055200091769989803, 0.00085773456038913372, 0.00052604979933811101, 0.00031708611653811722];
        for (g, w) in got.iter().zip(cctbx) {
            assert!((g - w).abs() < 1e-12 * w.abs().max(1e-3), "{got:?} vs cctbx {cctbx:?}");
        }
    }

    /// A value of -10 or less, or one that rounds to 100, fills its 12-character field: refused (it
    /// ran into the column before it, `0.00000000-15.00000000`); -9.99 and 99.99 keep their blank.
    #[test]
    fn values_that_fill_their_column_are_refused() {
        let m = |v: f64| [[v, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        for v in [-15.0, -10.0, 99.999999996, 100.0, f64::NAN, f64::INFINITY] {
            let e = check_columns(&m(v), 1.0, "-cell").unwrap_err().to_string();
            assert!(e.starts_with("-cell: the A matrix would hold") && e.contains("more than the file's columns can hold"), "{v}: {e}");
        }
        for v in [-9.99, 99.99, 0.0, -1e-12] {
            assert!(check_columns(&m(v), 1.0, "-cell").is_ok(), "{v}");
        }
        assert!(check_columns(&m(-1.5), 10.0, "-mat").unwrap_err().to_string().contains("printed '-15.00000000'"));
    }

    /// A matrix whose 8 printed decimals lose the cell is refused: λ = 1e-6 Å read 70 80 90 back as
    /// 50 100 100, λ = 1e-7 Å printed nine zeros. Ordinary and extreme-but-printable cells pass.
    #[test]
    fn values_too_small_for_the_decimals_are_refused() {
        let a = |cell: [f64; 6]| b_matrix(cell);
        let e = check_precision(&a([70.0, 80.0, 90.0, 90.0, 90.0, 90.0]), 1e-6, "-cell").unwrap_err().to_string();
        assert!(e.starts_with("-cell: the A matrix (with -lambda 1e-06, largest value 1.42857e-08) is too small") && e.contains("off by"), "{e}");
        let e = check_precision(&a([100.0, 100.0, 100.0, 90.0, 90.0, 90.0]), 1e-7, "-cell").unwrap_err().to_string();
        assert!(e.contains("singular"), "{e}");
        for (cell, lambda) in [([30.0, 40.0, 50.0, 100.0, 110.0, 120.0], 1.0), ([2000.0, 3000.0, 1000.0, 90.0, 90.0, 120.0], 1.5), ([70.0, 80.0, 90.0, 85.0, 95.0, 100.0], 0.01)] {
            assert!(check_precision(&a(cell), lambda, "-cell").is_ok(), "{cell:?} at {lambda}");
        }
        assert!(check_precision(&a([70.0, 80.0, 90.0, 85.0, 95.0, 100.0]), 1e-4, "-cell").is_err());
    }

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
}
