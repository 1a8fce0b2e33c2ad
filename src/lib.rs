//! nanobragg-rs: a Rust port of James Holton's nanoBragg, the nanocrystal X-ray diffraction image
//! simulator. The C program (`nanoBragg.c`) is the specification. The library is a stack of layers;
//! a module imports only from its own layer or below (docs/architecture.md, kept by
//! `tests/architecture.rs`):
//!
//! ```text
//! L6 cli         argv in, exit code out: flag tables, parsers, help
//! L5 apps        series, noisify, nonbragg, float-add, matrix
//! L4 run         one simulation: load inputs, set up, render, write every output
//! L3 kernel      the pixel loop (scalar reference + SIMD)     stats   noise
//! L2 io          one module per file format
//! L1 experiment  everything nanoBragg.c computes before its pixel loop, no I/O     sfcalc: F from atoms
//! L0 base        errors, vectors, constants, CPU features, memory, the C's printf and RNG
//! ```
//!
//! Where each C feature lives: detector conventions, pivots, pix0, two-theta: [`experiment::detector`];
//! cell, `-mat`, misset, crystal size: [`experiment::crystal`]; divergence, dispersion, `-sourcefile`:
//! [`experiment::beam`]; the step rules: [`experiment::sampling`]; HKL lists, Fdump.bin and the F
//! lookup: [`experiment::structure_factors`]; sincg, sinc3, polarization: [`experiment::physics`];
//! the pixel loop: [`kernel`]; the C's random numbers: [`base::c::rng`]; the noise image: [`noise`];
//! the statistics the C prints: [`stats`]; files: [`io`].

pub mod base;
pub mod experiment;
pub mod sfcalc;
pub mod io;
pub mod kernel;
pub mod noise;
pub mod stats;
pub mod run;
pub mod apps;
pub mod cli;

pub use base::error::{Error, Result};
