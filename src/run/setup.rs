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

/// Files the setup step itself produces: `-hklout` (the list computed from a `-pdb`/`-cif` model). The
/// Fdump cache is written with the images ([`crate::run::outputs`]).
pub fn write_setup_outputs(cfg: &Config, exp: &Experiment) -> Result<()> {
    match (&cfg.params.model.hklout, exp.structure_factors.hklout_entries.as_deref().map(|v| v.as_slice())) {
        (Some(out), Some(e)) => crate::io::hkl::write_hkl(out, e),
        _ => Ok(()),
    }
}
