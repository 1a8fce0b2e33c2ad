//! The `bench-detailed` command line (clap) and its exit codes. The binary only calls [`main`].

use super::compare;
use super::gate::GateOptions;
use super::plan::{self, ConfigKind, Plan};
use super::report;
use super::runner::{self, Progress};
use super::schema::Report;
use clap::{Args, Parser, Subcommand};
use std::cell::Cell;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Success.
pub const EXIT_OK: i32 = 0;
/// The gate failed, or `compare --fail-on-regression` found regressions.
pub const EXIT_FAILED: i32 = 1;
/// Bad usage or the benchmark itself could not run.
pub const EXIT_ERROR: i32 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "bench-detailed",
    version,
    about = "Benchmark nanobragg-rs against the C nanoBragg: cold, warm and whole-process times, memory, correlation",
    long_about = "Benchmark nanobragg-rs against the C nanoBragg.\n\n\
        For each detector size: the C reference as a whole process (when given), our fresh `nanobragg-rs simulate` \
        process (cold: its setup/render/output split; process: its wall time) and our in-process warm runs, \
        interleaved so drift hits all of them, then the correlation and sum ratio of the two float images.\n\
        Writes benchmark_results.json (schema nanobragg-rs/bench-detailed/1), summary.md, benchmark_results.csv and \
        runs.csv into --out, and prints the summary table.\n\n\
        Exit codes: 0 success, 1 gate failed / regressions with --fail-on-regression, 2 error.",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Compare two benchmark_results.json files and list the regressions.
    Compare(CompareArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Detector sizes (pixels per side, comma separated).
    #[arg(long, default_value = "512,1024")]
    pub sizes: String,
    /// Measured runs per size and contender.
    #[arg(long, default_value_t = 5)]
    pub iterations: usize,
    /// Unmeasured runs before them (kept in the JSON, flagged as warmup).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// bench: the benchmark crystal; heavy: HKL file, mosaic, phi, divergence, dispersion, oversample; custom: --args only.
    #[arg(long, value_parser = ["bench", "heavy", "custom"], default_value = "bench")]
    pub config: String,
    /// nanoBragg flags (whitespace separated): the whole crystal for --config custom, appended otherwise.
    #[arg(long, allow_hyphen_values = true, value_name = "FLAGS")]
    pub args: Option<String>,
    /// The C nanoBragg binary (default: $NB_C_BIN). Without one no C comparison is made.
    #[arg(long, value_name = "PATH")]
    pub c_binary: Option<PathBuf>,
    /// Our simulator (default: nanobragg-rs next to this binary).
    #[arg(long, value_name = "PATH")]
    pub rust_binary: Option<PathBuf>,
    /// Worker threads for our runs (and OMP_NUM_THREADS for the C); default all cores.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Arithmetic of our kernel.
    #[arg(long, value_parser = ["double", "single"], default_value = "double")]
    pub precision: String,
    /// Report directory (default reports/benchmarks/<UTC timestamp>/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Exit 1 when any size misses --min-speedup or --min-correlation (default 0.999).
    #[arg(long)]
    pub gate: bool,
    /// Gate: least speedup (C wall / our process wall, medians). Skipped, with a message, without a C binary.
    #[arg(long, requires = "gate", value_name = "X")]
    pub min_speedup: Option<f64>,
    /// Gate: least correlation of our image with the C's (and of our process image with our in-process one).
    #[arg(long, requires = "gate", value_name = "Y")]
    pub min_correlation: Option<f64>,
    /// Keep the scratch directory with the last images.
    #[arg(long)]
    pub keep_work: bool,
    /// Let every run replace the previous run's output files (rerunning into one folder) instead of
    /// writing fresh ones: measures what replacing an existing file costs each program.
    #[arg(long)]
    pub replace_outputs: bool,
    /// No progress bar even on a terminal.
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline benchmark_results.json.
    pub baseline: PathBuf,
    /// The new benchmark_results.json.
    pub new: PathBuf,
    /// A regression is a change above this percentage (of the median; of the peak for memory)...
    #[arg(long, default_value_t = 5.0)]
    pub threshold: f64,
    /// ...that is also significant at this level (one-sided Mann-Whitney U on the per-run samples; with
    /// too few runs for the test to reach it, every new run must be above every baseline run).
    #[arg(long, default_value_t = compare::DEFAULT_ALPHA)]
    pub alpha: f64,
    /// Where comparison.md, regressions.csv and full_comparison.csv go (default: NEW's directory).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Exit 1 when there are regressions.
    #[arg(long)]
    pub fail_on_regression: bool,
}

/// An indicatif bar on stderr (hidden when stderr is not a terminal; per-size lines still go to stderr).
struct Bar {
    bar: indicatif::ProgressBar,
    interactive: bool,
    started: Cell<bool>,
}

impl Progress for Bar {
    fn start(&self, total: u64) {
        self.bar.set_length(total);
        if self.interactive {
            self.bar.enable_steady_tick(std::time::Duration::from_millis(200));
        }
    }
    fn step(&self, msg: &str) {
        if self.started.replace(true) {
            self.bar.inc(1);
        }
        self.bar.set_message(msg.to_string());
    }
    fn println(&self, line: &str) {
        if self.interactive {
            self.bar.println(line);
        } else {
            eprintln!("{line}");
        }
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn make_bar(interactive: bool) -> Bar {
    let bar = if interactive {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    Bar { bar, interactive, started: Cell::new(false) }
}

/// Parse, run, print; returns the exit code.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_ERROR } else { EXIT_OK };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        Some(Command::Compare(c)) => run_compare(&c),
        None => run_bench(&cli.run),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench-detailed: error: {e:#}");
            EXIT_ERROR
        }
    }
}

/// `p` against the current folder when relative (the file need not exist).
fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(p).map_err(|e| anyhow::anyhow!("cannot resolve {}: {e}", p.display()))
}

/// Build the [`Plan`] from the flags (and NB_C_BIN).
pub fn plan_from_args(a: &RunArgs) -> anyhow::Result<(Plan, GateOptions)> {
    let kind = ConfigKind::parse(&a.config).ok_or_else(|| anyhow::anyhow!("unknown --config {}", a.config))?;
    let custom_args = a.args.as_deref().map(plan::split_args).unwrap_or_default();
    if kind == ConfigKind::Custom && custom_args.is_empty() {
        anyhow::bail!("--config custom needs --args \"<nanoBragg flags>\"");
    }
    let sizes = plan::parse_sizes(&a.sizes).map_err(|e| anyhow::anyhow!("--sizes: {e}"))?;
    // Relative paths are the caller's: make them absolute now, before any run changes folder.
    let c_binary = a
        .c_binary
        .clone()
        .or_else(|| std::env::var_os("NB_C_BIN").filter(|v| !v.is_empty()).map(PathBuf::from))
        .map(|p| absolute(&p))
        .transpose()?;
    let rust_binary = absolute(&a.rust_binary.clone().unwrap_or_else(runner::default_rust_binary))?;
    let out_dir = a.out.clone().unwrap_or_else(|| Path::new("reports").join("benchmarks").join(plan::utc_timestamp()));
    let plan = Plan {
        kind,
        custom_args,
        sizes,
        warmup: a.warmup,
        iterations: a.iterations,
        threads: a.threads.filter(|&t| t > 0),
        single_precision: a.precision == "single",
        c_binary,
        rust_binary,
        out_dir,
        keep_work: a.keep_work,
        replace_outputs: a.replace_outputs,
        interactive: !a.no_progress && std::io::stderr().is_terminal(),
    };
    let gate = GateOptions { enabled: a.gate, min_speedup: a.min_speedup, min_correlation: a.min_correlation };
    Ok((plan, gate))
}

fn run_bench(a: &RunArgs) -> anyhow::Result<i32> {
    let (plan, gate) = plan_from_args(a)?;
    if plan.c_binary.is_none() {
        eprintln!("bench-detailed: no C reference (--c-binary PATH or NB_C_BIN): no C comparison will be made");
    }
    let bar = make_bar(plan.interactive);
    let report: Report = runner::run(&plan, &gate, &bar)?;
    let out_dir = std::fs::canonicalize(&plan.out_dir).unwrap_or(plan.out_dir.clone());
    print!("{}", report::terminal_summary(&report, &out_dir));
    if report.gate.enabled {
        if plan.c_binary.is_none() {
            eprintln!("bench-detailed: gate: the C checks (speed, correlation with the C image) were SKIPPED: no C binary");
        }
        if !report.gate.passed {
            eprintln!("bench-detailed: gate FAILED");
            return Ok(EXIT_FAILED);
        }
    }
    Ok(EXIT_OK)
}

fn read_report(p: &Path) -> anyhow::Result<Report> {
    let text = std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
    Report::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}

fn run_compare(a: &CompareArgs) -> anyhow::Result<i32> {
    if a.threshold.is_nan() || a.threshold < 0.0 {
        anyhow::bail!("--threshold must be a non-negative percentage");
    }
    if !(a.alpha > 0.0 && a.alpha < 1.0) {
        anyhow::bail!("--alpha must be a significance level between 0 and 1 (exclusive)");
    }
    let base = read_report(&a.baseline)?;
    let new = read_report(&a.new)?;
    compare::validate(&base, &a.baseline.display().to_string())?;
    compare::validate(&new, &a.new.display().to_string())?;
    let res = compare::compare(&base, &new, a.threshold, a.alpha);
    let out = a.out.clone().unwrap_or_else(|| a.new.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf());
    let (bn, nn) = (a.baseline.display().to_string(), a.new.display().to_string());
    compare::write_all(&res, &out, &bn, &nn)?;
    print!("{}", compare::markdown(&res, &bn, &nn));
    eprintln!(
        "bench-detailed compare: {}; reports in {}/{{{},{},{}}}",
        res.totals(),
        out.display(),
        compare::COMPARISON_MD,
        compare::REGRESSIONS_CSV,
        compare::FULL_CSV
    );
    if res.rows.is_empty() {
        eprintln!("bench-detailed compare: nothing to compare (no configuration and size in both reports)");
    }
    Ok(if a.fail_on_regression && !res.regressions.is_empty() { EXIT_FAILED } else { EXIT_OK })
}
