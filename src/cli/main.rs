//! `nanobragg-rs`: dispatch of every subcommand, one-line errors and the exit code. The binary
//! (`src/main.rs`) only calls [`main`].

use super::{help, parse};
use std::io::Write;
use std::process::ExitCode;

/// Exit code for bad input, as nanoBragg.c uses.
const EXIT_BAD_INPUT: u8 = 9;

fn version() -> String {
    format!("nanobragg-rs {} (git {})", env!("CARGO_PKG_VERSION"), crate::base::build::GIT_COMMIT)
}

fn usage() -> String {
    format!(
        "{}\nA Rust port of nanoBragg (James Holton), the nanocrystal X-ray diffraction image simulator.\n\n\
         USAGE:\n  nanobragg-rs simulate [FLAGS]   render an image (nanoBragg's flags, verbatim)\n  \
         nanobragg-rs simulate --help    list every flag with units and defaults\n  \
         nanobragg-rs series [FLAGS] --frames N | --stills N [--orientation random|fixed]   a dataset (see README)\n  \
         nanobragg-rs refine [FLAGS] --observed OBS --refine NAME,.. --params-out FIT.json   fit parameters to an image\n  \
         nanobragg-rs noisify [FLAGS]    noisify.c: detector noise and PSF on a float image\n  \
         nanobragg-rs nonbragg [FLAGS]   nonBragg.c: water/air background from a stol table\n  \
         nanobragg-rs nearbragg [FLAGS]  nearBragg.c: point scatterers summed over exact near-field paths\n  \
         nanobragg-rs float-add A.bin B.bin ... [-scale s..] -o sum.bin\n  \
         nanobragg-rs matrix -cell a b c al be ga [-lambda L] [-misset x y z | -misset random -seed N] -o A.mat\n  \
         nanobragg-rs flags --markdown   the flag reference as a Markdown table\n  \
         nanobragg-rs gpu [--compile ARCH]   the GPU backend's device, or the kernel's NVRTC compile\n  \
         nanobragg-rs --version\n\n\
         Try: nanobragg-rs simulate --detector 512   (the built-in benchmark crystal)\n",
        version()
    )
}

/// Standard output that remembers its first write error instead of failing the run: the images are
/// still written, and `main` reports the error at the end (quietly for a closed pipe).
struct Stdout {
    inner: std::io::StdoutLock<'static>,
    error: Option<std::io::Error>,
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.error.is_none() {
            if let Err(e) = self.inner.write_all(buf) {
                self.error = Some(e);
            }
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if self.error.is_none() {
            if let Err(e) = self.inner.flush() {
                self.error = Some(e);
            }
        }
        Ok(())
    }
}

/// How a run ended.
enum Failure {
    /// Bad input or a file that could not be written: one line, exit 9.
    Error(crate::Error),
    /// Standard output or error could not be written.
    Stream(std::io::Error),
    /// A fit that did not converge (`refine`): its message, exit 1.
    NotConverged(String),
}

impl From<crate::Error> for Failure {
    fn from(e: crate::Error) -> Self {
        Failure::Error(e)
    }
}

fn simulate(args: &[String]) -> Result<(), Failure> {
    if args.is_empty() {
        // nanoBragg.c prints its usage and exits 9 when run with nothing to do.
        // as the user typed it: `nanoBragg --detector 512` under the drop-in link
        let cmd = if DROP_IN.load(std::sync::atomic::Ordering::Relaxed) { "nanoBragg" } else { "simulate" };
        return Err(crate::Error::setup(format!(
            "nothing to simulate: give a crystal (-cell/-mat with -hkl/-default_F), or try `{cmd} --detector 512` for the built-in demo crystal; `{cmd} --help` lists every flag"
        ))
        .into());
    }
    let (cfg, built_in) = parse::parse_with_built_in_crystal(args)?;
    let mut out = Stdout { inner: std::io::stdout().lock(), error: None };
    if built_in && !cfg.run.quiet {
        let _ = writeln!(out, "{}", parse::built_in_crystal_note(args));
    }
    // $NANOBRAGG_TIMINGS_JSON (set by bench-detailed): checked before the run, written after it
    let timings_json = std::env::var_os(crate::run::simulate::TIMINGS_JSON_ENV).filter(|p| !p.is_empty()).map(std::path::PathBuf::from);
    if let Some(p) = &timings_json {
        crate::io::atomic::target_kind(p)?;
    }
    let summary = crate::run::simulate::run(&cfg, &mut out)?;
    // after every check and output of the run (its target was checked with the images)
    // into --out-dir as every other output of the run
    if let Some(p) = &cfg.run.save_params {
        cfg.save_json(&crate::run::config::resolve_out(&cfg, p))?;
    }
    let _ = out.flush();
    if let Some(e) = out.error.take() {
        return Err(Failure::Stream(e));
    }
    if let Some(p) = &timings_json {
        let json = serde_json::to_vec(&crate::run::simulate::PhaseTimings::of(&summary)).expect("numbers always serialize");
        crate::io::atomic::write_atomic(p, &json)?;
    }
    if !cfg.run.quiet {
        writeln!(
            std::io::stderr(),
            "done: {} pixels, {} steps, setup {:.6} s, render {:.6} s, output {:.6} s, max_I = {}",
            summary.pixels,
            summary.steps,
            summary.timings.setup_s,
            summary.timings.render_s,
            summary.timings.io_s,
            crate::base::c::printf::g(summary.stats.max_i)
        )
        .map_err(Failure::Stream)?;
    }
    Ok(())
}

/// Run a subcommand that prints to standard output through [`Stdout`]: its files are still written
/// when standard output fails, and the failure then ends the run (quietly for a closed pipe, exit 9
/// for a full device); an error of the run itself comes first.
fn with_stdout(f: impl FnOnce(&mut dyn Write) -> crate::Result<()>) -> Result<(), Failure> {
    let mut out = Stdout { inner: std::io::stdout().lock(), error: None };
    let r = f(&mut out);
    let _ = out.flush();
    r?;
    match out.error.take() {
        Some(e) => Err(Failure::Stream(e)),
        None => Ok(()),
    }
}

/// Print `text` on standard output (help, version).
fn print_out(text: &str) -> Result<(), Failure> {
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes()).and_then(|_| o.flush()).map_err(Failure::Stream)
}

/// RAYON_NUM_THREADS as rayon reads it, refused when it cannot work (rayon would panic later).
fn check_thread_env() -> Result<(), crate::Error> {
    check_memory_env()?;
    let Ok(v) = std::env::var("RAYON_NUM_THREADS") else { return Ok(()) };
    let Ok(n) = v.trim().parse::<usize>() else { return Ok(()) }; // rayon ignores what it cannot parse
    if n > MAX_THREADS {
        return Err(crate::Error::flag(
            "RAYON_NUM_THREADS",
            format!("{n} threads is more than this program will start (at most {MAX_THREADS}); unset it or use --threads N"),
        ));
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(crate::base::cpu::useful_threads(n))
        .build_global()
        .map_err(|e| crate::Error::flag("RAYON_NUM_THREADS", format!("cannot start {n} threads: {e}")))
}

/// A `NANOBRAGG_MAX_MEMORY` that is not a size is refused (ignoring it would lift the limit the user
/// meant to set).
fn check_memory_env() -> Result<(), crate::Error> {
    match std::env::var_os("NANOBRAGG_MAX_MEMORY") {
        None => Ok(()),
        Some(v) => match v.to_str().and_then(crate::base::memory::parse_size) {
            Some(_) => Ok(()),
            None => Err(crate::Error::flag(
                "NANOBRAGG_MAX_MEMORY",
                format!("{}: not a size (e.g. 4G, 512M or a number of bytes)", v.to_string_lossy()),
            )),
        },
    }
}

/// Most worker threads we agree to start.
const MAX_THREADS: usize = 4096;

pub fn main() -> ExitCode {
    // a closed or full stderr loses the warning, never panics
    crate::base::log::set_warning_sink(|w| {
        let _ = writeln!(std::io::stderr(), "{w}");
    });
    #[cfg(feature = "progress")]
    crate::base::progress::set_progress_display(super::progress::terminal_bar);
    // Arguments are bytes on Unix: file names need not be UTF-8 (the C accepts any bytes).
    let mut args: Vec<String> = crate::base::os_text::os_args(std::env::args_os().skip(1).collect());
    // called as one of the C programs (a link named nanoBragg, noisify, nonBragg, nearBragg): run it
    if let Some(sub) = std::env::args_os().next().as_deref().and_then(|a| drop_in_subcommand(std::path::Path::new(a))) {
        args.insert(0, sub.to_string());
        DROP_IN.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let result = dispatch(&args);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Error(e)) => {
            let _ = writeln!(std::io::stderr(), "nanobragg-rs: error: {e}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
        // a closed pipe (`| head`, `| true`): stop quietly, as Unix tools do
        Err(Failure::NotConverged(m)) => {
            let _ = writeln!(std::io::stderr(), "nanobragg-rs: refine: {m}");
            ExitCode::from(1)
        }
        Err(Failure::Stream(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Stream(e)) => {
            let _ = writeln!(std::io::stderr(), "nanobragg-rs: error: cannot write to standard output or error: {e}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

/// Run under a drop-in name of the C suite (messages then name the command as typed).
static DROP_IN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The subcommand a drop-in name of the C suite stands for (the program's file name, e.g. a symbolic
/// link `nanoBragg` to this binary), so scripts written for the C programs run unchanged.
fn drop_in_subcommand(argv0: &std::path::Path) -> Option<&'static str> {
    match argv0.file_name()?.to_str()? {
        "nanoBragg" => Some("simulate"),
        "noisify" => Some("noisify"),
        "nonBragg" => Some("nonbragg"),
        "nearBragg" => Some("nearbragg"),
        _ => None,
    }
}

/// A subcommand's usage (its `--help`).
fn subcommand_usage(cmd: &str) -> &'static str {
    match cmd {
        "series" => crate::cli::series::SERIES_USAGE.trim_end(),
        "noisify" => crate::cli::noisify::NOISIFY_USAGE,
        "nonbragg" => crate::cli::nonbragg::NONBRAGG_USAGE,
        "nearbragg" => crate::cli::nearbragg::NEARBRAGG_USAGE,
        "float-add" => crate::apps::float_add::FLOAT_ADD_USAGE,
        _ => crate::apps::matrix::MATRIX_USAGE,
    }
}

fn dispatch(args: &[String]) -> Result<(), Failure> {
    let Some(cmd) = args.first() else {
        return print_out(&usage());
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "simulate" => {
            if rest.iter().any(|a| a == "--help" || a == "-h" || a == "-help") {
                return print_out(&help::help_text());
            }
            check_thread_env()?;
            // SIGINT/SIGTERM/SIGHUP remove this run's temporary files (exit 130/143/129)
            crate::io::atomic::install_signal_cleanup();
            simulate(rest)
        }
        "series" | "noisify" | "nonbragg" | "nearbragg" | "float-add" | "matrix" if rest.iter().any(|a| a == "--help" || a == "-h" || a == "-help") => {
            print_out(&format!("{}\n", subcommand_usage(cmd)))
        }
        "series" => {
            check_thread_env()?;
            crate::io::atomic::install_signal_cleanup();
            with_stdout(|out| crate::cli::series::main(rest, out))
        }
        "noisify" | "nonbragg" | "nearbragg" | "float-add" | "matrix" => {
            check_thread_env()?;
            crate::io::atomic::install_signal_cleanup();
            with_stdout(|out| crate::cli::suite::suite_main(cmd, rest, out))
        }
        "refine" if rest.iter().any(|a| a == "--help" || a == "-h" || a == "-help") => print_out(&format!("{}\n", crate::cli::refine::REFINE_USAGE)),
        "refine" => {
            check_thread_env()?;
            crate::io::atomic::install_signal_cleanup();
            let mut result = (true, String::new());
            with_stdout(|out| {
                result = crate::cli::refine::main(rest, out)?;
                Ok(())
            })?;
            if result.0 {
                Ok(())
            } else {
                Err(Failure::NotConverged(result.1))
            }
        }
        "flags" => print_out(&help::markdown_reference()),
        "gpu" if rest.iter().any(|a| a == "--help" || a == "-h" || a == "-help") => print_out(&format!("{}\n", crate::cli::gpu::GPU_USAGE)),
        "gpu" => with_stdout(|out| crate::cli::gpu::main(rest, out)),
        "--version" | "-V" | "version" => print_out(&format!("{}\n", version())),
        "--help" | "-h" | "help" => print_out(&usage()),
        other => Err(crate::Error::flag(other, "unknown command (expected simulate, series, refine, noisify, nonbragg, nearbragg, float-add, matrix or gpu; see `nanobragg-rs --help`)").into()),
    }
}
