//! `-sourcefile`: columns X Y Z I lambda (nanoBragg.c L2310-L2340), read with the C's text reader.

use crate::cfmt::g;
use crate::sources::SOURCE_DISTANCE;
use crate::vec3::V3;
use crate::{Error, Result};
use std::path::Path;

/// Read a `-sourcefile` (columns X Y Z I lambda, metres; missing values take the C's defaults).
pub fn read_source_file(path: &Path, beam: &V3, lambda0: f64) -> Result<Vec<(V3, f64, f64)>> {
    let cols = crate::io::text::read_text_file(path, 5)?;
    let n = cols[0].len();
    if n == 0 {
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

