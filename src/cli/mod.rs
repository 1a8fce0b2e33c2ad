//! Command line: argv in, exit code out. One table of flags ([`flags::FLAGS`]) from which the parser
//! ([`parse`]), `--help` and the flag reference ([`help`]) are made; `base::os_text` keeps non-UTF-8 words.

pub mod flags;
pub mod gpu;
pub mod help;
pub mod main;
pub mod matrix;
pub mod nearbragg;
#[cfg(test)]
mod nearbragg_lanes;
pub mod noisify;
pub mod nonbragg;
pub mod parse;
#[cfg(feature = "progress")]
pub mod progress;
pub mod refine;
pub mod series;
pub mod suite;

#[cfg(test)]
mod tests;
