//! HKL text files (`-hkl`): one reflection per line, `h k l F` (nanoBragg.c L2101-L2200).

use crate::base::c::printf::g;
use crate::base::log::Log;
use crate::experiment::structure_factors::HklGrid;
use crate::{Error, Result};
use std::path::Path;

/// Read an HKL text file: one reflection per line, `h k l F` (integers h, k, l). Unlike the C, a line
/// that is not four numbers is an error naming the line, instead of silently ending the read.
pub fn read_hkl(path: &Path, default_f: f64, log: &mut Log) -> Result<HklGrid> {
    read_hkl_with_entries(path, default_f, log).map(|(grid, _)| grid)
}

/// [`read_hkl`], keeping the file's reflections in file order: the dL/dF rows (`--dfhkl-out`, the
/// library's loss gradient) are listed from what was read, never from the file read again later.
pub fn read_hkl_with_entries(path: &Path, default_f: f64, log: &mut Log) -> Result<(HklGrid, Vec<(i32, i32, i32, f64)>)> {
    log.line(format!("counting entries in {}", path.display()));
    let entries = read_hkl_entries(path)?;
    if default_f != 0.0 {
        log.line(format!("initializing to default_F = {}:", g(default_f)));
    }
    let mut grid = HklGrid::with_default(&entries, default_f).map_err(|e| Error::file(path, e.to_string()))?;
    if default_f != 0.0 {
        log.line("done initializing:");
    }
    log.line(format!("re-reading {}", path.display()));
    grid.fill(&entries);
    Ok((grid, entries))
}

/// The reflections of an HKL text file in file order, `(h, k, l, F)` (checked as [`read_hkl`] says).
pub fn read_hkl_entries(path: &Path) -> Result<Vec<(i32, i32, i32, f64)>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, "cannot read HKL file", e))?;
    let mut entries: Vec<(i32, i32, i32, f64)> = Vec::new();
    for (lineno, line) in text.lines().enumerate() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        if toks.is_empty() {
            continue;
        }
        if toks.len() != 4 {
            return Err(Error::file_line(path, lineno + 1, format!("expected 4 columns (h k l F), found {}", toks.len())));
        }
        let mut v = [0.0f64; 4];
        for (i, t) in toks.iter().enumerate() {
            v[i] = t
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| Error::file_line(path, lineno + 1, format!("'{t}' is not a number")))?;
        }
        for (name, x) in ["h", "k", "l"].iter().zip(&v[..3]) {
            if *x != x.round() {
                return Err(Error::file_line(path, lineno + 1, format!("non-integer Miller index {name} = {}", g(*x))));
            }
            if x.abs() > 1e6 {
                return Err(Error::file_line(path, lineno + 1, format!("Miller index {name} = {} is out of range (at most 1000000 in size)", g(*x))));
            }
        }
        if v[3].abs() > 1e100 {
            return Err(Error::file_line(path, lineno + 1, format!("structure factor {} is too large (its square would overflow)", g(v[3]))));
        }
        entries.push((v[0] as i32, v[1] as i32, v[2] as i32, v[3]));
    }
    if entries.is_empty() {
        return Err(Error::file(path, "no reflections (expected lines of h k l F)"));
    }
    Ok(entries)
}

/// The reflections listed (other than 0 0 0) whose Friedel mate (-h -k -l) is not listed, and how
/// many are listed, when that is more than half of them: an asymmetric unit (only h,k,l >= 0), or a
/// hemisphere (only l >= 0, whose l = 0 plane has its mates). The C applies no symmetry (every
/// reflection not listed takes -default_F, nanoBragg.c L2101-L2200), so such a list lights spots in
/// part of the image only. A whole list, or one cut at a resolution edge, has (nearly) every mate.
pub fn lacks_friedel_mates(entries: &[(i32, i32, i32, f64)]) -> Option<(usize, usize)> {
    let listed: std::collections::HashSet<(i32, i32, i32)> = entries.iter().map(|&(h, k, l, _)| (h, k, l)).collect();
    let acentric = listed.iter().filter(|&&hkl| hkl != (0, 0, 0));
    let (n, missing) = acentric.fold((0, 0), |(n, m), &(h, k, l)| (n + 1, m + usize::from(!listed.contains(&(-h, -k, -l)))));
    (2 * missing > n).then_some((missing, n))
}

/// `h k l |F|` lines (the format `-hkl` reads).
pub fn hkl_text(entries: &[(i32, i32, i32, f64)]) -> String {
    let mut s = String::with_capacity(entries.len() * 24);
    for (h, k, l, f) in entries {
        s.push_str(&format!("{h} {k} {l} {f}\n")); // shortest round-trip form: reads back exactly
    }
    s
}

/// Write `h k l |F|` lines (the format `-hkl` reads).
pub fn write_hkl(path: &Path, entries: &[(i32, i32, i32, f64)]) -> Result<()> {
    super::atomic::write_atomic(path, hkl_text(entries).as_bytes()).map_err(|e| Error::file(path, format!("cannot write -hklout file: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::log::Log;

    #[test]
    fn hkl_rejects_header_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.hkl");
        std::fs::write(&p, "h k l F\n1 2 3 4\n").unwrap();
        let e = read_hkl(&p, 0.0, &mut Log::default()).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn an_asymmetric_unit_lacks_friedel_mates() {
        let e = |v: &[(i32, i32, i32)]| v.iter().map(|&(h, k, l)| (h, k, l, 1.0)).collect::<Vec<_>>();
        assert_eq!(lacks_friedel_mates(&e(&[(0, 0, 0), (1, 0, 0), (1, 2, 3), (0, 1, 1)])), Some((3, 3)));
        assert_eq!(lacks_friedel_mates(&e(&[(-1, 2, 0), (0, 0, 1), (-2, 0, -3)])), Some((3, 3)));
        assert_eq!(lacks_friedel_mates(&e(&[(1, 0, 0), (1, 2, 3), (-1, -2, -3)])), None, "2 of 3 have their mate");
        assert_eq!(lacks_friedel_mates(&e(&[(0, 0, 0)])), None);
        // a hemisphere l >= 0 with its whole l = 0 plane: the plane's mates are there, the rest not
        let mut half = Vec::new();
        for h in -3..=3 {
            for k in -3..=3 {
                for l in 0..=3 {
                    half.push((h, k, l));
                }
            }
        }
        assert_eq!(lacks_friedel_mates(&e(&half)), Some((147, 195)));
        // the whole sphere cut at a resolution edge (|hkl|² <= 10): every mate listed
        let sphere: Vec<_> = (-3..=3).flat_map(|h| (-3..=3).flat_map(move |k| (-3..=3).map(move |l| (h, k, l)))).filter(|&(h, k, l)| h * h + k * k + l * l <= 10).collect();
        assert_eq!(lacks_friedel_mates(&e(&sphere)), None);
    }
}
