//! `nanobragg-rs`: the command-line program. All the work is in the library; `cli::main` dispatches
//! the subcommands, prints errors as one line and gives the exit code (9 for bad input, as nanoBragg.c).

fn main() -> std::process::ExitCode {
    nanobragg::cli::main::main()
}
