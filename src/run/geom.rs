//! A CrystFEL geometry file (`--geom`) → the run: its panels become [`PanelSpec`]s in the lab frame the
//! `--expt` runs use (DIALS's imgCIF frame, converted from CrystFEL's McStas-like one as
//! (x, y, z) → (−x, y, −z)); its wavelength and, without an `--expt`, a beam along CrystFEL's +z, an
//! E-vector along x and the spindle along DIALS's x become parameters. Bad regions mask their pixels.

use crate::base::vec3::{cross, dot, unitize, V3};
use crate::experiment::detector::PanelSpec;
use crate::experiment::params::Params;
use crate::io::geom::{read_geom, BadRegion, GeomModel, GeomPanel};
use crate::{Error, Result};
use std::path::Path;

fn lab(v: &V3) -> V3 {
    [-v[0], v[1], -v[2]]
}

/// Read the geometry file.
pub fn read(path: &Path) -> Result<GeomModel> {
    read_geom(path)
}

/// The panels of `m` (all, or `--panel N` alone), checked as the `--expt` panels are.
pub fn panel_specs(m: &GeomModel, panel: Option<usize>) -> Result<Vec<PanelSpec>> {
    let chosen: Vec<&GeomPanel> = match panel {
        Some(i) => vec![m.panels.get(i).ok_or_else(|| Error::flag("--panel", format!("{i} is past the {} panels of {} (0 to {})", m.panels.len(), m.path.display(), m.panels.len() - 1)))?],
        None => m.panels.iter().collect(),
    };
    chosen.into_iter().map(|p| spec(m, p)).collect()
}

fn spec(m: &GeomModel, p: &GeomPanel) -> Result<PanelSpec> {
    let bad = |why: String| Error::file_line(&m.path, p.line, format!("panel {}: {why}", p.name));
    let (f, fl) = unitize(&lab(&p.fs));
    let (s, sl) = unitize(&lab(&p.ss));
    if (fl - 1.0).abs() > 1e-3 || (sl - 1.0).abs() > 1e-3 || dot(&f, &s).abs() > 1e-3 {
        return Err(bad(format!("fs {:?} and ss {:?} are not orthogonal steps of one pixel; the simulator's pixels are square", p.fs, p.ss)));
    }
    let o = unitize(&cross(&f, &s)).0;
    let px = 1.0 / p.res;
    let pix0 = lab(&[p.corner_x * px, p.corner_y * px, p.z]);
    let distance = dot(&pix0, &o);
    if !(distance > 0.0) {
        return Err(bad(format!("at distance {} mm from the sample (clen + coffset, along the panel normal); a panel must face the sample at a distance > 0", distance * 1e3)));
    }
    let (nf, ns) = ((p.max_fs - p.min_fs + 1) as usize, (p.max_ss - p.min_ss + 1) as usize);
    let mut mask = vec![1u16; nf * ns];
    let mut masked = false;
    for b in &m.bad {
        for ss in 0..ns {
            for fs in 0..nf {
                let hit = match b {
                    BadRegion::FsSs { panel, min_fs, max_fs, min_ss, max_ss } => {
                        let (afs, ass) = (fs as i64 + p.min_fs, ss as i64 + p.min_ss);
                        *panel == p.name && (*min_fs..=*max_fs).contains(&afs) && (*min_ss..=*max_ss).contains(&ass)
                    }
                    BadRegion::Xy { min_x, max_x, min_y, max_y } => {
                        // the pixel's centre in lab pixel coordinates
                        let x = p.corner_x + (fs as f64 + 0.5) * p.fs[0] + (ss as f64 + 0.5) * p.ss[0];
                        let y = p.corner_y + (fs as f64 + 0.5) * p.fs[1] + (ss as f64 + 0.5) * p.ss[1];
                        (*min_x..=*max_x).contains(&x) && (*min_y..=*max_y).contains(&y)
                    }
                };
                if hit {
                    mask[ss * nf + fs] = 0;
                    masked = true;
                }
            }
        }
    }
    Ok(PanelSpec { name: p.name.clone(), fpixels: nf, spixels: ns, pixel_size: px, fdet_vector: f, sdet_vector: s, odet_vector: o, pix0_vector: pix0, mask: masked.then_some(mask) })
}

/// Apply geometry file `m` at the place `--geom` stands: its wavelength, the first chosen panel as
/// CUSTOM-convention flags, and (when no `--expt` came before) the beam, E-vector and spindle.
pub fn apply(params: &mut Params, m: &GeomModel) -> Result<()> {
    let specs = panel_specs(m, params.panel)?;
    if let Some(l) = m.wavelength {
        params.lambda0 = l * 1e-10;
    }
    if params.expt.is_none() {
        params.beam_vector = [0.0, 0.0, -1.0];
        params.polar_vector = [-1.0, 0.0, 0.0];
        params.spindle_vector = [1.0, 0.0, 0.0];
        params.phi_midpoint = true;
    }
    crate::run::expt::flat_panel_params(params, &specs[0]);
    params.geom = Some(m.path.clone());
    Ok(())
}
