//! nanobragg-rs: a Rust port of James Holton's nanoBragg, the nanocrystal X-ray diffraction image
//! simulator. The C program (`nanoBragg.c`) is the specification; the modules follow its data flow:
//!
//! ```text
//! argv ─► cli (flag table) ─► Config ─► inputs (every file read) ─► experiment (no I/O: geometry,
//!      crystal, sources, steps, Fhkl) ─► summary (the C's setup lines)
//!      ─► kernel (scalar reference + fast paths) ─► FloatImage + stats ─► io (float, SMV, PGM, PNG, noise)
//! ```
//!
//! Where each C feature lives:
//! * detector conventions, pivots, pix0, rotations, two-theta: [`geometry`]
//! * unit cell, `-mat`, misset, reciprocal vectors, crystal size: [`crystal`]
//! * divergence/dispersion grid and `-sourcefile`: [`sources`]
//! * sampling step rules (phi, divergence, dispersion, thickness, mosaic, oversample): [`steps`]
//! * HKL text files, Fdump.bin, nearest-neighbour and tricubic lookup: [`structure_factors`]
//! * sincg, sinc3, polarization, lattice shapes: [`physics`]
//! * the pixel loop: [`kernel`]
//! * the C's random numbers (ran1, poidev, gaussdev, mosaic matrices): [`rng`], noise image: [`noise`]
//! * statistics printed by the C: [`stats`]
//! * files: [`io`]; C-style number formatting: [`cfmt`]

/// The `bench-detailed` harness (cargo feature `harness`, on by default).
#[cfg(feature = "harness")]
pub mod bench;
pub mod base;
pub mod cli;
pub mod config;
pub mod crystal;
pub mod experiment;
pub mod inputs;
pub mod float_add;
pub mod geometry;
pub mod io;
pub mod kernel;
pub mod limits;
pub mod matrix;
pub mod model;
pub mod noise;
pub mod noisify;
pub mod nonbragg;
pub mod params;
pub mod physics;
pub mod series;
pub mod simulate;
pub mod sources;
pub mod stats;
pub mod steps;
pub mod structure_factors;
pub mod suite;
pub mod summary;

pub use base::error::{Error, Result};
