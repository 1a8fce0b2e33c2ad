//! Zeroed `f64` arrays in mappings of their own, whose whole 2 MiB ranges the kernel is asked to back
//! with transparent huge pages (`MADV_HUGEPAGE`, honoured where THP is `always` or `madvise`). For
//! arrays written once and read every frame (the kept pixel geometry, 10 MiB at 512²): one page fault
//! per 2 MiB instead of 512, and a handful of TLB entries for what the render streams through. The
//! light 512² series of 20 frames on an Intel Xeon (Emerald Rapids), 80 alternated runs: page faults
//! 4600 -> 2050, wall 105.1 -> 100.8 ms and CPU 189.9 -> 183.9 ms (medians).
//!
//! The tail short of a whole 2 MiB stays in small pages (no memory beyond the array's is touched), and
//! where there is no mapping (`mmap` refused) the array is an ordinary `Vec`.

use std::ptr::NonNull;

/// The huge page size of x86-64 and aarch64 Linux with 4 KiB base pages.
const HUGE: usize = 2 << 20;

/// A zeroed `[f64]` (see the module's docs); dereferences to the slice.
pub struct HugeF64s {
    ptr: NonNull<f64>,
    len: usize,
    owner: Owner,
}

/// What frees the array.
enum Owner {
    /// An anonymous mapping holding the array at a 2 MiB boundary (`ptr` points into it).
    Mapped(#[allow(dead_code)] memmap2::MmapMut),
    /// The fallback's buffer (`ptr` is its pointer; never touched through the Vec).
    Heap(#[allow(dead_code)] Vec<f64>),
}

// SAFETY: the array is owned by this value alone, as a Vec's buffer is by the Vec.
unsafe impl Send for HugeF64s {}
unsafe impl Sync for HugeF64s {}

impl HugeF64s {
    /// `len` zeros.
    pub fn zeroed(len: usize) -> HugeF64s {
        Self::mapped(len).unwrap_or_else(|| {
            let mut v = vec![0.0; len];
            HugeF64s { ptr: NonNull::new(v.as_mut_ptr()).expect("a Vec's pointer is not null"), len, owner: Owner::Heap(v) }
        })
    }

    /// Whether the array lies in a mapping of its own (else in the heap).
    pub fn is_mapped(&self) -> bool {
        matches!(self.owner, Owner::Mapped(_))
    }

    /// An anonymous mapping (`memmap2`, as the project's other mappings) 2 MiB longer than the
    /// array, the array from its first 2 MiB boundary on: the spare bytes before and after are never
    /// touched, so they take address space, not memory. `None` where mapping fails (or for no bytes).
    fn mapped(len: usize) -> Option<HugeF64s> {
        let bytes = len.checked_mul(8).filter(|&b| b > 0)?;
        let mut map = memmap2::MmapMut::map_anon(bytes.checked_add(HUGE)?).ok()?;
        let at = map.as_ptr() as usize;
        let head = at.next_multiple_of(HUGE) - at;
        #[cfg(target_os = "linux")]
        if bytes >= HUGE {
            // advice only (refused or ignored where THP is off): the whole 2 MiB ranges, not the tail
            let _ = map.advise_range(memmap2::Advice::HugePage, head, bytes / HUGE * HUGE);
        }
        // not null, and aligned for f64: a 2 MiB boundary within the mapping
        let ptr = NonNull::new(map[head..head + bytes].as_mut_ptr() as *mut f64)?;
        Some(HugeF64s { ptr, len, owner: Owner::Mapped(map) })
    }
}

impl std::ops::Deref for HugeF64s {
    type Target = [f64];
    #[inline(always)]
    fn deref(&self) -> &[f64] {
        // SAFETY: `len` f64s at `ptr`, aligned, zeroed by the kernel or the Vec or written since,
        // alive as long as `self`
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for HugeF64s {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [f64] {
        // SAFETY: as `deref`, and `&mut self` is the only reference to the array
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zeros at first, then what was written, at sizes below, at and across whole 2 MiB ranges.
    #[test]
    fn arrays_start_zeroed_and_keep_what_is_written() {
        for len in [1usize, 511, 512, HUGE / 8, HUGE / 8 + 1, 3 * HUGE / 8 - 7] {
            let mut a = HugeF64s::zeroed(len);
            assert_eq!(a.len(), len);
            assert!(a.iter().all(|&x| x.to_bits() == 0), "len {len}");
            assert!(a.is_mapped());
            for (i, x) in a.iter_mut().enumerate() {
                *x = i as f64 * 0.5;
            }
            assert!(a.iter().enumerate().all(|(i, &x)| x == i as f64 * 0.5), "len {len}");
            assert_eq!(a.as_ptr() as usize % HUGE, 0, "len {len}");
        }
    }

    /// No bytes: the empty Vec, no mapping.
    #[test]
    fn an_empty_array_is_a_vec() {
        let a = HugeF64s::zeroed(0);
        assert!(a.is_empty() && !a.is_mapped());
    }

    /// Many arrays made and dropped: each mapping is returned (no growth of the process's mappings).
    #[test]
    fn dropped_arrays_are_unmapped() {
        let maps = || std::fs::read_to_string("/proc/self/maps").map(|m| m.lines().count()).ok();
        let before = maps();
        for _ in 0..1024 {
            let mut a = HugeF64s::zeroed(HUGE / 8 + 100);
            a[HUGE / 8] = 1.0;
        }
        if let (Some(b), Some(a)) = (before, maps()) {
            // other tests' threads (their stacks, arenas) may map some meanwhile; 1024 leaked
            // mappings would show
            assert!(a < b + 512, "mappings {b} -> {a}");
        }
    }
}
