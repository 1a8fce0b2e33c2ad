//! What the C programs take from their C library, reproduced exactly: `printf`'s number formats and
//! Numerical Recipes' random numbers (the noise images are bit-identical for the same seed).

pub mod printf;
pub mod rng;
