//! SMV (ADSC) images: the header nanoBragg writes, the int image, and the reader for `-img`/`-mask`.
//!
//! Output follows the C byte-for-byte (same keys, order, `%g` numbers, `}\f`, space padding to 512),
//! with two deliberate differences:
//! * `BYTE_ORDER` is always `little_endian` and the data are always written little-endian, so the
//!   header tells the truth on every host (the C writes native order and probes it at run time).
//! * The header never runs past its declared `HEADER_BYTES=512` (checklist §0.6). The C lets long
//!   numbers push the data start beyond byte 512, which corrupts the image for every reader. When the
//!   text would not fit, the precision of the longest numbers is lowered one digit at a time
//!   (`%g` → `%.5g` → ... → `%.1g`), so every number that fits keeps the C's formatting.
//!
//! Input follows the C's `GetFrame`/`ValueOf`, quirks included (last substring match of a key, data
//! never byte-swapped); where the C crashes or reads garbage the reader returns a one-line error.

use crate::base::image::ImageView;
use super::atomic::AtomicFile;
use super::text::atof;
use crate::base::c::printf::{cf, ci};
use crate::{Error, Result};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// An SMV image as read (e.g. for `-img` or `-mask`): its header text and pixel values.
#[derive(Clone, Debug, PartialEq)]
pub struct SmvImage {
    pub path: PathBuf,
    pub width: usize,
    pub height: usize,
    pub header: String,
    pub data: Vec<u16>,
}


/// Size of the header nanoBragg writes and declares.
pub const HEADER_BYTES: usize = 512;

/// The numbers nanoBragg writes into an SMV header, already in header units (mm, Angstrom, degrees).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SmvHeader {
    pub size1: usize,
    pub size2: usize,
    pub pixel_size: f64,
    pub distance: f64,
    pub wavelength: f64,
    pub beam_center_x: f64,
    pub beam_center_y: f64,
    pub adxv_center_x: f64,
    pub adxv_center_y: f64,
    pub mosflm_center_x: f64,
    pub mosflm_center_y: f64,
    pub denzo_x_beam: f64,
    pub denzo_y_beam: f64,
    pub dials_origin: [f64; 3],
    pub xds_orgx: f64,
    pub xds_orgy: f64,
    pub close_distance: f64,
    pub phi: f64,
    pub osc_start: f64,
    pub osc_range: f64,
    pub twotheta: f64,
    /// `ADC_OFFSET=` (dxtbx's FormatSMVJHSim reads it as the pedestal and assumes 1 without it); only
    /// `-dxtbx_smv` writes it, the C's header has no such key.
    pub adc_offset: Option<f64>,
}

/// Number of floating-point values in the header.
const NFLOAT: usize = 21;

impl SmvHeader {
    fn floats(&self) -> [f64; NFLOAT] {
        let d = self.dials_origin;
        [
            self.pixel_size,
            self.distance,
            self.wavelength,
            self.beam_center_x,
            self.beam_center_y,
            self.adxv_center_x,
            self.adxv_center_y,
            self.mosflm_center_x,
            self.mosflm_center_y,
            self.denzo_x_beam,
            self.denzo_y_beam,
            d[0],
            d[1],
            d[2],
            self.xds_orgx,
            self.xds_orgy,
            self.close_distance,
            self.phi,
            self.osc_start,
            self.osc_range,
            self.twotheta,
        ]
    }
}

/// `%g` at precision 6 (the C's), `%.<p>g` below.
fn fmt_prec(x: f64, prec: u8) -> String {
    if prec >= 6 {
        cf("%g", x)
    } else {
        cf(&format!("%.{prec}g"), x)
    }
}

/// The header text from `{` to `}\f` (unpadded), numbers formatted from `nums`.
fn header_text(h: &SmvHeader, n: &[String; NFLOAT]) -> String {
    format!(
        "{{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=unsigned_short;\n\
         SIZE1={};\nSIZE2={};\nPIXEL_SIZE={};\nDISTANCE={};\n\
         WAVELENGTH={};\n\
         BEAM_CENTER_X={};\nBEAM_CENTER_Y={};\n\
         ADXV_CENTER_X={};\nADXV_CENTER_Y={};\n\
         MOSFLM_CENTER_X={};\nMOSFLM_CENTER_Y={};\n\
         DENZO_X_BEAM={};\nDENZO_Y_BEAM={};\n\
         DIALS_ORIGIN={},{},{}\n\
         XDS_ORGX={};\nXDS_ORGY={};\n\
         CLOSE_DISTANCE={};\n\
         PHI={};\nOSC_START={};\nOSC_RANGE={};\n\
         TWOTHETA={};\n{}\
         DETECTOR_SN=000;\nBEAMLINE=fake;\n}}\x0c",
        ci("%ld", h.size1 as i64),
        ci("%ld", h.size2 as i64),
        n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8], n[9], n[10], n[11], n[12], n[13], n[14],
        n[15], n[16], n[17], n[18], n[19], n[20],
        h.adc_offset.map(|a| format!("ADC_OFFSET={};\n", cf("%g", a))).unwrap_or_default()
    )
}

/// The 512-byte header block: the C's text padded with spaces; numbers shortened only if needed.
pub fn smv_header_bytes(h: &SmvHeader) -> Result<Vec<u8>> {
    let vals = h.floats();
    let mut prec = [6u8; NFLOAT];
    let mut nums: [String; NFLOAT] = std::array::from_fn(|i| fmt_prec(vals[i], 6));
    loop {
        let text = header_text(h, &nums);
        if text.len() <= HEADER_BYTES {
            let mut b = text.into_bytes();
            b.resize(HEADER_BYTES, b' ');
            return Ok(b);
        }
        // shorten the longest number that can still lose a digit (first one on ties)
        let pick = (0..NFLOAT).filter(|&i| prec[i] > 1).max_by(|&a, &b| {
            nums[a].len().cmp(&nums[b].len()).then(b.cmp(&a))
        });
        match pick {
            Some(i) => {
                prec[i] -= 1;
                nums[i] = fmt_prec(vals[i], prec[i]);
            }
            None => {
                return Err(Error::Output {
                    path: Default::default(),
                    reason: "SMV header values do not fit in 512 bytes".into(),
                })
            }
        }
    }
}

/// Write an SMV file (header + little-endian u16 data) atomically.
pub fn write_smv(path: &Path, header: &SmvHeader, data: &[u16]) -> Result<()> {
    let err = |reason: String| Error::Output { path: path.to_path_buf(), reason };
    if data.len() != header.size1 * header.size2 {
        return Err(err(format!("{} pixels for a {}x{} image", data.len(), header.size1, header.size2)));
    }
    let head = smv_header_bytes(header).map_err(|e| match e {
        Error::Output { reason, .. } => err(reason),
        e => e,
    })?;
    let mut f = AtomicFile::create(path)?;
    let io = |e: std::io::Error| err(e.to_string());
    f.write_all(&head).map_err(io)?;
    super::write_le(&mut f, data).map_err(io)?;
    f.commit()
}

/// The C's int image: ROI pixels = floorf((f32)(v*scale+adc + 0.5)) with v*scale+adc clamped to
/// 0..65535 first, others 0.
///
/// As in the C, `test = v*scale + adc` and `test + 0.5` are computed in double; `floorf` takes a
/// float, so the sum is rounded to f32 before the floor (this decides halves near large counts).
/// The final cast truncates through a 32-bit int like gcc on x86 (NaN gives 0).
pub fn int_pixels(image: &ImageView, scale: f64, adc: f64) -> Vec<u16> {
    super::map_roi(image, int_pixel(scale, adc))
}

/// The `-intfile` pixel data ([`int_pixels`]) written to `w` in batches, never held whole.
pub fn write_int_pixels(w: &mut (dyn std::io::Write + Send), image: &ImageView, scale: f64, adc: f64) -> std::io::Result<()> {
    super::write_map_roi(w, image, int_pixel(scale, adc))
}

/// [`write_int_pixels`], handing every block of `rows_per` rows to `reduce` as they are converted
/// ([`super::write_map_roi_then`]): the blocks' results in row order.
pub fn write_int_pixels_then<R: Send>(
    w: &mut (dyn std::io::Write + Send),
    image: &ImageView,
    scale: f64,
    adc: f64,
    rows_per: usize,
    reduce: impl Fn(&[&[f32]]) -> R + Sync,
) -> std::io::Result<Vec<R>> {
    super::write_map_roi_then(w, image, int_pixel(scale, adc), rows_per, reduce)
}

/// One `-intfile` pixel from its float value.
#[inline]
fn int_pixel(scale: f64, adc: f64) -> impl Fn(f32) -> u16 + Sync {
    move |v| {
        let test = (v as f64 * scale + adc).clamp(0.0, 65535.0); // NaN stays NaN, as in C
        // test + 0.5 >= 0.5, so truncation is floorf: no libm call. NaN gives 0 (as the C's
        // conversion on x86 does in effect, and Rust's saturating `as`); mapped to 0 first so that
        // the truncation needs no range checks and vectorizes.
        let x = (test + 0.5) as f32;
        let x = if x.is_nan() { 0.0 } else { x };
        // SAFETY: x is in [0, 65535.5], finite and inside i32's range
        (unsafe { x.to_int_unchecked::<i32>() }) as u16
    }
}

fn file_err(path: &Path, reason: impl Into<String>) -> Error {
    Error::file(path, reason)
}

/// Read up to `n` bytes (fewer only at end of file).
fn read_upto(r: &mut impl Read, n: usize, path: &Path) -> Result<Vec<u8>> {
    let mut v = Vec::with_capacity(n.min(1 << 16));
    r.take(n as u64).read_to_end(&mut v).map_err(|e| file_err(path, format!("cannot read: {e}")))?;
    Ok(v)
}

/// Header bytes as the C sees them: a C string, i.e. cut at the first NUL.
fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// A header number converted like the C's `(int)` cast, or None where that cast would be
/// undefined (NaN, out of range).
fn as_int(v: f64) -> Option<i64> {
    (v.is_finite() && v > i32::MIN as f64 - 1.0 && v < i32::MAX as f64 + 1.0).then(|| v.trunc() as i64)
}

/// Read an SMV file given to `-img` or `-mask` (the C's `GetFrame`).
///
/// Accepts a file whose first 12 bytes are `{\nHEADER_BYT`; the header is `HEADER_BYTES` long;
/// size = SIZE1 x SIZE2 (or DETECTOR_DIMENSIONS squared when SIZE1 is 0 or absent); the pixels are
/// little-endian u16 starting at byte `2*(HEADER_BYTES/2)` (the C indexes a u16 array), never
/// byte-swapped whatever BYTE_ORDER says. Unlike the C, a short file or a nonsensical size is an error.
pub fn read_smv(path: &Path) -> Result<SmvImage> {
    let mut fh = std::fs::File::open(path).map_err(|e| file_err(path, format!("cannot open: {e}")))?;
    let first = read_upto(&mut fh, HEADER_BYTES, path)?;
    if !first.starts_with(b"{\nHEADER_BYT") {
        return Err(file_err(path, "does not look like an SMV (ADSC) image"));
    }
    if first.len() < HEADER_BYTES {
        return Err(file_err(path, format!("too short for an SMV header ({} bytes)", first.len())));
    }
    let mut header = c_string(&first);
    let number = |header: &str, key: &str| header_number_present(header, key).map_err(|e| file_err(path, e));
    let hs = number(&header, "HEADER_BYTES")?
        .and_then(as_int)
        .filter(|&v| v > 0)
        .ok_or_else(|| file_err(path, "SMV header has no valid HEADER_BYTES"))? as usize;
    let mut rest = read_upto(&mut fh, usize::MAX, path)?;
    let mut all = first;
    all.append(&mut rest);
    if hs != HEADER_BYTES {
        if all.len() < hs {
            return Err(file_err(path, format!("file is shorter than its HEADER_BYTES={hs}")));
        }
        header = c_string(&all[..hs]);
    }
    let dim = |key: &str| number(&header, key).map(|v| v.map(|v| as_int(v).unwrap_or(-1)));
    let (w, h) = match dim("SIZE1")? {
        Some(w) if w != 0 => (w, dim("SIZE2")?.unwrap_or(-1)),
        _ => {
            let d = dim("DETECTOR_DIMENSIONS")?.unwrap_or(0);
            (d, d)
        }
    };
    if w <= 0 || h <= 0 {
        return Err(file_err(path, format!("SMV header gives no valid image size ({w}x{h})")));
    }
    let (w, h) = (w as usize, h as usize);
    let start = (hs / 2) * 2;
    let need = 2 * w * h;
    if all.len() < start + need {
        return Err(file_err(
            path,
            format!("file too short: {w}x{h} pixels after a {hs}-byte header need {} bytes, found {}", start + need, all.len()),
        ));
    }
    let data = all[start..start + need].chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    Ok(SmvImage { path: path.to_path_buf(), width: w, height: h, header, data })
}

/// Where the C's `ValueOf(keyword)` reads `key`'s value in `header` (up to its first NUL): `None`
/// when `key` does not occur; `Some(None)` when no `=` follows its last occurrence; else the text
/// after that `=`. The last occurrence is found by a left-to-right, non-overlapping substring scan
/// (so `DISTANCE` finds `CLOSE_DISTANCE`, `ORGX` finds `XDS_ORGX`).
fn value_text<'h>(header: &'h [u8], key: &str) -> Option<Option<&'h [u8]>> {
    if key.is_empty() {
        return None; // the C would loop forever
    }
    let h = &header[..header.iter().position(|&c| c == 0).unwrap_or(header.len())];
    let mut pos = None;
    let mut from = 0;
    while let Some(p) = find(&h[from..], key.as_bytes()) {
        from += p + key.len();
        pos = Some(from);
    }
    let after = pos?;
    Some(h[after..].iter().position(|&c| c == b'=').map(|e| &h[after + e + 1..]))
}

/// The C's `ValueOf(keyword)`: `None` when `key` does not occur (the C's NaN), else the value
/// ([`value_text`]) read with C `atof`; no `=` later in the header gives 0.
pub fn header_value(header: impl AsRef<[u8]>, key: &str) -> Option<f64> {
    Some(value_text(header.as_ref(), key)?.map_or(0.0, atof))
}

/// [`header_value`] for a value that must be a number: the same occurrence of `key`, but its text (up
/// to the `;` that ends an SMV field, or the line's end) must be numbers only — the first is the
/// value, as `atof` reads it (d*TREK writes lists: `SOURCE_WAVELENGTH=1 1.5418;`). `None` when `key`
/// does not occur; `Some(Err(text))` for text `atof` would read a prefix of (`0.15x`) or as 0 (`abc`,
/// nothing). NaN is a value (the caller treats it as absent, as the C's `isnan` test does).
pub fn header_number(header: impl AsRef<[u8]>, key: &str) -> Option<std::result::Result<f64, String>> {
    let Some(rest) = value_text(header.as_ref(), key)? else { return Some(Ok(0.0)) };
    let end = rest.iter().position(|&c| c == b';' || c == b'\n' || c == b'\r').unwrap_or(rest.len());
    let text = String::from_utf8_lossy(&rest[..end]).trim().to_string();
    let numbers: Option<Vec<f64>> = text.split_whitespace().map(|w| w.parse::<f64>().ok()).collect();
    Some(numbers.and_then(|n| n.first().copied()).ok_or(text))
}

/// [`header_number`] as the C's `isnan(ValueOf(key))` test sees it: `Ok(None)` when `key` is absent
/// or its value NaN, `Ok(Some(v))` for a number, and an error naming the key for text that is not
/// numbers (`512x`, `abc`), which the C would read as its prefix or as 0.
pub fn header_number_present(header: impl AsRef<[u8]>, key: &str) -> std::result::Result<Option<f64>, String> {
    match header_number(header, key) {
        None => Ok(None),
        Some(Ok(v)) if v.is_nan() => Ok(None),
        Some(Ok(v)) => Ok(Some(v)),
        Some(Err(text)) => Err(format!("header {key}={text} is not a number")),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::image::Roi;

    fn sample() -> SmvHeader {
        SmvHeader {
            size1: 128,
            size2: 96,
            pixel_size: 0.1,
            distance: 100.0,
            wavelength: 1.0,
            beam_center_x: 6.45,
            beam_center_y: 4.85,
            adxv_center_x: 6.4,
            adxv_center_y: 4.8,
            mosflm_center_x: 4.85,
            mosflm_center_y: 6.45,
            denzo_x_beam: 4.9,
            denzo_y_beam: 6.5,
            dials_origin: [-6.5, 4.9, -100.0],
            xds_orgx: 64.5,
            xds_orgy: 48.5,
            close_distance: 100.0,
            phi: 0.0,
            osc_start: 0.0,
            osc_range: 0.0,
            twotheta: 0.0,
            adc_offset: None,
        }
    }

    #[test]
    fn adc_offset_key_only_when_asked() {
        let h = SmvHeader { adc_offset: Some(40.0), ..sample() };
        let t = String::from_utf8(smv_header_bytes(&h).unwrap()).unwrap();
        assert!(t.contains("TWOTHETA=0;\nADC_OFFSET=40;\nDETECTOR_SN=000;"));
        let t = String::from_utf8(smv_header_bytes(&sample()).unwrap()).unwrap();
        assert!(!t.contains("ADC_OFFSET"));
    }

    #[test]
    fn header_layout_matches_c() {
        let b = smv_header_bytes(&sample()).unwrap();
        assert_eq!(b.len(), 512);
        let t = String::from_utf8(b.clone()).unwrap();
        assert!(t.starts_with("{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=unsigned_short;\nSIZE1=128;\nSIZE2=96;\nPIXEL_SIZE=0.1;\nDISTANCE=100;\nWAVELENGTH=1;\n"));
        assert!(t.contains("\nDIALS_ORIGIN=-6.5,4.9,-100\nXDS_ORGX=64.5;\n"));
        assert!(t.contains("TWOTHETA=0;\nDETECTOR_SN=000;\nBEAMLINE=fake;\n}\x0c   "));
        assert!(t.ends_with(' '));
    }

    #[test]
    fn long_numbers_are_shortened_to_fit() {
        let mut h = sample();
        for (i, v) in [
            &mut h.pixel_size, &mut h.distance, &mut h.wavelength, &mut h.beam_center_x, &mut h.beam_center_y,
            &mut h.adxv_center_x, &mut h.adxv_center_y, &mut h.mosflm_center_x, &mut h.mosflm_center_y,
            &mut h.denzo_x_beam, &mut h.denzo_y_beam, &mut h.xds_orgx, &mut h.xds_orgy,
        ]
        .into_iter()
        .enumerate()
        {
            *v = -1.234567891e-123 * (i as f64 + 1.0);
        }
        h.dials_origin = [-1.23456789e-100, 2.3456789e-200, -3.456789e+300];
        let b = smv_header_bytes(&h).unwrap();
        assert_eq!(b.len(), 512);
        let t = c_string(&b);
        // every value still parses, to the precision kept
        let x = header_value(&t, "XDS_ORGX").unwrap();
        assert!((x / h.xds_orgx - 1.0).abs() < 0.5, "{x}\n{t}");
        assert_eq!(header_value(&t, "SIZE2"), Some(96.0));
        assert!(t.contains("TWOTHETA=0;"), "short numbers keep %g");
        // impossible case: error, not a corrupt file
        h.size1 = usize::MAX / 2;
        h.size2 = usize::MAX / 2;
        for v in [&mut h.close_distance, &mut h.phi, &mut h.osc_start, &mut h.osc_range, &mut h.twotheta] {
            *v = -1e-300;
        }
        assert!(smv_header_bytes(&h).is_err());
    }

    #[test]
    fn int_pixels_rounding_and_clamp() {
        let f = [0.0f32, 1.25, -100.0, 1e9, 2.0, f32::NAN];
        let v = int_pixels(&ImageView::new(&f, 3, 2, Roi::from_c_bounds([0, 3, 0, 2], 3, 2)), 1.0, 40.0);
        assert_eq!(v, vec![40, 41, 0, 65535, 42, 0]);
        // 0.5 rounds up; ROI excludes column 0 and row 1
        let v = int_pixels(&ImageView::new(&[0.5, 0.5, 0.5, 0.5], 2, 2, Roi::from_c_bounds([1, 1, 0, 0], 2, 2)), 1.0, 0.0);
        assert_eq!(v, vec![0, 1, 0, 0]);
        // floorf takes a float: 40.49999999 + 0.5 rounds to 41.0f before the floor (double: 40)
        assert_eq!(int_pixels(&ImageView::new(&[0.0], 1, 1, Roi::from_c_bounds([0, 1, 0, 1], 1, 1)), 1.0, 40.499_999_99), vec![41]);
    }

    /// The vectorizing conversion is `as i32 as u16` of the clamped, rounded value, at the extremes too.
    #[test]
    fn int_pixel_is_the_saturating_cast() {
        let cast = |v: f32, scale: f64, adc: f64| ((((v as f64 * scale + adc).clamp(0.0, 65535.0) + 0.5) as f32) as i32) as u16;
        let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1e9, -0.6, -0.0, 0.0, 0.49, 0.5, 65534.5, 65535.0, 65535.4, 65535.5, 65536.0, 1e30];
        for (scale, adc) in [(1.0, 0.0), (1.0, 40.0), (0.37, 10.0), (1e-40, 0.0), (3e10, -5.0), (-2.0, 40.0), (1.0, f64::NAN)] {
            for &v in &special {
                assert_eq!(int_pixel(scale, adc)(v), cast(v, scale, adc), "v {v} scale {scale} adc {adc}");
            }
        }
    }

    #[test]
    fn value_of_semantics() {
        let h = "{\nHEADER_BYTES=512;\nDISTANCE=120;\nCLOSE_DISTANCE=110;\nXDS_ORGX=12.5;\nX=  -3e2xyz\nNOEQ";
        assert_eq!(header_value(h, "DISTANCE"), Some(110.0));
        assert_eq!(header_value(h, "ORGX"), Some(12.5));
        assert_eq!(header_value(h, "X"), Some(-300.0));
        assert_eq!(header_value(h, "NOEQ"), Some(0.0));
        assert_eq!(header_value(h, "MISSING"), None);
        assert_eq!(header_value("A=B=1", "A"), Some(0.0));
        // non-overlapping left-to-right scan: "AA" in "AAA=5" ends at byte 2
        assert_eq!(header_value("AAA=5", "AA"), Some(5.0));
        assert_eq!(header_value("K=1\0K=2", "K"), Some(1.0));
    }

    /// The same occurrence as `header_value`, but only a whole number is a value.
    #[test]
    fn header_number_takes_whole_numbers_only() {
        let h = "{\nHEADER_BYTES=512;\nDISTANCE=120;\nCLOSE_DISTANCE= 110 ;\nPHI=nan;\nPIXEL_SIZE=0.15x;\nX=-3e2\nNOEQ";
        assert_eq!(header_number(h, "DISTANCE"), Some(Ok(110.0)));
        assert_eq!(header_number(h, "X"), Some(Ok(-300.0)));
        assert_eq!(header_number(h, "NOEQ"), Some(Ok(0.0)));
        assert_eq!(header_number(h, "MISSING"), None);
        assert!(header_number(h, "PHI").unwrap().unwrap().is_nan());
        assert_eq!(header_number(h, "PIXEL_SIZE"), Some(Err("0.15x".into())));
        assert_eq!(header_number("A=B=1", "A"), Some(Err("B=1".into())));
        assert_eq!(header_number("SOURCE_WAVELENGTH=1 1.5418;", "WAVELENGTH"), Some(Ok(1.0)));
        assert_eq!(header_number("PHI=1 x;", "PHI"), Some(Err("1 x".into())));
        assert_eq!(header_number("PHI=;", "PHI"), Some(Err("".into())));
    }

    #[test]
    fn write_then_read_roundtrip() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.img");
        let h = sample();
        let data: Vec<u16> = (0..128 * 96).map(|i| (i * 7 % 65536) as u16).collect();
        write_smv(&p, &h, &data).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(bytes.len(), 512 + 2 * 128 * 96);
        assert_eq!(&bytes[512..514], &data[0].to_le_bytes());
        let r = read_smv(&p).unwrap();
        assert_eq!((r.width, r.height), (128, 96));
        assert_eq!(r.data, data);
        assert_eq!(header_value(&r.header, "BEAM_CENTER_Y"), Some(4.85));
        assert!(write_smv(&p, &h, &data[1..]).is_err());
    }

    #[test]
    fn reader_rules_and_errors() {
        let d = tempfile::tempdir().unwrap();
        let mk = |name: &str, head: &str, hs: usize, payload: &[u8]| {
            let mut b = head.as_bytes().to_vec();
            b.resize(hs, b' ');
            b.extend_from_slice(payload);
            let p = d.path().join(name);
            std::fs::write(&p, b).unwrap();
            p
        };
        // odd, larger header; DETECTOR_DIMENSIONS fallback; data start rounds down to even
        let head = "{\nHEADER_BYTES=1025;\nDETECTOR_DIMENSIONS=2;\n}";
        let mut b = head.as_bytes().to_vec();
        b.resize(1024, b' ');
        b.extend_from_slice(&[0x05, 0x01, 0, 0, 0, 0, 0, 0]); // bytes 1024..
        let p = d.path().join("odd.img");
        std::fs::write(&p, &b).unwrap();
        let r = read_smv(&p).unwrap();
        assert_eq!((r.width, r.height), (2, 2));
        assert_eq!(r.data, vec![0x0105, 0, 0, 0]);

        // BYTE_ORDER is ignored: never swapped
        let p = mk("be.img", "{\nHEADER_BYTES=512;\nBYTE_ORDER=big_endian;\nSIZE1=1;\nSIZE2=1;\n}", 512, &[1, 2]);
        assert_eq!(read_smv(&p).unwrap().data, vec![0x0201]);

        let msg = |p: &Path| read_smv(p).unwrap_err().to_string();
        let p = mk("notsmv.img", "P5\n", 600, &[]);
        assert!(msg(&p).contains("does not look like an SMV"), "{}", msg(&p));
        let p = mk("short.img", "{\nHEADER_BYTES=512;\nSIZE1=4;\nSIZE2=4;\n}", 512, &[0; 10]);
        assert!(msg(&p).contains("too short"));
        assert!(msg(&p).contains("short.img"));
        let p = mk("nosize.img", "{\nHEADER_BYTES=512;\n}", 512, &[0; 10]);
        assert!(msg(&p).contains("size"));
        let p = mk("neg.img", "{\nHEADER_BYTES=512;\nSIZE1=-4;\nSIZE2=4;\n}", 512, &[0; 10]);
        assert!(msg(&p).contains("size"));
        let p = mk("tiny.img", "{\nHEADER_BYTES=512;\n}", 100, &[]);
        assert!(msg(&p).contains("too short"));
        assert!(msg(&d.path().join("missing.img")).contains("cannot open"));
        let p = mk("badhb.img", "{\nHEADER_BYTES=0;\nSIZE1=1;SIZE2=1;\n}", 512, &[0; 2]);
        assert!(msg(&p).contains("HEADER_BYTES"));
        assert!(!msg(&p).contains('\n'));
        // sizes that are not numbers are refused, not read as their prefix (the C's atof)
        let p = mk("size1x.img", "{\nHEADER_BYTES=512;\nSIZE1=1x;\nSIZE2=1;\n}", 512, &[0; 2]);
        assert!(msg(&p).contains("SIZE1=1x is not a number"), "{}", msg(&p));
        let p = mk("size2.img", "{\nHEADER_BYTES=512;\nSIZE1=1;\nSIZE2=one;\n}", 512, &[0; 2]);
        assert!(msg(&p).contains("SIZE2=one"), "{}", msg(&p));
        let p = mk("hbx.img", "{\nHEADER_BYTES=512abc;\nSIZE1=1;\nSIZE2=1;\n}", 512, &[0; 2]);
        assert!(msg(&p).contains("HEADER_BYTES=512abc"), "{}", msg(&p));
        // a size written as a float or followed by spaces is still the C's size
        let p = mk("float.img", "{\nHEADER_BYTES=512;\nSIZE1= 1.0 ;\nSIZE2=1;\n}", 512, &[7, 0]);
        assert_eq!(read_smv(&p).unwrap().data, vec![7]);
    }

    #[test]
    fn int_pixels_with_a_second_pass_are_the_same_bytes_and_rows_in_order() {
        // an image taller than one write batch, rows not a multiple of the block, a ROI inside
        let (f, s) = (700usize, 1000usize);
        let img: Vec<f32> = (0..f * s).map(|i| ((i * 7919) % 9973) as f32 / 3.0).collect();
        let roi = Roi::from_c_bounds([5, 690, 3, 997], f, s);
        let view = ImageView::new(&img, f, s, roi.clone());
        let (mut plain, mut then) = (Vec::new(), Vec::new());
        write_int_pixels(&mut plain, &view, 0.37, 40.0).unwrap();
        let blocks = write_int_pixels_then(&mut then, &view, 0.37, 40.0, 3, |rows: &[&[f32]]| rows.iter().map(|r| (r.len(), r.first().map(|v| v.to_bits()))).collect::<Vec<_>>()).unwrap();
        assert_eq!(plain, then);
        let rows: Vec<_> = blocks.into_iter().flatten().collect();
        let want: Vec<_> = (0..s).map(|r| if roi.slow.contains(&r) { (roi.fast.len(), Some(img[r * f + roi.fast.start].to_bits())) } else { (0, None) }).collect();
        assert_eq!(rows, want);
    }
}
