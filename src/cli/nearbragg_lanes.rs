//! nearbragg's SIMD atom loop against the scalar loop that mirrors nearBragg.c (here, beside the flag
//! parser that builds the runs, so that `apps` never imports `cli`), pixel by pixel in f64 (the
//! float image's f32 would hide all but the largest differences), on random atom lists across every
//! flag group, at every SIMD level this CPU has.

use crate::apps::nearbragg::check::{compare, intensity};
use crate::apps::nearbragg::render::{row_sums, PixelSum, Scene};
use crate::apps::nearbragg::{level_of, prepare, simd, NearBraggConfig, Prepared};
use crate::base::cpu::SimdLevel;
use crate::kernel::Backend;

/// A small deterministic generator (xorshift64*), uniform in [lo, hi).
struct Rng(u64);
impl Rng {
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        lo + (hi - lo) * ((self.0.wrapping_mul(0x2545F4914F6CDD1D) >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// `n` atoms within ±`half` Å, with `cols` columns (3: X Y Z; 5: + occupancy, B; 6: + phase).
fn atom_list(seed: u64, n: usize, cols: usize, half: f64) -> String {
    let mut r = Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
    let mut s = String::new();
    for _ in 0..n {
        let mut v: Vec<f64> = (0..3).map(|_| r.uniform(-half, half)).collect();
        if cols >= 5 {
            v.push(r.uniform(0.2, 1.0));
            v.push(r.uniform(0.0, 60.0));
        }
        if cols >= 6 {
            v.push(r.uniform(-180.0, 180.0));
        }
        s += &v.iter().map(|x| format!("{x:.5}")).collect::<Vec<_>>().join(" ");
        s += "\n";
    }
    s
}

/// The run `flags` describe, with the atom list written to a scratch file.
fn config(dir: &std::path::Path, atoms: &str, flags: &[&str]) -> NearBraggConfig {
    let file = dir.join("atoms.txt");
    std::fs::write(&file, atoms).unwrap();
    let mut args = vec!["-file".to_string(), file.to_string_lossy().into_owned()];
    args.extend(flags.iter().map(|s| s.to_string()));
    super::nearbragg::parse_nearbragg_args(&args).unwrap()
}

/// Every ROI pixel's loop sums, in raster order, with the atom loop at `level` (`None`: scalar).
fn sums(c: &NearBraggConfig, p: &Prepared, level: Option<SimdLevel>) -> Vec<(i32, i32, PixelSum)> {
    let s = Scene { c, det: &p.det, atoms: &p.atoms, steps: &p.steps, div: &p.div, oversample: p.oversample, nsteps: p.nsteps, level };
    let mut out = Vec::new();
    for y in 0..p.det.ypixels {
        row_sums(&s, y, |x, sum, _| out.push((x, y, sum)));
    }
    out
}

/// The fast levels this CPU runs (AVX2 and up; none on a CPU without FMA).
fn levels() -> Vec<SimdLevel> {
    SimdLevel::available().into_iter().filter_map(simd::fast_level).collect()
}

/// Compare every level's sums with the scalar loop's; returns the largest relative difference.
fn check_case(name: &str, c: &NearBraggConfig) -> f64 {
    let mut p = prepare(c, &mut String::new()).unwrap();
    p.images.float.clear();
    let want = sums(c, &p, None);
    let peak = want.iter().map(|w| intensity(&w.2)).fold(0.0, f64::max);
    assert!(peak > 0.0, "{name}: a dark image tests nothing");
    let mut worst = 0.0f64;
    let mut first: Option<Vec<(i32, i32, PixelSum)>> = None;
    for level in levels() {
        let got = sums(c, &p, Some(level));
        assert_eq!(got.len(), want.len(), "{name} {}", level.name());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!((g.0, g.1), (w.0, w.1), "{name}: raster order");
            if let Err(e) = compare(&g.2, &w.2, peak) {
                panic!("{name}, {}: pixel ({}, {}): {e}", level.name(), w.0, w.1);
            }
            if intensity(&w.2) > 1e-3 * peak {
                worst = worst.max(((intensity(&g.2) - intensity(&w.2)) / intensity(&w.2)).abs());
            }
        }
        // the same lanes' arithmetic at every level: bit-identical sums
        if let Some(f) = &first {
            for (a, b) in f.iter().zip(&got) {
                assert!(a.2.i == b.2.i && a.2.fa == b.2.fa && a.2.fb == b.2.fb, "{name}: levels differ at ({}, {})", a.0, a.1);
            }
        }
        first = Some(got);
    }
    worst
}

/// Ragged rows (21 = 8 + 8 + 5 pixels), 12 rows.
const BASE: &[&str] = &["-detpixels_x", "21", "-detpixels_y", "12", "-pixel", "0.4", "-distance", "60", "-noprogress"];

#[test]
fn simd_atom_loop_matches_the_scalar_loop_for_every_flag_group() {
    if levels().is_empty() {
        eprintln!("SKIPPED: nearbragg SIMD vs scalar, because this CPU has no AVX2+FMA");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, usize, &[&str])] = &[
        ("near source", 3, &[]),
        ("far source", 3, &["-source_distance", "far"]),
        ("source distance and depth", 3, &["-source_distance", "200", "-source_depth", "50", "-depthsteps", "3"]),
        ("dispersion", 3, &["-dispersion", "1", "-dispsteps", "3", "-energy", "9000"]),
        ("divergence", 3, &["-divergence", "0.5", "-divsteps", "3"]),
        ("h/v divergence, far", 5, &["-hdivrange", "0.4", "-hdivstep", "0.1", "-vdivrange", "0.2", "-vdivsteps", "3", "-source_distance", "far"]),
        ("oversample", 3, &["-oversample", "3"]),
        ("curved", 3, &["-curved_det", "1"]),
        ("point pixel, twotheta", 3, &["-point_pixel", "-twotheta", "20"]),
        ("roi", 3, &["-roi", "3", "13", "2", "9"]),
        ("B factors", 5, &[]),
        ("B factors, far, dispersion", 5, &["-source_distance", "far", "-dispersion", "2", "-dispsteps", "2"]),
        ("phases", 6, &[]),
        ("coherent", 6, &["-coherent", "-dispersion", "0.5", "-dispsteps", "2", "-divergence", "0.2", "-divsteps", "2"]),
        ("coherent, oversample, far", 6, &["-coherent", "-oversample", "2", "-source_distance", "far"]),
        ("source 100 m, 0.5 Å (phases up to 1.3e13)", 3, &["-lambda", "0.5", "-source_distance", "1e5"]),
        ("source 10 km, 0.02 Å (phases of 3e16: libm lanes)", 3, &["-lambda", "0.02", "-source_distance", "1e7"]),
    ];
    for (k, (name, cols, flags)) in cases.iter().enumerate() {
        let mut f = BASE.to_vec();
        f.extend_from_slice(flags);
        let c = config(dir.path(), &atom_list(k as u64 + 1, 60, *cols, 30.0), &f);
        let worst = check_case(name, &c);
        eprintln!("ok   {name}: max relative difference {worst:.2e} over pixels above 1e-3 of the maximum");
    }
}

#[test]
fn debug_traced_pixels_take_the_scalar_loop() {
    if levels().is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut f = BASE.to_vec();
    f.extend_from_slice(&["-printout_pixel", "9", "4", "-debug"]);
    let c = config(dir.path(), &atom_list(5, 20, 6, 30.0), &f);
    let p = prepare(&c, &mut String::new()).unwrap();
    let scalar = sums(&c, &p, None);
    let fast = sums(&c, &p, levels().last().copied());
    let at = |v: &[(i32, i32, PixelSum)]| v.iter().find(|s| (s.0, s.1) == (9, 4)).unwrap().2;
    let (a, b) = (at(&scalar), at(&fast));
    assert!(a.i == b.i && a.fa == b.fa && a.fb == b.fb);
}

#[test]
fn the_backend_picks_the_loop() {
    let c = NearBraggConfig { backend: Some(Backend::Reference), ..NearBraggConfig::default() };
    assert_eq!(level_of(&c), None);
    let c = NearBraggConfig { backend: Some(Backend::Simd(SimdLevel::Portable)), ..NearBraggConfig::default() };
    assert_eq!(level_of(&c), None, "no FMA assumed: scalar");
    let c = NearBraggConfig { backend: Some(Backend::Simd(SimdLevel::Avx512)), ..NearBraggConfig::default() };
    assert_eq!(level_of(&c), simd::fast_level(crate::base::cpu::detected_level()));
}

#[test]
fn the_comparison_catches_a_wrong_sum() {
    let want = PixelSum { fa: 3.0, fb: -4.0, i: 10.0, omega: 1e-6, airpath: 0.1, pos: [0.1, 0.0, 0.0] };
    assert!(compare(&want, &want, 35.0).is_ok());
    let near = PixelSum { i: 10.0 * (1.0 + 1e-14), ..want };
    assert!(compare(&near, &want, 35.0).is_ok());
    for bad in [PixelSum { i: 10.0 * (1.0 + 1e-10), ..want }, PixelSum { fb: -4.0 * (1.0 + 1e-11), ..want }, PixelSum { omega: 1.0000001e-6, ..want }] {
        assert!(compare(&bad, &want, 35.0).is_err());
    }
    // a dark pixel is held to 1e-3 of the peak
    let dark = PixelSum { fa: 0.0, fb: 0.0, i: 1e-9, ..want };
    assert!(compare(&PixelSum { i: 2e-9, ..dark }, &dark, 35.0).is_err());
    assert!(compare(&PixelSum { i: 1e-9 + 1e-16, ..dark }, &dark, 35.0).is_ok());
}
