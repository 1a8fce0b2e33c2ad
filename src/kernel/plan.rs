//! The plan: which backend renders (the scalar reference or the SIMD kernel, at which level) and
//! whether the hand-written sample loop may run, from the CPU and the environment
//! (`NANOBRAGG_SIMD=avx512|avx2|portable` lowers the SIMD level, `NANOBRAGG_SIMD=scalar` or
//! `reference` picks the reference backend; `NANOBRAGG_HAND_LOOP=off` keeps the generic loop).

use super::backend::REFERENCE_NAME;
use crate::base::cpu::{detected_level, SimdLevel};
use crate::experiment::params::Precision;
use super::lanes::CHEB_MAX_N;

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
    /// The CUDA kernel (`kernel::gpu`) on the process's device.
    Gpu,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Reference => REFERENCE_NAME,
            Backend::Simd(level) => level.name(),
            Backend::Gpu => "gpu",
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
        Some(Backend::Gpu) | None => Backend::Simd(detected),
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

/// Most wavelength groups the hand loop's grouped form (`hand::HandGroups`) takes (it keeps one
/// group's values per orientation on the stack); more, or fewer than two sources per group, keep
/// h = A/λ + K.
pub const HAND_GROUPS_MAX: usize = 16;

/// Largest sources × orientations for the hoisted table (`hand::HandHoist`, 3 MiB of f64); more runs
/// the dot products.
pub const HOIST_MAX_PAIRS: usize = 1 << 14;

/// What decides the form of the SIMD kernel's sample loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoopShape {
    /// Crystal size in cells (N_a, N_b, N_c).
    pub n: [f64; 3],
    /// Square (sincg) lattice factor.
    pub square: bool,
    pub sources: usize,
    /// Distinct wavelengths among the sources.
    pub wavelengths: usize,
    /// Mosaic domains × phi steps.
    pub orientations: usize,
}

/// The form of the sample loop a [`LoopShape`] gets, by the kernel's own rules (the benchmark
/// harness's roofline reads them here instead of re-deriving them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopPlan {
    /// The hand-written loop's lattice (square spot, integer N ≤ `CHEB_MAX_N`) on a CPU that runs it.
    pub hand: bool,
    /// Miller indices from a per-source table (`hand::HandHoist`).
    pub hoisted: bool,
    /// Sources grouped by wavelength (`hand::HandGroups`); the data-dependent conditions (|K| small,
    /// no `-dmin` or `-oversample_polar`) are assumed to hold.
    pub groups: bool,
}

/// Whether the hand loop's lattice applies: a square spot and every N an integer ≤ `CHEB_MAX_N`.
pub fn hand_lattice_fits(square: bool, n: [f64; 3]) -> bool {
    square && n.iter().all(|&n| n <= CHEB_MAX_N as f64 && n.fract() == 0.0)
}

/// Whether the hoisted table is built: two sources or more, at most [`HOIST_MAX_PAIRS`] pairs.
pub fn hoist_fits(sources: usize, orientations: usize) -> bool {
    sources >= 2 && sources.saturating_mul(orientations) <= HOIST_MAX_PAIRS
}

/// Whether sources are grouped by wavelength: at most [`HAND_GROUPS_MAX`] wavelengths, two sources
/// or more each on average.
pub fn groups_fit(sources: usize, wavelengths: usize) -> bool {
    wavelengths >= 1 && wavelengths <= HAND_GROUPS_MAX && sources >= 2 * wavelengths
}

/// The loop form for `shape` on a CPU with the hand loop.
pub fn loop_plan(shape: &LoopShape) -> LoopPlan {
    let hand = hand_lattice_fits(shape.square, shape.n);
    let hoisted = hoist_fits(shape.sources, shape.orientations.max(1));
    LoopPlan { hand, hoisted, groups: hand && hoisted && groups_fit(shape.sources, shape.wavelengths) }
}

/// The same as [`active_backend`] (the name it had when SIMD levels and backends were one enum).
pub fn active_level() -> Backend {
    active_backend()
}

/// Name of the backend in use, for reports (`scalar` for the reference).
pub fn simd_level_name() -> &'static str {
    active_backend().name()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(n: f64, sources: usize, wavelengths: usize, orientations: usize) -> LoopShape {
        LoopShape { n: [n; 3], square: true, sources, wavelengths, orientations }
    }

    #[test]
    fn the_loop_forms_follow_the_kernels_limits() {
        // one source: no table, no groups
        assert_eq!(loop_plan(&shape(5.0, 1, 1, 1)), LoopPlan { hand: true, hoisted: false, groups: false });
        // divergence on one wavelength: table and one group
        assert_eq!(loop_plan(&shape(5.0, 9, 1, 10)), LoopPlan { hand: true, hoisted: true, groups: true });
        // the table's limit is on sources × orientations, inclusive
        assert!(loop_plan(&shape(5.0, 16, 1, HOIST_MAX_PAIRS / 16)).hoisted);
        assert!(!loop_plan(&shape(5.0, 16, 1, HOIST_MAX_PAIRS / 16 + 1)).hoisted);
        // more wavelengths than groups, or fewer than two sources each
        assert!(!loop_plan(&shape(5.0, 2 * (HAND_GROUPS_MAX + 1), HAND_GROUPS_MAX + 1, 1)).groups);
        assert!(!loop_plan(&shape(5.0, 3, 2, 1)).groups);
        // the hand lattice: integer N up to the Chebyshev limit, square spots only
        assert!(!loop_plan(&shape(CHEB_MAX_N as f64 + 1.0, 1, 1, 1)).hand);
        assert!(!loop_plan(&shape(5.5, 1, 1, 1)).hand);
        assert!(!loop_plan(&LoopShape { square: false, ..shape(5.0, 1, 1, 1) }).hand);
    }
}
