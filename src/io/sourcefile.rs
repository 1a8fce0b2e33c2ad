//! `-sourcefile`: columns X Y Z I lambda (nanoBragg.c L2310-L2340), read with the C's text reader.

use crate::experiment::beam::source_points;
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
