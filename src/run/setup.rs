//! Setup: the experiment built from a run's configuration and inputs,
//! and the files the setup itself produces (`-hklout`).

use crate::experiment::inputs::Inputs;
use crate::experiment::Experiment;
use crate::run::config::Config;
use crate::Result;

/// Build the experiment from `cfg`'s parameters and `inputs` (no file I/O). The run options that
/// concern the kernel are `cfg.run.render_options()`.
pub fn build_experiment(cfg: &Config, inputs: &Inputs) -> Result<Experiment> {
    Experiment::build(&cfg.params, inputs)
}

/// Files the setup step itself produces: `-hklout` (the list computed from a `-pdb`/`-cif` model),
/// written at once (`series`, whose frames appear one by one). `simulate` instead adds it to the set of
/// outputs renamed together ([`add_setup_outputs`]).
pub fn write_setup_outputs(cfg: &Config, exp: &Experiment) -> Result<()> {
    match (&cfg.params.model.hklout, exp.structure_factors.hklout_entries.as_deref().map(|v| v.as_slice())) {
        (Some(out), Some(e)) => crate::io::hkl::write_hkl(out, e),
        _ => Ok(()),
    }
}

/// Add `-hklout` to `set`, the outputs renamed together with the images and the Fdump cache: a run
/// whose image cannot be written must not leave a new `-hklout` behind (all or nothing).
pub fn add_setup_outputs(cfg: &Config, exp: &Experiment, set: &mut crate::io::atomic::OutputSet) -> Result<()> {
    match (&cfg.params.model.hklout, exp.structure_factors.hklout_entries.as_deref().map(|v| v.as_slice())) {
        (Some(out), Some(e)) => set
            .add_bytes(out, crate::io::hkl::hkl_text(e).as_bytes())
            .map_err(|err| crate::Error::file(out, format!("cannot write -hklout file: {err}"))),
        _ => Ok(()),
    }
}
