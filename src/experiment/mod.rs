//! `Experiment`: everything nanoBragg.c computes before its pixel loop (L1119-L2530), resolved from a
//! [`Params`] and the data read by `run::load` (or given in memory) with no file I/O, section by
//! section: [`resolve_detector`], [`resolve_sampling_steps`], [`resolve_beam_and_sources`],
//! [`resolve_crystal_and_orientations`], [`resolve_oversample`], [`resolve_structure_factors`]. The C's
//! setup messages are printed from it by `run::summary::setup_summary`. Immutable once built, so a
//! warm benchmark can render it repeatedly.


pub mod background;
pub mod beam;
pub mod crystal;
pub mod detector;
pub mod inputs;
pub mod params;
pub mod physics;
pub mod sampling;
pub mod scan;
pub mod structure_factors;
pub mod tangents;

use crate::base::c::printf::g;
use crate::experiment::params::Params;
use crate::base::consts::{AVOGADRO, R_E_SQR, RTD};
use crate::experiment::crystal::{build_lattice, cells_from_size, Lattice};
use crate::base::image::Roi;
use crate::experiment::detector::{apply_convention, c_roi_bounds, detector_pixels, orient_detector, ConventionGeometry, Detector, Panel, Sensor};
use crate::experiment::beam::Beam;
use crate::experiment::crystal::Crystal;
use crate::experiment::scan::Scan;
use crate::experiment::sampling::Sampling;
use crate::experiment::structure_factors::StructureFactors;
use crate::experiment::background::Background;
use crate::experiment::inputs::{FhklSource, Inputs};
use crate::base::log::Log;
use crate::base::c::rng::{mosaic_rotation_umat, NrRandom};
use crate::experiment::beam::{build_sources, Source};
use crate::experiment::sampling::{resolve_mosaic, resolve_phi, resolve_sweep, resolve_thickness, sanitize, Sweep};
use crate::experiment::structure_factors::HklGrid;
pub use crate::experiment::structure_factors::HklList;
pub use crate::experiment::crystal::Orientation;
use crate::base::vec3::{cross, dot, rotate_axis, rotate_umat, unitize, V3};
use crate::{Error, Result};
use std::path::Path;
use std::sync::Arc;



/// Largest image we agree to allocate (pixels): 2^31 floats would already be 8 GiB.
pub const MAX_PIXELS: u64 = 1 << 30;


/// Everything the pixel loop needs, as the parts a crystallographer names: the detector (its panels),
/// the beam (sources), the crystal (lattice, size, mosaic and the orientation table), the scan (phi),
/// the sampling (sub-pixels), the structure factors and the background. Kernel options (backend,
/// precision) are not part of it: see `kernel::RenderOptions`.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub det: Detector,
    pub beam: Beam,
    pub crystal: Crystal,
    pub scan: Scan,
    pub sampling: Sampling,
    pub structure_factors: StructureFactors,
    pub background: Background,
    /// RNG state after the misset and mosaic streams; the noise stream continues from it.
    pub rng: NrRandom,
    /// The noise seed as the C stores it.
    pub seed: i64,
    /// What the C printed while resolving it, for `run::summary::setup_summary`.
    pub notes: SetupNotes,
}

impl Experiment {
    /// Pixels of all panels.
    pub fn pixels(&self) -> usize {
        self.det.panels.iter().map(|p| p.fpixels * p.spixels).sum()
    }
    pub fn domains(&self) -> usize {
        self.crystal.mosaic_umats.len()
    }
}

/// A seed from the clock, as the C's `-time(NULL)`.
pub fn time_seed() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    -now
}

/// What the C prints while resolving the setup, kept by where it prints it, so `run::summary`
/// reproduces the C's order. Lines that follow from the resolved values alone (crystal size, phi steps,
/// the summary block) are not kept: the summary derives them.
#[derive(Clone, Debug, Default)]
pub struct SetupNotes {
    /// The beam clipping the sample (L1129).
    pub beam: Log,
    /// Convention warnings (L1172).
    pub convention: Log,
    /// Sampling-rule warnings: detector attenuation, mosaic domains (L1381).
    pub sampling: Log,
    /// Convention, pivot and XDS beam lines of the detector geometry (L1701).
    pub geometry: Log,
    /// Cell, misset and lattice vectors (L1791-L2047).
    pub lattice: Log,
    /// Automatic oversampling and its warnings (L2060).
    pub oversample: Log,
    /// Structure factors computed from a model.
    pub structure_factors: Log,
    /// Divergence points, wavelengths and the source list (L2310).
    pub sources: Log,
}

/// The detector and its region of interest.
pub struct DetectorSetup {
    pub det: ConventionGeometry,
    /// The C's inclusive `-roi` bounds with its defaults (see [`c_roi_bounds`]).
    pub roi: [i64; 4],
}

/// The sampling steps that follow from the parameters alone (the C's rules, L1381-L1700).
pub struct SamplingSteps {
    pub osc: f64,
    pub phistep: f64,
    pub phisteps: i32,
    pub hdiv: Sweep,
    pub vdiv: Sweep,
    pub disp: Sweep,
    pub thick: Sweep,
    pub detector_mu: f64,
    pub mosaic_spread: f64,
    pub mosaic_domains: i32,
}

/// The beam: fluence, the sample as the beam clips it, and the sources.
pub struct BeamSetup {
    pub fluence: f64,
    /// Sample size (x, y, z) in metres after clipping by the beam.
    pub sample: [f64; 3],
    pub sources: Vec<Source>,
    pub divsteps: i64,
}

/// The crystal: lattice, size in cells, mosaic domains and the orientation table.
pub struct CrystalSetup {
    pub lattice: Lattice,
    pub na: f64,
    pub nb: f64,
    pub nc: f64,
    pub mosaic_umats: Vec<[f64; 9]>,
    pub orientations: Vec<Orientation>,
    /// The random stream after the misset and mosaic draws.
    pub rng: NrRandom,
}


impl Experiment {
    /// Resolve the experiment from the parameters and the data already read (or given in memory); no
    /// file is read or written. The C's messages are kept in [`Experiment::notes`] and printed by
    /// `run::summary::setup_summary`.
    pub fn build(params: &Params, inputs: &Inputs) -> Result<Experiment> {
        let mut notes = SetupNotes::default();
        let d = resolve_detector(params, &mut notes)?;
        check_detector_faces_sample(params, &d.det)?;
        require_inputs(params, inputs, &d.det)?;
        let s = resolve_sampling_steps(params, &mut notes);
        let beam = resolve_beam_and_sources(params, inputs, &d.det, &s, &mut notes)?;
        let clock = time_seed();
        let crystal = resolve_crystal_and_orientations(params, inputs, &d.det, &s, beam.sample, clock, &mut notes)?;
        let oversample = resolve_oversample(params, &d.det, &crystal, &mut notes)?;

        let os = oversample;
        let steps = beam.sources.len() as i64 * s.mosaic_domains as i64 * s.phisteps as i64 * (os * os) as i64;
        let subpixel_size = d.det.pixel_size / oversample as f64;
        // water background (checklist Q18: already carries r_e^2*fluence)
        let water_f = 2.57;
        let p = params;
        let i_bg = water_f * water_f * R_E_SQR * beam.fluence * p.water_size * p.water_size * p.water_size * 1e6 * AVOGADRO / 18.0;
        let DetectorSetup { det: flat, roi } = d;
        let panel = Panel {
            fpixels: flat.fpixels,
            spixels: flat.spixels,
            pixel_size: flat.pixel_size,
            fdet_vector: flat.fdet_vector,
            sdet_vector: flat.sdet_vector,
            odet_vector: flat.odet_vector,
            pix0_vector: flat.pix0_vector,
            distance: flat.distance,
            close_distance: flat.close_distance,
            curved: flat.curved_detector,
            point_pixel: flat.point_pixel,
            sensor: Sensor { thick: s.thick.range, mu: s.detector_mu, thicksteps: s.thick.steps, thickstep: s.thick.step },
            roi: Roi::from_c_bounds(roi, flat.fpixels, flat.spixels),
            mask: inputs.mask.as_ref().map(|m| m.data.clone()),
            mask_path: inputs.mask.as_ref().map(|m| m.path.clone()),
        };
        let panels = match &inputs.detector {
            Some(specs) => file_panels(params, specs, &flat, panel.sensor)?,
            None => vec![panel],
        };
        let reach = Reach { panels: &panels, sources: &beam.sources, beam_vector: flat.beam_vector, lattice: &crystal.lattice };
        let sf = resolve_structure_factors(params, inputs, &reach, &mut notes)?;
        Ok(Experiment {
            beam: Beam {
                sources: beam.sources,
                divsteps: beam.divsteps,
                hdiv: s.hdiv,
                vdiv: s.vdiv,
                disp: s.disp,
                lambda0: p.lambda0,
                polarization: p.polarization,
                nopolar: p.nopolar,
                fluence: beam.fluence,
                beam_vector: flat.beam_vector,
                polar_vector: flat.polar_vector,
                vert_vector: flat.vert_vector,
            },
            crystal: Crystal {
                lattice: crystal.lattice,
                na: crystal.na,
                nb: crystal.nb,
                nc: crystal.nc,
                shape: p.shape,
                fudge: p.fudge,
                mosaic_spread: s.mosaic_spread,
                mosaic_umats: crystal.mosaic_umats,
                orientations: crystal.orientations,
            },
            scan: Scan { phi0: p.phi0, phistep: s.phistep, phisteps: s.phisteps, osc: s.osc, spindle_vector: flat.spindle_vector },
            sampling: Sampling {
                oversample: os,
                subpixel_size,
                oversample_thick: p.oversample_thick,
                oversample_polar: p.oversample_polar,
                oversample_omega: p.oversample_omega,
                steps,
            },
            structure_factors: sf,
            background: Background { water_size: p.water_size, i_bg },
            det: file_frame(Detector { from_file: inputs.detector.is_some(), ..Detector::from_convention(flat, panels) }),
            rng: crystal.rng,
            seed: p.seed.unwrap_or(clock),
            notes,
        })
    }
}

/// A detector read from a DIALS experiment list (or CrystFEL geometry, converted) is in DIALS's frame
/// already: its DIALS origin is the first panel's origin as it stands, not the C's lab-frame conversion.
fn file_frame(mut det: Detector) -> Detector {
    if det.from_file {
        det.centre.dials_origin = det.panel().pix0_vector.map(|x| 1000.0 * x);
    }
    det
}

/// The panels of a detector read from a file (`Inputs::detector`), with the run's sensor. Flags that
/// address one panel's pixels (`-roi`, `-mask`) and panels of different widths (the image is panel
/// after panel along the slow axis) are refused for more than one panel: `--panel N` renders one.
fn file_panels(params: &Params, specs: &[crate::experiment::detector::PanelSpec], flat: &ConventionGeometry, sensor: Sensor) -> Result<Vec<Panel>> {
    if specs.is_empty() {
        return Err(Error::setup("the detector read from the experiment list has no panel"));
    }
    let n = specs.len();
    if n > 1 {
        if params.roi.is_some() {
            return Err(Error::flag("-roi", format!("addresses one panel's pixels, the detector has {n} panels: render one with --panel N")));
        }
        if params.mask_file.is_some() {
            return Err(Error::flag("-mask", format!("covers one panel, the detector has {n} panels: render one with --panel N")));
        }
        if params.curved_detector {
            return Err(Error::flag("-curved_det", format!("bends one panel around the sample; the detector has {n} panels")));
        }
        if let Some(p) = specs.iter().find(|p| p.fpixels != specs[0].fpixels) {
            return Err(Error::setup(format!(
                "panels {} ({} pixels wide) and {} ({} wide) differ in width; the image holds the panels one after another along the slow axis: render one at a time with --panel N",
                specs[0].name, specs[0].fpixels, p.name, p.fpixels
            )));
        }
    }
    let total: u64 = specs.iter().map(|p| p.fpixels as u64 * p.spixels as u64).sum();
    if total > MAX_PIXELS {
        return Err(Error::setup(format!("the detector's {n} panels hold {total} pixels; the limit is {MAX_PIXELS} pixels")));
    }
    let sensors = panel_sensors(params, specs, sensor);
    let mut panels: Vec<Panel> = specs.iter().zip(sensors).map(|(p, s)| p.panel(&flat.beam_vector, s, params.curved_detector, params.point_pixel)).collect();
    if n == 1 {
        // one panel: the ROI of the flags (clipped as the C's) applies
        let p = &mut panels[0];
        p.roi = Roi::from_c_bounds(c_roi_bounds(params, p.fpixels, p.spixels), p.fpixels, p.spixels);
    }
    Ok(panels)
}

/// Each panel's sensor. The first panel's file sensor was applied to the flags, so a detector whose
/// panels share one sensor takes the run's (`run`, with any flag given after the file); panels with
/// different sensors (a DIALS detector of mixed modules) each take their own, layered by the run's
/// `-detector_thicksteps`, unless a flag after the file changed the first one's: then the flags'
/// sensor is every panel's.
fn panel_sensors(params: &Params, specs: &[crate::experiment::detector::PanelSpec], run: Sensor) -> Vec<Sensor> {
    let first = specs[0].sensor;
    let applied = first.map_or((0.0, None), |s| (s.thick, s.mu));
    if specs.iter().all(|p| p.sensor == first) || (params.detector_thick, params.detector_mu) != applied {
        return vec![run; specs.len()];
    }
    specs.iter().map(|p| if p.sensor == first { run } else { file_sensor(p.sensor, params.detector_thicksteps) }).collect()
}

/// The sensor of a file's panel (none: zero thickness) by the C's rules for the sensor flags
/// ([`resolve_sampling_steps`]): `thicksteps` layers, mu 1/thickness when the file gives none.
fn file_sensor(s: Option<crate::experiment::detector::SensorSpec>, thicksteps: Option<i32>) -> Sensor {
    let (thick, mu) = s.map_or((0.0, None), |s| (s.thick, s.mu));
    let layers = resolve_thickness(thick, -1.0, thicksteps.unwrap_or(-1));
    let mu = mu.unwrap_or(if layers.range > 0.0 { 1.0 / layers.range } else { -1.0 });
    let layers = sanitize(layers);
    Sensor { thick: layers.range, mu, thicksteps: layers.steps, thickstep: layers.step }
}

/// Detector size, region of interest, convention, pivot and orientation (L1119-L1172, L1701).
pub fn resolve_detector(params: &Params, notes: &mut SetupNotes) -> Result<DetectorSetup> {
    let (detsize_f, detsize_s, fpixels, spixels) = detector_pixels(params);
    if fpixels <= 0 || spixels <= 0 {
        return Err(Error::setup(format!("detector has no pixels ({fpixels} x {spixels}): check -detpixels, -detsize and -pixel")));
    }
    let npix = (fpixels as u64).saturating_mul(spixels as u64);
    if npix > MAX_PIXELS {
        return Err(Error::setup(format!(
            "detector of {fpixels} x {spixels} pixels needs {:.1} GiB for the float image alone; the limit is {} pixels",
            npix as f64 * 4.0 / (1u64 << 30) as f64,
            MAX_PIXELS
        )));
    }
    let (fpixels, spixels) = (fpixels as usize, spixels as usize);

    let roi = c_roi_bounds(params, fpixels, spixels);

    let conv = apply_convention(params, detsize_f, detsize_s, fpixels, spixels, &mut notes.convention);
    let det = orient_detector(conv, &mut notes.geometry);
    Ok(DetectorSetup { det, roi })
}

/// The C's inputs check (L1275): some structure factors, a unit cell, a mask of the detector's size.
fn require_inputs(params: &Params, inputs: &Inputs, det: &ConventionGeometry) -> Result<()> {
    let dump = match &inputs.fhkl_source {
        FhklSource::Fdump(p) => Some(p),
        _ => None,
    };
    if inputs.fhkl.is_none() && inputs.model.is_none() && params.default_f == 0.0 {
        return Err(Error::setup("no structure factors: give -hkl FILE or -default_F VALUE (and no Fdump.bin cache was found)"));
    }
    if matrix_input(params, inputs).is_none() && cell_input(params, inputs).map(|c| c.a).unwrap_or(0.0) == 0.0 {
        if params.cell.is_some() {
            return Err(Error::flag("-cell", "the cell edge a must be greater than 0"));
        }
        if let (None, Some(m)) = (&params.cell, &inputs.model) {
            if m.model.cell.is_some() {
                return Err(Error::file(&m.path, "the model's unit cell (CRYST1 or _cell) has an edge a of 0: give -cell a b c alpha beta gamma"));
            }
        }
        if let Some(dump_path) = dump {
            return Err(Error::setup(format!(
                "no unit cell: give -cell a b c alpha beta gamma or -mat FILE (structure factors would come from {}, found in this folder; without it and with no crystal flags the built-in crystal runs)",
                dump_path.display()
            )));
        }
        return Err(Error::setup("no unit cell: give -cell a b c alpha beta gamma or -mat FILE"));
    }
    if let Some(mask) = &inputs.mask {
        if mask.width != det.fpixels || mask.height != det.spixels {
            return Err(Error::file(
                &mask.path,
                format!("mask is {} x {} pixels but the detector is {} x {}", mask.width, mask.height, det.fpixels, det.spixels),
            ));
        }
    }
    Ok(())
}

/// The A matrix as `-mat` gives it (λ-scaled): the file's, or the one given in memory (`--expt`).
fn matrix_input(params: &Params, inputs: &Inputs) -> Option<[[f64; 3]; 3]> {
    match params.a_matrix {
        Some(m) => {
            let l = params.lambda0 * 1e10;
            Some(m.map(|row| row.map(|v| v * l)))
        }
        None => inputs.matrix,
    }
}

/// A cell error of a cell that came from the model (no `-cell`) names the model's file, not `-cell`.
fn model_cell_error(params: &Params, inputs: &Inputs, e: Error) -> Error {
    match (e, &inputs.model) {
        (Error::Flag { flag, reason }, Some(m)) if flag == "-cell" && params.cell.is_none() => {
            Error::file(&m.path, format!("the model's unit cell (CRYST1 or _cell): {reason}"))
        }
        (e, _) => e,
    }
}

/// The unit cell: `-cell`, else the model's (a `-mat` file overrides both in [`build_lattice`]).
pub fn cell_input(params: &Params, inputs: &Inputs) -> Option<crate::experiment::params::CellInput> {
    params.cell.or_else(|| {
        let c = inputs.model.as_ref()?.model.cell?;
        Some(crate::experiment::params::CellInput { a: c[0], b: c[1], c: c[2], alpha: c[3] / RTD, beta: c[4] / RTD, gamma: c[5] / RTD })
    })
}

/// Phi, divergence, dispersion, sensor layers and mosaic domains from the C's rules (L1381-L1700).
pub fn resolve_sampling_steps(params: &Params, notes: &mut SetupNotes) -> SamplingSteps {
    let p = params;
    let (osc, phistep, phisteps) = resolve_phi(p.osc.unwrap_or(-1.0), p.phistep.unwrap_or(-1.0), p.phisteps.unwrap_or(-1), RTD);
    let hdiv = resolve_sweep(p.hdivrange.unwrap_or(-1.0), p.hdivstep.unwrap_or(-1.0), p.hdivsteps.unwrap_or(-1), 1.0);
    let vdiv = resolve_sweep(p.vdivrange.unwrap_or(-1.0), p.vdivstep.unwrap_or(-1.0), p.vdivsteps.unwrap_or(-1), 1.0);
    let disp = resolve_sweep(p.dispersion, -1.0, p.dispsteps.unwrap_or(-1), 1.0);
    let thick = resolve_thickness(p.detector_thick, -1.0, p.detector_thicksteps.unwrap_or(-1));
    let mut detector_mu = p.detector_mu.unwrap_or(-1.0);
    if thick.range > 0.0 && detector_mu < 0.0 {
        detector_mu = 1.0 / thick.range;
        notes.sampling.line(format!("WARNING: setting detector attenuation depth to {} m", g(detector_mu)));
    }
    let (mosaic_spread, mosaic_domains, warn) = resolve_mosaic(p.mosaic_spread.unwrap_or(-1.0), p.mosaic_domains.unwrap_or(-1));
    if let Some(w) = warn {
        notes.sampling.line(w);
    }
    SamplingSteps {
        osc,
        phistep,
        phisteps,
        hdiv: sanitize(hdiv),
        vdiv: sanitize(vdiv),
        disp: sanitize(disp),
        thick: sanitize(thick),
        detector_mu,
        mosaic_spread,
        mosaic_domains,
    }
}

/// The crystal sizes' unit cells per axis within what `-Na`/`-Nb`/`-Nc` accept (`run::limits`: at
/// most 1e7): `-xtalsize 1e300` made a crystal of 1e309 cells the flags' check never saw.
fn check_cells_from_sizes(n: [f64; 3], sample: [f64; 3]) -> Result<()> {
    let flags = ["-sample_thick (or -xtalsize)", "-sample_width (or -xtalsize)", "-sample_height (or -xtalsize)"];
    for ((n, size), flag) in n.into_iter().zip(sample).zip(flags) {
        if size > 0.0 && !(n <= 1e7) {
            return Err(Error::flag(flag, format!("{} mm is {} unit cells (at most 1e7 per axis)", g(size * 1e3), g(n))));
        }
    }
    Ok(())
}

/// Fluence, the sample clipped by the beam (L1129) and the sources (L2310-L2430).
pub fn resolve_beam_and_sources(params: &Params, inputs: &Inputs, det: &ConventionGeometry, s: &SamplingSteps, notes: &mut SetupNotes) -> Result<BeamSetup> {
    let p = params;
    let mut fluence = p.fluence;
    if p.flux != 0.0 && p.exposure > 0.0 && p.beamsize >= 0.0 {
        fluence = p.flux * p.exposure / p.beamsize / p.beamsize;
    }
    let mut sample = [p.sample_x, p.sample_y, p.sample_z];
    if p.beamsize >= 0.0 {
        if p.beamsize < sample[1] {
            notes.beam.line(format!("WARNING: clipping sample ({} m high) with beam ({} m)", g(sample[1]), g(p.beamsize)));
            sample[1] = p.beamsize;
        }
        if p.beamsize < sample[2] {
            notes.beam.line(format!("WARNING: clipping sample ({} m wide) with beam ({} m)", g(sample[2]), g(p.beamsize)));
            sample[2] = p.beamsize;
        }
    }
    let file = match (&p.source_file, &inputs.source_columns) {
        (Some(path), Some(cols)) => Some((path.as_path(), cols.as_slice())),
        (None, Some(cols)) => Some((Path::new("(sources in memory)"), cols.as_slice())),
        _ => None,
    };
    let set = build_sources(file, &det.beam_vector, &det.polar_vector, &det.vert_vector, p.lambda0, s.hdiv, s.vdiv, s.disp, p.round_div, &mut notes.sources)?;
    Ok(BeamSetup { fluence, sample, sources: set.sources, divsteps: set.divsteps })
}

/// Unit cell, misset, size in cells (L1791-L2047), mosaic domains (L2436) and the orientation table:
/// each phi step's spindle rotation then each domain's rotation, the C's arithmetic hoisted out of the
/// pixel loop. `clock_seed` seeds a random misset when no `-misset_seed` is given.
pub fn resolve_crystal_and_orientations(
    params: &Params,
    inputs: &Inputs,
    det: &ConventionGeometry,
    s: &SamplingSteps,
    sample: [f64; 3],
    clock_seed: i64,
    notes: &mut SetupNotes,
) -> Result<CrystalSetup> {
    let p = params;
    let mut rng = NrRandom::new();
    let mut misset_seed = p.misset_seed.unwrap_or(clock_seed);
    let lattice = build_lattice(cell_input(params, inputs), matrix_input(params, inputs), p.misset, p.crystal_rot, p.lambda0, &mut rng, &mut misset_seed, &mut notes.lattice)
        .map_err(|e| model_cell_error(params, inputs, e))?;
    let na = cells_from_size(p.na, sample[0], lattice.a_len);
    let nb = cells_from_size(p.nb, sample[1], lattice.b_len);
    let nc = cells_from_size(p.nc, sample[2], lattice.c_len);
    check_cells_from_sizes([na, nb, nc], sample)?;

    let mut mosaic_seed = p.mosaic_seed;
    let mut mosaic_umats = Vec::with_capacity(s.mosaic_domains as usize);
    for m in 0..s.mosaic_domains {
        let u = mosaic_rotation_umat(&mut rng, s.mosaic_spread as f32, &mut mosaic_seed);
        mosaic_umats.push(if m == 0 { [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0] } else { u });
    }

    let mut orientations = Vec::with_capacity((s.phisteps * s.mosaic_domains) as usize);
    for k in 0..s.phisteps {
        // the C samples each sub-step at its start; --phi-midpoint (and --expt) at its centre
        let phi = if p.phi_midpoint { p.phi0 + s.phistep * (k as f64 + 0.5) } else { p.phi0 + s.phistep * k as f64 };
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
            if s.mosaic_spread > 0.0 {
                orientations.push(Orientation { a: rotate_umat(&ap, u), b: rotate_umat(&bp, u), c: rotate_umat(&cp, u) });
            } else {
                orientations.push(Orientation { a: ap, b: bp, c: cp });
            }
        }
    }
    Ok(CrystalSetup { lattice, na, nb, nc, mosaic_umats, orientations, rng })
}

/// The crystal's largest dimension (metres) and the C's recommended oversampling against
/// lambda*distance/pixel (L2060).
pub fn crystal_extent(lambda0: f64, det: &ConventionGeometry, c: &CrystalSetup) -> (f64, f64, i64) {
    let xtalsize_max = (c.lattice.a_len * c.na).max(c.lattice.b_len * c.nb).max(c.lattice.c_len * c.nc);
    let reciprocal_pixel_size = lambda0 * det.distance / det.pixel_size;
    let recommended = ((3.0 * xtalsize_max / reciprocal_pixel_size).ceil() as i64).max(1);
    (xtalsize_max, reciprocal_pixel_size, recommended)
}

/// Refuse a detector whose plane passes through or behind the sample while it pivots about the
/// direct-beam spot (the conventions' BEAM pivot, nanoBragg.c L1186-L1247): a two-theta of 90° or
/// more leaves the plane's distance from the sample (pix0 · odet) ≤ 0, an image of negative photons
/// at 100° and an "oversampling of 4e15" at 90°. A rotation or vectors that keep the plane in front
/// (a back-scattering detector included) are a geometry and pass.
fn check_detector_faces_sample(params: &Params, det: &ConventionGeometry) -> Result<()> {
    if det.pivot != crate::experiment::params::Pivot::Beam || det.close_distance > 1e-9 * params.distance.abs() {
        return Ok(());
    }
    let rotated = [params.detector_rotx, params.detector_roty, params.detector_rotz].iter().any(|r| *r != 0.0);
    let flag = if params.detector_twotheta != 0.0 { "-twotheta" } else if rotated { "-detector_rotx/-detector_roty/-detector_rotz" } else { "-odet_vector" };
    Err(Error::flag(
        flag,
        format!(
            "puts the detector's plane through or behind the sample (its distance {} m along the normal): pivoting about the direct-beam spot, a detector swung to 90 degrees or more faces away; use -pivot sample with a -*_vector flag (CUSTOM convention)",
            g(det.close_distance)
        ),
    ))
}

/// Sub-pixels per pixel axis: `-oversample`, or the C's automatic choice (L2060).
pub fn resolve_oversample(params: &Params, det: &ConventionGeometry, crystal: &CrystalSetup, notes: &mut SetupNotes) -> Result<usize> {
    let (xtalsize_max, reciprocal_pixel_size, recommended) = crystal_extent(params.lambda0, det, crystal);
    let log = &mut notes.oversample;
    let mut oversample = params.oversample.map(|o| o as i64).unwrap_or(-1);
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
    if oversample > sampling::MAX_OVERSAMPLE {
        if params.oversample.is_some_and(|o| o > 0) {
            return Err(Error::flag("-oversample", format!("{oversample} sub-pixels per axis is impractical (at most {})", sampling::MAX_OVERSAMPLE)));
        }
        // automatic: say which inputs made it huge instead of printing a meaningless count
        let ratio = 3.0 * xtalsize_max / reciprocal_pixel_size;
        return Err(Error::setup(format!(
            "automatic oversampling would need {} sub-pixels per axis: the crystal ({} m across, from -N/-xtalsize and the cell) is large compared with lambda*distance/pixel = {} m (-lambda {} m, -distance {} m, -pixel {} m); check these values or give -oversample",
            if ratio.is_finite() { format!("{:.3e}", ratio.ceil()) } else { "an infinite number of".to_string() },
            g(xtalsize_max),
            g(reciprocal_pixel_size),
            g(params.lambda0),
            g(det.distance),
            g(det.pixel_size)
        )));
    }
    Ok(oversample as usize)
}

/// Whether structure factors are interpolated when `-interpolate`/`-nointerpolate` is not given (L1778).
pub fn auto_interpolate(params: &Params) -> bool {
    params.na <= 2.0 || params.nb <= 2.0 || params.nc <= 2.0
}

/// What the rendered pixels can reach in reciprocal space, for the range of a model's structure
/// factors ([`model_resolution`]).
pub struct Reach<'a> {
    pub panels: &'a [Panel],
    pub sources: &'a [Source],
    pub beam_vector: V3,
    pub lattice: &'a Lattice,
}

/// The structure factors (read, given, or computed from a model for the detector's resolution) and
/// their interpolation (L1778, L2101-L2260).
pub fn resolve_structure_factors(params: &Params, inputs: &Inputs, reach: &Reach, notes: &mut SetupNotes) -> Result<StructureFactors> {
    let p = params;
    let mut hklout_entries = None;
    let interpolate_asked = p.interpolate.unwrap_or_else(|| auto_interpolate(params));
    let fhkl = match (&inputs.fhkl, &inputs.model) {
        (Some(grid), _) => Some(grid.clone()),
        (None, Some(m)) => {
            let d = model_resolution(p, reach, m, interpolate_asked);
            check_model_memory(m, d)?;
            let entries = crate::sfcalc::entries_for_simulation(&p.model, m, d, p.lambda0 * 1e10, &mut notes.structure_factors)?;
            // the grid `read_hkl` builds from the same entries (range from the entries, `default_f`
            // elsewhere, nanoBragg.c L2101-L2258)
            if entries.is_empty() {
                return Err(Error::setup(format!(
                    "the model gave no reflections to {}; F000 is left out unless -F000; give -dmin D or a detector reaching further",
                    crate::sfcalc::resolution_reached(d)
                )));
            }
            let grid = HklGrid::from_entries(&entries, p.default_f)?;
            if p.model.hklout.is_some() {
                hklout_entries = Some(Arc::new(entries));
            }
            Some(Arc::new(grid))
        }
        (None, None) => None,
    };
    let hkls = fhkl.as_ref().map(|g| g.hkls).unwrap_or(0);
    let interpolate = hkls != 0 && interpolate_asked;
    Ok(StructureFactors { fhkl, default_f: p.default_f, interpolate, dmin: p.dmin, hklout_entries })
}

/// The resolution (Å) to compute a model's structure factors to, so that every reflection a rendered
/// pixel reads exists (missing ones were `-default_F`, and a missing neighbour switched the
/// interpolation off for the rest of the image, L2940-L2950): the largest |S| = |d̂ − î|/λ over the
/// panels' corners and every source (its direction and wavelength: `-dispersion`, `-sourcefile`),
/// or 1/`-dmin`; plus the reach of the F look-up past it in the simulated lattice, |a*|+|b*|+|c*|
/// times one step for the nearest point (within ½ per axis) or three for the interpolation (the C
/// tests h − 2 and h + 2 against the grid on the fractional h, L2937-L2942, so up to ceil(h + 2));
/// widened where the model's own cell, in which the F are computed, is not the simulated one
/// (`-cell`/`-mat`).
fn model_resolution(p: &Params, reach: &Reach, m: &crate::sfcalc::LoadedModel, interpolate: bool) -> f64 {
    let q_pixels = if p.dmin > 0.0 { 1.0 / (p.dmin * 1e10) } else { pixel_reach(reach) };
    let l = reach.lattice;
    let step: f64 = [l.a_star, l.b_star, l.c_star].iter().map(|v| dot(v, v).sqrt()).sum();
    let q = q_pixels + if interpolate { 3.0 } else { 1.0 } * step;
    let widen = m.model.cell.and_then(crate::sfcalc::Cell::new).map_or(1.0, |c| metric_ratio(&c.g_star, &reciprocal_metric(l)).sqrt());
    1.0 / (q * widen.max(1.0))
}

/// Refuse, before anything is allocated, a model whose structure factors to `d` Å would not fit in
/// memory (a large cell or a small `-dmin`: the allocation aborted the process). The peak is the
/// larger of two phases: the half sphere's reflections with an accumulator per atom type on each
/// thread (`sfcalc::structure_factors`), then both Friedel mates' lists (indices, F, entries) and the
/// dense grid of their index box. (A 400 Å cell to 2.84 Å: 0.85 GiB estimated, 0.87 GiB measured.)
fn check_model_memory(m: &crate::sfcalc::LoadedModel, d: f64) -> Result<()> {
    // a cell that is no cell is refused by `sfcalc::compute`, naming the file
    let Some(cell) = m.model.cell.and_then(crate::sfcalc::Cell::new) else { return Ok(()) };
    let [a, b, cc, ..] = cell.params;
    let volume = cell.volume();
    let reflections = 4.0 / 3.0 * std::f64::consts::PI * volume / (d * d * d) * 1.1 + 1000.0;
    let types = m.model.atoms.iter().map(|x| (&x.element, x.charge)).collect::<std::collections::HashSet<_>>().len().max(1) as f64;
    let threads = rayon::current_num_threads().min(m.model.atoms.len().max(1)) as f64;
    let box_cells = [a, b, cc].iter().map(|e| 2.0 * (e / d).floor() + 3.0).product::<f64>();
    let summing = reflections / 2.0 * 16.0 * (types * threads + 1.0);
    let lists = reflections * 52.0 + 8.0 * box_cells;
    let bytes = summing.max(lists);
    let fits = bytes < (1u64 << 62) as f64;
    crate::base::memory::check_alloc(
        || {
            Error::file(
                &m.path,
                format!(
                    "its structure factors to {} A (about {:.3e} reflections of its {} A cell, {} atom types) need about {} of memory, but {} is available: give a larger -dmin (or --max-memory)",
                    g(d),
                    reflections,
                    [a, b, cc].map(g).join(" x "),
                    types,
                    crate::base::memory::human(bytes.min(1e19) as u64),
                    crate::base::memory::human(crate::base::memory::memory_budget())
                ),
            )
        },
        fits.then_some(bytes as u64),
    )
}

/// The largest |S| = |d̂ − î|/λ (1/Å) any pixel reaches from any source.
fn pixel_reach(reach: &Reach) -> f64 {
    let mut q: f64 = 0.0;
    for panel in reach.panels {
        for s in reach.sources {
            // the incident direction is −dir (the source lies upstream)
            let inc = [-s.dir[0], -s.dir[1], -s.dir[2]];
            let c = min_cos_to(panel, &reach.beam_vector, &inc);
            q = q.max((2.0 - 2.0 * c).max(0.0).sqrt() / (s.lambda * 1e10));
        }
    }
    q
}

/// The smallest cos(2θ) = d̂·î over a panel's pixels. A curved panel's angle grows towards its
/// corners (cos 2θ = cos α·cos β of the two swing angles). On a flat one the angle from î is
/// largest at a corner while below 90°, but past 90° it can peak inside an edge (where the edge's
/// great circle comes nearest −î) or inside the panel (where −î meets it: 180°).
fn min_cos_to(panel: &Panel, beam: &V3, inc: &V3) -> f64 {
    let corners = panel.corner_positions(beam);
    let mut c = corners.iter().map(|p| dot(&unitize(p).0, inc)).fold(1.0, f64::min);
    if panel.curved {
        return c;
    }
    for (i, j) in [(0, 1), (1, 3), (3, 2), (2, 0)] {
        let (p, q) = (corners[i], corners[j]);
        let n = unitize(&cross(&p, &q)).0;
        // the edge's great circle comes nearest −î at −(î less its part along n)
        let w = [0, 1, 2].map(|k| inc[k] - dot(inc, &n) * n[k]);
        let (w, len) = unitize(&w);
        let far = w.map(|v| -v);
        if len > 0.0 && dot(&cross(&p, &far), &n) >= 0.0 && dot(&cross(&far, &q), &n) >= 0.0 {
            c = c.min(-len);
        }
    }
    // −î through the panel's rectangle
    let m = cross(&panel.fdet_vector, &panel.sdet_vector);
    let t = dot(&panel.pix0_vector, &m) / -dot(inc, &m);
    if t > 0.0 && t.is_finite() {
        let x = [0, 1, 2].map(|k| -t * inc[k] - panel.pix0_vector[k]);
        let (f, s) = (dot(&x, &panel.fdet_vector), dot(&x, &panel.sdet_vector));
        let (size_f, size_s) = (panel.fpixels as f64 * panel.pixel_size, panel.spixels as f64 * panel.pixel_size);
        if (0.0..=size_f).contains(&f) && (0.0..=size_s).contains(&s) {
            c = -1.0;
        }
    }
    c
}

/// G* = (a*·a*, a*·b*, ...) of the simulated lattice (1/Å²).
fn reciprocal_metric(l: &Lattice) -> [[f64; 3]; 3] {
    let v = [l.a_star, l.b_star, l.c_star];
    std::array::from_fn(|i| std::array::from_fn(|j| dot(&v[i], &v[j])))
}

/// max over indices x of (xᵀ·g·x)/(xᵀ·h·x): how much farther, in the metric `g`, the sphere of the
/// metric `h` reaches (the largest eigenvalue of h⁻¹g, by power iteration; 1 when they are equal).
fn metric_ratio(g: &[[f64; 3]; 3], h: &[[f64; 3]; 3]) -> f64 {
    let Some(hi) = invert3(h) else { return 1.0 };
    let m: [[f64; 3]; 3] = std::array::from_fn(|i| std::array::from_fn(|j| (0..3).map(|k| hi[i][k] * g[k][j]).sum()));
    let mut x = [1.0, 0.7, 0.4];
    let mut ratio = 1.0;
    for _ in 0..200 {
        let y: [f64; 3] = std::array::from_fn(|i| (0..3).map(|j| m[i][j] * x[j]).sum());
        let n = dot(&y, &y).sqrt();
        if !(n > 0.0 && n.is_finite()) {
            return 1.0;
        }
        ratio = n / dot(&x, &x).sqrt();
        x = y.map(|v| v / n);
    }
    ratio
}

/// The inverse of a 3×3 matrix (None when singular).
fn invert3(a: &[[f64; 3]; 3]) -> Option<[[f64; 3]; 3]> {
    let c = |i: usize, j: usize| a[(i + 1) % 3][(j + 1) % 3] * a[(i + 2) % 3][(j + 2) % 3] - a[(i + 1) % 3][(j + 2) % 3] * a[(i + 2) % 3][(j + 1) % 3];
    let det = a[0][0] * c(0, 0) + a[0][1] * c(0, 1) + a[0][2] * c(0, 2);
    (det != 0.0 && det.is_finite()).then(|| std::array::from_fn(|i| std::array::from_fn(|j| c(j, i) / det)))
}

#[cfg(test)]
mod tests {
    use super::{invert3, metric_ratio};
    use crate::base::vec3::{cross, V3};

    /// Past 90° a flat panel's widest angle can lie inside an edge, or inside the panel.
    #[test]
    fn the_widest_angle_of_a_flat_panel_is_found_off_its_corners() {
        let panel = |pix0: V3, f: V3, s: V3, nf: usize, ns: usize| super::Panel {
            fpixels: nf,
            spixels: ns,
            pixel_size: 1e-3,
            fdet_vector: f,
            sdet_vector: s,
            odet_vector: cross(&f, &s),
            pix0_vector: pix0,
            distance: 0.1,
            close_distance: 0.1,
            curved: false,
            point_pixel: false,
            sensor: super::Sensor { thick: 0.0, mu: 0.0, thicksteps: 1, thickstep: 0.0 },
            roi: crate::base::image::Roi::from_c_bounds([0, nf as i64 - 1, 0, ns as i64 - 1], nf, ns),
            mask: None,
            mask_path: None,
        };
        let inc = [0.0, 0.0, 1.0];
        // a strip upstream of the sample at x = 0.05, z = −0.05 … −0.051, y = −0.2 … 0.2: seen
        // from a beam along +z its widest point is the middle of its far edge (134.4°), its
        // corners only about 104°
        let p = panel([0.05, -0.2, -0.05], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0], 400, 1);
        let c = super::min_cos_to(&p, &[0.0, 0.0, 1.0], &inc);
        let want = -0.051 / (0.05f64 * 0.05 + 0.051 * 0.051).sqrt();
        assert!((c - want).abs() < 1e-9, "{c} vs {want}");
        let corner = -0.05 / (0.05f64 * 0.05 + 0.05 * 0.05 + 0.2 * 0.2).sqrt();
        assert!(c < corner - 0.1);
        // a panel across the backward beam: 180°
        let back = panel([-0.1, -0.1, -0.1], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], 200, 200);
        assert_eq!(super::min_cos_to(&back, &[0.0, 0.0, 1.0], &inc), -1.0);
    }

    #[test]
    fn metric_ratio_is_the_largest_stretch_of_one_metric_over_another() {
        let id = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        assert!((metric_ratio(&id, &id) - 1.0).abs() < 1e-12);
        // a cell 20 % longer on b: its reciprocal metric is 1/1.44 on that axis, so the original's
        // sphere reaches 1.44 times as far (squared) in the model's metric
        let g = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        let h = [[1.0, 0.0, 0.0], [0.0, 1.0 / 1.44, 0.0], [0.0, 0.0, 1.0]];
        assert!((metric_ratio(&g, &h) - 1.44).abs() < 1e-9);
        // not diagonal: the eigenvalues of [[2, 1], [1, 2]] are 3 and 1
        let g2 = [[2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 1.0]];
        assert!((metric_ratio(&g2, &id) - 3.0).abs() < 1e-9);
        let inv = invert3(&g2).unwrap();
        assert!((inv[0][0] - 2.0 / 3.0).abs() < 1e-12 && (inv[0][1] + 1.0 / 3.0).abs() < 1e-12);
    }
}
