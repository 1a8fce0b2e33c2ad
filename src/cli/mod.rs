//! Command line: one table of flags from which the parser, `--help` and the README reference are made. STUB.
pub mod flags;
