//! Runtime CPU dispatch for the fast kernel (as rav1e does): the same generic row function is
//! compiled for AVX-512, AVX2+FMA and the baseline x86-64/other target, and the best level the CPU
//! supports is chosen at run time. `NANOBRAGG_SIMD=avx512|avx2|portable|scalar` forces a lower level
//! (for testing and benchmarking); `scalar` runs the reference kernel.

use super::fast::{render_row, Prepared};
use super::lanes::Real;
use super::OutOfRange;
use crate::experiment::Experiment;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SimdLevel {
    /// The reference kernel (mirror of the C loop).
    Scalar,
    /// Fast kernel compiled for the baseline target: groups of 8 pixels (16 in f32).
    Portable,
    /// Fast kernel with AVX2 + FMA: groups of 16 pixels (f64 or f32).
    Avx2,
    /// Fast kernel with AVX-512: groups of 16 pixels (32 in f32), two registers per quantity.
    /// (Wider groups amortize the per-group work; measured best on this project's machines.)
    Avx512,
}

impl SimdLevel {
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Portable => "portable",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
        }
    }
    pub fn parse(s: &str) -> Option<SimdLevel> {
        match s.to_ascii_lowercase().as_str() {
            "scalar" | "reference" => Some(SimdLevel::Scalar),
            "portable" | "generic" => Some(SimdLevel::Portable),
            "avx2" => Some(SimdLevel::Avx2),
            "avx512" | "avx-512" => Some(SimdLevel::Avx512),
            _ => None,
        }
    }
}

/// The best level this CPU supports.
pub fn detected_level() -> SimdLevel {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq") && is_x86_feature_detected!("avx512vl") {
            return SimdLevel::Avx512;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return SimdLevel::Avx2;
        }
    }
    SimdLevel::Portable
}

/// The level to use: the detected one, lowered by `NANOBRAGG_SIMD` if set (never raised).
pub fn active_level() -> SimdLevel {
    let detected = detected_level();
    match std::env::var("NANOBRAGG_SIMD").ok().and_then(|v| SimdLevel::parse(&v)) {
        Some(forced) => forced.min(detected),
        None => detected,
    }
}

/// Name of the level in use, for reports.
pub fn simd_level_name() -> &'static str {
    active_level().name()
}

/// Render one row with the fast kernel at `level` (not `Scalar`); returns its omega sum and the first
/// out-of-range interpolation, if any.
pub fn render_row_at<T: Real>(level: SimdLevel, exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> (f64, Option<OutOfRange>) {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => unsafe { row_avx512(exp, prep, s, interpolate, out) },
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => unsafe { row_avx2(exp, prep, s, interpolate, out) },
        _ => row_portable(exp, prep, s, interpolate, out),
    }
}

fn row_portable<T: Real>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> (f64, Option<OutOfRange>) {
    if std::mem::size_of::<T>() == 4 {
        render_row::<T, 16>(exp, prep, s, interpolate, out)
    } else {
        render_row::<T, 8>(exp, prep, s, interpolate, out)
    }
}

/// # Safety
/// The CPU must support AVX2 and FMA (checked by `detected_level`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_avx2<T: Real>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> (f64, Option<OutOfRange>) {
    render_row::<T, 16>(exp, prep, s, interpolate, out)
}

/// # Safety
/// The CPU must support AVX-512 F/DQ/VL (checked by `detected_level`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
unsafe fn row_avx512<T: Real>(exp: &Experiment, prep: &Prepared<T>, s: usize, interpolate: bool, out: &mut [f32]) -> (f64, Option<OutOfRange>) {
    if std::mem::size_of::<T>() == 4 {
        render_row::<T, 32>(exp, prep, s, interpolate, out)
    } else {
        render_row::<T, 16>(exp, prep, s, interpolate, out)
    }
}
