//! `refine`: fit parameters of a simulation to a measured image by Levenberg–Marquardt on the
//! derivative images (`kernel::tangents`), with the Fisher information as the curvature: Σ J Jᵀ/μ for
//! the Poisson loss (its expected Hessian), Σ J Jᵀ for least squares. The damping is scaled by the
//! diagonal (Marquardt), so parameters in different units (degrees, Å, mm, unit cells) need no
//! hand-set scales.
//!
//! Our own small LM loop rather than the `argmin` crate: argmin has no Levenberg–Marquardt, its
//! Gauss–Newton solvers want residual vectors (the Poisson loss has none without a square-root
//! transform), and the step here is a K×K solve (K ≤ 21) on sums the derivative pass already gives;
//! L-BFGS would need many more image renders than LM on this curvature.

use crate::experiment::inputs::Inputs;
use crate::experiment::tangents::{self, Param, Resolved};
use crate::experiment::params::Params;
use crate::experiment::Experiment;
use crate::kernel::tangents::render_tangents;
use crate::run::config::{Config, LossKind};
use crate::run::gradients::{loss_and_weights, read_observed};
use crate::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What `refine` is asked for besides the simulation's flags.
#[derive(Clone, Debug)]
pub struct RefineOptions {
    pub names: Vec<Param>,
    /// `--params-out`: the refined run as a `--params` file.
    pub params_out: PathBuf,
    /// `--refined-out`: `{NAME: value}` in flag units (`rot_*`: relative to the start).
    pub refined_out: Option<PathBuf>,
    pub max_iterations: usize,
}

/// How the fit ended.
#[derive(Clone, Debug)]
pub struct RefineReport {
    pub converged: bool,
    pub iterations: usize,
    pub loss: f64,
    /// Final values in flag units (`rot_*` relative to the start).
    pub values: Vec<(Param, f64)>,
    pub message: String,
}

/// One evaluated model: its experiment, loss and per-pixel dL/dμ and curvature weights.
struct Model {
    exp: Experiment,
    loss: f64,
    weights: Vec<f64>,
    curvature: Vec<f64>,
}

/// The measured image a fit compares with: the `--observed` file (read for the detector of the run),
/// or photons per pixel already in memory (the detector's layout) with the name its errors give.
pub enum Observed {
    File(PathBuf),
    Pixels { y: Vec<f64>, label: PathBuf },
}

/// Refine `opts.names` of `cfg` against `cfg.output.loss.observed`; progress lines go to `out`.
pub fn refine(cfg: &Config, opts: &RefineOptions, out: &mut dyn Write) -> Result<RefineReport> {
    let obs_path = cfg.output.loss.observed.clone().ok_or_else(|| Error::flag("--observed", "refine needs the measured image: --observed IMAGE"))?;
    // before the inputs are read (a large model takes a while): a mistyped name is said at once;
    // `refine_loaded` checks again for the library callers that start there
    check_names(&opts.names)?;
    check_outputs(cfg, opts)?;
    let inputs = crate::run::load::load_inputs(cfg)?;
    let exp0 = Experiment::build(&cfg.params, &inputs)?;
    let (report, params) = refine_loaded(cfg, &inputs, &exp0, Observed::File(obs_path), &opts.names, opts.max_iterations, out)?;
    write_results(cfg, &params, opts, &report)?;
    Ok(report)
}

/// Refuse an empty `--refine` list, and a name twice (it made two columns of the normal equations
/// equal: a singular curvature).
fn check_names(names: &[Param]) -> Result<()> {
    if names.is_empty() {
        return Err(Error::flag("--refine", format!("name the parameters to refine (valid: {})", Param::names())));
    }
    if let Some((_, n)) = names.iter().enumerate().find(|&(i, n)| names[..i].contains(n)) {
        return Err(Error::flag("--refine", format!("'{}' is named twice", n.name())));
    }
    Ok(())
}

/// The fit of [`refine`] on what a caller already loaded: `inputs` read for `cfg` and the experiment
/// `exp0` built from them (a library caller's simulation fits the structure factors and files it was
/// built with, never the files read again by path). Returns the report and the refined parameters;
/// nothing is written.
pub fn refine_loaded(cfg: &Config, inputs: &Inputs, exp0: &Experiment, observed: Observed, names: &[Param], max_iterations: usize, out: &mut dyn Write) -> Result<(RefineReport, Params)> {
    check_names(names)?;
    // what cannot be differentiated cannot be refined: named as the --refine list's
    tangents::check(&cfg.params, inputs, names).map_err(|e| match e {
        Error::Flag { flag, reason } if flag == "--gradients" => Error::flag("--refine", reason),
        e => e,
    })?;
    let (y, obs_path) = match observed {
        Observed::File(p) => (read_observed(&p, exp0, cfg.output.adc_offset, cfg.output.counts_offset())?, p),
        Observed::Pixels { y, label } => {
            if y.len() != exp0.pixels() {
                return Err(Error::file(&label, format!("{} pixels, the detector has {}", y.len(), exp0.pixels())));
            }
            if let Some(i) = y.iter().position(|v| !v.is_finite()) {
                return Err(Error::file(&label, format!("pixel {i} is not finite")));
            }
            (y, label)
        }
    };
    fit(cfg, inputs, exp0, &y, &obs_path, names, max_iterations, out)
}

/// The Levenberg–Marquardt loop of [`refine`] from the start `cfg` and `exp0` against `y`.
#[allow(clippy::too_many_arguments)]
fn fit(cfg: &Config, inputs: &Inputs, exp0: &Experiment, y: &[f64], obs_path: &Path, names: &[Param], max_iterations: usize, out: &mut dyn Write) -> Result<(RefineReport, Params)> {
    let mut params = tangents::frozen(&cfg.params, inputs, exp0);
    let start: Vec<f64> = names.iter().map(|n| n.value(&params)).collect();
    let eval = |p: &Params| evaluate(cfg, p, inputs, y, obs_path);
    let mut model = eval(&params)?;
    let mut lambda = 1e-3;
    let mut report = RefineReport { converged: false, iterations: 0, loss: model.loss, values: Vec::new(), message: String::new() };
    let _ = writeln!(out, "refine: start: L = {:.10e}  {}", model.loss, describe(names, &start, &params));
    check_fit_is_determined(&model, names)?;
    for it in 1..=max_iterations {
        report.iterations = it;
        let (g, h) = normal_equations(&params, inputs, &model, names)?;
        if it == 1 {
            check_every_parameter_moves_the_image(&h, names, &params, inputs)?;
        }
        let sigma2 = match cfg.output.loss.kind {
            LossKind::Poisson => 1.0,
            LossKind::Lsq => (2.0 * model.loss / y.len().max(1) as f64).max(1e-300),
        };
        let mut accepted = false;
        while lambda < 1e12 {
            let delta = solve_damped(&h, &g, lambda);
            let trial = step(&params, names, &delta);
            match eval(&trial) {
                Ok(m) if m.loss < model.loss => {
                    let moved: f64 = (0..delta.len()).map(|i| (0..delta.len()).map(|j| delta[i] * h[i][j] * delta[j]).sum::<f64>()).sum();
                    params = trial;
                    model = m;
                    lambda = (lambda / 3.0).max(1e-9);
                    accepted = true;
                    let _ = writeln!(out, "refine: iteration {it}: L = {:.10e}  damping {lambda:.1e}  {}", model.loss, describe(names, &start, &params));
                    if moved < 1e-6 * sigma2 || exact(cfg.output.loss.kind, model.loss, report.loss) {
                        report.converged = true;
                    }
                    break;
                }
                _ => lambda *= 4.0,
            }
        }
        if !accepted {
            // this iteration moved nothing: the ones that did are counted
            report.iterations = it - 1;
            // no step lowers the loss: a minimum, if the gradient is negligible on the curvature's scale
            let predicted: f64 = g.iter().enumerate().map(|(i, gi)| gi * gi / h[i][i].max(1e-300)).sum();
            report.converged = predicted < 1e-4 * sigma2 || exact(cfg.output.loss.kind, model.loss, report.loss);
            break;
        }
        if report.converged {
            break;
        }
    }
    report.loss = model.loss;
    report.values = reported_values(names, &start, &params);
    report.message = if report.converged {
        format!("converged after {} iterations: L = {:.10e}", report.iterations, report.loss)
    } else {
        format!("did not converge in {} iterations (L = {:.10e}); the fit so far is written", report.iterations, report.loss)
    };
    Ok((report, params))
}

/// Refuse a fit with fewer observed pixels (in the ROI, unmasked) than parameters: any values fit
/// them, and the fit "converged" wherever it stopped.
fn check_fit_is_determined(m: &Model, names: &[Param]) -> Result<()> {
    let pixels = m.exp.det.panels.iter().map(|p| fitted_pixels(p)).sum::<usize>();
    if pixels < names.len() {
        return Err(Error::flag("--refine", format!("{} parameters cannot be fitted to {pixels} observed pixels (the -roi and -mask leave them)", names.len())));
    }
    Ok(())
}

/// The pixels of `p` the loss sums over: inside the ROI and not masked (as `loss_and_weights`).
fn fitted_pixels(p: &crate::experiment::detector::Panel) -> usize {
    (0..p.spixels).flat_map(|s| (0..p.fpixels).map(move |f| (f, s))).filter(|&(f, s)| p.roi.contains(f, s) && p.mask.as_ref().is_none_or(|m| m[s * p.fpixels + f] != 0)).count()
}

/// Refuse a parameter whose derivative image is 0 at its start value (`-N 1`, whose lattice factor
/// is flat in N there, `-mosaic 0`, `fluence` set by `-flux`, `lambda` with a `-mat` file): the
/// gradient is 0, and the fit "converged" where it began.
fn check_every_parameter_moves_the_image(h: &[Vec<f64>], names: &[Param], params: &Params, inputs: &Inputs) -> Result<()> {
    match names.iter().enumerate().find(|&(i, _)| h[i][i] == 0.0) {
        Some((_, &n)) => Err(Error::flag(
            "--refine",
            format!("the image does not change with '{}' at its start value {} {} (its derivative is 0 on every fitted pixel): {}", n.name(), n.value(params), n.unit(), why_flat(n, params, inputs)),
        )),
        None => Ok(()),
    }
}

/// What makes the image flat in `n` and what to do about it, for [`check_every_parameter_moves_the_image`].
fn why_flat(n: Param, params: &Params, inputs: &Inputs) -> &'static str {
    match n {
        Param::Fluence if params.flux != 0.0 => "-flux sets the fluence (with -exposure and -beamsize); give -fluence instead of -flux to refine it",
        Param::Lambda if tangents::wavelength_cancels(params, inputs) => {
            "with a -mat file the matrix carries the wavelength (it is divided by -lambda), so the image does not depend on -lambda; to refine it, give the crystal by -cell (and -misset) instead of -mat"
        }
        Param::Distance if params.close_distance.is_some() => {
            "-close_distance (given, or a -mask/-img header's CLOSE_DISTANCE) sets the detector distance whatever -distance says (as in nanoBragg.c); give -distance without it to refine the distance"
        }
        Param::Na | Param::Nb | Param::Nc => "start it elsewhere (N above 1)",
        Param::Mosaic => "start it elsewhere (a spread above 0 and -mosaic_dom above 1)",
        _ => "start it elsewhere",
    }
}

/// Flags that set the refined values of `names` as `params` holds them, to append to the starting
/// flags (later flags win): the whole `--crystal-rot` and `-cell` when any of theirs was refined.
pub fn flag_words(names: &[Param], params: &Params) -> Vec<String> {
    use crate::base::consts::RTD;
    let mut w: Vec<String> = Vec::new();
    let f = |v: f64| format!("{v:?}");
    if names.iter().any(|&n| is_rotation(n)) {
        w.push("--crystal-rot".into());
        w.extend(params.crystal_rot.iter().map(|r| f(r * RTD)));
    }
    if let (true, Some(c)) = (names.iter().any(|n| n.is_cell()), params.cell) {
        w.push("-cell".into());
        w.extend([c.a, c.b, c.c, c.alpha * RTD, c.beta * RTD, c.gamma * RTD].map(f));
    }
    for &n in names {
        let flag = match n {
            Param::Na => "-Na",
            Param::Nb => "-Nb",
            Param::Nc => "-Nc",
            Param::Mosaic => "-mosaic",
            Param::Distance => "-distance",
            Param::Xbeam => "-Xbeam",
            Param::Ybeam => "-Ybeam",
            Param::DetectorRotx => "-detector_rotx",
            Param::DetectorRoty => "-detector_roty",
            Param::DetectorRotz => "-detector_rotz",
            Param::Lambda => "-lambda",
            Param::Fluence => "-fluence",
            _ => continue,
        };
        w.push(flag.into());
        w.push(f(n.value(params)));
    }
    w
}

/// A least-squares fit to noiseless data: the loss has fallen to rounding (below 1e-12 of the start).
fn exact(kind: LossKind, loss: f64, start: f64) -> bool {
    kind == LossKind::Lsq && loss <= 1e-12 * start
}

fn is_rotation(n: Param) -> bool {
    matches!(n, Param::RotX | Param::RotY | Param::RotZ)
}

/// The values a fit reports for `names` at `p`, in flag units: `rot_*` relative to `start` (the
/// values at the start, in `names`' order), as `--refined-out`, the progress lines and the library's
/// report all give them (`--crystal-rot` in the fit's parameters holds the whole rotation).
pub fn reported_values(names: &[Param], start: &[f64], p: &Params) -> Vec<(Param, f64)> {
    names.iter().zip(start).map(|(&n, &s)| (n, n.value(p) - if is_rotation(n) { s } else { 0.0 })).collect()
}

/// The progress lines' `NAME=value` list ([`reported_values`]: `rot_*` relative to the start).
fn describe(names: &[Param], start: &[f64], p: &Params) -> String {
    reported_values(names, start, p).iter().map(|(n, v)| format!("{}={:.8}", n.name(), v)).collect::<Vec<_>>().join(" ")
}

/// Render `p` and compare with the observation.
fn evaluate(cfg: &Config, p: &Params, inputs: &Inputs, y: &[f64], obs: &Path) -> Result<Model> {
    // a step out of the flags' ranges (N past 1e7 after one huge pixel) is no model: a rejected step
    crate::run::limits::check_values(p)?;
    let exp = Experiment::build(p, inputs)?;
    let mut r = crate::run::simulate::render(&exp, &cfg.run.render_options(), cfg.run.threads, &|_| {})?;
    for a in &cfg.params.add_float {
        crate::run::simulate::add_into(&mut r.float, a)?;
    }
    let (loss, weights) = loss_and_weights(cfg.output.loss.kind, &r.float, y, &exp, obs)?;
    let curvature = r
        .float
        .iter()
        .zip(&weights)
        .map(|(&m, &w)| match cfg.output.loss.kind {
            _ if w == 0.0 && m <= 0.0 => 0.0,
            LossKind::Poisson => 1.0 / (m as f64).max(1e-12),
            LossKind::Lsq => 1.0,
        })
        .collect();
    Ok(Model { exp, loss, weights, curvature })
}

/// The gradient Σ w·J and the curvature Σ c·J·Jᵀ from the derivative images at `params`.
fn normal_equations(params: &Params, inputs: &Inputs, m: &Model, names: &[Param]) -> Result<(Vec<f64>, Vec<Vec<f64>>)> {
    let t = tangents::tangents(params, inputs, &m.exp, names)?;
    let j = render_tangents(&m.exp, &Resolved::of(&m.exp), &t, None).grads;
    let k = names.len();
    let g: Vec<f64> = j.iter().map(|ji| ji.iter().zip(&m.weights).map(|(a, w)| a * w).sum()).collect();
    let mut h = vec![vec![0.0; k]; k];
    for a in 0..k {
        for b in a..k {
            let s: f64 = j[a].iter().zip(&j[b]).zip(&m.curvature).map(|((x, y), c)| x * y * c).sum();
            h[a][b] = s;
            h[b][a] = s;
        }
    }
    Ok((g, h))
}

/// Solve (H + λ·diag H)·δ = −g by Gaussian elimination with partial pivoting.
fn solve_damped(h: &[Vec<f64>], g: &[f64], lambda: f64) -> Vec<f64> {
    let k = g.len();
    let mut a: Vec<Vec<f64>> = (0..k)
        .map(|i| {
            let mut row: Vec<f64> = (0..k).map(|j| h[i][j] + if i == j { lambda * h[i][i].max(1e-300) } else { 0.0 }).collect();
            row.push(-g[i]);
            row
        })
        .collect();
    for c in 0..k {
        let p = (c..k).max_by(|&x, &y| a[x][c].abs().total_cmp(&a[y][c].abs())).unwrap_or(c);
        a.swap(c, p);
        if a[c][c] == 0.0 {
            continue;
        }
        for r in c + 1..k {
            let f = a[r][c] / a[c][c];
            for j in c..=k {
                a[r][j] -= f * a[c][j];
            }
        }
    }
    let mut x = vec![0.0; k];
    for c in (0..k).rev() {
        let s: f64 = (c + 1..k).map(|j| a[c][j] * x[j]).sum();
        x[c] = if a[c][c] == 0.0 { 0.0 } else { (a[c][k] - s) / a[c][c] };
    }
    x
}

/// `params` moved by `delta`, each value kept where the physics allows it (N ≥ 1, positive lengths,
/// wavelength and fluence, angles of a cell inside (0°, 180°), a non-negative mosaic spread).
fn step(params: &Params, names: &[Param], delta: &[f64]) -> Params {
    let mut p = params.clone();
    for (&n, &d) in names.iter().zip(delta) {
        let v0 = n.value(params);
        let mut v = v0 + d;
        let (lo, hi) = match n {
            Param::Na | Param::Nb | Param::Nc => (1.0, f64::INFINITY),
            Param::A | Param::B | Param::C | Param::Lambda | Param::Fluence | Param::Distance => (0.0, f64::INFINITY),
            Param::Alpha | Param::Beta | Param::Gamma => (0.0, 180.0),
            Param::Mosaic => (0.0, 90.0),
            _ => (f64::NEG_INFINITY, f64::INFINITY),
        };
        if v <= lo || v >= hi {
            // go half of the way to the bound
            v = v0 + 0.5 * (if v <= lo { lo } else { hi } - v0);
        }
        n.set(&mut p, v);
    }
    p
}

/// Refuse, before the fit, a `--params-out`/`--refined-out` that names one of the run's inputs
/// (the observed image, -hkl, -mat, ...) or the other output, by any spelling or link, or that cannot
/// be written (a directory, a missing directory): the fit may take minutes, and its result must not
/// replace what it was fitted to.
fn check_outputs(cfg: &Config, opts: &RefineOptions) -> Result<()> {
    let mut outputs = vec![("--params-out", opts.params_out.clone())];
    if let Some(p) = &opts.refined_out {
        outputs.push(("--refined-out", p.clone()));
    }
    for (_, p) in &outputs {
        crate::io::atomic::target_kind(p)?;
    }
    crate::io::atomic::check_no_clobber(&crate::run::outputs::input_files(cfg), &outputs)
}

/// `--params-out` (the refined run, loadable with `simulate --params`) and `--refined-out`.
fn write_results(cfg: &Config, params: &Params, opts: &RefineOptions, report: &RefineReport) -> Result<()> {
    let mut fit = cfg.clone();
    fit.params = params.clone();
    fit.output.loss = Default::default();
    fit.output.gradients.clear();
    fit.run.save_params = None;
    fit.run.params_file = None;
    let mut set = crate::io::atomic::OutputSet::default();
    set.add_bytes(&opts.params_out, (fit.to_json() + "\n").as_bytes())?;
    if let Some(p) = &opts.refined_out {
        let m: serde_json::Map<String, serde_json::Value> = report.values.iter().map(|(n, v)| (n.name().to_string(), serde_json::json!(v))).collect();
        let text = serde_json::to_string_pretty(&serde_json::Value::Object(m)).map_err(|e| Error::flag("--refined-out", e.to_string()))? + "\n";
        set.add_bytes(p, text.as_bytes())?;
    }
    set.commit()
}
