//! The raw float image (`-floatfile`): little-endian f32, fast axis fastest, no header.

use super::atomic::AtomicFile;
use crate::{Error, Result};
use std::path::Path;

/// Write the image to `path` atomically (no second copy of the image).
pub fn write_float_image(path: &Path, float: &[f32]) -> Result<()> {
    let mut f = AtomicFile::create(path)?;
    super::write_le(&mut f, float).map_err(|e| Error::write(path, e))?;
    f.commit()
}

/// The float image rendered in place in its output file: a memory map of the file's temporary copy
/// ([`super::atomic::MappedTemp`]) seen as f32 pixels, whose bytes are the format's (little-endian f32)
/// on a little-endian machine. Saves holding the image in memory and copying it into the file.
pub struct MappedFloat(super::atomic::MappedTemp);

impl MappedFloat {
    /// `None` where the file cannot be written this way (big-endian machine, special file, no space
    /// reservation): write it from memory instead.
    pub fn create(path: &Path, pixels: usize) -> Result<Option<MappedFloat>> {
        if !cfg!(target_endian = "little") {
            return Ok(None);
        }
        Ok(super::atomic::MappedTemp::create(path, 4 * pixels as u64)?.map(MappedFloat))
    }

    pub fn pixels(&self) -> &[f32] {
        let b = self.0.bytes();
        // SAFETY: the map is page-aligned and 4·pixels bytes long; every bit pattern is an f32
        unsafe { std::slice::from_raw_parts(b.as_ptr() as *const f32, b.len() / 4) }
    }

    pub fn pixels_mut(&mut self) -> &mut [f32] {
        let b = self.0.bytes_mut();
        // SAFETY: as in `pixels`, and the map is borrowed mutably for the slice's lifetime
        unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut f32, b.len() / 4) }
    }

    /// Pre-faults pixels' pages from any thread ([`super::atomic::Populator`], byte ranges).
    pub fn populator(&self) -> super::atomic::Populator {
        self.0.populator()
    }

    /// The complete file, for the rename with the other outputs.
    pub fn take_finished(&mut self) -> Option<super::atomic::Finished> {
        self.0.take_finished()
    }
}

/// The first pixel (index, value) that is NaN or infinite: such a pixel cannot be scaled, summed
/// or given Poisson noise, so readers of float images refuse it.
pub fn first_non_finite(image: &[f32]) -> Option<(usize, f32)> {
    image.iter().position(|v| !v.is_finite()).map(|i| (i, image[i]))
}

/// Refuse an image with a NaN or infinite pixel, naming the file, the flag, the pixel and its
/// (fast, slow) position when the row length is known.
pub fn require_finite(image: &[f32], path: &Path, flag: &str, fpixels: Option<usize>) -> Result<()> {
    match first_non_finite(image) {
        None => Ok(()),
        Some((i, v)) => {
            let at = match fpixels {
                Some(fp) if fp > 0 => format!("pixel {i} (fast {}, slow {})", i % fp, i / fp),
                _ => format!("pixel {i}"),
            };
            Err(Error::file(path, format!("{flag}: {at} is {v}: the image must hold finite values")))
        }
    }
}

/// Read a float image written by nanoBragg or this port.
pub fn read_float_image(path: &Path) -> Result<Vec<f32>> {
    let bytes = std::fs::read(path).map_err(|e| Error::file(path, format!("cannot read float image: {e}")))?;
    if bytes.len() % 4 != 0 {
        return Err(Error::file(path, format!("{} bytes is not a whole number of 4-byte floats", bytes.len())));
    }
    Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.bin");
        let img: Vec<f32> = (0..70000).map(|i| i as f32 * 0.25 - 3.0).collect();
        write_float_image(&p, &img).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 280000);
        assert_eq!(read_float_image(&p).unwrap(), img);
    }
}
