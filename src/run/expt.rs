//! A DIALS experiment list (`--expt`) → the run: its beam, goniometer, scan and crystal become
//! parameters (so flags given after `--expt` override them), its detector becomes the panels of
//! [`Inputs::detector`](crate::experiment::inputs::Inputs).
//!
//! Frames and units: the simulation works in the experiment list's own lab frame, in metres. The beam
//! travels along −direction (dxtbx: s0 = −direction/λ); the E-vector is polarization_normal × beam and
//! the Kahn factor 2·polarization_fraction − 1 (nanoBragg.c's polarization factor,
//! ½(1 + cos²2θ − K·cos2ψ·sin²2θ) with ψ measured from the E-vector). The spindle is S·axis and the
//! crystal at φ = 0 is S·F·A, so that nanoBragg's R(S·axis, φ)·S·F·A is dxtbx's S·R(axis, φ)·F·A. Each
//! panel's normal is fast × slow, pointing away from the sample (dxtbx's distance > 0); the first
//! pixel's outer corner is the panel origin.

use crate::base::vec3::{cross, dot, unitize, V3};
use crate::experiment::detector::{PanelSpec, SensorSpec};
use crate::experiment::params::{Convention, ExptSource, Params, Pivot};
use crate::io::expt::{read_expt, ExptModel, ExptPanel};
use crate::{Error, Result};

/// Tolerance on unit axes (|f|, |s| = 1 and f ⊥ s) and on square pixels.
const AXIS_TOL: f64 = 1e-6;

/// Read the experiment list of `src` (choosing the experiment) for `flag`.
pub fn read(src: &ExptSource) -> Result<ExptModel> {
    read_expt(&src.path, src.experiment, "--experiment")
}

fn mat_vec(m: &[f64; 9], v: &V3) -> V3 {
    [m[0] * v[0] + m[1] * v[1] + m[2] * v[2], m[3] * v[0] + m[4] * v[1] + m[5] * v[2], m[6] * v[0] + m[7] * v[1] + m[8] * v[2]]
}

/// The panels of `m` (all, or `--panel N` alone) in metres, checked: square pixels, unit orthogonal
/// axes, the panel's plane at a positive distance from the sample.
pub fn panel_specs(m: &ExptModel, panel: Option<usize>) -> Result<Vec<PanelSpec>> {
    let chosen: Vec<(usize, &ExptPanel)> = match panel {
        Some(i) => match m.panels.get(i) {
            Some(p) => vec![(i, p)],
            None => return Err(Error::flag("--panel", format!("{i} is past the {} panels of {} (0 to {})", m.panels.len(), m.path.display(), m.panels.len() - 1))),
        },
        None => m.panels.iter().enumerate().collect(),
    };
    chosen.into_iter().map(|(i, p)| spec(m, i, p)).collect()
}

fn spec(m: &ExptModel, i: usize, p: &ExptPanel) -> Result<PanelSpec> {
    let bad = |why: String| Error::file(&m.path, format!("detector panel {i} ({}): {why}", if p.name.is_empty() { "unnamed" } else { &p.name }));
    let [pf, ps] = p.pixel_size;
    if ((pf - ps) / pf).abs() > AXIS_TOL {
        return Err(bad(format!("pixels of {pf} x {ps} mm are not square; the simulator's pixels are")));
    }
    let (f, fl) = unitize(&p.fast_axis);
    let (s, sl) = unitize(&p.slow_axis);
    if (fl - 1.0).abs() > AXIS_TOL || (sl - 1.0).abs() > AXIS_TOL || dot(&f, &s).abs() > AXIS_TOL {
        return Err(bad(format!("fast axis {:?} and slow axis {:?} are not orthogonal unit vectors", p.fast_axis, p.slow_axis)));
    }
    let o = unitize(&cross(&f, &s)).0;
    let pix0 = p.origin.map(|v| v * 1e-3);
    let distance = dot(&pix0, &o);
    if !(distance > 0.0) {
        return Err(bad(format!("at distance {} mm (origin · fast × slow) from the sample; a panel must face the sample at a distance > 0", distance * 1e3)));
    }
    Ok(PanelSpec {
        name: if p.name.is_empty() { format!("panel{i}") } else { p.name.clone() },
        fpixels: p.image_size[0],
        spixels: p.image_size[1],
        pixel_size: pf * 1e-3,
        fdet_vector: f,
        sdet_vector: s,
        odet_vector: o,
        pix0_vector: pix0,
        mask: None,
        sensor: (p.thickness > 0.0).then(|| SensorSpec { thick: p.thickness * 1e-3, mu: (p.mu > 0.0).then_some(p.mu * 1e3) }),
    })
}

/// Apply experiment list `m` to the parameters, as if its values were flags at the place `--expt`
/// stands: wavelength, beam, polarization, spindle, the scan's image (`src.image`, default the first),
/// the crystal's A matrix, the sensor, and the first chosen panel's geometry as CUSTOM-convention flags
/// (so the setup summary and single-panel headers describe it). Also turns on `--phi-midpoint`.
pub fn apply(params: &mut Params, m: &ExptModel, src: &ExptSource) -> Result<()> {
    let specs = panel_specs(m, params.panel)?;
    let b = &m.beam;
    let beam = b.direction.map(|v| -v);
    params.lambda0 = b.wavelength * 1e-10;
    params.beam_vector = beam;
    let e = cross(&b.polarization_normal, &beam);
    let (e, elen) = unitize(&e);
    if !(elen > 1e-6) {
        return Err(Error::file(&m.path, format!("beam polarization_normal {:?} is along the beam: no E-vector", b.polarization_normal)));
    }
    params.polar_vector = e;
    params.polarization = 2.0 * b.polarization_fraction - 1.0;
    params.nopolar = false;
    params.source_file = None;

    let (s_mat, f_mat) = match &m.goniometer {
        Some(g) => {
            params.spindle_vector = unitize(&mat_vec(&g.setting_rotation, &g.rotation_axis)).0;
            (g.setting_rotation, g.fixed_rotation)
        }
        None => {
            let id = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
            (id, id)
        }
    };
    match (&m.scan, src.image) {
        (Some(scan), image) => {
            let [first, last] = scan.image_range;
            let k = image.unwrap_or(first);
            if k < first || k > last {
                return Err(Error::flag("--image", format!("{k} is outside the scan's images {first} to {last} in {}", m.path.display())));
            }
            let [start, width] = scan.oscillation;
            // within the range the reader checked can be counted; i128 keeps the offset exact anyway
            params.phi0 = (start + (k as i128 - first as i128) as f64 * width).to_radians();
            params.osc = Some(width.to_radians());
        }
        (None, Some(_)) => return Err(Error::flag("--image", format!("{} has no scan to take an image from", m.path.display()))),
        (None, None) => {}
    }
    params.phi_midpoint = true;

    if let Some(c) = &m.crystal {
        let [a, bb, cc] = c.real_space.map(|v| mat_vec(&s_mat, &mat_vec(&f_mat, &v)));
        let v = dot(&a, &cross(&bb, &cc));
        if !(v.abs() > 0.0) || !v.is_finite() {
            return Err(Error::file(&m.path, "the crystal's real-space vectors span no volume"));
        }
        let [ast, bst, cst] = [cross(&bb, &cc), cross(&cc, &a), cross(&a, &bb)].map(|x| x.map(|y| y / v));
        params.a_matrix = Some([[ast[0], bst[0], cst[0]], [ast[1], bst[1], cst[1]], [ast[2], bst[2], cst[2]]]);
        params.cell = None;
        params.mat_file = None;
        params.misset = None;
    }

    let p0 = &specs[0];
    // the first chosen panel's sensor becomes the flags'; panels with another sensor keep their own
    // (experiment::file_panels)
    if let Some(s) = p0.sensor {
        params.detector_thick = s.thick;
        params.detector_mu = s.mu;
    }
    flat_panel_params(params, p0);
    params.expt = Some(src.clone());
    params.geom = None;
    Ok(())
}

/// The CUSTOM-convention flags that make panel `p` (pivot on the sample: pix0 = −Fclose·f − Sclose·s
/// + close·o, nanoBragg.c L1719).
pub fn flat_panel_params(params: &mut Params, p: &PanelSpec) {
    params.convention = Convention::Custom;
    params.pivot = Pivot::Sample;
    params.fdet_vector = p.fdet_vector;
    params.sdet_vector = p.sdet_vector;
    params.odet_vector = p.odet_vector;
    params.pixel_size = p.pixel_size;
    params.fpixels = p.fpixels as i64;
    params.spixels = p.spixels as i64;
    params.detsize_f = p.pixel_size * p.fpixels as f64;
    params.detsize_s = p.pixel_size * p.spixels as f64;
    let close = dot(&p.pix0_vector, &p.odet_vector);
    params.xbeam = Some(-dot(&p.pix0_vector, &p.fdet_vector));
    params.ybeam = Some(-dot(&p.pix0_vector, &p.sdet_vector));
    params.xclose = None;
    params.yclose = None;
    params.orgx = None;
    params.orgy = None;
    params.close_distance = Some(close);
    let ratio = dot(&params.beam_vector, &p.odet_vector);
    params.distance = if ratio > 0.0 { close / ratio } else { close };
    params.detector_rotx = 0.0;
    params.detector_roty = 0.0;
    params.detector_rotz = 0.0;
    params.detector_twotheta = 0.0;
    params.curved_detector = false;
    params.pix0_vector = None;
}

/// The simulated experiment as a DIALS experiment list model (`--expt-out`), in DIALS's lab frame
/// (the NeXus writer's: McStas by [`ImageMeta::to_mcstas`](crate::io::meta::ImageMeta::to_mcstas),
/// then imgCIF = (−x, y, −z)): the beam, every panel, the spindle (no fixed or setting rotation),
/// `nframes` images from the run's phi, and the crystal as used at φ = 0 (after any misset).
pub fn simulated(exp: &crate::experiment::Experiment, params: &Params, exposure: f64, nframes: usize) -> ExptModel {
    use crate::io::expt::{ExptBeam, ExptCrystal, ExptGoniometer, ExptScan};
    let r = crate::run::headers::image_meta(exp, exposure).to_mcstas();
    let lab = |v: &V3| -> V3 {
        let m = [dot(&r[0], v), dot(&r[1], v), dot(&r[2], v)];
        [-m[0], m[1], -m[2]]
    };
    let beam = &exp.beam;
    let b = lab(&beam.beam_vector);
    let normal = unitize(&cross(&b, &lab(&beam.polar_vector))).0;
    let fraction = if beam.nopolar { 0.5 } else { (beam.polarization + 1.0) / 2.0 };
    let panels = exp
        .det
        .panels
        .iter()
        .enumerate()
        .map(|(i, p)| ExptPanel {
            name: format!("panel{i}"),
            fast_axis: lab(&p.fdet_vector),
            slow_axis: lab(&p.sdet_vector),
            origin: lab(&p.pix0_vector).map(|x| x * 1e3),
            image_size: [p.fpixels, p.spixels],
            pixel_size: [p.pixel_size * 1e3; 2],
            thickness: p.sensor.thick * 1e3,
            mu: if p.sensor.thick > 0.0 { p.sensor.mu * 1e-3 } else { 0.0 },
            material: "Si".into(),
        })
        .collect();
    let id = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    let l = &exp.crystal.lattice;
    let space_group = params.expt.as_ref().and_then(|src| read(src).ok()).and_then(|m| m.crystal).and_then(|c| c.space_group_hall_symbol);
    ExptModel {
        path: Default::default(),
        index: 0,
        beam: ExptBeam { direction: b.map(|x| -x), wavelength: beam.lambda0 * 1e10, polarization_normal: normal, polarization_fraction: fraction },
        panels,
        goniometer: Some(ExptGoniometer { rotation_axis: lab(&exp.scan.spindle_vector), fixed_rotation: id, setting_rotation: id }),
        scan: Some(ExptScan { image_range: [1, nframes.max(1) as i64], oscillation: [exp.scan.phi0.to_degrees(), exp.scan.osc.max(0.0).to_degrees()] }),
        crystal: Some(ExptCrystal { real_space: [l.a0, l.b0, l.c0].map(|v| lab(&v).map(|x| x * 1e10)), space_group_hall_symbol: space_group }),
        imageset: None,
    }
}
