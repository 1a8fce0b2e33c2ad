//! What nonBragg.c works out before its pixel loop from the command line alone: the detector's size
//! and region of interest, the sample, the oscillation range, the beam's divergence and dispersion
//! steps.

use crate::base::memory::{human, memory_budget};
use crate::experiment::sampling::{resolve_sweep, sanitize, MAX_OVERSAMPLE};
use super::config::NonBraggConfig;
use crate::base::c::printf::cf;
use crate::base::consts::{AVOGADRO, RTD};
use crate::{Error, Result};
use std::fmt::Write as _;

/// The detector's size: metres and pixels.
pub(super) struct DetectorSize {
    pub detsize_x: f64,
    pub detsize_y: f64,
    pub fpixels: i64,
    pub spixels: i64,
}

/// `-detsize` or `-detpixels` times `-pixel`.
pub(super) fn detector_size(c: &NonBraggConfig) -> Result<DetectorSize> {
    let pixel = c.pixel;
    if !(pixel > 0.0) {
        return Err(Error::flag("-pixel", "the pixel size must be greater than 0"));
    }
    let (mut detsize_x, mut detsize_y) = (c.detsize_x, c.detsize_y);
    if c.fpixels != 0 {
        detsize_x = pixel * c.fpixels as f64;
    }
    if c.spixels != 0 {
        detsize_y = pixel * c.spixels as f64;
    }
    let fpixels = (detsize_x / pixel).ceil() as i64;
    let spixels = (detsize_y / pixel).ceil() as i64;
    if fpixels <= 0 || spixels <= 0 || fpixels * spixels > (1i64 << 34) {
        return Err(Error::flag(c.size_flag.as_deref().unwrap_or("-detsize"), format!("{fpixels}x{spixels} pixels is not a detector")));
    }
    Ok(DetectorSize { detsize_x, detsize_y, fpixels, spixels })
}

/// Bytes per pixel a nonbragg run holds at its peak: the float image, each pixel's last sub-pixel
/// position, and the int, PGM and noise images with their file copies.
const BYTES_PER_PIXEL: u64 = 2 * 4 + 16 + 2 * 2 + 1 + 2 * 2;

/// Bytes of one source (`geometry::Source`: position, intensity, wavelength).
const SOURCE_BYTES: u64 = 5 * 8;

/// What the C does not refuse but cannot simulate: a wavelength, pixel or distance that is not
/// positive (the image would be NaN or infinite, and its noise never end), and a run too large for
/// the memory (the detector, or the divergence × dispersion sources).
pub(super) fn validate(c: &NonBraggConfig, det: &DetectorSize, steps: &BeamSteps) -> Result<()> {
    if c.sourcefile.is_none() && !(c.lambda0 > 0.0) {
        return Err(Error::flag("-lambda", format!("{} A: the wavelength must be greater than 0 (or give -energy)", c.lambda0 * 1e10)));
    }
    if c.sourcefile.is_none() && !crate::experiment::beam::WAVELENGTH_RANGE.contains(&c.lambda0) {
        return Err(Error::flag("-lambda", format!("{:e} m is not an X-ray wavelength this program can simulate (1e-6 to 1e7 Angstrom; or -energy)", c.lambda0)));
    }
    if c.oversample as i64 > MAX_OVERSAMPLE {
        return Err(Error::flag("-oversample", format!("{} sub-pixels per axis is impractical (at most {MAX_OVERSAMPLE})", c.oversample)));
    }
    let (flag, d) = if c.close_distance.is_nan() { ("-distance", c.distance) } else { ("-close_distance", c.close_distance) };
    crate::run::limits::check_distance(flag, d)?;
    check_values(c)?;
    let pixels = (det.fpixels as u64).saturating_mul(det.spixels as u64);
    let need = pixels.saturating_mul(BYTES_PER_PIXEL);
    crate::base::memory::check_alloc(
        || Error::flag(c.size_flag.as_deref().unwrap_or("-detpixels"), format!("{}x{} pixels need about {} of memory; {} is available", det.fpixels, det.spixels, human(need), human(memory_budget()))),
        Some(need),
    )?;
    let sources = [steps.hdiv.steps, steps.vdiv.steps, steps.disp.steps].iter().fold(1u64, |n, &s| n.saturating_mul(s.max(1) as u64));
    let need = sources.saturating_mul(SOURCE_BYTES);
    crate::base::memory::check_alloc(
        || Error::flag(c.steps_flag.as_deref().unwrap_or("-dispsteps"), format!("{sources} sources (divergence steps × dispersion steps) need about {} of memory; {} is available", human(need), human(memory_budget()))),
        Some(need),
    )
}

/// What simulate refuses of the same values, with its checks (`run::limits`): a beam or detector axis
/// without a direction, parallel detector axes (nonBragg.c renders all of these: NaN, zero or a
/// line of pixels), a negative `-fluence` or `-flux` (negative pixels), a Kahn factor beyond ±1.
/// nonBragg.c takes the detector's normal from -fdet_vector × -sdet_vector (its -odet_vector and
/// -spindle_axis are unused), and -twotheta_axis only with an angle.
fn check_values(c: &NonBraggConfig) -> Result<()> {
    use crate::run::limits::{check_detector_axes, check_direction, check_fluence, check_flux, check_polarization};
    for (flag, v) in [("-fdet_vector", &c.fdet), ("-sdet_vector", &c.sdet), ("-beam_vector", &c.beam), ("-polar_vector", &c.polar_vector)] {
        check_direction(flag, v)?;
    }
    if c.twotheta != 0.0 {
        check_direction("-twotheta_axis", &c.twotheta_axis)?;
    }
    check_detector_axes(&c.fdet, &c.sdet)?;
    check_fluence(c.fluence)?;
    check_flux(c.flux)?;
    check_polarization(c.polarization)
}

/// The region of interest (`-roi xmin xmax ymin ymax`, inclusive; the whole detector by default).
#[derive(Clone, Copy)]
pub(super) struct Roi {
    pub xmin: i64,
    pub xmax: i64,
    pub ymin: i64,
    pub ymax: i64,
    /// the detector's size, for [`Roi::pixels`]
    fpixels: i64,
    spixels: i64,
}

impl Roi {
    pub fn new(c: &NonBraggConfig, fpixels: i64, spixels: i64) -> Roi {
        let or = |v: i32, default: i64| if v < 0 { default } else { v as i64 };
        Roi {
            xmin: or(c.roi[0], 0),
            xmax: or(c.roi[1], fpixels),
            ymin: or(c.roi[2], 0),
            ymax: or(c.roi[3], spixels),
            fpixels,
            spixels,
        }
    }

    /// An inverted region (the bounds given, the detector's edges for the others) renders nothing:
    /// refused as simulate's `-roi`.
    pub fn check(&self) -> Result<()> {
        crate::run::limits::check_roi([self.xmin, self.xmax, self.ymin, self.ymax])
    }

    /// The region clipped to the image, as `io` takes it.
    pub fn clipped(&self) -> crate::base::image::Roi {
        crate::base::image::Roi::from_c_bounds([self.xmin, self.xmax, self.ymin, self.ymax], self.fpixels as usize, self.spixels as usize)
    }

    pub fn contains(&self, fpixel: i64, spixel: i64) -> bool {
        !(fpixel < self.xmin || fpixel > self.xmax || spixel < self.ymin || spixel > self.ymax)
    }

    /// The pixels inside, in raster order, as (fpixel, spixel, index in the image).
    pub fn pixels(&self) -> impl Iterator<Item = (i64, i64, usize)> + '_ {
        (0..self.spixels)
            .flat_map(move |s| (0..self.fpixels).map(move |f| (f, s)))
            .filter(move |&(f, s)| self.contains(f, s))
            .map(move |(f, s)| (f, s, (s * self.fpixels + f) as usize))
    }

    /// The C's `progress_pixels` (its count of the region, one more each way than it holds).
    pub fn progress_pixels(&self) -> i64 {
        (self.xmax - self.xmin + 1) * (self.ymax - self.ymin + 1)
    }
}

/// The illuminated sample and the beam's fluence.
pub(super) struct Sample {
    pub fluence: f64,
    /// metres: thickness along the beam, height, width (clipped to the beam)
    pub x: f64,
    pub y: f64,
    pub z: f64,
    /// g/m³
    pub density: f64,
    pub molecules: f64,
}

/// The fluence (from `-flux`, `-exposure`, `-beamsize` if given), the sample clipped by the beam
/// (with the C's warnings, into `s`), its density and number of molecules.
pub(super) fn sample(c: &NonBraggConfig, s: &mut String) -> Sample {
    let mut fluence = c.fluence;
    if c.flux != 0.0 && c.exposure > 0.0 && c.beamsize >= 0.0 {
        fluence = c.flux * c.exposure / c.beamsize / c.beamsize;
    }
    let (sample_x, mut sample_y, mut sample_z) = (c.sample_x, c.sample_y, c.sample_z);
    if c.beamsize >= 0.0 {
        if c.beamsize < sample_y {
            let _ = writeln!(s, "WARNING: clipping sample ({} m high) with beam ({} m)", cf("%lg", sample_y), cf("%lg", c.beamsize));
            sample_y = c.beamsize;
        }
        if c.beamsize < sample_z {
            let _ = writeln!(s, "WARNING: clipping sample ({} m wide) with beam ({} m)", cf("%lg", sample_z), cf("%lg", c.beamsize));
            sample_z = c.beamsize;
        }
    }
    let volume = sample_x * sample_y * sample_z;
    let mut density = c.density;
    if c.molecules != 0.0 {
        density = c.molecules / volume / AVOGADRO * c.molecular_weight;
    }
    let molecules = volume * density * AVOGADRO / c.molecular_weight;
    Sample { fluence, x: sample_x, y: sample_y, z: sample_z, density, molecules }
}

/// The oscillation range: phi sampling only decides the header's OSC_RANGE.
pub(super) fn osc_range(c: &NonBraggConfig) -> f64 {
    let (mut osc, phistep, phisteps) = (c.osc, c.phistep, c.phisteps);
    if phisteps < 0 {
        if osc < 0.0 {
            if phistep <= 0.0 {
                osc = 0.0;
            } else {
                osc = phistep;
            }
        }
    } else if osc < 0.0 {
        if phistep <= 0.0 {
            osc = 1.0 / RTD;
        } else {
            osc = phistep;
        }
    }
    osc
}

/// A divergence or dispersion grid: nanoBragg's rules (nonBragg.c applies the same code), then a
/// range that comes out empty is one step of zero width.
pub(super) type Steps = crate::experiment::sampling::Sweep;

fn resolve_steps(range: f64, step: f64, steps: i32) -> Steps {
    sanitize(resolve_sweep(range, step, steps, 1.0))
}

/// The beam's horizontal and vertical divergence (radians) and its spectral dispersion (fraction).
pub(super) struct BeamSteps {
    pub hdiv: Steps,
    pub vdiv: Steps,
    pub disp: Steps,
}

impl BeamSteps {
    pub fn new(c: &NonBraggConfig) -> BeamSteps {
        BeamSteps {
            hdiv: resolve_steps(c.hdivrange, c.hdivstep, c.hdivsteps),
            vdiv: resolve_steps(c.vdivrange, c.vdivstep, c.vdivsteps),
            disp: resolve_steps(c.dispersion, -1.0, c.dispsteps),
        }
    }
}
