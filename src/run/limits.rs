//! Resource checks made before anything is allocated: the memory a run needs (images, orientation and
//! source tables, the structure-factor grid, the setup log) against what the machine has (or
//! `NANOBRAGG_MAX_MEMORY` / `--max-memory`), with checked arithmetic wherever sizes multiply.

use crate::run::config::Config;
use crate::base::consts::RTD;
use crate::base::vec3::{cross, dot, V3};
use crate::experiment::detector::detector_pixels;
use crate::experiment::sampling::{resolve_mosaic, resolve_phi, resolve_sweep, resolve_thickness, sanitize};
use crate::{Error, Result};
use crate::base::memory::{human, memory_budget, user_limited};

/// An estimate of the run's memory and work, made from the flags alone.
#[derive(Clone, Copy, Debug)]
pub struct Estimate {
    pub pixels: u64,
    pub bytes: u64,
    /// pixel × sub-pixel × source × domain × phi × layer evaluations (oversampling 1 when automatic).
    pub samples: f64,
}

const LOG_LINE: u64 = 96;

/// A direction given by `flag`, refused when zero or not finite: nanoBragg.c, nonBragg.c and
/// nearBragg.c use it unchecked (a zero beam or detector axis gives NaN or an image on one point).
pub fn check_direction(flag: &str, v: &V3) -> Result<()> {
    let len2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
    if len2 > 1e-200 && len2.is_finite() {
        return Ok(());
    }
    Err(Error::flag(flag, format!("{} {} {} has no direction (a zero or non-finite vector)", v[0], v[1], v[2])))
}

/// The detector's fast and slow axes must span a plane: parallel axes put every pixel on one line
/// (nanoBragg.c, nonBragg.c and nearBragg.c render it anyway).
pub fn check_detector_axes(f: &V3, s: &V3) -> Result<()> {
    let c = cross(f, s);
    let sin2 = dot(&c, &c) / (dot(f, f) * dot(s, s));
    if sin2 > 1e-12 {
        return Ok(());
    }
    Err(Error::flag("-sdet_vector", format!("{} {} {} is parallel to -fdet_vector {} {} {}: the detector needs two directions", s[0], s[1], s[2], f[0], f[1], f[2])))
}

/// A photon count of `flag` (in `unit`) between 0 and 1e100: a negative one gives negative photon
/// counts, beyond 1e100 an overflow; `why` is added to the message.
fn check_photons(flag: &str, v: f64, unit: &str, why: &str) -> Result<()> {
    if (0.0..=1e100).contains(&v) {
        return Ok(());
    }
    Err(Error::flag(flag, format!("{} {unit} must be between 0 and 1e100{why}", crate::base::c::printf::g(v))))
}

/// `-fluence` (photons/m²).
pub fn check_fluence(fluence: f64) -> Result<()> {
    check_photons("-fluence", fluence, "photons/m^2", "")
}

/// `-flux` (photons/s).
pub fn check_flux(flux: f64) -> Result<()> {
    check_photons("-flux", flux, "photons/s", " (a negative flux gives negative photon counts)")
}

/// `-polar`: the Kahn factor is a fraction between -1 and 1 (beyond, the C's polarization factor
/// goes negative: negative pixels).
pub fn check_polarization(kahn: f64) -> Result<()> {
    if kahn.abs() <= 1.0 {
        return Ok(());
    }
    Err(Error::flag("-polar", format!("Kahn factor {kahn} must be between -1 and 1")))
}

/// `-roi xmin xmax ymin ymax` (inclusive, after the programs' defaults for bounds not given): an
/// inverted region renders no pixel, an all-zero image (the C writes it).
pub fn check_roi(r: [i64; 4]) -> Result<()> {
    if r[0] <= r[1] && r[2] <= r[3] {
        return Ok(());
    }
    Err(Error::flag("-roi", format!("inverted region: needs xmin <= xmax and ymin <= ymax (got {} {} {} {})", r[0], r[1], r[2], r[3])))
}

/// The detector's distance from the sample (`-distance`, or `-close_distance` where it rules), in any
/// unit: zero puts the detector at the sample (nonBragg.c divides by it; noisify.c writes DISTANCE=0
/// into its header). A negative one is a detector swung past 90° (the C's own headers say
/// CLOSE_DISTANCE < 0 then), so it passes.
pub fn check_distance(flag: &str, d: f64) -> Result<()> {
    if d.is_finite() && d != 0.0 {
        return Ok(());
    }
    Err(Error::flag(flag, "the detector cannot be at the sample"))
}

/// The options of structure factors computed from an atomic model, given without one (they did
/// nothing, silently: `-hklout` wrote no file).
fn check_model_options(m: &crate::sfcalc::ModelConfig) -> Result<()> {
    if m.path().is_some() {
        return Ok(());
    }
    let given = [("-hklout", m.hklout.is_some()), ("-F000", m.f000), ("-spacegroup", m.space_group.is_some()), ("-anomalous", m.anomalous), ("-k_sol", m.k_sol != 0.0), ("-b_sol", m.b_sol != 0.0)];
    match given.iter().find(|(_, g)| *g) {
        Some((f, _)) => Err(Error::flag(*f, "applies to structure factors computed from an atomic model: give -pdb FILE or -cif FILE")),
        None => Ok(()),
    }
}

/// `--png-legend` without the `--png` preview it draws on (it did nothing, silently).
pub fn check_dependent_outputs(cfg: &Config) -> Result<()> {
    if cfg.output.png_legend && cfg.output.pngfile.is_none() {
        return Err(Error::flag("--png-legend", "draws a scale strip on the --png preview: give --png FILE"));
    }
    Ok(())
}

/// Values that can only give a wrong image (NaN, infinities, negative photon counts), refused up
/// front with the flag that set them.
pub fn check_values(params: &crate::experiment::params::Params) -> Result<()> {
    check_model_options(&params.model)?;
    let flag = |f: &str, why: String| Err(Error::flag(f, why));
    for (f, v) in [
        ("-fdet_vector", params.fdet_vector),
        ("-sdet_vector", params.sdet_vector),
        ("-odet_vector", params.odet_vector),
        ("-beam_vector", params.beam_vector),
        ("-polar_vector", params.polar_vector),
        ("-spindle_axis", params.spindle_vector),
        // a zero axis shrank the detector's axes to length cos 2θ (nanoBragg.c rotates about it
        // unchecked); unused when the angle is 0
        ("-twotheta_axis", if params.detector_twotheta != 0.0 { params.twotheta_axis } else { [0.0, 1.0, 0.0] }),
    ] {
        check_direction(f, &v)?;
    }
    if params.convention == crate::experiment::params::Convention::Custom {
        check_detector_axes(&params.fdet_vector, &params.sdet_vector)?;
    }
    crate::experiment::beam::check_wavelength(params.lambda0)?;
    // nanoBragg.c steps each sensor layer along the normal by the thickness: a huge one moved the
    // pixels off to infinity and left an empty image
    if params.detector_thick > crate::base::consts::MAX_SENSOR_THICKNESS_M {
        return flag("-detector_thick", format!("{} um is not a sensor's thickness (at most 1e6 um, 1 m)", crate::base::c::printf::g(params.detector_thick * 1e6)));
    }
    // a sensor with thickness and no absorption captures nothing (nanoBragg.c's capture fraction
    // exp(-0)-exp(-0) = 0): an all-zero image, exit 0
    if params.detector_thick > 0.0 && params.detector_mu == Some(0.0) {
        return flag("-detector_absorb", format!("an infinite absorption depth (mu = 0) with -detector_thick {} um captures no photons: the image would be all zeros; give a depth in um, or leave -detector_absorb out (depth = the thickness)", crate::base::c::printf::g(params.detector_thick * 1e6)));
    }
    if params.default_f.abs() > 1e100 {
        return flag("-default_F", format!("{} is too large: its square overflows", params.default_f));
    }
    check_fluence(params.fluence)?;
    check_flux(params.flux)?;
    if !(params.water_size >= 0.0 && params.water_size <= 1.0) {
        return flag("-water", format!("a droplet of {} m must be between 0 and 1 m (a negative size gives negative photon counts)", params.water_size));
    }
    check_polarization(params.polarization)?;
    if let Some(m) = params.mosaic_spread {
        if !(m.abs() <= 2.0 * std::f64::consts::PI) {
            return flag("-mosaic", format!("{} degrees is more than a full turn", m * RTD));
        }
    }
    for (f, n) in [("-Na", params.na), ("-Nb", params.nb), ("-Nc", params.nc)] {
        if n > 1e7 {
            return flag(f, format!("{n} unit cells is too many (at most 1e7 per axis)"));
        }
    }
    Ok(())
}

/// Estimate memory and work before setup; refuse (exit 9) what cannot fit, naming the flags.
pub fn check_run(cfg: &Config) -> Result<Estimate> {
    let (_, _, fp, sp) = detector_pixels(&cfg.params);
    if fp <= 0 || sp <= 0 {
        return Ok(Estimate { pixels: 0, bytes: 0, samples: 0.0 }); // setup names the problem
    }
    let too_big = |what: String| Error::setup(what);
    // what sized the detector: a geometry file's panels, else the flags
    let sized_by = match (&cfg.params.expt, &cfg.params.geom) {
        (Some(e), _) => format!("--expt {}", e.path.display()),
        (None, Some(g)) => format!("--geom {}", g.display()),
        (None, None) => "-detpixels/-detsize/-pixel".to_string(),
    };
    let mut pixels = (fp as u64).checked_mul(sp as u64).filter(|&n| n < (1u64 << 40)).ok_or_else(|| {
        too_big(format!("{sized_by}: a detector of {fp} x {sp} pixels is far too large"))
    })?;
    // a detector of several panels (--expt without --panel): all of them
    if let (Some(path), None) = (&cfg.params.geom, cfg.params.panel) {
        let model = crate::run::geom::read(path)?;
        pixels = model.panels.iter().map(|p| ((p.max_fs - p.min_fs + 1) as u64).saturating_mul((p.max_ss - p.min_ss + 1) as u64)).fold(0u64, u64::saturating_add);
    } else if let (Some(src), None) = (&cfg.params.expt, cfg.params.panel) {
        let model = crate::run::expt::read(src)?;
        pixels = model.panels.iter().map(|p| (p.image_size[0] as u64).saturating_mul(p.image_size[1] as u64)).fold(0u64, u64::saturating_add);
    }
    let (_, _, phisteps) = resolve_phi(cfg.params.osc.unwrap_or(-1.0), cfg.params.phistep.unwrap_or(-1.0), cfg.params.phisteps.unwrap_or(-1), RTD);
    let hdiv = sanitize(resolve_sweep(cfg.params.hdivrange.unwrap_or(-1.0), cfg.params.hdivstep.unwrap_or(-1.0), cfg.params.hdivsteps.unwrap_or(-1), 1.0));
    let vdiv = sanitize(resolve_sweep(cfg.params.vdivrange.unwrap_or(-1.0), cfg.params.vdivstep.unwrap_or(-1.0), cfg.params.vdivsteps.unwrap_or(-1), 1.0));
    let disp = sanitize(resolve_sweep(cfg.params.dispersion, -1.0, cfg.params.dispsteps.unwrap_or(-1), 1.0));
    let thick = sanitize(resolve_thickness(cfg.params.detector_thick, -1.0, cfg.params.detector_thicksteps.unwrap_or(-1)));
    let (_, domains, _) = resolve_mosaic(cfg.params.mosaic_spread.unwrap_or(-1.0), cfg.params.mosaic_domains.unwrap_or(-1));
    let c = |v: i64| v.max(1) as u64;
    let (phisteps, domains) = (c(phisteps as i64), c(domains as i64));
    let divs = c(hdiv.steps as i64).saturating_mul(c(vdiv.steps as i64));
    let sources = match &cfg.params.source_file {
        // at most one source per two bytes of the file
        Some(p) => std::fs::metadata(p).map(|m| m.len() / 2 + 1).unwrap_or(1),
        None => divs.saturating_mul(c(disp.steps as i64)),
    };
    let os = c(cfg.params.oversample.unwrap_or(1) as i64);
    let f = |what: &str, n: u64, per: u64| -> (String, u64) { (what.to_string(), n.saturating_mul(per)) };
    let mut parts = vec![
        f(&format!("the float image ({sized_by})"), pixels, 4),
        f("the output images", 1, crate::run::outputs::WRITERS.iter().filter(|w| w.requested(cfg).is_some()).map(|w| w.memory(pixels)).fold(0u64, u64::saturating_add)),
        f("the orientation table (-phisteps x -mosaic_dom)", phisteps.saturating_mul(domains), 72 + LOG_LINE / 8),
        f("the mosaic domains (-mosaic_dom)", domains, 72),
        f("the sources (-divsteps/-hdivsteps/-vdivsteps x -dispsteps, or -sourcefile)", sources, 48 + 2 * LOG_LINE),
        f("the setup log (-phisteps, -detector_thicksteps, divergence points)", phisteps.saturating_add(c(thick.steps as i64)).saturating_add(divs).saturating_add(c(disp.steps as i64)), LOG_LINE),
    ];
    if cfg.mask.is_some() || cfg.img.is_some() {
        parts.push(f("the -mask/-img images", pixels, 4));
    }
    let bytes = parts.iter().fold(0u64, |a, p| a.saturating_add(p.1)).saturating_add(32 << 20);
    let budget = memory_budget();
    if bytes > budget {
        let worst = parts.iter().max_by_key(|p| p.1).map(|p| p.0.clone()).unwrap_or_default();
        return Err(Error::setup(format!(
            "this run needs about {} of memory (mostly {worst}) but only {} is available{}; reduce it or raise the limit",
            human(bytes),
            human(budget),
            if user_limited() { " under --max-memory/NANOBRAGG_MAX_MEMORY" } else { "" }
        )));
    }
    let samples = pixels as f64 * (os * os) as f64 * sources as f64 * domains as f64 * phisteps as f64 * c(thick.steps as i64) as f64;
    Ok(Estimate { pixels, bytes, samples })
}

/// A rough wall time for `samples` evaluations (about 1e8 per second per core), as text.
pub fn time_hint(samples: f64) -> Option<String> {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as f64;
    let s = samples / (1e8 * cores);
    if s < 600.0 {
        return None;
    }
    let t = if s < 7200.0 {
        format!("{:.0} minutes", s / 60.0)
    } else if s < 3.0 * 86400.0 {
        format!("{:.0} hours", s / 3600.0)
    } else if s < 3.0 * 365.0 * 86400.0 {
        format!("{:.0} days", s / 86400.0)
    } else {
        format!("{:.1e} years", s / (365.0 * 86400.0))
    };
    Some(format!("note: about {samples:.2e} sample evaluations: this run may take {t} on {cores} cores"))
}
