//! The C's setup messages (everything nanoBragg.c prints before its pixel loop), from the experiment,
//! the inputs' loading lines and the parameters, in the C's order.

use crate::base::c::printf::{cf, g};
use crate::run::config::Config;
use crate::experiment::params::CrystalShape;
use crate::base::consts::{AVOGADRO, RTD};
use crate::experiment::{auto_interpolate, Experiment};
use crate::experiment::inputs::Inputs;
use crate::base::vec3::V3;

/// The lines `nanobragg-rs simulate` prints before rendering, identical to the C's stdout.
pub fn setup_summary(cfg: &Config, inputs: &Inputs, exp: &Experiment) -> Vec<String> {
    let (notes, load) = (&exp.notes, &inputs.log);
    let p = &cfg.params;
    let mut out: Vec<String> = Vec::new();
    let mut add = |lines: &[String]| out.extend_from_slice(lines);
    add(&load.images.lines); // L400-L502: -mask and -img are read first
    add(&notes.beam.lines); // L1129
    add(&notes.convention.lines); // L1172
    add(&["nanoBragg nanocrystal diffraction simulator - James Holton and Ken Frankel 5-17-17".to_string()]); // L1275
    add(&load.model.lines);
    add(&notes.sampling.lines); // L1381
    add(&notes.geometry.lines); // L1701
    if p.interpolate.is_none() {
        // L1778
        add(&[if auto_interpolate(&cfg.params) { "auto-selected tricubic interpolation of structure factors" } else { "auto-selected no interpolation" }.to_string()]);
    }
    add(&load.matrix.lines); // L1791
    add(&notes.lattice.lines);
    let l = &exp.crystal.lattice;
    let (xa, xb, xc) = (l.a_len * exp.crystal.na, l.b_len * exp.crystal.nb, l.c_len * exp.crystal.nc);
    add(&[format!("crystal is {} x {} x {} microns", g(xa * 1e6), g(xb * 1e6), g(xc * 1e6))]);
    add(&notes.oversample.lines);
    add(&[format!("approximate MW = {}", g(xa * xb * xc * 1.2e6 * AVOGADRO / (exp.crystal.na * exp.crystal.nb * exp.crystal.nc)))]);
    add(&notes.structure_factors.lines); // L2101
    add(&load.fhkl.lines);
    add(&load.dump.lines);
    add(&load.stol.lines); // L2261
    for t in 0..exp.det.panel().sensor.thicksteps {
        add(&[format!("thick{t} = {} um", g(exp.det.panel().sensor.thickstep * t as f64 * 1e6))]);
    }
    // the angles rendered: each sub-step's start as the C, its centre with --phi-midpoint (and
    // --expt/--geom), as experiment::build samples them
    let offset = if cfg.params.phi_midpoint { 0.5 } else { 0.0 };
    for k in 0..exp.scan.phisteps {
        add(&[format!("phi{k} = {}", g((exp.scan.phi0 + exp.scan.phistep * (k as f64 + offset)) * RTD))]);
    }
    add(&notes.sources.lines); // L2310
    add(&[format!("  created a total of {} mosaic domains", exp.domains())]); // L2436
    out.extend(summary_block(cfg, exp));
    out
}

/// The block the C prints just before rendering (L2466-L2530).
pub fn summary_block(cfg: &Config, exp: &Experiment) -> Vec<String> {
    let det = &exp.det;
    let panel = det.panel();
    let hkls = exp.structure_factors.fhkl.as_ref().map(|g| g.hkls).unwrap_or(0);
    let mut v = vec![format!("  {hkls} initialized hkls (all others ={})", g(exp.structure_factors.default_f))];
    let shape_name = match exp.crystal.shape {
        CrystalShape::Round => "ellipsoidal",
        CrystalShape::Square => "parallelpiped",
        CrystalShape::Gauss => "gaussian",
        CrystalShape::Tophat => "tophat-spot",
    };
    v.push(format!("  {shape_name} xtal: {}x{}x{} cells", cf("%.0f", exp.crystal.na), cf("%.0f", exp.crystal.nb), cf("%.0f", exp.crystal.nc)));
    v.push(format!("  wave={} meters +/- {}% in {} steps", g(exp.beam.lambda0), g(exp.beam.disp.range * 100.0), exp.beam.disp.steps));
    if exp.beam.nopolar {
        v.push("  polarization effect disabled".into());
    } else {
        v.push(format!("  Kahn polarization factor: {}", cf("%f", exp.beam.polarization)));
    }
    if panel.curved {
        v.push("  curved detector: all pixels same distance from origin".into());
    }
    if panel.point_pixel {
        v.push("  pixel obliquity effect disabled".into());
    }
    v.push(format!("  incident fluence: {} photons/m^2", g(exp.beam.fluence)));
    v.push(format!(
        "  distance={} detsize={}x{}  pixel={} meters ({}x{} pixels)",
        // a geometry file's panel edge-on to the beam has no distance along it: inf, not the
        // close_distance/DBL_MIN nanoBragg.c's arithmetic gives (L1712-L1714), which the flags'
        // detectors keep printing as the C does
        g(if (cfg.params.geom.is_some() || cfg.params.expt.is_some()) && crate::base::vec3::dot(&exp.beam.beam_vector, &panel.odet_vector) == 0.0 { f64::INFINITY } else { panel.distance }),
        g(det.detsize_f),
        g(det.detsize_s),
        g(panel.pixel_size),
        panel.fpixels,
        panel.spixels
    ));
    v.push(format!("  sensor is {} m thick in {} layers with mu= {}", g(exp.det.panel().sensor.thick), exp.det.panel().sensor.thicksteps, g(exp.det.panel().sensor.mu)));
    v.push(format!("  Xbeam={} Ybeam={}", g(det.centre.xbeam), g(det.centre.ybeam)));
    v.push(format!("  Fbeam={} Sbeam={}", g(det.centre.fbeam), g(det.centre.sbeam)));
    v.push(format!("  Xclose={} Yclose={}", g(det.centre.xclose), g(det.centre.yclose)));
    v.push(format!("  Fclose={} Sclose={}", g(det.centre.fclose), g(det.centre.sclose)));
    let v3 = |x: &V3| format!("{} {} {}", g(x[0]), g(x[1]), g(x[2]));
    v.push(format!("  DIRECTION_OF_DETECTOR_X-AXIS= {}", v3(&panel.fdet_vector)));
    v.push(format!("  DIRECTION_OF_DETECTOR_Y-AXIS= {}", v3(&panel.sdet_vector)));
    v.push(format!("  DIRECTION_OF_DETECTOR_Z-AXIS= {}", v3(&panel.odet_vector)));
    v.push(format!("  INCIDENT_BEAM_DIRECTION= {}", v3(&exp.beam.beam_vector)));
    v.push(format!("  spindle ROTATION_AXIS= {}", v3(&exp.scan.spindle_vector)));
    v.push(format!("  POLARIZATION_PLANE_NORMAL= {}", v3(&crate::base::vec3::cross(&exp.beam.beam_vector, &exp.beam.polar_vector))));
    v.push(format!("  dials origin= {}", v3(&det.centre.dials_origin)));
    let roi = crate::experiment::detector::c_roi_bounds(&cfg.params, panel.fpixels, panel.spixels);
    v.push(format!("  roi: {} < x < {} && {} < y < {}", roi[0], roi[1], roi[2], roi[3]));
    v.push(format!("  hdivrange={} hdivstep={}  radians", g(exp.beam.hdiv.range), g(exp.beam.hdiv.step)));
    v.push(format!("  vdivrange={} vdivstep={}  radians", g(exp.beam.vdiv.range), g(exp.beam.vdiv.step)));
    v.push(format!("  {} divergence steps", exp.beam.divsteps));
    v.push(format!("  {} sources", exp.beam.sources.len()));
    v.push(format!("  {} mosaic domains over mosaic spread of {} degrees", exp.domains(), g(exp.crystal.mosaic_spread * RTD)));
    v.push(format!("  {} phi steps from {} to {} degrees", exp.scan.phisteps, g(exp.scan.phi0 * RTD), g((exp.scan.phi0 + exp.scan.osc) * RTD)));
    let os = exp.sampling.oversample;
    let mut ov = format!("  {os}x{os} pixel oversample steps");
    for (on, tag) in [(exp.sampling.oversample_thick, " +thick"), (exp.sampling.oversample_polar, " +polar"), (exp.sampling.oversample_omega, " +omega")] {
        if on {
            ov.push_str(tag);
        }
    }
    v.push(ov);
    if let Some(m) = &exp.det.panel().mask_path {
        v.push(format!("  skipping zero-flagged pixels in {}", m.display()));
    }
    if cfg.output.calculate_noise {
        v.push(String::new());
        v.push("  noise image paramters:".into());
        v.push(format!("  seed: {}", exp.seed));
        v.push(format!("  water droplet size: {} m", g(exp.background.water_size)));
    }
    v
}
