//! `Config`: what the user asked for, after parsing, in SI units (metres, radians), before any of the
//! C program's defaulting rules are applied. `None` means "not given". The resolution of defaults (step
//! counts, beam centres, pivots, ...) happens in [`crate::experiment`], in the C program's order.
//!
//! Field names follow nanoBragg.c's variable names so a reader can go from the C to the port.

use std::path::PathBuf;

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
    /// Lengths in Angstrom.
    pub a: f64,
    pub b: f64,
    pub c: f64,
    /// Angles in radians.
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
}

/// An SMV image read for `-img` or `-mask`: its header text and pixel values.
#[derive(Clone, Debug, PartialEq)]
pub struct SmvInput {
    pub path: PathBuf,
    pub width: usize,
    pub height: usize,
    pub header: String,
    pub data: Vec<u16>,
}

/// Everything the user asked for. Defaults are the C program's.
#[derive(Clone, Debug)]
pub struct Config {
    // ---------------------------------------------------------------- crystal
    pub cell: Option<CellInput>,
    pub mat_file: Option<PathBuf>,
    pub misset: Option<Misset>,
    /// Unit cells along a, b, c (C: doubles filled by `atoi`).
    pub na: f64,
    pub nb: f64,
    pub nc: f64,
    /// Crystal size along x, y, z in metres (0 = use N).
    pub sample_x: f64,
    pub sample_y: f64,
    pub sample_z: f64,
    pub shape: CrystalShape,
    pub fudge: f64,

    // ---------------------------------------------------------------- structure factors
    pub hkl_file: Option<PathBuf>,
    /// `-pdb`/`-cif` and their options (structure factors computed from an atomic model).
    pub model: crate::model::ModelConfig,
    pub dump_file: PathBuf,
    pub default_f: f64,
    /// `Some(true)` = `-interpolate`, `Some(false)` = `-nointerpolate`, `None` = auto.
    pub interpolate: Option<bool>,

    // ---------------------------------------------------------------- beam
    /// Central wavelength in metres.
    pub lambda0: f64,
    /// photons/m^2
    pub fluence: f64,
    /// photons/s (0 = unused)
    pub flux: f64,
    /// seconds
    pub exposure: f64,
    /// metres
    pub beamsize: f64,
    pub source_file: Option<PathBuf>,
    /// Kahn polarization factor.
    pub polarization: f64,
    pub nopolar: bool,
    pub hdivrange: Option<f64>,
    pub vdivrange: Option<f64>,
    pub hdivstep: Option<f64>,
    pub vdivstep: Option<f64>,
    pub hdivsteps: Option<i32>,
    pub vdivsteps: Option<i32>,
    pub round_div: bool,
    /// Fractional bandwidth delta-lambda/lambda.
    pub dispersion: f64,
    pub dispsteps: Option<i32>,

    // ---------------------------------------------------------------- detector geometry
    pub convention: Convention,
    /// The pivot as last set by a flag (only honoured in the CUSTOM convention, as in the C).
    pub pivot: Pivot,
    pub distance: f64,
    pub close_distance: Option<f64>,
    pub pixel_size: f64,
    pub detsize_f: f64,
    pub detsize_s: f64,
    /// Pixel counts (0 = derive from detsize).
    pub fpixels: i64,
    pub spixels: i64,
    pub xbeam: Option<f64>,
    pub ybeam: Option<f64>,
    pub xclose: Option<f64>,
    pub yclose: Option<f64>,
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
    /// Accepted and ignored: the C always recomputes pix0 (checklist Q3).
    pub pix0_vector: Option<[f64; 3]>,
    /// Detector rotations about lab X, Y, Z (radians).
    pub detector_rotx: f64,
    pub detector_roty: f64,
    pub detector_rotz: f64,
    /// Two-theta swing (radians).
    pub detector_twotheta: f64,
    pub curved_detector: bool,
    pub point_pixel: bool,
    pub img: Option<SmvInput>,
    pub mask: Option<SmvInput>,

    // ---------------------------------------------------------------- detector physics & sampling
    /// Attenuation coefficient in 1/m (`None` = unset; C sentinel -1).
    pub detector_mu: Option<f64>,
    /// metres
    pub detector_thick: f64,
    pub detector_thicksteps: Option<i32>,
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
    /// radians
    pub phi0: f64,
    pub osc: Option<f64>,
    pub phistep: Option<f64>,
    pub phisteps: Option<i32>,
    /// Water background thickness in metres.
    pub water_size: f64,
    /// `-stol`/`-4stol`/`-Q` table (read, checked, unused) and its multiplier.
    pub stol_file: Option<(PathBuf, f64)>,

    /// `-add_float FILE` (repeatable): float images (photons/pixel, e.g. `nonbragg` water) added to the
    /// rendered image before statistics, int/PGM conversion and noise.
    pub add_float: Vec<PathBuf>,

    // ---------------------------------------------------------------- outputs
    pub floatfile: PathBuf,
    pub intfile: PathBuf,
    pub pgmfile: PathBuf,
    pub noisefile: PathBuf,
    pub pngfile: Option<PathBuf>,
    /// CBF image (32-bit counts, miniCBF geometry header), not in the C.
    pub cbffile: Option<PathBuf>,
    /// NeXus/NXmx HDF5 image with the full geometry, not in the C.
    pub nexusfile: Option<PathBuf>,
    /// SMV headers with the keys dxtbx's ADSC reader expects (opt-in; the default header is the C's).
    pub smv_dxtbx: bool,
    pub write_pgm: bool,
    pub calculate_noise: bool,
    /// 0 = auto
    pub intfile_scale: f64,
    /// 0 = auto
    pub pgm_scale: f64,
    pub adc_offset: f64,
    /// Noise seed as the C stores it (negated user value); `None` = time based.
    pub seed: Option<i64>,
    /// Misset seed as the C stores it; `None` = the time-based seed (not `-seed`, checklist Q12).
    pub misset_seed: Option<i64>,
    pub printout: bool,
    pub printout_pixel: Option<(i64, i64)>,
    pub progress: bool,

    // ---------------------------------------------------------------- port-only options
    /// Directory that relative output names are resolved against.
    pub out_dir: Option<PathBuf>,
    pub threads: Option<usize>,
    pub precision: Precision,
    /// Which generator makes the noise image (`--noise`): the C's serial stream (default) or fast.
    pub noise_mode: crate::noise::NoiseMode,
    pub quiet: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cell: None,
            mat_file: None,
            misset: None,
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
            img: None,
            mask: None,
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
            add_float: Vec::new(),
            floatfile: PathBuf::from("floatimage.bin"),
            intfile: PathBuf::from("intimage.img"),
            pgmfile: PathBuf::from("image.pgm"),
            noisefile: PathBuf::from("noiseimage.img"),
            pngfile: None,
            cbffile: None,
            nexusfile: None,
            smv_dxtbx: false,
            write_pgm: true,
            calculate_noise: true,
            intfile_scale: 0.0,
            pgm_scale: 0.0,
            adc_offset: 40.0,
            seed: None,
            misset_seed: None,
            printout: false,
            printout_pixel: None,
            progress: true,
            out_dir: None,
            threads: None,
            precision: Precision::Double,
            noise_mode: crate::noise::NoiseMode::C,
            quiet: false,
        }
    }
}
