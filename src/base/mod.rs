//! The ground floor: what every layer may use and nothing in the crate above it — the error type,
//! vectors, constants, CPU features, the memory budget, the setup log, progress, and the C library's
//! `printf` and random numbers that the outputs must match bit for bit.

pub mod build;
pub mod c;
pub mod consts;
pub mod cpu;
pub mod disk;
pub mod dual;
pub mod error;
pub mod huge_pages;
pub mod image;
pub mod lane_math;
pub mod log;
pub mod memory;
pub mod os_text;
pub mod progress;
pub mod vec3;
