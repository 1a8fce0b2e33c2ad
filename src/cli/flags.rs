//! The flag table: every command-line flag of `simulate`, defined once. The parser, `--help` and the
//! flag reference are all generated from [`FLAGS`].
//!
//! Spellings are the C program's (nanoBragg.c matched them by substring; the port matches each listed
//! name and alias exactly, checklist §0.3), plus a few readable `--long` aliases and port-only options.
//! Units are converted exactly as the C does (`atof(x)/RTD`, `/1000.0`, `*1e-6`, ...) by the setters of
//! [`crate::experiment::params::Params`] and the functions of [`crate::experiment::params::units`], written once there.

use crate::run::config::Config;
use crate::experiment::params::{CellInput, Convention, CrystalShape, Misset, Pivot, Precision};
use crate::{Error, Result};
use crate::base::c::rng::c_negated_seed;
use std::path::PathBuf;

pub use crate::experiment::params::units;

/// Help-text grouping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    Crystal,
    StructureFactors,
    Beam,
    Geometry,
    Sampling,
    Output,
    Port,
    NoEffect,
}

impl Category {
    /// All categories in help order.
    pub const ALL: [Category; 8] = [
        Category::Crystal,
        Category::StructureFactors,
        Category::Beam,
        Category::Geometry,
        Category::Sampling,
        Category::Output,
        Category::Port,
        Category::NoEffect,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Category::Crystal => "Crystal",
            Category::StructureFactors => "Structure factors",
            Category::Beam => "Beam, source, divergence, dispersion",
            Category::Geometry => "Detector geometry and conventions",
            Category::Sampling => "Detector physics, sampling, mosaicity, rotation, background",
            Category::Output => "Outputs, noise, diagnostics",
            Category::Port => "Options of this port (not in nanoBragg.c)",
            Category::NoEffect => "Accepted for compatibility, no effect (as in nanoBragg.c)",
        }
    }
}

/// How many words follow a flag and how they are recognised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// No value.
    Switch,
    /// No value, but (as in the C) only honoured when another word follows; ignored with a warning when last.
    SwitchNeedsNext,
    /// `n` numbers (negative numbers are values, not flags).
    Numbers(usize),
    /// `n` integers.
    Ints(usize),
    /// One file name.
    Path,
    /// One word (a keyword or a number with special spellings).
    Word,
    /// `-cell`: 1 to 6 numbers, ended early by any word starting with '-' (as in the C).
    Cell,
    /// `-misset`: a word containing "rand", or 3 numbers.
    Misset,
}

/// The words given to one occurrence of a flag, with typed accessors that report errors naming the flag.
pub struct Vals<'a> {
    /// The flag as typed.
    pub flag: &'a str,
    pub words: &'a [String],
    /// Whether any word follows the flag on the command line (for [`Arity::SwitchNeedsNext`]).
    pub has_next: bool,
}

/// The refusal of a value that must be greater than 0, as typed (`-pixel: must be greater than 0
/// (got 0)`): simulate's, shared by the suite's command lines (noisify, nonbragg).
pub(crate) fn not_positive(word: &str) -> String {
    format!("must be greater than 0 (got {word})")
}

/// The refusal of a value that must not be negative, as typed (`-fluence: must not be negative (got
/// -1)`): simulate's, shared by the suite's command lines (nonbragg, nearbragg).
pub(crate) fn not_negative(word: &str) -> String {
    format!("must not be negative (got {word})")
}

impl Vals<'_> {
    fn err(&self, reason: impl Into<String>) -> Error {
        Error::flag(self.flag, reason)
    }

    /// Word `i` as a finite number.
    pub fn num(&self, i: usize) -> Result<f64> {
        let w = &self.words[i];
        match w.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            Ok(_) => Err(self.err(format!("'{w}' is not a finite number"))),
            Err(_) => Err(self.err(format!("'{w}' is not a number"))),
        }
    }

    /// Word `i` as a number > 0.
    pub fn pos(&self, i: usize) -> Result<f64> {
        let v = self.num(i)?;
        if v > 0.0 {
            Ok(v)
        } else {
            Err(self.err(not_positive(&self.words[i])))
        }
    }

    /// Word `i` as a number >= 0.
    pub fn nonneg(&self, i: usize) -> Result<f64> {
        let v = self.num(i)?;
        if v >= 0.0 {
            Ok(v)
        } else {
            Err(self.err(not_negative(&self.words[i])))
        }
    }

    /// Word `i` as a C `int` (an integral decimal such as `5` or `5.0`).
    pub fn int(&self, i: usize) -> Result<i64> {
        let w = &self.words[i];
        let v = match w.parse::<i64>() {
            Ok(v) => v,
            Err(_) => match w.parse::<f64>() {
                Ok(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e18 => f as i64,
                Ok(_) => return Err(self.err(format!("expects an integer (got '{w}')"))),
                Err(_) => return Err(self.err(format!("'{w}' is not an integer"))),
            },
        };
        if v < i32::MIN as i64 || v > i32::MAX as i64 {
            return Err(self.err(format!("{w} is out of range for an integer")));
        }
        Ok(v)
    }

    /// Word `i` as an integer >= 1.
    pub fn int_pos(&self, i: usize) -> Result<i64> {
        let v = self.int(i)?;
        if v >= 1 {
            Ok(v)
        } else {
            Err(self.err(format!("must be at least 1 (got {})", self.words[i])))
        }
    }

    /// Word `i` as an `i32` (step counts; the C's `int`).
    pub fn int32(&self, i: usize) -> Result<i32> {
        Ok(self.int(i)? as i32)
    }

    /// Words 0..3 as a vector.
    pub fn vec3(&self) -> Result<[f64; 3]> {
        Ok([self.num(0)?, self.num(1)?, self.num(2)?])
    }

    /// A count from 0 (an index into a list).
    pub fn index(&self, i: usize) -> Result<usize> {
        let v = self.int(i)?;
        usize::try_from(v).map_err(|_| Error::flag(self.flag, format!("{v} is not an index (0 or more)")))
    }
    pub fn path(&self, i: usize) -> PathBuf {
        crate::base::os_text::os_path(&self.words[i])
    }

    pub fn word(&self, i: usize) -> &str {
        &self.words[i]
    }
}

/// Writes one occurrence of a flag into the config.
pub type Setter = fn(&mut Config, &Vals) -> Result<()>;

/// One flag: its spellings, values, units, default and effect.
pub struct Flag {
    /// Primary spelling (the C's, where the C has it).
    pub name: &'static str,
    /// Other accepted spellings, each matched exactly.
    pub aliases: &'static [&'static str],
    pub arity: Arity,
    /// Value placeholder(s) for help, e.g. `x y z`; empty for switches.
    pub values: &'static str,
    /// Units of the values as typed ("" = none).
    pub units: &'static str,
    /// Default as the user would type it.
    pub default: &'static str,
    pub category: Category,
    pub help: &'static str,
    pub set: Setter,
}

impl Flag {
    /// The primary name followed by the aliases.
    pub fn spellings(&self) -> impl Iterator<Item = &'static str> + '_ {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }
}

// ------------------------------------------------------------------------------------------ setters
// Named setters for the flags with more than a one-line effect; simple ones are inline closures.

fn set_cell(c: &mut Config, v: &Vals) -> Result<()> {
    let mut cell = CellInput::default();
    for i in 0..v.words.len() {
        let x = v.num(i)?;
        match i {
            0 => cell.a = x,
            1 => cell.b = x,
            2 => cell.c = x,
            3 => cell.alpha = units::deg(x),
            4 => cell.beta = units::deg(x),
            _ => cell.gamma = units::deg(x),
        }
    }
    c.params.cell = Some(cell);
    Ok(())
}

fn set_misset(c: &mut Config, v: &Vals) -> Result<()> {
    if v.words.len() == 1 {
        c.params.misset = Some(Misset::Random);
    } else {
        c.params.misset = Some(Misset::Angles([
            units::deg(v.num(0)?),
            units::deg(v.num(1)?),
            units::deg(v.num(2)?),
        ]));
    }
    Ok(())
}

/// A count >= 1, or 0 for the automatic choice (nanoBragg.c takes `<= 0` as "auto" for -oversample
/// and -mosaic_domains; a negative count is refused as a likely typo).
fn auto_if_zero(v: &Vals) -> Result<Option<i32>> {
    match v.int(0)? {
        0 => Ok(None),
        n if n < 0 => Err(v.err(format!("must be at least 1, or 0 for the automatic choice (got {n})"))),
        _ => Ok(Some(v.int_pos(0)? as i32)),
    }
}

fn set_detector_abs(c: &mut Config, v: &Vals) -> Result<()> {
    let w = v.word(0);
    // C: strstr(arg,"inf") || atof(arg)==0 -> no absorption model at all.
    let x = if w.contains("inf") {
        0.0
    } else {
        match w.parse::<f64>() {
            Ok(x) if !x.is_nan() => x,
            _ => return Err(v.err(format!("'{w}' is not a number or 'inf'"))),
        }
    };
    c.params.detector_absorb_um(x);
    Ok(())
}

fn set_pivot(c: &mut Config, v: &Vals) -> Result<()> {
    let w = v.word(0);
    let (s, b) = (w.contains("sample"), w.contains("beam"));
    if !s && !b {
        return Err(v.err(format!("expects 'sample' or 'beam' (got '{w}')")));
    }
    // C order: the "sample" test runs first, so a word containing both ends up BEAM.
    c.params.pivot = if b { Pivot::Beam } else { Pivot::Sample };
    Ok(())
}

fn set_roi(c: &mut Config, v: &Vals) -> Result<()> {
    let r = [v.int(0)?, v.int(1)?, v.int(2)?, v.int(3)?];
    if r.iter().any(|&x| x < 0) {
        return Err(v.err(format!(
            "bounds must not be negative (got {} {} {} {})",
            r[0], r[1], r[2], r[3]
        )));
    }
    // an inverted region: the check nonbragg and nearbragg share
    crate::run::limits::check_roi(r)?;
    c.params.roi = Some(r);
    Ok(())
}

fn set_curved(c: &mut Config, v: &Vals) -> Result<()> {
    if v.has_next {
        c.params.curved_detector = true;
    } else {
        crate::base::log::warn(format!("WARNING: {} is ignored as the last word of the command line (as nanoBragg.c does)", v.flag));
    }
    Ok(())
}

fn set_gradients(c: &mut Config, v: &Vals) -> Result<()> {
    use crate::experiment::tangents::Param;
    let mut names = Vec::new();
    for w in v.word(0).split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let p = Param::parse(w).ok_or_else(|| v.err(format!("unknown parameter '{w}' (valid: {})", Param::names())))?;
        if !names.contains(&p) {
            names.push(p);
        }
    }
    if names.is_empty() {
        return Err(v.err(format!("expects a comma-separated list of parameters (valid: {})", Param::names())));
    }
    c.output.gradients = names;
    Ok(())
}

fn set_precision(c: &mut Config, v: &Vals) -> Result<()> {
    c.run.precision = match v.word(0).to_ascii_lowercase().as_str() {
        "double" => Precision::Double,
        "single" => Precision::Single,
        w => return Err(v.err(format!("expects 'double' or 'single' (got '{w}')"))),
    };
    Ok(())
}

fn set_threads(c: &mut Config, v: &Vals) -> Result<()> {
    let n = v.int(0)?;
    if n < 0 {
        return Err(v.err(format!("must not be negative (got {n})")));
    }
    c.run.threads = if n == 0 { None } else { Some(n as usize) };
    Ok(())
}

/// `--params`, `-img` and `-mask` are applied by the pre-pass in the parser (`parse_simulate_args`); nothing to do here.
fn prepass_only(_: &mut Config, _: &Vals) -> Result<()> {
    Ok(())
}

/// Accepted, value checked, no effect.
fn no_effect(_: &mut Config, _: &Vals) -> Result<()> {
    Ok(())
}

fn no_effect_num(_: &mut Config, v: &Vals) -> Result<()> {
    v.num(0).map(|_| ())
}

// ------------------------------------------------------------------------------------------ the table

use Arity::*;
use Category::*;

/// Every flag `simulate` accepts.
#[rustfmt::skip]
pub static FLAGS: &[Flag] = &[
    // ------------------------------------------------------------------ crystal
    Flag { name: "-cell", aliases: &["--cell"], arity: Cell, values: "a b c alpha beta gamma", units: "Å, deg",
        default: "none", category: Crystal,
        help: "Unit cell. 1 to 6 numbers; the list ends at the next word starting with '-'. Missing or <= 0 b, c take a; angles <= 0 become 90°.",
        set: set_cell },
    Flag { name: "-mat", aliases: &["--mat"], arity: Path, values: "FILE", units: "", default: "none", category: Crystal,
        help: "MOSFLM-style orientation matrix (a*, b*, c* as columns, scaled by wavelength). Given with -cell, the cell keeps the matrix's directions and angles and is rescaled to the -cell edge lengths (volume from -cell), as nanoBragg.c does.",
        set: |c, v| { c.params.mat_file = Some(v.path(0)); c.params.a_matrix = None; Ok(()) } },
    Flag { name: "-misset", aliases: &[], arity: Misset, values: "x y z | random", units: "deg", default: "0 0 0",
        category: Crystal,
        help: "Rotate the crystal about lab X, then Y, then Z. A word containing 'rand' draws a random orientation (seed: -misset_seed).",
        set: set_misset },
    Flag { name: "-N", aliases: &["--N"], arity: Numbers(1), values: "N", units: "unit cells", default: "1", category: Crystal,
        help: "Unit cells along a, b and c (values <= 1 act as 1). Real numbers are taken as they are (the C truncates with atoi): a square crystal's shape factor is then sin(N*pi*dh)/sin(pi*dh), dh = h - round(h), the same as the C's at integer N, so the image is smooth in N.",
        set: |c, v| { let n = v.num(0)?; (c.params.na, c.params.nb, c.params.nc) = (n, n, n); Ok(()) } },
    Flag { name: "-Na", aliases: &[], arity: Numbers(1), values: "N", units: "unit cells", default: "1", category: Crystal,
        help: "Unit cells along a (a real number, as -N).", set: |c, v| { c.params.na = v.num(0)?; Ok(()) } },
    Flag { name: "-Nb", aliases: &[], arity: Numbers(1), values: "N", units: "unit cells", default: "1", category: Crystal,
        help: "Unit cells along b (a real number, as -N).", set: |c, v| { c.params.nb = v.num(0)?; Ok(()) } },
    Flag { name: "-Nc", aliases: &[], arity: Numbers(1), values: "N", units: "unit cells", default: "1", category: Crystal,
        help: "Unit cells along c (a real number, as -N).", set: |c, v| { c.params.nc = v.num(0)?; Ok(()) } },
    Flag { name: "-xtalsize", aliases: &["-xtal_size", "-samplesize", "-sample_size"], arity: Numbers(1), values: "SIZE",
        units: "mm", default: "0 (use N)", category: Crystal,
        help: "Crystal size along x, y and z; > 0 replaces N by ceil(size/cell edge).",
        set: |c, v| { c.params.xtal_size_mm(v.num(0)?); Ok(()) } },
    Flag { name: "-sample_thick", aliases: &["-sample_x", "-xtal_thick", "-xtal_x"], arity: Numbers(1), values: "SIZE",
        units: "mm", default: "0 (use Na)", category: Crystal, help: "Crystal size along x (the beam in MOSFLM).",
        set: |c, v| { c.params.sample_x = units::mm(v.num(0)?); Ok(()) } },
    Flag { name: "-sample_width", aliases: &["-sample_y", "-xtal_width", "-xtal_y", "-width"], arity: Numbers(1),
        values: "SIZE", units: "mm", default: "0 (use Nb)", category: Crystal,
        help: "Crystal size along y (clipped to -beamsize).",
        set: |c, v| { c.params.sample_y = units::mm(v.num(0)?); Ok(()) } },
    Flag { name: "-sample_height",
        aliases: &["-sample_heigh", "-sample_z", "-xtal_height", "-xtal_heigh", "-xtal_z", "-height", "-heigh"],
        arity: Numbers(1), values: "SIZE", units: "mm", default: "0 (use Nc)", category: Crystal,
        help: "Crystal size along z (clipped to -beamsize).",
        set: |c, v| { c.params.sample_z = units::mm(v.num(0)?); Ok(()) } },
    Flag { name: "-square_xtal", aliases: &[], arity: Switch, values: "", units: "", default: "on", category: Crystal,
        help: "Parallelepiped crystal: sinc-like (sincg) spot shape.",
        set: |c, _| { c.params.shape = CrystalShape::Square; Ok(()) } },
    Flag { name: "-round_xtal", aliases: &[], arity: Switch, values: "", units: "", default: "off", category: Crystal,
        help: "Ellipsoidal crystal (sinc3 spot shape).", set: |c, _| { c.params.shape = CrystalShape::Round; Ok(()) } },
    Flag { name: "-gauss_xtal", aliases: &[], arity: Switch, values: "", units: "", default: "off", category: Crystal,
        help: "Gaussian spots, no inter-Bragg maxima.", set: |c, _| { c.params.shape = CrystalShape::Gauss; Ok(()) } },
    Flag { name: "-tophat_spots", aliases: &["-binary_spots"], arity: Switch, values: "", units: "", default: "off",
        category: Crystal, help: "Top-hat spots clipped at the FWHM, no inter-Bragg maxima.",
        set: |c, _| { c.params.shape = CrystalShape::Tophat; Ok(()) } },
    Flag { name: "-fudge", aliases: &[], arity: Numbers(1), values: "F", units: "", default: "1", category: Crystal,
        help: "Spot-size scale for -round_xtal, -gauss_xtal and -tophat_spots.",
        set: |c, v| { c.params.fudge = v.num(0)?; Ok(()) } },
    // ------------------------------------------------------------------ structure factors
    Flag { name: "-hkl", aliases: &["--hkl"], arity: Path, values: "FILE", units: "", default: "none",
        category: StructureFactors, help: "Text file of h k l F (P1, no symmetry); also writes the -dump cache.",
        set: |c, v| { c.params.hkl_file = Some(v.path(0)); Ok(()) } },
    Flag { name: "-dump", aliases: &[], arity: Path, values: "FILE", units: "", default: "Fdump.bin",
        category: StructureFactors, help: "Structure-factor cache: written with -hkl or -pdb/-cif, read without them.",
        set: |c, v| { c.params.dump_file = v.path(0); Ok(()) } },
    Flag { name: "-default_F", aliases: &["--default-F"], arity: Numbers(1), values: "F", units: "electrons",
        default: "0", category: StructureFactors,
        help: "Structure factor of every reflection not in the -hkl file (and outside its range). With F read from an existing -dump file, only outside its range: the missing reflections inside it keep the value written there (as in the C).",
        set: |c, v| { c.params.default_f = v.num(0)?; Ok(()) } },
    Flag { name: "-interpolate", aliases: &[], arity: Switch, values: "", units: "", default: "auto (on if any N <= 2)",
        category: StructureFactors, help: "Tricubic interpolation of F between reflections.",
        set: |c, _| { c.params.interpolate = Some(true); Ok(()) } },
    Flag { name: "-nointerpolate", aliases: &[], arity: Switch, values: "", units: "", default: "auto",
        category: StructureFactors, help: "No interpolation of F.",
        set: |c, _| { c.params.interpolate = Some(false); Ok(()) } },
    Flag { name: "-pdb", aliases: &["--pdb"], arity: Path, values: "FILE", units: "", default: "none",
        category: StructureFactors,
        help: "Atomic model (PDB format): P1 |F| computed from it in its own cell and space group (CRYST1; -cell gives a cell where it has none or a placeholder, and -cell/-mat set the simulated lattice that reads the F); replaces -hkl, still writes the -dump cache.",
        set: |c, v| { c.params.model.pdb = Some(v.path(0)); Ok(()) } },
    Flag { name: "-cif", aliases: &["--cif", "-mmcif"], arity: Path, values: "FILE", units: "", default: "none",
        category: StructureFactors, help: "Atomic model (mmCIF format), used as -pdb.",
        set: |c, v| { c.params.model.cif = Some(v.path(0)); Ok(()) } },
    Flag { name: "-hklout", aliases: &["--hklout"], arity: Path, values: "FILE", units: "", default: "none",
        category: StructureFactors, help: "Write the structure factors computed from -pdb/-cif as a P1 h k l F file.",
        set: |c, v| { c.params.model.hklout = Some(v.path(0)); Ok(()) } },
    Flag { name: "-F000", aliases: &["--F000"], arity: Switch, values: "", units: "", default: "off (F000 left out)",
        category: StructureFactors, help: "With -pdb/-cif: keep F(0,0,0) in the computed list (it only falls on the direct beam).",
        set: |c, _| { c.params.model.f000 = true; Ok(()) } },
    Flag { name: "-spacegroup", aliases: &["--spacegroup", "-space_group"], arity: Word, values: "NAME|NUMBER", units: "", default: "the model's",
        category: StructureFactors, help: "With -pdb/-cif: the model's space group, a symbol ('P 21 21 21', 'P2(1)2(1)2(1)') or a number 1-230 (its standard setting).",
        set: |c, v| { c.params.model.space_group = Some(v.word(0).to_string()); Ok(()) } },
    Flag { name: "-anomalous", aliases: &["--anomalous"], arity: Switch, values: "", units: "", default: "off",
        category: StructureFactors, help: "With -pdb/-cif: add Henke f' and f'' at the central wavelength (|F(h)| != |F(-h)|).",
        set: |c, _| { c.params.model.anomalous = true; Ok(()) } },
    Flag { name: "-k_sol", aliases: &[], arity: Numbers(1), values: "K", units: "e/Å³", default: "0 (no bulk solvent)",
        category: StructureFactors, help: "With -pdb/-cif: flat bulk-solvent level (Babinet approximation; 0.35 is typical). At most 10 (protein is 0.43): larger values only scale F towards the 1e100 limit every F list must keep.",
        set: |c, v| {
            let k = v.nonneg(0)?;
            if k > 10.0 {
                return Err(Error::flag("-k_sol", format!("{} e/A^3 is more than 10 (typical 0.35; protein is 0.43)", v.words[0])));
            }
            c.params.model.k_sol = k;
            Ok(())
        } },
    Flag { name: "-b_sol", aliases: &[], arity: Numbers(1), values: "B", units: "Å²", default: "0",
        category: StructureFactors, help: "With -pdb/-cif: bulk-solvent B factor (46 is typical).",
        set: |c, v| { c.params.model.b_sol = v.nonneg(0)?; Ok(()) } },
    // ------------------------------------------------------------------ beam
    Flag { name: "-lambda", aliases: &["-wavelength", "-wave", "--lambda"], arity: Numbers(1), values: "WAVELENGTH",
        units: "Å", default: "1", category: Beam, help: "Central X-ray wavelength.",
        set: |c, v| { c.params.lambda_angstrom(v.pos(0)?); Ok(()) } },
    Flag { name: "-energy", aliases: &[], arity: Numbers(1), values: "E", units: "eV", default: "12398.42 (1 Å)",
        category: Beam, help: "Photon energy; sets the wavelength to 12398.42/E Å.",
        set: |c, v| { c.params.energy_ev(v.pos(0)?); Ok(()) } },
    Flag { name: "-fluence", aliases: &[], arity: Numbers(1), values: "F", units: "photons/m²",
        default: "1.25932015286227e29", category: Beam, help: "Incident photons per unit area (ignored when -flux is given).",
        set: |c, v| { c.params.fluence = v.nonneg(0)?; Ok(()) } },
    Flag { name: "-flux", aliases: &[], arity: Numbers(1), values: "FLUX", units: "photons/s", default: "0 (unused)",
        category: Beam, help: "With -exposure and -beamsize sets fluence = flux*exposure/beamsize², whatever the order.",
        set: |c, v| { c.params.flux = v.num(0)?; Ok(()) } },
    Flag { name: "-exposure", aliases: &[], arity: Numbers(1), values: "T", units: "s", default: "1", category: Beam,
        help: "Exposure time, used with -flux.", set: |c, v| { c.params.exposure = v.num(0)?; Ok(()) } },
    Flag { name: "-beamsize", aliases: &[], arity: Numbers(1), values: "SIZE", units: "mm", default: "0.1",
        category: Beam, help: "Beam width (square), used with -flux; also clips the crystal's y and z size.",
        set: |c, v| { c.params.beamsize_mm(v.pos(0)?); Ok(()) } },
    Flag { name: "-sourcefile", aliases: &[], arity: Path, values: "FILE", units: "", default: "none", category: Beam,
        help: "Text file of sources: X Y Z (direction) I lambda(m) per line; replaces the divergence/dispersion grid.",
        set: |c, v| { c.params.source_file = Some(v.path(0)); Ok(()) } },
    Flag { name: "-polar", aliases: &[], arity: Numbers(1), values: "K", units: "Kahn factor", default: "0",
        category: Beam, help: "Kahn polarization factor (0 = unpolarized, 1 = fully polarized); cancels -nopolar.",
        set: |c, v| { c.params.polarization = v.num(0)?; c.params.nopolar = false; Ok(()) } },
    Flag { name: "-nopolar", aliases: &[], arity: Switch, values: "", units: "", default: "off", category: Beam,
        help: "No polarization correction (factor 1). Overridden by -oversample_polar, which applies the -polar Kahn factor anyway while the summary still says 'polarization effect disabled' (as in the C).", set: |c, _| { c.params.nopolar = true; Ok(()) } },
    Flag { name: "-divergence", aliases: &[], arity: Numbers(1), values: "RANGE", units: "mrad", default: "0",
        category: Beam, help: "Full horizontal and vertical divergence range.",
        set: |c, v| { c.params.divergence_mrad(v.num(0)?); Ok(()) } },
    Flag { name: "-hdivrange", aliases: &[], arity: Numbers(1), values: "RANGE", units: "mrad", default: "auto",
        category: Beam, help: "Full horizontal divergence range.",
        set: |c, v| { c.params.hdivrange = Some(units::mrad(v.num(0)?)); Ok(()) } },
    Flag { name: "-vdivrange", aliases: &[], arity: Numbers(1), values: "RANGE", units: "mrad", default: "auto",
        category: Beam, help: "Full vertical divergence range.",
        set: |c, v| { c.params.vdivrange = Some(units::mrad(v.num(0)?)); Ok(()) } },
    Flag { name: "-hdivstep", aliases: &[], arity: Numbers(1), values: "STEP", units: "mrad", default: "auto",
        category: Beam, help: "Horizontal divergence step.",
        set: |c, v| { c.params.hdivstep = Some(units::mrad(v.num(0)?)); Ok(()) } },
    Flag { name: "-vdivstep", aliases: &[], arity: Numbers(1), values: "STEP", units: "mrad", default: "auto",
        category: Beam, help: "Vertical divergence step.",
        set: |c, v| { c.params.vdivstep = Some(units::mrad(v.num(0)?)); Ok(()) } },
    Flag { name: "-hdivsteps", aliases: &[], arity: Ints(1), values: "N", units: "count", default: "auto",
        category: Beam, help: "Horizontal source points (alone: a 1-rad range, as in the C).",
        set: |c, v| { c.params.hdivsteps = Some(v.int32(0)?); Ok(()) } },
    Flag { name: "-vdivsteps", aliases: &[], arity: Ints(1), values: "N", units: "count", default: "auto",
        category: Beam, help: "Vertical source points (alone: a 1-rad range, as in the C).", set: |c, v| { c.params.vdivsteps = Some(v.int32(0)?); Ok(()) } },
    Flag { name: "-divsteps", aliases: &[], arity: Ints(1), values: "N", units: "count", default: "auto",
        category: Beam, help: "Horizontal and vertical source points (alone: a 1-rad range in both, trimmed by -round_div, as in the C).",
        set: |c, v| { let n = v.int32(0)?; c.params.hdivsteps = Some(n); c.params.vdivsteps = Some(n); Ok(()) } },
    Flag { name: "-round_div", aliases: &[], arity: Switch, values: "", units: "", default: "on", category: Beam,
        help: "Trim the divergence grid to an ellipse.", set: |c, _| { c.params.round_div = true; Ok(()) } },
    Flag { name: "-square_div", aliases: &[], arity: Switch, values: "", units: "", default: "off", category: Beam,
        help: "Keep the full rectangular divergence grid.", set: |c, _| { c.params.round_div = false; Ok(()) } },
    Flag { name: "-dispersion", aliases: &[], arity: Numbers(1), values: "D", units: "%", default: "0",
        category: Beam, help: "Spectral width delta-lambda/lambda.",
        set: |c, v| { c.params.dispersion_percent(v.num(0)?); Ok(()) } },
    Flag { name: "-dispsteps", aliases: &[], arity: Ints(1), values: "N", units: "count", default: "auto",
        category: Beam, help: "Wavelengths across the -dispersion range (alone: no effect, as -dispersion defaults to 0; as in the C).",
        set: |c, v| { c.params.dispsteps = Some(v.int32(0)?); Ok(()) } },
    // ------------------------------------------------------------------ detector geometry
    Flag { name: "-distance", aliases: &["--distance"], arity: Numbers(1), values: "D", units: "mm", default: "100",
        category: Geometry, help: "Sample to beam-spot distance along the beam. The pivot stays the convention's; in CUSTOM it sets pivot BEAM (as in the C).",
        set: |c, v| { c.params.distance_mm(v.pos(0)?); Ok(()) } },
    Flag { name: "-close_distance", aliases: &[], arity: Numbers(1), values: "D", units: "mm",
        default: "from -distance", category: Geometry,
        help: "Sample to detector plane distance (along the normal); replaces -distance. The pivot stays the convention's (MOSFLM, DENZO, ADXV: the beam spot; XDS, DIALS: the sample); in CUSTOM it sets pivot SAMPLE (as in the C).",
        set: |c, v| { c.params.close_distance_mm(v.pos(0)?); Ok(()) } },
    Flag { name: "-pixel", aliases: &["--pixel"], arity: Numbers(1), values: "SIZE", units: "mm", default: "0.1",
        category: Geometry, help: "Pixel size (square).", set: |c, v| { c.params.pixel_mm(v.pos(0)?); Ok(()) } },
    Flag { name: "-detsize", aliases: &[], arity: Numbers(1), values: "SIZE", units: "mm", default: "102.4",
        category: Geometry, help: "Detector width and height (pixel counts win).",
        set: |c, v| { c.params.detsize_mm(v.pos(0)?); Ok(()) } },
    Flag { name: "-detsize_f", aliases: &[], arity: Numbers(1), values: "SIZE", units: "mm", default: "102.4",
        category: Geometry, help: "Detector size along the fast axis.",
        set: |c, v| { c.params.detsize_f = units::mm(v.pos(0)?); Ok(()) } },
    Flag { name: "-detsize_s", aliases: &[], arity: Numbers(1), values: "SIZE", units: "mm", default: "102.4",
        category: Geometry, help: "Detector size along the slow axis.",
        set: |c, v| { c.params.detsize_s = units::mm(v.pos(0)?); Ok(()) } },
    Flag { name: "-detpixels", aliases: &["--detector"], arity: Ints(1), values: "N", units: "pixels",
        default: "from -detsize (1024)", category: Geometry, help: "Pixels along both axes.",
        set: |c, v| { let n = v.int_pos(0)?; c.params.fpixels = n; c.params.spixels = n; Ok(()) } },
    Flag { name: "-detpixels_f", aliases: &["-detpixels_x"], arity: Ints(1), values: "N", units: "pixels",
        default: "from -detsize_f", category: Geometry, help: "Pixels along the fast axis.",
        set: |c, v| { c.params.fpixels = v.int_pos(0)?; Ok(()) } },
    Flag { name: "-detpixels_s", aliases: &["-detpixels_y"], arity: Ints(1), values: "N", units: "pixels",
        default: "from -detsize_s", category: Geometry, help: "Pixels along the slow axis.",
        set: |c, v| { c.params.spixels = v.int_pos(0)?; Ok(()) } },
    Flag { name: "-Xbeam", aliases: &[], arity: Numbers(1), values: "X", units: "mm", default: "convention's centre",
        category: Geometry, help: "Direct-beam position, as the convention reads it (as in the C): MOSFLM the slow coordinate (Sbeam = X + 0.5 pixel), DENZO the slow one (Sbeam = X), ADXV and CUSTOM the fast one (Fbeam = X); CUSTOM also sets pivot BEAM. XDS, DIALS: only the header's BEAM_CENTER_X (the beam spot follows -ORGX/-ORGY).",
        set: |c, v| { c.params.xbeam = Some(units::mm(v.num(0)?)); c.params.pivot = Pivot::Beam; Ok(()) } },
    Flag { name: "-Ybeam", aliases: &[], arity: Numbers(1), values: "Y", units: "mm", default: "convention's centre",
        category: Geometry, help: "Direct-beam position, as the convention reads it (as in the C): MOSFLM the fast coordinate (Fbeam = Y + 0.5 pixel), DENZO the fast one (Fbeam = Y), ADXV the slow one measured from the far edge (Sbeam = detector height - Y), CUSTOM the slow one (Sbeam = Y); CUSTOM also sets pivot BEAM. XDS, DIALS: only the header's BEAM_CENTER_Y (the beam spot follows -ORGX/-ORGY).",
        set: |c, v| { c.params.ybeam = Some(units::mm(v.num(0)?)); c.params.pivot = Pivot::Beam; Ok(()) } },
    Flag { name: "-Xclose", aliases: &[], arity: Numbers(1), values: "X", units: "mm", default: "detector centre",
        category: Geometry, help: "Point of the detector nearest the sample, fast coordinate. Acts only in CUSTOM: sets pivot SAMPLE and, unless -Xbeam is given, the near point. XDS, DIALS: only the header's BEAM_CENTER_X (it is -Xbeam's default); MOSFLM, DENZO, ADXV: no effect (as in the C).",
        set: |c, v| { c.params.xclose = Some(units::mm(v.num(0)?)); c.params.pivot = Pivot::Sample; Ok(()) } },
    Flag { name: "-Yclose", aliases: &[], arity: Numbers(1), values: "Y", units: "mm", default: "detector centre",
        category: Geometry, help: "Point of the detector nearest the sample, slow coordinate. Acts only in CUSTOM: sets pivot SAMPLE and, unless -Ybeam is given, the near point. XDS, DIALS: only the header's BEAM_CENTER_Y (it is -Ybeam's default); MOSFLM, DENZO, ADXV: no effect (as in the C).",
        set: |c, v| { c.params.yclose = Some(units::mm(v.num(0)?)); c.params.pivot = Pivot::Sample; Ok(()) } },
    Flag { name: "-ORGX", aliases: &[], arity: Numbers(1), values: "X", units: "pixels", default: "detector centre",
        category: Geometry, help: "XDS ORGX: the near point's fast coordinate, (ORGX - 0.5) pixels. XDS, DIALS: sets the near point; CUSTOM: the same unless -Xbeam or -Xclose is given, and sets pivot SAMPLE; MOSFLM, DENZO, ADXV: no effect (as in the C).",
        set: |c, v| { c.params.orgx = Some(v.num(0)?); c.params.pivot = Pivot::Sample; Ok(()) } },
    Flag { name: "-ORGY", aliases: &[], arity: Numbers(1), values: "Y", units: "pixels", default: "detector centre",
        category: Geometry, help: "XDS ORGY: the near point's slow coordinate, (ORGY - 0.5) pixels. XDS, DIALS: sets the near point; CUSTOM: the same unless -Ybeam or -Yclose is given, and sets pivot SAMPLE; MOSFLM, DENZO, ADXV: no effect (as in the C).",
        set: |c, v| { c.params.orgy = Some(v.num(0)?); c.params.pivot = Pivot::Sample; Ok(()) } },
    Flag { name: "-pivot", aliases: &[], arity: Word, values: "sample|beam", units: "", default: "beam",
        category: Geometry, help: "Point kept fixed by detector rotations (honoured only with custom vectors, as in the C).",
        set: set_pivot },
    Flag { name: "-mosflm", aliases: &[], arity: Switch, values: "", units: "", default: "on", category: Geometry,
        help: "MOSFLM axis and beam-centre convention; pivot BEAM.",
        set: |c, _| { c.params.convention = Convention::Mosflm; c.params.pivot = Pivot::Beam; Ok(()) } },
    Flag { name: "-xds", aliases: &[], arity: Switch, values: "", units: "", default: "off", category: Geometry,
        help: "XDS convention; pivot SAMPLE.",
        set: |c, _| { c.params.convention = Convention::Xds; c.params.pivot = Pivot::Sample; Ok(()) } },
    Flag { name: "-adxv", aliases: &[], arity: Switch, values: "", units: "", default: "off", category: Geometry,
        help: "ADXV convention; pivot BEAM.",
        set: |c, _| { c.params.convention = Convention::Adxv; c.params.pivot = Pivot::Beam; Ok(()) } },
    Flag { name: "-denzo", aliases: &[], arity: Switch, values: "", units: "", default: "off", category: Geometry,
        help: "DENZO convention; pivot BEAM.",
        set: |c, _| { c.params.convention = Convention::Denzo; c.params.pivot = Pivot::Beam; Ok(()) } },
    Flag { name: "-dials", aliases: &[], arity: Switch, values: "", units: "", default: "off", category: Geometry,
        help: "DIALS convention (the convention then pivots about the SAMPLE).",
        set: |c, _| { c.params.convention = Convention::Dials; c.params.pivot = Pivot::Beam; Ok(()) } },
    Flag { name: "-fdet_vector", aliases: &[], arity: Numbers(3), values: "x y z", units: "unit vector",
        default: "0 0 1", category: Geometry, help: "Fast pixel axis; selects custom vectors.",
        set: |c, v| { c.params.fdet_vector = v.vec3()?; c.params.convention = Convention::Custom; Ok(()) } },
    Flag { name: "-sdet_vector", aliases: &[], arity: Numbers(3), values: "x y z", units: "unit vector",
        default: "0 -1 0", category: Geometry, help: "Slow pixel axis; selects custom vectors.",
        set: |c, v| { c.params.sdet_vector = v.vec3()?; c.params.convention = Convention::Custom; Ok(()) } },
    Flag { name: "-odet_vector", aliases: &[], arity: Numbers(3), values: "x y z", units: "unit vector",
        default: "1 0 0", category: Geometry, help: "Detector normal, away from the sample; selects custom vectors.",
        set: |c, v| { c.params.odet_vector = v.vec3()?; c.params.convention = Convention::Custom; Ok(()) } },
    Flag { name: "-beam_vector", aliases: &[], arity: Numbers(3), values: "x y z", units: "unit vector",
        default: "1 0 0", category: Geometry, help: "X-ray beam direction; selects custom vectors.",
        set: |c, v| { c.params.beam_vector = v.vec3()?; c.params.convention = Convention::Custom; Ok(()) } },
    Flag { name: "-polar_vector", aliases: &[], arity: Numbers(3), values: "x y z", units: "unit vector",
        default: "0 0 1", category: Geometry, help: "E-vector of the polarized beam; selects custom vectors.",
        set: |c, v| { c.params.polar_vector = v.vec3()?; c.params.convention = Convention::Custom; Ok(()) } },
    Flag { name: "-spindle_axis", aliases: &[], arity: Numbers(3), values: "x y z", units: "unit vector",
        default: "0 0 1", category: Geometry, help: "Right-handed phi rotation axis; selects custom vectors.",
        set: |c, v| { c.params.spindle_vector = v.vec3()?; c.params.convention = Convention::Custom; Ok(()) } },
    Flag { name: "-twotheta_axis", aliases: &[], arity: Numbers(3), values: "x y z", units: "vector",
        default: "0 1 0 (custom)", category: Geometry,
        help: "Two-theta rotation axis; selects custom vectors (does not set the angle).",
        set: |c, v| { c.params.twotheta_axis = v.vec3()?; c.params.convention = Convention::Custom; Ok(()) } },
    Flag { name: "-pix0_vector", aliases: &["-pix0_vector_mm"], arity: Numbers(3), values: "x y z", units: "m",
        default: "computed", category: Geometry,
        help: "Not applied (as in the C, which recomputes pix0 at L1719/L1740; a warning says so): only selects custom vectors. -pix0_vector_mm is the same flag (the C matches it by prefix), its values unused too.",
        set: |c, v| { c.params.pix0_vector = Some(v.vec3()?); c.params.convention = Convention::Custom; Ok(()) } },
    Flag { name: "-twotheta", aliases: &[], arity: Numbers(1), values: "ANGLE", units: "deg", default: "0",
        category: Geometry, help: "Detector swing about the two-theta axis. Pivot: the convention's (MOSFLM, DENZO, ADXV: the beam spot; XDS, DIALS: the sample); in CUSTOM it sets pivot SAMPLE (as in the C).",
        set: |c, v| { c.params.twotheta_deg(v.num(0)?); Ok(()) } },
    Flag { name: "-detector_rotx", aliases: &[], arity: Numbers(1), values: "ANGLE", units: "deg", default: "0",
        category: Geometry, help: "Detector rotation about lab X (applied first).",
        set: |c, v| { c.params.detector_rotx = units::deg(v.num(0)?); Ok(()) } },
    Flag { name: "-detector_roty", aliases: &[], arity: Numbers(1), values: "ANGLE", units: "deg", default: "0",
        category: Geometry, help: "Detector rotation about lab Y.",
        set: |c, v| { c.params.detector_roty = units::deg(v.num(0)?); Ok(()) } },
    Flag { name: "-detector_rotz", aliases: &[], arity: Numbers(1), values: "ANGLE", units: "deg", default: "0",
        category: Geometry, help: "Detector rotation about lab Z (applied last).",
        set: |c, v| { c.params.detector_rotz = units::deg(v.num(0)?); Ok(()) } },
    Flag { name: "-curved_det", aliases: &[], arity: SwitchNeedsNext, values: "", units: "", default: "off",
        category: Geometry,
        help: "Spherical detector: every pixel at the same distance. Ignored (with a warning) as the last word, as in the C.",
        set: set_curved },
    Flag { name: "-point_pixel", aliases: &[], arity: Switch, values: "", units: "", default: "off",
        category: Geometry, help: "Solid angle 1/R² (no pixel obliquity or area).",
        set: |c, _| { c.params.point_pixel = true; Ok(()) } },
    Flag { name: "-img", aliases: &[], arity: Path, values: "FILE", units: "SMV", default: "none", category: Geometry,
        help: "Take size, pixel, distance, wavelength, beam centre, ORGX/Y, phi and osc from an SMV header (read before all flags, after -mask: later flags win, but its CLOSE_DISTANCE sets the distance whatever -distance says; give -close_distance).",
        set: prepass_only },
    Flag { name: "-mask", aliases: &[], arity: Path, values: "FILE", units: "SMV", default: "none", category: Geometry,
        help: "SMV image whose 0-valued pixels are not rendered; its header is applied like -img (first), its BEAM_CENTER_Y read as detector size − value (give -Ybeam to keep the beam where you want it).",
        set: prepass_only },
    // ------------------------------------------------------------------ detector physics, sampling
    Flag { name: "-detector_absorb", aliases: &["-detector_abs"], arity: Word, values: "DEPTH|inf", units: "µm",
        default: "the -detector_thick", category: Sampling,
        help: "Sensor attenuation depth (mu = 1/depth); 'inf' or 0 also sets the thickness to 0.",
        set: set_detector_abs },
    Flag { name: "-detector_thick", aliases: &[], arity: Numbers(1), values: "T", units: "µm", default: "0",
        category: Sampling, help: "Sensor thickness (0 = no parallax or capture fraction).",
        set: |c, v| { c.params.detector_thick_um(v.num(0)?); Ok(()) } },
    Flag { name: "-detector_thicksteps", aliases: &["-thicksteps"], arity: Ints(1), values: "N", units: "layers",
        default: "auto", category: Sampling, help: "Sensor layers.",
        set: |c, v| { c.params.detector_thicksteps = Some(v.int32(0)?); Ok(()) } },
    Flag { name: "-oversample", aliases: &[], arity: Ints(1), values: "N", units: "sub-pixels per axis",
        default: "auto", category: Sampling, help: "Sub-pixels per pixel along each axis (>= 1, at most 1000; 0 = auto, as in the C). An automatic choice above 1000 is refused: give -oversample.",
        set: |c, v| { c.params.oversample = auto_if_zero(v)?; Ok(()) } },
    Flag { name: "-oversample_thick", aliases: &[], arity: Switch, values: "", units: "", default: "off",
        category: Sampling, help: "Recompute the capture fraction for every sub-pixel.",
        set: |c, _| { c.params.oversample_thick = true; Ok(()) } },
    Flag { name: "-oversample_polar", aliases: &[], arity: Switch, values: "", units: "", default: "off",
        category: Sampling, help: "Recompute polarization for every sub-pixel.",
        set: |c, _| { c.params.oversample_polar = true; Ok(()) } },
    Flag { name: "-oversample_omega", aliases: &[], arity: Switch, values: "", units: "", default: "off",
        category: Sampling, help: "Recompute the solid angle for every sub-pixel.",
        set: |c, _| { c.params.oversample_omega = true; Ok(()) } },
    Flag { name: "-roi", aliases: &[], arity: Ints(4), values: "xmin xmax ymin ymax", units: "pixel index (inclusive)",
        default: "whole detector", category: Sampling, help: "Render only this region (x = fast axis).",
        set: set_roi },
    Flag { name: "-dmin", aliases: &[], arity: Numbers(1), values: "D", units: "Å", default: "0 (off)",
        category: Sampling, help: "Skip scattering at resolution finer than D. With -pdb/-cif the F are computed past it by what a pixel's F look-up reaches (|a*|+|b*|+|c*| for the nearest reflection, three times that for the interpolation), so that every reflection a pixel reads exists; -hklout writes them too (without -dmin: past what the detector's corners reach from every source).",
        set: |c, v| { c.params.dmin_angstrom(v.num(0)?); Ok(()) } },
    Flag { name: "-mosaic", aliases: &["-mosaicity", "-mosaici", "-mosaic_spread", "-mosaic_spr"], arity: Numbers(1),
        values: "SPREAD", units: "deg", default: "0", category: Sampling,
        help: "Isotropic mosaic spread (cap of domain rotations; 90 for powder).",
        set: |c, v| { c.params.mosaic_deg(v.num(0)?); Ok(()) } },
    Flag { name: "-mosaic_domains", aliases: &["-mosaic_dom"], arity: Ints(1), values: "N", units: "count",
        default: "auto (10 with a spread)", category: Sampling, help: "Mosaic domains rendered (>= 1; 0 = auto, as in the C).",
        set: |c, v| { c.params.mosaic_domains = auto_if_zero(v)?; Ok(()) } },
    Flag { name: "-mosaic_seed", aliases: &[], arity: Ints(1), values: "SEED", units: "integer", default: "12345678",
        category: Sampling, help: "Random seed of the mosaic domain orientations.",
        set: |c, v| { c.params.mosaic_seed = c_negated_seed(v.int(0)?); Ok(()) } },
    Flag { name: "-phi", aliases: &[], arity: Numbers(1), values: "ANGLE", units: "deg", default: "0",
        category: Sampling, help: "Starting spindle rotation.", set: |c, v| { c.params.phi_deg(v.num(0)?); Ok(()) } },
    Flag { name: "-osc", aliases: &[], arity: Numbers(1), values: "RANGE", units: "deg", default: "0 (1 with a lone -phisteps; the step with -phistep)",
        category: Sampling, help: "Oscillation range about the spindle (alone: 2 steps of half of it).",
        set: |c, v| { c.params.osc_deg(v.num(0)?); Ok(()) } },
    Flag { name: "-phistep", aliases: &[], arity: Numbers(1), values: "STEP", units: "deg", default: "auto",
        category: Sampling, help: "Spindle step. Without -osc: an oscillation of one step in 2 steps, whatever -phisteps says (as in the C).", set: |c, v| { c.params.phistep_deg(v.num(0)?); Ok(()) } },
    Flag { name: "-phisteps", aliases: &[], arity: Ints(1), values: "N", units: "count", default: "auto",
        category: Sampling, help: "Spindle steps across -osc (alone: a 1° range, as in the C; ignored with -phistep and no -osc).", set: |c, v| { c.params.phisteps = Some(v.int32(0)?); Ok(()) } },
    Flag { name: "-water", aliases: &[], arity: Numbers(1), values: "SIZE", units: "µm", default: "0",
        category: Sampling, help: "Thickness of water around the crystal: adds a flat background.",
        set: |c, v| { c.params.water_um(v.num(0)?); Ok(()) } },
    Flag { name: "-stol", aliases: &[], arity: Path, values: "FILE", units: "stol (Å⁻¹), F", default: "none",
        category: Sampling, help: "Table of sin(theta)/lambda and F: read with the C's reader (text read as 0) and unused, as in the C; refused only when it holds no line (nonbragg uses its table and reads it strictly).",
        set: |c, v| { c.params.stol_file = Some((v.path(0), 1e10)); Ok(()) } },
    Flag { name: "-4stol", aliases: &[], arity: Path, values: "FILE", units: "4·stol (Å⁻¹), F", default: "none",
        category: Sampling, help: "As -stol with 4·sin(theta)/lambda in the first column.",
        set: |c, v| { c.params.stol_file = Some((v.path(0), 1e10 / 4.0)); Ok(()) } },
    Flag { name: "-Q", aliases: &[], arity: Path, values: "FILE", units: "Q (Å⁻¹), F", default: "none",
        category: Sampling, help: "As -stol with Q = 4·pi·sin(theta)/lambda in the first column.",
        set: |c, v| { c.params.stol_file = Some((v.path(0), 1e10 / std::f64::consts::PI / 4.0)); Ok(()) } },
    // ------------------------------------------------------------------ outputs
    Flag { name: "-add_float", aliases: &["--add_float", "-add_floatfile"], arity: Path, values: "FILE",
        units: "raw f32", default: "none", category: Output,
        help: "Add this float image (photons/pixel, e.g. from `nonbragg`) before statistics, int/PGM and noise; repeatable.",
        set: |c, v| { c.params.add_float.push(v.path(0)); Ok(()) } },
    Flag { name: "-floatfile", aliases: &["-floatimage", "--floatfile"], arity: Path, values: "FILE",
        units: "raw f32", default: "floatimage.bin", category: Output, help: "Float image (photons per pixel), always written.",
        set: |c, v| { c.output.floatfile = v.path(0); Ok(()) } },
    Flag { name: "-intfile", aliases: &["-intimage", "--intfile"], arity: Path, values: "FILE", units: "SMV",
        default: "intimage.img", category: Output, help: "Noiseless SMV image (scaled by -scale), always written.",
        set: |c, v| { c.output.intfile = v.path(0); Ok(()) } },
    Flag { name: "-pgmfile", aliases: &["-pgmimage"], arity: Path, values: "FILE", units: "PGM", default: "image.pgm",
        category: Output, help: "8-bit greyscale image; turns the PGM back on.",
        set: |c, v| { c.output.pgmfile = v.path(0); c.output.write_pgm = true; Ok(()) } },
    Flag { name: "-pgmscale", aliases: &[], arity: Numbers(1), values: "SCALE", units: "grey levels/photon",
        default: "auto", category: Output, help: "PGM scale; turns the PGM back on.",
        set: |c, v| { c.output.pgm_scale = v.num(0)?; c.output.write_pgm = true; Ok(()) } },
    Flag { name: "-noisefile", aliases: &["-noiseimage", "--noisefile"], arity: Path, values: "FILE", units: "SMV",
        default: "noiseimage.img", category: Output, help: "Poisson-noise SMV image; turns noise back on.",
        set: |c, v| { c.output.noisefile = v.path(0); c.output.calculate_noise = true; Ok(()) } },
    Flag { name: "-nopgm", aliases: &["--nopgm"], arity: Switch, values: "", units: "", default: "PGM written",
        category: Output, help: "Do not write the PGM.", set: |c, _| { c.output.write_pgm = false; Ok(()) } },
    Flag { name: "-nonoise", aliases: &["--nonoise"], arity: Switch, values: "", units: "", default: "noise written",
        category: Output, help: "Do not compute or write the noise image.",
        set: |c, _| { c.output.calculate_noise = false; Ok(()) } },
    Flag { name: "--png", aliases: &["-pngfile"], arity: Path, values: "FILE", units: "PNG", default: "none",
        category: Output, help: "Also write a PNG preview of the float image (not in the C): white background, spots dark, log of each pixel's excess over the local background; floor and ceiling in its tEXt chunks.",
        set: |c, v| { c.output.pngfile = Some(v.path(0)); Ok(()) } },
    Flag { name: "--png-legend", aliases: &["-png_legend"], arity: Switch, values: "", units: "", default: "off",
        category: Output, help: "Add a grey-scale strip (floor to ceiling, a tick per decade) below the PNG preview's rows.",
        set: |c, _| { c.output.png_legend = true; Ok(()) } },
    Flag { name: "-cbffile", aliases: &["--cbffile"], arity: Path, values: "FILE", units: "CBF", default: "none",
        category: Output, help: "Also write the noise image as 32-bit byte-offset CBF with a miniCBF geometry header (not in the C; photon counts, + -adc only when -adc is given; -nonoise: the rounded noiseless photons).",
        set: |c, v| { c.output.cbffile = Some(v.path(0)); Ok(()) } },
    Flag { name: "-nexusfile", aliases: &["--nexusfile"], arity: Path, values: "FILE", units: "NeXus/NXmx", default: "none",
        category: Output, help: "Also write the noise image as NeXus/NXmx HDF5 with the full geometry (not in the C; photon counts, + -adc only when -adc is given; -nonoise: the rounded noiseless photons; needs libhdf5 at run time).",
        set: |c, v| { c.output.nexusfile = Some(v.path(0)); Ok(()) } },
    Flag { name: "--expt-out", aliases: &[], arity: Path, values: "FILE", units: "DIALS .expt", default: "none",
        category: Output, help: "Also write the simulated experiment as a DIALS experiment list: the beam, every panel (flat, in DIALS's lab frame), the crystal as used (at phi 0), the spindle, a scan of the written frames and an imageset naming the -nexusfile image, so DIALS can start from the truth.",
        set: |c, v| { c.output.expt_out = Some(v.path(0)); Ok(()) } },
    Flag { name: "-dxtbx_smv", aliases: &["--dxtbx-smv"], arity: Switch, values: "", units: "", default: "the C's SMV header",
        category: Output, help: "SMV headers that dxtbx's ADSC reader reads right (beam centre in its convention, ADC_OFFSET); not in the C.",
        set: |c, _| { c.output.smv_dxtbx = true; Ok(()) } },
    Flag { name: "-scale", aliases: &[], arity: Numbers(1), values: "SCALE", units: "counts/photon",
        default: "auto (55000/max)", category: Output, help: "Scale of the int image.",
        set: |c, v| { c.output.intfile_scale = v.num(0)?; Ok(()) } },
    Flag { name: "-adc", aliases: &[], arity: Numbers(1), values: "OFFSET", units: "counts", default: "40",
        category: Output, help: "Offset added to int and noise image pixels (and, only when given, to the CBF and NeXus counts).",
        set: |c, v| { c.output.adc_offset = v.num(0)?; c.output.adc_given = true; Ok(()) } },
    Flag { name: "-seed", aliases: &["--seed"], arity: Ints(1), values: "SEED", units: "integer",
        default: "time based", category: Output, help: "Random seed of the noise image.",
        set: |c, v| { c.params.noise_seed(v.int(0)?); Ok(()) } },
    Flag { name: "-misset_seed", aliases: &[], arity: Ints(1), values: "SEED", units: "integer",
        default: "time based (not -seed)", category: Output,
        help: "Random seed of -misset random (does not read misset angles).",
        set: |c, v| { c.params.misset_seed = Some(c_negated_seed(v.int(0)?)); Ok(()) } },
    Flag { name: "-printout", aliases: &[], arity: Switch, values: "", units: "", default: "off", category: Output,
        help: "Print per-pixel values.", set: |c, _| { c.run.printout = true; Ok(()) } },
    Flag { name: "-printout_pixel", aliases: &[], arity: Ints(2), values: "f s", units: "pixel index",
        default: "none", category: Output, help: "Print the details of one pixel (turns on -printout).",
        set: |c, v| { c.run.printout_pixel = Some((v.int(0)?, v.int(1)?)); c.run.printout = true; Ok(()) } },
    Flag { name: "-progress", aliases: &[], arity: Switch, values: "", units: "", default: "on", category: Output,
        help: "Show the progress meter.", set: |c, _| { c.run.progress = true; Ok(()) } },
    Flag { name: "-noprogress", aliases: &[], arity: Switch, values: "", units: "", default: "progress on",
        category: Output, help: "Hide the progress meter.", set: |c, _| { c.run.progress = false; Ok(()) } },
    // ------------------------------------------------------------------ port-only
    Flag { name: "--out-dir", aliases: &[], arity: Path, values: "DIR", units: "", default: "current directory",
        category: Port, help: "Directory that relative output file names are written to.",
        set: |c, v| { c.output.out_dir = Some(v.path(0)); Ok(()) } },
    Flag { name: "--params", aliases: &[], arity: Path, values: "FILE", units: "JSON", default: "none", category: Port,
        help: "Start from a parameter file written by --save-params (SI units); every other flag on the command line overrides it, wherever it stands.",
        set: prepass_only },
    Flag { name: "--save-params", aliases: &[], arity: Path, values: "FILE", units: "JSON", default: "none",
        category: Port, help: "Save the parameters of this run (physics, outputs, run options) as JSON, then run.",
        set: |c, v| { c.run.save_params = Some(v.path(0)); Ok(()) } },
    Flag { name: "--expt", aliases: &[], arity: Path, values: "FILE", units: "DIALS .expt", default: "none", category: Port,
        help: "Simulate what a DIALS experiment list describes: wavelength, beam, polarization (Kahn factor 2·pf − 1), every detector panel, the crystal's A matrix, spindle and scan image (see --experiment, --image, --panel). What it sets replaces the same flags given before it; after it, beam, crystal, scan and sensor flags (-lambda, -polar, -mat, -cell, -osc, -detector_thick, ...) override it, and detector geometry flags (-distance, -close_distance, -pixel, -detpixels, -detsize, -Xbeam, -Xclose, -ORGX, -twotheta, -detector_rot*, -curved_det, -pivot, conventions, -fdet/-sdet/-odet_vector, -img) are refused. Phi is sampled at sub-step centres.",
        set: |c, v| { c.params.expt = Some(crate::experiment::params::ExptSource { path: v.path(0), experiment: None, image: None }); Ok(()) } },
    Flag { name: "--geom", aliases: &[], arity: Path, values: "FILE", units: "CrystFEL .geom", default: "none", category: Port,
        help: "Take the detector (every panel, bad regions masked) and the photon energy from a CrystFEL geometry file; the beam runs along its +z. Detector geometry flags cannot follow it (as --expt). With --expt, the later of the two gives the detector.",
        set: |c, v| { c.params.geom = Some(v.path(0)); Ok(()) } },
    Flag { name: "--experiment", aliases: &[], arity: Ints(1), values: "N", units: "index from 0", default: "the only one", category: Port,
        help: "Which experiment of the --expt list (needed when it holds several).",
        set: |_, v| { v.index(0).map(|_| ()) } },
    Flag { name: "--image", aliases: &[], arity: Ints(1), values: "K", units: "image number", default: "the scan's first", category: Port,
        help: "Which image of the --expt scan: -phi = start + (K − first)·width, -osc = width.",
        set: |_, v| { v.int(0).map(|_| ()) } },
    Flag { name: "--panel", aliases: &[], arity: Ints(1), values: "N", units: "index from 0", default: "every panel", category: Port,
        help: "Render only panel N of a multi-panel detector (--expt), with every output.",
        set: |c, v| { c.params.panel = Some(v.index(0)?); Ok(()) } },
    Flag { name: "--phi-midpoint", aliases: &[], arity: Switch, values: "", units: "", default: "off (on with --expt or --geom)", category: Port,
        help: "Sample the spindle at the centre of each phi sub-step instead of at its start (the C's rule), so the image is centred on its oscillation.",
        set: |c, _| { c.params.phi_midpoint = true; Ok(()) } },
    Flag { name: "--threads", aliases: &[], arity: Ints(1), values: "N", units: "threads", default: "0 (all cores)",
        category: Port, help: "Worker threads (0 = one per core). Results do not depend on it.",
        set: set_threads },
    Flag { name: "--max-memory", aliases: &[], arity: Word, values: "BYTES", units: "bytes (k, M, G suffixes)",
        default: "available RAM + swap", category: Port,
        help: "Refuse, before allocating, a run estimated to need more memory than this (also NANOBRAGG_MAX_MEMORY).",
        set: |_, v| match crate::base::memory::parse_size(v.word(0)) {
            Some(b) => { crate::base::memory::set_max_memory(b); Ok(()) }
            None => Err(Error::flag(v.flag, format!("'{}' is not a size such as 4G or 512M", v.word(0)))),
        } },
    Flag { name: "--crystal-rot", aliases: &[], arity: Numbers(3), values: "x y z", units: "deg", default: "0 0 0",
        category: Crystal,
        help: "An extra rotation of the crystal about lab x, then y, then z, after -mat/-cell/-misset and before the spindle and mosaic (the rot_x/rot_y/rot_z of --gradients and refine; not in the C).",
        set: |c, v| { c.params.crystal_rot = [units::deg(v.num(0)?), units::deg(v.num(1)?), units::deg(v.num(2)?)]; Ok(()) } },
    Flag { name: "--gradients", aliases: &[], arity: Word, values: "NAME[,NAME...]", units: "", default: "none",
        category: Port,
        help: "Also write the derivative of the float image by each named parameter, d(pixel)/d(value in the flag's unit), as <prefix><NAME>.bin (4-byte floats, the -floatfile layout), computed in double by forward-mode tangents through the pixel loop. Names: rot_x rot_y rot_z (deg, an extra rotation of the crystal about lab x, y, z after -mat/-cell/-misset), a b c (A) alpha beta gamma (deg; need -cell), Na Nb Nc, mosaic (deg), distance Xbeam Ybeam (mm), detector_rotx detector_roty detector_rotz (deg), lambda (A), fluence (photons/m^2). F is held fixed where the nearest-neighbour lookup jumps; -tophat_spots is refused.",
        set: set_gradients },
    Flag { name: "--gradient-prefix", aliases: &[], arity: Path, values: "P", units: "", default: "grad_",
        category: Port, help: "Start of the --gradients file names (may name a folder: out/grad_).",
        set: |c, v| { c.output.gradient_prefix = v.path(0); Ok(()) } },
    Flag { name: "--observed", aliases: &[], arity: Path, values: "OBS", units: "raw f32, SMV, CBF or NeXus", default: "none",
        category: Port,
        help: "A measured image to compare the float image (with -add_float) with, over the unmasked pixels of the -roi: prints the --loss and writes --loss-out/--dfhkl-out. SMV pixels less the -adc offset are photons; raw floats are taken as they are; CBF and NeXus counts less -adc where -adc is given (their writers add it only then), else as they are.",
        set: |c, v| { c.output.loss.observed = Some(v.path(0)); Ok(()) } },
    Flag { name: "--loss", aliases: &[], arity: Word, values: "poisson|lsq", units: "", default: "poisson",
        category: Port, help: "With --observed (refused without it): poisson L = sum(mu - y ln mu), lsq L = 1/2 sum(mu - y)^2.",
        set: |c, v| match v.word(0) {
            "poisson" => { c.output.loss.kind = crate::run::config::LossKind::Poisson; Ok(()) }
            "lsq" => { c.output.loss.kind = crate::run::config::LossKind::Lsq; Ok(()) }
            w => Err(v.err(format!("expects 'poisson' or 'lsq' (got '{w}')"))),
        } },
    Flag { name: "--loss-out", aliases: &[], arity: Path, values: "L.json", units: "JSON", default: "none",
        category: Port, help: "With --observed: write {\"loss\": poisson|lsq, \"value\": L, \"gradient\": {NAME: dL/dNAME}} for the --gradients names.",
        set: |c, v| { c.output.loss.loss_out = Some(v.path(0)); Ok(()) } },
    Flag { name: "--dfhkl-out", aliases: &[], arity: Path, values: "G.hkl", units: "h k l dL/dF", default: "none",
        category: Port, help: "With --observed and -hkl: write one line h k l dL/dF per -hkl reflection in file order, accumulated in the kernel (tricubic interpolation spreads it over the 64 reflections it reads).",
        set: |c, v| { c.output.loss.dfhkl_out = Some(v.path(0)); Ok(()) } },
    Flag { name: "--precision", aliases: &[], arity: Word, values: "double|single", units: "", default: "double",
        category: Port, help: "Arithmetic of the pixel kernel (double matches the C).", set: set_precision },
    Flag { name: "--backend", aliases: &[], arity: Word, values: "cpu|gpu|auto", units: "", default: "cpu",
        category: Port,
        help: "Where the pixel kernel runs. cpu: the SIMD kernel. gpu: the CUDA kernel on device 0 (the driver and NVRTC are loaded at run time; refused in one line where there is none). auto: the GPU where there is one and the run has enough sample evaluations to pay for its start-up (1.1e8 per CPU thread in double, 2e8 in single; a series counts all the dataset's frames), else the CPU.",
        set: |c, v| match crate::run::config::BackendChoice::parse(v.word(0)) {
            Some(b) => { c.run.backend = b; Ok(()) }
            None => Err(v.err(format!("expects 'cpu', 'gpu' or 'auto' (got '{}')", v.word(0)))),
        } },
    Flag { name: "--noise", aliases: &["--noise-mode"], arity: Word, values: "c|fast", units: "", default: "c",
        category: Port,
        help: "Noise image generator (default c). c: the C's single serial random stream (ran1), bit-identical to nanoBragg's noise image, serial. fast: a counter-based generator (ChaCha8 from rand_chacha, streams per row keyed by -seed), parallel over rows and streamed to the file, the same image for a seed at any thread count, the same Poisson/Gaussian distributions as the C's, not the C's pixels; about 6x faster for the noise stage at 4096x4096 on 2 cores.",
        set: |c, v| match crate::noise::NoiseMode::parse(v.word(0)) {
            Some(m) => { c.output.noise_mode = m; Ok(()) }
            None => Err(v.err(format!("expects 'c' or 'fast' (got '{}')", v.word(0)))),
        } },
    Flag { name: "--quiet", aliases: &["-quiet"], arity: Switch, values: "", units: "", default: "off",
        category: Port, help: "Print only errors and warnings (the C's WARNING lines included), not the setup lines and summary.", set: |c, _| { c.run.quiet = true; Ok(()) } },
    Flag { name: "--help", aliases: &["-help", "-h"], arity: Switch, values: "", units: "", default: "",
        category: Port, help: "Print this help and exit.", set: no_effect },
    // ------------------------------------------------------------------ no effect
    Flag { name: "-coherent", aliases: &[], arity: Switch, values: "", units: "", default: "off", category: NoEffect,
        help: "No effect.", set: no_effect },
    Flag { name: "-density", aliases: &["-sample_density", "-sample_den"], arity: Numbers(1), values: "RHO",
        units: "g/cm³", default: "1", category: NoEffect, help: "No effect (overwritten in the C).", set: no_effect_num },
    Flag { name: "-MW", aliases: &["-molecular_weight", "-molec"], arity: Numbers(1), values: "MW", units: "g/mol",
        default: "18", category: NoEffect, help: "No effect (overwritten in the C).", set: no_effect_num },
    Flag { name: "-stolout", aliases: &[], arity: Path, values: "FILE", units: "", default: "none",
        category: NoEffect, help: "No effect (never written by the C).", set: no_effect },
];
