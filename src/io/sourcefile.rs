//! `-sourcefile`: columns X Y Z I lambda (nanoBragg.c L2310-L2340), one source per line. The values
//! are read strictly ([`crate::io::text::read_table`]): the C's reader took a word as 0 (`-10 abc 0`
//! was a source at y = 0) and a number by its prefix; here such a line is refused with its number. A
//! line may stop short: its missing trailing columns take the C's defaults, as in the C.

use crate::experiment::beam::source_points;
use crate::base::vec3::V3;
use crate::{Error, Result};
use std::path::Path;

/// Read a `-sourcefile` (columns X Y Z I lambda, metres; missing values take the C's defaults).
pub fn read_source_file(path: &Path, beam: &V3, lambda0: f64) -> Result<Vec<(V3, f64, f64)>> {
    source_points(path, &read_source_columns(path)?, beam, lambda0)
}

/// The file's five columns, one to five finite numbers a line (NaN where a line stops short).
pub fn read_source_columns(path: &Path) -> Result<Vec<Vec<f64>>> {
    let t = crate::io::text::read_table(path, "-sourcefile", 1, 5)?;
    if t.lines.is_empty() {
        return Err(Error::file(path, "no sources in file"));
    }
    Ok(t.cols)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-10 abc 0 1 1e-10` was the source (-10, 0, 0): a word is refused with its line; short lines
    /// still take the defaults.
    #[test]
    fn words_are_refused_short_lines_take_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.txt");
        std::fs::write(&p, "-10 0 0 1 1e-10\n\n-10 abc 0 1 1e-10\n").unwrap();
        let e = read_source_columns(&p).unwrap_err().to_string();
        assert_eq!(e, format!("{} line 3: -sourcefile: 'abc' is not a number", p.display()));
        // columns past the fifth are ignored, as the C's reader ignores them
        std::fs::write(&p, "-10 0 0 1 1e-10 7\n").unwrap();
        assert_eq!(read_source_columns(&p).unwrap()[4], vec![1e-10]);
        std::fs::write(&p, "-10.0 0.01 -0.01\n-10 0 0.02 0.5 1.02e-10\n").unwrap();
        let s = read_source_file(&p, &[1.0, 0.0, 0.0], 1.5e-10).unwrap();
        assert_eq!(s[0], ([-10.0, 0.01, -0.01], 1.0, 1.5e-10));
        assert_eq!(s[1], ([-10.0, 0.0, 0.02], 0.5, 1.02e-10));
    }
}
