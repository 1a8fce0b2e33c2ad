//! nonBragg.c's table of structure factor vs sin(θ)/λ (`-stol`, `-4stol`, `-Q`) and its 4-point
//! interpolation.

use crate::base::c::printf::g;
use crate::experiment::physics::polint;
use crate::{Error, Result};
use std::path::Path;

/// The stol table with the C's two guard points at each end (`stols` = lines + 4).
pub struct StolTable {
    pub stol: Vec<f64>,
    pub f: Vec<f64>,
}

/// Largest |F| a stol table may hold (as `-hkl`'s): F² times the scale must stay a number.
const MAX_F: f64 = 1e100;

/// Read a `stol F` table as nonBragg.c does, scaling stol by `mult` (1e10 for `-stol`), but strictly:
/// every line two finite numbers (the C reads text as 0 and `inf` as infinity; a third column or a
/// `#` comment is ignored, as by the C), |F| at most 1e100, and stol increasing line by line (a repeated stol makes the 4-point
/// interpolation divide by zero; the C's search assumes the order). Each refusal names the line.
pub fn read_stol_table(path: &Path, mult: f64) -> Result<StolTable> {
    let t = crate::io::text::read_table(path, "stol table", 2, 2)?;
    let n = t.lines.len();
    if n == 0 {
        return Err(Error::file(path, "-stol: no data in input file"));
    }
    check_rows(path, &t)?;
    let stols = n + 4;
    let mut stol = vec![0.0; stols];
    let mut f = vec![0.0; stols];
    // the C copies downwards: for(i=stols-3;i>1;--i) value i comes from line i-2
    for i in (2..=stols - 3).rev() {
        stol[i] = t.cols[0][i - 2] * mult;
        f[i] = t.cols[1][i - 2];
    }
    // the C's guard points: the first F below the table, the last above it
    let (f_low, f_high) = (f[2], f[stols - 3]);
    stol[0] = -1e99;
    stol[1] = -1e98;
    f[0] = f_low;
    f[1] = f_low;
    stol[stols - 2] = 1e98;
    stol[stols - 1] = 1e99;
    f[stols - 1] = f_high;
    f[stols - 2] = f_high;
    Ok(StolTable { stol, f })
}

/// Each row's F at most [`MAX_F`] in size, each stol above the one before.
fn check_rows(path: &Path, t: &crate::io::text::Table) -> Result<()> {
    let (s, f) = (&t.cols[0], &t.cols[1]);
    for r in 0..t.lines.len() {
        if !(f[r].abs() <= MAX_F) {
            return Err(Error::file_line(path, t.lines[r], format!("stol table: F = {} is larger than {}", g(f[r]), g(MAX_F))));
        }
        if r > 0 && !(s[r] > s[r - 1]) {
            return Err(Error::file_line(
                path,
                t.lines[r],
                format!("stol table: stol {} does not increase from {} (line {}): the table must be sorted with no repeats", g(s[r]), g(s[r - 1]), t.lines[r - 1]),
            ));
        }
    }
    Ok(())
}

impl StolTable {
    /// The C's search for `nearest` from a previous position, then `polint` on the 4 points around.
    #[inline]
    pub fn interpolate(&self, stol: f64, nearest: &mut usize) -> f64 {
        let n = self.stol.len();
        while *nearest < n && stol > self.stol[*nearest] {
            *nearest += 1;
        }
        while stol < self.stol[(*nearest).min(n - 1)] && *nearest >= 2 {
            *nearest -= 1;
        }
        let k = (*nearest).clamp(1, n - 3);
        let xa = [self.stol[k - 1], self.stol[k], self.stol[k + 1], self.stol[k + 2]];
        let ya = [self.f[k - 1], self.f[k], self.f[k + 1], self.f[k + 2]];
        polint(&xa, &ya, stol)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 4-point interpolation reproduces a cubic exactly (independent of the C).
    #[test]
    fn stol_interpolation_is_exact_for_a_cubic() {
        let xs: Vec<f64> = (0..20).map(|i| i as f64 * 0.05).collect();
        let text: String = xs.iter().map(|x| format!("{x} {}\n", 1.0 + 2.0 * x - x * x * x)).collect();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.stol");
        std::fs::write(&p, text).unwrap();
        let t = read_stol_table(&p, 1.0).unwrap();
        let mut nearest = 0;
        for &x in &[0.12, 0.37, 0.5, 0.81] {
            let y = t.interpolate(x, &mut nearest);
            assert!((y - (1.0 + 2.0 * x - x * x * x)).abs() < 1e-12, "{x}: {y}");
        }
    }

    /// Malformed tables gave NaN or infinite images with exit 0: each is refused naming its line.
    #[test]
    fn malformed_tables_are_refused_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.stol");
        let read = |text: &[u8]| {
            std::fs::write(&p, text).unwrap();
            read_stol_table(&p, 1e10).map(|_| ()).map_err(|e| e.to_string())
        };
        let at = |line: usize| format!("{} line {line}: stol table: ", p.display());
        for (text, line, why) in [
            (&b"hello world\n0.1 1\n"[..], 1, "'hello' is not a number"),
            (b"0 1\n0.1 abc\n", 2, "'abc' is not a number"),
            (b"0 1\n0.1 inf\n", 2, "'inf' is not a finite number"),
            (b"0 1\n0.1 1e300\n", 2, "F = 1e+300 is larger than 1e+100"),
            (b"0 1\n0.1 2\n0.1 3\n0.2 1\n", 3, "stol 0.1 does not increase from 0.1 (line 2)"),
            (b"0 1\n0.2 2\n0.1 3\n", 3, "stol 0.1 does not increase from 0.2 (line 2)"),
            (b"\x7fELF\x02\x01\x01\x00\x00\n", 1, "is not a number"),
        ] {
            let e = read(text).unwrap_err();
            assert!(e.starts_with(&at(line)) && e.contains(why), "{e}");
        }
        assert!(read(b"").unwrap_err().contains("no data"));
        // blank lines are skipped; a well-formed table reads as before
        read(b"0 1\n\n0.1 2\n").unwrap();
    }
}
