//! Every input file a run names, read in one step before the experiment is built: the experiment
//! itself then touches no file (`Experiment::build`).

use crate::base::consts::RTD;
use crate::base::image::Mask;
use crate::experiment::inputs::{FhklSource, Inputs};
use crate::io::fdump::read_fdump;
use crate::io::hkl::{lacks_friedel_mates, read_hkl_with_entries};
use crate::run::config::{resolve_out, Config};
use crate::{Error, Result};
use std::sync::Arc;

/// Read every input file `cfg` names, in the C's order: `-mask`, `-img`, the model, `-mat`, `-hkl`
/// (or the Fdump cache found where it would be written), `-stol`, `-sourcefile`. Images already
/// read while parsing the command line (`cfg.mask`, `cfg.img`) are not read again.
pub fn load_inputs(cfg: &Config) -> Result<Inputs> {
    let p = &cfg.params;
    let mask = match (&cfg.mask, &p.mask_file) {
        (Some(m), _) => Some(m.clone()),
        (None, Some(path)) => Some(crate::io::smv::read_smv(path).map_err(|e| Error::flag("-mask", format!("cannot read {}: {e}", path.display())))?),
        (None, None) => None,
    };
    let mask = mask.map(|m| Mask { path: m.path, width: m.width, height: m.height, data: m.data });
    let mut inp = Inputs { mask, ..Default::default() };
    // -img is read while parsing the flags (its header sets parameters); only its name is kept
    inp.img_path = cfg.img.as_ref().map(|i| i.path.clone());
    for path in inp.mask.as_ref().map(|m| &m.path).into_iter().chain(inp.img_path.as_ref()) {
        inp.log.images.line(format!("reading {}", path.display()));
    }

    // -pdb/-cif: read now for its cell; its structure factors are computed in the build
    let cell = p.cell.map(|c| [c.a, c.b, c.c, c.alpha * RTD, c.beta * RTD, c.gamma * RTD]);
    inp.model = crate::sfcalc::load(&p.model, cell, &mut inp.log.model)?;
    if inp.model.is_some() && p.hkl_file.is_some() {
        return Err(Error::flag("-hkl", "give one source of structure factors: -hkl or -pdb/-cif, not both"));
    }

    if let Some(path) = &p.mat_file {
        inp.matrix = Some(crate::io::matrix::read_matrix_file(path)?);
        inp.log.matrix.line(format!("reading {}", path.display()));
    }

    let dump_path = resolve_out(cfg, &p.dump_file);
    if let Some(hkl) = &p.hkl_file {
        let (grid, entries) = read_hkl_with_entries(hkl, p.default_f, &mut inp.log.fhkl)?;
        if let Some((missing, listed)) = lacks_friedel_mates(&entries) {
            let f = crate::base::c::printf::g(p.default_f);
            let which = if missing == listed { "no reflection has its".to_string() } else { format!("{missing} of the {listed} reflections have no") };
            crate::base::log::warn(format!("nanobragg-rs: warning: -hkl {}: {which} Friedel mate (-h -k -l) listed, as in an asymmetric unit (e.g. only h,k,l >= 0, or only l >= 0); no symmetry is applied (P1), so every reflection not listed, their mates among them, has F = {f} (-default_F): list every h k l", hkl.display()));
        }
        inp.fhkl = Some(Arc::new(grid));
        inp.hkl_entries = Some(Arc::new(entries));
        inp.fhkl_source = FhklSource::HklFile(hkl.clone());
    } else if inp.model.is_none() && dump_path.is_file() {
        inp.log.fhkl.line(format!("reading Fs from {}", dump_path.display()));
        // the C reads the cache whenever no -hkl is given (nanoBragg.c L1276-L1281, L2104-L2127),
        // -default_F or not: its F silently replaced the uniform F a -default_F run asked for. On
        // stderr: stdout stays the C's.
        if p.default_f != 0.0 {
            let (f, d) = (crate::base::c::printf::g(p.default_f), dump_path.display());
            crate::base::log::warn(format!("nanobragg-rs: note: -default_F {f} applies only outside the hkl range of the cached {d} (F from an earlier -hkl, -pdb or -cif run), whose F are used: remove it, or give -dump NEW_FILE, for F = {f} everywhere"));
        }
        inp.fhkl = Some(Arc::new(read_fdump(&dump_path)?));
        inp.fhkl_source = FhklSource::Fdump(dump_path.clone());
    } else if inp.model.is_none() && dump_path.is_dir() {
        return Err(Error::file(&dump_path, "-dump: is a directory, not a structure-factor cache (Fdump.bin)"));
    }
    if p.hkl_file.is_some() || inp.model.is_some() {
        // The cache is written with the other outputs at the end of the run (run::outputs), so a
        // refused run never leaves one; here only the C's message, from a check of the target.
        // F computed from a -pdb/-cif model are cached too.
        // a dump inside an --out-dir that is made at the end is writable too
        let in_new_out_dir = cfg.output.out_dir.as_ref().is_some_and(|d| !d.exists() && dump_path.starts_with(d));
        if in_new_out_dir || crate::io::atomic::target_kind(&dump_path).is_ok() {
            inp.log.dump.line(format!("writing dump file for next time: {}", dump_path.display()));
        } else {
            inp.log.dump.line(format!("WARNING: unable to open dump file: {}", dump_path.display()));
        }
    }

    // the stol table is read with the C's reader, then unused (as in the C): a header line or a word
    // the C reads as 0 is taken, since nothing depends on it (nonbragg, which uses its table, reads strictly)
    if let Some((path, _mult)) = &p.stol_file {
        inp.log.stol.line(format!("reading {}", path.display()));
        let cols = crate::io::text::read_text_file(path, 2)?;
        if cols[0].is_empty() {
            return Err(Error::file(path, "no data in input file"));
        }
    }

    inp.detector = detector_panels(p)?;

    if let Some(path) = &p.source_file {
        inp.source_columns = Some(crate::io::sourcefile::read_source_columns(path)?);
    }
    Ok(inp)
}

/// The panels of `--geom` or `--expt` (every one, or `--panel N` alone; the rest of an experiment list
/// was applied to the parameters); `None` for the C's one panel from the flags.
pub fn detector_panels(p: &crate::experiment::params::Params) -> Result<Option<Vec<crate::experiment::detector::PanelSpec>>> {
    if let Some(path) = &p.geom {
        let model = crate::run::geom::read(path)?;
        Ok(Some(crate::run::geom::panel_specs(&model, p.panel)?))
    } else if let Some(src) = &p.expt {
        let model = crate::run::expt::read(src)?;
        Ok(Some(crate::run::expt::panel_specs(&model, p.panel)?))
    } else {
        Ok(None)
    }
}
