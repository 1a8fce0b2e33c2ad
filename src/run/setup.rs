//! Setup: the experiment built from a run's configuration and inputs, with the run's kernel options,
//! and the files the setup itself produces (`-hklout`).

use crate::experiment::inputs::Inputs;
use crate::experiment::Experiment;
use crate::run::config::Config;
use crate::Result;

/// Build the experiment from `cfg`'s parameters and `inputs` (no file I/O), with the kernel options
/// (`-printout`, `-printout_pixel`, `--precision`) of `cfg`'s run options.
pub fn build_experiment(cfg: &Config, inputs: &Inputs) -> Result<Experiment> {
    let mut exp = Experiment::build(&cfg.params, inputs)?;
    exp.printout = cfg.run.printout;
    exp.printout_pixel = cfg.run.printout_pixel;
    exp.precision = cfg.run.precision;
    Ok(exp)
}

/// Files the setup step itself produces: `-hklout` (the list computed from a `-pdb`/`-cif` model). The
/// Fdump cache is written with the images ([`crate::run::outputs`]).
pub fn write_setup_outputs(cfg: &Config, exp: &Experiment) -> Result<()> {
    match (&cfg.params.model.hklout, exp.hklout_entries.as_deref().map(|v| v.as_slice())) {
        (Some(out), Some(e)) => crate::io::hkl::write_hkl(out, e),
        _ => Ok(()),
    }
}
