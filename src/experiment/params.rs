//! Typed parameters of a simulation.
//!
//! * [`Params`]: the physics, one value per nanoBragg.c input, stored in SI units (metres, radians,
//!   seconds, photons) exactly as the C holds them after reading its flags. `None` means "not given":
//!   the C's defaulting rules (step counts, beam centres, ...) are applied later, by
//!   `Experiment::build`, in the C's order.
//!   What is written and how the run is carried out are `run::config`'s `OutputSettings` and
//!   `RunOptions`.
//!
//! Build parameters in the units crystallographers use with the setters of [`Params`] (Å, mm,
//! degrees, mrad, µm, eV/keV); each setter converts with the C's own arithmetic and has the same side
//! effects as the flag of the same name (e.g. [`Params::distance_mm`] also selects pivot BEAM, as
//! `-distance` does). The flag table (`cli/flags.rs`) calls these setters, so every conversion is
//! written once, here, in [`units`].
//!
//! The whole set (`run::config::Config`) saves to and loads from JSON with serde
//! (`simulate --save-params run.json`, `simulate --params run.json`). Floats round-trip exactly.

use std::path::{Path, PathBuf};

/// Unit conversions from the units users type to the SI units the simulation uses, with the C's exact
/// arithmetic (nanoBragg.c L520-L900, e.g. `atof(argv[i+1])/RTD`, `atof(argv[i+1])/1000.0`). Where
/// the C converts the same unit two ways (µm: `*1e-6` for the sensor, `/1e6` for water; Å: `/1e10` for
/// the wavelength, `*1e-10` for `-dmin`) both are kept, since they can differ in the last bit.
pub mod units {
    use crate::base::consts::RTD;
    /// hc in eV·Å as nanoBragg.c writes it (L614).
    pub const HC_EV_ANGSTROM: f64 = 12398.42;

    /// degrees → radians (`x/RTD`).
    pub fn deg(x: f64) -> f64 {
        x / RTD
    }
    /// millimetres → metres (`x/1000.0`).
    pub fn mm(x: f64) -> f64 {
        x / 1000.0
    }
    /// milliradians → radians (`x/1000.0`).
    pub fn mrad(x: f64) -> f64 {
        x / 1000.0
    }
    /// Ångström → metres (`x/1.0e10`, wavelength and SMV header).
    pub fn angstrom(x: f64) -> f64 {
        x / 1.0e10
    }
    /// Ångström → metres as `-dmin` converts (`x*1e-10`).
    pub fn angstrom_mul(x: f64) -> f64 {
        x * 1e-10
    }
    /// micrometres → metres as the sensor flags convert (`x*1e-6`).
    pub fn um(x: f64) -> f64 {
        x * 1e-6
    }
    /// micrometres → metres as `-water` converts (`x/1e6`).
    pub fn um_div(x: f64) -> f64 {
        x / 1e6
    }
    /// percent → fraction (`x/100.0`).
    pub fn percent(x: f64) -> f64 {
        x / 100.0
    }
    /// photon energy in eV → wavelength in metres (`(12398.42/E)/1.0e10`).
    pub fn ev_to_wavelength(ev: f64) -> f64 {
        (HC_EV_ANGSTROM / ev) / 1.0e10
    }
}

/// Detector/beam axis convention (nanoBragg.c `convention`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Convention {
    Custom,
    Adxv,
    Mosflm,
    Xds,
    Dials,
    Denzo,
}

/// Which point stays fixed when the detector is rotated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Pivot {
    Sample,
    Beam,
}

/// Lattice transform ("spot shape") model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CrystalShape {
    Square,
    Round,
    Gauss,
    Tophat,
}

/// Crystal missetting requested with `-misset`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Misset {
    /// Rotations about lab X, Y, Z in radians.
    Angles([f64; 3]),
    /// A random orientation drawn with the misset seed.
    Random,
}

/// Arithmetic precision of the pixel kernel (the C program is double precision).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Precision {
    #[default]
    Double,
    Single,
}

/// The `-cell a b c alpha beta gamma` values as typed; missing trailing values stay 0 (C: "a few random
/// defaults" are filled in at setup: b,c <= 0 take a; angles <= 0 become 90 degrees).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CellInput {
    /// Lengths in Ångström.
    pub a: f64,
    pub b: f64,
    pub c: f64,
    /// Angles in radians.
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
}

/// The physics of one simulation, in SI units. Field names follow nanoBragg.c's variables. Defaults
/// are the C's.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    // ---------------------------------------------------------------- crystal
    /// Unit cell (Å, radians); `None` = not given (then `mat_file` is needed).
    pub cell: Option<CellInput>,
    /// MOSFLM orientation matrix file (`-mat`), read by the load step.
    pub mat_file: Option<PathBuf>,
    pub misset: Option<Misset>,
    /// An extra rotation of the crystal about lab X, then Y, then Z (radians), applied after `-mat`,
    /// `-cell` and `-misset` and before the spindle and mosaic: the `rot_x/rot_y/rot_z` refinement
    /// parameters. Zero (the default) leaves the lattice untouched, bit for bit.
    pub crystal_rot: [f64; 3],
    /// Unit cells along a, b, c. The C fills these doubles with `atoi`; here the flags take real
    /// numbers, so the image is smooth in N (integer values give the C's images).
    pub na: f64,
    pub nb: f64,
    pub nc: f64,
    /// Crystal size along x, y, z in metres (0 = use N).
    pub sample_x: f64,
    pub sample_y: f64,
    pub sample_z: f64,
    pub shape: CrystalShape,
    /// Spot-size scale (dimensionless).
    pub fudge: f64,

    // ---------------------------------------------------------------- structure factors
    /// Text file of h k l F, read by the load step.
    pub hkl_file: Option<PathBuf>,
    /// `-pdb`/`-cif` and their options (structure factors computed from an atomic model).
    pub model: crate::sfcalc::ModelConfig,
    /// Structure-factor cache: written after reading `hkl_file`, read when there is none.
    pub dump_file: PathBuf,
    /// Structure factor of every reflection not listed (electrons).
    pub default_f: f64,
    /// `Some(true)` = `-interpolate`, `Some(false)` = `-nointerpolate`, `None` = auto.
    pub interpolate: Option<bool>,

    // ---------------------------------------------------------------- beam
    /// Central wavelength in metres.
    pub lambda0: f64,
    /// photons/m²
    pub fluence: f64,
    /// photons/s (0 = unused)
    pub flux: f64,
    /// seconds
    pub exposure: f64,
    /// metres
    pub beamsize: f64,
    /// Source list file (`-sourcefile`), read by the load step.
    pub source_file: Option<PathBuf>,
    /// Kahn polarization factor (dimensionless).
    pub polarization: f64,
    pub nopolar: bool,
    /// Divergence ranges and steps in radians; step counts.
    pub hdivrange: Option<f64>,
    pub vdivrange: Option<f64>,
    pub hdivstep: Option<f64>,
    pub vdivstep: Option<f64>,
    pub hdivsteps: Option<i32>,
    pub vdivsteps: Option<i32>,
    pub round_div: bool,
    /// Fractional bandwidth delta-lambda/lambda (dimensionless).
    pub dispersion: f64,
    pub dispsteps: Option<i32>,

    // ---------------------------------------------------------------- detector geometry
    pub convention: Convention,
    /// The pivot as last set (only honoured in the CUSTOM convention, as in the C).
    pub pivot: Pivot,
    /// Sample to beam spot, metres.
    pub distance: f64,
    /// Sample to detector plane, metres.
    pub close_distance: Option<f64>,
    /// metres
    pub pixel_size: f64,
    /// Detector size in metres.
    pub detsize_f: f64,
    pub detsize_s: f64,
    /// Pixel counts (0 = derive from detsize).
    pub fpixels: i64,
    pub spixels: i64,
    /// Beam centre and nearest point in metres.
    pub xbeam: Option<f64>,
    pub ybeam: Option<f64>,
    pub xclose: Option<f64>,
    pub yclose: Option<f64>,
    /// XDS ORGX/ORGY in pixels.
    pub orgx: Option<f64>,
    pub orgy: Option<f64>,
    /// Unit vectors as given (C defaults are MOSFLM-like; a convention other than CUSTOM overwrites them).
    pub fdet_vector: [f64; 3],
    pub sdet_vector: [f64; 3],
    pub odet_vector: [f64; 3],
    pub beam_vector: [f64; 3],
    pub polar_vector: [f64; 3],
    pub spindle_vector: [f64; 3],
    pub twotheta_axis: [f64; 3],
    /// Metres. Accepted and ignored: the C always recomputes pix0 (checklist Q3).
    pub pix0_vector: Option<[f64; 3]>,
    /// Detector rotations about lab X, Y, Z (radians).
    pub detector_rotx: f64,
    pub detector_roty: f64,
    pub detector_rotz: f64,
    /// Two-theta swing (radians).
    pub detector_twotheta: f64,
    pub curved_detector: bool,
    pub point_pixel: bool,
    /// SMV image whose header gave geometry (`-img`); recorded for the setup messages.
    pub img_file: Option<PathBuf>,
    /// SMV mask (`-mask`): pixels that are 0 there are not rendered. Read by the load step.
    pub mask_file: Option<PathBuf>,

    // ---------------------------------------------------------------- detector physics & sampling
    /// Attenuation coefficient in 1/m (`None` = unset; C sentinel -1).
    pub detector_mu: Option<f64>,
    /// metres
    pub detector_thick: f64,
    pub detector_thicksteps: Option<i32>,
    /// Sub-pixels per pixel along each axis.
    pub oversample: Option<i32>,
    pub oversample_thick: bool,
    pub oversample_polar: bool,
    pub oversample_omega: bool,
    /// Inclusive pixel bounds xmin xmax ymin ymax (x = fast).
    pub roi: Option<[i64; 4]>,
    /// metres (0 = off)
    pub dmin: f64,
    /// radians
    pub mosaic_spread: Option<f64>,
    pub mosaic_domains: Option<i32>,
    /// The seed value as the C stores it (negated user value); default -12345678.
    pub mosaic_seed: i64,
    /// Starting spindle angle, radians.
    pub phi0: f64,
    /// Oscillation range and step, radians.
    pub osc: Option<f64>,
    pub phistep: Option<f64>,
    pub phisteps: Option<i32>,
    /// Water background thickness in metres.
    pub water_size: f64,
    /// `-stol`/`-4stol`/`-Q` table (read, checked, unused) and its multiplier (1/m per unit typed).
    pub stol_file: Option<(PathBuf, f64)>,
    /// Noise seed as the C stores it (negated user value); `None` = time based.
    pub seed: Option<i64>,
    /// Misset seed as the C stores it; `None` = the time-based seed (not `-seed`, checklist Q12).
    pub misset_seed: Option<i64>,
    /// `-add_float FILE` (repeatable): float images (photons/pixel, e.g. `nonbragg` water) added to the
    /// rendered image before statistics, int/PGM conversion and noise.
    pub add_float: Vec<PathBuf>,

    // ---------------------------------------------------------------- multi-panel detectors, DIALS
    /// `--expt FILE [--experiment N] [--image K]`: the DIALS experiment list whose detector (every
    /// panel) the load step reads; its beam, goniometer, scan and crystal were applied to these
    /// parameters when it was parsed (flags given later override them).
    pub expt: Option<ExptSource>,
    /// `--panel N`: render only panel N (0-based) of a multi-panel detector.
    pub panel: Option<usize>,
    /// `--phi-midpoint`: sample the spindle at the centre of each phi sub-step (φ0 + (k + ½)·step)
    /// instead of the C's start of each sub-step (on for runs from `--expt`).
    pub phi_midpoint: bool,
    /// An A matrix given in memory (from `--expt`): rows x, y, z; columns a*, b*, c* in 1/Å, not
    /// scaled by λ. `-mat` and `-cell` given later clear it.
    pub a_matrix: Option<[[f64; 3]; 3]>,
    /// `--geom FILE`: the CrystFEL geometry file whose panels the load step reads (given after
    /// `--expt`, it replaces the list's detector; `--expt` after it replaces it).
    pub geom: Option<PathBuf>,
}

/// Where a multi-panel detector comes from (`--expt`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ExptSource {
    pub path: PathBuf,
    /// `--experiment N` (0-based; needed when the list holds several).
    pub experiment: Option<usize>,
    /// `--image K`: the scan's image number (as in its `image_range`).
    pub image: Option<i64>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            cell: None,
            mat_file: None,
            misset: None,
            crystal_rot: [0.0; 3],
            na: 1.0,
            nb: 1.0,
            nc: 1.0,
            sample_x: 0.0,
            sample_y: 0.0,
            sample_z: 0.0,
            shape: CrystalShape::Square,
            fudge: 1.0,
            hkl_file: None,
            model: Default::default(),
            dump_file: PathBuf::from("Fdump.bin"),
            default_f: 0.0,
            interpolate: None,
            lambda0: 1.0e-10,
            fluence: 125932015286227086360700780544.0,
            flux: 0.0,
            exposure: 1.0,
            beamsize: 1e-4,
            source_file: None,
            polarization: 0.0,
            nopolar: false,
            hdivrange: None,
            vdivrange: None,
            hdivstep: None,
            vdivstep: None,
            hdivsteps: None,
            vdivsteps: None,
            round_div: true,
            dispersion: 0.0,
            dispsteps: None,
            convention: Convention::Mosflm,
            pivot: Pivot::Beam,
            distance: 100.0e-3,
            close_distance: None,
            pixel_size: 0.1e-3,
            detsize_f: 102.4e-3,
            detsize_s: 102.4e-3,
            fpixels: 0,
            spixels: 0,
            xbeam: None,
            ybeam: None,
            xclose: None,
            yclose: None,
            orgx: None,
            orgy: None,
            fdet_vector: [0.0, 0.0, 1.0],
            sdet_vector: [0.0, -1.0, 0.0],
            odet_vector: [1.0, 0.0, 0.0],
            beam_vector: [1.0, 0.0, 0.0],
            polar_vector: [0.0, 0.0, 1.0],
            spindle_vector: [0.0, 0.0, 1.0],
            twotheta_axis: [0.0, 1.0, 0.0],
            pix0_vector: None,
            detector_rotx: 0.0,
            detector_roty: 0.0,
            detector_rotz: 0.0,
            detector_twotheta: 0.0,
            curved_detector: false,
            point_pixel: false,
            img_file: None,
            mask_file: None,
            detector_mu: None,
            detector_thick: 0.0,
            detector_thicksteps: None,
            oversample: None,
            oversample_thick: false,
            oversample_polar: false,
            oversample_omega: false,
            roi: None,
            dmin: 0.0,
            mosaic_spread: None,
            mosaic_domains: None,
            mosaic_seed: -12345678,
            phi0: 0.0,
            osc: None,
            phistep: None,
            phisteps: None,
            water_size: 0.0,
            stol_file: None,
            seed: None,
            misset_seed: None,
            add_float: Vec::new(),
            expt: None,
            panel: None,
            phi_midpoint: false,
            a_matrix: None,
            geom: None,
        }
    }
}

/// Setters in the units crystallographers type. Each converts once (with [`units`]) and has the side
/// effects of the nanoBragg.c flag it is named after; they return `&mut Self` so calls chain:
///
/// ```
/// let mut p = nanobragg::experiment::params::Params::default();
/// p.cell_deg(78.0, 78.0, 38.0, 90.0, 90.0, 90.0).n_cells(10).lambda_angstrom(1.0).distance_mm(100.0);
/// assert_eq!(p.distance, 0.1);
/// ```
impl Params {
    /// `-cell a b c alpha beta gamma`: lengths in Å, angles in degrees.
    pub fn cell_deg(&mut self, a: f64, b: f64, c: f64, alpha: f64, beta: f64, gamma: f64) -> &mut Self {
        self.cell = Some(CellInput {
            a,
            b,
            c,
            alpha: units::deg(alpha),
            beta: units::deg(beta),
            gamma: units::deg(gamma),
        });
        self
    }
    /// `-mat FILE`.
    pub fn matrix_file(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.mat_file = Some(path.as_ref().to_path_buf());
        self
    }
    /// `-misset x y z` in degrees.
    pub fn misset_deg(&mut self, x: f64, y: f64, z: f64) -> &mut Self {
        self.misset = Some(Misset::Angles([units::deg(x), units::deg(y), units::deg(z)]));
        self
    }
    /// `-N n`: unit cells along a, b and c.
    pub fn n_cells(&mut self, n: i64) -> &mut Self {
        let n = n as f64;
        (self.na, self.nb, self.nc) = (n, n, n);
        self
    }
    /// `-xtalsize` in mm: crystal size along x, y and z.
    pub fn xtal_size_mm(&mut self, size: f64) -> &mut Self {
        let s = units::mm(size);
        (self.sample_x, self.sample_y, self.sample_z) = (s, s, s);
        self
    }
    /// `-lambda` in Å.
    pub fn lambda_angstrom(&mut self, lambda: f64) -> &mut Self {
        self.lambda0 = units::angstrom(lambda);
        self
    }
    /// `-energy` in eV.
    pub fn energy_ev(&mut self, ev: f64) -> &mut Self {
        self.lambda0 = units::ev_to_wavelength(ev);
        self
    }
    /// Photon energy in keV (as `-energy` with 1000·keV).
    pub fn energy_kev(&mut self, kev: f64) -> &mut Self {
        self.energy_ev(kev * 1000.0)
    }
    /// `-beamsize` in mm.
    pub fn beamsize_mm(&mut self, size: f64) -> &mut Self {
        self.beamsize = units::mm(size);
        self
    }
    /// `-divergence` in mrad: full horizontal and vertical range.
    pub fn divergence_mrad(&mut self, range: f64) -> &mut Self {
        let r = units::mrad(range);
        (self.hdivrange, self.vdivrange) = (Some(r), Some(r));
        self
    }
    /// `-dispersion` in percent.
    pub fn dispersion_percent(&mut self, d: f64) -> &mut Self {
        self.dispersion = units::percent(d);
        self
    }
    /// `-distance` in mm; selects pivot BEAM.
    pub fn distance_mm(&mut self, d: f64) -> &mut Self {
        self.distance = units::mm(d);
        self.pivot = Pivot::Beam;
        self
    }
    /// `-close_distance` in mm; selects pivot SAMPLE.
    pub fn close_distance_mm(&mut self, d: f64) -> &mut Self {
        self.close_distance = Some(units::mm(d));
        self.pivot = Pivot::Sample;
        self
    }
    /// `-pixel` in mm.
    pub fn pixel_mm(&mut self, size: f64) -> &mut Self {
        self.pixel_size = units::mm(size);
        self
    }
    /// `-detsize` in mm (both axes).
    pub fn detsize_mm(&mut self, size: f64) -> &mut Self {
        let s = units::mm(size);
        (self.detsize_f, self.detsize_s) = (s, s);
        self
    }
    /// `-detpixels n` (both axes).
    pub fn detpixels(&mut self, fast: i64, slow: i64) -> &mut Self {
        (self.fpixels, self.spixels) = (fast, slow);
        self
    }
    /// `-Xbeam x -Ybeam y` in mm; selects pivot BEAM.
    pub fn beam_center_mm(&mut self, x: f64, y: f64) -> &mut Self {
        (self.xbeam, self.ybeam) = (Some(units::mm(x)), Some(units::mm(y)));
        self.pivot = Pivot::Beam;
        self
    }
    /// `-twotheta` in degrees; selects pivot SAMPLE.
    pub fn twotheta_deg(&mut self, angle: f64) -> &mut Self {
        self.detector_twotheta = units::deg(angle);
        self.pivot = Pivot::Sample;
        self
    }
    /// `-detector_rotx/-roty/-rotz` in degrees.
    pub fn detector_rot_deg(&mut self, x: f64, y: f64, z: f64) -> &mut Self {
        (self.detector_rotx, self.detector_roty, self.detector_rotz) = (units::deg(x), units::deg(y), units::deg(z));
        self
    }
    /// `-detector_thick` in µm.
    pub fn detector_thick_um(&mut self, t: f64) -> &mut Self {
        self.detector_thick = units::um(t);
        self
    }
    /// `-detector_absorb` attenuation depth in µm (0 = no absorption model, thickness 0, as the C).
    pub fn detector_absorb_um(&mut self, depth: f64) -> &mut Self {
        if depth == 0.0 {
            self.detector_thick = 0.0;
            self.detector_mu = Some(0.0);
        } else {
            self.detector_mu = Some(1.0 / units::um(depth));
        }
        self
    }
    /// `-dmin` in Å.
    pub fn dmin_angstrom(&mut self, d: f64) -> &mut Self {
        self.dmin = units::angstrom_mul(d);
        self
    }
    /// `-mosaic` spread in degrees.
    pub fn mosaic_deg(&mut self, spread: f64) -> &mut Self {
        self.mosaic_spread = Some(units::deg(spread));
        self
    }
    /// `-phi` in degrees.
    pub fn phi_deg(&mut self, phi: f64) -> &mut Self {
        self.phi0 = units::deg(phi);
        self
    }
    /// `-osc` in degrees.
    pub fn osc_deg(&mut self, osc: f64) -> &mut Self {
        self.osc = Some(units::deg(osc));
        self
    }
    /// `-phistep` in degrees.
    pub fn phistep_deg(&mut self, step: f64) -> &mut Self {
        self.phistep = Some(units::deg(step));
        self
    }
    /// `-water` thickness in µm.
    pub fn water_um(&mut self, size: f64) -> &mut Self {
        self.water_size = units::um_div(size);
        self
    }
    /// `-seed`: the noise seed as typed (stored negated in `int`, as the C does).
    pub fn noise_seed(&mut self, seed: i64) -> &mut Self {
        self.seed = Some(crate::base::c::rng::c_negated_seed(seed));
        self
    }
    /// `-default_F` in electrons.
    pub fn default_f(&mut self, f: f64) -> &mut Self {
        self.default_f = f;
        self
    }
}

impl Params {
    /// The ranges the flags enforce on the values a parameter file (`--params`) sets directly: a
    /// negative distance or pixel, an inverted ROI, zero mosaic domains … are refused by the flags and
    /// must not render from a file either. The message names the file's key.
    pub fn check_ranges(&self) -> std::result::Result<(), String> {
        let positive = [
            ("lambda0", self.lambda0),
            ("beamsize", self.beamsize),
            ("distance", self.distance),
            ("pixel_size", self.pixel_size),
            ("detsize_f", self.detsize_f),
            ("detsize_s", self.detsize_s),
        ];
        for (key, v) in positive.into_iter().chain(self.close_distance.map(|v| ("close_distance", v))) {
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("\"{key}\" must be a positive number (got {v})"));
            }
        }
        if !(self.fluence >= 0.0 && self.fluence.is_finite()) {
            return Err(format!("\"fluence\" must not be negative (got {})", self.fluence));
        }
        for (key, v) in [("fpixels", self.fpixels), ("spixels", self.spixels)] {
            if v < 0 {
                return Err(format!("\"{key}\" must not be negative (0: from the detector size; got {v})"));
            }
        }
        for (key, v) in [("oversample", self.oversample), ("mosaic_domains", self.mosaic_domains)] {
            if let Some(n) = v.filter(|&n| n < 1) {
                return Err(format!("\"{key}\" must be at least 1 (got {n})"));
            }
        }
        if let Some(r) = self.roi {
            if r.iter().any(|&x| x < 0) || r[0] > r[1] || r[2] > r[3] {
                return Err(format!("\"roi\" needs 0 <= xmin <= xmax and 0 <= ymin <= ymax (got {r:?})"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_are_the_c_arithmetic() {
        // nanoBragg.c: RTD = 180.0*M_1_PI; -phi 90 -> 90/RTD = M_PI/2 exactly
        assert_eq!(units::deg(90.0), std::f64::consts::FRAC_PI_2);
        assert_eq!(units::mm(100.0), 0.1);
        assert_eq!(units::angstrom(6.2), 6.2e-10);
        // 12398.42 eV is 1 Å in the C's constant
        assert_eq!(units::ev_to_wavelength(12398.42), 1e-10);
        assert_eq!(units::um(300.0), 300.0 * 1e-6);
        assert_eq!(units::um_div(2.0), 2e-6);
    }

    /// What the flags refuse is refused from a parameter file too; the defaults pass.
    #[test]
    fn check_ranges_refuses_what_the_flags_refuse() {
        assert_eq!(Params::default().check_ranges(), Ok(()));
        let cases: [(&str, fn(&mut Params)); 7] = [
            ("distance", |p| p.distance = -1e-3),
            ("pixel_size", |p| p.pixel_size = -1e-7),
            ("close_distance", |p| p.close_distance = Some(0.0)),
            ("fpixels", |p| p.fpixels = -5),
            ("mosaic_domains", |p| p.mosaic_domains = Some(0)),
            ("oversample", |p| p.oversample = Some(-2)),
            ("roi", |p| p.roi = Some([10, 5, 1, 2])),
        ];
        for (key, set) in cases {
            let mut p = Params::default();
            set(&mut p);
            let e = p.check_ranges().unwrap_err();
            assert!(e.contains(key), "{key}: {e}");
        }
    }
}
