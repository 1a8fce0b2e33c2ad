//! nearBragg.c after its pixel loop: the statistics (lines 1174-1181, 1215-1219), the progress
//! lines (lines 1199-1204), the integer image and its SMV header (lines 1239-1272).

use super::config::{NearBraggConfig, RTD};
use super::setup::Detector;
use crate::base::c::printf::cf;

/// The image's statistics over the rendered pixels, in raster order.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    pub max_i: f64,
    pub max_x: f64,
    pub max_y: f64,
    pub avg: f64,
    pub rms: f64,
}

/// Lines 1174-1181 for every rendered pixel, then 1216-1219. `last_sub(x, y)` is the position
/// (Xdet, Ydet) of a pixel's last sub-pixel (the C's loop variables).
pub fn statistics(det: &Detector, float: &[f32], last_sub: impl Fn(i32, i32) -> (f64, f64)) -> Stats {
    let (mut max_i, mut max_x, mut max_y) = (0.0f64, 0.0f64, 0.0f64);
    let (mut sum, mut sumsqr, mut sumn) = (0.0f64, 0.0f64, 0i64);
    for y in 0..det.ypixels {
        for x in 0..det.xpixels {
            if !det.in_roi(x, y) {
                continue;
            }
            let v = float[y as usize * det.xpixels as usize + x as usize];
            if v as f64 > max_i {
                max_i = v as f64;
                (max_x, max_y) = last_sub(x, y);
            }
            sum += v as f64;
            // float * float is a float product in C
            sumsqr += (v * v) as f64;
            sumn += 1;
        }
    }
    if sumn <= 0 {
        sumn = 1;
    }
    let avg = sum / sumn as f64;
    if sumn <= 1 {
        sumn = 2;
    }
    let rms = (sumsqr / (sumn - 1) as f64).sqrt();
    Stats { max_i, max_x, max_y, avg, rms }
}

/// The C's progress lines for `visited` rendered pixels (lines 1199-1204; `progress_pixels` is
/// computed from the ROI as the C does, line 520, so it may exceed `visited`).
pub fn progress_lines(det: &Detector, visited: u64) -> String {
    let r = det.roi;
    let total = (r[1] as i64 - r[0] as i64 + 1) * (r[3] as i64 - r[2] as i64 + 1);
    let mut s = String::new();
    if total / 100 <= 0 {
        return s;
    }
    for p in 0..visited as i64 {
        if p % (total / 20) == 0 || ((10 * p < total || 10 * p > 9 * total) && p % (total / 100) == 0) {
            s += &format!("{}% done\n", p * 100 / total);
        }
    }
    s
}

/// The scale of the integer image (lines 1243-1246).
pub fn int_scale(requested: f64, max_i: f64) -> f64 {
    if requested <= 0.0 {
        if max_i > 0.0 {
            return 55000.0 / max_i;
        }
        return 1.0;
    }
    requested
}

/// The C's `(unsigned short)(double)`: truncation through a 32-bit int (gcc on x86-64), NaN and
/// out-of-range values giving 0.
fn to_u16(test: f64) -> u16 {
    if test.is_nan() || test <= i32::MIN as f64 - 1.0 || test >= 2147483648.0 {
        return 0;
    }
    (test as i32) as u16
}

/// The integer image (lines 1248-1259): rendered pixels `float*scale + 40`, capped at 65535.
pub fn int_image(det: &Detector, float: &[f32], scale: f64) -> Vec<u16> {
    let w = det.xpixels as usize;
    let mut out = vec![0u16; float.len()];
    for y in 0..det.ypixels {
        for x in 0..det.xpixels {
            if !det.in_roi(x, y) {
                continue;
            }
            let j = y as usize * w + x as usize;
            let mut test = float[j] as f64 * scale + 40.0;
            if test > 65535.0 {
                test = 65535.0;
            }
            out[j] = to_u16(test);
        }
    }
    out
}

/// The SMV file (lines 1262-1271): the C's header, padded with spaces to 512 bytes, then the data
/// (little-endian, as the C writes on x86).
pub fn smv_bytes(c: &NearBraggConfig, det: &Detector, data: &[u16]) -> Vec<u8> {
    let g = |x: f64| cf("%g", x);
    let mut h = String::from("{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=unsigned_short;\n");
    h += &format!("SIZE1={};\nSIZE2={};\nPIXEL_SIZE={};\nDISTANCE={};\n", det.xpixels, det.ypixels, g(c.pixel * 1000.0), g(c.distance * 1000.0));
    h += &format!("WAVELENGTH={};\nBEAM_CENTER_X={};\nBEAM_CENTER_Y={};\n", g(c.lambda0 * 1e10), g(det.xbeam * 1000.0), g((det.detsize_y - det.ybeam) * 1000.0));
    h += &format!("PHI={};\nOSC_START={};\nOSC_RANGE=0;\n", g(c.phi0 * RTD), g(c.phi0 * RTD));
    h += "DETECTOR_SN=000;\nBEAMLINE=fake;\n}\u{c}";
    let mut b = h.into_bytes();
    while b.len() < 512 {
        b.push(b' ');
    }
    b.reserve(2 * data.len());
    for v in data {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u16_cast_as_gcc() {
        assert_eq!(to_u16(40.9), 40);
        assert_eq!(to_u16(65535.0), 65535);
        assert_eq!(to_u16(-0.5), 0);
        assert_eq!(to_u16(-3.0), 65533);
        assert_eq!(to_u16(f64::NAN), 0);
    }
}
