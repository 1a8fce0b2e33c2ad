//! Structure factors straight from an atomic model (`-pdb` / `-cif`): read the coordinates, expand the
//! asymmetric unit to P1 with the space group's operators, and sum F(hkl) for every reflection to a
//! resolution limit, F000 and both Friedel mates included. The result is the same `h k l |F|` list an
//! `-hkl` file gives, and fills the same grid (the experiment builds it from the list).
//!
//! Physics: Waasmaier–Kirfel (1995) form factors (ions where the table has them), isotropic B or
//! ANISOU, occupancy; optional Henke f′/f″ at the beam's wavelength (`-anomalous`); optional bulk
//! solvent by Babinet's principle (`-k_sol`, `-b_sol`), see [`BulkSolvent`].

pub mod read;
pub mod scattering;
pub mod sfcalc;
pub mod spacegroup;

use crate::base::c::printf::g;
use crate::base::log::Log;
use crate::{Error, Result};
use std::path::{Path, PathBuf};

pub use read::{read_mmcif, read_pdb, Atom, Model};
pub use sfcalc::{Cell, SfResult};

/// Command-line settings of the model path (all `None`/off unless `-pdb` or `-cif` is given).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// `-pdb FILE`
    pub pdb: Option<PathBuf>,
    /// `-cif FILE`
    pub cif: Option<PathBuf>,
    /// `-hklout FILE`: write the computed P1 list.
    pub hklout: Option<PathBuf>,
    /// `-anomalous`: add Henke f′, f″ at the beam's wavelength.
    pub anomalous: bool,
    /// `-k_sol` (e/Å³) and `-b_sol` (Å²): bulk solvent (off when k_sol is 0).
    pub k_sol: f64,
    pub b_sol: f64,
    /// `-F000`: keep F(0,0,0) in the list. Off by default: it only lands on the direct beam, where it
    /// would be the brightest pixel of the image, and `-hkl` files never carry it.
    pub f000: bool,
    /// `-spacegroup NAME|NUMBER`: the model's space group (for a model without one, or to override it).
    pub space_group: Option<String>,
}

impl ModelConfig {
    pub fn path(&self) -> Option<&Path> {
        self.pdb.as_deref().or(self.cif.as_deref())
    }
}

/// Bulk solvent by Babinet's principle: F_total = F_calc · (1 − (k_sol/ρ_protein) · exp(−B_sol s²/4)),
/// ρ_protein = 0.43 e/Å³. This is the flat-solvent approximation of Moews & Kretsinger (1975) (the
/// solvent is the negative of the protein smeared by B_sol), not phenix.fmodel's mask-based model:
/// it matches the mask model's effect on the low-resolution amplitudes only roughly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BulkSolvent {
    pub k_sol: f64,
    pub b_sol: f64,
}

/// Options for [`compute`].
#[derive(Clone, Copy, Debug)]
pub struct SfOptions {
    pub d_min: f64,
    /// Wavelength in Å for f′/f″ (None: no anomalous scattering).
    pub anomalous_lambda: Option<f64>,
    pub bulk: Option<BulkSolvent>,
    /// Keep F(0,0,0) (`-F000`).
    pub f000: bool,
}

/// Computed P1 structure factors of a model.
pub struct ModelF {
    pub cell: [f64; 6],
    pub space_group: String,
    pub n_ops: usize,
    pub hkl: Vec<[i32; 3]>,
    /// Complex F (electrons).
    pub f: Vec<[f64; 2]>,
    /// Informational lines (ions replaced by neutral atoms, elements without f′/f″, ...).
    pub notes: Vec<String>,
}

impl ModelF {
    pub fn amplitudes(&self) -> Vec<f64> {
        self.f.iter().map(|c| c[0].hypot(c[1])).collect()
    }
    /// `(h, k, l, |F|)` as an `-hkl` file gives them.
    pub fn entries(&self) -> Vec<(i32, i32, i32, f64)> {
        self.hkl.iter().zip(self.amplitudes()).map(|(h, f)| (h[0], h[1], h[2], f)).collect()
    }
}

/// Read a model file; `.cif`/`.mmcif` (or `cif = true`) as mmCIF, otherwise PDB.
pub fn read_model(path: &Path, cif: bool) -> Result<Model> {
    if cif {
        read_mmcif(path)
    } else {
        read_pdb(path)
    }
}

/// Library entry point: model → P1 (h, k, l, F), in the model's own cell.
pub fn compute(model: &Model, path: &Path, opts: &SfOptions) -> Result<ModelF> {
    let cellp = model.cell.ok_or_else(|| Error::file(path, "the model has no unit cell (CRYST1 or _cell)"))?;
    let cell = Cell::new(cellp).ok_or_else(|| Error::file(path, format!("unusable unit cell {cellp:?}")))?;
    let sg_name = model.space_group.clone().unwrap_or_else(|| "P 1".to_string());
    let sg = spacegroup::lookup(&sg_name, cellp[5]).map_err(|e| Error::file(path, e.to_string()))?;
    if !(opts.d_min > 0.0) {
        return Err(Error::flag("-dmin", "must be greater than 0"));
    }
    // the refusal `load` gives, for callers that did not load through it
    check_space_group_fits_cell(None, path, model)?;
    check_b_factors(model, path, opts.d_min)?;
    let mut notes = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    let mut atoms = Vec::with_capacity(model.atoms.len());
    for a in &model.atoms {
        let label = scattering::type_label(&a.element, a.charge);
        let t = match labels.iter().position(|l| *l == label) {
            Some(t) => t,
            None => {
                labels.push(label);
                labels.len() - 1
            }
        };
        let u_star = match a.u_aniso {
            Some(u) => cell.u_star_from_cart(u),
            None => {
                let u_iso = a.b_iso / (8.0 * std::f64::consts::PI * std::f64::consts::PI);
                cell.g_star.map(|r| r.map(|v| v * u_iso))
            }
        };
        atoms.push(sfcalc::SfAtom { frac: cell.frac(a.xyz), occ: a.occ, u_star, type_index: t });
    }
    let mut gaussians = Vec::new();
    let mut anom = Vec::new();
    for l in &labels {
        let (gs, exact) = scattering::wk1995(l).map_err(|e| Error::file(path, e.to_string()))?;
        if !exact {
            notes.push(format!("no Waasmaier-Kirfel factor for ion {l}: using the neutral atom"));
        }
        gaussians.push(gs);
        let element: String = l.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
        let fpfdp = match opts.anomalous_lambda {
            None => (0.0, 0.0),
            Some(lam) => match scattering::henke_fp_fdp(&element, scattering::HC_EV_ANGSTROM / lam) {
                Some(v) => v,
                None => {
                    notes.push(format!("no Henke f'/f'' for {element} at {} A: using 0", g(lam)));
                    (0.0, 0.0)
                }
            },
        };
        anom.push(fpfdp);
    }
    let f0s: Vec<Box<dyn Fn(f64) -> f64 + Sync>> =
        gaussians.iter().map(|gs| { let gs = *gs; Box::new(move |s: f64| gs.at_stol_sq(s)) as Box<dyn Fn(f64) -> f64 + Sync> }).collect();
    let types: Vec<sfcalc::SfType> =
        f0s.iter().zip(&anom).map(|(f0, &(fp, fdp))| sfcalc::SfType { f0: f0.as_ref(), fp, fdp }).collect();
    let mut r = sfcalc::structure_factors(&cell, &sg.ops, &atoms, &types, opts.d_min);
    if !opts.f000 {
        if let Some(i) = r.hkl.iter().position(|h| *h == [0, 0, 0]) {
            r.hkl.remove(i);
            r.f.remove(i);
        }
    }
    if let Some(b) = opts.bulk {
        for (h, f) in r.hkl.iter().zip(r.f.iter_mut()) {
            let s_sq = cell.s_sq(h.map(|v| v as f64));
            let k = 1.0 - b.k_sol / 0.43 * (-b.b_sol * s_sq / 4.0).exp();
            f[0] *= k;
            f[1] *= k;
        }
    }
    check_f_limit(&r, path, opts.d_min, opts.bulk)?;
    Ok(ModelF { cell: cellp, space_group: sg.name, n_ops: sg.ops.len(), hkl: r.hkl, f: r.f, notes })
}

/// A model read for a simulation: its file, and the cell it gives (degrees).
#[derive(Clone, Debug)]
pub struct LoadedModel {
    pub path: PathBuf,
    pub model: Model,
}

/// Read the model named by `-pdb`/`-cif`, if any (before the cell is needed). `cell` (`-cell`, Å and
/// degrees) is the model's cell when the file has none; `-spacegroup` sets its space group.
pub fn load(cfg: &ModelConfig, cell: Option<[f64; 6]>, log: &mut Log) -> Result<Option<LoadedModel>> {
    let Some(path) = cfg.path() else { return Ok(None) };
    if cfg.pdb.is_some() && cfg.cif.is_some() {
        return Err(Error::flag("-cif", "give one model: -pdb or -cif, not both"));
    }
    let mut model = read_model(path, cfg.cif.is_some())?;
    // no cell: a CRYST1 of zeros, or the PDB's 1 1 1 placeholder of cryo-EM and NMR models (cctbx
    // reads it as no crystal symmetry), which `-cell` then gives; it stopped with "unusable unit cell"
    let placeholder = model.cell == Some([1.0, 1.0, 1.0, 90.0, 90.0, 90.0]);
    if placeholder || model.cell.is_some_and(|c| Cell::new(c).is_none()) {
        match cell {
            Some(_) => model.cell = None,
            None if placeholder => return Err(Error::file(path, "the model's cell 1 1 1 90 90 90 is the PDB's placeholder, no crystal's: give -cell a b c alpha beta gamma")),
            // the cell's own error, naming the model's file, comes with the lattice
            None => {}
        }
    }
    if model.cell.is_none() {
        model.cell = cell;
    }
    if let Some(sg) = &cfg.space_group {
        let gamma = model.cell.map(|c| c[5]).unwrap_or(90.0);
        let found = spacegroup::lookup(sg, gamma).map_err(|e| Error::flag("-spacegroup", e.to_string()))?;
        model.space_group = Some(found.name);
    } else if let Some((line, what)) = &model.space_group_unread {
        return Err(Error::file_line(path, *line, format!("the space group is given only as {what}: give -spacegroup NAME|NUMBER")));
    }
    check_space_group_fits_cell(cfg.space_group.as_deref(), path, &model)?;
    log.line(format!(
        "read {} atoms from {} (space group {}, cell {})",
        model.atoms.len(),
        path.display(),
        model.space_group.as_deref().unwrap_or("P 1 (none given)"),
        model.cell.map(|c| c.iter().map(|v| g(*v)).collect::<Vec<_>>().join(" ")).unwrap_or_else(|| "none".into())
    ));
    if model.cell.is_none() {
        return Err(Error::file(path, "the model has no unit cell (CRYST1, _cell or a CNS 'REMARK sg= a= ...' line): give -cell a b c alpha beta gamma"));
    }
    Ok(Some(LoadedModel { path: path.to_path_buf(), model }))
}

/// Refuse a space group the cell cannot have ([`spacegroup::fits_cell`]), naming where the group came
/// from (`given`: the `-spacegroup` word, else the file's CRYST1 / CIF line) and the cell: its
/// operators would map atoms to positions that are not symmetry-equivalent, and every F would be
/// wrong (cctbx refuses the same pairs: "Space group is incompatible with unit cell parameters").
fn check_space_group_fits_cell(given: Option<&str>, path: &Path, model: &Model) -> Result<()> {
    let (Some(cell), Some(name)) = (model.cell, &model.space_group) else { return Ok(()) };
    // a cell that is no cell has its own error, naming the file, with the lattice
    if Cell::new(cell).is_none() {
        return Ok(());
    }
    // an unknown symbol is refused later, by compute, with the list of what is known
    let Ok(sg) = spacegroup::lookup(name, cell[5]) else { return Ok(()) };
    if spacegroup::fits_cell(&sg, cell) {
        return Ok(());
    }
    let cell_s = cell.iter().map(|v| g(*v)).collect::<Vec<_>>().join(" ");
    let why = format!("space group {} (number {}) does not fit the cell {cell_s}: its symmetry operators change the cell's metric", sg.name, sg.number);
    Err(match (given, model.space_group_line) {
        (Some(given), _) => Error::flag("-spacegroup", format!("'{given}': {why} (the cell of {})", path.display())),
        (None, 0) => Error::file(path, format!("{why}: give -spacegroup")),
        (None, line) => Error::file_line(path, line, format!("{why}: give -spacegroup")),
    })
}

/// The largest |F| a computed list may hold: the limit the `-hkl` reader and the Fdump reader apply
/// (its square must not overflow), so that `-hklout` and the cache can always be read back.
pub const F_MAX: f64 = 1e100;

/// How many times an atom's scattering at resolution `d_min` (Å) exceeds its scattering at zero angle
/// through its Debye–Waller factor, as a natural logarithm: positive only for a negative B or an
/// ANISOU that is not positive definite (the factor then grows with angle instead of falling).
fn dw_growth_ln(a: &Atom, d_min: f64) -> f64 {
    let s_sq = 1.0 / (d_min * d_min); // |s|² = 1/d², exp(-B |s|²/4) = exp(-2π² sᵀUs)
    match a.u_aniso {
        None => -a.b_iso * s_sq / 4.0,
        Some(u) => -2.0 * std::f64::consts::PI.powi(2) * min_eigenvalue(u) * s_sq,
    }
}

/// Smallest eigenvalue of a symmetric 3×3 matrix given as U11 U22 U33 U12 U13 U23 (trigonometric
/// closed form).
fn min_eigenvalue(u: [f64; 6]) -> f64 {
    let [a, b, c, d, e, f] = u;
    let p1 = d * d + e * e + f * f;
    let q = (a + b + c) / 3.0;
    let p2 = (a - q).powi(2) + (b - q).powi(2) + (c - q).powi(2) + 2.0 * p1;
    let p = (p2 / 6.0).sqrt();
    if p == 0.0 {
        return q;
    }
    let (ba, bb, bc) = ((a - q) / p, (b - q) / p, (c - q) / p);
    let (bd, be, bf) = (d / p, e / p, f / p);
    let det = ba * (bb * bc - bf * bf) - bd * (bd * bc - bf * be) + be * (bd * bf - bb * be);
    let phi = (det / 2.0).clamp(-1.0, 1.0).acos() / 3.0;
    q + 2.0 * p * (phi + 2.0 * std::f64::consts::PI / 3.0).cos()
}

/// Refuse an atom whose B makes its scattering grow a millionfold by `d_min` (a B below -55.3 Å² at 1 Å;
/// -999.9 gives 1e108 at 1 Å and overflows at 0.5 Å): such an atom outweighs the whole model and the
/// image becomes noise or NaN. Slightly negative B, as refinement leaves them, pass.
fn check_b_factors(model: &Model, path: &Path, d_min: f64) -> Result<()> {
    let worst = model.atoms.iter().map(|a| (a, dw_growth_ln(a, d_min))).max_by(|x, y| x.1.total_cmp(&y.1));
    if let Some((a, ln)) = worst.filter(|(_, ln)| *ln > 1e6f64.ln() || ln.is_nan()) {
        let what = if a.u_aniso.is_some() { "its ANISOU is not positive definite".to_string() } else { format!("its B-factor {} is negative", g(a.b_iso)) };
        return Err(Error::file_line(
            path,
            a.line,
            format!("{what}: its scattering would grow 1e{:.0}-fold by {}; refused", ln / std::f64::consts::LN_10, resolution_reached(d_min)),
        ));
    }
    Ok(())
}

/// `d_min` as the refusals name it: a simulation computes F past `-dmin`, or past the detector's edge
/// without it, by the F look-up's reach ([`entries_for_simulation`]), so neither alone is the cause.
pub fn resolution_reached(d_min: f64) -> String {
    format!("{} A (the resolution the structure factors are computed to: -dmin or the detector's edge, widened for the F look-up)", g(d_min))
}

/// Refuse a computed list with an |F| above [`F_MAX`] (or not finite): the image would overflow and the
/// `-hklout` file and Fdump cache could not be read back.
fn check_f_limit(r: &SfResult, path: &Path, d_min: f64, bulk: Option<BulkSolvent>) -> Result<()> {
    let worst = r.f.iter().map(|c| c[0].hypot(c[1])).fold(0.0f64, |m, v| if v.is_nan() || m.is_nan() { f64::NAN } else { m.max(v) });
    if worst.is_finite() && worst <= F_MAX {
        return Ok(());
    }
    let cause = match bulk {
        Some(b) if b.k_sol > 1.0 => format!("-k_sol {}", g(b.k_sol)),
        _ => format!("the model to {}", resolution_reached(d_min)),
    };
    Err(Error::file(path, format!("a computed |F| is {} (above {}, the limit of -hkl files): from {cause}", g(worst), g(F_MAX))))
}

/// Compute the structure factors for a simulation, log the setup summary (with the time) and return
/// the `-hkl`-style entries (`-hklout` is written from them by `run::setup`).
/// `d_min` (Å): every reflection a rendered pixel reads (`experiment::model_resolution`).
pub fn entries_for_simulation(cfg: &ModelConfig, lm: &LoadedModel, d_min: f64, lambda_angstrom: f64, log: &mut Log) -> Result<Vec<(i32, i32, i32, f64)>> {
    let opts = SfOptions {
        d_min,
        anomalous_lambda: if cfg.anomalous { Some(lambda_angstrom) } else { None },
        bulk: if cfg.k_sol != 0.0 { Some(BulkSolvent { k_sol: cfg.k_sol, b_sol: cfg.b_sol }) } else { None },
        f000: cfg.f000,
    };
    let t0 = std::time::Instant::now();
    let mf = compute(&lm.model, &lm.path, &opts)?;
    let secs = t0.elapsed().as_secs_f64();
    for n in &mf.notes {
        log.line(format!("WARNING: {n}"));
    }
    log.line(format!(
        "computed {} structure factors (P1, Friedel mates, {}) to {} A from {} atoms x {} symmetry operators of {} in {:.2} s{}{}",
        mf.hkl.len(),
        if cfg.f000 { "F000 included" } else { "F000 left out" },
        g(d_min),
        lm.model.atoms.len(),
        mf.n_ops,
        mf.space_group,
        secs,
        if cfg.anomalous { format!(", with Henke f'/f'' at {} A", g(lambda_angstrom)) } else { String::new() },
        if cfg.k_sol != 0.0 { format!(", Babinet bulk solvent k_sol={} b_sol={}", g(cfg.k_sol), g(cfg.b_sol)) } else { String::new() },
    ));
    let entries = mf.entries();
    if let Some(out) = &cfg.hklout {
        // written later by `run::setup`, with the outputs: not yet
        log.line(format!("will write {} reflections to {}", entries.len(), out.display()));
    }
    Ok(entries)
}


#[cfg(test)]
mod tests {
    use super::*;

    const ATOM: &str = "ATOM      1  C   ALA A   1       1.000   2.000   3.000  1.00 10.00           C\n";

    /// A PDB file of `text` in a temporary folder, read (the folder is kept for the file's path).
    fn pdb(text: &str) -> (tempfile::TempDir, PathBuf, Model) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.pdb");
        std::fs::write(&path, text).unwrap();
        let model = read_pdb(&path).unwrap();
        (dir, path, model)
    }

    fn opts(d_min: f64) -> SfOptions {
        SfOptions { d_min, anomalous_lambda: None, bulk: None, f000: false }
    }

    #[test]
    fn refusals_name_the_resolution_reached_not_dmin_alone() {
        let (_dir, path, model) = pdb(&format!("CRYST1    8.000    9.000   10.000  90.00  90.00  90.00 P 1\n{}", ATOM.replace(" 10.00 ", "-999.9 ")));
        let e = compute(&model, &path, &opts(0.93)).err().unwrap().to_string();
        assert!(e.contains("B-factor -999.9") && e.contains("by 0.93 A (the resolution the structure factors are computed to: -dmin or the detector's edge"), "{e}");
        let r = SfResult { hkl: vec![[1, 0, 0]], f: vec![[1e120, 0.0]] };
        let e = check_f_limit(&r, &path, 0.93, None).unwrap_err().to_string();
        assert!(e.contains("from the model to 0.93 A (the resolution the structure factors are computed to: -dmin or the detector's edge"), "{e}");
    }

    #[test]
    fn compute_refuses_a_misfit_space_group_as_load_does() {
        let (_dir, path, model) = pdb(&format!("CRYST1    8.000    9.000   10.000  90.00  90.00  90.00 P 61\n{ATOM}"));
        let from_compute = compute(&model, &path, &opts(3.0)).err().unwrap().to_string();
        let cfg = ModelConfig { pdb: Some(path.clone()), ..Default::default() };
        let from_load = load(&cfg, None, &mut Log::default()).err().unwrap().to_string();
        assert_eq!(from_compute, from_load);
        assert!(from_compute.contains("m.pdb line 1") && from_compute.contains("8 9 10 90 90 90"), "{from_compute}");
    }
}
