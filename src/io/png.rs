//! PNG preview of an image (not in the C).
//!
//! Meant for a quick look at where the spots are, like ADXV's default display: 8-bit grey on a white
//! background, spots dark. A diffraction image is a smooth background (air, water ring, solvent) with
//! spots on it, and spans several decades; a map of the raw values either shows the water ring and
//! hides the spots under it, or the reverse. So each pixel's grey level is the log of its *excess over
//! the local background* (the median of its tile, interpolated between tiles, see [`local_background`]),
//! between a floor (a few robust standard deviations of the excess: what the background's own
//! variation reaches) and a ceiling (the 99.9th percentile of the excess, so a handful of hot pixels do
//! not wash out every other spot). Floor and ceiling are written into the file as `tEXt` chunks
//! (`nanobragg:floor`, `nanobragg:ceiling`, in the image's units above the background), with a
//! `Description` of the map; `--png-legend` adds a scale strip below the image's rows.

use super::atomic::write_atomic;
use crate::base::c::printf::g;
use crate::{Error, Result};
use std::path::Path;

/// Side of the tiles whose medians make the local background: small against a water ring's width,
/// large against a spot.
const TILE: usize = 32;
/// The floor, in robust standard deviations (1.4826 × median absolute deviation) of the excess.
const FLOOR_SIGMAS: f64 = 6.0;
/// Rows of the `--png-legend` strip: a gap, the grey ramp, decade ticks.
const LEGEND_ROWS: usize = 24;

/// The median of the finite values of `v` (reordered); `None` when there are none.
fn median(v: &mut Vec<f32>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    let mid = (v.len() - 1) / 2;
    Some(*v.select_nth_unstable_by(mid, |a, b| a.total_cmp(b)).1 as f64)
}

/// The smooth background under the spots: the median of each `TILE`×`TILE` tile (spots are few in
/// any tile, so they do not move it), bilinearly interpolated between tile centres.
pub fn local_background(image: &[f32], fpixels: usize, spixels: usize) -> Vec<f32> {
    let (tf, ts) = (fpixels.div_ceil(TILE).max(1), spixels.div_ceil(TILE).max(1));
    let mut tiles = vec![0.0f64; tf * ts];
    let mut buf = Vec::with_capacity(TILE * TILE);
    for ty in 0..ts {
        for tx in 0..tf {
            buf.clear();
            for s in ty * TILE..((ty + 1) * TILE).min(spixels) {
                buf.extend_from_slice(&image[s * fpixels + tx * TILE..s * fpixels + ((tx + 1) * TILE).min(fpixels)]);
            }
            tiles[ty * tf + tx] = median(&mut buf).unwrap_or(0.0);
        }
    }
    // tile centre (in tile units) of pixel p: (p + 0.5)/TILE - 0.5, clamped to the outer centres
    let coord = |p: usize, n: usize| -> (usize, usize, f64) {
        let x = ((p as f64 + 0.5) / TILE as f64 - 0.5).clamp(0.0, (n - 1) as f64);
        let i = (x.floor() as usize).min(n - 1);
        (i, (i + 1).min(n - 1), x - i as f64)
    };
    let mut bg = vec![0.0f32; fpixels * spixels];
    for s in 0..spixels {
        let (y0, y1, wy) = coord(s, ts);
        for f in 0..fpixels {
            let (x0, x1, wx) = coord(f, tf);
            let t = |y: usize, x: usize| tiles[y * tf + x];
            let top = t(y0, x0) * (1.0 - wx) + t(y0, x1) * wx;
            let bottom = t(y1, x0) * (1.0 - wx) + t(y1, x1) * wx;
            bg[s * fpixels + f] = (top * (1.0 - wy) + bottom * wy) as f32;
        }
    }
    bg
}

/// The grey map: pixels' excess over the local background, and its floor and ceiling.
pub struct Preview {
    pub grey: Vec<u8>,
    pub floor: f64,
    pub ceiling: f64,
}

/// (floor, ceiling) of the excess: floor = median + `FLOOR_SIGMAS` robust σ (and above 0), ceiling =
/// the 99.9th percentile of the pixels above the floor (the spots, however few); `None` when no pixel
/// rises above the floor.
fn levels(excess: &[f32]) -> Option<(f64, f64)> {
    let mut v: Vec<f32> = excess.to_vec();
    let med = median(&mut v)?;
    let mut dev: Vec<f32> = v.iter().map(|x| (*x as f64 - med).abs() as f32).collect();
    let sigma = 1.4826 * median(&mut dev).unwrap_or(0.0);
    let floor = (med + FLOOR_SIGMAS * sigma).max(f64::MIN_POSITIVE);
    let mut above: Vec<f32> = v.into_iter().filter(|x| *x as f64 > floor).collect();
    let n = above.len();
    if n == 0 {
        return None;
    }
    let hi_idx = ((n as f64 * 0.999).ceil() as usize).clamp(1, n) - 1;
    let ceiling = *above.select_nth_unstable_by(hi_idx, |a, b| a.total_cmp(b)).1 as f64;
    Some((floor, ceiling.max(floor * 1.000001)))
}

/// Grey levels (255 = white = at or below the floor, 0 = black = at or above the ceiling, log between).
pub fn preview(image: &[f32], fpixels: usize, spixels: usize) -> Preview {
    let bg = local_background(image, fpixels, spixels);
    let excess: Vec<f32> = image.iter().zip(&bg).map(|(x, b)| x - b).collect();
    let Some((floor, ceiling)) = levels(&excess) else {
        return Preview { grey: vec![255; image.len()], floor: 0.0, ceiling: 0.0 };
    };
    let span = (ceiling / floor).ln();
    let grey = excess
        .iter()
        .map(|&e| {
            let e = e as f64;
            if e.is_nan() || e <= floor {
                255
            } else if e >= ceiling {
                0
            } else {
                (255.0 * (1.0 - (e / floor).ln() / span)).round() as u8
            }
        })
        .collect();
    Preview { grey, floor, ceiling }
}

/// The `--png-legend` strip, `fpixels` wide: a white gap, the grey ramp from the floor (left) to the
/// ceiling (right), and a tick at each power of ten in between.
fn legend_rows(fpixels: usize, floor: f64, ceiling: f64) -> Vec<u8> {
    let mut rows = vec![255u8; fpixels * LEGEND_ROWS];
    let ramp = |f: usize| (255.0 * (1.0 - f as f64 / (fpixels.max(2) - 1) as f64)).round() as u8;
    for r in 4..16 {
        for f in 0..fpixels {
            rows[r * fpixels + f] = ramp(f);
        }
    }
    if floor > 0.0 && ceiling > floor {
        let span = (ceiling / floor).ln();
        let mut decade = 10f64.powf(floor.log10().ceil());
        while decade <= ceiling {
            let f = (((decade / floor).ln() / span) * (fpixels.max(2) - 1) as f64).round() as usize;
            for r in 17..23 {
                rows[r * fpixels + f.min(fpixels - 1)] = 0;
            }
            decade *= 10.0;
        }
    }
    rows
}

/// The PNG bytes of the preview of `image` (slow-major, `fpixels` × `spixels`), with the scale strip
/// below it when `legend`.
pub fn png_bytes(image: &[f32], fpixels: usize, spixels: usize, legend: bool) -> Result<Vec<u8>> {
    let err = |reason: String| Error::Output { path: Default::default(), reason };
    if image.len() != fpixels * spixels {
        return Err(err(format!("{} pixels for a {fpixels}x{spixels} image", image.len())));
    }
    let rows = spixels + if legend { LEGEND_ROWS } else { 0 };
    let (w, h) = match (u32::try_from(fpixels), u32::try_from(rows)) {
        (Ok(w), Ok(h)) if w > 0 && spixels > 0 => (w, h),
        _ => return Err(err(format!("cannot make a {fpixels}x{spixels} PNG"))),
    };
    let p = preview(image, fpixels, spixels);
    let mut grey = p.grey;
    if legend {
        grey.extend(legend_rows(fpixels, p.floor, p.ceiling));
    }
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, w, h);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Eight);
        let description = format!(
            "nanobragg-rs preview: grey = log of each pixel's excess over the local background (median of {TILE}x{TILE} tiles), \
             white at or below nanobragg:floor, black at or above nanobragg:ceiling (image units){}",
            if legend { format!("; the last {LEGEND_ROWS} rows are the scale, floor at the left, ceiling at the right, a tick per decade") } else { String::new() }
        );
        for (k, v) in [("nanobragg:floor", g(p.floor)), ("nanobragg:ceiling", g(p.ceiling)), ("Description", description)] {
            enc.add_text_chunk(k.to_string(), v).map_err(|e| err(e.to_string()))?;
        }
        let mut wr = enc.write_header().map_err(|e| err(e.to_string()))?;
        wr.write_image_data(&grey).map_err(|e| err(e.to_string()))?;
        wr.finish().map_err(|e| err(e.to_string()))?;
    }
    Ok(bytes)
}

/// Write an 8-bit greyscale PNG preview of the image, atomically.
pub fn write_png_preview(path: &Path, image: &[f32], fpixels: usize, spixels: usize, legend: bool) -> Result<()> {
    write_atomic(path, &png_preview_bytes(path, image, fpixels, spixels, legend)?)
}

/// [`png_bytes`], an error naming `path`.
pub fn png_preview_bytes(path: &Path, image: &[f32], fpixels: usize, spixels: usize, legend: bool) -> Result<Vec<u8>> {
    png_bytes(image, fpixels, spixels, legend).map_err(|e| match e {
        Error::Output { reason, .. } => Error::Output { path: path.to_path_buf(), reason },
        e => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 128² image: a smooth radial background (a "water ring" rising to 50, as wide as a few tiles)
    /// with three weaker spots on it.
    fn ring_with_spots() -> (Vec<f32>, Vec<(usize, usize)>) {
        let n = 128;
        let mut img: Vec<f32> = (0..n * n)
            .map(|i| {
                let (f, s) = ((i % n) as f64 - 64.0, (i / n) as f64 - 64.0);
                let r = (f * f + s * s).sqrt();
                (1.0 + 50.0 * (-((r - 40.0) / 60.0).powi(2)).exp()) as f32
            })
            .collect();
        let spots = vec![(10, 10), (64, 104), (104, 64)]; // (64, 104) and (104, 64) sit on the ring
        for &(f, s) in &spots {
            img[s * n + f] += 30.0;
        }
        (img, spots)
    }

    #[test]
    fn spots_on_a_ring_are_dark_and_the_ring_is_white() {
        let (img, spots) = ring_with_spots();
        let p = preview(&img, 128, 128);
        for &(f, s) in &spots {
            assert!(p.grey[s * 128 + f] < 160, "spot at {f},{s}: grey {}", p.grey[s * 128 + f]);
        }
        let mut bg: Vec<u8> = p.grey.iter().enumerate().filter(|(i, _)| !spots.iter().any(|&(f, s)| s * 128 + f == *i)).map(|(_, g)| *g).collect();
        bg.sort_unstable();
        let darkest_percent = bg[bg.len() / 100];
        assert!(spots.iter().all(|&(f, s)| p.grey[s * 128 + f] < darkest_percent), "spots darker than 99 % of the background");
        assert!(p.floor > 0.0 && p.ceiling > p.floor);
    }

    #[test]
    fn flat_or_empty_images_are_white() {
        assert!(preview(&[5.0; 64], 8, 8).grey.iter().all(|&x| x == 255));
        assert!(preview(&[0.0, -1.0, f32::NAN, 0.0], 2, 2).grey.iter().all(|&x| x == 255));
        assert!(preview(&[], 0, 0).grey.is_empty());
    }

    #[test]
    fn png_dimensions_text_chunks_and_legend() {
        let d = tempfile::tempdir().unwrap();
        let (img, _) = ring_with_spots();
        for legend in [false, true] {
            let p = d.path().join("p.png");
            write_png_preview(&p, &img, 128, 128, legend).unwrap();
            let dec = png::Decoder::new(std::fs::File::open(&p).unwrap());
            let mut r = dec.read_info().unwrap();
            let texts: Vec<(String, String)> = r.info().uncompressed_latin1_text.iter().map(|t| (t.keyword.clone(), t.text.clone())).collect();
            let mut buf = vec![0; r.output_buffer_size()];
            let info = r.next_frame(&mut buf).unwrap();
            let rows = if legend { 128 + LEGEND_ROWS as u32 } else { 128 };
            assert_eq!((info.width, info.height, info.color_type, info.bit_depth), (128, rows, png::ColorType::Grayscale, png::BitDepth::Eight));
            // the image's rows are the same with or without the legend
            assert_eq!(&buf[..128 * 128], &preview(&img, 128, 128).grey[..]);
            for k in ["nanobragg:floor", "nanobragg:ceiling", "Description"] {
                assert!(texts.iter().any(|(kk, v)| kk == k && !v.is_empty()), "{k} in {texts:?}");
            }
        }
        assert!(write_png_preview(&d.path().join("z.png"), &img, 0, 0, false).is_err());
    }
}
