//! A CrystFEL geometry file (`--geom`) → the run: its panels become [`PanelSpec`]s in the lab frame the
//! `--expt` runs use (DIALS's imgCIF frame, converted from CrystFEL's McStas-like one as
//! (x, y, z) → (−x, y, −z)); its wavelength and, without an `--expt`, a beam along CrystFEL's +z, an
//! E-vector along x and the spindle along DIALS's x become parameters. Bad regions mask their pixels.

use crate::base::memory::check_alloc;
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

/// The panels of `m` (all, or `--panel N` alone), checked as the `--expt` panels are, with their
/// bad-region masks.
pub fn panel_specs(m: &GeomModel, panel: Option<usize>) -> Result<Vec<PanelSpec>> {
    chosen(m, panel)?
        .into_iter()
        .map(|p| {
            let mut spec = geometry(m, p)?;
            spec.mask = bad_mask(m, p, spec.fpixels, spec.spixels)?;
            Ok(spec)
        })
        .collect()
}

fn chosen(m: &GeomModel, panel: Option<usize>) -> Result<Vec<&GeomPanel>> {
    Ok(match panel {
        Some(i) => vec![m.panels.get(i).ok_or_else(|| Error::flag("--panel", format!("{i} is past the {} panels of {} (0 to {})", m.panels.len(), m.path.display(), m.panels.len() - 1)))?],
        None => m.panels.iter().collect(),
    })
}

/// At most this many pixels in a panel (the run's own limit on a detector): a larger one is refused
/// before anything its size is allocated.
const MAX_PANEL_PIXELS: u64 = 1 << 40;

/// Panel `p`'s geometry (no mask): pixel counts, axes, pixel size and first pixel's corner.
fn geometry(m: &GeomModel, p: &GeomPanel) -> Result<PanelSpec> {
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
    if distance < 0.0 && p.z > 0.0 {
        // in front of the sample, but fs × ss (the normal the pixels' solid angle takes) points at it:
        // a mirrored readout only where fs × ss also points back towards the source (−z; the beam
        // is CrystFEL's +z); a panel tilted far enough has the sample on its fs × ss side with a
        // right-handed readout
        let why = if cross(&p.fs, &p.ss)[2] < 0.0 {
            "a mirrored readout"
        } else {
            "not a mirrored readout: the panel is tilted so far that the sample lies on its fs × ss side"
        };
        return Err(bad(format!(
            "fs {:?} × ss {:?} points towards the sample ({why}); the simulator needs fs × ss pointing away from it: reverse ss (or fs) and put corner_y (or corner_x) at the panel's other edge",
            p.fs, p.ss
        )));
    }
    if !(distance > 0.0) {
        return Err(bad(format!("at distance {} mm from the sample (clen + coffset, along the panel normal); a panel must face the sample at a distance > 0", distance * 1e3)));
    }
    let count = |min: i64, max: i64| max.checked_sub(min).and_then(|d| d.checked_add(1)).and_then(|n| u64::try_from(n).ok());
    let (nf, ns) = match (count(p.min_fs, p.max_fs), count(p.min_ss, p.max_ss)) {
        (Some(nf), Some(ns)) if nf.checked_mul(ns).is_some_and(|n| n <= MAX_PANEL_PIXELS) => (nf as usize, ns as usize),
        _ => return Err(bad(format!("{} x {} pixels (min_fs {} to max_fs {}, min_ss {} to max_ss {}) is far too large", p.max_fs.wrapping_sub(p.min_fs).wrapping_add(1), p.max_ss.wrapping_sub(p.min_ss).wrapping_add(1), p.min_fs, p.max_fs, p.min_ss, p.max_ss))),
    };
    Ok(PanelSpec { name: p.name.clone(), fpixels: nf, spixels: ns, pixel_size: px, fdet_vector: f, sdet_vector: s, odet_vector: o, pix0_vector: pix0, mask: None, sensor: None })
}

/// The mask (1 = kept, 0 = bad) of panel `p` (`nf` x `ns` pixels) from the file's bad regions, or
/// `None` when none of them touches it. A region of the panel's fs/ss masks its rectangle directly; a
/// region in lab x/y tests each pixel's centre. Its memory is checked before it is allocated.
fn bad_mask(m: &GeomModel, p: &GeomPanel, nf: usize, ns: usize) -> Result<Option<Vec<u16>>> {
    let mut mask: Option<Vec<u16>> = None;
    for b in &m.bad {
        match b {
            BadRegion::FsSs { panel, min_fs, max_fs, min_ss, max_ss } if *panel == p.name => {
                // the region's pixels in the panel's own fs/ss (end exclusive), clipped to the panel
                let span = |lo: i64, hi: i64, start: i64, n: usize| (lo.saturating_sub(start).clamp(0, n as i64) as usize, hi.saturating_sub(start).saturating_add(1).clamp(0, n as i64) as usize);
                let ((f0, f1), (s0, s1)) = (span(*min_fs, *max_fs, p.min_fs, nf), span(*min_ss, *max_ss, p.min_ss, ns));
                if f0 < f1 && s0 < s1 {
                    let kept = mask_of(m, p, &mut mask, nf, ns)?;
                    for ss in s0..s1 {
                        kept[ss * nf + f0..ss * nf + f1].fill(0);
                    }
                }
            }
            BadRegion::FsSs { .. } => {}
            BadRegion::Xy { min_x, max_x, min_y, max_y } => {
                for ss in 0..ns {
                    for fs in 0..nf {
                        // the pixel's centre in lab pixel coordinates
                        let x = p.corner_x + (fs as f64 + 0.5) * p.fs[0] + (ss as f64 + 0.5) * p.ss[0];
                        let y = p.corner_y + (fs as f64 + 0.5) * p.fs[1] + (ss as f64 + 0.5) * p.ss[1];
                        if (*min_x..=*max_x).contains(&x) && (*min_y..=*max_y).contains(&y) {
                            mask_of(m, p, &mut mask, nf, ns)?[ss * nf + fs] = 0;
                        }
                    }
                }
            }
        }
    }
    Ok(mask)
}

/// The panel's mask, allocated (all kept) on first use once its memory is known to fit.
fn mask_of<'a>(m: &GeomModel, p: &GeomPanel, mask: &'a mut Option<Vec<u16>>, nf: usize, ns: usize) -> Result<&'a mut Vec<u16>> {
    if mask.is_none() {
        let bytes = (nf as u64).checked_mul(ns as u64).and_then(|n| n.checked_mul(2));
        check_alloc(|| Error::file_line(&m.path, p.line, format!("panel {}: the bad-region mask of {nf} x {ns} pixels does not fit in memory", p.name)), bytes)?;
        *mask = Some(vec![1u16; nf * ns]);
    }
    Ok(mask.as_mut().expect("allocated above"))
}

/// Apply geometry file `m` at the place `--geom` stands: its wavelength, the first chosen panel as
/// CUSTOM-convention flags, and (when no `--expt` came before) the beam, E-vector and spindle.
pub fn apply(params: &mut Params, m: &GeomModel) -> Result<()> {
    // the geometry of every chosen panel is checked here; masks are built once, when the run loads
    let specs = chosen(m, params.panel)?.into_iter().map(|p| geometry(m, p)).collect::<Result<Vec<_>>>()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    const PANELS: &str = "res = 10000\nclen = 0.06\nq0/min_fs = 0\nq0/max_fs = 63\nq0/min_ss = 0\nq0/max_ss = 47\nq0/fs = +1.0x\nq0/ss = +1.0y\nq0/corner_x = -32\nq0/corner_y = -24\n\
q1/min_fs = 0\nq1/max_fs = 63\nq1/min_ss = 48\nq1/max_ss = 87\nq1/fs = +1.0x\nq1/ss = +1.0y\nq1/corner_x = -32\nq1/corner_y = 30\n";

    fn model(text: &str) -> Result<GeomModel> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.geom");
        std::fs::write(&path, text).unwrap();
        read(&path)
    }

    #[test]
    fn a_panel_too_large_for_memory_is_refused_before_it_is_allocated() {
        let m = model(&PANELS.replace("q0/max_fs = 63", "q0/max_fs = 2000000000").replace("q0/max_ss = 47", "q0/max_ss = 2000000000")).unwrap();
        let e = panel_specs(&m, None).unwrap_err().to_string();
        assert!(e.contains("t.geom line 3: panel q0: 2000000001 x 2000000001 pixels") && e.contains("far too large"), "{e}");
    }

    #[test]
    fn a_mirrored_readout_is_named_as_such_not_as_a_panel_behind_the_sample() {
        let m = model(&PANELS.replace("q0/fs = +1.0x", "q0/fs = -1.0x")).unwrap();
        let e = panel_specs(&m, None).unwrap_err().to_string();
        assert!(e.contains("panel q0: fs") && e.contains("points towards the sample (a mirrored readout)") && !e.contains("distance -"), "{e}");
        // tilted, not mirrored: fs × ss = (0, 0.8, 0.6) keeps the beam's direction, but the panel at
        // y ≈ -0.1 m, z = 0.06 m has the sample on that side (distance 0.8 y + 0.6 z < 0)
        let tilted = PANELS.replace("q0/ss = +1.0y", "q0/ss = +0.6y -0.8z").replace("q0/corner_y = -24", "q0/corner_y = -1000");
        let e = panel_specs(&model(&tilted).unwrap(), None).unwrap_err().to_string();
        assert!(e.contains("panel q0: fs") && e.contains("points towards the sample (not a mirrored readout: the panel is tilted") && !e.contains("(a mirrored"), "{e}");
        // behind the sample it is the distance that is wrong
        let e = panel_specs(&model(&PANELS.replace("clen = 0.06", "clen = -0.06")).unwrap(), None).unwrap_err().to_string();
        assert!(e.contains("at distance -60 mm from the sample"), "{e}");
    }

    #[test]
    fn bad_regions_mask_their_panels_pixels_only() {
        let text = format!("{PANELS}bad_a/panel = q1\nbad_a/min_fs = 60\nbad_a/max_fs = 99\nbad_a/min_ss = 50\nbad_a/max_ss = 51\nbad_b/min_x = -32\nbad_b/max_x = -31\nbad_b/min_y = -24\nbad_b/max_y = -23\n");
        let specs = panel_specs(&model(&text).unwrap(), None).unwrap();
        let bad = |i: usize| -> Vec<usize> { specs[i].mask.as_ref().unwrap().iter().enumerate().filter(|(_, &v)| v == 0).map(|(k, _)| k).collect() };
        // q0: the pixel centred at (−31.5, −23.5); q1: fs 60 to 63 of its rows 2 and 3 (ss 50, 51)
        assert_eq!(bad(0), vec![0]);
        assert_eq!(bad(1), [2 * 64 + 60, 2 * 64 + 61, 2 * 64 + 62, 2 * 64 + 63, 3 * 64 + 60, 3 * 64 + 61, 3 * 64 + 62, 3 * 64 + 63]);
        assert!(panel_specs(&model(PANELS).unwrap(), None).unwrap().iter().all(|s| s.mask.is_none()));
    }
}
