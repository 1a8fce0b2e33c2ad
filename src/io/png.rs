//! PNG preview of the float image (not in the C).
//!
//! Meant for a quick look, like ADXV's default display: 8-bit grey, inverted (0 = white, strong =
//! black). Diffraction images span several decades with a few very bright Bragg pixels, so a linear
//! map would show only the brightest spots; instead the grey level is logarithmic between a floor
//! (the median of the positive pixels, i.e. the typical background) and a ceiling (the 99.9th
//! percentile of positive pixels, so a handful of hot pixels do not wash out everything else).

use super::atomic::write_atomic;
use crate::{Error, Result};
use std::path::Path;

/// (floor, ceiling) of the grey map, from the positive finite pixels; None when there are none.
fn levels(float: &[f32]) -> Option<(f64, f64)> {
    let mut v: Vec<f32> = float.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect();
    if v.is_empty() {
        return None;
    }
    let n = v.len();
    let cmp = |a: &f32, b: &f32| a.total_cmp(b);
    let hi_idx = ((n as f64 * 0.999).ceil() as usize).clamp(1, n) - 1;
    let hi = *v.select_nth_unstable_by(hi_idx, cmp).1 as f64;
    let lo = *v[..=hi_idx].select_nth_unstable_by(((n - 1) / 2).min(hi_idx), cmp).1 as f64;
    Some((lo, hi))
}

/// Grey levels (0 = black) for the preview.
pub fn preview_pixels(float: &[f32]) -> Vec<u8> {
    let Some((lo, hi)) = levels(float) else {
        return vec![255; float.len()];
    };
    let span = (hi / lo).ln();
    float
        .iter()
        .map(|&x| {
            let x = x as f64;
            if x.is_nan() || x <= lo {
                255
            } else if x >= hi || span <= 0.0 {
                0
            } else {
                let t = (x / lo).ln() / span; // 0..1
                (255.0 * (1.0 - t)).round() as u8
            }
        })
        .collect()
}

/// The PNG bytes of the preview.
pub fn png_bytes(float: &[f32], fpixels: usize, spixels: usize) -> Result<Vec<u8>> {
    let err = |reason: String| Error::Output { path: Default::default(), reason };
    if float.len() != fpixels * spixels {
        return Err(err(format!("{} pixels for a {fpixels}x{spixels} image", float.len())));
    }
    let (w, h) = match (u32::try_from(fpixels), u32::try_from(spixels)) {
        (Ok(w), Ok(h)) if w > 0 && h > 0 => (w, h),
        _ => return Err(err(format!("cannot make a {fpixels}x{spixels} PNG"))),
    };
    let grey = preview_pixels(float);
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, w, h);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(|e| err(e.to_string()))?;
        wr.write_image_data(&grey).map_err(|e| err(e.to_string()))?;
        wr.finish().map_err(|e| err(e.to_string()))?;
    }
    Ok(bytes)
}

/// Write an 8-bit greyscale PNG preview of the float image, atomically.
pub fn write_png_preview(path: &Path, float: &[f32], fpixels: usize, spixels: usize) -> Result<()> {
    write_atomic(path, &png_preview_bytes(path, float, fpixels, spixels)?)
}

/// [`png_bytes`], an error naming `path`.
pub fn png_preview_bytes(path: &Path, float: &[f32], fpixels: usize, spixels: usize) -> Result<Vec<u8>> {
    png_bytes(float, fpixels, spixels).map_err(|e| match e {
        Error::Output { reason, .. } => Error::Output { path: path.to_path_buf(), reason },
        e => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grey_map() {
        // background 1, one spot 1000, zeros
        let mut f = vec![1.0f32; 2000];
        f[0] = 0.0;
        f[1..=8].fill(1000.0);
        f[9] = 10.0;
        let g = preview_pixels(&f);
        assert_eq!(g[0], 255, "zero is white");
        assert_eq!(g[10], 255, "background is white");
        assert_eq!(g[1], 0, "spot is black");
        assert_eq!(g[9], 170, "one decade of three is two thirds white");
        assert!(preview_pixels(&[0.0, -1.0, f32::NAN]).iter().all(|&x| x == 255));
        assert_eq!(preview_pixels(&[5.0, 5.0]), vec![255, 255]);
        assert_eq!(preview_pixels(&[0.0, 3.0]), vec![255, 255]);
        assert_eq!(preview_pixels(&[]), Vec::<u8>::new());
        assert_eq!(preview_pixels(&[1.0, 2.0, f32::INFINITY]), vec![255, 0, 0]);
    }

    #[test]
    fn png_roundtrip_dimensions() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.png");
        let f: Vec<f32> = (0..30 * 20).map(|i| (i % 17) as f32).collect();
        write_png_preview(&p, &f, 30, 20).unwrap();
        let dec = png::Decoder::new(std::fs::File::open(&p).unwrap());
        let mut r = dec.read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size()];
        let info = r.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (30, 20));
        assert_eq!(info.color_type, png::ColorType::Grayscale);
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        assert_eq!(&buf[..info.buffer_size()], &preview_pixels(&f)[..]);
        assert!(write_png_preview(&p, &f, 0, 0).is_err());
    }
}
