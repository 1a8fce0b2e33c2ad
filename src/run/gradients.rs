//! `--gradients`: the derivative images of a run (one per parameter, `<prefix><NAME>.bin`, the
//! `-floatfile` layout), from the setup tangents (`experiment::tangents`) and the dual-number pixel
//! loop (`kernel::tangents`). The float image itself is rendered by the usual kernel, unchanged.

use crate::experiment::inputs::Inputs;
use crate::experiment::tangents::{self, Param, Resolved};
use crate::experiment::Experiment;
use crate::kernel::tangents::{render_tangents, FGradient, TangentImages};
use crate::run::config::{resolve_out, Config};
use crate::Result;
use std::path::PathBuf;

/// Each requested parameter with its output path (`--gradient-prefix` + name + `.bin`, resolved
/// against `--out-dir`).
pub fn gradient_paths(cfg: &Config) -> Vec<(Param, PathBuf)> {
    cfg.output
        .gradients
        .iter()
        .map(|&p| {
            let mut name = cfg.output.gradient_prefix.clone().into_os_string();
            name.push(p.name());
            name.push(".bin");
            (p, resolve_out(cfg, &PathBuf::from(name)))
        })
        .collect()
}

/// Refuse, before rendering, gradients this run cannot have (see [`tangents::check`]).
pub fn check(cfg: &Config, inputs: &Inputs) -> Result<()> {
    tangents::check(&cfg.params, inputs, &cfg.output.gradients)
}

/// The derivative images by `names` (and, given per-pixel weights dL/dμ, Σ w·dμ/dF per grid cell).
pub fn derivative_images(cfg: &Config, inputs: &Inputs, exp: &Experiment, names: &[Param], fgrad: Option<&mut FGradient>) -> Result<TangentImages> {
    let t = tangents::tangents(&cfg.params, inputs, exp, names)?;
    Ok(render_tangents(exp, &Resolved::of(exp), &t, fgrad))
}
