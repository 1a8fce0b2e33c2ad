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
        if key.starts_with("rigid_group") {
            continue;
        }
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
    let bad = bad.iter().map(|(name, f)| bad_region(path, name, f)).collect::<Result<Vec<_>>>()?.into_iter().flatten().collect();
    Ok(GeomModel { path: path.to_path_buf(), panels, wavelength, bad })
}

fn number(path: &Path, key: &str, (v, n): &(String, usize)) -> Result<f64> {
    let first = v.split_whitespace().next().unwrap_or("");
    match first.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ if first.starts_with('/') => Err(Error::file_line(path, *n, format!("{key} = {v}: a value read from the data file cannot be simulated; give the number"))),
        _ => Err(Error::file_line(path, *n, format!("{key} = {v}: not a number"))),
    }
}

fn global_wavelength(path: &Path, g: &Fields) -> Result<Option<f64>> {
    if let Some(v) = g.get("photon_energy") {
        let ev = number(path, "photon_energy", v)?;
        if !(ev > 0.0) {
            return Err(Error::file_line(path, v.1, "photon_energy must be positive (eV)"));
        }
        return Ok(Some(12398.419843320026 / ev));
    }
    if let Some(v) = g.get("wavelength") {
        let x = number(path, "wavelength", v)?;
        let unit = v.0.split_whitespace().nth(1).unwrap_or("m");
        let a = match unit {
            "A" => x,
            "m" => x * 1e10,
            u => return Err(Error::file_line(path, v.1, format!("wavelength unit '{u}': give m or A"))),
        };
        if !(a > 0.0) {
            return Err(Error::file_line(path, v.1, "wavelength must be positive"));
        }
        return Ok(Some(a));
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
            c => c.parse::<f64>().map_err(|_| bad())?,
        };
    }
    Ok(out)
}

fn panel(path: &Path, name: &str, f: &Fields) -> Result<GeomPanel> {
    let line = f.get("__line").map_or(0, |v| v.1);
    let get = |k: &str| f.get(k).ok_or_else(|| Error::file_line(path, line, format!("panel {name} has no {k}")));
    let int = |k: &str| -> Result<i64> {
        let x = number(path, &format!("{name}/{k}"), get(k)?)?;
        if x.fract() != 0.0 || x < 0.0 {
            return Err(Error::file_line(path, get(k)?.1, format!("{name}/{k} = {x}: a pixel index (0 or more)")));
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

fn bad_region(path: &Path, name: &str, f: &Fields) -> Result<Option<BadRegion>> {
    let num = |k: &str| f.get(k).map(|v| number(path, &format!("{name}/{k}"), v)).transpose();
    if let Some((p, _)) = f.get("panel") {
        let i = |k: &str, d: i64| -> Result<i64> { Ok(num(k)?.map_or(d, |x| x as i64)) };
        return Ok(Some(BadRegion::FsSs { panel: p.clone(), min_fs: i("min_fs", 0)?, max_fs: i("max_fs", i64::MAX)?, min_ss: i("min_ss", 0)?, max_ss: i("max_ss", i64::MAX)? }));
    }
    match (num("min_x")?, num("max_x")?, num("min_y")?, num("max_y")?) {
        (Some(min_x), Some(max_x), Some(min_y), Some(max_y)) => Ok(Some(BadRegion::Xy { min_x, max_x, min_y, max_y })),
        _ => Ok(None),
    }
}
