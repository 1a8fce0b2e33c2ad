//! `nanobragg-rs refine <simulate flags> --observed OBS --refine NAME[,...] [--loss poisson|lsq]
//! --params-out FIT.json [--refined-out V.json] [--max-iterations N]`: the front end of
//! `apps::refine`. The refine-only flags are taken out; every other word is a `simulate` flag.

use crate::apps::refine::{refine, RefineOptions};
use crate::experiment::tangents::Param;
use crate::{Error, Result};
use std::io::Write;
use std::path::PathBuf;

pub const REFINE_USAGE: &str = "usage: nanobragg-rs refine <simulate flags> --observed OBS --refine NAME[,NAME...] [--loss poisson|lsq] --params-out FIT.json [--refined-out V.json] [--max-iterations N]\n\
  Fits the named parameters (the --gradients names) to the observed image (raw floats, SMV, CBF or NeXus) by\n\
  Levenberg-Marquardt on the derivative images; prints each iteration; exit 0 when converged, 1 when not.\n\
  FIT.json loads with `simulate --params FIT.json`; V.json = {NAME: value} in flag units (rot_*: the\n\
  rotation relative to the start, x applied first).";

/// Parse and run; Ok(true) when the fit converged.
pub fn main(args: &[String], out: &mut dyn Write) -> Result<(bool, String)> {
    let mut rest = Vec::new();
    let (mut names, mut params_out, mut refined_out, mut max_iterations) = (None, None, None, 50usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().cloned().ok_or_else(|| Error::flag(flag, "missing value"));
        match a.as_str() {
            "--refine" => {
                let v = value("--refine")?;
                let list: Result<Vec<Param>> = v
                    .split(',')
                    .filter(|w| !w.trim().is_empty())
                    .map(|w| Param::parse(w.trim()).ok_or_else(|| Error::flag("--refine", format!("unknown parameter '{w}' (valid: {})", Param::names()))))
                    .collect();
                let list = list?;
                // a second list replaced the first without a word
                if names.is_some() {
                    return Err(Error::flag("--refine", "given twice: name every parameter in one list, --refine NAME,NAME,..."));
                }
                names = Some(list);
            }
            "--params-out" => params_out = Some(PathBuf::from(value("--params-out")?)),
            "--refined-out" => refined_out = Some(PathBuf::from(value("--refined-out")?)),
            "--max-iterations" => {
                let v = value("--max-iterations")?;
                max_iterations = v.parse().ok().filter(|&n| n > 0).ok_or_else(|| Error::flag("--max-iterations", format!("expects a positive integer (got '{v}')")))?;
            }
            _ => rest.push(a.clone()),
        }
    }
    let names = names.ok_or_else(|| Error::flag("--refine", format!("name the parameters to refine: --refine NAME[,NAME...] (valid: {})", Param::names())))?;
    refuse_image_outputs(&rest)?;
    let params_out = params_out.ok_or_else(|| Error::flag("--params-out", "give the file for the refined parameters: --params-out FIT.json"))?;
    // with no crystal, the built-in one (as simulate renders it: a demo fits what it renders)
    let (mut cfg, built_in) = crate::cli::parse::parse_with_built_in_crystal(&rest)?;
    if built_in && !cfg.run.quiet {
        let _ = writeln!(out, "{}", crate::cli::parse::built_in_crystal_note(&rest));
    }
    if cfg.output.loss.observed.is_none() {
        return Err(Error::flag("--observed", "refine needs the measured image: --observed IMAGE"));
    }
    cfg.output.gradients.clear();
    let report = refine(&cfg, &RefineOptions { names, params_out, refined_out, max_iterations }, out)?;
    let _ = writeln!(out, "refine: {}", report.message);
    for (n, v) in &report.values {
        let _ = writeln!(out, "refine: {} = {v} {}", n.name(), n.unit());
    }
    Ok((report.converged, report.message))
}

/// The files `refine` writes are `--params-out` and `--refined-out`: an image or derivative output
/// flag among the simulate flags was parsed and silently not written (and then stored in FIT.json).
/// Refused, pointing at the run that writes them.
fn refuse_image_outputs(words: &[String]) -> Result<()> {
    const WRITTEN_BY_SIMULATE: &[&str] = &[
        "-floatfile", "-intfile", "-pgmfile", "-noisefile", "--png", "-cbffile", "-nexusfile", "--expt-out", "--gradients",
        "--gradient-prefix", "--loss-out", "--dfhkl-out", "--save-params",
    ];
    match words.iter().filter_map(|w| crate::cli::parse::lookup(w)).find(|f| WRITTEN_BY_SIMULATE.contains(&f.name)) {
        Some(f) => Err(Error::flag(f.name, "refine writes only --params-out and --refined-out: render the fit with `simulate --params FIT.json` and this flag")),
        None => Ok(()),
    }
}
