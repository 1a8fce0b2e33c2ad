//! nonBragg.c's table of structure factor vs sin(θ)/λ (`-stol`, `-4stol`, `-Q`) and its 4-point
//! interpolation.

use crate::experiment::physics::polint;
use crate::{Error, Result};
use std::path::Path;

/// The stol table with the C's two guard points at each end (`stols` = lines + 4).
pub struct StolTable {
    pub stol: Vec<f64>,
    pub f: Vec<f64>,
}

/// Read a `stol F` table as nonBragg.c does, scaling stol by `mult` (1e10 for `-stol`).
pub fn read_stol_table(path: &Path, mult: f64) -> Result<StolTable> {
    let cols = crate::io::text::read_text_file(path, 2)?;
    let n = cols[0].len();
    if n == 0 {
        return Err(Error::file(path, "-stol: no data in input file"));
    }
    let stols = n + 4;
    let mut stol = vec![0.0; stols];
    let mut f = vec![0.0; stols];
    let mut f_high = f64::NAN;
    let mut f_low = f64::NAN;
    // the C copies downwards: for(i=stols-3;i>1;--i) value i comes from line i-2
    for i in (2..=stols - 3).rev() {
        stol[i] = cols[0][i - 2] * mult;
        f[i] = cols[1][i - 2];
        if !f[i].is_nan() {
            f_low = f[i];
            if f_high.is_nan() {
                f_high = f[i];
            }
        } else {
            f[i] = 0.0;
        }
    }
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
}
