//! Images as the simulation uses them, apart from any file format.

use ndarray::ArrayView2;
use std::ops::Range;
use std::path::PathBuf;

/// A detector mask (`-mask`): pixels whose value is 0 are skipped. `path` names it in messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Mask {
    pub path: PathBuf,
    /// fast pixels
    pub width: usize,
    /// slow pixels
    pub height: usize,
    /// row-major, slow × fast
    pub data: Vec<u16>,
}

/// A region of interest: half-open pixel ranges inside the image. The C's inclusive bounds, with
/// their one-past-the-end default, are clipped once ([`Roi::from_c_bounds`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roi {
    pub fast: Range<usize>,
    pub slow: Range<usize>,
}

impl Roi {
    /// Every pixel of a `fpixels` × `spixels` image.
    pub fn full(fpixels: usize, spixels: usize) -> Roi {
        Roi { fast: 0..fpixels, slow: 0..spixels }
    }

    /// The pixels of a `fpixels` × `spixels` image inside the C's inclusive bounds `[xmin, xmax, ymin,
    /// ymax]` (any values: an empty range where min > max or the bounds miss the image).
    pub fn from_c_bounds(b: [i64; 4], fpixels: usize, spixels: usize) -> Roi {
        let clip = |lo: i64, hi: i64, n: usize| {
            let lo = (lo.max(0) as u64).min(n as u64) as usize;
            let hi = (hi.saturating_add(1).clamp(0, n as i64) as usize).max(lo);
            lo..hi
        };
        Roi { fast: clip(b[0], b[1], fpixels), slow: clip(b[2], b[3], spixels) }
    }

    pub fn contains(&self, f: usize, s: usize) -> bool {
        self.fast.contains(&f) && self.slow.contains(&s)
    }
}

/// An image (slow, fast) with the region that was rendered: what the image writers, the noise and
/// the statistics take instead of `(float, fpixels, spixels, roi)`.
#[derive(Clone, Debug)]
pub struct ImageView<'a, T = f32> {
    pub pixels: ArrayView2<'a, T>,
    pub roi: Roi,
}

impl<'a, T> ImageView<'a, T> {
    /// The first `fpixels` × `spixels` values of `data`, slow-major (panics if `data` is shorter).
    pub fn new(data: &'a [T], fpixels: usize, spixels: usize, roi: Roi) -> Self {
        let n = fpixels * spixels;
        assert!(data.len() >= n, "image of {} values is smaller than {fpixels} x {spixels}", data.len());
        let pixels = ArrayView2::from_shape((spixels, fpixels), &data[..n]).expect("a slow-major image");
        ImageView { pixels, roi }
    }
    pub fn fpixels(&self) -> usize {
        self.pixels.ncols()
    }
    pub fn spixels(&self) -> usize {
        self.pixels.nrows()
    }
    /// The values, slow-major.
    pub fn data(&self) -> &'a [T] {
        self.pixels.to_slice().expect("ImageView::new makes a slow-major view")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_bounds_clip_to_the_image() {
        // the C's default upper bound is one past the end
        assert_eq!(Roi::from_c_bounds([0, 4, 0, 3], 4, 3), Roi::full(4, 3));
        assert_eq!(Roi::from_c_bounds([1, 2, 0, 0], 4, 3), Roi { fast: 1..3, slow: 0..1 });
        // min > max, negative or past the image: empty
        assert!(Roi::from_c_bounds([3, 1, 0, 2], 4, 3).fast.is_empty());
        assert!(Roi::from_c_bounds([-5, -1, 0, 2], 4, 3).fast.is_empty());
        assert!(Roi::from_c_bounds([0, 3, 7, 9], 4, 3).slow.is_empty());
        assert_eq!(Roi::from_c_bounds([-5, i64::MAX, i64::MIN, 1], 4, 3), Roi { fast: 0..4, slow: 0..2 });
    }

    #[test]
    fn a_view_is_slow_major() {
        let data = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
        let v = ImageView::new(&data, 3, 2, Roi::full(3, 2));
        assert_eq!((v.fpixels(), v.spixels(), v.pixels[[1, 0]]), (3, 2, 3.0));
        assert_eq!(v.data(), &data);
    }
}
