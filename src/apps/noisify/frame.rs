//! noisify.c's SMV frames: the `-header` file it takes its geometry and header from (`GetFrame`,
//! `ValueOf`), the header it writes otherwise, and the integer images' bytes.

use crate::base::os_text::os_path;
use super::config::NoisifyConfig;
use crate::base::c::printf::cf;
use crate::io::smv::header_number_present; // noisify.c `ValueOf`, numbers only
use crate::{Error, Result};

/// A parsed 512-byte (or HEADER_BYTES) SMV header, as noisify.c's `GetFrame` keeps it.
pub(super) struct HeaderFile {
    pub(super) header: Vec<u8>,
    pub(super) width: i32,
    pub(super) height: i32,
}

pub(super) fn get_frame(path: &str) -> Result<HeaderFile> {
    let bytes = std::fs::read(os_path(path)).map_err(|e| Error::file(path, format!("-header: cannot read: {e}")))?;
    if bytes.len() < 512 {
        return Err(Error::file(path, "-header: shorter than a 512-byte SMV header"));
    }
    if !bytes.starts_with(b"{\nHEADER_BYT") {
        return Err(Error::file(path, "-header: does not look like an ADSC (SMV) frame"));
    }
    let mut header = bytes[..512].to_vec();
    let size = header_number(&header, path, "HEADER_BYTES")?.unwrap_or(0.0) as i64;
    if size <= 0 {
        return Err(Error::file(path, "-header: bad HEADER_BYTES"));
    }
    if size != 512 {
        if bytes.len() < size as usize {
            return Err(Error::file(path, format!("-header: file shorter than HEADER_BYTES={size}")));
        }
        header = bytes[..size as usize].to_vec();
    }
    let mut width = header_number(&header, path, "SIZE1")?.unwrap_or(f64::NAN) as i32;
    let mut height = header_number(&header, path, "SIZE2")?.unwrap_or(f64::NAN) as i32;
    if width == 0 {
        let d = header_number(&header, path, "DETECTOR_DIMENSIONS")?.unwrap_or(0.0) as i32;
        width = d;
        height = d;
    }
    if width <= 0 || height <= 0 {
        return Err(Error::file(path, "-header: no image size (SIZE1/SIZE2)"));
    }
    Ok(HeaderFile { header, width, height })
}

/// The `-header` file's value of `key` (`None`: absent or NaN, as the C's `isnan` test); text that
/// is not a number is refused naming the file and key, where the C's `atof` read its prefix or 0.
pub(super) fn header_number(header: &[u8], path: &str, key: &str) -> Result<Option<f64>> {
    header_number_present(header, key).map_err(|e| Error::file(path, format!("-header: {e}")))
}

/// The `-header` file's header with TYPE and BYTE_ORDER saying what is written under it: the integer
/// type of `-bits` (as [`c_header`] names it) and little-endian. noisify.c copied them verbatim, so a
/// 16-bit header over `-bits 32` data (or `long_integer` over 2-byte pixels) misdescribed the file.
pub(super) fn describe_data(header: &[u8], bits: i32) -> std::result::Result<Vec<u8>, String> {
    let ty = if bits == 16 { "unsigned_short" } else { "long_integer" };
    let h = set_key(header, "BYTE_ORDER", "little_endian")?;
    set_key(&h, "TYPE", ty)
}

/// `header` with the value of every `KEY=` line before the closing `}` set to `value` (a line added
/// after HEADER_BYTES when there is none), its length kept: the blank padding after the `}` gives
/// or takes the difference (refused when there is not enough of it).
fn set_key(header: &[u8], key: &str, value: &str) -> std::result::Result<Vec<u8>, String> {
    let field = format!("{key}=");
    let body_end = header.iter().position(|&c| c == b'}').unwrap_or(header.len());
    let mut out = Vec::with_capacity(header.len() + 32);
    let (mut i, mut found) = (0, false);
    while i < body_end {
        if header[..i].ends_with(b"\n") && header[i..body_end].starts_with(field.as_bytes()) {
            let len = header[i..body_end].iter().position(|&c| c == b';' || c == b'\n').unwrap_or(body_end - i);
            out.extend_from_slice(field.as_bytes());
            out.extend_from_slice(value.as_bytes());
            (i, found) = (i + len, true);
        } else {
            out.push(header[i]);
            i += 1;
        }
    }
    out.extend_from_slice(&header[body_end..]);
    if !found {
        // after the HEADER_BYTES line, which get_frame checked comes first
        let at = out.iter().skip(2).position(|&c| c == b'\n').map_or(out.len(), |p| p + 3);
        out.splice(at..at, format!("{field}{value};\n").into_bytes());
    }
    let pad = if header.last() == Some(&0) { 0 } else { b' ' };
    if out.len() > header.len() && !out[header.len()..].iter().all(|&c| c == b' ' || c == 0) {
        return Err(format!("no room in its {} header bytes to say {key}={value} (the data written)", header.len()));
    }
    out.resize(header.len(), pad);
    Ok(out)
}

pub(super) fn c_header(c: &NoisifyConfig, xp: i32, yp: i32, detsize_y: f64, xbeam: f64, ybeam: f64) -> Vec<u8> {
    let mut s = String::new();
    if c.intimage_bits == 16 {
        s += "{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=unsigned_short;\n";
    } else {
        s += "{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=long_integer;\n";
    }
    s += &format!(
        "SIZE1={xp};\nSIZE2={yp};\nPIXEL_SIZE={};\nDISTANCE={};\n",
        cf("%g", c.pixel * 1000.0),
        cf("%g", c.distance * 1000.0)
    );
    s += &format!(
        "WAVELENGTH={};\nBEAM_CENTER_X={};\nBEAM_CENTER_Y={};\n",
        cf("%g", c.lambda),
        cf("%g", xbeam * 1000.0),
        cf("%g", (detsize_y - ybeam) * 1000.0)
    );
    s += &format!("PHI={};\nOSC_START={};\nOSC_RANGE={};\n", cf("%g", c.phi0), cf("%g", c.phi0), cf("%g", c.osc));
    s += "DETECTOR_SN=000;\nBEAMLINE=fake;\n}\x0c";
    let mut b = s.into_bytes();
    while b.len() < 512 {
        b.push(b' ');
    }
    b
}

pub(super) fn image_bytes(header: &[u8], bits: i32, i16img: &[u16], i32img: &[u32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(header.len() + i32img.len() * 4);
    b.extend_from_slice(header);
    if bits == 16 {
        for v in i16img {
            b.extend_from_slice(&v.to_le_bytes());
        }
    } else {
        for v in i32img {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b
}

/// `(unsigned int) adu` and `(unsigned short int) adu` as x86-64 gcc compiles them (a 64-bit resp.
/// 32-bit truncating conversion, then the low bits), for adu ≤ 2147483647.
pub(super) fn to_u32(adu: f64) -> u32 {
    (adu as i64) as u32
}
pub(super) fn to_u16(adu: f64) -> u16 {
    (adu as i32) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(fields: &str, pad: u8) -> Vec<u8> {
        let mut b = format!("{{\nHEADER_BYTES=512;\n{fields}}}\x0c").into_bytes();
        b.resize(512, pad);
        b
    }

    /// TYPE and BYTE_ORDER are set to what is written (they were copied verbatim), the length kept.
    #[test]
    fn the_header_says_what_is_written() {
        let h = header("DIM=2;\nBYTE_ORDER=big_endian;\nTYPE=unsigned_short;\nSIZE1=4;\n", b' ');
        let got = describe_data(&h, 32).unwrap();
        assert_eq!(got, header("DIM=2;\nBYTE_ORDER=little_endian;\nTYPE=long_integer;\nSIZE1=4;\n", b' '));
        assert_eq!(describe_data(&got, 16).unwrap(), header("DIM=2;\nBYTE_ORDER=little_endian;\nTYPE=unsigned_short;\nSIZE1=4;\n", b' '));
        // already right: the same bytes (the golden headers)
        let right = header("BYTE_ORDER=little_endian;\nTYPE=unsigned_short;\n", 0);
        assert_eq!(describe_data(&right, 16).unwrap(), right);
        // absent: added after the HEADER_BYTES line; DATA_TYPE= is another key
        let got = describe_data(&header("DATA_TYPE=x;\n", 0), 32).unwrap();
        assert_eq!(got, header("TYPE=long_integer;\nBYTE_ORDER=little_endian;\nDATA_TYPE=x;\n", 0));
        // no padding left for a longer value: refused
        let mut full = b"{\nHEADER_BYTES=32;\nTYPE=long;\n}".to_vec();
        full.resize(32, b' ');
        assert!(describe_data(&full, 16).unwrap_err().starts_with("no room in its 32 header bytes"));
    }
}
