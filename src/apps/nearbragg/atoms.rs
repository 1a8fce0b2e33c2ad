//! nearBragg.c's atom list (lines 457-467 count, 749-835 read): one point scatterer per line,
//! `X Y Z [occupancy B phase]` in Å, Å² and degrees, read with the C's own tokenizer.
//!
//! The C reads `fgets` chunks of at most 1023 bytes; after leading delimiters (` \t\r,;:!`), a chunk
//! that is exactly `\n` is blank. Each value is `atof` of the text that follows, then the reader skips
//! the characters of `0123456789-+.EGeg`, then non-delimiters, then delimiters; it stops when what
//! is left is exactly `\n`. Kept from the C: the defaults of the missing columns (occupancy 1, B 0,
//! phase -90°) hold only on a line that ends in `\n` (a last line without one reads its missing
//! columns as 0, so e.g. `1 2 3` at the very end is an atom of occupancy 0); extra columns after
//! the sixth are ignored; CR before LF is a delimiter.
//!
//! Refused, unlike the C (which reads them as 0 or as a number's prefix): a value that is not a
//! whole number (`abc`, `1.5x`, `#`), a NaN or infinite value, a line of fewer than three values
//! (X Y Z), a file with no atoms, and a line longer than the C's buffer.

use crate::{Error, Result};
use std::fmt::Write as _;
use std::path::Path;

/// `fgets(line, 1024, infile)`: at most 1023 bytes per chunk (line 48).
const FGETS_MAX: usize = 1023;
/// `delimiters` (line 50).
const DELIMITERS: &[u8] = b" \t\r,;:!";
/// `numberstuf` (line 51).
const NUMBERSTUF: &[u8] = b"0123456789-+.EGeg";

/// The point scatterers, in SI units as the C stores them (lines 817-818).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Atoms {
    /// metres
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub z: Vec<f64>,
    pub occ: Vec<f64>,
    /// Å²
    pub b: Vec<f64>,
    /// radians
    pub phase: Vec<f64>,
    /// The largest extent of the object along X, Y or Z, in metres (lines 822-843).
    pub size_max: f64,
}

impl Atoms {
    pub fn len(&self) -> usize {
        self.x.len()
    }
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }
}

fn spn(s: &[u8], set: &[u8]) -> usize {
    s.iter().position(|c| !set.contains(c)).unwrap_or(s.len())
}

fn cspn(s: &[u8], set: &[u8]) -> usize {
    s.iter().position(|c| set.contains(c)).unwrap_or(s.len())
}

/// The value the C's `atof(token)` reads at the start of `s`, checked: the text up to the next
/// delimiter or newline must be one finite number (empty: 0, as `atof("")` at the end of the file).
fn value(s: &[u8]) -> std::result::Result<f64, String> {
    let tok = &s[..s.iter().position(|c| DELIMITERS.contains(c) || *c == b'\n').unwrap_or(s.len())];
    if tok.is_empty() {
        return Ok(0.0);
    }
    let text = String::from_utf8_lossy(tok);
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(format!("'{text}' is not a finite number")),
        Err(_) if text.starts_with('#') => Err(format!("'{text}' is not a number (an atom list has no comments; nearBragg.c read the line as an atom)")),
        Err(_) => Err(format!("'{text}' is not a number")),
    }
}

/// One chunk as the C reads it (lines 756-814): `None` for a blank line, else X Y Z O B P (Å, deg).
fn parse_line(line: &[u8]) -> std::result::Result<Option<[f64; 6]>, String> {
    let mut t = &line[spn(line, DELIMITERS)..];
    if t == b"\n" {
        return Ok(None);
    }
    // an atom needs X Y Z: the C read a missing Z as 0 (a 2-column line was an atom at z = 0). A last
    // chunk of only blanks without a newline (editors leave them) stays the C's atom of occupancy 0
    // at the origin, which adds nothing.
    let words: Vec<&[u8]> = t.split(|c| DELIMITERS.contains(c) || *c == b'\n').filter(|w| !w.is_empty()).collect();
    if words.len() < 3 && !t.is_empty() {
        // a word that is no number is the cause (`# comment` was "2 value(s)")
        for w in &words {
            value(w)?;
        }
        return Err(format!("{} value(s); an atom is X Y Z [occupancy B phase]", words.len()));
    }
    let mut v = [0.0, 0.0, 0.0, 1.0, 0.0, -90.0];
    for (k, slot) in v.iter_mut().enumerate() {
        *slot = value(t)?;
        if k == 5 {
            break;
        }
        t = &t[spn(t, NUMBERSTUF)..];
        if t == b"\n" {
            break;
        }
        t = &t[cspn(t, DELIMITERS)..];
        t = &t[spn(t, DELIMITERS)..];
        if t == b"\n" {
            break;
        }
    }
    Ok(Some(v))
}

/// Split `bytes` into the chunks repeated `fgets(line, 1024, f)` calls return; a line longer than
/// the buffer is refused (the C would read its tail as another atom).
fn chunks(bytes: &[u8]) -> impl Iterator<Item = (usize, std::result::Result<&[u8], String>)> {
    let mut rest = bytes;
    let mut n = 0usize;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        n += 1;
        let end = rest.iter().position(|&c| c == b'\n').map_or(rest.len(), |p| p + 1);
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        if chunk.len() > FGETS_MAX {
            return Some((n, Err(format!("line longer than {} characters", FGETS_MAX - 1))));
        }
        if chunk.contains(&0) {
            return Some((n, Err("NUL byte in line".into())));
        }
        Some((n, Ok(chunk)))
    })
}

/// Parse an atom list's bytes; `debug` adds the C's `-debug` lines (lines 463 and 816) to `log`.
pub fn parse_atoms(path: &Path, bytes: &[u8], debug: bool, log: &mut String) -> Result<Atoms> {
    let mut a = Atoms::default();
    let (mut max, mut min) = ([-1e99f64; 3], [1e99f64; 3]);
    for (n, chunk) in chunks(bytes) {
        let chunk = chunk.map_err(|e| Error::file_line(path, n, e))?;
        let Some(v) = parse_line(chunk).map_err(|e| Error::file_line(path, n, e))? else {
            if debug {
                *log += "blank\n";
            }
            continue;
        };
        if debug {
            let g = |x: f64| crate::base::c::printf::cf("%lg", x);
            let _ = writeln!(log, "initializing: {} {} {} {} with Z={} B={}", a.len(), g(v[0]), g(v[1]), g(v[2]), g(v[3]), g(v[4]));
        }
        a.x.push(v[0] / 1e10);
        a.y.push(v[1] / 1e10);
        a.z.push(v[2] / 1e10);
        a.occ.push(v[3]);
        a.b.push(v[4]);
        a.phase.push(v[5] / super::config::RTD);
        for k in 0..3 {
            max[k] = max[k].max(v[k]);
            min[k] = min[k].min(v[k]);
        }
    }
    if a.is_empty() {
        // the C renders a blank image from no atoms
        return Err(Error::file(path, "no atoms in the file (expected lines of X Y Z [occupancy B phase])"));
    }
    // lines 838-843: the largest extent, (max-min)*1e-10 per axis
    let ext = |k: usize| (max[k] - min[k]) * 1e-10;
    let mut size_max = ext(0);
    for k in 1..3 {
        if size_max < ext(k) {
            size_max = ext(k);
        }
    }
    a.size_max = size_max;
    Ok(a)
}

/// The number of non-blank lines (the C's first pass, lines 458-467).
pub fn count_atoms(bytes: &[u8]) -> usize {
    chunks(bytes).filter(|(_, c)| c.as_ref().map(|l| &l[spn(l, DELIMITERS)..] != b"\n").unwrap_or(true)).count()
}

/// Read and parse the atom list file.
pub fn read_atoms(path: &Path, debug: bool, log: &mut String) -> Result<Atoms> {
    let bytes = std::fs::read(path).map_err(|e| Error::file(path, format!("cannot read atom list: {e}")))?;
    parse_atoms(path, &bytes, debug, log)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Atoms> {
        parse_atoms(Path::new("t.txt"), s.as_bytes(), false, &mut String::new())
    }

    #[test]
    fn columns_separators_and_line_endings() {
        let a = p("1 2 3\n-4.5,0.5;2:0.8!10\t45\r\n\n  \r\n 7 8 9 0.5\n0 0 1").unwrap();
        assert_eq!(a.len(), 4);
        assert_eq!(a.x[0], 1.0 / 1e10);
        assert_eq!((a.occ[0], a.b[0], a.phase[0]), (1.0, 0.0, -90.0 / super::super::config::RTD));
        assert_eq!((a.x[1], a.occ[1], a.b[1]), (-4.5 / 1e10, 0.8, 10.0));
        assert_eq!(a.phase[1], 45.0 / super::super::config::RTD);
        assert_eq!((a.occ[2], a.b[2]), (0.5, 0.0));
        // the last line without a newline reads its missing columns as 0 (the C's atof(""))
        assert_eq!((a.z[3], a.occ[3], a.b[3], a.phase[3]), (1.0 / 1e10, 0.0, 0.0, 0.0));
        assert_eq!(count_atoms(b"1 2 3\n\n \t\n4 5 6"), 2);
    }

    #[test]
    fn malformed_lines_are_refused_with_their_number() {
        for (s, line) in [("1 2 3\n1 x 3\n", 2), ("nan 0 0\n", 1), ("1 2 inf\n", 1), ("0 0 1.5q\n", 1), ("# c\n", 1)] {
            let e = p(s).unwrap_err().to_string();
            assert!(e.contains(&format!(":{line}")) || e.contains(&format!("line {line}")), "{s:?}: {e}");
        }
        assert!(p(&format!("{}\n", "1 ".repeat(600))).is_err());
        // X Y Z are needed (a missing Z was 0), and at least one atom (the C rendered a blank image)
        assert_eq!(p("1 2 3\n1 2\n").unwrap_err().to_string(), "t.txt line 2: 2 value(s); an atom is X Y Z [occupancy B phase]");
        // a comment line is named as such, not counted as "2 value(s)"
        for text in ["# comment\n1 2 3\n", "#\n1 2 3\n", "1 2 3\n0 0 0 # c\n"] {
            let e = p(text).unwrap_err().to_string();
            assert!(e.contains("is not a number (an atom list has no comments"), "{text:?}: {e}");
        }
        assert!(p("# comment\n").unwrap_err().to_string().starts_with("t.txt line 1: '#' is not a number"));
        assert!(p("1 2 3\n4\r\n").unwrap_err().to_string().starts_with("t.txt line 2: 1 value(s)"));
        for empty in ["", "\n\n", "  \t\n"] {
            assert!(p(empty).unwrap_err().to_string().contains("no atoms in the file"), "{empty:?}");
        }
    }
}
