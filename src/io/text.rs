//! The C's `read_text_file`: multi-column text (source files, stol tables).
//!
//! Users feed the port the same files they fed the C program, so the C's loose parsing is
//! reproduced exactly rather than replaced by a stricter reader: lines are `fgets` chunks of at most
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
}
