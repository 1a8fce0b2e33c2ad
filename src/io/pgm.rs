//! 8-bit PGM (P5) as nanoBragg writes it.

use super::atomic::AtomicFile;
use crate::base::c::printf::cf;
use crate::base::image::ImageView;
use crate::{Error, Result};
use std::io::Write;
use std::path::Path;

/// ROI pixels: `(unsigned char) min(v*scale, 255)` with `v*scale` in double; others 0.
///
/// The C cast truncates through a 32-bit int on x86 (gcc), so e.g. a negative value wraps
/// (-3.5 → 253) and NaN gives 0; reproduced with `as i32 as u8`.
pub fn pgm_pixels(image: &ImageView, scale: f64) -> Vec<u8> {
    super::map_roi(image, pgm_pixel(scale))
}

/// The PGM pixel data ([`pgm_pixels`]) written to `w` in batches, never held whole.
pub fn write_pgm_pixels(w: &mut (dyn std::io::Write + Send), image: &ImageView, scale: f64) -> std::io::Result<()> {
    super::write_map_roi(w, image, pgm_pixel(scale))
}

/// One PGM pixel from its float value.
fn pgm_pixel(scale: f64) -> impl Fn(f32) -> u8 + Sync {
    move |v| {
        let mut test = v as f64 * scale;
        if test > 255.0 {
            test = 255.0;
        }
        // `as i32` saturates below i32::MIN and gives 0 for NaN: the same done by a clamp and a
        // select, after which the unchecked conversion (no per-pixel saturation tests) vectorizes
        let t = if test.is_nan() { 0.0 } else { test.max(i32::MIN as f64) };
        // SAFETY: t is finite and i32::MIN <= t <= 255
        (unsafe { t.to_int_unchecked::<i32>() }) as u8
    }
}

/// The PGM header the C writes (`%lg` for the scale).
pub fn pgm_header(fpixels: usize, spixels: usize, scale: f64) -> String {
    format!("P5\n{fpixels} {spixels}\n# pixels scaled by {}\n255\n", cf("%lg", scale))
}

/// The PGM file: [`pgm_header`] + `data`.
pub fn pgm_bytes(fpixels: usize, spixels: usize, scale: f64, data: &[u8]) -> Vec<u8> {
    let mut b = pgm_header(fpixels, spixels, scale).into_bytes();
    b.extend_from_slice(data);
    b
}

/// Write `P5\n<f> <s>\n# pixels scaled by <%lg>\n255\n` + bytes, atomically.
pub fn write_pgm(path: &Path, fpixels: usize, spixels: usize, scale: f64, data: &[u8]) -> Result<()> {
    let err = |reason: String| Error::Output { path: path.to_path_buf(), reason };
    if data.len() != fpixels * spixels {
        return Err(err(format!("{} pixels for a {fpixels}x{spixels} image", data.len())));
    }
    let mut f = AtomicFile::create(path)?;
    f.write_all(pgm_header(fpixels, spixels, scale).as_bytes()).map_err(|e| err(e.to_string()))?;
    f.write_all(data).map_err(|e| err(e.to_string()))?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::image::Roi;

    #[test]
    fn pixels_truncate_and_clip() {
        let f = [0.0f32, 1.99, 300.0, -3.5, f32::NAN, 254.9];
        assert_eq!(pgm_pixels(&ImageView::new(&f, 3, 2, Roi::from_c_bounds([0, 2, 0, 1], 3, 2)), 1.0), vec![0, 1, 255, 253, 0, 254]);
        assert_eq!(pgm_pixels(&ImageView::new(&[100.0; 4], 2, 2, Roi::from_c_bounds([1, 5, 1, 5], 2, 2)), 2.0), vec![0, 0, 0, 200]);
    }

    /// The vectorizing conversion is the C cast as `as i32 as u8` makes it, at the extremes too.
    #[test]
    fn pixel_is_the_saturating_cast() {
        let cast = |v: f32, scale: f64| {
            let t = v as f64 * scale;
            ((if t > 255.0 { 255.0 } else { t }) as i32) as u8
        };
        let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -3e9, -2.2e9, -2.147_483_6e9, -1e9, -256.5, -0.5, -0.0, 0.0, 0.99, 127.5, 254.999, 255.0, 1e30];
        for scale in [1.0, 0.37, 1e-40, 3e10, -2.0] {
            for &v in &special {
                assert_eq!(pgm_pixel(scale)(v), cast(v, scale), "v {v} scale {scale}");
            }
        }
    }

    #[test]
    fn file_layout() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("i.pgm");
        write_pgm(&p, 3, 1, 5.02300001, &[1, 2, 3]).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"P5\n3 1\n# pixels scaled by 5.023\n255\n\x01\x02\x03");
        assert!(write_pgm(&p, 3, 2, 1.0, &[1, 2, 3]).is_err());
    }
}
