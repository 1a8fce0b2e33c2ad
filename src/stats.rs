//! Image statistics with the C's definitions (nanoBragg.c L3040-L3130), reduced serially in raster
//! order so the numbers do not depend on the thread count.

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

/// `rendered(f, s)` says whether the C rendered the pixel (inside the ROI and not masked);
/// `roi(f, s)` whether it lies inside the ROI (the rmsd pass includes masked pixels, checklist Q28).
pub fn image_stats(
    float: &[f32],
    fpixels: usize,
    spixels: usize,
    roi: [i64; 4],
    mask: Option<&[u16]>,
    subpixel_size: f64,
    oversample: usize,
) -> ImageStats {
    let in_roi = |f: usize, s: usize| {
        let (f, s) = (f as i64, s as i64);
        !(f < roi[0] || f > roi[1] || s < roi[2] || s > roi[3])
    };
    let mut st = ImageStats::default();
    let os = oversample as f64;
    for s in 0..spixels {
        for f in 0..fpixels {
            if !in_roi(f, s) {
                continue;
            }
            let idx = s * fpixels + f;
            if let Some(m) = mask {
                if m[idx] == 0 {
                    continue;
                }
            }
            let v = float[idx];
            if v as f64 > st.max_i {
                st.max_i = v as f64;
                // Fdet, Sdet of the last sub-pixel the C visited for this pixel
                st.max_i_x = subpixel_size * (f as f64 * os + (os - 1.0)) + subpixel_size / 2.0;
                st.max_i_y = subpixel_size * (s as f64 * os + (os - 1.0)) + subpixel_size / 2.0;
            }
            st.sum += v as f64;
            // float*float is a float product in the C
            st.sumsqr += (v * v) as f64;
            st.n += 1;
        }
    }
    let mut n = st.n.max(1);
    st.mean = st.sum / n as f64;
    if n <= 1 {
        n = 2;
    }
    st.rms = (st.sumsqr / (n - 1) as f64).sqrt();
    let mut sumsqr = 0.0;
    let mut m: u64 = 0;
    for s in 0..spixels {
        for f in 0..fpixels {
            if !in_roi(f, s) {
                continue;
            }
            let t = float[s * fpixels + f] as f64 - st.mean;
            sumsqr += t * t;
            m += 1;
        }
    }
    if m <= 1 {
        m = 2;
    }
    st.rmsd = (sumsqr / (m - 1) as f64).sqrt();
    st
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_a_tiny_image() {
        let img = [0.0f32, 1.0, 2.0, 3.0];
        let st = image_stats(&img, 2, 2, [0, 2, 0, 2], None, 1e-4, 1);
        assert_eq!(st.max_i, 3.0);
        assert_eq!(st.n, 4);
        assert_eq!(st.mean, 1.5);
        assert!((st.rms - (14.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert!((st.rmsd - (5.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert!((st.max_i_x - 1.5e-4).abs() < 1e-18);
    }

    #[test]
    fn pearson_identical_is_one() {
        let a = [1.0f32, 2.0, 5.0];
        assert!((pearson(&a, &a) - 1.0).abs() < 1e-15);
    }
}
