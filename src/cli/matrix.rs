//! Command line of `nanobragg-rs matrix` (UBtoA.awk's keywords as flags, see [`crate::apps::matrix`]).
//! Values are read as `simulate` reads them ([`Vals`]): the whole word a finite number (`70x`, `1,5`,
//! `0x10`, `30deg` are refused; the awk and C `atof` read a prefix), `-seed` an integer; a flag whose
//! values run out, or meet the next flag, is refused naming it.

use crate::apps::matrix::{MatrixConfig, M3, MATRIX_USAGE};
use crate::cli::flags::Vals;
use crate::cli::parse::is_number;
use crate::{Error, Result};

/// Cell edges (Å) `matrix` takes are below this: the cell line's `%12.4f` fills its columns from here.
const MAX_EDGE: f64 = 1e6;

/// The `n` words after the flag at `args[i]`, as its values: refused, naming the flag, when the
/// command line ends or another flag comes first (a word starting with '-' that is not a number).
fn values(args: &[String], i: usize, n: usize) -> Result<Vals<'_>> {
    let flag = args[i].as_str();
    let rest = &args[i + 1..];
    for j in 0..n {
        let cut = match rest.get(j) {
            None => "the end of the command line".to_string(),
            Some(w) if w.starts_with('-') && !is_number(w) => format!("the next flag {w}"),
            Some(_) => continue,
        };
        return Err(Error::flag(flag, format!("needs {n} value(s), got {j} before {cut}")));
    }
    Ok(Vals { flag, words: &rest[..n], has_next: rest.len() > n })
}

/// `-cell a b c α β γ`: six finite numbers, edges in (0, MAX_EDGE) Å, angles that make a cell.
fn parse_cell(v: &Vals) -> Result<[f64; 6]> {
    let mut c = [0.0; 6];
    for (k, x) in c.iter_mut().enumerate() {
        *x = v.num(k)?;
    }
    if c[..3].iter().any(|&x| !(x > 0.0 && x < MAX_EDGE)) {
        return Err(Error::flag(v.flag, format!("cell edges must be positive and below {MAX_EDGE} A")));
    }
    let rad = |d: f64| d.to_radians();
    if !crate::experiment::crystal::cell_angles_possible(rad(c[3]), rad(c[4]), rad(c[5])) {
        return Err(Error::flag(
            v.flag,
            format!("impossible unit cell angles {} {} {} (each must be below 180, smaller than the sum of the other two, and all three below 360 degrees)", c[3], c[4], c[5]),
        ));
    }
    Ok(c)
}

/// How far `-umat` may be from a rotation: |U·Uᵀ − I| per element. Loose enough for a U typed to
/// three decimals (`0.707 0.707 0`: 3e-4), tight enough to refuse a singular, scaled or sheared one (`1 0.05 0 -0.05 1 0 0 0 1`, rows 1.00125 long, scaled the A matrix).
const ROTATION_TOLERANCE: f64 = 1e-3;

/// `-umat`: nine numbers, rows of a proper rotation (orthonormal, determinant +1). A singular or
/// reflecting U would make an A matrix of no crystal orientation (UBtoA.awk takes any nine numbers).
fn parse_umat(v: &Vals) -> Result<M3> {
    let mut u = [[0.0; 3]; 3];
    for k in 0..9 {
        u[k / 3][k % 3] = v.num(k)?;
    }
    let (worst, det) = crate::base::vec3::rotation_deviation(&u);
    if !(worst <= ROTATION_TOLERANCE) || !(det > 0.0) {
        return Err(Error::flag(
            v.flag,
            format!("not a rotation matrix: the rows must be orthonormal within {ROTATION_TOLERANCE} and the determinant +1 (largest deviation {worst:.3e}, determinant {det:.6})"),
        ));
    }
    Ok(u)
}

/// `-spread` in degrees, > 0: UBtoA.awk takes 0 or less as 90 (isotropic), where 0 would read as no
/// spread at all, so neither meaning is guessed.
fn positive_spread(v: &Vals) -> Result<f64> {
    let s = v.num(0)?;
    if !(s > 0.0) {
        return Err(Error::flag(v.flag, format!("{}: give the spread in degrees, > 0 (90 is isotropic; UBtoA.awk took 0 or less as 90)", v.words[0])));
    }
    Ok(s)
}

/// Parse `matrix`'s flags (UBtoA.awk's keywords as flags): every value strictly a number, `-seed`
/// an integer, as `simulate`'s values are; a flag missing values is refused naming it.
pub fn parse_matrix_args(args: &[String]) -> Result<MatrixConfig> {
    let mut m = MatrixConfig::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let n = match a {
            "-cell" => 6,
            "-misset" if args.get(i + 1).map(|s| s.as_str()) == Some("random") => 1,
            "-misset" => 3,
            "-umat" => 9,
            "-lambda" | "-wavelength" | "-spread" | "-seed" | "-mat" | "-o" | "-out" | "-matfile" => 1,
            _ => return Err(Error::flag(a, format!("unknown matrix flag ({MATRIX_USAGE})"))),
        };
        let v = values(args, i, n)?;
        match a {
            "-cell" => m.cell = Some(parse_cell(&v)?),
            "-misset" if n == 1 => m.ops.push(None),
            "-misset" => m.ops.push(Some(v.vec3()?)),
            // UBtoA.awk's UMATRIX replaces U, dropping an earlier MISSET without a word
            "-umat" if !m.ops.is_empty() => return Err(Error::flag("-umat", "comes after -misset, which it would replace (as UBtoA.awk's UMATRIX does): give -umat first, then -misset to rotate it")),
            "-umat" => m.u = parse_umat(&v)?,
            "-lambda" | "-wavelength" => m.lambda = v.pos(0)?,
            "-spread" => m.spread = positive_spread(&v)?,
            "-seed" => m.seed = Some(v.int(0)?),
            "-mat" => m.mat_file = Some(v.path(0)),
            _ => m.outfile = Some(v.words[0].clone()),
        }
        i += 1 + n;
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::matrix::run;

    fn p(s: &str) -> Result<MatrixConfig> {
        parse_matrix_args(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    /// The refusal of `s`, as printed.
    fn refused(s: &str) -> String {
        p(s).err().unwrap_or_else(|| panic!("{s}: accepted")).to_string()
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
            run(&parse_matrix_args(&v).unwrap(), &mut out).unwrap();
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
        let both = ["-mat".into(), p.to_string_lossy().into_owned(), "-cell".into(), "1".into(), "1".into(), "1".into(), "90".into(), "90".into(), "90".into()];
        assert!(run(&parse_matrix_args(&both).unwrap(), &mut out).is_err());
        assert!(run(&parse_matrix_args(&["-mat".into(), "/nonexistent/x.mat".into()]).unwrap(), &mut out).is_err());
    }

    /// Values the awk's (and C's) `atof` read by their prefix, and counts that are not integers,
    /// were taken (`-lambda 1,5` was 1): each is refused naming its flag.
    #[test]
    fn malformed_values_are_refused_naming_the_flag() {
        let cell = "-cell 70 80 90 85 95 105";
        assert_eq!(refused("-cell 70x 80 90 85 95 105"), "-cell: '70x' is not a number");
        assert_eq!(refused(&format!("{cell} -lambda 1,5")), "-lambda: '1,5' is not a number");
        assert_eq!(refused(&format!("{cell} -misset 10 20 30deg")), "-misset: '30deg' is not a number");
        assert_eq!(refused(&format!("{cell} -misset 0x10 0 0")), "-misset: '0x10' is not a number");
        assert_eq!(refused(&format!("{cell} -misset 0 0 nan")), "-misset: 'nan' is not a finite number");
        assert_eq!(refused(&format!("{cell} -misset random -seed 5x")), "-seed: '5x' is not an integer");
        assert_eq!(refused(&format!("{cell} -misset random -seed 1.9")), "-seed: expects an integer (got '1.9')");
        assert_eq!(refused(&format!("{cell} -lambda 0")), "-lambda: must be greater than 0 (got 0)");
        // still accepted: negative values, an integral seed, exponents
        let c = p(&format!("{cell} -misset -10 2e1 -3.5 -misset random -seed 5 -lambda 1.5e0")).unwrap();
        assert_eq!(c.ops, vec![Some([-10.0, 20.0, -3.5]), None]);
        assert_eq!((c.seed, c.lambda), (Some(5), 1.5));
    }

    /// A flag whose values run out took the next flag as a value (`-misset 1 2 -o b.mat` blamed
    /// `b.mat` as an unknown flag): the flag is named with what it needs.
    #[test]
    fn missing_values_name_the_flag() {
        let cell = "-cell 70 80 90 85 95 105";
        assert_eq!(refused(&format!("{cell} -misset 1 2 -o b.mat")), "-misset: needs 3 value(s), got 2 before the next flag -o");
        assert_eq!(refused(&format!("{cell} -misset 1")), "-misset: needs 3 value(s), got 1 before the end of the command line");
        assert_eq!(refused("-cell 70 80 90 -lambda 1"), "-cell: needs 6 value(s), got 3 before the next flag -lambda");
        assert_eq!(refused(&format!("{cell} -o")), "-o: needs 1 value(s), got 0 before the end of the command line");
        assert!(refused(&format!("{cell} -bogus")).starts_with("-bogus: unknown matrix flag"));
    }

    /// `-umat` wrote any nine numbers into U (all zeros gave a singular A with exit 0): only a proper
    /// rotation is taken.
    #[test]
    fn umat_must_be_a_rotation() {
        let cell = "-cell 70 80 90 85 95 105";
        for u in ["0 0 0 0 0 0 0 0 0", "2 0 0 0 1 0 0 0 1", "1 0 0 0 1 0 0 0 -1", "0 1 0 1 0 0 0 0 1", "1 0.05 0 0 1 0 0 0 1", "1 0.05 0 -0.05 1 0 0 0 1"] {
            let e = refused(&format!("{cell} -umat {u}"));
            assert!(e.starts_with("-umat: not a rotation matrix"), "{u}: {e}");
        }
        // a rotation as the file prints it (%12.7f) is taken
        let c = p(&format!("{cell} -umat 0.0000000 -1.0000000 0 1 0 0 0 0 1")).unwrap();
        assert_eq!(c.u, [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]);
        let (s, co) = (0.3f64.sin(), 0.3f64.cos());
        assert!(p(&format!("{cell} -umat {co:.7} {:.7} 0 {s:.7} {co:.7} 0 0 0 1", -s)).is_ok());
        // and one typed to three decimals
        assert!(p(&format!("{cell} -umat 0.707 0.707 0 -0.707 0.707 0 0 0 1")).is_ok());
    }

    /// An audit's differences from UBtoA.awk that changed the matrix silently: `-umat` after `-misset`
    /// (the awk's UMATRIX drops the misset; here the misset was applied after it) and a spread of 0 or
    /// less (the awk's isotropic 90; here the identity or a negative cone).
    #[test]
    fn umat_after_misset_and_non_positive_spreads_are_refused() {
        let cell = "-cell 70 80 90 85 95 105";
        assert!(refused(&format!("{cell} -misset 1 2 3 -umat 1 0 0 0 1 0 0 0 1")).starts_with("-umat: comes after -misset"));
        assert!(p(&format!("{cell} -umat 1 0 0 0 1 0 0 0 1 -misset 1 2 3")).is_ok());
        for s in ["0", "-5"] {
            assert!(refused(&format!("{cell} -misset random -seed 1 -spread {s}")).starts_with(&format!("-spread: {s}: give the spread in degrees, > 0")));
        }
        assert_eq!(p(&format!("{cell} -misset random -spread 10")).unwrap().spread, 10.0);
    }
}
