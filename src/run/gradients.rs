//! `--gradients` and `--observed`: the derivative images of a run (one per parameter,
//! `<prefix><NAME>.bin`, the `-floatfile` layout) and a loss against a measured image with its
//! gradient by those parameters and by every `-hkl` structure factor. Built on the setup tangents
//! (`experiment::tangents`) and the dual-number pixel loop (`kernel::tangents`); the float image itself
//! is rendered by the usual kernel, unchanged.

use crate::base::image::Roi;
use crate::experiment::inputs::Inputs;
use crate::experiment::tangents::{self, Param, Resolved};
use crate::experiment::Experiment;
use crate::io::atomic::OutputSet;
use crate::kernel::tangents::{render_tangents_with, FGradient, TangentImages};
use crate::run::config::{resolve_out, Config, LossKind};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

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

/// Refuse, before rendering, what this run cannot differentiate (see [`tangents::check`]) and loss
/// outputs without their inputs.
pub fn check(cfg: &Config, inputs: &Inputs) -> Result<()> {
    tangents::check(&cfg.params, inputs, &cfg.output.gradients)?;
    let l = &cfg.output.loss;
    if l.observed.is_none() {
        for (flag, p) in [("--loss-out", &l.loss_out), ("--dfhkl-out", &l.dfhkl_out)] {
            if p.is_some() {
                return Err(Error::flag(flag, "needs --observed IMAGE (the measured image the loss compares with)"));
            }
        }
    }
    if l.dfhkl_out.is_some() {
        if cfg.params.hkl_file.is_none() {
            return Err(Error::flag("--dfhkl-out", "needs -hkl FILE: it writes dL/dF for each of the file's reflections"));
        }
        if cfg.params.shape == crate::experiment::params::CrystalShape::Tophat {
            return Err(Error::flag("--dfhkl-out", "-tophat_spots is a step function of h, k, l; use another spot shape"));
        }
    }
    Ok(())
}

/// The derivative images by `names` (and, given per-pixel weights dL/dμ, Σ w·dμ/dF per grid cell),
/// with the run's backend and precision (`kernel::tangents::render_tangents_with`).
pub fn derivative_images(cfg: &Config, inputs: &Inputs, exp: &Experiment, names: &[Param], fgrad: Option<&mut FGradient>) -> Result<TangentImages> {
    let t = tangents::tangents(&cfg.params, inputs, exp, names)?;
    Ok(render_tangents_with(exp, &Resolved::of(exp), &t, fgrad, &cfg.run.render_options()))
}

/// The fused plan: where the lane pass (`kernel::tangent_lanes`) takes every parameter of `names` in a
/// double-precision run on a SIMD backend, it renders the image in the same pass as the derivative
/// images (the "in the same kernel pass as the image"): (the image, the derivative images).
/// Its image is the SIMD kernel's to about 1e-13 relative (the same samples, summed per orientation
/// instead of per source; `tests/gradients.rs`), so the float file matches the forward run's to the
/// last f32 bit nearly everywhere. `None` where the plan does not fuse (the caller renders the image with
/// the usual kernel, then the derivatives).
pub fn fused_render(cfg: &Config, inputs: &Inputs, exp: &Experiment, names: &[Param]) -> Result<Option<(crate::kernel::RenderOutput, TangentImages)>> {
    use crate::kernel::{tangent_lanes, Backend};
    let opts = cfg.run.render_options();
    let level = match crate::kernel::kernel_for(exp, opts.backend) {
        Backend::Simd(level) if tangent_lanes::supports(exp) => level,
        _ => return Ok(None),
    };
    if names.is_empty() || opts.precision != crate::experiment::params::Precision::Double {
        return Ok(None);
    }
    tangents::check(&cfg.params, inputs, names)?;
    let t = tangents::tangents(&cfg.params, inputs, exp, names)?;
    if !t.iter().all(tangent_lanes::takes) {
        return Ok(None);
    }
    let refs: Vec<&Resolved> = t.iter().collect();
    let (value, grads) = tangent_lanes::render_lanes(exp, &refs, level, opts.precision);
    #[cfg(feature = "check-kernels")]
    crate::kernel::tangents::check_tangents(exp, &Resolved::of(exp), &refs, level, opts.precision, &grads);
    let float = value.iter().map(|&v| v as f32).collect();
    let r = crate::kernel::RenderOutput { float, omega_sum: tangent_lanes::omega_sum(exp), interp_oob: None };
    Ok(Some((r, TangentImages { value, grads })))
}

/// What `--gradients`/`--observed` produced: the files (under temporary names, renamed with the
/// images) and the lines to print.
pub struct DerivativeOutputs {
    pub files: OutputSet,
    pub lines: Vec<String>,
}

/// The derivative images, the loss and its gradients of a rendered run (`float` = the float image
/// with `-add_float`; `rendered`: the derivative images of `--gradients` where [`fused_render`]
/// made them with the image). Nothing is done when neither `--gradients` nor `--observed` was given.
pub fn derivative_outputs(cfg: &Config, inputs: &Inputs, exp: &Experiment, float: &[f32], rendered: Option<TangentImages>) -> Result<DerivativeOutputs> {
    let mut out = DerivativeOutputs { files: OutputSet::default(), lines: Vec::new() };
    let paths = gradient_paths(cfg);
    let l = &cfg.output.loss;
    let observed = match &l.observed {
        Some(p) => Some((read_observed(p, exp, cfg.output.adc_offset, cfg.output.counts_offset())?, p)),
        None if paths.is_empty() => return Ok(out),
        None => None,
    };
    let loss = observed.as_ref().map(|(y, p)| loss_and_weights(l.kind, float, y, exp, p)).transpose()?;
    let names: Vec<Param> = paths.iter().map(|p| p.0).collect();
    let mut fgrad = match (&loss, &l.dfhkl_out) {
        (Some((_, w)), Some(_)) => Some(FGradient { weights: w, grid_grad: Vec::new() }),
        _ => None,
    };
    let images = match rendered {
        Some(t) if fgrad.is_none() => Some(t),
        _ if names.is_empty() && fgrad.is_none() => None,
        _ => Some(derivative_images(cfg, inputs, exp, &names, fgrad.as_mut())?),
    };
    if let Some(images) = &images {
        for ((n, path), img) in paths.iter().zip(&images.grads) {
            let f32s: Vec<f32> = img.iter().map(|&v| v as f32).collect();
            out.files.add(path, |f| crate::io::write_le(f, &f32s))?;
            out.lines.push(format!("writing {} as {} 4-byte floats (d image / d {} per {})", path.display(), f32s.len(), n.name(), n.unit()));
        }
    }
    if let Some((value, w)) = &loss {
        let grads: Vec<(Param, f64)> = match &images {
            Some(im) => names.iter().zip(&im.grads).map(|(&n, g)| (n, g.iter().zip(w.iter()).map(|(a, b)| a * b).sum())).collect(),
            None => Vec::new(),
        };
        out.lines.push(format!("loss ({}) = {value:e}", l.kind.name()));
        for (n, g) in &grads {
            out.lines.push(format!("  dL/d{} = {g:e} per {}", n.name(), n.unit()));
        }
        if let Some(p) = &l.loss_out {
            let grad: serde_json::Map<String, serde_json::Value> = grads.iter().map(|(n, g)| (n.name().to_string(), serde_json::json!(g))).collect();
            let j = serde_json::json!({"loss": l.kind.name(), "value": value, "gradient": grad});
            let text = serde_json::to_string_pretty(&j).map_err(|e| Error::flag("--loss-out", e.to_string()))? + "\n";
            out.files.add_bytes(&resolve_out(cfg, p), text.as_bytes())?;
            out.lines.push(format!("writing {} (the loss and its gradient, JSON)", resolve_out(cfg, p).display()));
        }
    }
    if let (Some(p), Some(f), Some(hkl)) = (&l.dfhkl_out, &fgrad, &inputs.hkl_entries) {
        let text = dfhkl_text(hkl, exp, &f.grid_grad)?;
        out.files.add_bytes(&resolve_out(cfg, p), text.as_bytes())?;
        out.lines.push(format!("writing {} (h k l dL/dF)", resolve_out(cfg, p).display()));
    }
    Ok(out)
}

/// `h k l dL/dF` for every reflection of the `-hkl` file in file order.
fn dfhkl_text(hkl: &[(i32, i32, i32, f64)], exp: &Experiment, grid_grad: &[f64]) -> Result<String> {
    let mut text = String::new();
    for (h, k, l, d) in dfhkl_entries(hkl, exp, grid_grad)? {
        text.push_str(&format!("{h} {k} {l} {d:e}\n"));
    }
    Ok(text)
}

/// (h, k, l, dL/dF) for every reflection of the `-hkl` file in file order (`entries`, as read with the
/// grid: [`Inputs::hkl_entries`]); a reflection listed again later is overwritten in the grid
/// (nanoBragg.c L2180), so only its last line carries the derivative.
pub fn dfhkl_entries(entries: &[(i32, i32, i32, f64)], exp: &Experiment, grid_grad: &[f64]) -> Result<Vec<(i32, i32, i32, f64)>> {
    let g = exp.structure_factors.fhkl.as_ref().ok_or_else(|| Error::flag("--dfhkl-out", "no structure-factor grid"))?;
    let mut last = std::collections::HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        last.insert((e.0, e.1, e.2), i);
    }
    Ok(entries
        .iter()
        .enumerate()
        .map(|(i, &(h, k, l, _))| {
            let cell = g.index(h - g.h_min, k - g.k_min, l - g.l_min);
            (h, k, l, if last[&(h, k, l)] == i { grid_grad.get(cell).copied().unwrap_or(0.0) } else { 0.0 })
        })
        .collect())
}

/// The loss of `float` (the image with `-add_float`) against `y`, its gradient by `names` and, when
/// the run reads `-hkl`, dL/dF per reflection in file order (the library form of `--observed`).
pub struct LossGradient {
    pub value: f64,
    pub grads: Vec<(Param, f64)>,
    pub dfhkl: Vec<(i32, i32, i32, f64)>,
}

#[allow(clippy::too_many_arguments)]
pub fn loss_gradient(cfg: &Config, inputs: &Inputs, exp: &Experiment, float: &[f32], y: &[f64], kind: LossKind, names: &[Param], label: &Path) -> Result<LossGradient> {
    tangents::check(&cfg.params, inputs, names)?;
    // as read_observed refuses from a file (a NaN pixel made the loss and every derivative NaN)
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        return Err(Error::file(label, format!("observed pixel {i} is not finite")));
    }
    let (value, w) = loss_and_weights(kind, float, y, exp, label)?;
    // the reflections read with the grid (a file read again here could be another list by now)
    let hkl = inputs.hkl_entries.as_ref().filter(|_| cfg.params.shape != crate::experiment::params::CrystalShape::Tophat);
    let mut fgrad = hkl.map(|_| FGradient { weights: &w, grid_grad: Vec::new() });
    let images = derivative_images(cfg, inputs, exp, names, fgrad.as_mut())?;
    let grads = names.iter().zip(&images.grads).map(|(&n, g)| (n, g.iter().zip(&w).map(|(a, b)| a * b).sum())).collect();
    let dfhkl = match (hkl, &fgrad) {
        (Some(h), Some(f)) => dfhkl_entries(h, exp, &f.grid_grad)?,
        _ => Vec::new(),
    };
    Ok(LossGradient { value, grads, dfhkl })
}

/// The observed image as photons per pixel: a raw float file, an SMV image (pixels less `adc`, the
/// offset the noise image adds), a byte-offset CBF or the first frame of a NeXus file's
/// `/entry/data/data` (counts less `counts_adc`, the offset `-cbffile`/`-nexusfile` add: `-adc` where
/// it is given, else 0); it must have the detector's size.
pub fn read_observed(path: &Path, exp: &Experiment, adc: f64, counts_adc: f64) -> Result<Vec<f64>> {
    let head = {
        use std::io::Read;
        let mut b = [0u8; 16];
        let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut b)).map_err(|e| Error::read(path, "--observed: cannot read", e))?;
        b[..n].to_vec()
    };
    let (w, h, y): (usize, usize, Vec<f64>) = if head.starts_with(b"{\nHEADER_BYTES") || head.starts_with(b"{\r\nHEADER_BYTES") {
        let s = crate::io::smv::read_smv(path)?;
        (s.width, s.height, s.data.iter().map(|&v| v as f64 - adc).collect())
    } else if head.starts_with(b"###CBF") {
        // less the offset -cbffile adds when -adc is given (`counts_adc`, 0 otherwise)
        let (w, h, d) = crate::io::cbf::read_cbf(path)?;
        (w, h, d.iter().map(|&v| v as f64 - counts_adc).collect())
    } else if head.starts_with(b"\x89HDF") {
        // a NeXus/NXmx file as -nexusfile writes it: the first frame of /entry/data/data, counts as
        // they are (as a CBF's)
        let (h, w, d, _) = crate::io::hdf5::read_frame_f64(path, "/entry/data/data", 0).map_err(|e| Error::file(path, format!("--observed: {e}")))?;
        (w, h, d.into_iter().map(|v| v - counts_adc).collect())
    } else {
        let f = crate::io::float::read_float_image(path)?;
        (exp.det.fpixels(), if exp.det.fpixels() == 0 { 0 } else { f.len() / exp.det.fpixels() }, f.iter().map(|&v| v as f64).collect())
    };
    if w * h != exp.pixels() || y.len() != exp.pixels() || w != exp.det.fpixels() {
        return Err(Error::file(path, format!("--observed: {} pixels ({w} x {h}), the detector has {} x {}", y.len(), exp.det.fpixels(), exp.det.rows())));
    }
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        return Err(Error::file(path, format!("--observed: pixel {i} is not finite")));
    }
    Ok(y)
}

/// The loss over the unmasked pixels of the ROI and its weights dL/dμ (0 elsewhere).
pub fn loss_and_weights(kind: LossKind, mu: &[f32], y: &[f64], exp: &Experiment, path: &Path) -> Result<(f64, Vec<f64>)> {
    let mut w = vec![0.0; mu.len()];
    let mut value = 0.0;
    let mut first = 0;
    for p in &exp.det.panels {
        let roi: &Roi = &p.roi;
        for s in 0..p.spixels {
            for f in 0..p.fpixels {
                let i = first + s * p.fpixels + f;
                if !roi.contains(f, s) || p.mask.as_ref().is_some_and(|m| m[s * p.fpixels + f] == 0) {
                    continue;
                }
                let (m, y) = (mu[i] as f64, y[i]);
                match kind {
                    LossKind::Lsq => {
                        value += 0.5 * (m - y) * (m - y);
                        w[i] = m - y;
                    }
                    LossKind::Poisson if y < 0.0 => {
                        return Err(Error::file(path, format!("--loss poisson: pixel ({f}, {s}) is observed as {y}, below 0 counts (a detector's gap or bad-pixel flag?): mask it (-mask, -roi) or use --loss lsq")));
                    }
                    LossKind::Poisson if m > 0.0 => {
                        value += m - y * m.ln();
                        w[i] = 1.0 - y / m;
                    }
                    LossKind::Poisson if y == 0.0 => {}
                    LossKind::Poisson => {
                        return Err(Error::file(path, format!("--loss poisson: pixel ({f}, {s}) is observed as {y} where the model has {m} photons (ln 0); use --loss lsq, a background (-water) or a -mask")));
                    }
                }
            }
        }
        first += p.fpixels * p.spixels;
    }
    Ok((value, w))
}
