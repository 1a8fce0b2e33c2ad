//! `-sourcefile`: columns X Y Z I lambda (nanoBragg.c L2310-L2340), read with the C's text reader.

use crate::base::c::printf::g;
use crate::experiment::beam::SOURCE_DISTANCE;
use crate::base::vec3::V3;
use crate::{Error, Result};
use std::path::Path;

/// Read a `-sourcefile` (columns X Y Z I lambda, metres; missing values take the C's defaults).
pub fn read_source_file(path: &Path, beam: &V3, lambda0: f64) -> Result<Vec<(V3, f64, f64)>> {
    source_points(path, &read_source_columns(path)?, beam, lambda0)
}

/// The file's five columns as the C's text reader reads them (NaN where a value is missing).
pub fn read_source_columns(path: &Path) -> Result<Vec<Vec<f64>>> {
    let cols = crate::io::text::read_text_file(path, 5)?;
    if cols[0].is_empty() {
        return Err(Error::file(path, "no sources in file"));
    }
    Ok(cols)
}

/// Sources from the columns of the file `path` (named in errors only): missing values take the C's
/// defaults (a point 10 m up the beam, intensity 1, `lambda0`), then each is checked.
pub fn source_points(path: &Path, cols: &[Vec<f64>], beam: &V3, lambda0: f64) -> Result<Vec<(V3, f64, f64)>> {
    let n = cols.first().map_or(0, |c| c.len());
    if n == 0 || cols.len() < 5 || cols.iter().any(|c| c.len() != n) {
        return Err(Error::file(path, "no sources in file"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let d = |c: usize, default: f64| if cols[c][i].is_nan() { default } else { cols[c][i] };
        let x = d(0, -SOURCE_DISTANCE * beam[0]);
        let y = d(1, -SOURCE_DISTANCE * beam[1]);
        let z = d(2, -SOURCE_DISTANCE * beam[2]);
        let intensity = d(3, 1.0);
        let lambda = d(4, lambda0);
        if [x, y, z, intensity, lambda].iter().all(|&v| v == 0.0) {
            return Err(Error::file(path, format!("source {} (counting non-blank lines) holds no numbers: expected X Y Z I lambda", i + 1)));
        }
        if ![x, y, z, intensity].iter().all(|v| v.is_finite()) {
            return Err(Error::file(path, format!("source {} has a value that is not finite", i + 1)));
        }
        if !(lambda > 0.0) || !lambda.is_finite() {
            return Err(Error::file(path, format!("source {} has wavelength {} m; it must be positive", i + 1, g(lambda))));
        }
        if x == 0.0 && y == 0.0 && z == 0.0 {
            return Err(Error::file(path, format!("source {} is at the sample position (0 0 0): no direction", i + 1)));
        }
        out.push(([x, y, z], intensity, lambda));
    }
    Ok(out)
}

