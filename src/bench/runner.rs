//! Running a [`Plan`]: for each size, the C reference (whole process), our fresh process (cold phase
//! split and whole-process wall time) and our in-process warm runs, interleaved C, ours, ours-warm,
//! C, … so drift and thermal changes hit every contender alike; then the images are compared.

use super::gate::{evaluate, GateOptions};
use super::machine::{simd_lanes_f32, MachineInfo};
use super::measure::{self, Phases, ProcessRun, WorkDir};
use super::plan::{self, ConfigKind, Plan};
use super::schema::*;
use super::stats::Stats;
use crate::config::Precision;
use anyhow::{anyhow, bail, Context};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A cold render shorter than this many ticks of the child's printed resolution is too short to time.
pub const MIN_RELIABLE_TICKS: f64 = 10.0;

/// A cold run counts as faster than the warm runs only beyond this factor (and the child's resolution).
pub const COLD_FASTER_MARGIN: f64 = 1.1;

/// Sum ratios further than this from 1 are reported.
pub const SUM_RATIO_TOLERANCE: f64 = 1e-3;

/// Progress callbacks (the binary drives an indicatif bar with them; tests pass a no-op).
pub trait Progress {
    fn start(&self, _total_steps: u64) {}
    fn step(&self, _msg: &str) {}
    fn println(&self, _line: &str) {}
    fn finish(&self) {}
}

/// A [`Progress`] that shows nothing.
pub struct Silent;
impl Progress for Silent {}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => finite(a / b),
        _ => None,
    }
}

fn max_opt(v: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    v.into_iter().flatten().fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
}

/// Run the whole plan and write the reports into `plan.out_dir`. Returns the report (its gate says
/// whether the gate passed).
pub fn run(plan: &Plan, gate_opts: &GateOptions, progress: &dyn Progress) -> anyhow::Result<Report> {
    if plan.iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    if !plan.rust_binary.is_file() {
        bail!(
            "cannot find our simulator at {} (build it with `cargo build --release`, or pass --rust-binary PATH)",
            plan.rust_binary.display()
        );
    }
    if let Some(c) = &plan.c_binary {
        if c.is_dir() {
            bail!("the C reference {} is a directory, not a program (from --c-binary or NB_C_BIN)", c.display());
        }
        if !c.is_file() {
            bail!("the C reference {} does not exist (from --c-binary or NB_C_BIN)", c.display());
        }
    }
    // A failed run leaves no --out folder behind that it created itself.
    let created = !plan.out_dir.exists();
    std::fs::create_dir_all(&plan.out_dir).with_context(|| format!("cannot create {}", plan.out_dir.display()))?;
    let result = std::fs::canonicalize(&plan.out_dir)
        .with_context(|| format!("cannot resolve {}", plan.out_dir.display()))
        .and_then(|out_dir| run_into(plan, gate_opts, progress, &out_dir));
    if result.is_err() && created {
        let _ = std::fs::remove_dir_all(&plan.out_dir);
    }
    result
}

fn run_into(plan: &Plan, gate_opts: &GateOptions, progress: &dyn Progress, out_dir: &Path) -> anyhow::Result<Report> {
    let out_dir = out_dir.to_path_buf();

    let machine = MachineInfo::detect();
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    match &plan.c_binary {
        None => notes.push(
            "No C comparison was made: no C reference binary was given (--c-binary PATH or NB_C_BIN). \
             C times, correlation, sum ratio and speedups are null."
                .to_string(),
        ),
        Some(c) => notes.push(format!("C reference: {} (whole process, alternated with our runs)", c.display())),
    }
    if plan.single_precision && plan.c_binary.is_some() {
        notes.push("Our runs use single precision; the C reference is double precision.".into());
    }

    let hkl = if plan.kind == ConfigKind::Heavy {
        let p = out_dir.join(plan::HEAVY_HKL_NAME);
        plan::write_heavy_hkl(&p).with_context(|| format!("cannot write {}", p.display()))?;
        notes.push(format!("heavy: synthetic P1 HKL file {} (h,k,l in ±{})", p.display(), plan::HEAVY_HKL_RANGE));
        Some(p)
    } else {
        None
    };

    let mut work = WorkDir::new("nanobragg-bench")?;
    work.keep = plan.keep_work;
    if plan.keep_work {
        notes.push(format!("scratch directory kept: {}", work.path.display()));
    }
    let (c_dir, rust_dir, warm_dir) = (work.path.join("c"), work.path.join("rust"), work.path.join("warm"));
    for d in [&c_dir, &rust_dir, &warm_dir] {
        std::fs::create_dir_all(d)?;
    }

    progress.println("measuring this machine's floating-point peak per SIMD level and its write bandwidth…");
    let limits = super::roofline::measure(&work.path);
    let runs_per_size = (plan.warmup + plan.iterations) as u64 * if plan.c_binary.is_some() { 3 } else { 2 };
    progress.start(runs_per_size * plan.sizes.len() as u64);

    let mut entries = Vec::new();
    for &size in &plan.sizes {
        let e = run_size(plan, size, hkl.as_deref(), &machine, &limits, &c_dir, &rust_dir, &warm_dir, progress)?;
        progress.println(&format!("size {size}: {}", super::report::entry_one_line(&e)));
        entries.push(e);
    }
    progress.finish();

    if !measure::reset_self_peak_rss() {
        warnings.push("cannot reset the peak RSS (/proc/self/clear_refs): the warm peak RSS is this process's maximum so far".into());
    }

    let gate = evaluate(&entries, plan.c_binary.is_some(), gate_opts);
    let report = Report {
        schema: SCHEMA.to_string(),
        created_utc: plan::utc_timestamp(),
        machine,
        config: RunConfig {
            name: plan.kind.name().to_string(),
            args: plan.recorded_args(),
            sizes: plan.sizes.clone(),
            warmup: plan.warmup,
            iterations: plan.iterations,
            threads: plan.threads,
            precision: if plan.single_precision { "single" } else { "double" }.to_string(),
            c_binary: plan.c_binary.as_ref().map(|p| p.display().to_string()),
            rust_binary: plan.rust_binary.display().to_string(),
        },
        entries,
        limits: Some(limits),
        gate,
        notes,
        warnings,
    };
    super::report::write_all(&report, &out_dir)?;
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn run_size(
    plan: &Plan,
    size: usize,
    hkl: Option<&Path>,
    machine: &MachineInfo,
    limits: &super::roofline::MachineLimits,
    c_dir: &Path,
    rust_dir: &Path,
    warm_dir: &Path,
    progress: &dyn Progress,
) -> anyhow::Result<Entry> {
    let base = plan.base_args(size, hkl);
    let mut warnings = Vec::new();

    // ---------------------------------------------------------------- warm configuration (parsed once)
    let mut warm_args = base.clone();
    warm_args.extend(plan::warm_output_args());
    let mut cfg = crate::cli::flags::parse_simulate_args(&warm_args).map_err(|e| anyhow!("size {size}: bad arguments: {e}"))?;
    cfg.output.out_dir = Some(warm_dir.to_path_buf());
    cfg.run.threads = plan.threads;
    cfg.run.precision = if plan.single_precision { Precision::Single } else { Precision::Double };
    cfg.run.progress = false;
    cfg.run.quiet = true;

    // ---------------------------------------------------------------- process arguments
    let mut c_args = base.clone();
    c_args.extend(plan::c_output_args());
    let mut rust_args = vec!["simulate".to_string()];
    rust_args.extend(base.iter().cloned());
    rust_args.extend(plan::rust_output_args());
    if let Some(t) = plan.threads {
        rust_args.extend(["--threads".to_string(), t.to_string()]);
    }
    rust_args.extend(["--precision".to_string(), if plan.single_precision { "single" } else { "double" }.to_string()]);
    let c_env: Vec<(String, String)> = plan.threads.map(|t| vec![("OMP_NUM_THREADS".to_string(), t.to_string())]).unwrap_or_default();

    let c_float = c_dir.join("c.bin");
    let rust_float = rust_dir.join("rust.bin");
    let mut c_runs: Vec<ProcessRun> = Vec::new();
    let mut rust_runs: Vec<ProcessRun> = Vec::new();
    let mut cold: Vec<Phases> = Vec::new();
    let mut warm: Vec<Phases> = Vec::new();
    let mut geometry: Option<(usize, usize, usize, usize, usize, i64, &'static str)> = None;
    let mut work: Option<super::roofline::Work> = None;
    let total = plan.warmup + plan.iterations;
    let mut child_resolution = 0.0f64;

    for i in 0..total {
        let is_warmup = i < plan.warmup;
        let tag = if is_warmup {
            format!("warmup {}/{}", i + 1, plan.warmup)
        } else {
            format!("run {}/{}", i + 1 - plan.warmup, plan.iterations)
        };

        // ------------------------------------------------------------ A: the C reference
        if let Some(cbin) = &plan.c_binary {
            progress.step(&format!("{size}: C {tag}"));
            // Untimed: remove the previous run's outputs, so no run pays for truncating or replacing
            // the last one's files (a cost of the benchmark loop, not of either program).
            let _ = std::fs::remove_file(&c_float);
            let _ = std::fs::remove_file(c_dir.join("c.img"));
            let r = measure::run_child(cbin, &c_args, c_dir, &c_env).with_context(|| format!("cannot run {}", cbin.display()))?;
            let mut run = ProcessRun::finished(i, is_warmup, &r);
            if r.exit_code != Some(0) {
                run.ok = false;
                run.error = Some(format!(
                    "{}; stderr: {}",
                    match (r.exit_code, r.signal) {
                        (Some(c), _) => format!("exit code {c}"),
                        (None, Some(s)) => format!("killed by signal {s}"),
                        _ => "abnormal exit".into(),
                    },
                    measure::tail_lines(&r.stderr, 3)
                ));
            } else {
                let want = size * size * 4;
                match std::fs::metadata(&c_float) {
                    Ok(m) if m.len() as usize == want => {}
                    Ok(m) => {
                        run.ok = false;
                        run.error = Some(format!("float image has {} bytes, expected {want}", m.len()));
                    }
                    Err(_) => {
                        run.ok = false;
                        run.error = Some("wrote no float image (-floatfile c.bin)".into());
                    }
                }
            }
            c_runs.push(run);
        }

        // ------------------------------------------------------------ B: our fresh process (cold)
        progress.step(&format!("{size}: Rust process {tag}"));
        let _ = std::fs::remove_file(&rust_float);
        let _ = std::fs::remove_file(rust_dir.join("rust.img"));
        let r = measure::run_child(&plan.rust_binary, &rust_args, rust_dir, &[])
            .with_context(|| format!("cannot run {}", plan.rust_binary.display()))?;
        if r.exit_code != Some(0) {
            bail!(
                "size {size}: `{} {}` failed ({:?}): {}",
                plan.rust_binary.display(),
                rust_args.join(" "),
                r.exit_code,
                measure::tail_lines(&r.stderr, 5)
            );
        }
        let done = measure::parse_done_line(&r.stderr)
            .ok_or_else(|| anyhow!("size {size}: our simulator printed no `done: … setup X s, render Y s, output Z s` line on stderr"))?;
        child_resolution = child_resolution.max(done.resolution_s);
        cold.push(Phases {
            index: i,
            warmup: is_warmup,
            setup_s: done.setup_s,
            render_s: done.render_s,
            io_s: done.io_s,
            peak_rss_mb: None,
        });
        rust_runs.push(ProcessRun::finished(i, is_warmup, &r));

        // ------------------------------------------------------------ B': in process (warm)
        progress.step(&format!("{size}: Rust warm {tag}"));
        let _ = std::fs::remove_file(warm_dir.join("warm.bin"));
        let _ = std::fs::remove_file(warm_dir.join("warm.img"));
        let reset = measure::reset_self_peak_rss();
        let t0 = Instant::now();
        let (mut exp, _log) = crate::simulate::setup(&cfg).map_err(|e| anyhow!("size {size}: setup failed: {e}"))?;
        let setup_s = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let rendered = crate::simulate::render(&exp, cfg.run.threads, &|_| {}).map_err(|e| anyhow!("size {size}: render failed: {e}"))?;
        let render_s = t1.elapsed().as_secs_f64();
        let t2 = Instant::now();
        crate::simulate::write_outputs(&cfg, &mut exp, &rendered, &mut std::io::sink())
            .map_err(|e| anyhow!("size {size}: writing outputs failed: {e}"))?;
        let io_s = t2.elapsed().as_secs_f64();
        let _ = reset; // without a reset VmHWM is the maximum so far (reported in the run's warnings)
        let peak = measure::self_peak_rss_mb();
        warm.push(Phases { index: i, warmup: is_warmup, setup_s, render_s, io_s, peak_rss_mb: peak });
        if work.is_none() {
            work = Some(super::roofline::Work {
                n: [exp.na, exp.nb, exp.nc],
                square: exp.shape == crate::config::CrystalShape::Square,
                sources: exp.sources.len(),
                orientations: exp.domains() * exp.phisteps.max(1) as usize,
            });
        }
        if geometry.is_none() {
            geometry = Some((
                exp.pixels(),
                exp.sources.len(),
                exp.domains(),
                exp.phisteps.max(1) as usize,
                exp.oversample.max(1),
                exp.steps,
                crate::kernel::kernel_for(&exp, crate::kernel::active_level()).name(),
            ));
        }
        // Nothing of this run may stay alive: a child forked while this process holds a large image
        // inherits that resident size as its starting ru_maxrss, which would corrupt the next child's peak.
        drop(rendered);
        drop(exp);
    }

    // ---------------------------------------------------------------- statistics
    let measured = |v: &[Phases], res: f64, f: fn(&Phases) -> f64| -> Option<Stats> {
        Stats::with_resolution(&v.iter().filter(|p| !p.warmup).map(f).collect::<Vec<_>>(), res)
    };
    let phase_measure = |v: &[Phases], res: f64| PhaseMeasure {
        setup_s: measured(v, res, |p| p.setup_s),
        render_s: measured(v, res, |p| p.render_s),
        io_s: measured(v, res, |p| p.io_s),
        total_s: measured(v, res, |p| p.total_s()),
        peak_rss_mb: max_opt(v.iter().filter(|p| !p.warmup).map(|p| p.peak_rss_mb)),
        runs: v.to_vec(),
    };
    let rust_cold = phase_measure(&cold, child_resolution);
    let rust_warm = phase_measure(&warm, 0.0);
    let proc_stats = |v: &[ProcessRun]| Stats::of(&v.iter().filter(|r| !r.warmup && r.ok).map(|r| r.wall_s).collect::<Vec<_>>());
    let proc_rss = |v: &[ProcessRun]| max_opt(v.iter().filter(|r| !r.warmup && r.ok).map(|r| r.peak_rss_mb));
    let rust_process = ProcessMeasure { wall_s: proc_stats(&rust_runs), peak_rss_mb: proc_rss(&rust_runs), runs: rust_runs };
    let c = plan.c_binary.as_ref().map(|_| CMeasure {
        wall_s: proc_stats(&c_runs),
        peak_rss_mb: proc_rss(&c_runs),
        failed_runs: c_runs.iter().filter(|r| !r.ok).count(),
        runs: c_runs.clone(),
    });

    let (pixels, sources, domains, phisteps, oversample, steps, kernel) = geometry.expect("at least one iteration ran");
    let samples_per_pixel = (sources * domains * phisteps * oversample * oversample) as u64;
    if steps > 0 && steps as u64 != samples_per_pixel {
        warnings.push(format!(
            "the experiment's step count ({steps}) differs from sources × domains × phi steps × oversample² ({samples_per_pixel})"
        ));
    }

    // ---------------------------------------------------------------- images
    let rust_img = measure::read_float_image(&rust_float).ok();
    let warm_float = measure::read_float_image(&warm_dir.join("warm.bin")).ok();
    let rust_image_pixels = rust_img.as_ref().map(|v| v.len());
    let (rust_cold_vs_warm_correlation, rust_cold_warm_identical) = match (&rust_img, &warm_float) {
        (Some(a), Some(b)) => (finite(crate::stats::pearson(a, b)), Some(a == b)),
        _ => (None, None),
    };
    if rust_cold_warm_identical == Some(false) {
        warnings.push(format!(
            "our process run and our in-process run gave different images (correlation {})",
            fmt_opt(rust_cold_vs_warm_correlation, 9)
        ));
    }
    let last_c_ok = c_runs.last().map(|r| r.ok).unwrap_or(false);
    let c_img = if last_c_ok { measure::read_float_image(&c_float).ok() } else { None };
    let c_image_pixels = c_img.as_ref().map(|v| v.len());
    let (correlation, sum_ratio) = match (&rust_img, &c_img) {
        (Some(r), Some(c)) => {
            let corr = finite(crate::stats::pearson(r, c));
            let sr: f64 = r.iter().map(|&x| x as f64).sum();
            let sc: f64 = c.iter().map(|&x| x as f64).sum();
            (corr, if sc != 0.0 { finite(sr / sc) } else { None })
        }
        _ => (None, None),
    };

    // ---------------------------------------------------------------- derived numbers
    let med = |s: &Option<Stats>| s.as_ref().map(|s| s.median);
    let c_wall = c.as_ref().and_then(|c| med(&c.wall_s));
    let speedup_warm = ratio(c_wall, med(&rust_warm.total_s));
    let speedup_process = ratio(c_wall, med(&rust_process.wall_s));
    let per_s = |work: f64, t: Option<f64>| t.filter(|&t| t > 0.0).and_then(|t| finite(work / t));
    let px = pixels as f64;
    let samples = px * samples_per_pixel as f64;
    let bound = machine.logical_cores as f64 * 5e9 * simd_lanes_f32(&machine.cpu_simd);
    let throughput = Throughput {
        rust_warm_pixels_per_s: per_s(px, med(&rust_warm.render_s)),
        rust_warm_samples_per_s: per_s(samples, med(&rust_warm.render_s)),
        rust_process_pixels_per_s: per_s(px, med(&rust_process.wall_s)),
        rust_process_samples_per_s: per_s(samples, med(&rust_process.wall_s)),
        c_pixels_per_s: per_s(px, c_wall),
        c_samples_per_s: per_s(samples, c_wall),
        plausible_samples_per_s_bound: bound,
    };
    let bytes_written = ["warm.bin", "warm.img"]
        .iter()
        .map(|f| std::fs::metadata(warm_dir.join(f)).ok().map(|m| m.len()))
        .try_fold(0u64, |acc, b| b.map(|b| acc + b));
    let (roofline, roof_warnings) = super::roofline::figures(
        limits,
        kernel,
        plan.single_precision,
        plan.threads.unwrap_or(machine.logical_cores),
        samples,
        &work.expect("at least one iteration ran"),
        med(&rust_warm.render_s),
        med(&rust_warm.io_s),
        bytes_written,
    );
    warnings.extend(roof_warnings);
    let peak_rss_mb =
        PeakRss { c: c.as_ref().and_then(|c| c.peak_rss_mb), rust_process: rust_process.peak_rss_mb, rust_warm: rust_warm.peak_rss_mb };

    // ---------------------------------------------------------------- sanity checks
    if let Some(c) = &c {
        for r in c_runs.iter().filter(|r| !r.ok) {
            warnings.push(format!(
                "C run {}{} failed: {}",
                r.index,
                if r.warmup { " (warmup)" } else { "" },
                r.error.as_deref().unwrap_or("?")
            ));
        }
        if c.wall_s.is_none() {
            warnings.push("every measured C run failed: no C time, correlation or speedup for this size".into());
        }
    }
    if let (Some(rp), Some(cp)) = (rust_image_pixels, c_image_pixels) {
        if rp != cp {
            if correlation == Some(1.0) {
                warnings.push(format!(
                    "correlation is exactly 1.0 although the images differ in size ({rp} vs {cp} pixels): it covers only the common part"
                ));
            } else {
                warnings.push(format!("our image has {rp} pixels, the C's {cp}: the correlation covers only the common part"));
            }
        }
    }
    if let Some(sr) = sum_ratio {
        if (sr - 1.0).abs() > SUM_RATIO_TOLERANCE {
            warnings.push(format!("sum ratio (ours / C) is {sr:.6}: the total intensity differs by more than {SUM_RATIO_TOLERANCE}"));
        }
    }
    for (name, v) in [
        ("rust_warm_samples_per_s", throughput.rust_warm_samples_per_s),
        ("rust_process_samples_per_s", throughput.rust_process_samples_per_s),
        ("c_samples_per_s", throughput.c_samples_per_s),
    ] {
        if let Some(v) = v {
            if v > bound {
                warnings.push(format!(
                    "{name} = {v:.3e} exceeds what this machine can do ({bound:.3e} = cores × 5 GHz × SIMD lanes): a timing is wrong"
                ));
            }
        }
    }
    let cold_render = med(&rust_cold.render_s);
    if cold_render.is_some_and(|t| t < MIN_RELIABLE_TICKS * child_resolution) {
        warnings.push(format!(
            "runs are too short to time our cold phases reliably (cold render median {} s, printed to {} s): use a larger size",
            cold_render.unwrap_or(0.0),
            child_resolution
        ));
    } else if let (Some(c), Some(w)) = (cold_render, rust_warm.render_s.as_ref().map(|s| s.min)) {
        if c * COLD_FASTER_MARGIN + child_resolution < w {
            warnings.push(format!(
                "a cold run is faster than every warm run (render median {c:.4} s < warm minimum {w:.4} s by more than {:.0}%): \
                 the warm measurement is suspect",
                (COLD_FASTER_MARGIN - 1.0) * 100.0
            ));
        }
    }
    let spread_checks: Vec<(&str, Option<&Stats>)> = vec![
        ("c.wall_s", c.as_ref().and_then(|c| c.wall_s.as_ref())),
        ("rust_process.wall_s", rust_process.wall_s.as_ref()),
        ("rust_cold.render_s", rust_cold.render_s.as_ref()),
        ("rust_warm.render_s", rust_warm.render_s.as_ref()),
        ("rust_warm.total_s", rust_warm.total_s.as_ref()),
    ];
    for (name, s) in spread_checks {
        let Some(s) = s else { continue };
        if s.n > 1 && s.wide_spread {
            warnings.push(format!(
                "wide spread in {name}: max/min = {} (> {}); the machine was busy or the run is too short",
                s.spread.map(|x| format!("{x:.3}")).unwrap_or_else(|| "∞".into()),
                super::stats::WIDE_SPREAD
            ));
        }
        if s.outliers > 0 {
            warnings.push(format!(
                "{} statistical outlier(s) in {name} (modified Z-score > {:.1}, as hyperfine): rerun on a quiet machine",
                s.outliers,
                super::stats::OUTLIER_THRESHOLD
            ));
        }
    }

    Ok(Entry {
        config: plan.kind.name().to_string(),
        size,
        pixels,
        kernel: kernel.to_string(),
        sources,
        domains,
        phisteps,
        oversample,
        samples_per_pixel,
        c,
        rust_cold,
        rust_warm,
        rust_process,
        peak_rss_mb,
        correlation,
        sum_ratio,
        c_image_pixels,
        rust_image_pixels,
        rust_cold_vs_warm_correlation,
        rust_cold_warm_identical,
        speedup_warm,
        speedup_process,
        throughput,
        roofline: Some(roofline),
        warnings,
    })
}

pub(crate) fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "n/a".into())
}

/// `<exe dir>/nanobragg-rs`: our simulator next to this binary.
pub fn default_rust_binary() -> PathBuf {
    let name = if cfg!(windows) { "nanobragg-rs.exe" } else { "nanobragg-rs" };
    std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join(name))).unwrap_or_else(|| PathBuf::from(name))
}
