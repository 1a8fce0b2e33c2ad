//! `nanobragg-rs`: the command-line front end. All the work is in the library; this file only
//! dispatches subcommands, prints errors as one line and sets the exit code.

use nanobragg::cli::flags;
use std::io::Write;
use std::process::ExitCode;

/// Exit code for bad input, as nanoBragg.c uses.
const EXIT_BAD_INPUT: u8 = 9;

/// The benchmark crystal used when no crystal is described (see README "Quick start").
const DEFAULT_CRYSTAL: &[&str] = &["-cell", "100", "100", "100", "90", "90", "90", "-N", "5", "-default_F", "100", "-lambda", "6.2"];

fn version() -> String {
    format!("nanobragg-rs {} (git {})", env!("CARGO_PKG_VERSION"), option_env!("NANOBRAGG_GIT_COMMIT").unwrap_or("unknown"))
}

fn usage() -> String {
    format!(
        "{}\nA Rust port of nanoBragg (James Holton), the nanocrystal X-ray diffraction image simulator.\n\n\
         USAGE:\n  nanobragg-rs simulate [FLAGS]   render an image (nanoBragg's flags, verbatim)\n  \
         nanobragg-rs simulate --help    list every flag with units and defaults\n  \
         nanobragg-rs series [FLAGS] --frames N | --stills N --orientation random   a dataset (see README)\n  \
         nanobragg-rs flags --markdown   the flag reference as a Markdown table\n  \
         nanobragg-rs --version\n\n\
         Try: nanobragg-rs simulate --detector 512   (the built-in benchmark crystal)\n",
        version()
    )
}

fn simulate(args: &[String]) -> Result<(), nanobragg::Error> {
    if args.is_empty() {
        // nanoBragg.c prints its usage and exits 9 when run with nothing to do.
        return Err(nanobragg::Error::setup(
            "nothing to simulate: give a crystal (-cell/-mat with -hkl/-default_F), or try `simulate --detector 512` for the built-in demo crystal; `simulate --help` lists every flag",
        ));
    }
    let mut cfg = flags::parse_simulate_args(args)?;
    let no_crystal = cfg.params.cell.is_none() && cfg.params.mat_file.is_none() && cfg.params.hkl_file.is_none() && cfg.params.default_f == 0.0;
    let dump = nanobragg::experiment::resolve_out(&cfg, &cfg.params.dump_file);
    if no_crystal && !dump.is_file() {
        // No crystal at all: run the embedded benchmark crystal; the user's flags still apply on top.
        let mut with_default: Vec<String> = DEFAULT_CRYSTAL.iter().map(|s| s.to_string()).collect();
        with_default.extend(args.iter().cloned());
        cfg = flags::parse_simulate_args(&with_default)?;
        if !cfg.run.quiet {
            println!("no crystal given: using the built-in benchmark crystal ({})", DEFAULT_CRYSTAL.join(" "));
        }
    }
    if let Some(p) = &cfg.run.save_params {
        cfg.save_json(p)?;
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let summary = nanobragg::simulate::run(&cfg, &mut out)?;
    let _ = out.flush();
    if !cfg.run.quiet {
        eprintln!(
            "done: {} pixels, {} steps, setup {:.6} s, render {:.6} s, output {:.6} s, max_I = {}",
            summary.pixels,
            summary.steps,
            summary.timings.setup_s,
            summary.timings.render_s,
            summary.timings.io_s,
            nanobragg::cfmt::g(summary.stats.max_i)
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        print!("{}", usage());
        return ExitCode::SUCCESS;
    };
    let rest = &args[1..];
    let result = match cmd.as_str() {
        "simulate" => {
            if rest.iter().any(|a| a == "--help" || a == "-h" || a == "-help") {
                print!("{}", flags::help_text());
                return ExitCode::SUCCESS;
            }
            simulate(rest)
        }
        "series" => nanobragg::series::main(rest),
        "flags" => {
            print!("{}", flags::markdown_reference());
            return ExitCode::SUCCESS;
        }
        "--version" | "-V" | "version" => {
            println!("{}", version());
            return ExitCode::SUCCESS;
        }
        "--help" | "-h" | "help" => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        other => Err(nanobragg::Error::flag(other, "unknown command (expected `simulate` or `series`; see `nanobragg-rs --help`)")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nanobragg-rs: error: {e}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}
