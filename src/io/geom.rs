//! CrystFEL detector geometry files (`.geom`, crystfel_geometry(5)): the panels (min/max fs/ss,
//! inclusive; fs/ss vectors; corner_x/y in pixels; res in pixels per metre; clen + coffset in metres),
//! the photon energy or wavelength and the bad regions, read into plain models in CrystFEL's lab
//! frame (z along the beam, y up). Global values given before a panel's first line are its defaults,
//! as in CrystFEL. Rigid groups, data layout and other keys that do not change the image are accepted
//! and ignored.

use crate::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One panel in CrystFEL's lab frame.
#[derive(Clone, Debug, PartialEq)]
pub struct GeomPanel {
    pub name: String,
    pub min_fs: i64,
    pub max_fs: i64,
    pub min_ss: i64,
    pub max_ss: i64,
    /// Lab direction of one step along fast / slow (x, y, z), in pixels.
    pub fs: [f64; 3],
    pub ss: [f64; 3],
    /// Position of the first pixel's corner, pixels.
    pub corner_x: f64,
    pub corner_y: f64,
    /// pixels per metre
    pub res: f64,
    /// metres (clen + coffset)
    pub z: f64,
    pub adu_per_photon: Option<f64>,
    /// Line of the file where the panel first appears.
    pub line: usize,
}

/// A bad region: pixels excluded from the image. In lab pixel coordinates (`min_x..max_x`,
/// `min_y..max_y`) or in one panel's fs/ss (inclusive).
#[derive(Clone, Debug, PartialEq)]
pub enum BadRegion {
    Xy { min_x: f64, max_x: f64, min_y: f64, max_y: f64 },
    FsSs { panel: String, min_fs: i64, max_fs: i64, min_ss: i64, max_ss: i64 },
}

/// What a geometry file describes.
#[derive(Clone, Debug, PartialEq)]
pub struct GeomModel {
    pub path: PathBuf,
    pub panels: Vec<GeomPanel>,
    /// Å, from `photon_energy` (eV) or `wavelength`.
    pub wavelength: Option<f64>,
    pub bad: Vec<BadRegion>,
}

type Fields = BTreeMap<String, (String, usize)>;

/// Read a CrystFEL geometry file.
pub fn read_geom(path: &Path) -> Result<GeomModel> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, "cannot read geometry file", e))?;
    let mut defaults: Fields = BTreeMap::new();
    let mut panels: Vec<(String, Fields)> = Vec::new();
    let mut bad: BTreeMap<String, Fields> = BTreeMap::new();
    // a file saved by a Windows editor may start with a byte-order mark
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.split(';').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(Error::file_line(path, n, format!("expected 'key = value', found '{line}'")));
        };
        let (key, value) = (key.trim(), value.trim().to_string());
        // the detector hierarchy (rigid groups; CrystFEL 0.11's group_NAME): no effect on the image
        if key.starts_with("rigid_group") || key.starts_with("group_") {
            continue;
        }
        check_key(path, n, key, &value)?;
        match key.split_once('/') {
            None => {
                defaults.insert(key.to_string(), (value, n));
            }
            Some((name, field)) if name.starts_with("bad") => {
                bad.entry(name.to_string()).or_default().insert(field.trim().to_string(), (value, n));
            }
            Some((name, field)) => {
                let idx = match panels.iter().position(|(p, _)| p == name) {
                    Some(k) => k,
                    None => {
                        // a panel takes the global values given so far (CrystFEL's defaults)
                        let mut f = defaults.clone();
                        f.insert("__line".into(), (String::new(), n));
                        panels.push((name.to_string(), f));
                        panels.len() - 1
                    }
                };
                panels[idx].1.insert(field.trim().to_string(), (value, n));
            }
        }
    }
    if panels.is_empty() {
        return Err(Error::file(path, "no panel (lines 'name/min_fs = ...')"));
    }
    let wavelength = global_wavelength(path, &defaults)?;
    let panels = panels.iter().map(|(name, f)| panel(path, name, f)).collect::<Result<Vec<_>>>()?;
    let bad = bad.iter().map(|(name, f)| bad_region(path, name, f, &panels)).collect::<Result<Vec<_>>>()?.into_iter().flatten().collect();
    Ok(GeomModel { path: path.to_path_buf(), panels, wavelength, bad })
}

/// A panel's keys as CrystFEL reads them (datatemplate.c `parse_field_for_panel`), also valid as
/// global defaults; `mask…` and `dim…` are families.
/// (with CrystFEL 0.6–0.9's `rail_direction`, `clen_for_centering` and a panel's `rigid_group`).
const PANEL_KEYS: &[&str] = &[
    "min_fs", "max_fs", "min_ss", "max_ss", "corner_x", "corner_y", "rail_direction", "clen_for_centering", "rigid_group", "adu_bias", "adu_per_eV", "adu_per_photon", "clen", "data", "mask_edge_pixels", "mask_bad", "mask_good", "mask",
    "mask_file", "saturation_map", "saturation_map_file", "coffset", "res", "max_adu", "flag_equal", "flag_lessthan", "flag_morethan", "badrow_direction", "no_index", "fs", "ss",
];
/// Global-only keys (`parse_toplevel`; the last four from CrystFEL before 0.10).
const GLOBAL_KEYS: &[&str] = &[
    "photon_energy", "wavelength", "electron_voltage", "peak_list", "peak_list_type", "bandwidth", "detector_shift_x", "detector_shift_y",
    "photon_energy_bandwidth", "photon_energy_scale", "peak_info_location", "peak_sep",
];
/// A bad region's keys (`parse_field_bad`).
const BAD_KEYS: &[&str] = &["min_x", "max_x", "min_y", "max_y", "min_fs", "max_fs", "min_ss", "max_ss", "panel"];

/// Refuse a key CrystFEL does not know (0.10 and later stop with "Unrecognised field"; ignored, a misspelt
/// `photon_enrgy` or `coffest` gave an image at the default wavelength or distance), and the keys it
/// knows that would change the image but are not simulated: an electron beam, a detector shift.
fn check_key(path: &Path, n: usize, key: &str, value: &str) -> Result<()> {
    let (field, known): (&str, Vec<&str>) = match key.split_once('/') {
        Some((name, field)) if name.starts_with("bad") => (field.trim(), BAD_KEYS.to_vec()),
        Some((_, field)) => (field.trim(), PANEL_KEYS.to_vec()),
        None => (key, [PANEL_KEYS, GLOBAL_KEYS].concat()),
    };
    let family = |prefix: &str| field.strip_prefix(prefix).is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    if !(known.contains(&field) || family("mask") || family("dim")) {
        let near = known.iter().map(|k| (strsim::levenshtein(k, field), *k)).filter(|(d, _)| *d <= 2).min();
        let hint = near.map_or(String::new(), |(_, k)| format!(": did you mean '{k}'?"));
        return Err(Error::file_line(path, n, format!("'{key}' is not a CrystFEL geometry key (CrystFEL 0.10 and later stop at it as an unrecognised field){hint}")));
    }
    match field {
        "electron_voltage" => Err(Error::file_line(path, n, "electron_voltage: an electron beam; this program simulates X-rays (give photon_energy or wavelength)")),
        "detector_shift_x" | "detector_shift_y" => Err(Error::file_line(path, n, format!("{field} = {value}: a detector shift is not simulated (fold it into the panels' corner_x/corner_y)"))),
        _ => Ok(()),
    }
}

/// A plain number. CrystFEL's values are in fixed units (metres, pixels, pixels per metre), so a word
/// after the number ("clen = 60 mm") is refused rather than dropped.
fn number(path: &Path, key: &str, v: &(String, usize)) -> Result<f64> {
    match number_unit(path, key, v)? {
        (x, None) => Ok(x),
        (_, Some(u)) => Err(Error::file_line(path, v.1, format!("{key} = {}: '{u}' after the number; give a plain number (CrystFEL's units: metres, pixels, pixels per metre, eV)", v.0))),
    }
}

/// A finite number and the text after it, if any (a unit for `photon_energy` and `wavelength`).
fn number_unit<'a>(path: &Path, key: &str, (v, n): &'a (String, usize)) -> Result<(f64, Option<&'a str>)> {
    let (first, rest) = v.split_once(char::is_whitespace).map_or((v.as_str(), ""), |(a, b)| (a, b.trim()));
    match first.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok((x, (!rest.is_empty()).then_some(rest))),
        _ if first.starts_with('/') => Err(Error::file_line(path, *n, format!("{key} = {v}: a value read from the data file cannot be simulated; give the number"))),
        _ => Err(Error::file_line(path, *n, format!("{key} = {v}: not a number"))),
    }
}

use crate::base::consts::WAVELENGTH_RANGE_A as WAVELENGTH_RANGE; // Å: the -lambda range

fn global_wavelength(path: &Path, g: &Fields) -> Result<Option<f64>> {
    let in_range = |key: &str, (v, n): &(String, usize), a: f64| {
        if WAVELENGTH_RANGE.contains(&a) {
            Ok(Some(a))
        } else {
            Err(Error::file_line(path, *n, format!("{key} = {v}: a wavelength of {a:e} Angstrom is not an X-ray wavelength this program can simulate (1e-6 to 1e7 Angstrom)")))
        }
    };
    if let Some(v) = g.get("photon_energy") {
        // CrystFEL's parse_photon_energy: eV unless the unit says keV
        let ev = match number_unit(path, "photon_energy", v)? {
            (x, None | Some("eV")) => x,
            (x, Some("keV")) => x * 1e3,
            (_, Some(u)) => return Err(Error::file_line(path, v.1, format!("photon_energy unit '{u}': give eV or keV"))),
        };
        if !(ev > 0.0) {
            return Err(Error::file_line(path, v.1, "photon_energy must be positive (eV)"));
        }
        return in_range("photon_energy", v, 12398.419843320026 / ev);
    }
    if let Some(v) = g.get("wavelength") {
        let (x, unit) = number_unit(path, "wavelength", v)?;
        // CrystFEL's parse_wavelength: the unit is required (only photon_energy has a default)
        let a = match unit {
            Some("A") => x,
            Some("m") => x * 1e10,
            Some(u) => return Err(Error::file_line(path, v.1, format!("wavelength unit '{u}': give m or A"))),
            None => return Err(Error::file_line(path, v.1, format!("wavelength = {}: give the unit, m or A (CrystFEL requires one)", v.0))),
        };
        if !(a > 0.0) {
            return Err(Error::file_line(path, v.1, "wavelength must be positive"));
        }
        return in_range("wavelength", v, a);
    }
    Ok(None)
}

/// `+1.0x -0.5y +0.01z` → (x, y, z).
fn vector(path: &Path, key: &str, (v, n): &(String, usize)) -> Result<[f64; 3]> {
    let bad = || Error::file_line(path, *n, format!("{key} = {v}: expected terms such as '+1.0x -0.02y'"));
    let mut out = [0.0; 3];
    let s: String = v.chars().filter(|c| !c.is_whitespace()).collect();
    let mut rest = s.as_str();
    while !rest.is_empty() {
        let end = rest.char_indices().skip(1).find(|(_, c)| *c == '+' || *c == '-').map_or(rest.len(), |(i, _)| i);
        let term = &rest[..end];
        rest = &rest[end..];
        let axis = term.chars().last().ok_or_else(bad)?;
        let k = match axis {
            'x' => 0,
            'y' => 1,
            'z' => 2,
            _ => return Err(bad()),
        };
        let coef = &term[..term.len() - 1];
        out[k] += match coef {
            "" | "+" => 1.0,
            "-" => -1.0,
            c => c.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(bad)?,
        };
    }
    Ok(out)
}

fn panel(path: &Path, name: &str, f: &Fields) -> Result<GeomPanel> {
    let line = f.get("__line").map_or(0, |v| v.1);
    let get = |k: &str| f.get(k).ok_or_else(|| Error::file_line(path, line, format!("panel {name} has no {k}")));
    let int = |k: &str| -> Result<i64> {
        let x = number(path, &format!("{name}/{k}"), get(k)?)?;
        // CrystFEL holds pixel indices in an int
        if x.fract() != 0.0 || !(0.0..=i32::MAX as f64).contains(&x) {
            return Err(Error::file_line(path, get(k)?.1, format!("{name}/{k} = {}: not a pixel index (0 to {})", get(k)?.0, i32::MAX)));
        }
        Ok(x as i64)
    };
    let (min_fs, max_fs, min_ss, max_ss) = (int("min_fs")?, int("max_fs")?, int("min_ss")?, int("max_ss")?);
    if max_fs < min_fs || max_ss < min_ss {
        return Err(Error::file_line(path, line, format!("panel {name}: max_fs/max_ss below min_fs/min_ss")));
    }
    let res = number(path, &format!("{name}/res"), get("res")?)?;
    if !(res > 0.0) {
        return Err(Error::file_line(path, get("res")?.1, format!("{name}/res = {res}: pixels per metre must be positive")));
    }
    let clen = number(path, &format!("{name}/clen"), get("clen")?)?;
    let coffset = match f.get("coffset") {
        Some(v) => number(path, &format!("{name}/coffset"), v)?,
        None => 0.0,
    };
    Ok(GeomPanel {
        name: name.to_string(),
        min_fs,
        max_fs,
        min_ss,
        max_ss,
        fs: vector(path, &format!("{name}/fs"), get("fs")?)?,
        ss: vector(path, &format!("{name}/ss"), get("ss")?)?,
        corner_x: number(path, &format!("{name}/corner_x"), get("corner_x")?)?,
        corner_y: number(path, &format!("{name}/corner_y"), get("corner_y")?)?,
        res,
        z: clen + coffset,
        adu_per_photon: f.get("adu_per_photon").map(|v| number(path, "adu_per_photon", v)).transpose()?,
        line,
    })
}

fn bad_region(path: &Path, name: &str, f: &Fields, panels: &[GeomPanel]) -> Result<Option<BadRegion>> {
    let num = |k: &str| f.get(k).map(|v| number(path, &format!("{name}/{k}"), v)).transpose();
    if let Some((p, n)) = f.get("panel") {
        // CrystFEL refuses such a region ("No such panel"); ignoring it would leave its pixels in
        if !panels.iter().any(|q| q.name == *p) {
            return Err(Error::file_line(path, *n, format!("{name}/panel = {p}: no such panel in this file")));
        }
        let i = |k: &str, d: i64| -> Result<i64> { Ok(num(k)?.map_or(d, |x| x as i64)) };
        return Ok(Some(BadRegion::FsSs { panel: p.clone(), min_fs: i("min_fs", 0)?, max_fs: i("max_fs", i64::MAX)?, min_ss: i("min_ss", 0)?, max_ss: i("max_ss", i64::MAX)? }));
    }
    match (num("min_x")?, num("max_x")?, num("min_y")?, num("max_y")?) {
        (Some(min_x), Some(max_x), Some(min_y), Some(max_y)) => Ok(Some(BadRegion::Xy { min_x, max_x, min_y, max_y })),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PANEL: &str = "res = 10000\nclen = 0.06\nq0/min_fs = 0\nq0/max_fs = 63\nq0/min_ss = 0\nq0/max_ss = 47\nq0/fs = +1.0x\nq0/ss = +1.0y\nq0/corner_x = -32\nq0/corner_y = -24\n";

    fn read(text: &str) -> Result<GeomModel> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.geom");
        std::fs::write(&path, text).unwrap();
        read_geom(&path)
    }

    fn refused(text: &str, needle: &str) {
        let e = read(text).expect_err(text).to_string();
        assert!(e.contains(needle) && !e.contains('\n'), "{text:?}: {e}");
    }

    #[test]
    fn photon_energy_takes_crystfels_units() {
        let ev = read(&format!("photon_energy = 12398.419843320026\n{PANEL}")).unwrap().wavelength.unwrap();
        assert_eq!(read(&format!("photon_energy = 12398.419843320026 eV\n{PANEL}")).unwrap().wavelength, Some(ev));
        let kev = read(&format!("photon_energy = 12.398419843320026 keV\n{PANEL}")).unwrap().wavelength.unwrap();
        assert!((kev - 1.0).abs() < 1e-12 && (ev - 1.0).abs() < 1e-12, "{ev} {kev}");
        refused(&format!("photon_energy = 12 MeV\n{PANEL}"), "t.geom line 1: photon_energy unit 'MeV'");
        // CrystFEL refuses a wavelength without its unit (metres were assumed)
        refused(&format!("wavelength = 1e-10\n{PANEL}"), "t.geom line 1: wavelength = 1e-10: give the unit, m or A");
        assert_eq!(read(&format!("wavelength = 1e-10 m\n{PANEL}")).unwrap().wavelength, read(&format!("wavelength = 1 A\n{PANEL}")).unwrap().wavelength);
    }

    #[test]
    fn a_word_after_a_number_is_refused_with_its_line() {
        refused(&PANEL.replace("clen = 0.06", "clen = 60 mm"), "line 2: q0/clen = 60 mm: 'mm' after the number");
        refused(&PANEL.replace("max_fs = 63", "max_fs = 63 junk"), "line 4: q0/max_fs = 63 junk");
        refused(&PANEL.replace("res = 10000", "res = 10000 px/m"), "line 1: q0/res");
        refused(&PANEL.replace("fs = +1.0x", "fs = nanx"), "line 7: q0/fs = nanx");
        refused(&PANEL.replace("max_fs = 63", "max_fs = 4000000000"), "line 4: q0/max_fs = 4000000000: not a pixel index");
    }

    #[test]
    fn a_wavelength_out_of_range_names_the_line_compactly() {
        for (text, line) in [("photon_energy = 1e300", 1), ("photon_energy = 1e-300", 1), ("wavelength = 1e300 A", 1)] {
            let e = read(&format!("{text}\n{PANEL}")).unwrap_err().to_string();
            assert!(e.contains(&format!("t.geom line {line}: {text}: a wavelength of ")), "{e}");
            assert!(e.contains("not an X-ray wavelength") && e.len() < 200, "{e}");
        }
    }

    #[test]
    fn a_bad_region_of_an_unknown_panel_is_refused() {
        let ok = read(&format!("{PANEL}bad_a/panel = q0\nbad_a/min_fs = 1\nbad_a/max_fs = 2\n")).unwrap();
        assert_eq!(ok.bad.len(), 1);
        refused(&format!("{PANEL}bad_a/panel = qZ\nbad_a/min_fs = 1\n"), "line 11: bad_a/panel = qZ: no such panel");
    }

    #[test]
    fn keys_crystfel_does_not_know_are_refused_with_their_line() {
        let panel = "p0/min_fs = 0\np0/max_fs = 9\np0/min_ss = 0\np0/max_ss = 9\np0/fs = x\np0/ss = y\np0/corner_x = 0\np0/corner_y = 0\np0/res = 10000\np0/clen = 0.1\n";
        refused(&format!("photon_enrgy = 12000\n{panel}"), "t.geom line 1: 'photon_enrgy' is not a CrystFEL geometry key (CrystFEL 0.10 and later stop at it as an unrecognised field): did you mean 'photon_energy'?");
        refused(&format!("{panel}p0/coffest = 0.05\n"), "t.geom line 11: 'p0/coffest' is not a CrystFEL geometry key");
        refused(&format!("{panel}bad_a/maxy = 100\n"), "did you mean 'max_y'?");
        refused(&format!("electron_voltage = 300 kV\n{panel}"), "electron_voltage: an electron beam");
        refused(&format!("detector_shift_x = /shift_x\n{panel}"), "a detector shift is not simulated");
        // CrystFEL's own keys, families and the defaults a panel inherits are taken
        let m = read(&format!("photon_energy = 9000\nmask0_file = m.h5\ndim0 = %\nadu_per_eV = 1\np0/no_index = 0\nrigid_group_q0 = p0\ngroup_all = p0\npeak_info_location = /p\np0/rigid_group = q0\n{panel}bad_b/min_x = 0\nbad_b/max_x = 1\nbad_b/min_y = 0\nbad_b/max_y = 1\n")).unwrap();
        assert_eq!(m.panels.len(), 1);
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped() {
        assert_eq!(read(&format!("\u{feff}{PANEL}")).unwrap().panels, read(PANEL).unwrap().panels);
    }
}
