//! Structure factors: the HKL text file, the Fdump.bin cache, and the lookup the pixel loop does
//! (nearest neighbour, or tricubic Lagrange interpolation with the C's range rule).
//! nanoBragg.c L2101-L2258 and L2929-L3007.

use crate::{Error, Result};
use std::borrow::Cow;

use std::sync::Arc;

/// A reflection list: (h, k, l, F).
pub type HklList = Vec<(i32, i32, i32, f64)>;

/// The structure factors the pixel loop looks up: a grid (or none: `default_f` everywhere), whether
/// it is interpolated, and the resolution limit.
#[derive(Clone, Debug)]
pub struct StructureFactors {
    /// Shared with the inputs it came from (an image series builds every frame from one grid).
    pub fhkl: Option<Arc<HklGrid>>,
    pub default_f: f64,
    pub interpolate: bool,
    /// `-dmin` (metres): sub-pixels beyond it are skipped; 0 = no limit.
    pub dmin: f64,
    /// The list computed from a model, kept when `-hklout` will write it.
    pub hklout_entries: Option<Arc<HklList>>,
}

// The readers and the writer moved to `io` (one module per format); re-exported here for old paths.

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
    /// The dense grid of an in-memory reflection list `(h, k, l, F)`: indices span the list's minima
    /// to maxima, unlisted reflections hold `default_f`, a repeated reflection keeps its last F (as
    /// nanoBragg.c's second pass over the file, L2180). This is what `-hkl` builds from its file and
    /// `-pdb` from its model; a library caller passes its own list.
    pub fn from_entries(entries: &[(i32, i32, i32, f64)], default_f: f64) -> Result<Self> {
        let mut grid = Self::with_default(entries, default_f)?;
        grid.fill(entries);
        Ok(grid)
    }

    /// The empty grid spanning `entries`, every value `default_f` (the C's first pass).
    pub(crate) fn with_default(entries: &[(i32, i32, i32, f64)], default_f: f64) -> Result<Self> {
        if entries.is_empty() {
            return Err(Error::setup("no reflections (expected a list of h k l F)"));
        }
        let min_max = |f: fn(&(i32, i32, i32, f64)) -> i32| {
            let it = entries.iter().map(f);
            (it.clone().min().unwrap_or(0), it.max().unwrap_or(0))
        };
        let ((h_min, h_max), (k_min, k_max), (l_min, l_max)) = (min_max(|e| e.0), min_max(|e| e.1), min_max(|e| e.2));
        let mut grid = Self::empty(h_min, h_max, k_min, k_max, l_min, l_max)?;
        if default_f != 0.0 {
            // only the (range)^3 cells the lookups use, as the C's loops (L2160); the padding stays 0
            for i in 0..grid.h_range {
                for j in 0..grid.k_range {
                    for k in 0..grid.l_range {
                        let idx = grid.index(i, j, k);
                        grid.data[idx] = default_f;
                    }
                }
            }
        }
        Ok(grid)
    }

    /// Store every listed F (the C's second pass).
    pub(crate) fn fill(&mut self, entries: &[(i32, i32, i32, f64)]) {
        for &(h, k, l, f) in entries {
            let idx = self.index(h - self.h_min, k - self.k_min, l - self.l_min);
            self.data[idx] = f;
        }
        self.hkls = entries.len() as i64;
    }

    pub(crate) fn empty(h_min: i32, h_max: i32, k_min: i32, k_max: i32, l_min: i32, l_max: i32) -> Result<Self> {
        // ranges in i64: h_max - h_min + 1 overflows i32 for a hostile Fdump header
        let span = |lo: i32, hi: i32| hi as i64 - lo as i64 + 1;
        let (hr, kr, lr) = (span(h_min, h_max), span(k_min, k_max), span(l_min, l_max));
        let bad = || {
            Error::setup(format!("unusable Miller index ranges h {h_min}..{h_max}, k {k_min}..{k_max}, l {l_min}..{l_max}"))
        };
        if hr < 0 || kr < 0 || lr < 0 || hr >= i32::MAX as i64 || kr >= i32::MAX as i64 || lr >= i32::MAX as i64 {
            return Err(bad());
        }
        let n = ((hr + 1) as u64).checked_mul((kr + 1) as u64).and_then(|x| x.checked_mul((lr + 1) as u64));
        let bytes = n.and_then(|n| n.checked_mul(8)).filter(|&b| b < (1u64 << 46));
        crate::base::memory::check_alloc(
            || {
                Error::setup(format!(
                    "Miller index ranges h {h_min}..{h_max}, k {k_min}..{k_max}, l {l_min}..{l_max} need a dense grid of {} but only {} of memory is available",
                    bytes.map(crate::base::memory::human).unwrap_or_else(|| "more than 64 TiB".into()),
                    crate::base::memory::human(crate::base::memory::memory_budget())
                ))
            },
            bytes,
        )?;
        let n = n.ok_or_else(bad)? as usize;
        let (h_range, k_range, l_range) = (hr as i32, kr as i32, lr as i32);
        Ok(HklGrid { h_min, h_max, k_min, k_max, l_min, l_max, h_range, k_range, l_range, data: vec![0.0; n], hkls: 0 })
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
    Lookup::Value(crate::experiment::physics::polin3(&hd, &kd, &ld, &sub, h, k, l))
}

/// Nearest-neighbour F (C L2994-L3005): the grid value when h0,k0,l0 are inside it, else default_F.
/// (A one-off lookup; the pixel loops build a [`NearestF`] once and look up through it.)
#[inline(always)]
pub fn nearest_f(grid: Option<&HklGrid>, default_f: f64, h0: i32, k0: i32, l0: i32) -> f64 {
    NearestF::<f64>::new(grid, default_f).view().get(h0 as i64, k0 as i64, l0 as i64)
}

/// A value type the nearest-neighbour lookup can hold the |F| grid in: f64 borrows the grid as it
/// is, f32 (`-precision single`) keeps a converted copy.
pub trait FValue: Copy + 'static {
    fn convert(x: f64) -> Self;
    fn grid_data(data: &[f64]) -> Cow<'_, [Self]>;
}

impl FValue for f64 {
    #[inline(always)]
    fn convert(x: f64) -> f64 {
        x
    }
    fn grid_data(data: &[f64]) -> Cow<'_, [f64]> {
        Cow::Borrowed(data)
    }
}

impl FValue for f32 {
    #[inline(always)]
    fn convert(x: f64) -> f32 {
        x as f32
    }
    fn grid_data(data: &[f64]) -> Cow<'_, [f32]> {
        Cow::Owned(data.iter().map(|&v| v as f32).collect())
    }
}

/// The nearest-neighbour structure factor of every pixel loop (C L2994-L3005): F at (h0, k0, l0)
/// from the dense grid when the indices are inside h_min..=h_max (and k, l), else `default_F`; no
/// grid (or a grid from an HKL file with no entries, the C's `hkls == 0`) means `default_F`
/// everywhere. Built once per render; [`NearestF::view`] gives the copyable form the hot loops use.
#[derive(Clone, Debug)]
pub struct NearestF<'a, T: FValue> {
    /// The grid, l fastest; never empty (without a grid, one unused value and an empty range).
    data: Cow<'a, [T]>,
    has_grid: bool,
    /// h_min, k_min, l_min
    min: [i64; 3],
    /// max − min per axis (−1 without a grid: no index is inside)
    span: [i64; 3],
    /// flat-index strides of h and k (l is contiguous)
    stride_h: i64,
    stride_k: i64,
    default_f: T,
}

impl<'a, T: FValue> NearestF<'a, T> {
    pub fn new(grid: Option<&'a HklGrid>, default_f: f64) -> Self {
        let default_f = T::convert(default_f);
        match grid.filter(|g| g.hkls != 0 && !g.data.is_empty()) {
            Some(g) => NearestF {
                data: T::grid_data(&g.data),
                has_grid: true,
                min: [g.h_min as i64, g.k_min as i64, g.l_min as i64],
                span: [(g.h_max - g.h_min) as i64, (g.k_max - g.k_min) as i64, (g.l_max - g.l_min) as i64],
                stride_h: (g.k_range as i64 + 1) * (g.l_range as i64 + 1),
                stride_k: g.l_range as i64 + 1,
                default_f,
            },
            None => NearestF {
                // one unused value (borrowed for f64: no allocation per lookup table)
                data: T::grid_data(&[0.0]),
                has_grid: false,
                min: [0; 3],
                span: [-1; 3],
                stride_h: 0,
                stride_k: 0,
                default_f,
            },
        }
    }

    /// Whether a grid is in use (otherwise every lookup is `default_F`).
    pub fn has_grid(&self) -> bool {
        self.has_grid
    }

    pub fn default_f(&self) -> T {
        self.default_f
    }

    /// The grid's layout: (h_min, k_min, l_min), max − min per axis, and the h and k strides of the
    /// flat index (for lookups that compute the index their own way, as the SIMD kernel does).
    pub fn layout(&self) -> ([i64; 3], [i64; 3], [i64; 2]) {
        (self.min, self.span, [self.stride_h, self.stride_k])
    }

    /// The grid values, l fastest (one unused value without a grid).
    pub fn data(&self) -> &[T] {
        &self.data
    }

    #[inline(always)]
    pub fn view(&self) -> NearestView<'_, T> {
        NearestView { data: &self.data, min: self.min, span: self.span, stride_h: self.stride_h, stride_k: self.stride_k, default_f: self.default_f }
    }
}

/// [`NearestF`] with the grid as a plain slice, for hot loops.
#[derive(Clone, Copy, Debug)]
pub struct NearestView<'a, T> {
    data: &'a [T],
    min: [i64; 3],
    span: [i64; 3],
    stride_h: i64,
    stride_k: i64,
    default_f: T,
}

impl<T: Copy> NearestView<'_, T> {
    /// F at integer indices (h0, k0, l0). Branch-free (a bounds mask, a clamped index, a select), so
    /// a loop over SIMD lanes becomes a gather.
    #[inline(always)]
    pub fn get(&self, h0: i64, k0: i64, l0: i64) -> T {
        let dh = h0 - self.min[0];
        let dk = k0 - self.min[1];
        let dl = l0 - self.min[2];
        let inside = (dh >= 0) & (dh <= self.span[0]) & (dk >= 0) & (dk <= self.span[1]) & (dl >= 0) & (dl <= self.span[2]);
        let index = if inside { (dh * self.stride_h + dk * self.stride_k + dl) as usize } else { 0 };
        debug_assert!(index < self.data.len());
        // SAFETY: inside the grid the index is below (h_span+1)(k_span+1)(l_span+1) <= data.len()
        // (HklGrid holds one more plane per axis than the span); outside it is 0 and data is never empty.
        let f = unsafe { *self.data.get_unchecked(index) };
        if inside {
            f
        } else {
            self.default_f
        }
    }
}
