//! Runtime dispatch for the image-wide loops outside the kernel (integer conversion, statistics):
//! the same code compiled for AVX2+FMA where the CPU has it, so a loop over f64 lanes runs 4 wide
//! instead of the x86-64 baseline's 2. (The kernel has its own dispatch, `kernel::simd`.)

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
        if crate::kernel::simd::detected_level() >= crate::kernel::simd::SimdLevel::Avx2 {
            // SAFETY: the kernel's own detection: AVX2 level and up means AVX2 and FMA (as row_avx2/row_avx512 assume)
            return unsafe { avx2(f) };
        }
    }
    f()
}
