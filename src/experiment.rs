//! `Experiment`: everything nanoBragg.c computes before its pixel loop, resolved from a [`Config`] in
//! the C's order (L1119-L2530). Immutable once built, so a warm benchmark can render it repeatedly.

use crate::cfmt::{cf, g};
use crate::config::{Config, CrystalShape};
use crate::crystal::{build_lattice, cells_from_size, read_matrix_file, Lattice, RTD};
use crate::geometry::{apply_convention, detector_pixels, orient_detector, Detector};
use crate::report::Log;
use crate::rng::{mosaic_rotation_umat, NrRandom};
use crate::sources::{build_sources, Source};
use crate::steps::{resolve_mosaic, resolve_phi, resolve_sweep, resolve_thickness, sanitize, Sweep};
use crate::structure_factors::{read_fdump, read_hkl, HklGrid};
use crate::vec3::{rotate_axis, rotate_umat, V3};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// Thomson cross section of the electron (m^2).
pub const R_E_SQR: f64 = 7.94079248018965e-30;
pub const AVOGADRO: f64 = 6.02214179e23;

/// Largest image we agree to allocate (pixels): 2^31 floats would already be 8 GiB.
pub const MAX_PIXELS: u64 = 1 << 30;

/// One crystal orientation used inside the pixel loop: (a, b, c) in metres for a phi step and mosaic
/// domain, precomputed with exactly the C's arithmetic (rotate_axis about the spindle, then U·v).
#[derive(Clone, Copy, Debug)]
pub struct Orientation {
    pub a: V3,
    pub b: V3,
    pub c: V3,
}

#[derive(Clone, Debug)]
pub struct Experiment {
    pub det: Detector,
    pub lattice: Lattice,
    pub na: f64,
    pub nb: f64,
    pub nc: f64,
    pub shape: CrystalShape,
    pub fudge: f64,
    pub sources: Vec<Source>,
    pub divsteps: i64,
    pub hdiv: Sweep,
    pub vdiv: Sweep,
    pub disp: Sweep,
    pub lambda0: f64,
    pub phi0: f64,
    pub phistep: f64,
    pub phisteps: i32,
    pub osc: f64,
    pub mosaic_spread: f64,
    pub mosaic_umats: Vec<[f64; 9]>,
    /// phisteps × domains orientations, phi outer (loop order of the C).
    pub orientations: Vec<Orientation>,
    pub fhkl: Option<HklGrid>,
    pub default_f: f64,
    pub interpolate: bool,
    pub oversample: usize,
    pub subpixel_size: f64,
    pub oversample_thick: bool,
    pub oversample_polar: bool,
    pub oversample_omega: bool,
    pub thicksteps: i32,
    pub thickstep: f64,
    pub detector_thick: f64,
    pub detector_mu: f64,
    pub polarization: f64,
    pub nopolar: bool,
    pub dmin: f64,
    pub fluence: f64,
    pub water_size: f64,
    pub i_bg: f64,
    /// sources × domains × phi steps × oversample² (layers excluded, as the C).
    pub steps: i64,
    /// Inclusive ROI bounds xmin xmax ymin ymax (the C's default upper bound is one past the end).
    pub roi: [i64; 4],
    pub mask: Option<Vec<u16>>,
    pub mask_path: Option<PathBuf>,
    /// RNG state after the misset and mosaic streams; the noise stream continues from it.
    pub rng: NrRandom,
    /// The noise seed as the C stores it.
    pub seed: i64,
    pub printout: bool,
    pub printout_pixel: Option<(i64, i64)>,
    /// Arithmetic of the fast kernel's per-sample work.
    pub precision: crate::config::Precision,
}

impl Experiment {
    pub fn pixels(&self) -> usize {
        self.det.fpixels * self.det.spixels
    }
    pub fn domains(&self) -> usize {
        self.mosaic_umats.len()
    }
}

/// Resolve an output (or cache) path against `--out-dir`.
pub fn resolve_out(cfg: &Config, p: &Path) -> PathBuf {
    match &cfg.output.out_dir {
        Some(d) if p.is_relative() => d.join(p),
        _ => p.to_path_buf(),
    }
}

/// A seed from the clock, as the C's `-time(NULL)`.
pub fn time_seed() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    -now
}

/// Build the experiment. Setup messages go to `log` in the C's order.
pub fn build(cfg: &Config, log: &mut Log) -> Result<Experiment> {
    build_with(cfg, log, None)
}

/// [`build`] with structure factors already read (an image series reads the HKL file once): no HKL or
/// Fdump file is read or written.
pub fn build_with(cfg: &Config, log: &mut Log, preloaded: Option<HklGrid>) -> Result<Experiment> {
    // the C reads -mask, then -img, before anything else (its GetFrame prints the names)
    for smv in [&cfg.mask, &cfg.img].into_iter().flatten() {
        log.line(format!("reading {}", smv.path.display()));
    }

    // ------------------------------------------------------------------ detector size (L1119)
    let (detsize_f, detsize_s, fpixels, spixels) = detector_pixels(cfg);
    if fpixels <= 0 || spixels <= 0 {
        return Err(Error::setup(format!("detector has no pixels ({fpixels} x {spixels}): check -detpixels, -detsize and -pixel")));
    }
    let npix = (fpixels as u64).checked_mul(spixels as u64).unwrap_or(u64::MAX);
    if npix > MAX_PIXELS {
        return Err(Error::setup(format!(
            "detector of {fpixels} x {spixels} pixels needs {:.1} GiB for the float image alone; the limit is {} pixels",
            npix as f64 * 4.0 / (1u64 << 30) as f64,
            MAX_PIXELS
        )));
    }
    let (fpixels, spixels) = (fpixels as usize, spixels as usize);

    // ------------------------------------------------------------------ fluence and sample clipping (L1129)
    let mut fluence = cfg.params.fluence;
    if cfg.params.flux != 0.0 && cfg.params.exposure > 0.0 && cfg.params.beamsize >= 0.0 {
        fluence = cfg.params.flux * cfg.params.exposure / cfg.params.beamsize / cfg.params.beamsize;
    }
    let (sample_x, mut sample_y, mut sample_z) = (cfg.params.sample_x, cfg.params.sample_y, cfg.params.sample_z);
    if cfg.params.beamsize >= 0.0 {
        if cfg.params.beamsize < sample_y {
            log.line(format!("WARNING: clipping sample ({} m high) with beam ({} m)", g(sample_y), g(cfg.params.beamsize)));
            sample_y = cfg.params.beamsize;
        }
        if cfg.params.beamsize < sample_z {
            log.line(format!("WARNING: clipping sample ({} m wide) with beam ({} m)", g(sample_z), g(cfg.params.beamsize)));
            sample_z = cfg.params.beamsize;
        }
    }

    // ------------------------------------------------------------------ ROI (L1164)
    let mut roi = cfg.params.roi.unwrap_or([-1, -1, -1, -1]);
    if roi[0] < 0 {
        roi[0] = 0;
    }
    if roi[1] < 0 {
        roi[1] = fpixels as i64;
    }
    if roi[2] < 0 {
        roi[2] = 0;
    }
    if roi[3] < 0 {
        roi[3] = spixels as i64;
    }

    // ------------------------------------------------------------------ conventions (L1172)
    let conv = apply_convention(cfg, detsize_f, detsize_s, fpixels, spixels, log);

    // ------------------------------------------------------------------ banner and inputs check (L1275)
    log.line("nanoBragg nanocrystal diffraction simulator - James Holton and Ken Frankel 5-17-17");
    let dump_path = resolve_out(cfg, &cfg.params.dump_file);
    // -pdb/-cif: the model is read here for its cell; its structure factors are computed below
    let model = crate::model::load(&cfg.params.model, log)?;
    if model.is_some() && cfg.params.hkl_file.is_some() {
        return Err(Error::flag("-hkl", "give one source of structure factors: -hkl or -pdb/-cif, not both"));
    }
    let dump_exists = preloaded.is_none() && cfg.params.hkl_file.is_none() && model.is_none() && dump_path.is_file();
    if preloaded.is_none() && cfg.params.hkl_file.is_none() && model.is_none() && !dump_exists && cfg.params.default_f == 0.0 {
        return Err(Error::setup(
            "no structure factors: give -hkl FILE or -default_F VALUE (and no Fdump.bin cache was found)",
        ));
    }
    let cell_in = cfg.params.cell.or_else(|| {
        let c = model.as_ref()?.model.cell?;
        Some(crate::config::CellInput { a: c[0], b: c[1], c: c[2], alpha: c[3] / RTD, beta: c[4] / RTD, gamma: c[5] / RTD })
    });
    let cell_a = cell_in.map(|c| c.a).unwrap_or(0.0);
    if cfg.params.mat_file.is_none() && cell_a == 0.0 {
        if cfg.params.cell.is_some() {
            return Err(Error::flag("-cell", "the cell edge a must be greater than 0"));
        }
        if dump_exists {
            return Err(Error::setup(format!(
                "no unit cell: give -cell a b c alpha beta gamma or -mat FILE (structure factors would come from {}, found in this folder; without it and with no crystal flags the built-in crystal runs)",
                dump_path.display()
            )));
        }
        return Err(Error::setup("no unit cell: give -cell a b c alpha beta gamma or -mat FILE"));
    }
    if let Some(mask) = &cfg.mask {
        if mask.width != fpixels || mask.height != spixels {
            return Err(Error::file(
                &mask.path,
                format!("mask is {} x {} pixels but the detector is {} x {}", mask.width, mask.height, fpixels, spixels),
            ));
        }
    }

    // ------------------------------------------------------------------ sampling rules (L1381)
    let (osc, phistep, phisteps) = resolve_phi(cfg.params.osc.unwrap_or(-1.0), cfg.params.phistep.unwrap_or(-1.0), cfg.params.phisteps.unwrap_or(-1), RTD);
    let hdiv = resolve_sweep(cfg.params.hdivrange.unwrap_or(-1.0), cfg.params.hdivstep.unwrap_or(-1.0), cfg.params.hdivsteps.unwrap_or(-1), 1.0);
    let vdiv = resolve_sweep(cfg.params.vdivrange.unwrap_or(-1.0), cfg.params.vdivstep.unwrap_or(-1.0), cfg.params.vdivsteps.unwrap_or(-1), 1.0);
    let disp = resolve_sweep(cfg.params.dispersion, -1.0, cfg.params.dispsteps.unwrap_or(-1), 1.0);
    let thick = resolve_thickness(cfg.params.detector_thick, -1.0, cfg.params.detector_thicksteps.unwrap_or(-1));
    let mut detector_mu = cfg.params.detector_mu.unwrap_or(-1.0);
    if thick.range > 0.0 && detector_mu < 0.0 {
        detector_mu = 1.0 / thick.range;
        log.line(format!("WARNING: setting detector attenuation depth to {} m", g(detector_mu)));
    }
    let (mosaic_spread, mosaic_domains, warn) = resolve_mosaic(cfg.params.mosaic_spread.unwrap_or(-1.0), cfg.params.mosaic_domains.unwrap_or(-1));
    if let Some(w) = warn {
        log.line(w);
    }
    let hdiv = sanitize(hdiv);
    let vdiv = sanitize(vdiv);
    let disp = sanitize(disp);
    let thick = sanitize(thick);

    // ------------------------------------------------------------------ geometry (L1701)
    let det = orient_detector(conv, log);

    // ------------------------------------------------------------------ interpolation auto (L1778)
    let mut interpolate = match cfg.params.interpolate {
        Some(v) => v,
        None => {
            if cfg.params.na <= 2.0 || cfg.params.nb <= 2.0 || cfg.params.nc <= 2.0 {
                log.line("auto-selected tricubic interpolation of structure factors");
                true
            } else {
                log.line("auto-selected no interpolation");
                false
            }
        }
    };

    // ------------------------------------------------------------------ crystal (L1791)
    let mut rng = NrRandom::new();
    let time_seed = time_seed();
    let mut misset_seed = cfg.params.misset_seed.unwrap_or(time_seed);
    let mat = match &cfg.params.mat_file {
        Some(p) => {
            let m = read_matrix_file(p)?;
            log.line(format!("reading {}", p.display()));
            Some(m)
        }
        None => None,
    };
    let lattice = build_lattice(cell_in, mat, cfg.params.misset, cfg.params.lambda0, &mut rng, &mut misset_seed, log)?;

    let na = cells_from_size(cfg.params.na, sample_x, lattice.a_len);
    let nb = cells_from_size(cfg.params.nb, sample_y, lattice.b_len);
    let nc = cells_from_size(cfg.params.nc, sample_z, lattice.c_len);
    let xa = lattice.a_len * na;
    let xb = lattice.b_len * nb;
    let xc = lattice.c_len * nc;
    log.line(format!("crystal is {} x {} x {} microns", g(xa * 1e6), g(xb * 1e6), g(xc * 1e6)));
    let xtalsize_max = xa.max(xb).max(xc);
    let reciprocal_pixel_size = cfg.params.lambda0 * det.distance / det.pixel_size;
    let mut recommended = (3.0 * xtalsize_max / reciprocal_pixel_size).ceil() as i64;
    if recommended <= 0 {
        recommended = 1;
    }
    let mut oversample = cfg.params.oversample.map(|o| o as i64).unwrap_or(-1);
    if oversample <= 0 {
        oversample = recommended;
        log.line(format!("auto-selected {oversample}-fold oversampling"));
    }
    if oversample < recommended {
        log.line(format!("WARNING: maximum dimension of sample is {} A", g(xtalsize_max * 1e10)));
        log.line(format!("         but reciprocal pixel size is {} A", g(reciprocal_pixel_size * 1e10)));
        log.line("         intensity may vary significantly across a pixel!");
        log.line(format!("         recommend -oversample {recommended} to work around this"));
    }
    if oversample > 1000 {
        if cfg.params.oversample.is_some_and(|o| o > 0) {
            return Err(Error::flag("-oversample", format!("{oversample} sub-pixels per axis is impractical (at most 1000)")));
        }
        // automatic: say which inputs made it huge instead of printing a meaningless count
        let ratio = 3.0 * xtalsize_max / reciprocal_pixel_size;
        return Err(Error::setup(format!(
            "automatic oversampling would need {} sub-pixels per axis: the crystal ({} m across, from -N/-xtalsize and the cell) is large compared with lambda*distance/pixel = {} m (-lambda {} m, -distance {} m, -pixel {} m); check these values or give -oversample",
            if ratio.is_finite() { format!("{:.3e}", ratio.ceil()) } else { "an infinite number of".to_string() },
            g(xtalsize_max),
            g(reciprocal_pixel_size),
            g(cfg.params.lambda0),
            g(det.distance),
            g(det.pixel_size)
        )));
    }
    let volume = xa * xb * xc;
    log.line(format!("approximate MW = {}", g(volume * 1.2e6 * AVOGADRO / (na * nb * nc))));

    // ------------------------------------------------------------------ structure factors (L2101)
    let fhkl = if preloaded.is_some() {
        preloaded
    } else if cfg.params.hkl_file.is_some() || model.is_some() {
        let grid = match (&model, &cfg.params.hkl_file) {
            (Some(m), _) => {
                let lambda_min = cfg.params.lambda0 * (1.0 - cfg.params.dispersion.max(0.0) / 2.0);
                let d = if cfg.params.dmin > 0.0 { cfg.params.dmin * 1e10 } else { crate::model::detector_d_min(det.pix0_vector, det.fdet_vector, det.sdet_vector, det.detsize_f, det.detsize_s, det.beam_vector, lambda_min) };
                let entries = crate::model::entries_for_simulation(&cfg.params.model, m, d, cfg.params.lambda0 * 1e10, log)?;
                crate::model::grid_from_entries(&entries, cfg.params.default_f)?
            }
            (None, Some(hkl)) => read_hkl(hkl, cfg.params.default_f, log)?,
            (None, None) => unreachable!(),
        };
        // The cache is written with the other outputs at the end of the run (io::outputs), so a
        // refused run never leaves one; here only the C's message, from a check of the target.
        if crate::io::atomic::target_kind(&dump_path).is_ok() {
            log.line(format!("writing dump file for next time: {}", dump_path.display()));
        } else {
            log.line(format!("WARNING: unable to open dump file: {}", dump_path.display()));
        }
        Some(grid)
    } else if dump_exists {
        log.line(format!("reading Fs from {}", dump_path.display()));
        Some(read_fdump(&dump_path)?)
    } else {
        None
    };
    let hkls = fhkl.as_ref().map(|g| g.hkls).unwrap_or(0);
    if hkls == 0 {
        interpolate = false;
    }

    // ------------------------------------------------------------------ stol table: read, checked, unused (L2261)
    if let Some((p, _mult)) = &cfg.params.stol_file {
        log.line(format!("reading {}", p.display()));
        let cols = crate::io::text::read_text_file(p, 2)?;
        if cols[0].is_empty() {
            return Err(Error::file(p, "no data in input file"));
        }
    }

    for t in 0..thick.steps {
        log.line(format!("thick{t} = {} um", g(thick.step * t as f64 * 1e6)));
    }
    for k in 0..phisteps {
        let phi = cfg.params.phi0 + phistep * k as f64;
        log.line(format!("phi{k} = {}", g(phi * RTD)));
    }

    // ------------------------------------------------------------------ sources (L2310)
    let set = build_sources(
        cfg.params.source_file.as_deref(),
        &det.beam_vector,
        &det.polar_vector,
        &det.vert_vector,
        cfg.params.lambda0,
        hdiv,
        vdiv,
        disp,
        cfg.params.round_div,
        log,
    )?;

    // ------------------------------------------------------------------ mosaic domains (L2436)
    let mut mosaic_seed = cfg.params.mosaic_seed;
    let mut mosaic_umats = Vec::with_capacity(mosaic_domains as usize);
    for m in 0..mosaic_domains {
        let u = mosaic_rotation_umat(&mut rng, mosaic_spread as f32, &mut mosaic_seed);
        mosaic_umats.push(if m == 0 { [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0] } else { u });
    }
    log.line(format!("  created a total of {mosaic_domains} mosaic domains"));

    let os = oversample as usize;
    let steps = set.sources.len() as i64 * mosaic_domains as i64 * phisteps as i64 * (os * os) as i64;
    let subpixel_size = det.pixel_size / oversample as f64;

    // Orientation table: phi rotation then mosaic rotation, the C's arithmetic hoisted out of the pixel loop.
    let mut orientations = Vec::with_capacity((phisteps * mosaic_domains) as usize);
    for k in 0..phisteps {
        let phi = cfg.params.phi0 + phistep * k as f64;
        let (ap, bp, cp) = if phi != 0.0 {
            (
                rotate_axis(&lattice.a0, &det.spindle_vector, phi),
                rotate_axis(&lattice.b0, &det.spindle_vector, phi),
                rotate_axis(&lattice.c0, &det.spindle_vector, phi),
            )
        } else {
            (lattice.a0, lattice.b0, lattice.c0)
        };
        for u in &mosaic_umats {
            if mosaic_spread > 0.0 {
                orientations.push(Orientation { a: rotate_umat(&ap, u), b: rotate_umat(&bp, u), c: rotate_umat(&cp, u) });
            } else {
                orientations.push(Orientation { a: ap, b: bp, c: cp });
            }
        }
    }

    // ------------------------------------------------------------------ summary (L2466)
    let shape = cfg.params.shape;
    let default_f = cfg.params.default_f;
    log.line(format!("  {hkls} initialized hkls (all others ={})", g(default_f)));
    let shape_name = match shape {
        CrystalShape::Round => "ellipsoidal",
        CrystalShape::Square => "parallelpiped",
        CrystalShape::Gauss => "gaussian",
        CrystalShape::Tophat => "tophat-spot",
    };
    log.line(format!("  {shape_name} xtal: {}x{}x{} cells", cf("%.0f", na), cf("%.0f", nb), cf("%.0f", nc)));
    log.line(format!("  wave={} meters +/- {}% in {} steps", g(cfg.params.lambda0), g(disp.range * 100.0), disp.steps));
    if cfg.params.nopolar {
        log.line("  polarization effect disabled");
    } else {
        log.line(format!("  Kahn polarization factor: {}", cf("%f", cfg.params.polarization)));
    }
    if det.curved_detector {
        log.line("  curved detector: all pixels same distance from origin");
    }
    if det.point_pixel {
        log.line("  pixel obliquity effect disabled");
    }
    log.line(format!("  incident fluence: {} photons/m^2", g(fluence)));
    log.line(format!(
        "  distance={} detsize={}x{}  pixel={} meters ({}x{} pixels)",
        g(det.distance),
        g(det.detsize_f),
        g(det.detsize_s),
        g(det.pixel_size),
        fpixels,
        spixels
    ));
    log.line(format!("  sensor is {} m thick in {} layers with mu= {}", g(thick.range), thick.steps, g(detector_mu)));
    log.line(format!("  Xbeam={} Ybeam={}", g(det.xbeam), g(det.ybeam)));
    log.line(format!("  Fbeam={} Sbeam={}", g(det.fbeam), g(det.sbeam)));
    log.line(format!("  Xclose={} Yclose={}", g(det.xclose), g(det.yclose)));
    log.line(format!("  Fclose={} Sclose={}", g(det.fclose), g(det.sclose)));
    let v3 = |v: &V3| format!("{} {} {}", g(v[0]), g(v[1]), g(v[2]));
    log.line(format!("  DIRECTION_OF_DETECTOR_X-AXIS= {}", v3(&det.fdet_vector)));
    log.line(format!("  DIRECTION_OF_DETECTOR_Y-AXIS= {}", v3(&det.sdet_vector)));
    log.line(format!("  DIRECTION_OF_DETECTOR_Z-AXIS= {}", v3(&det.odet_vector)));
    log.line(format!("  INCIDENT_BEAM_DIRECTION= {}", v3(&det.beam_vector)));
    log.line(format!("  spindle ROTATION_AXIS= {}", v3(&det.spindle_vector)));
    log.line(format!("  POLARIZATION_PLANE_NORMAL= {}", v3(&crate::vec3::cross(&det.beam_vector, &det.polar_vector))));
    log.line(format!("  dials origin= {}", v3(&det.dials_origin)));
    log.line(format!("  roi: {} < x < {} && {} < y < {}", roi[0], roi[1], roi[2], roi[3]));
    log.line(format!("  hdivrange={} hdivstep={}  radians", g(hdiv.range), g(hdiv.step)));
    log.line(format!("  vdivrange={} vdivstep={}  radians", g(vdiv.range), g(vdiv.step)));
    log.line(format!("  {} divergence steps", set.divsteps));
    log.line(format!("  {} sources", set.sources.len()));
    log.line(format!("  {} mosaic domains over mosaic spread of {} degrees", mosaic_domains, g(mosaic_spread * RTD)));
    log.line(format!("  {} phi steps from {} to {} degrees", phisteps, g(cfg.params.phi0 * RTD), g((cfg.params.phi0 + osc) * RTD)));
    let mut ov = format!("  {os}x{os} pixel oversample steps");
    if cfg.params.oversample_thick {
        ov.push_str(" +thick");
    }
    if cfg.params.oversample_polar {
        ov.push_str(" +polar");
    }
    if cfg.params.oversample_omega {
        ov.push_str(" +omega");
    }
    log.line(ov);
    if let Some(m) = &cfg.mask {
        log.line(format!("  skipping zero-flagged pixels in {}", m.path.display()));
    }
    let seed = cfg.params.seed.unwrap_or(time_seed);
    if cfg.output.calculate_noise {
        log.line("");
        log.line("  noise image paramters:");
        log.line(format!("  seed: {seed}"));
        log.line(format!("  water droplet size: {} m", g(cfg.params.water_size)));
    }

    // water background (checklist Q18: already carries r_e^2*fluence)
    let water_f = 2.57;
    let i_bg = water_f * water_f * R_E_SQR * fluence * cfg.params.water_size * cfg.params.water_size * cfg.params.water_size * 1e6 * AVOGADRO / 18.0;

    Ok(Experiment {
        det,
        lattice,
        na,
        nb,
        nc,
        shape,
        fudge: cfg.params.fudge,
        sources: set.sources,
        divsteps: set.divsteps,
        hdiv,
        vdiv,
        disp,
        lambda0: cfg.params.lambda0,
        phi0: cfg.params.phi0,
        phistep,
        phisteps,
        osc,
        mosaic_spread,
        mosaic_umats,
        orientations,
        fhkl,
        default_f,
        interpolate,
        oversample: os,
        subpixel_size,
        oversample_thick: cfg.params.oversample_thick,
        oversample_polar: cfg.params.oversample_polar,
        oversample_omega: cfg.params.oversample_omega,
        thicksteps: thick.steps,
        thickstep: thick.step,
        detector_thick: thick.range,
        detector_mu,
        polarization: cfg.params.polarization,
        nopolar: cfg.params.nopolar,
        dmin: cfg.params.dmin,
        fluence,
        water_size: cfg.params.water_size,
        i_bg,
        steps,
        roi,
        mask: cfg.mask.as_ref().map(|m| m.data.clone()),
        mask_path: cfg.mask.as_ref().map(|m| m.path.clone()),
        rng,
        seed,
        printout: cfg.run.printout,
        printout_pixel: cfg.run.printout_pixel,
        precision: cfg.run.precision,
    })
}
