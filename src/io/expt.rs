//! DIALS experiment lists (`.expt`, JSON as dxtbx's `ExperimentList.as_json` writes it): the beam,
//! detector, goniometer, scan and crystal of one experiment, read into plain models in the file's
//! units (mm, Å, degrees) and its lab frame. The image files the list names are never opened.
//!
//! The detector: each panel's frame (fast, slow, origin) is stored relative to its parent group in
//! the `hierarchy` (the root group's frame is the lab's). The global frame is composed down the tree:
//! origin = o_p + x·f_p + y·s_p + z·n_p and each axis v = vx·f_p + vy·s_p + vz·n_p, n_p = f_p × s_p
//! (dxtbx's `PanelFrame`). Without a hierarchy the panels' frames are global.

use crate::base::vec3::{cross, unitize, V3};
use crate::{Error, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Deserialize, Debug, Default)]
#[serde(default)]
struct ListJson {
    experiment: Vec<ExperimentJson>,
    imageset: Vec<serde_json::Value>,
    beam: Vec<BeamJson>,
    detector: Vec<DetectorJson>,
    goniometer: Vec<GoniometerJson>,
    scan: Vec<ScanJson>,
    crystal: Vec<CrystalJson>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(default)]
struct ExperimentJson {
    beam: Option<usize>,
    detector: Option<usize>,
    goniometer: Option<usize>,
    scan: Option<usize>,
    crystal: Option<usize>,
    imageset: Option<usize>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(default)]
struct BeamJson {
    direction: Option<V3>,
    wavelength: Option<f64>,
    polarization_normal: Option<V3>,
    polarization_fraction: Option<f64>,
    divergence: f64,
    sigma_divergence: f64,
    s0_at_scan_points: Vec<serde_json::Value>,
    #[serde(rename = "__id__")]
    id: Option<String>,
}

#[derive(Deserialize, Debug, Default, Clone)]
#[serde(default)]
struct NodeJson {
    name: String,
    fast_axis: Option<V3>,
    slow_axis: Option<V3>,
    origin: Option<V3>,
    image_size: Option<[i64; 2]>,
    pixel_size: Option<[f64; 2]>,
    thickness: f64,
    material: String,
    mu: f64,
    panel: Option<usize>,
    children: Vec<NodeJson>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(default)]
struct DetectorJson {
    panels: Vec<NodeJson>,
    hierarchy: Option<NodeJson>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(default)]
struct GoniometerJson {
    rotation_axis: Option<V3>,
    fixed_rotation: Option<[f64; 9]>,
    setting_rotation: Option<[f64; 9]>,
    setting_rotation_at_scan_points: Vec<serde_json::Value>,
    /// dxtbx's multi-axis goniometer (kappa, ...): its axes from the sample out, their angles
    /// (degrees) and which one scans; it writes no rotation_axis, fixed or setting rotation.
    axes: Option<Vec<V3>>,
    angles: Option<Vec<f64>>,
    scan_axis: Option<usize>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(default)]
struct ScanJson {
    image_range: Option<[i64; 2]>,
    oscillation: Option<[f64; 2]>,
    properties: Option<serde_json::Value>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(default)]
struct CrystalJson {
    real_space_a: Option<V3>,
    real_space_b: Option<V3>,
    real_space_c: Option<V3>,
    #[serde(rename = "A_at_scan_points")]
    a_at_scan_points: Vec<serde_json::Value>,
    space_group_hall_symbol: Option<String>,
}

/// The beam: `direction` points from the sample towards the source (s0 = −direction/λ).
#[derive(Clone, Debug, PartialEq)]
pub struct ExptBeam {
    pub direction: V3,
    /// Å
    pub wavelength: f64,
    pub polarization_normal: V3,
    pub polarization_fraction: f64,
}

/// One panel in the lab frame (mm).
#[derive(Clone, Debug, PartialEq)]
pub struct ExptPanel {
    pub name: String,
    pub fast_axis: V3,
    pub slow_axis: V3,
    /// Lab position of the outer corner of the first pixel, mm.
    pub origin: V3,
    /// Pixels along fast, slow.
    pub image_size: [usize; 2],
    /// mm along fast, slow.
    pub pixel_size: [f64; 2],
    /// mm (0 = not given)
    pub thickness: f64,
    /// 1/mm
    pub mu: f64,
    pub material: String,
}

/// The goniometer: the lab-frame axis is S·axis; the crystal at scan angle φ is S·R(axis, φ)·F·A.
#[derive(Clone, Debug, PartialEq)]
pub struct ExptGoniometer {
    pub rotation_axis: V3,
    /// Row-major 3×3.
    pub fixed_rotation: [f64; 9],
    pub setting_rotation: [f64; 9],
}

/// The scan: images `image_range[0]..=image_range[1]`; image k starts at
/// `oscillation[0] + (k − image_range[0])·oscillation[1]` degrees.
#[derive(Clone, Debug, PartialEq)]
pub struct ExptScan {
    pub image_range: [i64; 2],
    /// start, width (degrees)
    pub oscillation: [f64; 2],
}

/// The crystal's real-space vectors a, b, c (Å) in the lab frame at φ = 0 (before F and S).
#[derive(Clone, Debug, PartialEq)]
pub struct ExptCrystal {
    pub real_space: [V3; 3],
    pub space_group_hall_symbol: Option<String>,
}

/// One experiment of a list, resolved: global panel frames, every model it names.
#[derive(Clone, Debug, PartialEq)]
pub struct ExptModel {
    pub path: PathBuf,
    /// Which experiment of the list (0-based).
    pub index: usize,
    pub beam: ExptBeam,
    pub panels: Vec<ExptPanel>,
    pub goniometer: Option<ExptGoniometer>,
    pub scan: Option<ExptScan>,
    pub crystal: Option<ExptCrystal>,
    /// The experiment's imageset entry as written (kept for `--expt-out`).
    pub imageset: Option<serde_json::Value>,
}

/// Read experiment `which` (0-based; `None` is allowed only for a list of one) of the DIALS experiment
/// list at `path`. `flag` names the option that selects the experiment in messages.
pub fn read_expt(path: &Path, which: Option<usize>, flag: &str) -> Result<ExptModel> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, "cannot read experiment list", e))?;
    let list: ListJson = serde_json::from_str(&text).map_err(|e| Error::file(path, format!("not a DIALS experiment list: {e}")))?;
    let bad = |jpath: String, why: String| Error::file(path, format!("{jpath}: {why}"));
    let n = list.experiment.len();
    let index = match (which, n) {
        (_, 0) => return Err(bad("experiment".into(), "the list holds no experiment".into())),
        (None, 1) => 0,
        (None, n) => return Err(bad("experiment".into(), format!("the list holds {n} experiments: choose one with {flag} N (0 to {})", n - 1))),
        (Some(i), n) if i >= n => return Err(Error::flag(flag, format!("{i} is past the {n} experiments of {} (0 to {})", path.display(), n - 1))),
        (Some(i), _) => i,
    };
    let e = &list.experiment[index];
    let ep = format!("experiment[{index}]");
    fn pick<'a, T>(v: &'a [T], i: Option<usize>, what: &str, ep: &str) -> std::result::Result<Option<&'a T>, (String, String)> {
        match i {
            None => Ok(None),
            Some(i) => v.get(i).map(Some).ok_or_else(|| (format!("{ep}.{what}"), format!("{i} is past the {} {what} models of the list", v.len()))),
        }
    }
    let beam = pick(&list.beam, e.beam, "beam", &ep).map_err(|(p, w)| bad(p, w))?.ok_or_else(|| bad(format!("{ep}.beam"), "the experiment has no beam".into()))?;
    let det = pick(&list.detector, e.detector, "detector", &ep).map_err(|(p, w)| bad(p, w))?.ok_or_else(|| bad(format!("{ep}.detector"), "the experiment has no detector".into()))?;
    let gonio = pick(&list.goniometer, e.goniometer, "goniometer", &ep).map_err(|(p, w)| bad(p, w))?;
    let scan = pick(&list.scan, e.scan, "scan", &ep).map_err(|(p, w)| bad(p, w))?;
    let crystal = pick(&list.crystal, e.crystal, "crystal", &ep).map_err(|(p, w)| bad(p, w))?;
    let imageset = e.imageset.and_then(|i| list.imageset.get(i).cloned());

    let bi = e.beam.unwrap_or(0);
    let beam = read_beam(beam, &format!("beam[{bi}]")).map_err(|(p, w)| bad(p, w))?;
    let di = e.detector.unwrap_or(0);
    let panels = read_detector(det, &format!("detector[{di}]")).map_err(|(p, w)| bad(p, w))?;
    let goniometer = match gonio {
        Some(g) => Some(read_goniometer(g, &format!("goniometer[{}]", e.goniometer.unwrap_or(0))).map_err(|(p, w)| bad(p, w))?),
        None => None,
    };
    let scan = match scan {
        Some(s) => Some(read_scan(s, &format!("scan[{}]", e.scan.unwrap_or(0))).map_err(|(p, w)| bad(p, w))?),
        None => None,
    };
    let crystal = match crystal {
        Some(c) => Some(read_crystal(c, &format!("crystal[{}]", e.crystal.unwrap_or(0))).map_err(|(p, w)| bad(p, w))?),
        None => None,
    };
    Ok(ExptModel { path: path.to_path_buf(), index, beam, panels, goniometer, scan, crystal, imageset })
}

type JResult<T> = std::result::Result<T, (String, String)>;

fn need<T: Copy>(v: Option<T>, jpath: &str, field: &str) -> JResult<T> {
    v.ok_or_else(|| (format!("{jpath}.{field}"), "missing".to_string()))
}

fn finite(v: &[f64], jpath: &str, field: &str) -> JResult<()> {
    if v.iter().all(|x| x.is_finite()) {
        Ok(())
    } else {
        Err((format!("{jpath}.{field}"), format!("{v:?} is not finite")))
    }
}

use crate::base::consts::WAVELENGTH_RANGE_A as WAVELENGTH_RANGE; // Å: the -lambda range

/// The unit vector along `v`: refused when `v` is zero or too long for its length to be computed
/// (|v|² overflows, and `v`/|v| would be the zero vector).
fn direction_of(v: &V3, jp: &str, field: &str) -> JResult<V3> {
    let (u, len) = unitize(v);
    if len > 0.0 && len.is_finite() {
        Ok(u)
    } else {
        Err((format!("{jp}.{field}"), format!("{v:?} is no direction (zero, or too long to normalize)")))
    }
}

/// Refuse a matrix that is not a proper rotation (orthonormal rows to `ROTATION_TOL`, determinant +1):
/// a scaled or sheared "rotation" would silently rescale or shear the crystal.
fn rotation(m: &[f64; 9], jp: &str, field: &str) -> JResult<()> {
    let (worst, det) = crate::base::vec3::rotation_deviation(&rows(m));
    match (worst <= ROTATION_TOL, det > 0.0) {
        (true, true) => Ok(()),
        (false, _) => Err((format!("{jp}.{field}"), format!("{m:?} is not a rotation: its rows are not orthonormal (to {ROTATION_TOL:e})"))),
        (true, false) => Err((format!("{jp}.{field}"), format!("{m:?} is a reflection (determinant {det:.6}), not a rotation"))),
    }
}

/// Tolerance on a goniometer matrix's MMᵀ = I: DIALS writes full precision, hand-made lists 6 digits.
const ROTATION_TOL: f64 = 1e-4;

fn read_beam(b: &BeamJson, jp: &str) -> JResult<ExptBeam> {
    if !b.s0_at_scan_points.is_empty() {
        return Err((format!("{jp}.s0_at_scan_points"), "scan-varying beam: a beam that changes across the scan cannot be simulated".into()));
    }
    if let Some(id) = &b.id {
        if id != "monochromatic" {
            return Err((format!("{jp}.__id__"), format!("a {id} beam cannot be simulated (only a monochromatic beam)")));
        }
    }
    let direction = need(b.direction, jp, "direction")?;
    let wavelength = need(b.wavelength, jp, "wavelength")?;
    finite(&direction, jp, "direction")?;
    if !(wavelength > 0.0 && wavelength.is_finite()) {
        return Err((format!("{jp}.wavelength"), format!("{wavelength:e} Å must be positive")));
    }
    if !WAVELENGTH_RANGE.contains(&wavelength) {
        return Err((format!("{jp}.wavelength"), format!("{wavelength:e} Å is not an X-ray wavelength this program can simulate (1e-6 to 1e7 Angstrom)")));
    }
    let d = direction_of(&direction, jp, "direction")?;
    let normal = b.polarization_normal.unwrap_or([0.0, 1.0, 0.0]);
    finite(&normal, jp, "polarization_normal")?;
    direction_of(&normal, jp, "polarization_normal")?;
    let pf = b.polarization_fraction.unwrap_or(0.5);
    if !(0.0..=1.0).contains(&pf) {
        return Err((format!("{jp}.polarization_fraction"), format!("{pf} is not between 0 and 1")));
    }
    if b.divergence != 0.0 || b.sigma_divergence != 0.0 {
        // the model's divergence is a refined spot-width parameter, not a beam to sample: ignored
    }
    Ok(ExptBeam { direction: d, wavelength, polarization_normal: normal, polarization_fraction: pf })
}

/// A node's frame (fast, slow, origin) as given.
fn frame(n: &NodeJson, jp: &str) -> JResult<(V3, V3, V3)> {
    let f = need(n.fast_axis, jp, "fast_axis")?;
    let s = need(n.slow_axis, jp, "slow_axis")?;
    let o = need(n.origin, jp, "origin")?;
    finite(&f, jp, "fast_axis")?;
    finite(&s, jp, "slow_axis")?;
    finite(&o, jp, "origin")?;
    Ok((f, s, o))
}

/// `local` (fast, slow, origin) in the frame of `parent`, made global.
fn compose(parent: &(V3, V3, V3), local: &(V3, V3, V3)) -> (V3, V3, V3) {
    let (pf, ps, po) = parent;
    let pn = cross(pf, ps);
    let m = |v: &V3| -> V3 { std::array::from_fn(|i| v[0] * pf[i] + v[1] * ps[i] + v[2] * pn[i]) };
    let o = m(&local.2);
    (m(&local.0), m(&local.1), [po[0] + o[0], po[1] + o[1], po[2] + o[2]])
}

fn read_detector(d: &DetectorJson, jp: &str) -> JResult<Vec<ExptPanel>> {
    if d.panels.is_empty() {
        return Err((format!("{jp}.panels"), "the detector has no panel".into()));
    }
    // global frame of each panel
    let mut frames: Vec<Option<(V3, V3, V3)>> = vec![None; d.panels.len()];
    match &d.hierarchy {
        None => {
            for (i, p) in d.panels.iter().enumerate() {
                frames[i] = Some(frame(p, &format!("{jp}.panels[{i}]"))?);
            }
        }
        Some(root) => {
            let rf = frame(root, &format!("{jp}.hierarchy"))?;
            walk(d, &root.children, &rf, &format!("{jp}.hierarchy"), &mut frames, 0)?;
        }
    }
    let mut out = Vec::with_capacity(d.panels.len());
    for (i, p) in d.panels.iter().enumerate() {
        let pj = format!("{jp}.panels[{i}]");
        let (f, s, o) = frames[i].ok_or_else(|| (format!("{jp}.hierarchy"), format!("panel {i} is not in the hierarchy")))?;
        let size = need(p.image_size, &pj, "image_size")?;
        if size[0] <= 0 || size[1] <= 0 {
            return Err((format!("{pj}.image_size"), format!("{size:?}: a panel needs pixels")));
        }
        let px = need(p.pixel_size, &pj, "pixel_size")?;
        if !(px[0] > 0.0 && px[1] > 0.0 && px[0].is_finite() && px[1].is_finite()) {
            return Err((format!("{pj}.pixel_size"), format!("{px:?} mm: pixel sizes must be positive")));
        }
        if !(p.thickness >= 0.0 && p.thickness.is_finite() && p.mu >= 0.0 && p.mu.is_finite()) {
            return Err((format!("{pj}.thickness"), format!("thickness {} mm and mu {} /mm must be finite and not negative", p.thickness, p.mu)));
        }
        // the sensor's layers step along the panel normal: a huge one moved the pixels away
        if p.thickness > crate::base::consts::MAX_SENSOR_THICKNESS_M * 1e3 {
            return Err((format!("{pj}.thickness"), format!("{} mm is not a sensor's thickness (at most 1 m)", crate::base::c::printf::g(p.thickness))));
        }
        out.push(ExptPanel {
            name: p.name.clone(),
            fast_axis: f,
            slow_axis: s,
            origin: o,
            image_size: [size[0] as usize, size[1] as usize],
            pixel_size: px,
            // the placeholder of an NXmx file simulated without a sensor thickness (give or take a
            // unit conversion's rounding): none
            thickness: if p.thickness <= crate::base::consts::NXMX_NO_SENSOR_THICKNESS_MM * 1.001 { 0.0 } else { p.thickness },
            mu: p.mu,
            material: p.material.clone(),
        });
    }
    Ok(out)
}

fn walk(d: &DetectorJson, children: &[NodeJson], parent: &(V3, V3, V3), jp: &str, frames: &mut [Option<(V3, V3, V3)>], depth: usize) -> JResult<()> {
    if depth > 64 {
        return Err((jp.to_string(), "the hierarchy is more than 64 groups deep".into()));
    }
    for (k, c) in children.iter().enumerate() {
        let cj = format!("{jp}.children[{k}]");
        match c.panel {
            Some(i) => {
                let p = d.panels.get(i).ok_or_else(|| (format!("{cj}.panel"), format!("{i} is past the {} panels", d.panels.len())))?;
                if frames[i].is_some() {
                    return Err((format!("{cj}.panel"), format!("panel {i} appears twice in the hierarchy")));
                }
                let local = frame(p, &format!("{}.panels[{i}]", jp.split(".hierarchy").next().unwrap_or(jp)))?;
                frames[i] = Some(compose(parent, &local));
            }
            None => {
                let local = frame(c, &cj)?;
                let g = compose(parent, &local);
                walk(d, &c.children, &g, &cj, frames, depth + 1)?;
            }
        }
    }
    Ok(())
}

fn read_goniometer(g: &GoniometerJson, jp: &str) -> JResult<ExptGoniometer> {
    if !g.setting_rotation_at_scan_points.is_empty() {
        return Err((format!("{jp}.setting_rotation_at_scan_points"), "scan-varying goniometer: a setting that changes across the scan cannot be simulated".into()));
    }
    if let (Some(axes), None) = (&g.axes, g.rotation_axis) {
        return multi_axis(axes, g, jp);
    }
    let axis = need(g.rotation_axis, jp, "rotation_axis")?;
    finite(&axis, jp, "rotation_axis")?;
    let axis = direction_of(&axis, jp, "rotation_axis")?;
    let fixed = g.fixed_rotation.unwrap_or(IDENTITY);
    let setting = g.setting_rotation.unwrap_or(IDENTITY);
    finite(&fixed, jp, "fixed_rotation")?;
    finite(&setting, jp, "setting_rotation")?;
    rotation(&fixed, jp, "fixed_rotation")?;
    rotation(&setting, jp, "setting_rotation")?;
    Ok(ExptGoniometer { rotation_axis: axis, fixed_rotation: fixed, setting_rotation: setting })
}

/// dxtbx's `MultiAxisGoniometer` as the single-axis model: the scan axis, F = R(axis_{s−1}, angle_{s−1})
/// ··· R(axis_0, angle_0) of the axes inside it and S = R(axis_{n−1}, …) ··· R(axis_{s+1}, …) of those
/// outside it (dxtbx's `get_fixed_rotation`/`get_setting_rotation`, checked against its numbers).
fn multi_axis(axes: &[V3], g: &GoniometerJson, jp: &str) -> JResult<ExptGoniometer> {
    let angles = g.angles.as_deref().unwrap_or_default();
    if angles.len() != axes.len() {
        return Err((format!("{jp}.angles"), format!("{} angles for {} axes", angles.len(), axes.len())));
    }
    let scan = need(g.scan_axis, jp, "scan_axis")?;
    if scan >= axes.len() {
        return Err((format!("{jp}.scan_axis"), format!("{scan} is not one of the {} axes", axes.len())));
    }
    let mut units = Vec::with_capacity(axes.len());
    for (i, (a, t)) in axes.iter().zip(angles).enumerate() {
        finite(a, jp, &format!("axes[{i}]"))?;
        if !t.is_finite() {
            return Err((format!("{jp}.angles[{i}]"), format!("{t:?} is not finite")));
        }
        units.push(direction_of(a, jp, &format!("axes[{i}]"))?);
    }
    let product = |range: std::ops::Range<usize>| {
        let m = range.fold(rows(&IDENTITY), |m, i| crate::base::vec3::mat3_mul(&axis_angle_matrix(&units[i], angles[i].to_radians()), &m));
        std::array::from_fn(|k| m[k / 3][k % 3])
    };
    Ok(ExptGoniometer { rotation_axis: units[scan], fixed_rotation: product(0..scan), setting_rotation: product(scan + 1..axes.len()) })
}

const IDENTITY: [f64; 9] = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];

/// A row-major nine as the rows of a [`M3`](crate::base::vec3::M3).
fn rows(m: &[f64; 9]) -> crate::base::vec3::M3 {
    [[m[0], m[1], m[2]], [m[3], m[4], m[5]], [m[6], m[7], m[8]]]
}

/// The rotation by `phi` about the unit `axis` (its columns: the rotated basis vectors).
fn axis_angle_matrix(axis: &V3, phi: f64) -> crate::base::vec3::M3 {
    let c = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]].map(|e| crate::base::vec3::rotate_axis(&e, axis, phi));
    [[c[0][0], c[1][0], c[2][0]], [c[0][1], c[1][1], c[2][1]], [c[0][2], c[1][2], c[2][2]]]
}

fn read_scan(s: &ScanJson, jp: &str) -> JResult<ExptScan> {
    let image_range = need(s.image_range, jp, "image_range")?;
    let oscillation = match (s.oscillation, &s.properties) {
        (Some(o), _) => o,
        (None, Some(p)) => {
            // newer dxtbx: properties.oscillation holds each image's start angle
            let starts = numbers(p.get("oscillation"), jp, "properties.oscillation")?;
            match starts.as_slice() {
                [a, b, ..] => [*a, b - a],
                _ => return Err((format!("{jp}.properties.oscillation"), "needs the start angles of at least two images".into())),
            }
        }
        (None, None) => return Err((format!("{jp}.oscillation"), "missing".into())),
    };
    finite(&oscillation, jp, "oscillation")?;
    // the image count must fit in an i64: later offsets (image k − first) are taken within it
    match image_range[1].checked_sub(image_range[0]).and_then(|n| n.checked_add(1)) {
        Some(n) if n > 0 => {}
        Some(_) => return Err((format!("{jp}.image_range"), format!("{image_range:?} holds no image"))),
        None => return Err((format!("{jp}.image_range"), format!("{image_range:?} holds more images than can be counted"))),
    }
    Ok(ExptScan { image_range, oscillation })
}

/// The numbers of a JSON array (none when `v` is not an array); an entry that is not a finite number
/// is refused, not dropped (dropping one would shift every later value).
fn numbers(v: Option<&serde_json::Value>, jp: &str, field: &str) -> JResult<Vec<f64>> {
    let Some(a) = v.and_then(|v| v.as_array()) else { return Ok(Vec::new()) };
    a.iter()
        .enumerate()
        .map(|(i, x)| x.as_f64().filter(|v| v.is_finite()).ok_or_else(|| (format!("{jp}.{field}[{i}]"), format!("{x} is not a finite number"))))
        .collect()
}

fn read_crystal(c: &CrystalJson, jp: &str) -> JResult<ExptCrystal> {
    if !c.a_at_scan_points.is_empty() {
        return Err((format!("{jp}.A_at_scan_points"), "scan-varying crystal: an orientation or cell that changes across the scan cannot be simulated".into()));
    }
    let a = need(c.real_space_a, jp, "real_space_a")?;
    let b = need(c.real_space_b, jp, "real_space_b")?;
    let cc = need(c.real_space_c, jp, "real_space_c")?;
    for (v, f) in [(&a, "real_space_a"), (&b, "real_space_b"), (&cc, "real_space_c")] {
        finite(v, jp, f)?;
    }
    Ok(ExptCrystal { real_space: [a, b, cc], space_group_hall_symbol: c.space_group_hall_symbol.clone() })
}

/// The experiment list of one experiment in dxtbx's JSON (`--expt-out`): `m`'s beam, panels (a flat
/// detector, global frames), goniometer, scan (with `exposure` seconds per image) and crystal, and an
/// `ImageSequence` naming `image` (a NeXus file) when given.
pub fn expt_json(m: &ExptModel, image: Option<&Path>, exposure: f64) -> String {
    use serde_json::json;
    let b = &m.beam;
    let beam = json!({"direction": b.direction, "wavelength": b.wavelength, "divergence": 0.0, "sigma_divergence": 0.0,
        "polarization_normal": b.polarization_normal, "polarization_fraction": b.polarization_fraction, "flux": 0.0, "transmission": 1.0});
    let panels: Vec<serde_json::Value> = m
        .panels
        .iter()
        .map(|p| {
            json!({"name": p.name, "type": "SENSOR_PAD", "fast_axis": p.fast_axis, "slow_axis": p.slow_axis, "origin": p.origin,
                "raw_image_offset": [0, 0], "image_size": p.image_size, "pixel_size": p.pixel_size, "trusted_range": [-1.0, 2147483647.0],
                "thickness": p.thickness, "material": p.material, "mu": p.mu, "identifier": "", "mask": [], "gain": 1.0, "pedestal": 0.0,
                "px_mm_strategy": {"type": "SimplePxMmStrategy"}})
        })
        .collect();
    let mut experiment = json!({"__id__": "Experiment", "identifier": "", "beam": 0, "detector": 0});
    let mut list = json!({"__id__": "ExperimentList", "beam": [beam], "detector": [{"panels": panels}], "imageset": [], "profile": [], "scaling_model": []});
    if let Some(g) = &m.goniometer {
        experiment["goniometer"] = json!(0);
        list["goniometer"] = json!([{"rotation_axis": g.rotation_axis, "fixed_rotation": g.fixed_rotation, "setting_rotation": g.setting_rotation}]);
    }
    if let Some(s) = &m.scan {
        let n = (s.image_range[1] - s.image_range[0] + 1).max(0) as usize;
        experiment["scan"] = json!(0);
        list["scan"] = json!([{"image_range": s.image_range, "batch_offset": 0, "oscillation": s.oscillation,
            "exposure_time": vec![exposure; n], "epochs": (0..n).map(|i| i as f64 * exposure).collect::<Vec<f64>>(), "valid_image_ranges": {}}]);
    }
    if let Some(c) = &m.crystal {
        experiment["crystal"] = json!(0);
        list["crystal"] = json!([{"__id__": "crystal", "real_space_a": c.real_space[0], "real_space_b": c.real_space[1], "real_space_c": c.real_space[2],
            "space_group_hall_symbol": c.space_group_hall_symbol.clone().unwrap_or_else(|| " P 1".into())}]);
    }
    if let Some(path) = image {
        experiment["imageset"] = json!(0);
        list["imageset"] = json!([{"__id__": "ImageSequence", "template": path.to_string_lossy(), "single_file_indices": (0..m.scan.as_ref().map_or(1, |s| (s.image_range[1] - s.image_range[0] + 1).max(1))).collect::<Vec<i64>>(),
            "mask": null, "gain": null, "pedestal": null, "dx": null, "dy": null, "params": {"dynamic_shadowing": "Auto", "multi_panel": m.panels.len() > 1}}]);
    }
    list["experiment"] = json!([experiment]);
    let mut text = serde_json::to_string_pretty(&list).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kappa-like goniometer as dxtbx 3.12 writes it (`axes`, `angles`, `names`, `scan_axis`, no
    /// rotation_axis): F, S and the axis equal dxtbx's `get_fixed_rotation`, `get_setting_rotation`
    /// and `get_rotation_axis_datum` (numbers printed by dxtbx for these axes and angles).
    #[test]
    fn a_multi_axis_goniometer_is_dxtbxs_single_axis_model() {
        let g: GoniometerJson = serde_json::from_value(serde_json::json!({
            "axes": [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.6, 0.8, 0], [0, 0.6, 0.8]],
            "angles": [10, 20, 30, 40, 50], "names": ["a", "b", "c", "d", "e"], "scan_axis": 2
        }))
        .unwrap();
        let m = read_goniometer(&g, "goniometer[0]").unwrap();
        let fixed = [0.9396926207859084, 0.0593911746138847, 0.33682408883346515, 0.0, 0.984807753012208, -0.17364817766693033, -0.3420201433256687, 0.16317591116653482, 0.9254165783983234];
        let setting = [0.241367543682494, -0.3117705049921483, 0.9189890429562367, 0.5195292439313884, 0.8413638031222306, 0.14898427935784425, -0.8196530202206048, 0.4414817131123746, 0.36505180924165226];
        for k in 0..9 {
            assert!((m.fixed_rotation[k] - fixed[k]).abs() < 1e-12, "F[{k}] {} vs {}", m.fixed_rotation[k], fixed[k]);
            assert!((m.setting_rotation[k] - setting[k]).abs() < 1e-12, "S[{k}] {} vs {}", m.setting_rotation[k], setting[k]);
        }
        assert_eq!(m.rotation_axis, [0.0, 0.0, 1.0]);
        let bad = |v: serde_json::Value, want: &str| {
            let g: GoniometerJson = serde_json::from_value(v).unwrap();
            let (path, why) = read_goniometer(&g, "goniometer[0]").unwrap_err();
            assert!(format!("{path}: {why}").contains(want), "{path}: {why}");
        };
        bad(serde_json::json!({"axes": [[1, 0, 0]], "angles": [], "scan_axis": 0}), "goniometer[0].angles: 0 angles for 1 axes");
        bad(serde_json::json!({"axes": [[1, 0, 0]], "angles": [0], "scan_axis": 1}), "goniometer[0].scan_axis: 1 is not one of the 1 axes");
        bad(serde_json::json!({"axes": [[0, 0, 0]], "angles": [0], "scan_axis": 0}), "goniometer[0].axes[0]");
        bad(serde_json::json!({"axes": [[1, 0, 0]], "angles": [0]}), "scan_axis");
    }
}
