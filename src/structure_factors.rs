//! Structure factors: the HKL text file, the Fdump.bin cache, and the lookup the pixel loop does
//! (nearest neighbour, or tricubic Lagrange interpolation with the C's range rule).
//! nanoBragg.c L2101-L2258 and L2929-L3007.

use crate::cfmt::g;
use crate::io::atomic::write_atomic;
use crate::report::Log;
use crate::{Error, Result};
use std::path::Path;

/// A dense grid of |F| over h_min..=h_max (and k, l), with the C's extra zero plane per axis.
#[derive(Clone, Debug, PartialEq)]
pub struct HklGrid {
    pub h_min: i32,
    pub h_max: i32,
    pub k_min: i32,
    pub k_max: i32,
    pub l_min: i32,
    pub l_max: i32,
    pub h_range: i32,
    pub k_range: i32,
    pub l_range: i32,
    /// (h_range+1) x (k_range+1) x (l_range+1), l fastest.
    pub data: Vec<f64>,
    /// The C's `hkls` count: entries read from an HKL file, or h_range*k_range*l_range from a dump.
    pub hkls: i64,
}

impl HklGrid {
    fn empty(h_min: i32, h_max: i32, k_min: i32, k_max: i32, l_min: i32, l_max: i32) -> Result<Self> {
        let h_range = h_max - h_min + 1;
        let k_range = k_max - k_min + 1;
        let l_range = l_max - l_min + 1;
        let n = (h_range as i64 + 1) * (k_range as i64 + 1) * (l_range as i64 + 1);
        if h_range < 0 || k_range < 0 || l_range < 0 || n > (1i64 << 31) {
            return Err(Error::setup(format!(
                "unusable Miller index ranges h {h_min}..{h_max}, k {k_min}..{k_max}, l {l_min}..{l_max}"
            )));
        }
        Ok(HklGrid { h_min, h_max, k_min, k_max, l_min, l_max, h_range, k_range, l_range, data: vec![0.0; n as usize], hkls: 0 })
    }

    /// Flat index of grid cell (i, j, k) = (h - h_min, k - k_min, l - l_min).
    #[inline(always)]
    pub fn index(&self, i: i32, j: i32, k: i32) -> usize {
        ((i as usize * (self.k_range as usize + 1)) + j as usize) * (self.l_range as usize + 1) + k as usize
    }

    #[inline(always)]
    pub fn at(&self, i: i32, j: i32, k: i32) -> f64 {
        self.data[self.index(i, j, k)]
    }
}

/// Read an HKL text file: one reflection per line, `h k l F` (integers h, k, l). Unlike the C, a line
/// that is not four numbers is an error naming the line, instead of silently ending the read.
pub fn read_hkl(path: &Path, default_f: f64, log: &mut Log) -> Result<HklGrid> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, format!("cannot read HKL file: {e}")))?;
    log.line(format!("counting entries in {}", path.display()));
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
            if *x != x.round() || x.abs() > 1e6 {
                return Err(Error::file_line(path, lineno + 1, format!("non-integer Miller index {name} = {}", g(*x))));
            }
        }
        entries.push((v[0] as i32, v[1] as i32, v[2] as i32, v[3]));
    }
    if entries.is_empty() {
        return Err(Error::file(path, "no reflections (expected lines of h k l F)"));
    }
    let h_min = entries.iter().map(|e| e.0).min().unwrap();
    let h_max = entries.iter().map(|e| e.0).max().unwrap();
    let k_min = entries.iter().map(|e| e.1).min().unwrap();
    let k_max = entries.iter().map(|e| e.1).max().unwrap();
    let l_min = entries.iter().map(|e| e.2).min().unwrap();
    let l_max = entries.iter().map(|e| e.2).max().unwrap();
    let mut grid = HklGrid::empty(h_min, h_max, k_min, k_max, l_min, l_max)?;
    if default_f != 0.0 {
        log.line(format!("initializing to default_F = {}:", g(default_f)));
        for i in 0..grid.h_range {
            for j in 0..grid.k_range {
                for k in 0..grid.l_range {
                    let idx = grid.index(i, j, k);
                    grid.data[idx] = default_f;
                }
            }
        }
        log.line("done initializing:");
    }
    log.line(format!("re-reading {}", path.display()));
    for &(h, k, l, f) in &entries {
        let idx = grid.index(h - h_min, k - k_min, l - l_min);
        grid.data[idx] = f;
    }
    grid.hkls = entries.len() as i64;
    Ok(grid)
}

/// The Fdump.bin bytes: `h_min h_max k_min k_max l_min l_max\n\f` then native (little-endian) f64s.
pub fn fdump_bytes(grid: &HklGrid) -> Vec<u8> {
    let mut out = format!("{} {} {} {} {} {}\n\x0c", grid.h_min, grid.h_max, grid.k_min, grid.k_max, grid.l_min, grid.l_max).into_bytes();
    out.reserve(grid.data.len() * 8);
    for v in &grid.data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Write the Fdump.bin cache atomically.
pub fn write_fdump(path: &Path, grid: &HklGrid) -> Result<()> {
    write_atomic(path, &fdump_bytes(grid))
}

/// Read an Fdump.bin cache. As the C's `fscanf("%d...%d\n\f")`, the whitespace after the header also
/// swallows leading data bytes that happen to be whitespace (checklist Q23).
pub fn read_fdump(path: &Path) -> Result<HklGrid> {
    let bytes = std::fs::read(path).map_err(|e| Error::file(path, format!("cannot read structure-factor dump: {e}")))?;
    let mut pos = 0usize;
    let mut nums = [0i32; 6];
    for n in nums.iter_mut() {
        while pos < bytes.len() && is_c_space(bytes[pos]) {
            pos += 1;
        }
        let start = pos;
        if pos < bytes.len() && (bytes[pos] == b'-' || bytes[pos] == b'+') {
            pos += 1;
        }
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        let s = std::str::from_utf8(&bytes[start..pos]).unwrap_or("");
        *n = s.parse().map_err(|_| Error::file(path, "not a structure-factor dump (bad header)"))?;
    }
    while pos < bytes.len() && is_c_space(bytes[pos]) {
        pos += 1;
    }
    let mut grid = HklGrid::empty(nums[0], nums[1], nums[2], nums[3], nums[4], nums[5])?;
    let need = grid.data.len() * 8;
    let have = bytes.len() - pos;
    if have + 8 < need {
        return Err(Error::file(path, format!("truncated structure-factor dump: {have} data bytes, expected {need}")));
    }
    let mut data = bytes[pos..].to_vec();
    data.resize(need.max(data.len()), 0);
    for (i, v) in grid.data.iter_mut().enumerate() {
        *v = f64::from_le_bytes(data[i * 8..i * 8 + 8].try_into().unwrap());
    }
    grid.hkls = grid.h_range as i64 * grid.k_range as i64 * grid.l_range as i64;
    Ok(grid)
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Outcome of one structure-factor evaluation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lookup {
    Value(f64),
    /// Interpolation was requested but h,k,l left the safe range: the C falls back to nearest neighbour
    /// and switches interpolation off for good.
    OutOfRange,
}

/// Tricubic interpolation of F at fractional h,k,l (C L2929-L2992), or `OutOfRange`.
#[inline]
pub fn interpolate_f(grid: &HklGrid, h: f64, k: f64, l: f64) -> Lookup {
    let (h_min, k_min, l_min) = (grid.h_min as f64, grid.k_min as f64, grid.l_min as f64);
    if (h - h_min + 3.0) > grid.h_range as f64
        || h - 2.0 < h_min
        || (k - k_min + 3.0) > grid.k_range as f64
        || k - 2.0 < k_min
        || (l - l_min + 3.0) > grid.l_range as f64
        || l - 2.0 < l_min
    {
        return Lookup::OutOfRange;
    }
    let h0_flr = h.floor() as i32;
    let k0_flr = k.floor() as i32;
    let l0_flr = l.floor() as i32;
    let hi = [h0_flr - 1, h0_flr, h0_flr + 1, h0_flr + 2];
    let ki = [k0_flr - 1, k0_flr, k0_flr + 1, k0_flr + 2];
    let li = [l0_flr - 1, l0_flr, l0_flr + 1, l0_flr + 2];
    let hd = hi.map(|x| x as f64);
    let kd = ki.map(|x| x as f64);
    let ld = li.map(|x| x as f64);
    let mut sub = [[[0.0; 4]; 4]; 4];
    for i1 in 0..4 {
        for i2 in 0..4 {
            for i3 in 0..4 {
                sub[i1][i2][i3] = grid.at(hi[i1] - grid.h_min, ki[i2] - grid.k_min, li[i3] - grid.l_min);
            }
        }
    }
    Lookup::Value(crate::physics::polin3(&hd, &kd, &ld, &sub, h, k, l))
}

/// Nearest-neighbour F (C L2994-L3005): the grid value when h0,k0,l0 are inside it, else default_F.
#[inline(always)]
pub fn nearest_f(grid: Option<&HklGrid>, default_f: f64, h0: i32, k0: i32, l0: i32) -> f64 {
    match grid {
        Some(g)
            if g.hkls != 0
                && h0 <= g.h_max
                && h0 >= g.h_min
                && k0 <= g.k_max
                && k0 >= g.k_min
                && l0 <= g.l_max
                && l0 >= g.l_min =>
        {
            g.at(h0 - g.h_min, k0 - g.k_min, l0 - g.l_min)
        }
        _ => default_f,
    }
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
    }

    #[test]
    fn hkl_rejects_header_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.hkl");
        std::fs::write(&p, "h k l F\n1 2 3 4\n").unwrap();
        let e = read_hkl(&p, 0.0, &mut Log::default()).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
    }
}
