//! The `simulate` parser over the flag table ([`super::flags::FLAGS`]).
//!
//! Parsing follows nanoBragg.c (checklist §1) with the port's binding decisions (§0): each flag and alias
//! is matched exactly, unknown flags and stray words are errors, a missing or malformed value is an
//! error, and the last occurrence of a flag wins. `-img`/`-mask` headers are applied first (mask, then
//! img), as the C's pre-pass does, so every other flag overrides them.

use crate::base::os_text::os_path;
use super::flags::{units, Arity, Flag, Vals, FLAGS};
use crate::io::smv::SmvImage;
use crate::io::smv::{header_number_present, read_smv};
use crate::run::config::Config;
use crate::{Error, Result};
use std::collections::HashMap;
use std::sync::OnceLock;

/// Spelling -> index into [`FLAGS`].
fn lookup_table() -> &'static HashMap<&'static str, usize> {
    static TABLE: OnceLock<HashMap<&'static str, usize>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m = HashMap::new();
        for (i, f) in FLAGS.iter().enumerate() {
            for s in f.spellings() {
                let prev = m.insert(s, i);
                debug_assert!(prev.is_none(), "duplicate flag spelling {s}");
            }
        }
        m
    })
}

/// The table entry for an exact spelling.
pub fn lookup(spelling: &str) -> Option<&'static Flag> {
    lookup_table().get(spelling).map(|&i| &FLAGS[i])
}

/// Every accepted spelling (names and aliases), in table order.
pub fn all_spellings() -> Vec<&'static str> {
    FLAGS.iter().flat_map(|f| f.spellings()).collect()
}

/// True when the words ask for help (`--help`, `-help`, `-h`); the caller prints [`help_text`] and
/// exits instead of parsing.
pub fn wants_help(args: &[String]) -> bool {
    args.iter()
        .any(|a| lookup(a).is_some_and(|f| f.name == "--help"))
}

pub(crate) fn is_number(w: &str) -> bool {
    w.parse::<f64>().is_ok()
}

/// One occurrence of a flag with its words.
struct Occurrence {
    flag: &'static Flag,
    typed: String,
    words: Vec<String>,
    has_next: bool,
}

fn missing(flag: &str, f: &Flag, got: usize, next: Option<&str>) -> Error {
    let want = match f.arity {
        Arity::Cell => "1 to 6 numbers".to_string(),
        Arity::Misset => "3 angles or 'random'".to_string(),
        Arity::Numbers(1) | Arity::Ints(1) | Arity::Path | Arity::Word => "a value".to_string(),
        Arity::Numbers(n) | Arity::Ints(n) => format!("{n} values"),
        Arity::Switch | Arity::SwitchNeedsNext => "no value".to_string(),
    };
    let what = if f.values.is_empty() {
        String::new()
    } else {
        format!(" ({})", f.values)
    };
    let got = if got > 0 {
        format!(", got {got}")
    } else {
        String::new()
    };
    let tail = match next {
        Some(n) => format!(" but is followed by {n}"),
        None => " but the command line ends".to_string(),
    };
    Error::flag(
        flag,
        format!("missing value: expects {want}{what}{got}{tail}"),
    )
}

/// How many words after the flag belong to it (`rest` = the words after the flag).
fn value_count(typed: &str, f: &Flag, rest: &[String]) -> Result<usize> {
    let numeric = |n: usize| -> Result<usize> {
        for j in 0..n {
            match rest.get(j) {
                None => return Err(missing(typed, f, j, None)),
                // A word starting with '-' that is not a number is the next flag, not a value.
                Some(w) if w.starts_with('-') && !is_number(w) => {
                    return Err(missing(typed, f, j, Some(w)))
                }
                Some(_) => {}
            }
        }
        Ok(n)
    };
    match f.arity {
        Arity::Switch | Arity::SwitchNeedsNext => Ok(0),
        Arity::Numbers(n) | Arity::Ints(n) => numeric(n),
        Arity::Path | Arity::Word => match rest.first() {
            None => Err(missing(typed, f, 0, None)),
            Some(w) if lookup(w).is_some() => Err(missing(typed, f, 0, Some(w))),
            Some(_) => Ok(1),
        },
        Arity::Misset => match rest.first() {
            Some(w) if w.contains("rand") => Ok(1),
            _ => numeric(3),
        },
        Arity::Cell => {
            let n = rest
                .iter()
                .take(6)
                .take_while(|w| !w.starts_with('-'))
                .count();
            if n == 0 {
                Err(missing(typed, f, 0, rest.first().map(|s| s.as_str())))
            } else {
                Ok(n)
            }
        }
    }
}

/// The crystal `simulate` (and `refine`) use when the command line gives none: the benchmark crystal.
pub const BUILT_IN_CRYSTAL: &[&str] = &["-cell", "100", "100", "100", "90", "90", "90", "-N", "5", "-default_F", "100", "-lambda", "6.2"];

/// The line `simulate` and `refine` print when they use [`BUILT_IN_CRYSTAL`], naming the flags of
/// `args` that replace its values (it listed -N 5 while rendering the user's -N 10).
pub fn built_in_crystal_note(args: &[String]) -> String {
    const OVERRIDES: &[&str] = &["-N", "-Na", "-Nb", "-Nc", "-lambda", "-energy"];
    let mut given: Vec<String> = Vec::new();
    for o in tokenize(args).unwrap_or_default() {
        if OVERRIDES.contains(&o.flag.name) && !given.contains(&o.typed) {
            given.push(o.typed.clone());
        }
    }
    let over = if given.is_empty() { String::new() } else { format!("; your {} replace these", given.join(", ")) };
    format!("no crystal given: using the built-in benchmark crystal ({}{over})", BUILT_IN_CRYSTAL.join(" "))
}

/// Parse simulate's flags; with no crystal at all (no cell, matrix, structure factors or Fdump.bin
/// cache) parse them again over [`BUILT_IN_CRYSTAL`] (the user's flags still apply on top) and say so
/// (`true`). With an Fdump.bin in the folder, setup says a cell is missing and names that file.
pub fn parse_with_built_in_crystal(args: &[String]) -> Result<(Config, bool)> {
    let (cfg, warnings) = parse_with_warnings(args)?;
    let p = &cfg.params;
    let no_crystal = p.cell.is_none() && p.mat_file.is_none() && p.hkl_file.is_none() && p.model.path().is_none() && p.default_f == 0.0;
    if !no_crystal || crate::run::config::resolve_out(&cfg, &p.dump_file).is_file() {
        warnings.into_iter().for_each(crate::base::log::warn);
        return Ok((cfg, false));
    }
    // parsed again with the crystal in front: its warnings are the same, said once
    let with_default: Vec<String> = BUILT_IN_CRYSTAL.iter().map(|s| s.to_string()).chain(args.iter().cloned()).collect();
    Ok((parse_simulate_args(&with_default)?, true))
}

/// The known spelling closest to `word`, only when it is a likely typo: at most one edit for short
/// words (two for words of 8+ characters, a third of the length beyond that), never a different word
/// of similar length (`-cbf` is not `-Nb`, `-h5` is not `-h`). A spelling that differs only in
/// dashes or case (`--floatfile`, `-FLOATFILE`) is always offered.
pub fn suggest(word: &str) -> Option<&'static str> {
    suggest_among(word, &all_spellings())
}

/// [`suggest`] among the given spellings (a subcommand's own flags).
pub fn suggest_among(word: &str, spellings: &[&'static str]) -> Option<&'static str> {
    let norm = |s: &str| s.trim_start_matches('-').to_ascii_lowercase();
    let w = norm(word);
    if w.is_empty() {
        return None;
    }
    if let Some(s) = spellings.iter().copied().find(|s| norm(s) == w) {
        return Some(s);
    }
    let (d, best) = spellings
        .iter()
        .map(|&s| (strsim::levenshtein(&w, &norm(s)), s))
        .min_by_key(|&(d, _)| d)?;
    let n = w.chars().count().min(norm(best).chars().count());
    let allowed = if n < 4 { 0 } else if n < 8 { 1 } else { (n / 3).max(2) };
    (d >= 1 && d <= allowed).then_some(best)
}

fn unknown(word: &str) -> Error {
    let reason = match suggest(word) {
        Some(s) => format!("unknown flag; did you mean {s}? (see --help)"),
        None => "unknown flag (see --help)".to_string(),
    };
    Error::flag(word, reason)
}

/// Split the words into flag occurrences; reports unknown flags, stray words and missing values.
fn tokenize(args: &[String]) -> Result<Vec<Occurrence>> {
    // `--long=value` is the same as `--long value`.
    let mut words: Vec<String> = Vec::with_capacity(args.len());
    for a in args {
        match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") && lookup(k).is_some() => {
                words.push(k.to_string());
                words.push(v.to_string());
            }
            _ => words.push(a.clone()),
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        let Some(f) = lookup(w) else {
            if w.starts_with('-') && !is_number(w) {
                return Err(unknown(w));
            }
            return Err(Error::flag(
                w,
                "unexpected word: not a flag, nor a value of the flag before it",
            ));
        };
        let rest = &words[i + 1..];
        let n = value_count(w, f, rest)?;
        out.push(Occurrence {
            flag: f,
            typed: w.clone(),
            words: rest[..n].to_vec(),
            has_next: !rest.is_empty(),
        });
        i += 1 + n;
    }
    Ok(out)
}

/// Apply an `-img`/`-mask` header as the C does (nanoBragg.c pre-pass); `is_mask` selects the mask's
/// BEAM_CENTER_Y rule (measured from the other edge). Values the same flags would refuse (a pixel size,
/// distance or wavelength that is not positive and finite, a non-finite beam centre or angle) are
/// refused here too, naming the file and keyword.
fn apply_smv_header(c: &mut Config, smv: &SmvImage, is_mask: bool, flag: &str) -> Result<()> {
    let bad = |key: &str, v: f64, why: &str| {
        Error::flag(flag, format!("{}: header {key}={v} {why}", smv.path.display()))
    };
    // a value that is not numbers (`0.15x`, `abc`) is refused, not read as its prefix or 0; NaN is
    // absent, as the C's isnan test makes it
    let value = |key: &str| -> Result<Option<f64>> {
        header_number_present(&smv.header, key).map_err(|e| Error::flag(flag, format!("{}: {e}", smv.path.display())))
    };
    let positive = |key: &str| -> Result<Option<f64>> {
        match value(key)? {
            Some(v) if !(v > 0.0 && v.is_finite()) => Err(bad(key, v, "must be positive and finite")),
            v => Ok(v),
        }
    };
    let finite = |key: &str| -> Result<Option<f64>> {
        match value(key)? {
            Some(v) if !v.is_finite() => Err(bad(key, v, "must be finite")),
            v => Ok(v),
        }
    };
    c.params.fpixels = smv.width as i64;
    c.params.spixels = smv.height as i64;
    if let Some(v) = positive("PIXEL_SIZE")? {
        c.params.pixel_size = units::mm(v);
    }
    c.params.detsize_f = c.params.pixel_size * c.params.fpixels as f64;
    c.params.detsize_s = c.params.pixel_size * c.params.spixels as f64;
    if let Some(v) = positive("DISTANCE")? {
        c.params.distance = units::mm(v);
    }
    if let Some(v) = positive("CLOSE_DISTANCE")? {
        c.params.close_distance = Some(units::mm(v));
    }
    if let Some(v) = positive("WAVELENGTH")? {
        c.params.lambda0 = units::angstrom(v);
    }
    if let Some(v) = finite("BEAM_CENTER_X")? {
        c.params.xbeam = Some(units::mm(v));
    }
    if let Some(v) = finite("BEAM_CENTER_Y")? {
        c.params.ybeam = Some(if is_mask {
            c.params.detsize_s - units::mm(v)
        } else {
            units::mm(v)
        });
    }
    if let Some(v) = finite("ORGX")? {
        c.params.orgx = Some(v);
    }
    if let Some(v) = finite("ORGY")? {
        c.params.orgy = Some(v);
    }
    if let Some(v) = finite("PHI")? {
        c.params.phi0 = units::deg(v);
    }
    if let Some(v) = finite("OSC_RANGE")? {
        c.params.osc = Some(units::deg(v));
    }
    // TWOTHETA: the C reads it into a variable that is never used.
    Ok(())
}

fn load_smv(flag: &str, path: &str) -> Result<SmvImage> {
    read_smv(&os_path(path)).map_err(|e| Error::flag(flag, format!("cannot read {path}: {e}")))
}

/// Parse the words after `simulate` (C-style flags and long options) into a Config; what a
/// `-mask`/`-img` header decided over the flags is said as a warning ([`HeaderGeometry`]).
pub fn parse_simulate_args(args: &[String]) -> Result<Config> {
    let (c, warnings) = parse_with_warnings(args)?;
    for w in warnings {
        crate::base::log::warn(w);
    }
    Ok(c)
}

/// [`parse_simulate_args`], the warnings returned (a caller that parses twice says them once).
fn parse_with_warnings(args: &[String]) -> Result<(Config, Vec<String>)> {
    let occurrences = tokenize(args)?;
    let mut c = Config::default();
    let last = |name: &str| occurrences.iter().rev().find(|o| o.flag.name == name);

    // `--params FILE`: a saved parameter set is the base; every flag on the command line overrides it.
    if let Some(o) = last("--params") {
        c = Config::load_json(&os_path(&o.words[0])).map_err(|e| Error::flag(&o.typed, e.to_string()))?;
        c.run.params_file = Some(os_path(&o.words[0]));
    }

    // Pre-pass (C L400-L502): the last -mask and the last -img are read before every other flag.
    let mut header_geometry = HeaderGeometry::default();
    if let Some(o) = last("-mask") {
        let smv = load_smv(&o.typed, &o.words[0])?;
        apply_smv_header(&mut c, &smv, true, &o.typed)?;
        header_geometry.note(&c, &smv, &o.typed, true);
        c.params.mask_file = Some(smv.path.clone());
        c.mask = Some(smv);
    }
    if let Some(o) = last("-img") {
        let smv = load_smv(&o.typed, &o.words[0])?;
        apply_smv_header(&mut c, &smv, false, &o.typed)?;
        header_geometry.note(&c, &smv, &o.typed, false);
        c.params.img_file = Some(smv.path.clone());
        c.img = Some(smv);
    }

    // --expt: --experiment, --image and --panel choose what it applies, wherever they stand
    let index = |name: &str| -> Result<Option<i64>> {
        match last(name) {
            Some(o) => Vals { flag: &o.typed, words: &o.words, has_next: o.has_next }.int(0).map(Some),
            None => Ok(None),
        }
    };
    let (experiment, image, panel) = (index("--experiment")?, index("--image")?, index("--panel")?);
    if let Some(o) = ["--experiment", "--image"].iter().find_map(|n| last(n)).filter(|_| last("--expt").is_none()) {
        return Err(Error::flag(&o.typed, "chooses from a DIALS experiment list: give --expt FILE"));
    }
    if let Some(o) = last("--panel").filter(|_| last("--expt").is_none() && last("--geom").is_none()) {
        return Err(Error::flag(&o.typed, "chooses a panel of a detector read from a file: give --expt FILE or --geom FILE"));
    }
    let mut expt_at: Option<&str> = None;
    // flags given before --expt/--geom that it then replaces: said, not silently dropped
    let mut replaced: Vec<&str> = Vec::new();
    for o in &occurrences {
        let v = Vals {
            flag: &o.typed,
            words: &o.words,
            has_next: o.has_next,
        };
        if let Some(expt) = expt_at {
            if EXPT_GEOMETRY.contains(&o.flag.name) {
                return Err(Error::flag(&o.typed, format!("the detector comes from {expt}, which this flag cannot change: leave it out (before {expt} it would be overridden)")));
            }
        }
        (o.flag.set)(&mut c, &v)?;
        if o.flag.name == "--expt" {
            apply_expt(&mut c, experiment, image, panel, &o.typed)?;
            expt_at = Some(&o.typed);
            replaced.extend(occurrences.iter().take_while(|p| !std::ptr::eq(*p, o)).filter(|p| EXPT_GEOMETRY.contains(&p.flag.name) || EXPT_BEAM.contains(&p.flag.name)).map(|p| p.typed.as_str()));
        }
        if o.flag.name == "--geom" {
            replaced.extend(occurrences.iter().take_while(|p| !std::ptr::eq(*p, o)).filter(|p| EXPT_GEOMETRY.contains(&p.flag.name)).map(|p| p.typed.as_str()));
            c.params.panel = panel.map(|v| usize::try_from(v).map_err(|_| Error::flag("--panel", format!("{v} is not an index (0 or more)")))).transpose()?;
            let model = crate::run::geom::read(&v.path(0))?;
            crate::run::geom::apply(&mut c.params, &model)?;
            expt_at = Some(&o.typed);
        }
    }
    // a loss chosen with nothing to compare did nothing, silently (as --loss-out alone is refused)
    if let Some(o) = last("--loss").filter(|_| c.output.loss.observed.is_none()) {
        return Err(Error::flag(&o.typed, "needs --observed IMAGE (the measured image the loss compares with)"));
    }
    let mut warnings = header_geometry.warnings(&c, |name| last(name).is_some());
    if let (Some(file_flag), false) = (expt_at, replaced.is_empty()) {
        replaced.sort_unstable();
        replaced.dedup();
        warnings.push(format!("nanobragg-rs: warning: {} given before {file_flag}: replaced by the file's detector and beam", replaced.join(", ")));
    }
    warnings.extend(unused_geometry(&c, |name| last(name).map(|o| o.typed.clone())));
    Ok((c, warnings))
}

/// Geometry flags accepted (as the C) that place nothing: said, since they change the convention or
/// look as if they moved the beam.
fn unused_geometry(c: &Config, given: impl Fn(&str) -> Option<String>) -> Vec<String> {
    use crate::experiment::params::Convention;
    let mut out = Vec::new();
    let from_file = c.params.expt.is_some() || c.params.geom.is_some();
    if let Some(typed) = given("-pix0_vector").filter(|_| !from_file) {
        // nanoBragg.c L721 reads it (and -pix0_vector_mm, by prefix) but L1719/L1740 recompute pix0
        out.push(format!(
            "nanobragg-rs: warning: {typed} is not applied (as in nanoBragg.c): the detector is placed by -distance/-close_distance, the beam centre (-Xbeam/-Ybeam, -Xclose/-Yclose, -ORGX/-ORGY) and the detector vectors; it only switches to the CUSTOM convention"
        ));
    }
    if matches!(c.params.convention, Convention::Xds | Convention::Dials) && !from_file {
        if let Some((beam, fill)) = named(&["-Xbeam", "-Ybeam"], &given, "fills", "fill") {
            out.push(format!(
                "nanobragg-rs: warning: {beam} under -xds/-dials only {fill} the header's BEAM_CENTER_X/Y (as in nanoBragg.c): the beam spot follows -ORGX/-ORGY"
            ));
        }
        // L1221-L1222, L1236-L1237: Xclose only stands in for an unset Xbeam; the SAMPLE pivot places the detector by Fclose (-ORGX, L1156)
        if let Some((close, fill)) = named(&["-Xclose", "-Yclose"], &given, "fills", "fill") {
            out.push(format!(
                "nanobragg-rs: warning: {close} under -xds/-dials only {fill} the header's BEAM_CENTER_X/Y where -Xbeam/-Ybeam are not given (as in nanoBragg.c): the detector's origin follows -ORGX/-ORGY"
            ));
        }
    }
    if let (Some(conv), false) = (beam_centred(c.params.convention), from_file) {
        // L1172-L1217: these conventions take Fbeam/Sbeam from -Xbeam/-Ybeam and pivot on the beam
        if let Some((close, place)) = named(&["-Xclose", "-Yclose", "-ORGX", "-ORGY"], &given, "places", "place") {
            out.push(format!(
                "nanobragg-rs: warning: {close} under the {conv} convention {place} nothing (as in nanoBragg.c): the beam centre is -Xbeam/-Ybeam's; -ORGX/-ORGY place the detector under -xds or -dials"
            ));
        }
    }
    out
}

/// Those of `names` given (as typed), joined by '/', with the verb agreeing with their number
/// (`one` for a single flag, else `many`); `None` when none was given.
fn named(names: &[&str], given: &impl Fn(&str) -> Option<String>, one: &'static str, many: &'static str) -> Option<(String, &'static str)> {
    let typed: Vec<String> = names.iter().filter_map(|n| given(n)).collect();
    (!typed.is_empty()).then(|| (typed.join("/"), if typed.len() == 1 { one } else { many }))
}

/// The conventions whose detector is placed by the beam centre (-Xbeam/-Ybeam, pivot BEAM), by name.
fn beam_centred(c: crate::experiment::params::Convention) -> Option<&'static str> {
    use crate::experiment::params::Convention;
    match c {
        Convention::Mosflm => Some("MOSFLM"),
        Convention::Denzo => Some("DENZO"),
        Convention::Adxv => Some("ADXV"),
        _ => None,
    }
}

/// What a `-mask`/`-img` header decided of the geometry that the flags may seem to decide, for a
/// warning nanoBragg.c does not print: a header's CLOSE_DISTANCE fixes the distance whatever
/// `-distance` says (L434, L477, L1713-L1714), and a mask's BEAM_CENTER_Y is read as detsize − value
/// (L439; an `-img` header's as it is, L483, and nanoBragg writes Ybeam itself, L3170), so a mask
/// written by nanoBragg moves the beam centre.
#[derive(Default)]
struct HeaderGeometry {
    /// The header (its flag and file) whose CLOSE_DISTANCE was applied, and the value in metres.
    close_distance: Option<(String, f64)>,
    /// The mask whose BEAM_CENTER_Y was applied, the header's value (mm) and the Ybeam it gave (m).
    mask_ybeam: Option<(String, f64, f64)>,
}

impl HeaderGeometry {
    fn note(&mut self, c: &Config, smv: &SmvImage, flag: &str, is_mask: bool) {
        let from = format!("{flag} {}", smv.path.display());
        let present = |key: &str| header_number_present(&smv.header, key).ok().flatten();
        if let (Some(_), Some(d)) = (present("CLOSE_DISTANCE"), c.params.close_distance) {
            self.close_distance = Some((from.clone(), d));
        }
        if let Some(v) = present("BEAM_CENTER_Y") {
            // an -img header's value replaces the mask's (read after it)
            self.mask_ybeam = c.params.ybeam.filter(|_| is_mask).map(|y| (from, v, y));
        }
    }

    /// The warnings where the flags (`given`) did not take back what a header decided.
    fn warnings(&self, c: &Config, given: impl Fn(&str) -> bool) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((from, d)) = &self.close_distance {
            if given("-distance") && !given("-close_distance") && c.params.close_distance == Some(*d) {
                out.push(format!(
                    "nanobragg-rs: warning: {from}: its header's CLOSE_DISTANCE={} sets the detector distance, not -distance (as in nanoBragg.c): give -close_distance to move the detector",
                    crate::base::c::printf::g(d * 1000.0)
                ));
            }
        }
        if let Some((from, v, y)) = &self.mask_ybeam {
            if !given("-Ybeam") && c.params.ybeam == Some(*y) {
                out.push(format!(
                    "nanobragg-rs: warning: {from}: its header's BEAM_CENTER_Y={v} places the beam at Ybeam = detector size − {v} = {} mm, as nanoBragg.c reads a mask (an -img header's value is taken as it is, and nanoBragg writes Ybeam itself): give -Ybeam to place the beam",
                    crate::base::c::printf::g(y * 1000.0)
                ));
            }
        }
        out
    }
}

/// The detector geometry flags an `--expt` detector replaces (refused after it).
/// The beam --expt sets besides the detector (`run::expt::apply`): given before it, replaced.
const EXPT_BEAM: &[&str] = &["-lambda", "-energy", "-beam_vector", "-polar", "-nopolar", "-polar_vector"];

const EXPT_GEOMETRY: &[&str] = &[
    "-distance", "-close_distance", "-pixel", "-detsize", "-detsize_f", "-detsize_s", "-detpixels", "-detpixels_f", "-detpixels_s",
    "-Xbeam", "-Ybeam", "-Xclose", "-Yclose", "-ORGX", "-ORGY", "-pivot", "-mosflm", "-xds", "-adxv", "-denzo", "-dials",
    "-fdet_vector", "-sdet_vector", "-odet_vector", "-twotheta_axis", "-pix0_vector", "-twotheta", "-detector_rotx",
    "-detector_roty", "-detector_rotz", "-curved_det", "-img",
];

/// Read the `--expt` list and apply it at its place among the flags.
fn apply_expt(c: &mut Config, experiment: Option<i64>, image: Option<i64>, panel: Option<i64>, typed: &str) -> Result<()> {
    let mut src = c.params.expt.clone().ok_or_else(|| Error::flag(typed, "no file"))?;
    let idx = |v: Option<i64>, flag: &str| -> Result<Option<usize>> {
        v.map(|v| usize::try_from(v).map_err(|_| Error::flag(flag, format!("{v} is not an index (0 or more)")))).transpose()
    };
    src.experiment = idx(experiment, "--experiment")?;
    src.image = image;
    c.params.panel = idx(panel, "--panel")?;
    let model = crate::run::expt::read(&src)?;
    crate::run::expt::apply(&mut c.params, &model, &src)
}

// ------------------------------------------------------------------------------------------ help
