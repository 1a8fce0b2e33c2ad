//! The plan: which backend renders (the scalar reference or the SIMD kernel, at which level) and
//! whether the hand-written sample loop may run, from the CPU and the environment
//! (`NANOBRAGG_SIMD=avx512|avx2|portable` lowers the SIMD level, `NANOBRAGG_SIMD=scalar` or
//! `reference` picks the reference backend; `NANOBRAGG_HAND_LOOP=off` keeps the generic loop).

use super::backend::REFERENCE_NAME;
use crate::base::cpu::{detected_level, SimdLevel};
use crate::experiment::params::Precision;

/// How to render, apart from the physics: which backend is asked for (the planner may fall back to
/// the reference, `kernel::kernel_for`) and the arithmetic of the SIMD kernel's per-sample work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RenderOptions {
    pub backend: Backend,
    pub precision: Precision,
}

impl Default for RenderOptions {
    /// The process's backend ([`active_backend`]) in double precision.
    fn default() -> Self {
        RenderOptions { backend: active_backend(), precision: Precision::Double }
    }
}

/// Which render backend to use: the planner's input and output (see `kernel::kernel_for`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The scalar reference kernel, a mirror of the C loop (named `scalar` in reports and in
    /// `NANOBRAGG_SIMD`).
    Reference,
    /// The SIMD kernel at this instruction-set level.
    Simd(SimdLevel),
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Reference => REFERENCE_NAME,
            Backend::Simd(level) => level.name(),
        }
    }
    /// `scalar`/`reference`, or a SIMD level's name.
    pub fn parse(s: &str) -> Option<Backend> {
        match s.to_ascii_lowercase().as_str() {
            "scalar" | "reference" => Some(Backend::Reference),
            other => SimdLevel::parse(other).map(Backend::Simd),
        }
    }
}

/// The backend requested for this process: SIMD at the detected level, lowered (never raised) or
/// replaced by the reference through `NANOBRAGG_SIMD`.
pub fn active_backend() -> Backend {
    let detected = detected_level();
    match std::env::var("NANOBRAGG_SIMD").ok().and_then(|v| Backend::parse(&v)) {
        Some(Backend::Reference) => Backend::Reference,
        Some(Backend::Simd(forced)) => Backend::Simd(forced.min(detected)),
        None => Backend::Simd(detected),
    }
}

/// `NANOBRAGG_HAND_LOOP=off` (or `0`, `no`, `false`) keeps every SIMD level on the generic sample
/// loop: the A/B switch for the hand-written one (e.g. the generic 512-bit loop against it on an
/// AVX-512 CPU). Reports name it with the level (`bench::machine`).
pub const HAND_LOOP_ENV: &str = "NANOBRAGG_HAND_LOOP";

/// Whether the hand-written sample loop may run in this process (see [`HAND_LOOP_ENV`]).
pub fn hand_loop_enabled() -> bool {
    !std::env::var(HAND_LOOP_ENV).is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "off" | "0" | "no" | "false"))
}

/// The same as [`active_backend`] (the name it had when SIMD levels and backends were one enum).
pub fn active_level() -> Backend {
    active_backend()
}

/// Name of the backend in use, for reports (`scalar` for the reference).
pub fn simd_level_name() -> &'static str {
    active_backend().name()
}
