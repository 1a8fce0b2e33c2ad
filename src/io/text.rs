//! Multi-column text (source files, stol tables): the C's `read_text_file` ([`parse_text`]), and a
//! strict reader ([`read_table`]) that `-sourcefile` and nonbragg's stol tables use: it gives the
//! same values on a well-formed file and refuses, with the line, what the C reads as 0 or by a prefix.
//!
//! The C's reader, kept for simulate's `-stol` (read, then unused, as in the C): lines are `fgets` chunks of at most
//! 10239 bytes; a chunk counts unless it is exactly `\n` after leading delimiters ` \t,;:!`; values
//! come from C `atof`; after a value the reader skips characters of `0123456789-+.EGeg`, then
//! non-delimiters, then delimiters. Consequences (all kept): missing trailing columns stay NaN when the
//! line ends in `\n`, but become 0 when it ends otherwise (CRLF line, last line without newline, a
//! line of only delimiters at end of file); comment or text lines give 0 in every column; extra
//! columns are ignored.

use crate::{Error, Result};
use std::path::Path;

/// The C's `fgets` buffer size (`char text[10240]`): at most 10239 bytes per chunk.
const FGETS_MAX: usize = 10239;
const DELIMITERS: &[u8] = b" \t,;:!";
const NUMBERSTUF: &[u8] = b"0123456789-+.EGeg";

/// C `atof` (= `strtod` in the "C" locale) of the C string starting at `s` (ends at the first NUL):
/// leading white space, sign, decimal or hex digits, exponent, `inf`/`nan`; no number gives 0.
pub fn atof(s: &[u8]) -> f64 {
    let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
    let mut buf = Vec::with_capacity(end + 1);
    buf.extend_from_slice(&s[..end]);
    buf.push(0);
    // SAFETY: `buf` is NUL-terminated and outlives the call; a null endptr is allowed.
    unsafe { libc::strtod(buf.as_ptr() as *const libc::c_char, std::ptr::null_mut()) }
}

/// Split `bytes` the way repeated `fgets(text, 10240, f)` calls would; each chunk is then seen as a
/// C string (cut at its first NUL).
fn fgets_chunks(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let lim = rest.len().min(FGETS_MAX);
        let n = rest[..lim].iter().position(|&c| c == b'\n').map_or(lim, |p| p + 1);
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        let end = chunk.iter().position(|&c| c == 0).unwrap_or(chunk.len());
        Some(&chunk[..end])
    })
}

fn spn(s: &[u8], set: &[u8]) -> usize {
    s.iter().position(|c| !set.contains(c)).unwrap_or(s.len())
}

fn cspn(s: &[u8], set: &[u8]) -> usize {
    s.iter().position(|c| set.contains(c)).unwrap_or(s.len())
}

/// Parse text the way the C's `read_text_file` does (see the module doc).
pub fn parse_text(bytes: &[u8], ncols: usize) -> Vec<Vec<f64>> {
    let is_blank = |c: &[u8]| &c[spn(c, DELIMITERS)..] == b"\n";
    let lines = fgets_chunks(bytes).filter(|c| !is_blank(c)).count();
    let mut cols = vec![vec![f64::NAN; lines]; ncols];
    for (line, chunk) in fgets_chunks(bytes).filter(|c| !is_blank(c)).enumerate() {
        let mut tok = &chunk[spn(chunk, DELIMITERS)..];
        let mut i = 0;
        // the C's do { ... } while (strcmp(token,"\n") != 0), whose `continue`s end the loop
        loop {
            if i >= ncols {
                break; // only reachable with ncols == 0: the C would write past its arguments
            }
            cols[i][line] = atof(tok);
            tok = &tok[spn(tok, NUMBERSTUF)..];
            if tok == b"\n" {
                break;
            }
            tok = &tok[cspn(tok, DELIMITERS)..];
            tok = &tok[spn(tok, DELIMITERS)..];
            if tok == b"\n" {
                break;
            }
            i += 1;
            if i >= ncols {
                break;
            }
        }
    }
    cols
}

/// Returns `ncols` columns, each with one value per counted line (NaN where the C leaves NaN).
pub fn read_text_file(path: &Path, ncols: usize) -> Result<Vec<Vec<f64>>> {
    let bytes = std::fs::read(path).map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
    Ok(parse_text(&bytes, ncols))
}

/// A table of numbers read strictly ([`read_table`]): `cols[c][r]` is column `c` of row `r` (NaN
/// where a line stops short of the last column), `lines[r]` the row's line number in the file (from 1).
#[derive(Debug)]
pub struct Table {
    pub cols: Vec<Vec<f64>>,
    pub lines: Vec<usize>,
}

/// A token as the error shows it: escaped (one line) and cut at 40 characters.
fn shown(tok: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(tok).escape_debug().collect();
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

/// One line's values, strictly: each token between delimiters (` \t,;:!` and `\r`) the whole of
/// a finite number, `min..=max` of them.
fn table_row(line: &[u8], min: usize, max: usize) -> std::result::Result<Vec<f64>, String> {
    let is_delim = |c: &u8| DELIMITERS.contains(c) || *c == b'\r';
    let mut row = Vec::new();
    for tok in line.split(is_delim).filter(|t| !t.is_empty()) {
        // a comment ends the line, and words past the last column are ignored, as the C's reader
        // ignores them (`-10 0 0 1 1e-10  # main beam`)
        if tok[0] == b'#' || row.len() == max {
            break;
        }
        let v = std::str::from_utf8(tok).ok().and_then(|t| t.parse::<f64>().ok());
        match v {
            Some(v) if v.is_finite() => row.push(v),
            Some(_) => return Err(format!("'{}' is not a finite number", shown(tok))),
            None => return Err(format!("'{}' is not a number", shown(tok))),
        }
    }
    if row.is_empty() {
        return Ok(row); // blank, or only a comment: skipped
    }
    if row.len() < min {
        let want = if min == max { format!("{min}") } else { format!("{min} to {max}") };
        return Err(format!("{} values; expected {want} numbers per line", row.len()));
    }
    Ok(row)
}

/// Parse a table of `min..=max` finite numbers per line (`min` >= 1): lines of only delimiters or a
/// `#` comment are skipped, a comment ends a line and words past the last column are ignored (as the
/// C's reader ignores them); anything else that is not a number (a word, binary bytes, `inf`, `1,5`
/// read as two values, `5x`) is refused with its line number (from 1). The C's `read_text_file`
/// ([`parse_text`]) reads such text as 0 and a number by its prefix; on a well-formed file both give
/// the same values.
pub fn parse_table(bytes: &[u8], min: usize, max: usize) -> std::result::Result<Table, (usize, String)> {
    let mut t = Table { cols: vec![Vec::new(); max], lines: Vec::new() };
    for (k, line) in bytes.split(|&c| c == b'\n').enumerate() {
        let row = table_row(line, min.max(1), max).map_err(|e| (k + 1, e));
        match row {
            Err(e) => return Err(e),
            Ok(row) if row.is_empty() => continue,
            Ok(row) => {
                for (c, col) in t.cols.iter_mut().enumerate() {
                    col.push(row.get(c).copied().unwrap_or(f64::NAN));
                }
                t.lines.push(k + 1);
            }
        }
    }
    Ok(t)
}

/// Read `path` as [`parse_table`] does; `what` (the flag) leads the reason of an error, which names
/// the file and line.
pub fn read_table(path: &Path, what: &str, min: usize, max: usize) -> Result<Table> {
    let bytes = std::fs::read(path).map_err(|e| Error::read(path, format!("{what}: cannot read"), e))?;
    parse_table(&bytes, min, max).map_err(|(line, reason)| Error::file_line(path, line, format!("{what}: {reason}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str, n: usize) -> Vec<Vec<f64>> {
        parse_text(s.as_bytes(), n)
    }

    /// Compare allowing NaN == NaN.
    fn same(a: &[Vec<f64>], b: &[&[f64]]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x.len() == y.len() && x.iter().zip(y.iter()).all(|(u, v)| u == v || (u.is_nan() && v.is_nan()))
            })
    }

    const N: f64 = f64::NAN;

    #[test]
    fn atof_like_c() {
        assert_eq!(atof(b"  -3.5e2xyz"), -350.0);
        assert_eq!(atof(b"abc"), 0.0);
        assert_eq!(atof(b""), 0.0);
        assert_eq!(atof(b"0x10"), 16.0);
        assert_eq!(atof(b"\n 7"), 7.0);
        assert!(atof(b"inf").is_infinite());
        assert!(atof(b"nan").is_nan());
        assert_eq!(atof(b"1\x002"), 1.0);
        assert_eq!(atof(b"1e"), 1.0);
    }

    #[test]
    fn basic_lines() {
        let r = p("1 2 3\n4,5;6\n\n   \n7\t8 9 10 11\n", 3);
        assert!(same(&r, &[&[1., 4., 7.], &[2., 5., 8.], &[3., 6., 9.]]));
        // missing trailing columns with \n stay NaN; trailing delimiters do not matter
        let r = p("1 2 \n3\n", 3);
        assert!(same(&r, &[&[1., 3.], &[2., N], &[N, N]]));
    }

    #[test]
    fn quirks() {
        // CRLF: the missing columns become 0, the present ones parse
        let r = p("1 2\r\n3 4 5\r\n", 3);
        assert!(same(&r, &[&[1., 3.], &[2., 4.], &[0., 5.]]));
        // final line without newline
        let r = p("1 2 3\n4", 3);
        assert!(same(&r, &[&[1., 4.], &[2., 0.], &[3., 0.]]));
        // comment lines give zeros everywhere
        let r = p("# X Y Z\n1 2 3\n", 3);
        assert!(same(&r, &[&[0., 1.], &[0., 2.], &[0., 3.]]));
        // a line of delimiters at EOF counts and gives zeros; "\r\n" alone counts
        let r = p("1 2\n  ", 2);
        assert!(same(&r, &[&[1., 0.], &[2., 0.]]));
        let r = p("\r\n", 2);
        assert!(same(&r, &[&[0.], &[0.]]));
        // the number skipper eats "1-2" whole, atof only reads 1
        let r = p("1-2 3\n", 2);
        assert!(same(&r, &[&[1.], &[3.]]));
        // empty file
        assert!(same(&p("", 2), &[&[], &[]]));
    }

    #[test]
    fn long_lines_split_like_fgets() {
        let mut s = " ".repeat(FGETS_MAX - 2);
        s.push_str("12 34\n");
        // first chunk = 10237 spaces + "12" (count), second = " 34\n"
        let r = p(&s, 2);
        assert!(same(&r, &[&[12., 34.], &[0., N]]));
    }

    /// The golden `inputs/sources.txt` and `inputs/test.stol`; expected values checked against the C
    /// function compiled on its own.
    #[test]
    fn golden_inputs() {
        let src = "-10.0  0.0     0.0     1.0  1.0e-10\n-10.0  0.02    0.0     1.0  1.0e-10\n-10.0  0.0     0.02    0.5  1.02e-10\n-10.0 -0.015  -0.015   2.0  0.98e-10\n\n-10.0  0.01   -0.01\n-10.0 -0.02    0.005\n";
        let r = p(src, 5);
        assert!(same(
            &r,
            &[
                &[-10., -10., -10., -10., -10., -10.],
                &[0., 0.02, 0., -0.015, 0.01, -0.02],
                &[0., 0., 0.02, -0.015, -0.01, 0.005],
                &[1., 1., 0.5, 2., N, N],
                &[1e-10, 1e-10, 1.02e-10, 0.98e-10, N, N],
            ]
        ));
        let r = p("0 2.57\n0.1 2.4\n0.2 1.8\n0.3 1.2\n0.5 0.6\n", 2);
        assert!(same(&r, &[&[0., 0.1, 0.2, 0.3, 0.5], &[2.57, 2.4, 1.8, 1.2, 0.6]]));
    }

    /// The strict reader: what the C's reader took as 0 or by its prefix is refused with the line.
    #[test]
    fn strict_table_refuses_what_is_not_a_number() {
        let t = parse_table(b"0 1\n\n  \t\n0.1, 2.5\r\n-1e-3\t4", 2, 2).unwrap();
        assert_eq!(t.cols, vec![vec![0.0, 0.1, -1e-3], vec![1.0, 2.5, 4.0]]);
        assert_eq!(t.lines, vec![1, 4, 5]);
        // short lines keep NaN for the missing columns when fewer are allowed
        let t = parse_table(b"-10 0 0\n-10 0 0 1 1e-10\n", 1, 5).unwrap();
        assert!(t.cols[3][0].is_nan() && t.cols[4][0].is_nan() && t.cols[4][1] == 1e-10);
        let err = |b: &[u8], min, max| parse_table(b, min, max).unwrap_err();
        assert_eq!(err(b"hello world\n", 2, 2), (1, "'hello' is not a number".into()));
        assert_eq!(err(b"0 1\n0.1 abc\n", 2, 2), (2, "'abc' is not a number".into()));
        assert_eq!(err(b"0 1\n0.1 inf\n", 2, 2), (2, "'inf' is not a finite number".into()));
        assert_eq!(err(b"0 1\n0.1 1e999\n", 2, 2), (2, "'1e999' is not a finite number".into()));
        assert_eq!(err(b"0\n", 2, 2), (1, "1 values; expected 2 numbers per line".into()));
        // as the C's reader: a comment line is skipped, a comment or words past the last column end a line
        let t = parse_table(b"# x y\n1 2 3\n-10 0 0 1 1e-10  # main beam\n4 5\n", 2, 5).unwrap();
        assert_eq!(t.lines, vec![2, 3, 4]);
        assert_eq!((t.cols[2][0], t.cols[4][1]), (3.0, 1e-10));
        assert!(t.cols[2][2].is_nan());
        let t = parse_table(b"0 1 2\n0.1 2 x y\n", 2, 2).unwrap();
        assert_eq!(t.cols, vec![vec![0.0, 0.1], vec![1.0, 2.0]]);
        assert_eq!(err(b"5x 1\n", 2, 2), (1, "'5x' is not a number".into()));
        assert_eq!(err(b"0x10 1\n", 2, 2), (1, "'0x10' is not a number".into()));
        assert_eq!(err(b"-10 abc 0 1 1e-10\n", 1, 5), (1, "'abc' is not a number".into()));
        // binary bytes: refused on one line
        let (line, why) = err(b"1 2\n\x00\xff\x0b\x1b[2J 3\n", 2, 2);
        assert_eq!(line, 2);
        assert!(why.contains("is not a number") && !why.contains('\n') && !why.contains('\x1b'), "{why}");
    }
}
