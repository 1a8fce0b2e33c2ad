//! How close to the machine's limit a run is: the machine's floating-point peak per SIMD level and
//! precision (a small FMA loop on one core, measured at start-up), its write bandwidth into the page
//! cache (where the outputs go), an estimate of the kernel's floating-point work per sample, and per
//! size the achieved rates against those peaks, with warnings for implausible figures.
//!
//! Flops count an FMA as 2 (one multiply, one add), in the peak and in the estimate alike.

use nanobragg::kernel::lanes::CHEB_MAX_N;
use nanobragg::kernel::plan::{loop_plan, LoopPlan, LoopShape};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Utilization above this is implausible for this kernel (or the estimate is too high).
pub const HIGH_UTILIZATION: f64 = 0.9;
/// Utilization below this says the estimate or the timing is off, or something else bounds the run.
pub const LOW_UTILIZATION: f64 = 0.1;

/// The measured peak of one SIMD level (the kernel's levels: avx512, avx2, portable).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelPeak {
    pub level: String,
    /// One core, f64 and f32, GFLOP/s (best of three short runs of independent FMA chains).
    pub f64_gflops_per_core: f64,
    pub f32_gflops_per_core: f64,
}

/// What the machine can do, measured once at start-up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MachineLimits {
    pub peaks: Vec<LevelPeak>,
    /// Writing a 64 MiB file in 1 MiB blocks into the scratch folder (page cache, as our outputs), MB/s.
    pub write_mb_per_s: Option<f64>,
    /// How each figure was measured.
    pub method: String,
}

impl MachineLimits {
    /// The peak per core for a kernel level name and precision; the reference ("scalar") kernel and an
    /// unknown level are compared with the baseline ("portable") peak.
    pub fn peak_per_core(&self, level: &str, single: bool) -> Option<(&str, f64)> {
        let want = if level == "scalar" { "portable" } else { level };
        let p = self.peaks.iter().find(|p| p.level == want).or_else(|| self.peaks.iter().find(|p| p.level == "portable"))?;
        Some((&p.level, if single { p.f32_gflops_per_core } else { p.f64_gflops_per_core }))
    }
}

/// The roofline figures of one size (all from the warm, in-process medians).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Roofline {
    /// Threads the render used.
    pub threads: usize,
    /// Warm render median × threads / samples, in ns.
    pub ns_per_sample_per_core: Option<f64>,
    /// Estimated floating-point operations per sample ([`flops_per_sample`]).
    pub flops_per_sample_estimate: f64,
    pub achieved_gflops: Option<f64>,
    /// Measured peak per core × threads, at the level that rendered (see `peak_level`).
    pub peak_gflops: Option<f64>,
    pub peak_level: Option<String>,
    pub flop_utilization: Option<f64>,
    /// Bytes of the warm run's output files.
    pub bytes_written: Option<u64>,
    /// bytes_written / warm output median (the output phase also converts and sums: a lower bound).
    pub write_mb_per_s: Option<f64>,
    pub peak_write_mb_per_s: Option<f64>,
    pub write_utilization: Option<f64>,
}

/// The work of an experiment as the fast kernel sees it (src/kernel/fast.rs, src/kernel/avx2.rs).
#[derive(Clone, Copy, Debug)]
pub struct Work {
    /// Crystal size in cells (N_a, N_b, N_c).
    pub n: [f64; 3],
    /// Square (sincg) lattice factor; round/gauss/tophat spots use the scalar lattice factor.
    pub square: bool,
    pub sources: usize,
    /// Distinct wavelengths among the sources (divergence steps share one: `fast::HandGroups`).
    pub wavelengths: usize,
    /// Mosaic domains × phi steps.
    pub orientations: usize,
    /// `-precision single`: shorter polynomials for 2cos(πδ).
    pub single: bool,
}

/// An estimate of the floating-point operations per sample, counted from the hand-written
/// `plain_chunk` in src/kernel/avx2.rs (the usual group: square spot, N ≤ 24) or the generic
/// `sample_chunk` in src/kernel/fast.rs, and `render_group` there (FMA = 2; a rounding or conversion
/// is not counted):
/// * per sample: Miller indices 3 × (1 mul + 2 FMA) = 15, or with several sources (the hoisted
///   form, `fast::HandHoist`) 3 FMA = 6 plus A = a·(d − i₀), 3 × (3 mul + 2 add) = 15, once per
///   sub-pixel and orientation, so 15/sources per sample; nearest integers 3 × 1 sub; per axis with
///   N > 1, 2cos(πδ) 16 in the hand loop (δ, δ², 7 FMA; 10 in single precision: 4 FMA) or 17 in
///   the generic one (δ, δ², 6 FMA, δ·p, 1 FMA; 11 with 3 FMA), y² 1 and 2 per root of U_{N−1}
///   (⌊(N−1)/2⌋ of them, in pairs of sub + FMA + mul), or about 30 for `sincg_sqr` (N > 24); a
///   non-square spot about 40; F_latt, (F·F_latt)² and the sum 5 in the hand loop (F² × F_latt² ×
///   weight and the sum: 7 in the generic one);
/// * with wavelength groups (`fast::HandGroups`: hand loop, hoisted, two sources or more per
///   wavelength; assumed to apply, as it does unless |K| > 0.75, `-dmin` or `-oversample_polar`):
///   per sample h − ½ = (B − ½) + K 3 adds and per axis with N > 1 2cos(πh) 3 (mul + FMA) instead of
///   the Miller indices, nearest integers and 2cos(πδ); per group, sub-pixel and orientation B and
///   B − ½ 2 per axis and per axis with N > 1 31 (δ, δ², 2cos 7 FMA, 2sin 7 FMA and δ·p; 19 in
///   single precision: 4 FMA each), over sources/wavelengths samples;
/// * per source and sub-pixel (over the orientations): scattering vector and polarization, about 25;
/// * per sub-pixel (over sources × orientations): position, distance, direction, solid angle, about 35.
pub fn flops_per_sample(w: &Work) -> f64 {
    let orients = w.orientations.max(1) as f64;
    let sources = w.sources.max(1) as f64;
    let shape = LoopShape { n: w.n, square: w.square, sources: w.sources, wavelengths: w.wavelengths, orientations: w.orientations };
    let LoopPlan { hand, hoisted, groups } = loop_plan(&shape);
    if groups {
        let lattice_axes = w.n.iter().filter(|&&n| n > 1.0).count() as f64;
        let per_group = 6.0 + lattice_axes * if w.single { 19.0 } else { 31.0 };
        let mut per_sample = 3.0 + (15.0 + w.wavelengths as f64 * per_group) / sources + 5.0;
        for n in w.n.iter().filter(|&&n| n > 1.0) {
            per_sample += 3.0 + 1.0 + 2.0 * ((n.round() - 1.0) / 2.0).floor();
        }
        return per_sample + 25.0 / orients + 35.0 / (orients * sources);
    }
    let miller = if hoisted { 6.0 + 15.0 / sources } else { 15.0 };
    let mut per_sample = miller + 3.0 + if hand { 5.0 } else { 7.0 };
    if w.square {
        for n in w.n {
            if n > 1.0 {
                let two_cos = match (hand, w.single) {
                    (true, false) => 16.0,
                    (true, true) => 10.0,
                    (false, false) => 17.0,
                    (false, true) => 11.0,
                };
                per_sample += if n <= CHEB_MAX_N as f64 { two_cos + 1.0 + 2.0 * ((n.round() - 1.0) / 2.0).floor() } else { 30.0 };
            }
        }
    } else {
        per_sample += 40.0;
    }
    per_sample + 25.0 / orients + 35.0 / (orients * sources)
}

// ------------------------------------------------------------------------------- peak FLOP/s

/// Independent FMA chains: enough to cover FMA latency × ports on current x86 cores.
const CHAINS: usize = 12;
/// FMA rounds between two `black_box`es of the accumulators (which keep the optimizer from folding
/// the loop; their store and reload cost about 2% at this count).
const ROUNDS: usize = 64;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{CHAINS, ROUNDS};
    use std::arch::x86_64::*;

    /// # Safety: the CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512_f64(iters: u64) -> f64 {
        let (m, c) = (_mm512_set1_pd(0.999_999), _mm512_set1_pd(1e-6));
        let mut a = [_mm512_set1_pd(1.0); CHAINS];
        let (m, c) = std::hint::black_box((m, c));
        for _ in 0..iters {
            for _ in 0..ROUNDS {
                for x in a.iter_mut() {
                    *x = _mm512_fmadd_pd(*x, m, c);
                }
            }
            a = std::hint::black_box(a);
        }
        a.iter().map(|x| _mm512_reduce_add_pd(*x)).sum()
    }
    /// # Safety: the CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512_f32(iters: u64) -> f64 {
        let (m, c) = (_mm512_set1_ps(0.9999), _mm512_set1_ps(1e-4));
        let mut a = [_mm512_set1_ps(1.0); CHAINS];
        let (m, c) = std::hint::black_box((m, c));
        for _ in 0..iters {
            for _ in 0..ROUNDS {
                for x in a.iter_mut() {
                    *x = _mm512_fmadd_ps(*x, m, c);
                }
            }
            a = std::hint::black_box(a);
        }
        a.iter().map(|x| _mm512_reduce_add_ps(*x) as f64).sum()
    }
    /// # Safety: the CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2_f64(iters: u64) -> f64 {
        let (m, c) = (_mm256_set1_pd(0.999_999), _mm256_set1_pd(1e-6));
        let mut a = [_mm256_set1_pd(1.0); CHAINS];
        let (m, c) = std::hint::black_box((m, c));
        for _ in 0..iters {
            for _ in 0..ROUNDS {
                for x in a.iter_mut() {
                    *x = _mm256_fmadd_pd(*x, m, c);
                }
            }
            a = std::hint::black_box(a);
        }
        let mut out = [0.0f64; 4];
        let mut s = 0.0;
        for x in a {
            _mm256_storeu_pd(out.as_mut_ptr(), x);
            s += out.iter().sum::<f64>();
        }
        s
    }
    /// # Safety: the CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2_f32(iters: u64) -> f64 {
        let (m, c) = (_mm256_set1_ps(0.9999), _mm256_set1_ps(1e-4));
        let mut a = [_mm256_set1_ps(1.0); CHAINS];
        let (m, c) = std::hint::black_box((m, c));
        for _ in 0..iters {
            for _ in 0..ROUNDS {
                for x in a.iter_mut() {
                    *x = _mm256_fmadd_ps(*x, m, c);
                }
            }
            a = std::hint::black_box(a);
        }
        let mut out = [0.0f32; 8];
        let mut s = 0.0;
        for x in a {
            _mm256_storeu_ps(out.as_mut_ptr(), x);
            s += out.iter().map(|&v| v as f64).sum::<f64>();
        }
        s
    }
}

/// Baseline (the portable kernel's target: SSE2 on x86-64, no FMA): multiply then add, 2 flops per
/// lane, in lanes of 2 × f64 / 4 × f32 that LLVM keeps in vector registers.
#[inline(never)]
fn baseline<T: Copy + std::ops::Mul<Output = T> + std::ops::Add<Output = T> + Into<f64>, const W: usize>(
    iters: u64,
    m: T,
    c: T,
    one: T,
) -> f64 {
    let mut a = [[one; W]; CHAINS];
    let (m, c) = std::hint::black_box((m, c));
    for _ in 0..iters {
        for _ in 0..ROUNDS {
            for x in a.iter_mut() {
                for v in x.iter_mut() {
                    *v = *v * m + c;
                }
            }
        }
        a = std::hint::black_box(a);
    }
    a.iter().flatten().map(|&v| v.into()).sum()
}

/// Runs `iters` blocks of ROUNDS × CHAINS FMAs at a level; returns the flops done (None: level unavailable).
fn run_level(level: &str, single: bool, iters: u64) -> Option<f64> {
    let lanes = |bits: usize| (bits / if single { 32 } else { 64 }) as f64;
    #[cfg(target_arch = "x86_64")]
    {
        let avx512 = std::is_x86_feature_detected!("avx512f");
        let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        let r = match (level, single) {
            // SAFETY: each is called only when the CPU has the features it is compiled for.
            ("avx512", false) if avx512 => Some((unsafe { x86::avx512_f64(iters) }, lanes(512))),
            ("avx512", true) if avx512 => Some((unsafe { x86::avx512_f32(iters) }, lanes(512))),
            ("avx2", false) if avx2 => Some((unsafe { x86::avx2_f64(iters) }, lanes(256))),
            ("avx2", true) if avx2 => Some((unsafe { x86::avx2_f32(iters) }, lanes(256))),
            _ => None,
        };
        if let Some((sum, l)) = r {
            std::hint::black_box(sum);
            return Some((CHAINS * ROUNDS) as f64 * l * 2.0 * iters as f64);
        }
    }
    if level != "portable" {
        return None;
    }
    let sum = if single { baseline::<f32, 4>(iters, 0.9999, 1e-4, 1.0) } else { baseline::<f64, 2>(iters, 0.999_999, 1e-6, 1.0) };
    std::hint::black_box(sum);
    Some((CHAINS * ROUNDS) as f64 * lanes(128) * 2.0 * iters as f64)
}

/// GFLOP/s of one core at a level and precision: calibrate to about `target_s`, best of three.
pub fn measure_peak(level: &str, single: bool, target_s: f64) -> Option<f64> {
    let t = Instant::now();
    run_level(level, single, 200)?;
    let per_iter = t.elapsed().as_secs_f64().max(1e-9) / 200.0;
    let iters = ((target_s / per_iter) as u64).clamp(200, 100_000_000);
    let mut best = 0.0f64;
    for _ in 0..3 {
        let t = Instant::now();
        let flops = run_level(level, single, iters)?;
        let s = t.elapsed().as_secs_f64();
        if s > 0.0 {
            best = best.max(flops / s / 1e9);
        }
    }
    (best > 0.0).then_some(best)
}

/// Page-cache write bandwidth: a 64 MiB file in 1 MiB blocks written into `dir`, best of three, MB/s.
pub fn measure_write(dir: &std::path::Path) -> Option<f64> {
    use std::io::Write as _;
    let block = vec![0x5au8; 1 << 20];
    let p = dir.join("write-bandwidth.tmp");
    let mut best = 0.0f64;
    for _ in 0..3 {
        let _ = std::fs::remove_file(&p);
        let t = Instant::now();
        let mut f = std::fs::File::create(&p).ok()?;
        for _ in 0..64 {
            f.write_all(&block).ok()?;
        }
        drop(f);
        let s = t.elapsed().as_secs_f64();
        if s > 0.0 {
            best = best.max(64.0 * (1 << 20) as f64 / s / 1e6);
        }
    }
    let _ = std::fs::remove_file(&p);
    (best > 0.0).then_some(best)
}

/// The levels this CPU can run, best first (as `kernel::simd::detected_level` decides).
pub fn available_levels() -> Vec<&'static str> {
    let top = nanobragg::kernel::detected_level().name();
    ["avx512", "avx2", "portable"].into_iter().skip_while(|l| *l != top).collect()
}

/// Measure every level's peak (about 0.1 s per level and precision) and the write bandwidth.
pub fn measure(scratch: &std::path::Path) -> MachineLimits {
    let peaks = available_levels()
        .into_iter()
        .filter_map(|level| {
            Some(LevelPeak {
                level: level.to_string(),
                f64_gflops_per_core: measure_peak(level, false, 0.02)?,
                f32_gflops_per_core: measure_peak(level, true, 0.02)?,
            })
        })
        .collect();
    MachineLimits {
        peaks,
        write_mb_per_s: measure_write(scratch),
        method: format!(
            "peak: one thread, {CHAINS} independent FMA chains (avx512, avx2: FMA intrinsics; portable: multiply + add), \
             FMA = 2 flops, best of 3 × ~20 ms; write: 64 MiB in 1 MiB blocks into the scratch folder, best of 3"
        ),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && (a / b).is_finite() => Some(a / b),
        _ => None,
    }
}

/// The roofline figures of one size and the warnings for implausible ones.
#[allow(clippy::too_many_arguments)]
pub fn figures(
    limits: &MachineLimits,
    kernel: &str,
    single: bool,
    threads: usize,
    samples: f64,
    work: &Work,
    render_s: Option<f64>,
    io_s: Option<f64>,
    bytes_written: Option<u64>,
) -> (Roofline, Vec<String>) {
    let threads = threads.max(1);
    let fps = flops_per_sample(work);
    let render_s = render_s.filter(|&t| t > 0.0);
    let achieved = render_s.map(|t| samples * fps / t / 1e9);
    let peak = limits.peak_per_core(kernel, single);
    let peak_gflops = peak.map(|(_, p)| p * threads as f64);
    let write = ratio(bytes_written.map(|b| b as f64 / 1e6), io_s);
    let r = Roofline {
        threads,
        ns_per_sample_per_core: render_s.map(|t| t * threads as f64 / samples * 1e9),
        flops_per_sample_estimate: fps,
        achieved_gflops: achieved,
        peak_gflops,
        peak_level: peak.map(|(l, _)| l.to_string()),
        flop_utilization: ratio(achieved, peak_gflops),
        bytes_written,
        write_mb_per_s: write,
        peak_write_mb_per_s: limits.write_mb_per_s,
        write_utilization: ratio(write, limits.write_mb_per_s),
    };
    let mut w = Vec::new();
    let mut check = |what: &str, u: Option<f64>, above: &str| {
        let Some(u) = u else { return };
        if u > 1.0 {
            w.push(format!("{what} is {:.0}% of the measured peak: above the peak, a timing or the estimate is wrong ({above})", u * 100.0));
        } else if u > HIGH_UTILIZATION {
            w.push(format!(
                "{what} is {:.0}% of the measured peak (> {:.0}%): implausibly close to the limit ({above})",
                u * 100.0,
                HIGH_UTILIZATION * 100.0
            ));
        } else if u < LOW_UTILIZATION {
            w.push(format!(
                "{what} is {:.1}% of the measured peak (< {:.0}%): the estimate or the timing is off, or something else bounds the run ({above})",
                u * 100.0,
                LOW_UTILIZATION * 100.0
            ));
        }
    };
    check(
        "floating-point rate",
        r.flop_utilization,
        &format!(
            "{:.1} GFLOP/s achieved of {:.1}, estimate {:.0} flops/sample",
            achieved.unwrap_or(0.0),
            peak_gflops.unwrap_or(0.0),
            fps
        ),
    );
    check(
        "write rate",
        r.write_utilization,
        &format!("{:.0} MB/s of {:.0} MB/s", write.unwrap_or(0.0), limits.write_mb_per_s.unwrap_or(0.0)),
    );
    (r, w)
}

/// One line per size for the console and summary.md.
pub fn one_line(r: &Roofline) -> String {
    let pct = |u: Option<f64>| u.map(|u| format!("{:.0}%", u * 100.0)).unwrap_or_else(|| "n/a".into());
    let num = |v: Option<f64>, d: usize| v.map(|v| format!("{v:.d$}")).unwrap_or_else(|| "n/a".into());
    format!(
        "{} ns/sample/core; ~{:.0} flops/sample → {} GFLOP/s of {} measured peak ({}, {} threads): {}; wrote {} MB at {} MB/s of {}: {}",
        num(r.ns_per_sample_per_core, 2),
        r.flops_per_sample_estimate,
        num(r.achieved_gflops, 1),
        num(r.peak_gflops, 1),
        r.peak_level.as_deref().unwrap_or("?"),
        r.threads,
        pct(r.flop_utilization),
        num(r.bytes_written.map(|b| b as f64 / 1e6), 1),
        num(r.write_mb_per_s, 0),
        num(r.peak_write_mb_per_s, 0),
        pct(r.write_utilization)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> MachineLimits {
        MachineLimits {
            peaks: vec![
                LevelPeak { level: "avx2".into(), f64_gflops_per_core: 40.0, f32_gflops_per_core: 80.0 },
                LevelPeak { level: "portable".into(), f64_gflops_per_core: 10.0, f32_gflops_per_core: 20.0 },
            ],
            write_mb_per_s: Some(2000.0),
            method: String::new(),
        }
    }

    #[test]
    fn flop_estimate_counts_the_kernel_terms() {
        // bench crystal: N = 5 (2 roots), one source, one orientation, the hand loop:
        // 23 + 3 × (16 + 1 + 4) + 25 + 35
        let bench = Work { n: [5.0; 3], square: true, sources: 1, wavelengths: 1, orientations: 1, single: false };
        assert_eq!(flops_per_sample(&bench), 23.0 + 63.0 + 60.0);
        // heavy: N = 10 (4 roots), 6 sources (hoisted indices: 6 + 15/6 instead of 15), 10
        // orientations: 16.5 + 3 × 25 + 25/10 + 35/60
        let heavy = Work { n: [10.0; 3], square: true, sources: 6, wavelengths: 6, orientations: 10, single: false };
        assert!((flops_per_sample(&heavy) - (16.5 + 75.0 + 2.5 + 35.0 / 60.0)).abs() < 1e-12);
        // single precision: 6 fewer per axis
        assert!((flops_per_sample(&Work { single: true, ..heavy }) - (16.5 + 57.0 + 2.5 + 35.0 / 60.0)).abs() < 1e-12);
        // too many sources × orientations for the hoisted table: the dot products
        let wide = Work { orientations: 10_000, ..heavy };
        assert!((flops_per_sample(&wide) - (23.0 + 75.0 + 25.0 / 1e4 + 35.0 / 6e4)).abs() < 1e-12);
        // N = 1 axes cost nothing, N > 24 uses sincg in the generic loop
        let thin = Work { n: [1.0, 1.0, 30.0], square: true, sources: 1, wavelengths: 1, orientations: 1, single: false };
        assert_eq!(flops_per_sample(&thin), 25.0 + 30.0 + 60.0);
        assert_eq!(flops_per_sample(&Work { square: false, ..bench }), 25.0 + 40.0 + 60.0);
        // the bench-detailed heavy case: 5 divergence steps × 2 wavelengths, in two groups: per
        // sample 3 + (15 + 2 × (6 + 3 × 31))/10 + 5 + 3 × (3 + 9), then 25/10 + 35/100
        let groups = Work { sources: 10, wavelengths: 2, ..heavy };
        assert!((flops_per_sample(&groups) - (3.0 + 21.3 + 5.0 + 36.0 + 2.5 + 0.35)).abs() < 1e-12);
        // single precision: 12 fewer per group and axis
        assert!((flops_per_sample(&Work { single: true, ..groups }) - (3.0 + 14.1 + 5.0 + 36.0 + 2.5 + 0.35)).abs() < 1e-12);
        // one source per wavelength: no groups
        assert!((flops_per_sample(&Work { sources: 10, wavelengths: 10, ..heavy }) - (7.5 + 3.0 + 5.0 + 75.0 + 2.5 + 0.35)).abs() < 1e-12);
    }

    #[test]
    fn figures_and_warnings() {
        let work = Work { n: [5.0; 3], square: true, sources: 1, wavelengths: 1, orientations: 1, single: false }; // 146 flops/sample
        // 1e8 samples in 1 s on 2 threads: 20 ns/sample/core, 14.6 GFLOP/s of 80 (avx2 f64): 18%
        let (r, w) = figures(&limits(), "avx2", false, 2, 1e8, &work, Some(1.0), Some(0.1), Some(100_000_000));
        assert!((r.ns_per_sample_per_core.unwrap() - 20.0).abs() < 1e-9);
        assert!((r.achieved_gflops.unwrap() - 14.6).abs() < 1e-9);
        assert_eq!((r.peak_gflops, r.peak_level.as_deref()), (Some(80.0), Some("avx2")));
        assert!((r.flop_utilization.unwrap() - 14.6 / 80.0).abs() < 1e-12);
        // 100 MB in 0.1 s = 1000 MB/s of 2000: 50%
        assert!((r.write_mb_per_s.unwrap() - 1000.0).abs() < 1e-9 && (r.write_utilization.unwrap() - 0.5).abs() < 1e-12);
        assert!(w.is_empty(), "{w:?}");
        // ten times faster: 146 GFLOP/s > 80 → above the peak; the scalar kernel uses the portable peak
        let (_, w) = figures(&limits(), "avx2", false, 2, 1e8, &work, Some(0.1), Some(0.1), Some(100_000_000));
        assert!(w.iter().any(|x| x.contains("above the peak")), "{w:?}");
        let (r, w) = figures(&limits(), "scalar", true, 1, 1e6, &work, Some(1.0), Some(1.0), Some(1_000_000));
        assert_eq!(r.peak_level.as_deref(), Some("portable"));
        assert!(w.iter().any(|x| x.contains("floating-point rate is 0.7%")), "{w:?}");
        assert!(w.iter().any(|x| x.contains("write rate is 0.1%")), "{w:?}");
        // 92% is implausibly close
        let (_, w) = figures(&limits(), "avx2", false, 1, 1e8, &work, Some(146.0 / 40.0 / 0.92 / 10.0), None, None);
        assert!(w.iter().any(|x| x.contains("(> 90%)")), "{w:?}");
        assert!(one_line(&r).contains("ns/sample/core"));
    }

    #[test]
    fn peaks_are_measured_for_the_available_levels() {
        let levels = available_levels();
        assert_eq!(levels.last(), Some(&"portable"));
        for l in &levels {
            let p = measure_peak(l, false, 0.002).unwrap();
            assert!(p > 0.05 && p < 1e4, "{l}: {p} GFLOP/s");
        }
        assert!(measure_peak("nonsense", false, 0.001).is_none());
        let dir = tempfile::tempdir().unwrap();
        assert!(measure_write(dir.path()).unwrap() > 1.0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the probe file is removed");
    }
}
