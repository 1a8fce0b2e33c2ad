//! Entry points of the rest of the nanoBragg suite in the same binary: `noisify`, `nonbragg`,
//! `float-add`, `matrix` (one dispatcher so that `main.rs` needs one line).

use crate::Result;
use std::io::Write;

/// Run one suite subcommand with its arguments (the C programs' flags, verbatim), printing to `out`
/// (standard output).
pub fn suite_main(cmd: &str, args: &[String], out: &mut dyn Write) -> Result<()> {
    let r = match cmd {
        "noisify" => {
            let c = crate::cli::noisify::parse_noisify_args(args)?;
            crate::apps::noisify::run(&c, out).map(|_| ())
        }
        "nonbragg" => {
            let c = crate::cli::nonbragg::parse_nonbragg_args(args)?;
            crate::apps::nonbragg::run(&c, out)
        }
        "nearbragg" => {
            let c = crate::cli::nearbragg::parse_nearbragg_args(args)?;
            crate::apps::nearbragg::run(&c, out)
        }
        "float-add" => crate::apps::float_add::run(args, out),
        "matrix" => crate::apps::matrix::run(&crate::cli::matrix::parse_matrix_args(args)?, out),
        other => Err(crate::Error::flag(other, "unknown command")),
    };
    let _ = out.flush();
    r
}
