//! Runtime dispatch for the image-wide loops outside the kernel (integer conversion, statistics):
//! the same code compiled for AVX2+FMA where the CPU has it, so a loop over f64 lanes runs 4 wide
//! instead of the x86-64 baseline's 2; and the CPU's SIMD level, which the kernel's dispatch also reads.

/// Run `f`, compiled for AVX2+FMA when this CPU supports it. Results are the same either way: the
/// loops it serves use no FMA contraction (Rust never contracts `a * b + c`) and no reassociation.
#[inline(always)]
pub fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        /// # Safety
        /// The CPU must support AVX2 and FMA.
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if detected_level() >= SimdLevel::Avx2 {
            // SAFETY: the kernel's own detection: AVX2 level and up means AVX2 and FMA (as row_avx2/row_avx512 assume)
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// `lanes(args)` (a named `#[inline(always)]` function) compiled for AVX2+FMA where the CPU has it,
/// else for the baseline: the dispatch of [`with_avx2`] for loops LLVM must inline into the AVX2 copy
/// (a closure given to `with_avx2` sometimes stays a call, compiled for the baseline). Used as the
/// calling function's whole body: `avx2_call!(lanes(seg: &[f32], mean: f64) -> f64)`.
macro_rules! avx2_call {
    ($f:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty) => {{
        #[cfg(target_arch = "x86_64")]
        if $crate::base::cpu::detected_level() >= $crate::base::cpu::SimdLevel::Avx2 {
            /// # Safety
            /// The CPU must support AVX2 and FMA.
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2($($arg: $ty),*) -> $ret {
                $f($($arg),*)
            }
            // SAFETY: AVX2 level and up means AVX2 and FMA (base::cpu's detection)
            return unsafe { avx2($($arg),*) };
        }
        $f($($arg),*)
    }};
}
pub(crate) use avx2_call;

/// [`avx2_call`] at the widest level: compiled for AVX-512 (F, DQ, VL) where the CPU has it (as
/// [`with_widest`]), else for AVX2+FMA, else for the baseline.
macro_rules! widest_call {
    ($f:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty) => {{
        #[cfg(target_arch = "x86_64")]
        if $crate::base::cpu::detected_level() >= $crate::base::cpu::SimdLevel::Avx512 {
            /// # Safety
            /// The CPU must support AVX-512 F, DQ and VL, AVX2 and FMA.
            #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
            unsafe fn avx512($($arg: $ty),*) -> $ret {
                $f($($arg),*)
            }
            // SAFETY: the AVX-512 level means AVX-512 F/DQ/VL, and AVX2 and FMA with them
            return unsafe { avx512($($arg),*) };
        }
        $crate::base::cpu::avx2_call!($f($($arg: $ty),*) -> $ret)
    }};
}
pub(crate) use widest_call;

/// Run `f` compiled for the widest vectors this CPU has: AVX-512 (F, DQ, VL) where it has them, else
/// as [`with_avx2`]. For loops bound by their arithmetic per pixel, such as the int image's
/// conversion through f64 (16 pixels per register pair instead of 8: 2048² 3.9 -> ~1.5 ms of CPU,
/// 2026-11-27); the same results at every level, for the reasons given at [`with_avx2`].
#[inline(always)]
pub fn with_widest<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        /// # Safety
        /// The CPU must support AVX-512 F, DQ and VL, AVX2 and FMA.
        #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if detected_level() >= SimdLevel::Avx512 {
            // SAFETY: the kernel's own detection: the AVX-512 level means AVX-512 F/DQ/VL, and AVX2 and FMA with them
            return unsafe { avx512(f) };
        }
    }
    with_avx2(f)
}

/// The instruction set the SIMD backend is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdLevel {
    /// Fast kernel compiled for the baseline target: groups of 8 pixels (16 in f32).
    Portable,
    /// Fast kernel with AVX2 + FMA: groups of 32 pixels (f64 or f32), the sample loop of the
    /// usual crystal in hand-written intrinsics (`kernel::avx2`).
    Avx2,
    /// Fast kernel with AVX-512: groups of 32 pixels (f64 or f32), four (two) registers per quantity.
    /// (Wider groups amortize the per-group work and let two groups' chains of divisions and square
    /// roots overlap; measured best on this project's machines, see `simd.rs`.) The
    /// usual crystal's sample loop is the AVX2 level's hand-written one, taking a group's lanes
    /// four (eight) at a time: it does per sample what the generic loop does in about 2.5× the
    /// time at the same width, more than twice the lanes can win back (see `row_avx512`).
    Avx512,
}

impl SimdLevel {
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Portable => "portable",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
        }
    }
    pub fn parse(s: &str) -> Option<SimdLevel> {
        match s.to_ascii_lowercase().as_str() {
            "portable" | "generic" => Some(SimdLevel::Portable),
            "avx2" => Some(SimdLevel::Avx2),
            "avx512" | "avx-512" => Some(SimdLevel::Avx512),
            _ => None,
        }
    }
    /// Every level this CPU can run, lowest first.
    pub fn available() -> Vec<SimdLevel> {
        [SimdLevel::Portable, SimdLevel::Avx2, SimdLevel::Avx512].into_iter().filter(|l| *l <= detected_level()).collect()
    }
}

/// Whether `f64::mul_add` is an instruction here, as the row functions [`avx2_call`] and
/// [`widest_call`] compile are (x86-64: AVX2 and FMA; other targets: assumed, as on AArch64), and not
/// a library call.
pub fn fma_is_fast() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        detected_level() >= SimdLevel::Avx2
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        true
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


/// Threads worth starting for `requested`: at most four per core (more only cost the time to start
/// them: 4,000 threads took seconds). The images never depend on the thread count.
pub fn useful_threads(requested: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    requested.clamp(1, 4 * cores)
}
