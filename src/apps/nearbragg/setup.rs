//! nearBragg.c's setup before its pixel loop: detector size (lines 479-491), beam centre, two-theta
//! and pix0 (lines 493-520), the divergence, dispersion and source-depth steps (lines 523-746), the
//! divergence points kept inside the ellipse (lines 904-918), the oversampling (lines 837-857), and
//! the port's refusals of what cannot run.

use super::config::{NearBraggConfig, UNSET};
use crate::base::vec3::{rotate_axis, V3};
use crate::{Error, Result};

/// A range swept in steps (nearBragg.c's `hdivrange/hdivstep/hdivsteps` and its siblings).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Steps {
    pub range: f64,
    pub step: f64,
    pub steps: i32,
}

/// Most steps along one axis (divergence, dispersion, depth) or sub-pixels along one pixel edge.
pub const MAX_STEPS: f64 = 1e6;

/// The C's choice of range, step and count from what was given (one of the four identical blocks,
/// lines 523-571), then its sanity check (lines 727-746). `what` names the flag for a refusal.
pub fn resolve_steps(range: f64, step: f64, steps: i32, what: &str) -> Result<Steps> {
    let (mut range, mut step) = (range, step);
    let mut n = steps as f64;
    if steps <= 0 {
        if range < 0.0 {
            if step <= 0.0 {
                (n, range, step) = (1.0, 0.0, 0.0);
            } else {
                (range, n) = (step, 2.0);
            }
        } else if step <= 0.0 {
            (step, n) = (range, 2.0);
        } else {
            n = (range / step).ceil();
        }
    } else if range < 0.0 {
        if step <= 0.0 {
            range = 1.0;
            step = range / steps as f64;
        } else {
            (range, n) = (step, 2.0);
        }
    } else if step <= 0.0 {
        if n <= 1.0 {
            n = 2.0;
        }
        step = range / (n - 1.0);
    }
    if !(n <= MAX_STEPS) {
        return Err(Error::flag(what, format!("{} steps: more than {MAX_STEPS:e} are refused", crate::base::c::printf::g(n))));
    }
    let mut s = Steps { range, step, steps: n as i32 };
    if s.range <= 0.0 || s.step <= 0.0 || s.steps <= 0 {
        s = Steps { range: 0.0, step: 0.0, steps: 1 };
    }
    Ok(s)
}

/// The beam's steps: divergence, dispersion and source depth.
#[derive(Clone, Copy, Debug)]
pub struct BeamSteps {
    pub hdiv: Steps,
    pub vdiv: Steps,
    pub disp: Steps,
    pub depth: Steps,
}

impl BeamSteps {
    pub fn new(c: &NearBraggConfig) -> Result<BeamSteps> {
        Ok(BeamSteps {
            hdiv: resolve_steps(c.hdivrange, c.hdivstep, c.hdivsteps, "-hdivsteps")?,
            vdiv: resolve_steps(c.vdivrange, c.vdivstep, c.vdivsteps, "-vdivsteps")?,
            // no flag sets the dispersion or depth step (nearBragg.c lines 103, 108)
            disp: resolve_steps(c.dispersion, -1.0, c.dispsteps, "-dispsteps")?,
            depth: resolve_steps(c.source_depth, -1.0, c.depthsteps, "-depthsteps")?,
        })
    }

    /// The wavelength of dispersion step `k` (line 1040).
    pub fn lambda(&self, lambda0: f64, k: i32) -> f64 {
        lambda0 * (1.0 + self.disp.step * k as f64 - self.disp.range / 2.0)
    }

    /// The source's depth offset of step `k` (line 1053).
    pub fn ddepth(&self, k: i32) -> f64 {
        self.depth.step * k as f64 - self.depth.range / 2.0
    }

    /// The divergence points (hdiv, vdiv) inside the C's ellipse, in its loop order (lines 906-918).
    pub fn divergence(&self) -> Vec<(f64, f64)> {
        let (h, v) = (&self.hdiv, &self.vdiv);
        let mut out = Vec::new();
        for ht in 0..h.steps {
            for vt in 0..v.steps {
                let hdiv = h.step * ht as f64 - h.range / 2.0;
                let vdiv = v.step * vt as f64 - v.range / 2.0;
                let mut test = (hdiv * hdiv - h.step * h.step / 4.0 * (1 - h.steps % 2) as f64) / h.range / h.range;
                test += (vdiv * vdiv - v.step * v.step / 4.0 * (1 - v.steps % 2) as f64) / v.range / v.range;
                // round_div is always on (`-square_div` is in the help but not parsed); NaN keeps the point
                if test * 4.0 > 1.1 {
                    continue;
                }
                out.push((hdiv, vdiv));
            }
        }
        out
    }
}

/// The detector: its size in pixels, beam centre and vectors (metres).
#[derive(Clone, Debug)]
pub struct Detector {
    pub xpixels: i32,
    pub ypixels: i32,
    pub detsize_x: f64,
    pub detsize_y: f64,
    pub xbeam: f64,
    pub ybeam: f64,
    pub fdet: V3,
    pub sdet: V3,
    pub odet: V3,
    pub pix0: V3,
    pub twotheta: f64,
    /// inclusive: xmin, xmax, ymin, ymax
    pub roi: [i32; 4],
}

/// Most pixels of a detector (the C's `int pixels`).
const MAX_PIXELS: f64 = i32::MAX as f64;

/// Lines 479-520: pixel counts, defaults of the beam centre, two-theta, pix0 and ROI.
pub fn detector(c: &NearBraggConfig) -> Result<Detector> {
    if !(c.pixel > 0.0) {
        return Err(Error::flag("-pixel", format!("pixel size {} mm is not positive", crate::base::c::printf::g(c.pixel * 1000.0))));
    }
    let (mut detsize_x, mut detsize_y) = (c.detsize_x, c.detsize_y);
    if c.xpixels != 0 {
        detsize_x = c.pixel * c.xpixels as f64;
    }
    if c.ypixels != 0 {
        detsize_y = c.pixel * c.ypixels as f64;
    }
    let (xp, yp) = ((detsize_x / c.pixel).ceil(), (detsize_y / c.pixel).ceil());
    if !(xp >= 1.0 && yp >= 1.0 && xp * yp <= MAX_PIXELS) {
        return Err(Error::flag("-detpixels", format!("{} x {} pixels is not a detector this port can hold", crate::base::c::printf::g(xp), crate::base::c::printf::g(yp))));
    }
    let (xpixels, ypixels) = (xp as i32, yp as i32);
    let xbeam = if c.xbeam <= UNSET { (detsize_x - c.pixel) / 2.0 } else { c.xbeam };
    let ybeam = if c.ybeam <= UNSET { (detsize_y + c.pixel) / 2.0 } else { c.ybeam };
    let (mut fdet, mut sdet, mut odet) = (c.fdet, c.sdet, c.odet);
    if c.twotheta > UNSET {
        fdet = rotate_axis(&fdet, &c.spindle, c.twotheta);
        sdet = rotate_axis(&sdet, &c.spindle, c.twotheta);
        odet = rotate_axis(&odet, &c.spindle, c.twotheta);
    }
    let pix0 = c.pix0.unwrap_or_else(|| {
        let p = |k: usize| -xbeam * fdet[k] - ybeam * sdet[k] + c.distance * odet[k];
        [p(0), p(1), p(2)]
    });
    let twotheta = if c.twotheta <= UNSET { 0.0 } else { c.twotheta };
    let r = c.roi;
    let roi = [
        if r[0] < 0 { 0 } else { r[0] },
        if r[1] < 0 { xpixels } else { r[1] },
        if r[2] < 0 { 0 } else { r[2] },
        if r[3] < 0 { ypixels } else { r[3] },
    ];
    // an inverted region renders nothing (the C writes the all-zero image): refused as simulate's
    crate::run::limits::check_roi(roi.map(i64::from))?;
    Ok(Detector { xpixels, ypixels, detsize_x, detsize_y, xbeam, ybeam, fdet, sdet, odet, pix0, twotheta, roi })
}

impl Detector {
    pub fn pixels(&self) -> usize {
        self.xpixels as usize * self.ypixels as usize
    }

    /// Is pixel (x, y) rendered (line 989)?
    pub fn in_roi(&self, x: i32, y: i32) -> bool {
        !(x < self.roi[0] || x > self.roi[1] || y < self.roi[2] || y > self.roi[3])
    }

    /// Pixels rendered.
    pub fn roi_pixels(&self) -> u64 {
        let nx = (self.roi[1].min(self.xpixels - 1) - self.roi[0].max(0) + 1).max(0) as u64;
        let ny = (self.roi[3].min(self.ypixels - 1) - self.roi[2].max(0) + 1).max(0) as u64;
        nx * ny
    }
}

/// The oversampling the C recommends and uses (lines 844-850), and its warning (lines 851-857).
pub fn oversample(c: &NearBraggConfig, size_max: f64, log: &mut String) -> Result<i32> {
    use crate::base::c::printf::g;
    use std::fmt::Write as _;
    let reciprocal_pixel_size = c.lambda0 * c.distance / c.pixel;
    let rec = (3.0 * size_max / reciprocal_pixel_size).ceil();
    if !(rec <= MAX_STEPS) && c.oversample <= 0 {
        return Err(Error::flag("-oversample", format!("the object needs {}-fold oversampling: more than {MAX_STEPS:e} is refused", g(rec))));
    }
    let recommended = if rec <= 0.0 || rec.is_nan() { 1 } else { rec.min(MAX_STEPS) as i32 };
    let mut over = c.oversample;
    if over <= 0 {
        over = recommended;
        let _ = writeln!(log, "auto-selected {over}-fold oversampling");
    }
    if over as f64 > MAX_STEPS.sqrt() * 10.0 {
        return Err(Error::flag("-oversample", format!("{over}-fold oversampling is refused (more than 10000)")));
    }
    if over < recommended {
        let _ = writeln!(log, "WARNING: maximum dimension of sample is {} A", g(size_max * 1e10));
        let _ = writeln!(log, "         but reciprocal pixel size is {} A", g(reciprocal_pixel_size * 1e10));
        let _ = writeln!(log, "         intensity may vary significantly across a pixel!");
        let _ = writeln!(log, "         recommend -oversample {recommended} to work around this");
    }
    Ok(over)
}

/// Refuse a configuration the C could not represent: zero, negative or non-finite wavelength and
/// distances, a wavelength outside simulate's range (so that [`check_dispersion`] blames only
/// `-dispersion`), and what simulate refuses of the same values ([`check_values`]). (Non-finite
/// numbers are refused by the command line already.)
pub fn check(c: &NearBraggConfig) -> Result<()> {
    if !(c.lambda0 > 0.0 && c.lambda0.is_finite()) {
        return Err(Error::flag("-lambda", format!("wavelength {} A is not positive", crate::base::c::printf::g(c.lambda0 * 1e10))));
    }
    crate::experiment::beam::check_wavelength(c.lambda0)?;
    check_values(c)?;
    if !(c.distance > 0.0) {
        return Err(Error::flag("-distance", "the detector distance must be positive"));
    }
    if !c.far_source && !(c.source_distance > 0.0) {
        return Err(Error::flag("-source_distance", "the source distance must be positive (or \"far\")"));
    }
    Ok(())
}

/// What simulate refuses of the same values, with its checks (`run::limits`): a detector axis without
/// a direction or parallel fast and slow axes (nearBragg.c takes them as given: every pixel on one
/// point or one line), and a negative `-fluence` (negative pixels). -odet_vector only places the
/// detector when -pix0_vector does not, -spindle_axis only turns it with a -twotheta; -beam_vector
/// and -polar_vector have no effect in nearBragg.c and are not checked.
fn check_values(c: &NearBraggConfig) -> Result<()> {
    use crate::run::limits::{check_detector_axes, check_direction, check_fluence};
    check_direction("-fdet_vector", &c.fdet)?;
    check_direction("-sdet_vector", &c.sdet)?;
    if c.pix0.is_none() {
        check_direction("-odet_vector", &c.odet)?;
    }
    if c.twotheta > UNSET && c.twotheta != 0.0 {
        check_direction("-spindle_axis", &c.spindle)?;
    }
    check_detector_axes(&c.fdet, &c.sdet)?;
    check_fluence(c.fluence)
}

/// `-dispersion`: every step's wavelength (line 1040) within simulate's range, as simulate and
/// nonbragg refuse it (200 % reached 0: NaN pixels; more, a negative wavelength).
pub fn check_dispersion(c: &NearBraggConfig, steps: &BeamSteps) -> Result<()> {
    crate::experiment::beam::check_dispersion(steps.disp.range, c.lambda0, (0..steps.disp.steps).map(|k| steps.lambda(c.lambda0, k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_as_the_c() {
        let s = |r, st, n| resolve_steps(r, st, n, "x").unwrap();
        assert_eq!(s(-1.0, -1.0, -1), Steps { range: 0.0, step: 0.0, steps: 1 });
        assert_eq!(s(0.0, -1.0, -1), Steps { range: 0.0, step: 0.0, steps: 1 });
        assert_eq!(s(0.001, -1.0, -1), Steps { range: 0.001, step: 0.001, steps: 2 });
        assert_eq!(s(0.001, -1.0, 5), Steps { range: 0.001, step: 0.001 / 4.0, steps: 5 });
        assert_eq!(s(-1.0, -1.0, 4), Steps { range: 1.0, step: 0.25, steps: 4 });
        assert_eq!(s(0.001, 0.0003, -1).steps, 4);
        assert!(resolve_steps(0.001, 1e-300, -1, "x").is_err());
        assert!(resolve_steps(0.001, -1.0, 2_000_000_000, "x").is_err());
    }
}
