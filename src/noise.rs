//! Poisson noise image, in one of two modes ([`NoiseMode`]).
//!
//! * `c` (the default): as the C's serial loop. The noise stream is one long ran1 sequence consumed in
//!   raster order, so this loop stays serial: any other order would change every pixel after the
//!   first difference. Bit-identical to nanoBragg's noise image.
//! * `fast`: a counter-based generator (ChaCha8 from `rand_chacha`, one stream per row keyed by the
//!   seed), parallel over rows, the same for a seed at any thread count; the same distributions as
//!   the C's `poidev` (exact Poisson up to a mean of 1e6, the C's Gaussian approximation above), but
//!   not the C's draws. See [`noise_image_fast`].
use crate::rng::NrRandom;
use rand_chacha::rand_core::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Poisson, StandardNormal};
use rayon::prelude::*;

/// Which random numbers make the noise image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoiseMode {
    /// The C's single ran1 stream in raster order: bit-identical to nanoBragg (serial).
    #[default]
    C,
    /// Counter-based (ChaCha8, one stream per row), parallel over rows: same distributions, not
    /// C-identical, the same image for a seed at any thread count.
    Fast,
}

impl NoiseMode {
    pub fn name(self) -> &'static str {
        match self {
            NoiseMode::C => "c",
            NoiseMode::Fast => "fast",
        }
    }
    pub fn parse(s: &str) -> Option<NoiseMode> {
        match s.to_ascii_lowercase().as_str() {
            "c" | "serial" | "exact" => Some(NoiseMode::C),
            "fast" | "parallel" => Some(NoiseMode::Fast),
            _ => None,
        }
    }
}

/// Result of the noise stage.
pub struct NoiseImage {
    pub pixels: Vec<u16>,
    /// Sum of the Poisson deviates (printed as "%.0f photons on noise image").
    pub photons: f64,
    pub overloads: u64,
}

/// `roi` = inclusive [xmin, xmax, ymin, ymax] in pixels (x = fast), as resolved by the C.
///
/// Row-major over `spixels` rows of `fpixels`; only pixels inside the ROI draw a deviate (masked ROI
/// pixels hold 0 in `float` and still draw, as in the C); the rest stay 0. Each pixel is
/// `poidev(mean) + adc_offset` in double, capped at 65535 (counted as an overload) and truncated to
/// u16. A value below 0 (possible only with a negative `-adc`) is clamped to 0, where the C's
/// conversion would be undefined.
pub fn noise_image(
    rng: &mut NrRandom,
    seed: &mut i64,
    float: &[f32],
    fpixels: usize,
    spixels: usize,
    roi: [i64; 4],
    adc_offset: f64,
) -> NoiseImage {
    let mut pixels = vec![0u16; fpixels * spixels];
    let (photons, overloads) = noise_rows(rng, seed, float, fpixels, spixels, roi, adc_offset, |s, row, _| {
        pixels[s * fpixels..(s + 1) * fpixels].copy_from_slice(row);
        Ok(())
    })
    .expect("collecting rows cannot fail");
    NoiseImage { pixels, photons, overloads }
}

/// The noise image's draws as 32-bit counts (deviate + `adc_offset`, without the SMV's 65535 cap):
/// the CBF and NeXus images. The same random stream as [`noise_image`] for the same RNG state.
#[allow(clippy::too_many_arguments)]
pub fn noise_counts(rng: &mut NrRandom, seed: &mut i64, float: &[f32], fpixels: usize, spixels: usize, roi: [i64; 4], adc_offset: f64) -> Vec<i32> {
    let mut counts = Vec::with_capacity(fpixels * spixels);
    noise_rows(rng, seed, float, fpixels, spixels, roi, adc_offset, |_, _, row32| {
        counts.extend_from_slice(row32);
        Ok(())
    })
    .expect("collecting rows cannot fail");
    counts
}

/// Generate the noise image row by row into `w` (after the header, which the caller writes):
/// returns (photons, overloads).
#[allow(clippy::too_many_arguments)]
pub fn write_noise_rows(
    w: &mut (dyn std::io::Write + Send),
    rng: &mut NrRandom,
    seed: &mut i64,
    float: &[f32],
    fpixels: usize,
    spixels: usize,
    roi: [i64; 4],
    adc_offset: f64,
) -> std::io::Result<(f64, u64)> {
    let mut io_error = None;
    let r = noise_rows(rng, seed, float, fpixels, spixels, roi, adc_offset, |_, row, _| {
        crate::io::write_le(w, row).map_err(|e| {
            let msg = e.to_string();
            io_error = Some(e);
            crate::Error::Output { path: Default::default(), reason: msg }
        })
    });
    match (r, io_error) {
        (Ok(c), _) => Ok(c),
        (Err(_), Some(e)) => Err(e),
        (Err(e), None) => Err(std::io::Error::other(e.to_string())),
    }
}

/// Rows per block whose exp(-mean) values are computed in parallel ahead of the serial draws.
const BLOCK_ROWS: usize = 16;

/// The serial noise loop, handing each finished row to `sink` in order. The only work that does not
/// depend on the random stream, poidev's exp(-mean) for means below 12, is computed for the next block
/// of rows on another thread while this block draws its deviates.
#[allow(clippy::too_many_arguments)]
fn noise_rows(
    rng: &mut NrRandom,
    seed: &mut i64,
    float: &[f32],
    fpixels: usize,
    spixels: usize,
    roi: [i64; 4],
    adc_offset: f64,
    mut sink: impl FnMut(usize, &[u16], &[i32]) -> crate::Result<()> + Send,
) -> crate::Result<(f64, u64)> {
    let n = fpixels * spixels;
    assert!(float.len() >= n, "float image has {} values, expected {}x{}", float.len(), fpixels, spixels);
    let [xmin, xmax, ymin, ymax] = roi;
    let exp_block = |b: usize| -> Vec<f32> {
        use rayon::prelude::*;
        let lo = (b * BLOCK_ROWS * fpixels).min(n);
        let hi = ((b + 1) * BLOCK_ROWS * fpixels).min(n);
        // `g=exp(-xm)`: float negation, exp in double, stored as float (only used for means < 12)
        float[lo..hi].par_iter().map(|&xm| if (xm as f64) < 12.0 { ((-xm) as f64).exp() as f32 } else { 0.0 }).collect()
    };
    let blocks = spixels.div_ceil(BLOCK_ROWS);
    let mut photons = 0.0f64;
    let mut overloads = 0u64;
    let mut row = vec![0u16; fpixels];
    let mut row32 = vec![0i32; fpixels];
    let mut current = if blocks > 0 { exp_block(0) } else { Vec::new() };
    for b in 0..blocks {
        let (next, drawn) = rayon::join(
            || if b + 1 < blocks { exp_block(b + 1) } else { Vec::new() },
            || -> crate::Result<()> {
                for s in b * BLOCK_ROWS..((b + 1) * BLOCK_ROWS).min(spixels) {
                    row.fill(0);
                    row32.fill(0);
                    let si = s as i64;
                    if si >= ymin && si <= ymax {
                        for f in 0..fpixels {
                            let fi = f as i64;
                            if fi < xmin || fi > xmax {
                                continue;
                            }
                            let xm = float[s * fpixels + f];
                            let dev = if (xm as f64) < 12.0 {
                                rng.poidev_small(xm, current[(s - b * BLOCK_ROWS) * fpixels + f], seed)
                            } else {
                                rng.poidev(xm, seed)
                            };
                            let mut test = dev as f64;
                            photons += test;
                            test += adc_offset;
                            // uncapped 32-bit count (saturating; NaN becomes 0)
                            row32[f] = test as i32;
                            if test > 65535.0 {
                                test = 65535.0;
                                overloads += 1;
                            }
                            // `as` saturates: negatives (and NaN) become 0, the rest truncate like the C cast.
                            row[f] = test as u16;
                        }
                    }
                    sink(s, &row, &row32)?;
                }
                Ok(())
            },
        );
        drawn?;
        current = next;
    }
    Ok((photons, overloads))
}

/// The generator of row `s` in fast mode: ChaCha8 keyed by the seed, stream = row index. Any row's
/// draws can be made on its own, so rows run in parallel and the image does not depend on how they
/// are scheduled.
fn row_rng(seed: i64, s: usize) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed as u64);
    rng.set_stream(s as u64);
    rng
}

/// One fast-mode deviate for mean `xm`, with the C's `poidev` regimes: a mean above 1e6 gives the
/// C's Gaussian approximation `xm + sqrt(xm)·N(0,1)` (not rounded, as the C's), a mean up to 1e6 an
/// exact Poisson deviate: below 12 by inversion of the cumulative distribution (one uniform), from 12
/// by `rand_distr`'s Poisson sampler. A mean that is zero, negative or NaN gives 0 (the C's would
/// give 0 for a mean ≤ 0 and never return for NaN).
#[inline(always)]
pub fn fast_deviate(rng: &mut ChaCha8Rng, xm: f32) -> f64 {
    let m = xm as f64;
    if m > 0.0 && m < 12.0 {
        // inversion: the smallest k with P(X <= k) >= u, with u uniform in [0, 1) (53 bits)
        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        // P(X = 0) = exp(-m) is at least its Taylor polynomial of degree 3 (m >= 0): most pixels
        // (mean << 1) are decided as 0 here, inline and without computing the exponential
        if u <= 1.0 - m + 0.5 * m * m - m * m * m * (1.0 / 6.0) {
            return 0.0;
        }
        return invert_small(u, m);
    }
    other_deviate(rng, m)
}

/// The rest of the inversion for a mean below 12 (out of line: rare for the usual means << 1).
#[inline(never)]
fn invert_small(u: f64, m: f64) -> f64 {
    let mut p = (-m).exp();
    let mut cdf = p;
    let mut k = 0u32;
    while u > cdf {
        k += 1;
        p *= m / k as f64;
        if p == 0.0 {
            break; // u is beyond the last representable step of the CDF (probability < 1e-300)
        }
        cdf += p;
    }
    k as f64
}

/// Means that are zero, negative or NaN (0), from 12 to 1e6 (Poisson by `rand_distr`) and above
/// 1e6 (the C's Gaussian approximation).
#[inline(never)]
fn other_deviate(rng: &mut ChaCha8Rng, m: f64) -> f64 {
    if !(m > 0.0) {
        return 0.0;
    }
    if m > 1.0e6 {
        let g: f64 = StandardNormal.sample(rng);
        // the C: `return xm+sqrt(xm)*gaussdev(idum);` in double, returned as float
        return (m + m.sqrt() * g) as f32 as f64;
    }
    match Poisson::new(m) {
        Ok(d) => d.sample(rng),
        Err(_) => 0.0,
    }
}

/// The fast-mode noise image (see [`NoiseMode::Fast`]): rows in parallel, row `s` drawing from its
/// own ChaCha8 stream (key from `seed`, stream `s`) for the ROI pixels in order. Pixel values,
/// overloads and the photon sum as in [`noise_image`]; the photon sum is added in row order, so it
/// too is independent of the thread count.
pub fn noise_image_fast(seed: i64, float: &[f32], fpixels: usize, spixels: usize, roi: [i64; 4], adc_offset: f64) -> NoiseImage {
    let mut pixels = vec![0u16; fpixels * spixels];
    let rows = fast_rows(seed, float, fpixels, spixels, roi, &mut pixels, |v| {
        // `as` saturates: negatives (and NaN) become 0, the rest truncate like the C cast
        if v > 65535.0 {
            (65535, true)
        } else {
            (v as u16, false)
        }
    }, adc_offset);
    let photons = rows.iter().map(|r| r.0).sum();
    let overloads = rows.iter().map(|r| r.1).sum();
    NoiseImage { pixels, photons, overloads }
}

/// The fast-mode draws as 32-bit counts (deviate + `adc_offset`, saturating, no 65535 cap): the
/// CBF and NeXus images. The same draws as [`noise_image_fast`] for the same seed.
pub fn noise_counts_fast(seed: i64, float: &[f32], fpixels: usize, spixels: usize, roi: [i64; 4], adc_offset: f64) -> Vec<i32> {
    let mut counts = vec![0i32; fpixels * spixels];
    fast_rows(seed, float, fpixels, spixels, roi, &mut counts, |v| (v as i32, false), adc_offset);
    counts
}

/// Fill `out` (zeroed by the caller) row by row in parallel with `convert(deviate + adc_offset)` inside the ROI (0
/// elsewhere); returns (photons, overloads) per row.
#[allow(clippy::too_many_arguments)]
fn fast_rows<P: Copy + Default + Send>(
    seed: i64,
    float: &[f32],
    fpixels: usize,
    spixels: usize,
    roi: [i64; 4],
    out: &mut [P],
    convert: impl Fn(f64) -> (P, bool) + Sync,
    adc_offset: f64,
) -> Vec<(f64, u64)> {
    let n = fpixels * spixels;
    assert!(float.len() >= n, "float image has {} values, expected {}x{}", float.len(), fpixels, spixels);
    if fpixels == 0 {
        return Vec::new();
    }
    let [xmin, xmax, ymin, ymax] = roi;
    out.par_chunks_mut(fpixels)
        .enumerate()
        .map(|(s, row)| {
            let si = s as i64;
            if si < ymin || si > ymax {
                return (0.0, 0);
            }
            let mut rng = row_rng(seed, s);
            let (mut photons, mut overloads) = (0.0, 0u64);
            let src = &float[s * fpixels..(s + 1) * fpixels];
            for (f, (px, &xm)) in row.iter_mut().zip(src).enumerate() {
                let fi = f as i64;
                if fi < xmin || fi > xmax {
                    continue;
                }
                let dev = fast_deviate(&mut rng, xm);
                photons += dev;
                let (v, over) = convert(dev + adc_offset);
                *px = v;
                overloads += over as u64;
            }
            (photons, overloads)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_roi_pixels_draw_in_raster_order() {
        let (fp, sp) = (5usize, 4usize);
        let float: Vec<f32> = (0..fp * sp).map(|i| 2.0 + i as f32 * 0.5).collect();
        let roi = [1, 3, 1, 2];
        let mut rng = NrRandom::new();
        let mut seed = -42i64;
        let img = noise_image(&mut rng, &mut seed, &float, fp, sp, roi, 40.0);

        // Replaying the same draws pixel by pixel must give the same image.
        let mut rng2 = NrRandom::new();
        let mut seed2 = -42i64;
        let mut sum = 0.0;
        for s in 0..sp {
            for f in 0..fp {
                let idx = s * fp + f;
                let inside = (1..=3).contains(&f) && (1..=2).contains(&s);
                if inside {
                    let v = rng2.poidev(float[idx], &mut seed2) as f64;
                    sum += v;
                    assert_eq!(img.pixels[idx], (v + 40.0) as u16);
                } else {
                    assert_eq!(img.pixels[idx], 0);
                }
            }
        }
        assert_eq!(img.photons, sum);
        assert_eq!(seed, seed2);
        assert_eq!(img.overloads, 0);
    }

    #[test]
    fn overloads_cap_and_negative_clamp() {
        let float = [1.0e7f32, 0.0];
        let mut rng = NrRandom::new();
        let mut seed = -7i64;
        let img = noise_image(&mut rng, &mut seed, &float, 2, 1, [0, 1, 0, 0], -10.0);
        assert_eq!(img.pixels, [65535, 0]);
        assert_eq!(img.overloads, 1);
    }
}
