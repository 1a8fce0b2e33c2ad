//! The refinable parameters ([`Param`]) and, for each, the tangent of every resolved quantity the
//! pixel loop reads ([`Resolved`]): d(pix0, fdet, sdet, odet, distances, source directions and
//! wavelengths, the orientation table, N, reciprocal vectors, fluence, background)/dθ in the flag's unit.
//!
//! How the tangents are taken. The setup (nanoBragg.c L1119-L2530) is closed-form, smooth geometry of
//! the parameters, resolved by [`Experiment::build`]; its tangents are the fourth-order central
//! (Richardson) difference of `build` at θ ± h and θ ± 2h with every seed, sample count and choice of
//! the base run kept (accurate to ~1e-10 relative: the error is O(h⁴) of trigonometric and rational
//! functions, and there is no branch between the four builds). `mosaic` is analytic instead: the C
//! draws each domain's rotation angle in single precision (`mosaic_rotation_umat`), so a difference
//! would see f32 steps; the domain's rotation R(v, φ) with φ ∝ spread has dR/dspread = (φ/spread)·[v]×R.
//! The pixel loop that consumes these tangents (`kernel::tangents`) is analytic throughout.

use crate::base::consts::RTD;
use crate::base::vec3::{cross, V3};
use crate::experiment::inputs::Inputs;
use crate::experiment::params::{CellInput, CrystalShape, Misset, Params};
use crate::experiment::Experiment;
use crate::{Error, Result};

/// A parameter the image can be differentiated by, in the unit of its flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Param {
    RotX,
    RotY,
    RotZ,
    A,
    B,
    C,
    Alpha,
    Beta,
    Gamma,
    #[serde(rename = "Na")]
    Na,
    #[serde(rename = "Nb")]
    Nb,
    #[serde(rename = "Nc")]
    Nc,
    Mosaic,
    Distance,
    #[serde(rename = "Xbeam")]
    Xbeam,
    #[serde(rename = "Ybeam")]
    Ybeam,
    DetectorRotx,
    DetectorRoty,
    DetectorRotz,
    Lambda,
    Fluence,
}

impl Param {
    pub const ALL: [Param; 21] = [
        Param::RotX,
        Param::RotY,
        Param::RotZ,
        Param::A,
        Param::B,
        Param::C,
        Param::Alpha,
        Param::Beta,
        Param::Gamma,
        Param::Na,
        Param::Nb,
        Param::Nc,
        Param::Mosaic,
        Param::Distance,
        Param::Xbeam,
        Param::Ybeam,
        Param::DetectorRotx,
        Param::DetectorRoty,
        Param::DetectorRotz,
        Param::Lambda,
        Param::Fluence,
    ];

    /// The name used by `--gradients` and in file names (`P<NAME>.bin`).
    pub fn name(self) -> &'static str {
        use Param::*;
        match self {
            RotX => "rot_x",
            RotY => "rot_y",
            RotZ => "rot_z",
            A => "a",
            B => "b",
            C => "c",
            Alpha => "alpha",
            Beta => "beta",
            Gamma => "gamma",
            Na => "Na",
            Nb => "Nb",
            Nc => "Nc",
            Mosaic => "mosaic",
            Distance => "distance",
            Xbeam => "Xbeam",
            Ybeam => "Ybeam",
            DetectorRotx => "detector_rotx",
            DetectorRoty => "detector_roty",
            DetectorRotz => "detector_rotz",
            Lambda => "lambda",
            Fluence => "fluence",
        }
    }

    /// The unit of the flag (and of the derivative's denominator).
    pub fn unit(self) -> &'static str {
        use Param::*;
        match self {
            RotX | RotY | RotZ | Alpha | Beta | Gamma | Mosaic | DetectorRotx | DetectorRoty | DetectorRotz => "deg",
            A | B | C | Lambda => "A",
            Na | Nb | Nc => "unit cells",
            Distance | Xbeam | Ybeam => "mm",
            Fluence => "photons/m^2",
        }
    }

    pub fn parse(s: &str) -> Option<Param> {
        Param::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Every valid name, comma-separated (for error messages and help).
    pub fn names() -> String {
        Param::ALL.map(|p| p.name()).join(", ")
    }

    /// Whether the parameter moves the detector of the flags (`-distance`, `-Xbeam`, `-Ybeam`,
    /// `-detector_rot*`), which a detector read from a file (`--expt`, `--geom`) does not follow.
    pub fn is_detector(self) -> bool {
        use Param::*;
        matches!(self, Distance | Xbeam | Ybeam | DetectorRotx | DetectorRoty | DetectorRotz)
    }

    /// Whether the parameter is one of the six cell constants (which need `-cell` or a model's cell).
    pub fn is_cell(self) -> bool {
        matches!(self, Param::A | Param::B | Param::C | Param::Alpha | Param::Beta | Param::Gamma)
    }

    /// The parameter's value in its flag's unit, in `p` as [`frozen`] made it (every default filled).
    pub fn value(self, p: &Params) -> f64 {
        use Param::*;
        let cell = p.cell.unwrap_or_default();
        match self {
            RotX => p.crystal_rot[0] * RTD,
            RotY => p.crystal_rot[1] * RTD,
            RotZ => p.crystal_rot[2] * RTD,
            A => cell.a,
            B => cell.b,
            C => cell.c,
            Alpha => cell.alpha * RTD,
            Beta => cell.beta * RTD,
            Gamma => cell.gamma * RTD,
            Na => p.na,
            Nb => p.nb,
            Nc => p.nc,
            Mosaic => p.mosaic_spread.unwrap_or(0.0) * RTD,
            Distance => p.distance * 1e3,
            Xbeam => p.xbeam.unwrap_or(0.0) * 1e3,
            Ybeam => p.ybeam.unwrap_or(0.0) * 1e3,
            DetectorRotx => p.detector_rotx * RTD,
            DetectorRoty => p.detector_roty * RTD,
            DetectorRotz => p.detector_rotz * RTD,
            Lambda => p.lambda0 * 1e10,
            Fluence => p.fluence,
        }
    }

    /// Set the parameter to `v` (flag unit) in `p`, touching only its own field (the pivot and every
    /// other choice of the run stay as they are).
    pub fn set(self, p: &mut Params, v: f64) {
        use Param::*;
        if self.is_cell() {
            let cell = p.cell.get_or_insert_with(CellInput::default);
            match self {
                A => cell.a = v,
                B => cell.b = v,
                C => cell.c = v,
                Alpha => cell.alpha = v / RTD,
                Beta => cell.beta = v / RTD,
                _ => cell.gamma = v / RTD,
            }
        }
        match self {
            RotX => p.crystal_rot[0] = v / RTD,
            RotY => p.crystal_rot[1] = v / RTD,
            RotZ => p.crystal_rot[2] = v / RTD,
            Na => p.na = v,
            Nb => p.nb = v,
            Nc => p.nc = v,
            Mosaic => p.mosaic_spread = Some(v / RTD),
            Distance => p.distance = v * 1e-3,
            Xbeam => p.xbeam = Some(v * 1e-3),
            Ybeam => p.ybeam = Some(v * 1e-3),
            DetectorRotx => p.detector_rotx = v / RTD,
            DetectorRoty => p.detector_roty = v / RTD,
            DetectorRotz => p.detector_rotz = v / RTD,
            Lambda => p.lambda0 = v * 1e-10,
            Fluence => p.fluence = v,
            _ => {}
        }
    }

    /// The difference step at value `v`: small enough for the O(h⁴) error to vanish, large enough
    /// for rounding to stay near 1e-12 relative.
    fn step(self, v: f64) -> f64 {
        use Param::*;
        match self {
            RotX | RotY | RotZ | Alpha | Beta | Gamma | DetectorRotx | DetectorRoty | DetectorRotz => 1e-2,
            Distance | Xbeam | Ybeam => 1e-3,
            Na | Nb | Nc => 1e-2,
            _ => 1e-4 * v.abs().max(1e-30),
        }
    }
}

/// One panel's resolved geometry, as the pixel loop reads it (metres).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PanelGeom {
    pub pix0: V3,
    pub fdet: V3,
    pub sdet: V3,
    pub odet: V3,
    pub distance: f64,
    pub close_distance: f64,
}

/// The quantities of a resolved experiment that the pixel loop reads and a parameter can move, or
/// (for a tangent) their derivatives by one parameter. Everything else of the experiment (sample
/// counts, pixel size, sensor, structure factors) is held fixed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resolved {
    pub panels: Vec<PanelGeom>,
    pub beam_vector: V3,
    pub polar_vector: V3,
    /// Per source: direction (towards the source, as the C's `source_X/Y/Z`) and wavelength (m).
    pub sources: Vec<(V3, f64)>,
    /// Per phi step × mosaic domain: a, b, c (m).
    pub orientations: Vec<[V3; 3]>,
    pub n: [f64; 3],
    /// a*, b*, c* (1/Å; the gaussian spot shape reads them).
    pub recip: [V3; 3],
    pub fluence: f64,
    pub i_bg: f64,
}

impl Resolved {
    pub fn of(exp: &Experiment) -> Resolved {
        let l = &exp.crystal.lattice;
        Resolved {
            panels: exp
                .det
                .panels
                .iter()
                .map(|p| PanelGeom { pix0: p.pix0_vector, fdet: p.fdet_vector, sdet: p.sdet_vector, odet: p.odet_vector, distance: p.distance, close_distance: p.close_distance })
                .collect(),
            beam_vector: exp.beam.beam_vector,
            polar_vector: exp.beam.polar_vector,
            sources: exp.beam.sources.iter().map(|s| (s.dir, s.lambda)).collect(),
            orientations: exp.crystal.orientations.iter().map(|o| [o.a, o.b, o.c]).collect(),
            n: [exp.crystal.na, exp.crystal.nb, exp.crystal.nc],
            recip: [l.a_star, l.b_star, l.c_star],
            fluence: exp.beam.fluence,
            i_bg: exp.background.i_bg,
        }
    }

    /// Every number, in a fixed order (the order [`Resolved::visit`] walks).
    pub fn values(&self) -> Vec<f64> {
        let mut c = self.clone();
        let mut out = Vec::new();
        c.visit(&mut |x| out.push(*x));
        out
    }

    /// Walk every number mutably in a fixed order: panels, beam, polarization, sources, orientations,
    /// N, reciprocal vectors, fluence, background.
    pub fn visit(&mut self, f: &mut impl FnMut(&mut f64)) {
        for p in &mut self.panels {
            for v in [&mut p.pix0, &mut p.fdet, &mut p.sdet, &mut p.odet] {
                v.iter_mut().for_each(&mut *f);
            }
            f(&mut p.distance);
            f(&mut p.close_distance);
        }
        self.beam_vector.iter_mut().for_each(&mut *f);
        self.polar_vector.iter_mut().for_each(&mut *f);
        for (d, l) in &mut self.sources {
            d.iter_mut().for_each(&mut *f);
            f(l);
        }
        for o in &mut self.orientations {
            o.iter_mut().flatten().for_each(&mut *f);
        }
        self.n.iter_mut().for_each(&mut *f);
        self.recip.iter_mut().flatten().for_each(&mut *f);
        f(&mut self.fluence);
        f(&mut self.i_bg);
    }

    /// Σ wᵢ·rᵢ over resolved sets of the same shape.
    fn combine(parts: &[(f64, &Resolved)]) -> Result<Resolved> {
        let mut out = parts[0].1.clone();
        let vals: Vec<Vec<f64>> = parts.iter().map(|(_, r)| r.values()).collect();
        if vals.iter().any(|v| v.len() != vals[0].len()) {
            return Err(Error::flag("--gradients", "the setup changes shape (sources, domains or phi steps) under a small change of the parameter"));
        }
        let mut i = 0;
        out.visit(&mut |x| {
            *x = parts.iter().zip(&vals).map(|((w, _), v)| w * v[i]).sum();
            i += 1;
        });
        Ok(out)
    }
}

/// Refuse what cannot be differentiated: `-tophat_spots` (a step function of h, k, l), the cell
/// constants without a cell to change (`-mat` alone), `-misset random` whose seed came from the clock,
/// and the detector's parameters where the panels come from a file (they do not move with the flags:
/// the derivative images were all 0 and a fit of them "converged" without moving).
pub fn check(params: &Params, inputs: &Inputs, names: &[Param]) -> Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    if let (Some(p), true) = (names.iter().find(|p| p.is_detector()), inputs.detector.is_some()) {
        let file = if params.geom.is_some() { "--geom" } else { "--expt" };
        return Err(Error::flag("--gradients", format!("'{}' moves the detector of the flags, but the panels come from the {file} file: derivatives of a file's panel geometry are not supported", p.name())));
    }
    if params.shape == CrystalShape::Tophat {
        return Err(Error::flag("--gradients", "-tophat_spots is a step function of h, k, l and has no derivative: use -square_xtal, -round_xtal or -gauss_xtal"));
    }
    if let Some(p) = names.iter().find(|p| p.is_cell()) {
        if crate::experiment::cell_input(params, inputs).is_none() {
            return Err(Error::flag("--gradients", format!("'{}' needs the cell from -cell (or a model's CRYST1): a -mat matrix alone has no cell constants to vary", p.name())));
        }
    }
    if params.misset == Some(Misset::Random) && params.misset_seed.is_none() && params.seed.is_some() {
        return Err(Error::flag("--gradients", "-misset random with --gradients needs -misset_seed (the orientation must be the same in every setup)"));
    }
    Ok(())
}

/// The base run's parameters with every choice the parameters could otherwise move made explicit:
/// the oversampling, interpolation, misset seed, the full cell and the beam centre, so that a small
/// change of one parameter changes nothing else.
pub fn frozen(params: &Params, inputs: &Inputs, exp: &Experiment) -> Params {
    let mut p = params.clone();
    p.oversample = Some(exp.sampling.oversample as _);
    p.interpolate = Some(exp.structure_factors.interpolate);
    p.misset_seed = Some(params.misset_seed.unwrap_or(exp.seed));
    if let Some(c) = crate::experiment::cell_input(params, inputs) {
        let right = std::f64::consts::FRAC_PI_2;
        let or = |x: f64, d: f64| if x <= 0.0 { d } else { x };
        p.cell = Some(CellInput { a: c.a, b: or(c.b, c.a), c: or(c.c, c.a), alpha: or(c.alpha, right), beta: or(c.beta, right), gamma: or(c.gamma, right) });
    }
    p.xbeam = Some(exp.det.centre.xbeam);
    p.ybeam = Some(exp.det.centre.ybeam);
    p
}

/// The tangents of the resolved setup by each of `names` (one [`Resolved`] each, in flag units).
pub fn tangents(params: &Params, inputs: &Inputs, exp: &Experiment, names: &[Param]) -> Result<Vec<Resolved>> {
    check(params, inputs, names)?;
    let base = frozen(params, inputs, exp);
    // the perturbed setups reuse the base run's structure factors (no model is summed again)
    let mut inputs = inputs.clone();
    if let Some(g) = &exp.structure_factors.fhkl {
        inputs.fhkl = Some(g.clone());
    }
    let zero = {
        let mut z = Resolved::of(exp);
        z.visit(&mut |x| *x = 0.0);
        z
    };
    names
        .iter()
        .map(|&name| match name {
            Param::Mosaic => Ok(mosaic_tangent(exp, zero.clone())),
            Param::Lambda if wavelength_cancels(params, &inputs) => Ok(zero.clone()),
            _ => difference(&base, &inputs, name),
        })
        .collect()
}

/// Whether the image does not depend on `-lambda`: a `-mat` file's reciprocal vectors are divided by
/// it (nanoBragg.c L1892) and every source's wavelength is a multiple of it (L2405, L2342: no
/// wavelength from a `-sourcefile` column), so h = a·S has it in numerator and denominator. Its
/// tangent is then exactly 0, as documented (a finite difference left rounding noise on every pixel,
/// and a fit followed that noise to λ ≈ 10⁶ Å).
pub fn wavelength_cancels(params: &Params, inputs: &Inputs) -> bool {
    let file_lambdas = inputs.source_columns.as_ref().and_then(|c| c.get(4)).is_some_and(|l| l.iter().any(|v| !v.is_nan()));
    params.a_matrix.is_none() && inputs.matrix.is_some() && !file_lambdas
}

/// d(setup)/dθ by the fourth-order central difference (8(f₁ − f₋₁) − (f₂ − f₋₂))/12h.
fn difference(base: &Params, inputs: &Inputs, name: Param) -> Result<Resolved> {
    let v0 = name.value(base);
    let h = name.step(v0);
    let at = |k: f64| -> Result<Resolved> {
        let mut p = base.clone();
        name.set(&mut p, v0 + k * h);
        let e = Experiment::build(&p, inputs).map_err(|e| Error::flag("--gradients", format!("'{}' at {} ± a small step: {e}", name.name(), v0)))?;
        Ok(Resolved::of(&e))
    };
    let (p1, m1, p2, m2) = (at(1.0)?, at(-1.0)?, at(2.0)?, at(-2.0)?);
    let w = 1.0 / (12.0 * h);
    Resolved::combine(&[(8.0 * w, &p1), (-8.0 * w, &m1), (-w, &p2), (w, &m2)])
}

/// d(orientation table)/d(mosaic, degrees), analytic: domain m's rotation U = R(v, φ) with
/// φ = spread·cₘ gives d(U·x)/dspread = (φ/spread)·v × (U·x); v·sin φ is the axial vector of
/// (U − Uᵀ)/2 and cos φ = (trace U − 1)/2. Domain 0 is the identity (C L2436).
fn mosaic_tangent(exp: &Experiment, mut t: Resolved) -> Resolved {
    let spread = exp.crystal.mosaic_spread;
    if spread <= 0.0 {
        return t;
    }
    let domains = exp.domains();
    for (i, o) in exp.crystal.orientations.iter().enumerate() {
        let u = &exp.crystal.mosaic_umats[i % domains];
        let w = [(u[7] - u[5]) / 2.0, (u[2] - u[6]) / 2.0, (u[3] - u[1]) / 2.0];
        let sin_phi = (w[0] * w[0] + w[1] * w[1] + w[2] * w[2]).sqrt();
        if sin_phi == 0.0 {
            continue;
        }
        let phi = sin_phi.atan2((u[0] + u[4] + u[8] - 1.0) / 2.0);
        let k = phi / sin_phi / spread / RTD;
        for (j, x) in [o.a, o.b, o.c].iter().enumerate() {
            let d = cross(&w, x);
            t.orientations[i][j] = [k * d[0], k * d[1], k * d[2]];
        }
    }
    t
}
