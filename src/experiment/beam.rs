//! X-ray sources: a `-sourcefile`, or the C's grid of divergence angles times dispersion wavelengths.
//! nanoBragg.c L2310-L2430.

use crate::base::c::printf::{cf, g};
use crate::base::log::Log;
use crate::experiment::sampling::Sweep;
use crate::base::vec3::{rotate_axis, unitize, V3};
use crate::{Error, Result};
use std::path::Path;

/// Distance of the (far) source from the sample, metres: only its direction matters.
pub const SOURCE_DISTANCE: f64 = 10.0;

/// One source point: unit vector from the sample towards the source (the C's source_X/Y/Z after
/// unitizing) and its wavelength in metres.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Source {
    pub dir: V3,
    pub lambda: f64,
}

/// The wavelengths (m) this program simulates: `-lambda`'s range, and every source's (a `-sourcefile`
/// line's, a `-dispersion` step's: 200 % and more made wavelengths of 0 and below, and a NaN image).
pub use crate::base::consts::WAVELENGTH_RANGE_M as WAVELENGTH_RANGE;

/// The incident beam: sources (directions and wavelengths), the divergence and dispersion grids they
/// came from, fluence and polarization.
#[derive(Clone, Debug)]
pub struct Beam {
    pub sources: Vec<Source>,
    /// Divergence points the C reports (-1 for a source file).
    pub divsteps: i64,
    pub hdiv: Sweep,
    pub vdiv: Sweep,
    pub disp: Sweep,
    /// Central wavelength (metres).
    pub lambda0: f64,
    /// Kahn factor.
    pub polarization: f64,
    pub nopolar: bool,
    /// photons/m²
    pub fluence: f64,
    /// Unit vector along the beam, source to sample.
    pub beam_vector: V3,
    /// The E-vector direction.
    pub polar_vector: V3,
    /// unit(beam × polar): the "vertical" axis of the divergence grid.
    pub vert_vector: V3,
}

/// The sources and the count of divergence points the C reports (-1 for a source file, as the C).
pub struct SourceSet {
    pub sources: Vec<Source>,
    pub divsteps: i64,
}


/// Build the source list as the C does, logging what the C prints. `file`: the `-sourcefile` name
/// and its columns as read (`io::sourcefile::read_source_columns`).
#[allow(clippy::too_many_arguments)]
pub fn build_sources(
    file: Option<(&Path, &[Vec<f64>])>,
    beam: &V3,
    polar: &V3,
    vert: &V3,
    lambda0: f64,
    hdiv: Sweep,
    vdiv: Sweep,
    disp: Sweep,
    round_div: bool,
    log: &mut Log,
) -> Result<SourceSet> {
    let mut raw: Vec<(V3, f64, f64)> = Vec::new();
    let mut divsteps: i64 = -1;
    if let Some((path, cols)) = file {
        raw = source_points(path, cols, beam, lambda0)?;
    }
    if raw.is_empty() {
        let mut kept = Vec::new();
        for hdiv_tic in 0..hdiv.steps {
            for vdiv_tic in 0..vdiv.steps {
                let h = hdiv.step * hdiv_tic as f64 - hdiv.range / 2.0;
                let v = vdiv.step * vdiv_tic as f64 - vdiv.range / 2.0;
                // force an elliptical divergence (a zero range gives NaN, which is kept, as in the C)
                let mut test = (h * h - hdiv.step * hdiv.step / 4.0 * (1 - hdiv.steps % 2) as f64) / hdiv.range / hdiv.range;
                test += (v * v - vdiv.step * vdiv.step / 4.0 * (1 - vdiv.steps % 2) as f64) / vdiv.range / vdiv.range;
                if round_div && test * 4.0 > 1.1 {
                    continue;
                }
                log.line(format!("divergence deviation: {} {}", g(h), g(v)));
                kept.push((h, v));
            }
        }
        divsteps = kept.len() as i64;
        let lambdas: Vec<f64> = (0..disp.steps).map(|k| lambda0 * (1.0 + disp.step * k as f64 - disp.range / 2.0)).collect();
        for (k, l) in lambdas.iter().enumerate() {
            log.line(format!("lambda{k} = {}", cf("%.15g", *l)));
        }
        // the library's callers (Python) reach here without the flags' check of -lambda
        check_wavelength(lambda0)?;
        check_dispersion(disp.range, lambda0, lambdas.iter().copied())?;
        let weight = 1.0 / (kept.len() * lambdas.len()) as f64;
        for &(h, v) in &kept {
            let toward_source = [-SOURCE_DISTANCE * beam[0], -SOURCE_DISTANCE * beam[1], -SOURCE_DISTANCE * beam[2]];
            // divergence is in angle space: "horizontal" is the E-vector of the incident beam
            let tilted = rotate_axis(&toward_source, polar, v);
            let dir = rotate_axis(&tilted, vert, h);
            for &l in &lambdas {
                raw.push((dir, weight, l));
            }
        }
    }
    log.line(format!("  created a total of {} sources:", raw.len()));
    let mut sources = Vec::with_capacity(raw.len());
    for (pos, intensity, lambda) in raw {
        log.line(format!("{} {} {}   {} {}", g(pos[0]), g(pos[1]), g(pos[2]), g(intensity), g(lambda)));
        sources.push(Source { dir: unitize(&pos).0, lambda });
    }
    if sources.is_empty() {
        return Err(Error::setup("no X-ray sources: the divergence settings leave no source point"));
    }
    Ok(SourceSet { sources, divsteps })
}

/// `-lambda` (metres) within [`WAVELENGTH_RANGE`]. Shared by simulate and nearbragg.
pub fn check_wavelength(lambda0: f64) -> Result<()> {
    if WAVELENGTH_RANGE.contains(&lambda0) {
        return Ok(());
    }
    Err(Error::flag("-lambda", format!("{lambda0:e} m is not an X-ray wavelength this program can simulate (1e-6 to 1e7 Angstrom)")))
}

/// `-dispersion`: the wavelengths of its steps (`lambdas`, around `lambda0` by the fraction `range`)
/// must be X-rays in [`WAVELENGTH_RANGE`]: 200 % and more reach 0 and below, where nanoBragg.c and
/// nonBragg.c divide by the wavelength (a NaN image) and nearBragg.c takes its phases (NaN, or an
/// image of a negative wavelength). Shared by simulate, nonbragg and nearbragg.
pub fn check_dispersion(range: f64, lambda0: f64, lambdas: impl IntoIterator<Item = f64>) -> Result<()> {
    match lambdas.into_iter().find(|l| !WAVELENGTH_RANGE.contains(l)) {
        None => Ok(()),
        Some(l) => Err(Error::flag("-dispersion", format!("{}% around {} m reaches a wavelength of {} m, outside 1e-16 to 1e-3 m", g(range * 100.0), g(lambda0), g(l)))),
    }
}

/// What makes a source line (`-sourcefile`, here and in nonbragg) no X-ray source: a wavelength that is
/// not positive or outside [`WAVELENGTH_RANGE`] (the column is in metres), or a position at the sample
/// (no direction). `None` for a good one.
pub fn source_problem(pos: &V3, lambda: f64) -> Option<String> {
    if !(lambda > 0.0 && lambda.is_finite()) {
        Some(format!("wavelength {} m; it must be positive", g(lambda)))
    } else if !WAVELENGTH_RANGE.contains(&lambda) {
        Some(format!("wavelength {} m, outside 1e-16 to 1e-3 m (the column is in metres)", g(lambda)))
    } else if *pos == [0.0; 3] {
        Some("a source at the sample position (0 0 0) has no direction".into())
    } else {
        None
    }
}

/// Sources from the columns of the file `path` (named in errors only): missing values take the C's
/// defaults (a point 10 m up the beam, intensity 1, `lambda0`), then each is checked.
pub fn source_points(path: &Path, cols: &[Vec<f64>], beam: &V3, lambda0: f64) -> Result<Vec<(V3, f64, f64)>> {
    let n = cols.first().map_or(0, |c| c.len());
    if n == 0 || cols.len() < 5 || cols.iter().any(|c| c.len() != n) {
        return Err(Error::file(path, "no sources in file"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let d = |c: usize, default: f64| if cols[c][i].is_nan() { default } else { cols[c][i] };
        let x = d(0, -SOURCE_DISTANCE * beam[0]);
        let y = d(1, -SOURCE_DISTANCE * beam[1]);
        let z = d(2, -SOURCE_DISTANCE * beam[2]);
        let intensity = d(3, 1.0);
        let lambda = d(4, lambda0);
        if [x, y, z, intensity, lambda].iter().all(|&v| v == 0.0) {
            return Err(Error::file(path, format!("source {} (counting non-blank lines) holds no numbers: expected X Y Z I lambda", i + 1)));
        }
        if ![x, y, z, intensity].iter().all(|v| v.is_finite()) {
            return Err(Error::file(path, format!("source {} has a value that is not finite", i + 1)));
        }
        if let Some(why) = source_problem(&[x, y, z], lambda) {
            return Err(Error::file(path, format!("source {}: {why}", i + 1)));
        }
        out.push(([x, y, z], intensity, lambda));
    }
    Ok(out)
}
