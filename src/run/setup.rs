//! Setup: the experiment built from a run's configuration and inputs,
//! and the files the setup itself produces (`-hklout`).

use crate::experiment::inputs::Inputs;
use crate::experiment::Experiment;
use crate::run::config::Config;
use crate::Result;

/// Build the experiment from `cfg`'s parameters and `inputs` (no file I/O). The run options that
/// concern the kernel are `cfg.run.render_options()`.
/// `-hklout` is named in the setup's log as it will be written, under `--out-dir`.
pub fn build_experiment(cfg: &Config, inputs: &Inputs) -> Result<Experiment> {
    match &cfg.params.model.hklout {
        Some(out) if cfg.output.out_dir.is_some() && out.is_relative() => {
            let mut params = cfg.params.clone();
            params.model.hklout = Some(crate::run::config::resolve_out(cfg, out));
            Experiment::build(&params, inputs)
        }
        _ => Experiment::build(&cfg.params, inputs),
    }
}

/// The `-hklout` file (the list computed from a `-pdb`/`-cif` model) to write, if any: its path under
/// `--out-dir` (where the output checks look) and its text.
fn hklout(cfg: &Config, exp: &Experiment) -> Option<(std::path::PathBuf, String)> {
    match (&cfg.params.model.hklout, exp.structure_factors.hklout_entries.as_deref()) {
        (Some(out), Some(e)) => Some((crate::run::config::resolve_out(cfg, out), crate::io::hkl::hkl_text(e))),
        _ => None,
    }
}

/// Files the setup step itself produces: `-hklout`, written at once (`series`, whose frames appear
/// one by one). `simulate` instead adds it to the set of outputs renamed together ([`add_setup_outputs`]).
pub fn write_setup_outputs(cfg: &Config, exp: &Experiment) -> Result<()> {
    let mut set = crate::io::atomic::OutputSet::default();
    add_setup_outputs(cfg, exp, &mut set)?;
    set.commit()
}

/// Add `-hklout` to `set`, the outputs renamed together with the images and the Fdump cache: a run
/// whose image cannot be written must not leave a new `-hklout` behind (all or nothing).
pub fn add_setup_outputs(cfg: &Config, exp: &Experiment, set: &mut crate::io::atomic::OutputSet) -> Result<()> {
    match hklout(cfg, exp) {
        Some((out, text)) => set.add_bytes(&out, text.as_bytes()).map_err(|err| crate::Error::file(&out, format!("cannot write -hklout file: {err}"))),
        None => Ok(()),
    }
}
