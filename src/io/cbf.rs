//! CBF images (`-cbffile`): 32-bit signed integers with CBF byte-offset compression and a
//! Pilatus-style miniCBF header (`_array_data.header_convention "GENERIC_MINI"`, the convention
//! dxtbx's FormatCBFMini reads for non-Pilatus array sizes) carrying the geometry.
//!
//! A miniCBF header describes one geometry only: detector normal to the beam, fast axis along the
//! spindle, beam centre `Beam_xy` in pixels from the outer corner of the first pixel. Geometries it
//! cannot express (two-theta, detector rotations, mirrored axes as in -adxv, spindle along the slow
//! axis as in -dials) are refused before the simulation starts, pointing to `-nexusfile`.

use super::atomic::AtomicFile;
use super::meta::ImageMeta;
use crate::{Error, Result};
use std::io::Write;
use std::path::Path;

/// CBF byte-offset compression of `data` (each value as the difference to the previous one, in 1, 2,
/// 4 or 8 bytes with the escape values 0x80, 0x8000, 0x80000000).
pub fn byte_offset(data: &[i32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 8 + 16);
    let mut prev: i64 = 0;
    for &v in data {
        let v = v as i64;
        let d = v - prev;
        if d.abs() <= 127 {
            out.push(d as i8 as u8);
        } else {
            out.push(0x80);
            if d.abs() <= 32767 {
                out.extend_from_slice(&(d as i16).to_le_bytes());
            } else {
                out.extend_from_slice(&0x8000u16.to_le_bytes());
                if d.abs() <= i32::MAX as i64 {
                    out.extend_from_slice(&(d as i32).to_le_bytes());
                } else {
                    out.extend_from_slice(&0x8000_0000u32.to_le_bytes());
                    out.extend_from_slice(&d.to_le_bytes());
                }
            }
        }
        prev = v;
    }
    out
}

/// The miniCBF header lines (`# key value`), geometry from `m`.
pub fn mini_header(m: &ImageMeta, what: &str) -> String {
    let px_m = m.pixel_size;
    let mut h = String::new();
    let mut l = |s: String| {
        h.push_str(&s);
        h.push_str("\r\n");
    };
    l("# Detector: nanobragg-rs simulated pixel array detector, S/N 0".into());
    l("# 2000-01-01T00:00:00.000".into());
    l(format!("# Pixel_size {:.6e} m x {:.6e} m", px_m, px_m));
    if m.thickness > 0.0 {
        l(format!("# Silicon sensor, thickness {:.6} m", m.thickness));
    }
    l(format!("# Exposure_time {:.7} s", m.exposure));
    l(format!("# Exposure_period {:.7} s", m.exposure));
    l("# Tau = 0 s".into());
    l(format!("# Count_cutoff {} counts", m.saturation));
    l("# N_excluded_pixels = 0".into());
    l(format!("# Wavelength {:.8} A", m.wavelength));
    l(format!("# Detector_distance {:.9} m", m.close_distance));
    l(format!("# Beam_xy ({:.6}, {:.6}) pixels", m.fbeam / px_m, m.sbeam / px_m));
    l(format!("# Start_angle {:.6} deg.", m.phi_start));
    l(format!("# Angle_increment {:.6} deg.", m.osc));
    l("# Detector_2theta 0.0000 deg.".into());
    l(format!("# Phi {:.6} deg.", m.phi_start));
    l(format!("# Oscillation_axis X (fast), {} convention", m.convention));
    l(format!("# Data: {what}"));
    h
}

/// The whole CBF file in memory.
pub fn cbf_bytes(m: &ImageMeta, data: &[i32], what: &str) -> Vec<u8> {
    let packed = byte_offset(data);
    let mut out = Vec::with_capacity(packed.len() + 8192);
    let name = "nanobragg";
    let mut text = String::new();
    text.push_str("###CBF: VERSION 1.5, CBFlib v0.7.8 - PILATUS detectors\r\n\r\n");
    text.push_str(&format!("data_{name}\r\n\r\n"));
    text.push_str("_array_data.header_convention \"GENERIC_MINI\"\r\n");
    text.push_str("_array_data.header_contents\r\n;\r\n");
    text.push_str(&mini_header(m, what));
    text.push_str(";\r\n\r\n");
    text.push_str("_array_data.data\r\n;\r\n--CIF-BINARY-FORMAT-SECTION--\r\n");
    text.push_str("Content-Type: application/octet-stream;\r\n     conversions=\"x-CBF_BYTE_OFFSET\"\r\n");
    text.push_str("Content-Transfer-Encoding: BINARY\r\n");
    text.push_str(&format!("X-Binary-Size: {}\r\n", packed.len()));
    text.push_str("X-Binary-ID: 1\r\n");
    text.push_str("X-Binary-Element-Type: \"signed 32-bit integer\"\r\n");
    text.push_str("X-Binary-Element-Byte-Order: LITTLE_ENDIAN\r\n");
    text.push_str(&format!("X-Binary-Number-of-Elements: {}\r\n", data.len()));
    text.push_str(&format!("X-Binary-Size-Fastest-Dimension: {}\r\n", m.fpixels));
    text.push_str(&format!("X-Binary-Size-Second-Dimension: {}\r\n", m.spixels));
    text.push_str("X-Binary-Size-Padding: 4095\r\n\r\n");
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&[0x0c, 0x1a, 0x04, 0xd5]);
    out.extend_from_slice(&packed);
    out.extend(std::iter::repeat(0u8).take(4095));
    out.extend_from_slice(b"\r\n--CIF-BINARY-FORMAT-SECTION----\r\n;\r\n\r\n");
    out
}

/// Read the pixels of a byte-offset CBF image (as [`cbf_bytes`] writes it, or a Pilatus/miniCBF
/// file): (fast size, slow size, values).
pub fn read_cbf(path: &Path) -> Result<(usize, usize, Vec<i32>)> {
    let err = |r: &str| Error::file(path, format!("not a byte-offset CBF image: {r}"));
    let bytes = std::fs::read(path).map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
    let start = bytes.windows(4).position(|w| w == [0x0c, 0x1a, 0x04, 0xd5]).ok_or_else(|| err("no binary section"))?;
    let head = String::from_utf8_lossy(&bytes[..start]);
    let key = |k: &str| -> Option<usize> { mime_field(&head, k)?.parse().ok() };
    let (fast, slow) = (key("X-Binary-Size-Fastest-Dimension").ok_or_else(|| err("no fast size"))?, key("X-Binary-Size-Second-Dimension").ok_or_else(|| err("no slow size"))?);
    if !head.contains("x-CBF_BYTE_OFFSET") {
        return Err(err("only byte-offset compression is read"));
    }
    let n = fast.checked_mul(slow).ok_or_else(|| err("size overflows"))?;
    let declared = declared_binary(&head, n).map_err(|r| err(&r))?;
    let mut data = Vec::with_capacity(n);
    let (mut i, mut prev) = (start + 4, 0i64);
    let b = &bytes;
    let take = |i: &mut usize, k: usize| -> Option<&[u8]> {
        let s = b.get(*i..*i + k)?;
        *i += k;
        Some(s)
    };
    while data.len() < n {
        let short = || err("the binary section ends early");
        let d0 = take(&mut i, 1).ok_or_else(short)?[0];
        let d = if d0 != 0x80 {
            d0 as i8 as i64
        } else {
            let d1 = i16::from_le_bytes(take(&mut i, 2).ok_or_else(short)?.try_into().unwrap());
            if d1 != i16::MIN {
                d1 as i64
            } else {
                let d2 = i32::from_le_bytes(take(&mut i, 4).ok_or_else(short)?.try_into().unwrap());
                if d2 != i32::MIN {
                    d2 as i64
                } else {
                    i64::from_le_bytes(take(&mut i, 8).ok_or_else(short)?.try_into().unwrap())
                }
            }
        };
        prev += d;
        if !declared.range.contains(&prev) {
            return Err(err(&format!("pixel {} = {prev} is outside its declared element type", data.len() + 1)));
        }
        data.push(prev as i32);
    }
    // the size bounds the data (as fabio and dxtbx read it): pixels that need more bytes are not it
    let used = i - (start + 4);
    if let Some(size) = declared.size.filter(|&s| s < used) {
        return Err(err(&format!("X-Binary-Size says {size} bytes but the {n} pixels take {used}")));
    }
    Ok((fast, slow, data))
}

/// The value of the first binary-header line starting with `key` (`X-Binary-Size-Fastest-Dimension:
/// 512`), trimmed and unquoted.
fn mime_field(head: &str, key: &str) -> Option<String> {
    let line = head.lines().find(|l| l.trim_start().starts_with(key))?;
    Some(line.split_once(':')?.1.trim().trim_matches('"').to_string())
}

/// What a CBF binary header declares beside the image size: its byte count (`X-Binary-Size`) and
/// the values its element type holds (within an i32, what [`read_cbf`] gives).
struct DeclaredBinary {
    size: Option<usize>,
    range: std::ops::RangeInclusive<i64>,
}

/// Check the header's element type, byte order and element count (those present) against what
/// [`read_cbf`] decodes: a header that says otherwise describes other data.
fn declared_binary(head: &str, n: usize) -> std::result::Result<DeclaredBinary, String> {
    let value = |k: &str| mime_field(head, k);
    if let Some(order) = value("X-Binary-Element-Byte-Order").filter(|o| o != "LITTLE_ENDIAN") {
        return Err(format!("byte order {order}: byte-offset data is LITTLE_ENDIAN"));
    }
    let range = match value("X-Binary-Element-Type").as_deref() {
        None | Some("signed 32-bit integer") => i32::MIN as i64..=i32::MAX as i64,
        Some("unsigned 32-bit integer") => 0..=i32::MAX as i64,
        Some("signed 16-bit integer") => i16::MIN as i64..=i16::MAX as i64,
        Some("unsigned 16-bit integer") => 0..=u16::MAX as i64,
        Some("signed 8-bit integer") => i8::MIN as i64..=i8::MAX as i64,
        Some("unsigned 8-bit integer") => 0..=u8::MAX as i64,
        Some(t) => return Err(format!("element type \"{t}\" is not an integer type this reader takes")),
    };
    let number = |k: &str| value(k).map(|v| v.parse::<usize>().map_err(|_| format!("{}: {v} is not a count", k.trim_end_matches(':')))).transpose();
    if let Some(count) = number("X-Binary-Number-of-Elements")?.filter(|&c| c != n) {
        return Err(format!("X-Binary-Number-of-Elements {count} is not the {n} pixels of its dimensions"));
    }
    Ok(DeclaredBinary { size: number("X-Binary-Size:")?, range })
}

/// Write a CBF file atomically. `what` says in the header what the pixel values are.
pub fn write_cbf(path: &Path, m: &ImageMeta, data: &[i32], what: &str) -> Result<()> {
    let err = |reason: String| Error::Output { path: path.to_path_buf(), reason };
    if data.len() != m.fpixels * m.spixels {
        return Err(err(format!("CBF data has {} pixels, expected {}x{}", data.len(), m.fpixels, m.spixels)));
    }
    m.mini_cbf_ok().map_err(|e| err(format!("-cbffile: a miniCBF header cannot describe this geometry: {e}; use -nexusfile")))?;
    let mut f = AtomicFile::create(path)?;
    f.write_all(&cbf_bytes(m, data, what)).map_err(|e| err(e.to_string()))?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked values of the CBF byte-offset scheme (each delta's encoding by hand from the rule:
    /// |d| ≤ 127 one byte; else 0x80 then i16; else 0x80 0x00 0x80 then i32).
    #[test]
    fn byte_offset_encodings() {
        assert_eq!(byte_offset(&[0, 127, 0]), vec![0x00, 0x7f, 0x81]);
        assert_eq!(byte_offset(&[128]), vec![0x80, 0x80, 0x00]);
        assert_eq!(byte_offset(&[-128]), vec![0x80, 0x80, 0xff]);
        assert_eq!(byte_offset(&[40000]), vec![0x80, 0x00, 0x80, 0x40, 0x9c, 0x00, 0x00]);
        assert_eq!(byte_offset(&[i32::MAX, i32::MIN]).len(), 7 + 15);
    }

    /// A file as written reads back; one whose header declares other data (its size, byte order,
    /// element type or count) is refused naming what it declares.
    #[test]
    fn header_must_describe_the_binary() {
        let data = [0, 5, 300, -2, 70000, 1];
        let packed = byte_offset(&data);
        let mut good = format!(
            "###CBF: VERSION 1.5\r\nconversions=\"x-CBF_BYTE_OFFSET\"\r\nX-Binary-Size: {}\r\nX-Binary-Element-Type: \"signed 32-bit integer\"\r\n\
             X-Binary-Element-Byte-Order: LITTLE_ENDIAN\r\nX-Binary-Number-of-Elements: 6\r\nX-Binary-Size-Fastest-Dimension: 3\r\n\
             X-Binary-Size-Second-Dimension: 2\r\n\r\n",
            packed.len()
        )
        .into_bytes();
        good.extend_from_slice(&[0x0c, 0x1a, 0x04, 0xd5]);
        good.extend_from_slice(&packed);
        good.extend_from_slice(&[0; 16]);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.cbf");
        std::fs::write(&p, &good).unwrap();
        assert_eq!(read_cbf(&p).unwrap(), (3, 2, data.to_vec()));
        let text = String::from_utf8_lossy(&good).into_owned();
        let size = packed.len();
        for (from, to, want) in [
            (format!("X-Binary-Size: {size}"), "X-Binary-Size: 5".to_string(), "X-Binary-Size says 5"),
            ("LITTLE_ENDIAN".into(), "BIG_ENDIAN".into(), "BIG_ENDIAN"),
            ("signed 32-bit integer".into(), "unsigned 16-bit integer".into(), "outside its declared element type"),
            ("signed 32-bit integer".into(), "signed 64-bit real IEEE".into(), "not an integer type"),
            ("X-Binary-Number-of-Elements: 6".into(), "X-Binary-Number-of-Elements: 7".into(), "Number-of-Elements 7"),
        ] {
            let start = good.windows(4).position(|w| w == [0x0c, 0x1a, 0x04, 0xd5]).unwrap();
            let mut bad = text[..start].replacen(&from, &to, 1).into_bytes();
            bad.extend_from_slice(&good[start..]);
            std::fs::write(&p, &bad).unwrap();
            let e = read_cbf(&p).unwrap_err().to_string();
            assert!(e.contains(want), "{to}: {e}");
        }
    }
}
