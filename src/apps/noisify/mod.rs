//! `noisify`: photons/pixel float image → detector images with photon (Poisson) noise, beam flicker,
//! per-pixel calibration error, a point-spread function, read-out noise, gain and ADC offset, as
//! noisify.c does.
//!
//! The random streams are noisify.c's: one ran1 shuffle table, gaussdev spare and poidev cache shared
//! between the noise seed and the calibration seed ([`NrRandom`]), consumed in raster order. So the
//! noise loop is serial; the PSF is parallel but adds every contribution to every output pixel in
//! the C's order (see [`apply_psf`]), so the images are byte-identical to the C's.

mod config;
mod frame;
mod psf;

pub use config::{NoisifyConfig, PsfType};
pub use psf::{apply_psf, convolve_c_order, integrate_fiber_over_pixel, integrate_gauss_over_pixel, psf_kernel};

use crate::base::os_text::os_path;
use crate::base::c::printf::{cf, ci};
use crate::base::c::rng::NrRandom;
use crate::io::atomic::OutputSet;
use crate::{Error, Result};
use frame::{c_header, get_frame, image_bytes, to_u16, to_u32, HeaderFile};
use rayon::prelude::*;
use std::io::Write;

/// Thomson cross section (noisify.c `r_e_sqr`).
use crate::base::consts::R_E_SQR;

/// What a noisify run reports besides its stdout (for tests and library users).
#[derive(Clone, Debug, Default)]
pub struct NoisifySummary {
    pub xpixels: usize,
    pub ypixels: usize,
    pub photons_before_psf: f64,
    pub photons: f64,
    pub overloads: u64,
}

/// The image's size and geometry: the command line's, or the `-header` file's where one is given.
struct Frame {
    xpixels: i64,
    ypixels: i64,
    /// metres
    pixel: f64,
    distance: f64,
    detsize_y: f64,
    xbeam: f64,
    ybeam: f64,
}

impl Frame {
    fn pixels(&self) -> usize {
        (self.xpixels * self.ypixels) as usize
    }
}

/// The noise levels in effect (all 0 with `-nonoise`).
struct NoiseLevels {
    calibration: f64,
    readout: f64,
    flicker: f64,
}

impl NoiseLevels {
    fn of(c: &NoisifyConfig) -> Self {
        if c.calculate_noise {
            NoiseLevels { calibration: c.calibration_noise, readout: c.readout_noise, flicker: c.flicker_noise }
        } else {
            NoiseLevels { calibration: 0.0, readout: 0.0, flicker: 0.0 }
        }
    }
}

fn io(e: std::io::Error) -> Error {
    Error::setup(format!("writing stdout: {e}"))
}

/// Run noisify.c on a float image in memory, writing its files and its stdout to `out`.
pub fn run(c: &NoisifyConfig, out: &mut dyn Write) -> Result<NoisifySummary> {
    let Some(floatname) = c.floatfile.as_deref() else {
        return Err(Error::flag("-floatfile", "no input image given"));
    };
    check_files(c, floatname)?;
    let bytes = std::fs::read(os_path(floatname)).map_err(|e| Error::file(floatname, format!("-floatfile: cannot read: {e}")))?;
    writeln!(out, "noisify - add noise to pixels - James Holton 3-19-16").map_err(io)?;
    let (mut frame, header) = header_frame(c, out)?;
    let pixels = match &header {
        Some(_) => frame.pixels() as i64,
        None => (bytes.len() / 4) as i64,
    };
    if pixels <= 0 {
        return Err(Error::file(floatname, "-floatfile: empty image"));
    }
    (frame.xpixels, frame.ypixels) = image_size(pixels, frame.xpixels, frame.ypixels, out)?;
    frame.detsize_y = frame.pixel * frame.ypixels as f64;
    let floatimage = import_floats(floatname, &bytes, &frame, out)?;
    drop(bytes);
    if frame.xbeam <= -1e99 {
        frame.xbeam = detsize_x_of(frame.pixel, frame.xpixels) / 2.0;
    }
    if frame.ybeam <= -1e99 {
        frame.ybeam = frame.detsize_y / 2.0;
    }
    let noise = NoiseLevels::of(c);
    let mut seed: i64 = c.seed.unwrap_or_else(|| {
        -(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0))
    });
    let mut calib_seed = c.calib_seed;
    out.write_all(parameter_report(c, &frame, &noise, seed, calib_seed).as_bytes()).map_err(io)?;

    let mut photonimage = photon_image(c, floatname, &floatimage, out)?;
    drop(floatimage);
    let psf_fwhm = c.psf_fwhm as f64;
    let (xu, yu) = (frame.xpixels as usize, frame.ypixels as usize);
    if !c.calculate_noise && c.psftype != PsfType::Unknown && psf_fwhm > 0.0 {
        writeln!(out, "  applying PSF to noiseless image width = {} pixels", cf("%g", psf_fwhm / frame.pixel)).map_err(io)?;
        photonimage = apply_psf(&photonimage, xu, yu, c.psftype, psf_fwhm / frame.pixel, c.psf_radius, out).map_err(io)?;
    }
    let own_header = c_header(c, xu as i32, yu as i32, frame.detsize_y, frame.xbeam, frame.ybeam);
    let hbytes: &[u8] = header.as_ref().map_or(&own_header, |h| &h.header);
    // every file under a temporary name until the last is written: all of them or none
    let mut files = OutputSet::default();
    write_noiseless(c, &frame, hbytes, &photonimage, &mut files, out)?;
    let mut summary = NoisifySummary { xpixels: xu, ypixels: yu, ..Default::default() };
    if !c.calculate_noise {
        files.commit()?;
        return Ok(summary);
    }

    // noise: one serial stream, the C's order
    let mut rng = NrRandom::new();
    summary.photons_before_psf = add_photon_noise(&mut photonimage, &noise, &mut rng, &mut seed, &mut calib_seed);
    if c.psftype != PsfType::Unknown && psf_fwhm > 0.0 {
        writeln!(out, "{} photons on noise image before PSF", cf("%.0f", summary.photons_before_psf)).map_err(io)?;
        writeln!(out, "  applying PSF width = {} um", cf("%g", psf_fwhm * 1e6)).map_err(io)?;
        photonimage = apply_psf(&photonimage, xu, yu, c.psftype, psf_fwhm / frame.pixel, c.psf_radius, out).map_err(io)?;
    }
    let (int16, int32, sum, overloads) = read_out(c, &photonimage, noise.readout, &mut rng, &mut seed);
    writeln!(out, "{} photons on noise image ({} overloads)", cf("%.0f", sum), overloads).map_err(io)?;
    writeln!(out, "writing {} as {}-byte integers", c.noisefile, if c.intimage_bits == 16 { 2 } else { 4 }).map_err(io)?;
    files.add_bytes(os_path(&c.noisefile).as_path(), &image_bytes(hbytes, c.intimage_bits, &int16, &int32))?;
    write_png(c, xu, yu, &int16, &int32, &mut files)?;
    files.commit()?;
    summary.photons = sum;
    summary.overloads = overloads;
    Ok(summary)
}

/// The command line's geometry, replaced by the `-header` file's where one is given (noisify.c
/// reads SIZE1/SIZE2, PIXEL_SIZE, DISTANCE, WAVELENGTH and the beam centre from it).
fn header_frame(c: &NoisifyConfig, out: &mut dyn Write) -> Result<(Frame, Option<HeaderFile>)> {
    let mut frame = Frame {
        xpixels: c.xpixels as i64,
        ypixels: c.ypixels as i64,
        pixel: c.pixel,
        distance: c.distance,
        detsize_y: 0.0,
        xbeam: c.xbeam,
        ybeam: c.ybeam,
    };
    let Some(h) = &c.headerfile else { return Ok((frame, None)) };
    writeln!(out, "taking header from {h}").map_err(io)?;
    let mut hf = get_frame(h)?;
    hf.header = frame::describe_data(&hf.header, c.intimage_bits).map_err(|e| Error::file(h, format!("-header: {e}")))?;
    writeln!(out, "reading {h}").map_err(io)?;
    frame.xpixels = hf.width as i64;
    frame.ypixels = hf.height as i64;
    // the geometry the header gives must be what the flags accept (positive sizes, finite centres)
    let value = |key: &str, positive: bool| -> Result<Option<f64>> {
        match frame::header_number(&hf.header, h, key)? {
            Some(t) if !t.is_finite() || (positive && t <= 0.0) => {
                let must = if positive { "positive and finite" } else { "finite" };
                Err(Error::file(h, format!("-header: {key}={t} must be {must}")))
            }
            t => Ok(t),
        }
    };
    if let Some(t) = value("PIXEL_SIZE", true)? {
        frame.pixel = t / 1000.0;
    }
    frame.detsize_y = frame.pixel * frame.ypixels as f64;
    // finite only: ValueOf finds CLOSE_DISTANCE, negative for a detector swung past 90° (the C's own
    // headers), and noisify only copies it into the header it writes
    if let Some(t) = value("DISTANCE", false)? {
        frame.distance = t / 1000.0;
    }
    // WAVELENGTH is read by the C but only the command line's goes into the header it writes
    if let Some(t) = value("BEAM_CENTER_X", false)? {
        frame.xbeam = t / 1000.0;
    }
    if let Some(t) = value("BEAM_CENTER_Y", false)? {
        frame.ybeam = frame.detsize_y - t / 1000.0;
    }
    Ok((frame, Some(hf)))
}

/// The image's width and height from the number of floats and whatever of the two was given
/// (noisify.c guesses a near-square shape when neither was).
fn image_size(pixels: i64, xpixels: i64, ypixels: i64, out: &mut dyn Write) -> Result<(i64, i64)> {
    let (mut xpixels, mut ypixels) = (xpixels, ypixels);
    if xpixels == 0 && ypixels == 0 {
        writeln!(out, "WARNING: guessing xy pixel dimensions.").map_err(io)?;
        xpixels = (pixels as f64).sqrt() as i64;
        ypixels = pixels / xpixels;
        while pixels != xpixels * ypixels && xpixels > 0 {
            xpixels -= 1;
            ypixels = pixels / xpixels.max(1);
        }
        if pixels != xpixels * ypixels {
            xpixels = pixels;
            ypixels = 1;
        }
    }
    if xpixels != 0 && ypixels == 0 {
        ypixels = pixels / xpixels;
    }
    if xpixels == 0 && ypixels != 0 {
        xpixels = pixels / ypixels;
    }
    if xpixels < 0 || ypixels < 0 {
        return Err(Error::flag("-detpixels", "negative image size"));
    }
    if xpixels * ypixels <= 0 {
        return Err(Error::flag("-detpixels", "image has no pixels"));
    }
    Ok((xpixels, ypixels))
}

/// No output over the float image, the header file or another output.
fn check_files(c: &NoisifyConfig, floatname: &str) -> Result<()> {
    let mut inputs = vec![("-floatfile", os_path(floatname))];
    if let Some(h) = &c.headerfile {
        inputs.push(("-header", os_path(h)));
    }
    let mut outputs = vec![("-intfile", os_path(&c.intfile))];
    if c.calculate_noise {
        outputs.push(("-noisefile", os_path(&c.noisefile)));
    }
    if c.write_pgm {
        outputs.push(("-pgmfile", os_path(&c.pgmfile)));
    }
    if let Some(p) = &c.png {
        outputs.push(("--png", os_path(p)));
    }
    crate::io::atomic::check_no_clobber(&inputs, &outputs)
}

/// The float image's pixels (little-endian floats), refused unless the file holds exactly the image:
/// too short, or longer (another detector size: its first rows would be read as this image's).
fn import_floats(floatname: &str, bytes: &[u8], frame: &Frame, out: &mut dyn Write) -> Result<Vec<f32>> {
    let np = frame.pixels();
    if bytes.len() != np * 4 {
        return Err(Error::file(
            floatname,
            format!(
                "-floatfile: holds {} bytes ({} floats), the {}x{} image (-detpixels/-detsize/-pixel or -header) is {np} floats",
                bytes.len(),
                bytes.len() / 4,
                frame.xpixels,
                frame.ypixels
            ),
        ));
    }
    let pixels: Vec<f32> = bytes[..np * 4].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    crate::io::float::require_finite(&pixels, os_path(floatname).as_path(), "-floatfile", Some(frame.xpixels as usize))?;
    writeln!(out, "importing {} pixel intensites: {}", np, floatname).map_err(io)?;
    Ok(pixels)
}

/// The parameter summary noisify.c prints before it starts.
fn parameter_report(c: &NoisifyConfig, frame: &Frame, noise: &NoiseLevels, seed: i64, calib_seed: i64) -> String {
    let psf_fwhm = c.psf_fwhm as f64;
    let mut s = String::new();
    s += &format!(
        "  distance={} detsize={}x{}  pixel={} meters ({}x{} pixels)\n",
        cf("%g", frame.distance),
        cf("%g", detsize_x_of(frame.pixel, frame.xpixels)),
        cf("%g", frame.detsize_y),
        cf("%g", frame.pixel),
        frame.xpixels,
        frame.ypixels
    );
    s += &format!("  Xbeam={} Ybeam={}\n", cf("%g", frame.xbeam), cf("%g", frame.ybeam));
    if c.psftype == PsfType::Gauss {
        s += &format!("  Gaussian PSF fwhm = {} um ", cf("%g", psf_fwhm * 1e6));
    }
    if c.psftype == PsfType::Fiber {
        s += &format!("  fiber PSF fwhm = {} um ", cf("%g", psf_fwhm * 1e6));
    }
    if c.psftype != PsfType::Unknown && c.psf_radius == 0 {
        s += "  with automatic rendering radius\n";
    }
    if c.psftype != PsfType::Unknown && c.psf_radius >= 0 {
        s += &format!("  with rendering radius: {}\n", c.psf_radius);
    }
    s += &format!("  seed: {}\n", ci("%ld", seed));
    s += &format!("  calibration noise seed: {}\n", ci("%ld", calib_seed));
    s += &format!("  calibration_noise = {} %\n", cf("%g", noise.calibration * 100.0));
    s += &format!("  input file scale = {}\n", cf("%g", c.photon_scale));
    s += &format!("  readout_noise = {} ADU\n", cf("%g", noise.readout));
    s += &format!("  flicker_noise = {} %\n", cf("%g", noise.flicker * 100.0));
    s += &format!("  quantum_gain = {} ADU/photon\n", cf("%g", c.quantum_gain));
    s += &format!("  adc_offset = {} ADU\n\n", cf("%g", c.adc_offset));
    s
}

/// Photons per pixel: the float image times fluence, r_e² and `-scale`, with a warning for every
/// negative pixel.
fn photon_image(c: &NoisifyConfig, floatname: &str, floatimage: &[f32], out: &mut dyn Write) -> Result<Vec<f32>> {
    let mut max_i = 0.0f64;
    let factor = c.fluence * R_E_SQR;
    let mut photonimage = vec![0.0f32; floatimage.len()];
    for (p, &v) in photonimage.iter_mut().zip(floatimage) {
        let vi = v as f64;
        if max_i < vi {
            max_i = vi;
        }
        if vi < 0.0 {
            writeln!(out, "WARNING: negative intensity in {}: {}", floatname, cf("%g", vi)).map_err(io)?;
        }
        *p = (factor * c.photon_scale * vi) as f32;
    }
    writeln!(out, "maximum value in input file: {} ( {} on photon scale)", cf("%g", max_i), cf("%g", max_i * c.photon_scale * c.fluence * R_E_SQR))
        .map_err(io)?;
    Ok(photonimage)
}

/// The noiseless integer image (`-intfile`), its `--png` preview under `-nonoise`, and the PGM.
fn write_noiseless(c: &NoisifyConfig, frame: &Frame, hbytes: &[u8], photonimage: &[f32], files: &mut OutputSet, out: &mut dyn Write) -> Result<()> {
    let conv = |adu: f64| -> (u16, u32) {
        let mut adu = adu;
        if adu > 2147483647.0 {
            adu = 2147483647.0;
        }
        if adu > 65535.0 {
            adu = 65535.0;
        }
        (to_u16(adu), to_u32(adu))
    };
    let (int16, int32): (Vec<u16>, Vec<u32>) = photonimage.par_iter().map(|&p| conv(p as f64 * c.quantum_gain + c.adc_offset)).unzip();
    let pixels = frame.pixels();
    if c.intimage_bits == 16 {
        writeln!(out, "writing {} as {} 2-byte integers", c.intfile, pixels).map_err(io)?;
    } else {
        writeln!(out, "writing {} as {} 4-byte integers", c.intfile, pixels).map_err(io)?;
    }
    files.add_bytes(os_path(&c.intfile).as_path(), &image_bytes(hbytes, c.intimage_bits, &int16, &int32))?;
    let (xu, yu) = (frame.xpixels as usize, frame.ypixels as usize);
    if !c.calculate_noise {
        write_png(c, xu, yu, &int16, &int32, files)?;
    }
    if c.write_pgm {
        writeln!(out, "writing {} as 1-byte integers", c.pgmfile).map_err(io)?;
        let mut b = format!("P5\n{} {}\n# pixels scaled by 1\n255\n", xu, yu).into_bytes();
        b.extend(int16.iter().map(|&v| v.min(255) as u8));
        files.add_bytes(os_path(&c.pgmfile).as_path(), &b)?;
    }
    Ok(())
}

/// Beam flicker, calibration error and Poisson noise on every pixel, in raster order from the one
/// shared random stream; returns the photons on the image.
fn add_photon_noise(photonimage: &mut [f32], noise: &NoiseLevels, rng: &mut NrRandom, seed: &mut i64, calib_seed: &mut i64) -> f64 {
    let mut sum = 0.0f64;
    for p in photonimage.iter_mut() {
        let mut photons0 = *p as f64;
        if noise.flicker > 0.0 {
            photons0 *= 1.0 + noise.flicker * rng.gaussdev(seed) as f64;
        }
        if noise.calibration > 0.0 {
            photons0 *= 1.0 + noise.calibration * rng.gaussdev(calib_seed) as f64;
        }
        *p = rng.poidev(photons0 as f32, seed);
        sum += *p as f64;
    }
    sum
}

/// Gain, ADC offset and read-out noise: the 16- and 32-bit integer images, the photons on the image
/// and the overloads at the chosen width.
fn read_out(c: &NoisifyConfig, photonimage: &[f32], readout_noise: f64, rng: &mut NrRandom, seed: &mut i64) -> (Vec<u16>, Vec<u32>, f64, u64) {
    let mut sum = 0.0f64;
    let mut overloads = 0u64;
    let mut int16 = vec![0u16; photonimage.len()];
    let mut int32 = vec![0u32; photonimage.len()];
    for (i, &p) in photonimage.iter().enumerate() {
        sum += p as f64;
        let mut adu = p as f64 * c.quantum_gain + c.adc_offset;
        if readout_noise > 0.0 {
            adu += readout_noise * rng.gaussdev(seed) as f64;
        }
        if adu > 2147483647.0 {
            adu = 2147483647.0;
            if c.intimage_bits == 32 {
                overloads += 1;
            }
        }
        int32[i] = to_u32(adu);
        if adu > 65535.0 {
            adu = 65535.0;
            if c.intimage_bits == 16 {
                overloads += 1;
            }
        }
        int16[i] = to_u16(adu);
    }
    (int16, int32, sum, overloads)
}

/// `--png`: a preview of the integer image just written (the port's option, not noisify.c's).
fn write_png(c: &NoisifyConfig, xu: usize, yu: usize, int16: &[u16], int32: &[u32], files: &mut OutputSet) -> Result<()> {
    let Some(p) = &c.png else { return Ok(()) };
    let adu: Vec<f32> = if c.intimage_bits == 16 { int16.iter().map(|&v| v as f32).collect() } else { int32.iter().map(|&v| v as f32).collect() };
    let p = os_path(p);
    let p = p.as_path();
    files.add_bytes(p, &crate::io::png::png_preview_bytes(p, &adu, xu, yu, false)?)
}

fn detsize_x_of(pixel: f64, xpixels: i64) -> f64 {
    pixel * xpixels as f64
}
