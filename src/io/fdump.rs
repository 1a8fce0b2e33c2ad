//! The Fdump.bin structure-factor cache (`-dump`), nanoBragg.c L2200-L2258.

use crate::io::atomic::write_atomic;
use crate::experiment::structure_factors::HklGrid;
use crate::{Error, Result};
use std::path::Path;

/// The Fdump.bin bytes: `h_min h_max k_min k_max l_min l_max\n\f` then native (little-endian) f64s.
pub fn fdump_bytes(grid: &HklGrid) -> Vec<u8> {
    let mut out = format!("{} {} {} {} {} {}\n\x0c", grid.h_min, grid.h_max, grid.k_min, grid.k_max, grid.l_min, grid.l_max).into_bytes();
    out.reserve(grid.data.len() * 8);
    for v in &grid.data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// The size in bytes of [`fdump_bytes`]`(grid)`, without making it.
pub fn fdump_len(grid: &HklGrid) -> u64 {
    let head = format!("{} {} {} {} {} {}\n\x0c", grid.h_min, grid.h_max, grid.k_min, grid.k_max, grid.l_min, grid.l_max);
    head.len() as u64 + grid.data.len() as u64 * 8
}

/// Write the Fdump.bin cache atomically.
pub fn write_fdump(path: &Path, grid: &HklGrid) -> Result<()> {
    write_atomic(path, &fdump_bytes(grid))
}

/// Read an Fdump.bin cache. As the C's `fscanf("%d...%d\n\f")`, the whitespace after the header also
/// swallows leading data bytes that happen to be whitespace (checklist Q23); the C then finds the data
/// that many bytes short and leaves the tail zero, which is kept. Any other shortfall, a header whose
/// grid cannot fit in memory or does not match the file size, and non-finite values are refused
/// before anything is allocated.
pub fn read_fdump(path: &Path) -> Result<HklGrid> {
    let bad = |reason: String| Error::file(path, reason);
    let len = std::fs::metadata(path).map_err(|e| Error::read(path, "cannot read structure-factor dump", e))?.len();
    // the header is at most six 11-character ints and separators: read it first, the data only
    // once its size is known to match the file
    let mut fh = std::fs::File::open(path).map_err(|e| Error::read(path, "cannot read structure-factor dump", e))?;
    let mut head = Vec::with_capacity(256);
    {
        use std::io::Read;
        (&mut fh).take(256).read_to_end(&mut head).map_err(|e| Error::read(path, "cannot read structure-factor dump", e))?;
    }
    let mut pos = 0usize;
    let mut nums = [0i32; 6];
    for n in nums.iter_mut() {
        while pos < head.len() && is_c_space(head[pos]) {
            pos += 1;
        }
        let start = pos;
        if pos < head.len() && (head[pos] == b'-' || head[pos] == b'+') {
            pos += 1;
        }
        while pos < head.len() && head[pos].is_ascii_digit() {
            pos += 1;
        }
        let s = std::str::from_utf8(&head[start..pos]).unwrap_or("");
        *n = s.parse().map_err(|_| bad("not a structure-factor dump (bad header)".into()))?;
    }
    // the format's separator: "\n\f"; whitespace beyond it is data the C's fscanf swallows
    let ints_end = pos;
    let sep_end = if head[ints_end..].starts_with(b"\n\x0c") { ints_end + 2 } else { ints_end };
    while pos < head.len() && is_c_space(head[pos]) {
        pos += 1;
    }
    let swallowed = (pos - sep_end) as u64;
    let grid_err = |e: Error| bad(e.to_string());
    let span = |lo: i32, hi: i32| hi as i64 - lo as i64 + 1;
    let n = [span(nums[0], nums[1]), span(nums[2], nums[3]), span(nums[4], nums[5])]
        .iter()
        .try_fold(1u64, |a, &r| if r >= 0 { a.checked_mul(r as u64 + 1) } else { None });
    let need = n.and_then(|n| n.checked_mul(8));
    let have = len.saturating_sub(pos as u64);
    match need {
        Some(need) if have + swallowed >= need && have <= need => {}
        Some(need) => {
            return Err(bad(format!(
                "header claims h {}..{}, k {}..{}, l {}..{} ({need} data bytes) but the file holds {have} data bytes{}",
                nums[0], nums[1], nums[2], nums[3], nums[4], nums[5],
                if have < need { " (truncated)" } else { "" }
            )))
        }
        None => return Err(bad(format!("header ranges h {}..{}, k {}..{}, l {}..{} are unusable", nums[0], nums[1], nums[2], nums[3], nums[4], nums[5]))),
    }
    let mut grid = HklGrid::empty(nums[0], nums[1], nums[2], nums[3], nums[4], nums[5]).map_err(grid_err)?;
    let bytes = std::fs::read(path).map_err(|e| Error::read(path, "cannot read structure-factor dump", e))?;
    let data = bytes.get(pos..).unwrap_or(&[]);
    for (i, (v, c)) in grid.data.iter_mut().zip(data.chunks(8)).enumerate() {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        *v = f64::from_le_bytes(b);
        if !v.is_finite() {
            return Err(bad(format!("value {} of the dump is {} (a damaged or foreign file)", i + 1, v)));
        }
        // the bound an -hkl file is held to (io::hkl): a larger F's square overflows
        if v.abs() > 1e100 {
            return Err(bad(format!("value {} of the dump is {v:e}: too large (its square would overflow)", i + 1)));
        }
    }
    grid.hkls = grid.h_range as i64 * grid.k_range as i64 * grid.l_range as i64;
    Ok(grid)
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdump_round_trip() {
        let mut g = HklGrid::empty(-1, 1, 0, 2, -2, 0).unwrap();
        for (i, v) in g.data.iter_mut().enumerate() {
            *v = i as f64 * 1.5 + 100.0;
        }
        g.hkls = 27;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("Fdump.bin");
        write_fdump(&p, &g).unwrap();
        let r = read_fdump(&p).unwrap();
        assert_eq!(r.data, g.data);
        assert_eq!((r.h_min, r.k_max, r.l_min), (-1, 2, -2));
        assert_eq!(fdump_len(&g), std::fs::metadata(&p).unwrap().len());
    }

    /// A dump holding an F whose square overflows is refused, as an -hkl file holding one is.
    #[test]
    fn fdump_with_a_huge_value_is_refused() {
        let mut g = HklGrid::empty(0, 1, 0, 0, 0, 0).unwrap();
        g.data.fill(1.0);
        g.data[1] = 1e300;
        g.hkls = 2;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("Fdump.bin");
        write_fdump(&p, &g).unwrap();
        let e = read_fdump(&p).unwrap_err().to_string();
        assert!(e.contains("value 2") && e.contains("too large"), "{e}");
    }
}
