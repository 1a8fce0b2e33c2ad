//! Running a [`Plan`]: for each size, the C reference (whole process), our fresh process (cold phase
//! split and whole-process wall time) and our in-process warm runs, interleaved C, ours, ours-warm,
//! C, … so drift and thermal changes hit every contender alike; then the images are compared.

use super::fmt::{fmt_opt, med};
use super::gate::{evaluate, GateOptions};
use super::machine::{simd_lanes_f32, MachineInfo};
use super::measure::{self, Phases, ProcessRun, WorkDir};
use super::plan::{self, ConfigKind, Plan};
use super::schema::*;
use super::stats::Stats;
use nanobragg::experiment::params::Precision;
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
    if plan.keep_work {
        work.keep();
        notes.push(format!("scratch directory kept: {}", work.path.display()));
    }
    let dirs = Dirs { c: work.path.join("c"), rust: work.path.join("rust"), warm: work.path.join("warm") };
    for d in [&dirs.c, &dirs.rust, &dirs.warm] {
        std::fs::create_dir_all(d)?;
    }

    progress.println("measuring this machine's floating-point peak per SIMD level and its write bandwidth…");
    let limits = super::roofline::measure(&work.path);
    let runs_per_size = (plan.warmup + plan.iterations) as u64 * if plan.c_binary.is_some() { 3 } else { 2 };
    progress.start(runs_per_size * plan.sizes.len() as u64);

    let mut entries = Vec::new();
    for &size in &plan.sizes {
        let e = run_size(plan, size, hkl.as_deref(), &machine, &limits, &dirs, progress)?;
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
            outputs: if plan.replace_outputs { "replace" } else { "fresh" }.to_string(),
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

/// The scratch folders of one run: the C's, our process's and our in-process runs' outputs.
struct Dirs {
    c: PathBuf,
    rust: PathBuf,
    warm: PathBuf,
}

/// Everything one size's runs share: the arguments of both programs and the parsed warm configuration.
struct SizeSetup<'a> {
    size: usize,
    dirs: &'a Dirs,
    /// Our configuration, parsed once, for the in-process runs.
    cfg: nanobragg::run::config::Config,
    c_args: Vec<String>,
    c_env: Vec<(String, String)>,
    rust_args: Vec<String>,
    /// Where our process run writes its phase timings (see [`nanobragg::run::simulate::TIMINGS_JSON_ENV`]).
    timings_json: PathBuf,
    /// Leave outputs for the next run to replace ([`Plan::replace_outputs`]).
    replace_outputs: bool,
}

impl SizeSetup<'_> {
    fn c_float(&self) -> PathBuf {
        self.dirs.c.join("c.bin")
    }
    fn rust_float(&self) -> PathBuf {
        self.dirs.rust.join("rust.bin")
    }
    fn warm_float(&self) -> PathBuf {
        self.dirs.warm.join("warm.bin")
    }
    /// Untimed, before a run: remove the previous run's outputs in `dir`, unless runs replace them.
    fn clear_outputs(&self, dir: &Path, names: &[&str]) {
        if !self.replace_outputs {
            for n in names {
                let _ = std::fs::remove_file(dir.join(n));
            }
        }
    }
}

/// The shape of the work of one size, read from the experiment of the first warm run.
#[derive(Clone, Copy)]
struct Shape {
    pixels: usize,
    sources: usize,
    domains: usize,
    phisteps: usize,
    oversample: usize,
    steps: i64,
    kernel: &'static str,
    work: super::roofline::Work,
}

impl Shape {
    fn samples_per_pixel(&self) -> u64 {
        (self.sources * self.domains * self.phisteps * self.oversample * self.oversample) as u64
    }
}

/// The raw measurements of one size, in run order.
#[derive(Default)]
struct Collected {
    c_runs: Vec<ProcessRun>,
    rust_runs: Vec<ProcessRun>,
    cold: Vec<Phases>,
    warm: Vec<Phases>,
    /// The coarsest resolution of the phase times our process runs reported.
    child_resolution: f64,
    shape: Option<Shape>,
}

/// The statistics of one size's runs.
struct Measured {
    c: Option<CMeasure>,
    rust_cold: PhaseMeasure,
    rust_warm: PhaseMeasure,
    rust_process: ProcessMeasure,
}

/// The comparisons of the last runs' images.
struct Images {
    correlation: Option<f64>,
    sum_ratio: Option<f64>,
    c_image_pixels: Option<usize>,
    rust_image_pixels: Option<usize>,
    rust_cold_vs_warm_correlation: Option<f64>,
    rust_cold_warm_identical: Option<bool>,
}

/// Speedups, throughput and the roofline figures.
struct Derived {
    speedup_warm: Option<f64>,
    speedup_process: Option<f64>,
    throughput: Throughput,
    roofline: super::roofline::Roofline,
}

/// One size: prepare, run everything interleaved, then summarise, compare and check.
fn run_size(
    plan: &Plan,
    size: usize,
    hkl: Option<&Path>,
    machine: &MachineInfo,
    limits: &super::roofline::MachineLimits,
    dirs: &Dirs,
    progress: &dyn Progress,
) -> anyhow::Result<Entry> {
    let setup = prepare_size(plan, size, hkl, dirs)?;
    let collected = measure_size(plan, &setup, progress)?;
    let mut warnings = Vec::new();
    let shape = collected.shape.expect("at least one iteration ran");
    if shape.steps > 0 && shape.steps as u64 != shape.samples_per_pixel() {
        warnings.push(format!(
            "the experiment's step count ({}) differs from sources × domains × phi steps × oversample² ({})",
            shape.steps,
            shape.samples_per_pixel()
        ));
    }
    let m = summarise(plan, &collected);
    let images = compare_images(&setup, &collected.c_runs, &mut warnings);
    let d = derive(plan, machine, limits, &setup, &shape, &m, &mut warnings);
    sanity_warnings(&collected, &m, &images, &d, &mut warnings);
    Ok(assemble_entry(plan, size, &shape, m, images, d, warnings))
}

/// The arguments of the C and of our process, and our warm configuration, for one size.
fn prepare_size<'a>(plan: &Plan, size: usize, hkl: Option<&Path>, dirs: &'a Dirs) -> anyhow::Result<SizeSetup<'a>> {
    let base = plan.base_args(size, hkl);
    let precision = if plan.single_precision { "single" } else { "double" };

    let mut warm_args = base.clone();
    warm_args.extend(plan::warm_output_args());
    let mut cfg = nanobragg::cli::parse::parse_simulate_args(&warm_args).map_err(|e| anyhow!("size {size}: bad arguments: {e}"))?;
    cfg.output.out_dir = Some(dirs.warm.clone());
    cfg.run.threads = plan.threads;
    cfg.run.precision = if plan.single_precision { Precision::Single } else { Precision::Double };
    cfg.run.progress = false;
    cfg.run.quiet = true;

    let mut c_args = base.clone();
    c_args.extend(plan::c_output_args());
    let mut rust_args = vec!["simulate".to_string()];
    rust_args.extend(base.iter().cloned());
    rust_args.extend(plan::rust_output_args());
    if let Some(t) = plan.threads {
        rust_args.extend(["--threads".to_string(), t.to_string()]);
    }
    rust_args.extend(["--precision".to_string(), precision.to_string()]);
    let c_env = plan.threads.map(|t| vec![("OMP_NUM_THREADS".to_string(), t.to_string())]).unwrap_or_default();
    Ok(SizeSetup { size, dirs, cfg, c_args, c_env, rust_args, timings_json: dirs.rust.join(".timings.json"), replace_outputs: plan.replace_outputs })
}

/// Warmups then measured runs, each one C run, one of our processes and one in-process run, so
/// drift hits every contender alike.
fn measure_size(plan: &Plan, s: &SizeSetup, progress: &dyn Progress) -> anyhow::Result<Collected> {
    let mut out = Collected::default();
    for i in 0..plan.warmup + plan.iterations {
        let is_warmup = i < plan.warmup;
        let tag = if is_warmup {
            format!("warmup {}/{}", i + 1, plan.warmup)
        } else {
            format!("run {}/{}", i + 1 - plan.warmup, plan.iterations)
        };
        if let Some(cbin) = &plan.c_binary {
            progress.step(&format!("{}: C {tag}", s.size));
            out.c_runs.push(c_run(cbin, s, i, is_warmup)?);
        }
        progress.step(&format!("{}: Rust process {tag}", s.size));
        let (run, phases, resolution) = cold_run(&plan.rust_binary, s, i, is_warmup)?;
        out.rust_runs.push(run);
        out.cold.push(phases);
        out.child_resolution = out.child_resolution.max(resolution);
        progress.step(&format!("{}: Rust warm {tag}", s.size));
        let (phases, shape) = warm_run(s, i, is_warmup)?;
        out.warm.push(phases);
        out.shape.get_or_insert(shape);
    }
    Ok(out)
}

/// One run of the C reference (whole process); a failure is recorded in the run, not returned.
fn c_run(cbin: &Path, s: &SizeSetup, i: usize, is_warmup: bool) -> anyhow::Result<ProcessRun> {
    let c_float = s.c_float();
    // Untimed: remove the previous run's outputs, so no run pays for truncating or replacing the
    // last one's files, unless that cost is what is measured (--replace-outputs).
    s.clear_outputs(&s.dirs.c, &["c.bin", "c.img"]);
    let r = measure::run_child(cbin, &s.c_args, &s.dirs.c, &s.c_env).with_context(|| format!("cannot run {}", cbin.display()))?;
    let mut run = ProcessRun::finished(i, is_warmup, &r);
    let fail = |run: &mut ProcessRun, why: String| {
        run.ok = false;
        run.error = Some(why);
    };
    if r.exit_code != Some(0) {
        let status = match (r.exit_code, r.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => "abnormal exit".into(),
        };
        fail(&mut run, format!("{status}; stderr: {}", measure::tail_lines(&r.stderr, 3)));
    } else {
        let want = s.size * s.size * 4;
        match std::fs::metadata(&c_float) {
            Ok(m) if m.len() as usize == want => {}
            Ok(m) => fail(&mut run, format!("float image has {} bytes, expected {want}", m.len())),
            Err(_) => fail(&mut run, "wrote no float image (-floatfile c.bin)".into()),
        }
    }
    Ok(run)
}

/// One fresh process of ours: its whole-process run, the phase split it reports as JSON
/// ([`nanobragg::run::simulate::TIMINGS_JSON_ENV`]) and that split's resolution. Our failure is an error.
fn cold_run(rust_binary: &Path, s: &SizeSetup, i: usize, is_warmup: bool) -> anyhow::Result<(ProcessRun, Phases, f64)> {
    let size = s.size;
    s.clear_outputs(&s.dirs.rust, &["rust.bin", "rust.img"]);
    let _ = std::fs::remove_file(&s.timings_json);
    let env = [(nanobragg::run::simulate::TIMINGS_JSON_ENV.to_string(), s.timings_json.display().to_string())];
    let r = measure::run_child(rust_binary, &s.rust_args, &s.dirs.rust, &env)
        .with_context(|| format!("cannot run {}", rust_binary.display()))?;
    if r.exit_code != Some(0) {
        bail!(
            "size {size}: `{} {}` failed ({:?}): {}",
            rust_binary.display(),
            s.rust_args.join(" "),
            r.exit_code,
            measure::tail_lines(&r.stderr, 5)
        );
    }
    let t = measure::read_timings(&s.timings_json).with_context(|| {
        format!(
            "size {size}: our simulator {} wrote no phase timings to {} (${}): is it older than this harness?",
            rust_binary.display(),
            s.timings_json.display(),
            nanobragg::run::simulate::TIMINGS_JSON_ENV
        )
    })?;
    let phases = Phases { index: i, warmup: is_warmup, setup_s: t.setup_s, render_s: t.render_s, io_s: t.io_s, peak_rss_mb: None };
    Ok((ProcessRun::finished(i, is_warmup, &r), phases, t.resolution_s))
}

/// One in-process run: setup, render and outputs timed here, with this process's peak RSS.
fn warm_run(s: &SizeSetup, i: usize, is_warmup: bool) -> anyhow::Result<(Phases, Shape)> {
    let (size, cfg) = (s.size, &s.cfg);
    s.clear_outputs(&s.dirs.warm, &["warm.bin", "warm.img"]);
    // without a reset VmHWM is the maximum so far (reported in the run's warnings)
    let _ = measure::reset_self_peak_rss();
    let t0 = Instant::now();
    let (mut exp, _log) = nanobragg::run::simulate::setup(cfg).map_err(|e| anyhow!("size {size}: setup failed: {e}"))?;
    let setup_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let rendered = nanobragg::run::simulate::render(&exp, &cfg.run.render_options(), cfg.run.threads, &|_| {}).map_err(|e| anyhow!("size {size}: render failed: {e}"))?;
    let render_s = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    nanobragg::run::simulate::write_outputs(cfg, &mut exp, &rendered, &mut std::io::sink())
        .map_err(|e| anyhow!("size {size}: writing outputs failed: {e}"))?;
    let io_s = t2.elapsed().as_secs_f64();
    let peak_rss_mb = measure::self_peak_rss_mb();
    let shape = Shape {
        pixels: exp.pixels(),
        sources: exp.beam.sources.len(),
        domains: exp.domains(),
        phisteps: exp.scan.phisteps.max(1) as usize,
        oversample: exp.sampling.oversample.max(1),
        steps: exp.sampling.steps,
        kernel: nanobragg::kernel::kernel_for(&exp, nanobragg::kernel::active_level()).name(),
        work: super::roofline::Work {
            n: [exp.crystal.na, exp.crystal.nb, exp.crystal.nc],
            square: exp.crystal.shape == nanobragg::experiment::params::CrystalShape::Square,
            sources: exp.beam.sources.len(),
            wavelengths: {
                let mut l: Vec<u64> = exp.beam.sources.iter().map(|s| s.lambda.to_bits()).collect();
                l.sort_unstable();
                l.dedup();
                l.len()
            },
            orientations: exp.domains() * exp.scan.phisteps.max(1) as usize,
            single: cfg.run.precision == nanobragg::experiment::params::Precision::Single,
        },
    };
    // Nothing of this run may stay alive: a child forked while this process holds a large image
    // inherits that resident size as its starting ru_maxrss, which would corrupt the next child's peak.
    drop(rendered);
    drop(exp);
    Ok((Phases { index: i, warmup: is_warmup, setup_s, render_s, io_s, peak_rss_mb }, shape))
}

/// Statistics of the measured (non-warmup) runs.
fn summarise(plan: &Plan, col: &Collected) -> Measured {
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
    let proc_stats = |v: &[ProcessRun]| Stats::of(&v.iter().filter(|r| !r.warmup && r.ok).map(|r| r.wall_s).collect::<Vec<_>>());
    let proc_rss = |v: &[ProcessRun]| max_opt(v.iter().filter(|r| !r.warmup && r.ok).map(|r| r.peak_rss_mb));
    Measured {
        c: plan.c_binary.as_ref().map(|_| CMeasure {
            wall_s: proc_stats(&col.c_runs),
            peak_rss_mb: proc_rss(&col.c_runs),
            failed_runs: col.c_runs.iter().filter(|r| !r.ok).count(),
            runs: col.c_runs.clone(),
        }),
        rust_cold: phase_measure(&col.cold, col.child_resolution),
        rust_warm: phase_measure(&col.warm, 0.0),
        rust_process: ProcessMeasure {
            wall_s: proc_stats(&col.rust_runs),
            peak_rss_mb: proc_rss(&col.rust_runs),
            runs: col.rust_runs.clone(),
        },
    }
}

/// Correlation and sum ratio of our last process image with the C's last (good) one, and our
/// process image against our in-process one.
fn compare_images(s: &SizeSetup, c_runs: &[ProcessRun], warnings: &mut Vec<String>) -> Images {
    let rust_img = measure::read_float_image(&s.rust_float()).ok();
    let warm_img = measure::read_float_image(&s.warm_float()).ok();
    let (rust_cold_vs_warm_correlation, rust_cold_warm_identical) = match (&rust_img, &warm_img) {
        (Some(a), Some(b)) => (finite(nanobragg::stats::pearson(a, b)), Some(a == b)),
        _ => (None, None),
    };
    if rust_cold_warm_identical == Some(false) {
        warnings.push(format!(
            "our process run and our in-process run gave different images (correlation {})",
            fmt_opt(rust_cold_vs_warm_correlation, 9)
        ));
    }
    let last_c_ok = c_runs.last().is_some_and(|r| r.ok);
    let c_img = if last_c_ok { measure::read_float_image(&s.c_float()).ok() } else { None };
    let (correlation, sum_ratio) = match (&rust_img, &c_img) {
        (Some(r), Some(c)) => {
            let sr: f64 = r.iter().map(|&x| x as f64).sum();
            let sc: f64 = c.iter().map(|&x| x as f64).sum();
            (finite(nanobragg::stats::pearson(r, c)), if sc != 0.0 { finite(sr / sc) } else { None })
        }
        _ => (None, None),
    };
    Images {
        correlation,
        sum_ratio,
        c_image_pixels: c_img.as_ref().map(|v| v.len()),
        rust_image_pixels: rust_img.as_ref().map(|v| v.len()),
        rust_cold_vs_warm_correlation,
        rust_cold_warm_identical,
    }
}

/// Speedups, throughput and how close the warm runs come to the machine's limits.
fn derive(
    plan: &Plan,
    machine: &MachineInfo,
    limits: &super::roofline::MachineLimits,
    s: &SizeSetup,
    shape: &Shape,
    m: &Measured,
    warnings: &mut Vec<String>,
) -> Derived {
    let c_wall = m.c.as_ref().and_then(|c| med(&c.wall_s));
    let per_s = |work: f64, t: Option<f64>| t.filter(|&t| t > 0.0).and_then(|t| finite(work / t));
    let px = shape.pixels as f64;
    let samples = px * shape.samples_per_pixel() as f64;
    let throughput = Throughput {
        rust_warm_pixels_per_s: per_s(px, med(&m.rust_warm.render_s)),
        rust_warm_samples_per_s: per_s(samples, med(&m.rust_warm.render_s)),
        rust_process_pixels_per_s: per_s(px, med(&m.rust_process.wall_s)),
        rust_process_samples_per_s: per_s(samples, med(&m.rust_process.wall_s)),
        c_pixels_per_s: per_s(px, c_wall),
        c_samples_per_s: per_s(samples, c_wall),
        plausible_samples_per_s_bound: machine.logical_cores as f64 * 5e9 * simd_lanes_f32(&machine.cpu_simd),
    };
    let bytes_written = ["warm.bin", "warm.img"]
        .iter()
        .map(|f| std::fs::metadata(s.dirs.warm.join(f)).ok().map(|m| m.len()))
        .try_fold(0u64, |acc, b| b.map(|b| acc + b));
    let (roofline, roof_warnings) = super::roofline::figures(
        limits,
        shape.kernel,
        plan.single_precision,
        plan.threads.unwrap_or(machine.logical_cores),
        samples,
        &shape.work,
        med(&m.rust_warm.render_s),
        med(&m.rust_warm.io_s),
        bytes_written,
    );
    warnings.extend(roof_warnings);
    Derived {
        speedup_warm: ratio(c_wall, med(&m.rust_warm.total_s)),
        speedup_process: ratio(c_wall, med(&m.rust_process.wall_s)),
        throughput,
        roofline,
    }
}

/// Failed C runs, image size mismatches, sum ratio, impossible throughput, too-short or suspect
/// timings, wide spreads and outliers.
fn sanity_warnings(col: &Collected, m: &Measured, im: &Images, d: &Derived, warnings: &mut Vec<String>) {
    if let Some(c) = &m.c {
        for r in col.c_runs.iter().filter(|r| !r.ok) {
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
    if let (Some(rp), Some(cp)) = (im.rust_image_pixels, im.c_image_pixels) {
        if rp != cp {
            if im.correlation == Some(1.0) {
                warnings.push(format!(
                    "correlation is exactly 1.0 although the images differ in size ({rp} vs {cp} pixels): it covers only the common part"
                ));
            } else {
                warnings.push(format!("our image has {rp} pixels, the C's {cp}: the correlation covers only the common part"));
            }
        }
    }
    if let Some(sr) = im.sum_ratio {
        if (sr - 1.0).abs() > SUM_RATIO_TOLERANCE {
            warnings.push(format!("sum ratio (ours / C) is {sr:.6}: the total intensity differs by more than {SUM_RATIO_TOLERANCE}"));
        }
    }
    let bound = d.throughput.plausible_samples_per_s_bound;
    for (name, v) in [
        ("rust_warm_samples_per_s", d.throughput.rust_warm_samples_per_s),
        ("rust_process_samples_per_s", d.throughput.rust_process_samples_per_s),
        ("c_samples_per_s", d.throughput.c_samples_per_s),
    ] {
        if let Some(v) = v.filter(|&v| v > bound) {
            warnings.push(format!(
                "{name} = {v:.3e} exceeds what this machine can do ({bound:.3e} = cores × 5 GHz × SIMD lanes): a timing is wrong"
            ));
        }
    }
    let child_resolution = col.child_resolution;
    let cold_render = med(&m.rust_cold.render_s);
    if cold_render.is_some_and(|t| t < MIN_RELIABLE_TICKS * child_resolution) {
        warnings.push(format!(
            "runs are too short to time our cold phases reliably (cold render median {} s, resolution {} s): use a larger size",
            cold_render.unwrap_or(0.0),
            child_resolution
        ));
    } else if let (Some(c), Some(w)) = (cold_render, m.rust_warm.render_s.as_ref().map(|s| s.min)) {
        if c * COLD_FASTER_MARGIN + child_resolution < w {
            warnings.push(format!(
                "a cold run is faster than every warm run (render median {c:.4} s < warm minimum {w:.4} s by more than {:.0}%): \
                 the warm measurement is suspect",
                (COLD_FASTER_MARGIN - 1.0) * 100.0
            ));
        }
    }
    let spread_checks: [(&str, Option<&Stats>); 5] = [
        ("c.wall_s", m.c.as_ref().and_then(|c| c.wall_s.as_ref())),
        ("rust_process.wall_s", m.rust_process.wall_s.as_ref()),
        ("rust_cold.render_s", m.rust_cold.render_s.as_ref()),
        ("rust_warm.render_s", m.rust_warm.render_s.as_ref()),
        ("rust_warm.total_s", m.rust_warm.total_s.as_ref()),
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
}

/// The report entry of one size.
fn assemble_entry(plan: &Plan, size: usize, shape: &Shape, m: Measured, im: Images, d: Derived, warnings: Vec<String>) -> Entry {
    let peak_rss_mb = PeakRss {
        c: m.c.as_ref().and_then(|c| c.peak_rss_mb),
        rust_process: m.rust_process.peak_rss_mb,
        rust_warm: m.rust_warm.peak_rss_mb,
    };
    Entry {
        config: plan.kind.name().to_string(),
        size,
        pixels: shape.pixels,
        kernel: shape.kernel.to_string(),
        sources: shape.sources,
        domains: shape.domains,
        phisteps: shape.phisteps,
        oversample: shape.oversample,
        samples_per_pixel: shape.samples_per_pixel(),
        c: m.c,
        rust_cold: m.rust_cold,
        rust_warm: m.rust_warm,
        rust_process: m.rust_process,
        peak_rss_mb,
        correlation: im.correlation,
        sum_ratio: im.sum_ratio,
        c_image_pixels: im.c_image_pixels,
        rust_image_pixels: im.rust_image_pixels,
        rust_cold_vs_warm_correlation: im.rust_cold_vs_warm_correlation,
        rust_cold_warm_identical: im.rust_cold_warm_identical,
        speedup_warm: d.speedup_warm,
        speedup_process: d.speedup_process,
        throughput: d.throughput,
        roofline: Some(d.roofline),
        warnings,
    }
}

/// `<exe dir>/nanobragg-rs`: our simulator next to this binary.
pub fn default_rust_binary() -> PathBuf {
    let name = if cfg!(windows) { "nanobragg-rs.exe" } else { "nanobragg-rs" };
    std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join(name))).unwrap_or_else(|| PathBuf::from(name))
}
