//! Image statistics with the C's definitions (nanoBragg.c L3040-L3130), reduced serially in raster
//! order so the numbers do not depend on the thread count.

use crate::base::image::ImageView;

/// max_I and where, mean, rms, rmsd, and the sums behind them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ImageStats {
    pub max_i: f64,
    /// Fast/slow position (metres) of the last sub-pixel of the brightest pixel.
    pub max_i_x: f64,
    pub max_i_y: f64,
    pub sum: f64,
    pub sumsqr: f64,
    /// Rendered (ROI, unmasked) pixels.
    pub n: u64,
    pub mean: f64,
    pub rms: f64,
    pub rmsd: f64,
}

/// One row's share of the first statistics pass: its brightest pixel (strict `>`, the first of
/// equals, as the C's raster scan) and its sums over the rendered pixels. Kept per row so that the
/// render can reduce each row while it is still in cache ([`row_stats`]) and [`image_stats_from_rows`]
/// combines them in row order: the same numbers as [`image_stats`] for any thread count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowStats {
    /// The row's largest value above 0 (0 when none).
    pub max: f64,
    /// Its column; `usize::MAX` when the row has no pixel above 0 (or is outside the ROI).
    pub max_f: usize,
    pub sum: f64,
    pub sumsqr: f64,
    /// Rendered pixels.
    pub n: u64,
    /// Pixels of the whole row (ROI or not) that are NaN or infinite.
    pub nonfinite: u64,
}

impl Default for RowStats {
    fn default() -> Self {
        RowStats { max: 0.0, max_f: usize::MAX, sum: 0.0, sumsqr: 0.0, n: 0, nonfinite: 0 }
    }
}

/// [`RowStats`] of row `s` (`row` = its `fpixels` values) of an image with `roi`, `mask_row` the
/// row's mask (0 = masked) if any.
pub fn row_stats(roi: &crate::base::image::Roi, s: usize, row: &[f32], mask_row: Option<&[u16]>) -> RowStats {
    crate::base::cpu::avx2_call!(row_stats_lanes(roi: &crate::base::image::Roi, s: usize, row: &[f32], mask_row: Option<&[u16]>) -> RowStats)
}

/// [`row_stats`], inlined into each instruction-set level. The sums keep four accumulators (the
/// order every earlier release used, so the printed numbers stay the same); the maximum runs in four
/// lanes ([`sums_and_largest`]), which gives the serial scan's value exactly: the largest of 0 and
/// the pixels, NaN never taken (`v > a` is false for it), and no value ≤ 0 ever replacing the
/// starting +0.
#[inline(always)]
fn row_stats_lanes(roi: &crate::base::image::Roi, s: usize, row: &[f32], mask_row: Option<&[u16]>) -> RowStats {
    // counted in u32 lanes (a row is far shorter than 2^32 pixels): eight to a vector, not four
    let mut r = RowStats { nonfinite: u64::from(row.iter().map(|v| !v.is_finite() as u32).sum::<u32>()), ..RowStats::default() };
    if !roi.slow.contains(&s) {
        return r;
    }
    let cols = roi.fast.clone();
    if let Some(mrow) = mask_row {
        for f in cols {
            if mrow[f] == 0 {
                continue;
            }
            let v = row[f];
            if v as f64 > r.max {
                r.max = v as f64;
                r.max_f = f;
            }
            r.sum += v as f64;
            r.sumsqr += (v * v) as f64;
            r.n += 1;
        }
        return r;
    }
    let col_lo = cols.start;
    let seg = &row[cols];
    let whole = seg.len() - seg.len() % 4;
    let (mut sum, mut sq, mut m) = sums_and_largest(&seg[..whole]);
    for &v in &seg[whole..] {
        sum[0] += v as f64;
        sq[0] += (v * v) as f64;
        m = larger(m, v);
    }
    r.sum = (sum[0] + sum[1]) + (sum[2] + sum[3]);
    r.sumsqr = (sq[0] + sq[1]) + (sq[2] + sq[3]);
    r.n = seg.len() as u64;
    if m > 0.0 {
        r.max = m as f64;
        r.max_f = col_lo + first_equal(seg, m);
    }
    r
}

/// The C's scan for the largest pixel, one step: `v` replaces `a` only when larger (never a NaN, and
/// no value ≤ 0 replaces a starting +0).
#[inline(always)]
fn larger(a: f32, v: f32) -> f32 {
    if v > a {
        v
    } else {
        a
    }
}

/// The four accumulators of [`row_stats`]' sums (pixel j into j mod 4: Σv and Σ(v·v), the square in
/// float, as the C's), and the largest of 0 and the pixels as its serial scan finds it (NaN never
/// taken, no value ≤ 0 replacing the starting +0), of `seg` (a multiple of 4 long). The accumulators
/// are exactly AVX's four double lanes: one pass, each accumulator's adds in order (the compiler left
/// to itself split them into scalar and two-lane pieces, a third of a light series' statistics).
#[inline(always)]
fn sums_and_largest(seg: &[f32]) -> ([f64; 4], [f64; 4], f32) {
    #[cfg(target_arch = "x86_64")]
    if crate::base::cpu::detected_level() >= crate::base::cpu::SimdLevel::Avx2 {
        // SAFETY: the AVX2 level includes AVX
        return unsafe { sums_and_largest_avx(seg) };
    }
    sums_and_largest_portable(seg)
}

/// [`sums_and_largest`] without AVX.
#[inline(always)]
fn sums_and_largest_portable(seg: &[f32]) -> ([f64; 4], [f64; 4], f32) {
    let (mut sum, mut sq) = ([0.0f64; 4], [0.0f64; 4]);
    let mut lanes = [0.0f32; 4];
    for c in seg.chunks_exact(4) {
        for i in 0..4 {
            sum[i] += c[i] as f64;
            sq[i] += (c[i] * c[i]) as f64;
            lanes[i] = larger(lanes[i], c[i]);
        }
    }
    (sum, sq, lanes.iter().fold(0.0f32, |a, &v| larger(a, v)))
}

/// [`sums_and_largest`] in AVX registers; `_mm_max_ps(v, a)` is `if v > a { v } else { a }` lane by
/// lane (a NaN in `v` gives `a`, as does an equal value).
///
/// # Safety
/// AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn sums_and_largest_avx(seg: &[f32]) -> ([f64; 4], [f64; 4], f32) {
    use std::arch::x86_64::*;
    let (mut s, mut q, mut a) = (_mm256_setzero_pd(), _mm256_setzero_pd(), _mm_setzero_ps());
    for c in seg.chunks_exact(4) {
        // SAFETY: four floats at `c`
        let v = unsafe { _mm_loadu_ps(c.as_ptr()) };
        s = _mm256_add_pd(s, _mm256_cvtps_pd(v));
        q = _mm256_add_pd(q, _mm256_cvtps_pd(_mm_mul_ps(v, v)));
        a = _mm_max_ps(v, a);
    }
    let (mut sum, mut sq, mut lanes) = ([0.0f64; 4], [0.0f64; 4], [0.0f32; 4]);
    // SAFETY: four doubles or floats at each destination
    unsafe {
        _mm256_storeu_pd(sum.as_mut_ptr(), s);
        _mm256_storeu_pd(sq.as_mut_ptr(), q);
        _mm_storeu_ps(lanes.as_mut_ptr(), a);
    }
    (sum, sq, lanes.iter().fold(0.0f32, |m, &v| larger(m, v)))
}

/// The index of the first pixel equal to `m` (which `seg` holds): 16 at a time without early exit
/// inside a block (a loop that vectorizes), then within the block.
#[inline(always)]
fn first_equal(seg: &[f32], m: f32) -> usize {
    let block = seg.chunks(16).position(|c| c.iter().fold(false, |a, &v| a | (v == m))).unwrap_or(0);
    block * 16 + seg[block * 16..].iter().position(|&v| v == m).unwrap_or(0)
}

/// [`row_stats`] of every row as the render finishes it (the render's row hook), for
/// [`image_stats_from_rows`]: the first statistics pass made while each row is in cache.
pub struct RowCollector<'a> {
    roi: crate::base::image::Roi,
    fpixels: usize,
    mask: Option<&'a [u16]>,
    rows: Vec<std::sync::Mutex<RowStats>>,
}

impl<'a> RowCollector<'a> {
    /// For an image of `spixels` rows of `fpixels` with `roi` and `mask` (as [`image_stats`] takes them).
    pub fn new(roi: crate::base::image::Roi, fpixels: usize, spixels: usize, mask: Option<&'a [u16]>) -> Self {
        RowCollector { roi, fpixels, mask, rows: (0..spixels).map(|_| Default::default()).collect() }
    }

    /// Row `s` is finished with these pixels (again, if it was rendered again).
    pub fn add(&self, s: usize, row: &[f32]) {
        let fp = self.fpixels;
        let r = row_stats(&self.roi, s, row, self.mask.map(|m| &m[s * fp..(s + 1) * fp]));
        *self.rows[s].lock().unwrap_or_else(|e| e.into_inner()) = r;
    }

    pub fn into_rows(self) -> Vec<RowStats> {
        self.rows.into_iter().map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner())).collect()
    }
}

/// Statistics over the pixels the C rendered (inside the inclusive ROI, not masked); the rmsd pass
/// covers the whole ROI, masked pixels included (checklist Q28). Rows are reduced in parallel and
/// their partial sums combined in row order, so the result does not depend on the thread count.
pub fn image_stats(image: &ImageView, mask: Option<&[u16]>, subpixel_size: f64, oversample: usize) -> ImageStats {
    use rayon::prelude::*;
    let (float, fpixels) = (image.data(), image.fpixels());
    let rows: Vec<RowStats> = (0..image.spixels())
        .into_par_iter()
        .map(|s| row_stats(&image.roi, s, &float[s * fpixels..(s + 1) * fpixels], mask.map(|m| &m[s * fpixels..(s + 1) * fpixels])))
        .collect();
    image_stats_from_rows(image, &rows, subpixel_size, oversample)
}

/// [`image_stats`] from the rows' first-pass sums (`rows[s]` = [`row_stats`] of row `s`): combined in
/// row order, then the rmsd pass over the image.
pub fn image_stats_from_rows(image: &ImageView, rows: &[RowStats], subpixel_size: f64, oversample: usize) -> ImageStats {
    let mut st = first_pass_from_rows(rows, subpixel_size, oversample);
    let devs = rmsd_rows(image, st.mean);
    with_rmsd(&mut st, image, &devs);
    st
}

/// Everything of [`image_stats_from_rows`] but the rmsd (left 0): the rows' sums combined in row
/// order. The rmsd follows from each row's Σ(v − mean)² ([`with_rmsd`]), which a writer reading the
/// whole image anyway can compute ([`DeferredRmsd`]).
pub fn first_pass_from_rows(rows: &[RowStats], subpixel_size: f64, oversample: usize) -> ImageStats {
    let mut st = ImageStats::default();
    let os = oversample as f64;
    for (s, r) in rows.iter().enumerate() {
        // strict '>' in raster order: the first pixel holding the maximum wins, as in the serial C
        if r.max_f != usize::MAX && r.max > st.max_i {
            st.max_i = r.max;
            // Fdet, Sdet of the last sub-pixel the C visited for this pixel
            st.max_i_x = subpixel_size * (r.max_f as f64 * os + (os - 1.0)) + subpixel_size / 2.0;
            st.max_i_y = subpixel_size * (s as f64 * os + (os - 1.0)) + subpixel_size / 2.0;
        }
        st.sum += r.sum;
        st.sumsqr += r.sumsqr;
        st.n += r.n;
    }
    let mut n = st.n.max(1);
    st.mean = st.sum / n as f64;
    if n <= 1 {
        n = 2;
    }
    st.rms = (st.sumsqr / (n - 1) as f64).sqrt();
    st
}

/// The rmsd pass: Σ(v − mean)² of every row of `image` over the ROI's columns (0 outside the ROI's
/// rows), four rows at a time ([`rows_deviation`]), in parallel.
pub fn rmsd_rows(image: &ImageView, mean: f64) -> Vec<f64> {
    use rayon::prelude::*;
    let (float, fpixels, spixels) = (image.data(), image.fpixels(), image.spixels());
    let segment = |s: usize| -> &[f32] {
        if image.roi.slow.contains(&s) {
            &float[s * fpixels + image.roi.fast.start..s * fpixels + image.roi.fast.end]
        } else {
            &[]
        }
    };
    let starts: Vec<usize> = (0..spixels).step_by(ROWS_TOGETHER).collect();
    starts
        .par_iter()
        .flat_map_iter(|&s0| {
            let segs: Vec<&[f32]> = (s0..(s0 + ROWS_TOGETHER).min(spixels)).map(segment).collect();
            rows_deviation(&segs, mean)
        })
        .collect()
}

/// The rmsd from every row's Σ(v − mean)² (`devs[s]` for row `s`, 0 outside the ROI), summed in row
/// order over the ROI's pixels, masked ones included (checklist Q28).
pub fn with_rmsd(st: &mut ImageStats, image: &ImageView, devs: &[f64]) {
    let roi_rows = (0..image.spixels()).filter(|s| image.roi.slow.contains(s)).count();
    let sumsqr: f64 = devs.iter().sum();
    let mut m = (roi_rows * image.roi.fast.len()) as u64;
    if m <= 1 {
        m = 2;
    }
    st.rmsd = (sumsqr / (m - 1) as f64).sqrt();
}

/// The rmsd pass done by a writer that reads every rendered row anyway (the int image's conversion,
/// `run::outputs`), so the image is read once after the render instead of twice: the mean it needs,
/// and each row's Σ(v − mean)² once it has run.
pub struct DeferredRmsd {
    pub mean: f64,
    rows: std::sync::Mutex<Option<Vec<f64>>>,
}

impl DeferredRmsd {
    pub fn new(mean: f64) -> Self {
        DeferredRmsd { mean, rows: std::sync::Mutex::new(None) }
    }

    /// The writer's result: [`rows_deviation`] of every row of the image, in row order.
    pub fn set(&self, devs: Vec<f64>) {
        *self.rows.lock().unwrap_or_else(|e| e.into_inner()) = Some(devs);
    }

    /// `st` with its rmsd: from the writer's rows, or from a pass of its own where the writer did
    /// not run to the end.
    pub fn complete(&self, mut st: ImageStats, image: &ImageView) -> ImageStats {
        let devs = self.rows.lock().unwrap_or_else(|e| e.into_inner()).take();
        let devs = devs.filter(|d| d.len() == image.spixels()).unwrap_or_else(|| rmsd_rows(image, self.mean));
        with_rmsd(&mut st, image, &devs);
        st
    }
}

/// Rows whose deviations are summed side by side: four independent chains of additions instead of
/// one, which a single row's fixed order of additions would leave waiting on each other.
pub const ROWS_TOGETHER: usize = 4;

/// [`row_deviation`] of each of `rows` (any number; an empty row gives 0): rows of equal length four
/// at a time, each in its own accumulators and order, so every row's sum has the same bits as
/// [`row_deviation`] of it alone.
pub fn rows_deviation(rows: &[&[f32]], mean: f64) -> Vec<f64> {
    if let Ok(four) = <[&[f32]; ROWS_TOGETHER]>::try_from(rows) {
        if four.iter().all(|r| r.len() == four[0].len()) {
            return deviation_of_four(four, mean).to_vec();
        }
    }
    rows.iter().map(|r| row_deviation(r, mean)).collect()
}

/// One group of four pixels onto a row's four accumulators: Σ(v − mean)², accumulator j taking the
/// pixels j, j + 4, j + 8, ... (the order of [`row_deviation`] and [`deviation_of_four`]).
#[inline(always)]
fn deviation_step(acc: &mut [f64; 4], group: &[f32], mean: f64) {
    for j in 0..4 {
        let t = group[j] as f64 - mean;
        acc[j] += t * t;
    }
}

/// A row's sum from its accumulators and the pixels left over after its groups of four (onto the
/// first accumulator, in order).
#[inline(always)]
fn deviation_finish(mut acc: [f64; 4], rest: &[f32], mean: f64) -> f64 {
    for &v in rest {
        let t = v as f64 - mean;
        acc[0] += t * t;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// Four rows' [`row_deviation`]s in one loop (their additions interleaved), compiled for AVX2 where
/// the CPU has it.
fn deviation_of_four(rows: [&[f32]; 4], mean: f64) -> [f64; 4] {
    #[inline(always)]
    fn lanes(rows: [&[f32]; 4], mean: f64) -> [f64; 4] {
        let mut acc = [[0.0f64; 4]; 4];
        let [c0, c1, c2, c3] = rows.map(|r| r.chunks_exact(4));
        let rest = [c0.remainder(), c1.remainder(), c2.remainder(), c3.remainder()];
        for (((a, b), c), d) in c0.zip(c1).zip(c2).zip(c3) {
            deviation_step(&mut acc[0], a, mean);
            deviation_step(&mut acc[1], b, mean);
            deviation_step(&mut acc[2], c, mean);
            deviation_step(&mut acc[3], d, mean);
        }
        [0, 1, 2, 3].map(|k| deviation_finish(acc[k], rest[k], mean))
    }
    crate::base::cpu::avx2_call!(lanes(rows: [&[f32]; 4], mean: f64) -> [f64; 4])
}

/// Σ(v − mean)² over a row's rendered pixels, in four accumulators (the C sums in one; the order
/// is the project's since its first release), compiled for AVX2 where the CPU has it.
fn row_deviation(seg: &[f32], mean: f64) -> f64 {
    #[inline(always)]
    fn lanes(seg: &[f32], mean: f64) -> f64 {
        let mut acc = [0.0f64; 4];
        let mut chunks = seg.chunks_exact(4);
        for c in &mut chunks {
            deviation_step(&mut acc, c, mean);
        }
        deviation_finish(acc, chunks.remainder(), mean)
    }
    crate::base::cpu::avx2_call!(lanes(seg: &[f32], mean: f64) -> f64)
}

/// Pearson correlation of two images (f64 accumulation).
pub fn pearson(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len().min(b.len()) as f64;
    if n == 0.0 {
        return f64::NAN;
    }
    let ma = a.iter().map(|&x| x as f64).sum::<f64>() / n;
    let mb = b.iter().map(|&x| x as f64).sum::<f64>() / n;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (x as f64 - ma, y as f64 - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    if saa == 0.0 && sbb == 0.0 {
        return if a == b { 1.0 } else { 0.0 };
    }
    sab / (saa.sqrt() * sbb.sqrt())
}

/// The int image's scale when none is given (`requested` ≤ 0): 55000/max_I, or 1 for an image with
/// no positive pixel (nanoBragg.c, nonBragg.c and noisify.c's rule, written once).
pub fn int_scale(requested: f64, max_i: f64) -> f64 {
    if !(requested <= 0.0) {
        return requested;
    }
    if max_i > 0.0 {
        55000.0 / max_i
    } else {
        1.0
    }
}

/// The PGM preview's scale when none is given (`requested` ≤ 0): 250/(5·rmsd), or the int image's
/// scale for a flat image (the C programs' rule).
pub fn pgm_scale(requested: f64, int_scale: f64, rmsd: f64) -> f64 {
    if !(requested <= 0.0) {
        return requested;
    }
    if rmsd > 0.0 {
        250.0 / (5.0 * rmsd)
    } else {
        int_scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;
    use crate::base::image::Roi;

    #[test]
    fn stats_of_a_tiny_image() {
        let img = [0.0f32, 1.0, 2.0, 3.0];
        let st = image_stats(&ImageView::new(&img, 2, 2, Roi::from_c_bounds([0, 2, 0, 2], 2, 2)), None, 1e-4, 1);
        assert_eq!(st.max_i, 3.0);
        assert_eq!(st.n, 4);
        assert_eq!(st.mean, 1.5);
        assert_abs_diff_eq!(st.rms, (14.0f64 / 3.0).sqrt(), epsilon = 1e-15);
        assert_abs_diff_eq!(st.rmsd, (5.0f64 / 3.0).sqrt(), epsilon = 1e-15);
        assert_abs_diff_eq!(st.max_i_x, 1.5e-4, epsilon = 1e-18);
    }

    #[test]
    fn pearson_identical_is_one() {
        let a = [1.0f32, 2.0, 5.0];
        assert_abs_diff_eq!(pearson(&a, &a), 1.0, epsilon = 1e-15);
    }

    #[test]
    fn automatic_scales_follow_the_c_rule() {
        // nanoBragg.c: intfile_scale = 55000/max_I when not given, 1 for an empty image;
        // pgm_scale = 250/(5·rmsd), the int scale for a flat one
        assert_eq!(int_scale(0.0, 1100.0), 50.0);
        assert_eq!(int_scale(-1.0, 0.0), 1.0);
        assert_eq!(int_scale(2.5, 1100.0), 2.5);
        assert_eq!(pgm_scale(0.0, 7.0, 10.0), 5.0);
        assert_eq!(pgm_scale(0.0, 7.0, 0.0), 7.0);
        assert_eq!(pgm_scale(3.0, 7.0, 10.0), 3.0);
    }

    /// A xorshift64 stream: test inputs that need no crate.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// The row's maximum and its first position as nanoBragg.c's serial raster scan finds them
    /// (L3040-L3060: `if(floatimage[i] > max_I) { max_I = ...; }`, starting from 0), written out
    /// plainly, against the lane reduction: rows with NaN, infinities, negative values, ±0, ties
    /// and ragged lengths; and the sums, in the accumulators' order, the same with AVX and without.
    #[test]
    fn the_lane_maximum_is_the_serial_scans() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        for len in [0usize, 1, 5, 15, 16, 17, 33, 100, 257] {
            for _ in 0..40 {
                let row: Vec<f32> = (0..len)
                    .map(|_| match next() % 9 {
                        0 => f32::NAN,
                        1 => -0.0,
                        2 => 0.0,
                        3 => -((next() % 100) as f32),
                        4 => 42.0,
                        5 => f32::INFINITY,
                        _ => (next() % 1000) as f32 / 7.0,
                    })
                    .collect();
                let (mut max, mut at) = (0.0f32, None);
                for (i, &v) in row.iter().enumerate() {
                    if v > max {
                        max = v;
                        at = Some(i);
                    }
                }
                let roi = crate::base::image::Roi::full(len, 1);
                let r = row_stats(&roi, 0, &row, None);
                assert_eq!(r.max.to_bits(), if at.is_some() { (max as f64).to_bits() } else { 0.0f64.to_bits() }, "{row:?}");
                assert_eq!(r.max_f, at.unwrap_or(usize::MAX), "{row:?}");
                assert_eq!(r.nonfinite, row.iter().filter(|v| !v.is_finite()).count() as u64);
                // the sums: four accumulators over the groups of four, the leftovers onto the first
                let (mut sum, mut sq) = ([0.0f64; 4], [0.0f64; 4]);
                let full = len / 4 * 4;
                for (i, &v) in row.iter().enumerate() {
                    let k = if i < full { i % 4 } else { 0 };
                    sum[k] += v as f64;
                    sq[k] += (v * v) as f64;
                }
                let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
                assert!(same(r.sum, (sum[0] + sum[1]) + (sum[2] + sum[3])) && same(r.sumsqr, (sq[0] + sq[1]) + (sq[2] + sq[3])), "{row:?}");
                let portable = sums_and_largest_portable(&row[..full]);
                #[cfg(target_arch = "x86_64")]
                if std::is_x86_feature_detected!("avx") {
                    // SAFETY: AVX checked just above
                    let avx = unsafe { sums_and_largest_avx(&row[..full]) };
                    assert!((0..4).all(|k| same(avx.0[k], portable.0[k]) && same(avx.1[k], portable.1[k])) && avx.2.to_bits() == portable.2.to_bits(), "{row:?}");
                }
            }
        }
    }

    /// Σ(v − mean)² the way every release summed it: four accumulators over the row's groups of four,
    /// the leftovers onto the first, then (a0 + a1) + (a2 + a3) — written out serially here.
    fn serial_deviation(row: &[f32], mean: f64) -> f64 {
        let mut a = [0.0f64; 4];
        let full = row.len() / 4 * 4;
        for (i, &v) in row[..full].iter().enumerate() {
            a[i % 4] += (v as f64 - mean) * (v as f64 - mean);
        }
        for &v in &row[full..] {
            a[0] += (v as f64 - mean) * (v as f64 - mean);
        }
        (a[0] + a[1]) + (a[2] + a[3])
    }

    #[test]
    fn rows_side_by_side_give_each_rows_own_sum() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
        for len in [0usize, 1, 3, 4, 7, 64, 301] {
            for count in 0..=5 {
                let rows: Vec<Vec<f32>> = (0..count).map(|_| (0..len).map(|_| (next() % 100_000) as f32 / 37.0 * (next() % 3) as f32).collect()).collect();
                let mean = (next() % 1000) as f64 / 13.0;
                let refs: Vec<&[f32]> = rows.iter().map(|r| &r[..]).collect();
                let got = rows_deviation(&refs, mean);
                let want: Vec<f64> = rows.iter().map(|r| serial_deviation(r, mean)).collect();
                assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "len {len}, {count} rows");
            }
        }
        // rows of different lengths (a block across the ROI's first row) one by one
        let (a, b) = ([1.0f32, 2.0, 3.0, 4.0, 5.0], [7.0f32]);
        assert_eq!(rows_deviation(&[&a, &[], &b, &a], 2.0), vec![serial_deviation(&a, 2.0), 0.0, serial_deviation(&b, 2.0), serial_deviation(&a, 2.0)]);
    }

    #[test]
    fn a_deferred_rmsd_is_the_rmsd_pass() {
        let (f, s) = (37usize, 23usize);
        let img: Vec<f32> = (0..f * s).map(|i| ((i * 7919) % 613) as f32 / 11.0).collect();
        let roi = Roi::from_c_bounds([3, 30, 2, 19], f, s);
        let view = ImageView::new(&img, f, s, roi.clone());
        let whole = image_stats(&view, None, 1e-4, 1);
        let rows: Vec<RowStats> = (0..s).map(|r| row_stats(&roi, r, &img[r * f..(r + 1) * f], None)).collect();
        let first = first_pass_from_rows(&rows, 1e-4, 1);
        // the writer's rows (the ROI's columns of the ROI's rows, empty elsewhere), four at a time
        let segs: Vec<&[f32]> = (0..s).map(|r| if roi.slow.contains(&r) { &img[r * f + roi.fast.start..r * f + roi.fast.end] } else { &[][..] }).collect();
        let d = DeferredRmsd::new(first.mean);
        d.set(segs.chunks(ROWS_TOGETHER).flat_map(|c| rows_deviation(c, d.mean)).collect());
        assert_eq!(d.complete(first, &view), whole);
        // and where the writer did not finish, a pass of its own
        assert_eq!(DeferredRmsd::new(first.mean).complete(first, &view), whole);
        // the serial definition: Σ over the ROI of (v − mean)², n − 1
        let n = (roi.slow.len() * roi.fast.len()) as f64;
        let sum: f64 = roi.slow.clone().flat_map(|r| img[r * f + roi.fast.start..r * f + roi.fast.end].iter().map(|&v| (v as f64 - whole.mean).powi(2))).sum();
        assert_abs_diff_eq!(whole.rmsd, (sum / (n - 1.0)).sqrt(), epsilon = 1e-12 * whole.rmsd);
    }
}
