//! The companion programs of the nanoBragg suite and the dataset runner, built on `run` and `kernel`.

pub mod float_add;
pub mod matrix;
pub mod nearbragg;
pub mod noisify;
pub mod nonbragg;
pub mod refine;
pub mod series;
