//! The fast kernels against the scalar reference kernel (which mirrors the C loop): every dispatch
//! level this CPU has, double and single precision, on every golden case and on randomized
//! geometries; and thread-count determinism.

mod common;

use common::*;
use nanobragg::experiment::params::Precision;
use nanobragg::kernel::{self, fast, Backend, RenderOptions, SimdLevel};
use nanobragg::run::simulate;
use nanobragg::stats::pearson;
use std::path::Path;

/// The SIMD backend at every level this CPU has.
fn levels() -> Vec<Backend> {
    SimdLevel::available().into_iter().map(Backend::Simd).collect()
}

fn no_progress(_: usize) {}

fn sum(v: &[f32]) -> f64 {
    v.iter().map(|&x| x as f64).sum()
}

#[test]
fn fast_kernels_match_the_reference_on_golden_cases() {
    let Some(golden) = golden_dir() else { return };
    let manifest = load_manifest(&golden);
    let mut checked = 0;
    let mut failures = Vec::new();
    for case in cases(&manifest) {
        if case["exit_code"].as_i64() != Some(0) {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let cfg = case_config(&golden, case, tmp.path());
        let (exp, _) = simulate::setup(&cfg).unwrap();
        if !fast::supports(&exp) {
            continue;
        }
        let reference = kernel::render_reference(&exp, &no_progress).float;
        let c_float = read_f32_le(&output_path(&golden, case, "float"));
        for precision in [Precision::Double, Precision::Single] {
            for level in levels() {
                let got = kernel::render(&exp, &RenderOptions { backend: level, precision }, &no_progress).float;
                let (min_r, max_rel) = match precision {
                    Precision::Double => (0.999999, 1e-6),
                    Precision::Single => (0.9999, 1e-3),
                };
                let r = pearson(&got, &reference);
                let rel = (sum(&got) / sum(&reference) - 1.0).abs();
                let rc = pearson(&got, &c_float);
                if !(r >= min_r && rel <= max_rel && rc >= min_r) {
                    failures.push(format!(
                        "{} {:?} {}: r(ref)={r:.9} r(C)={rc:.9} sum rel={rel:.2e}",
                        case_id(case),
                        precision,
                        level.name()
                    ));
                }
                // masked, out-of-ROI and -dmin pixels are exactly zero in both
                let zeros = got.iter().zip(&reference).filter(|(g, w)| (**g == 0.0) != (**w == 0.0)).count();
                if zeros > 0 {
                    failures.push(format!("{} {:?} {}: {zeros} zero pixels differ", case_id(case), precision, level.name()));
                }
            }
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} golden cases exercised the fast kernel");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A small deterministic generator for randomized geometries.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.next()
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[(self.next() * v.len() as f64) as usize % v.len()]
    }
}

fn random_args(rng: &mut Lcg, hkl: &Path) -> Vec<String> {
    let f = |x: f64| format!("{x:.4}");
    let mut a: Vec<String> = vec![
        rng.pick(&["-mosflm", "-xds", "-adxv", "-denzo", "-dials"]).into(),
        "-cell".into(),
        f(rng.range(40.0, 120.0)),
        f(rng.range(40.0, 120.0)),
        f(rng.range(40.0, 120.0)),
        f(rng.range(70.0, 110.0)),
        f(rng.range(70.0, 110.0)),
        f(rng.range(70.0, 110.0)),
        "-misset".into(),
        f(rng.range(-180.0, 180.0)),
        f(rng.range(-90.0, 90.0)),
        f(rng.range(-180.0, 180.0)),
        "-lambda".into(),
        f(rng.range(0.8, 2.0)),
        "-distance".into(),
        f(rng.range(40.0, 150.0)),
        "-pixel".into(),
        f(rng.range(0.1, 0.4)),
        "-detpixels_f".into(),
        format!("{}", 37 + (rng.next() * 20.0) as i32),
        "-detpixels_s".into(),
        format!("{}", 29 + (rng.next() * 10.0) as i32),
        "-Na".into(),
        format!("{}", 3 + (rng.next() * 8.0) as i32),
        "-Nb".into(),
        format!("{}", 3 + (rng.next() * 8.0) as i32),
        "-Nc".into(),
        format!("{}", 3 + (rng.next() * 8.0) as i32),
        "-detector_rotx".into(),
        f(rng.range(-5.0, 5.0)),
        "-detector_rotz".into(),
        f(rng.range(-5.0, 5.0)),
        "-twotheta".into(),
        f(rng.range(-10.0, 20.0)),
        "-polar".into(),
        f(rng.range(0.0, 1.0)),
        "-oversample".into(),
        format!("{}", 1 + (rng.next() * 3.0) as i32),
    ];
    if rng.next() < 0.6 {
        // tricubic interpolation sometimes (it goes out of range on this small grid: the fallback)
        let interp = if rng.next() < 0.3 { "-interpolate" } else { "-nointerpolate" };
        a.extend(["-hkl".into(), hkl.display().to_string(), interp.into()]);
    } else {
        a.extend(["-default_F".into(), "100".into()]);
    }
    if rng.next() < 0.5 {
        a.extend(["-mosaic".into(), f(rng.range(0.1, 1.0)), "-mosaic_dom".into(), "4".into()]);
    }
    if rng.next() < 0.5 {
        a.extend(["-divergence".into(), f(rng.range(0.1, 1.0)), "-divsteps".into(), "3".into()]);
        a.extend(["-dispersion".into(), f(rng.range(0.1, 1.0)), "-dispsteps".into(), "2".into()]);
    }
    if rng.next() < 0.5 {
        a.extend(["-phi".into(), f(rng.range(-10.0, 10.0)), "-osc".into(), f(rng.range(0.1, 2.0)), "-phisteps".into(), "3".into()]);
    }
    if rng.next() < 0.3 {
        a.extend(["-detector_thick".into(), "200".into(), "-detector_abs".into(), "300".into(), "-thicksteps".into(), "2".into()]);
    }
    if rng.next() < 0.3 {
        a.extend(["-dmin".into(), f(rng.range(2.0, 5.0))]);
    }
    if rng.next() < 0.2 {
        a.push(rng.pick(&["-oversample_omega", "-oversample_polar", "-oversample_thick", "-point_pixel", "-nopolar"]).into());
    }
    if rng.next() < 0.2 {
        a.extend(["-water".into(), "0.5".into()]);
    }
    if rng.next() < 0.15 {
        // first, not last: as in the C, a trailing -curved_det is ignored
        a.insert(0, "-curved_det".into());
    }
    // smooth spot shapes (tophat's hard edge is checked on the golden case, by correlation)
    if rng.next() < 0.3 {
        a.push(rng.pick(&["-round_xtal", "-gauss_xtal"]).into());
        a.extend(["-fudge".into(), f(rng.range(0.5, 2.0))]);
    }
    a
}

/// A small P1 list, h,k,l in −6..6, written into `dir`.
fn small_hkl(dir: &Path) -> std::path::PathBuf {
    let hkl = dir.join("r.hkl");
    let mut text = String::new();
    for h in -6..=6 {
        for k in -6..=6 {
            for l in -6..=6 {
                text.push_str(&format!("{h} {k} {l} {}\n", 10 + ((h * 7 + k * 13 + l * 31) as i32).rem_euclid(97)));
            }
        }
    }
    std::fs::write(&hkl, text).unwrap();
    hkl
}

/// The experiment of `simulate` flags, its outputs (none written here) directed into `dir`.
fn experiment(args: &[String], dir: &Path) -> nanobragg::experiment::Experiment {
    let mut cfg = nanobragg::cli::parse::parse_simulate_args(args).unwrap();
    cfg.output.out_dir = Some(dir.to_path_buf());
    simulate::setup(&cfg).unwrap().0
}

/// The heavy case's sampling (mosaic domains, phi steps, sources, sub-pixels) on a 61² detector,
/// F from `hkl`, then `extra` flags.
fn heavy_61(hkl: &Path, extra: &[&str]) -> Vec<String> {
    "-cell 70 80 90 85 95 105 -misset 10 20 30 -lambda 1 -distance 100 -pixel 0.1 -detpixels 61 -N 10 \
     -mosaic 0.5 -mosaic_dom 5 -phisteps 2 -osc 0.1 -divergence 0.2 -divsteps 3 -dispersion 0.1 -dispsteps 2 -oversample 2"
        .split_whitespace()
        .map(String::from)
        .chain(["-hkl".into(), hkl.display().to_string()])
        .chain(extra.iter().map(|x| x.to_string()))
        .collect()
}

#[test]
fn fast_kernels_match_the_reference_on_random_geometries() {
    let tmp = tempfile::tempdir().unwrap();
    let hkl = small_hkl(tmp.path());
    let mut rng = Lcg(0x5eed_1234);
    let mut failures = Vec::new();
    for trial in 0..24 {
        let args = random_args(&mut rng, &hkl);
        let exp = experiment(&args, tmp.path());
        assert!(fast::supports(&exp), "trial {trial}: {args:?}");
        let reference = kernel::render_reference(&exp, &no_progress).float;
        let peak = reference.iter().fold(0.0f32, |m, &v| m.max(v.abs())) as f64;
        for precision in [Precision::Double, Precision::Single] {
            let tol = match precision {
                Precision::Double => 1e-7,
                Precision::Single => 2e-3,
            };
            for level in levels() {
                let got = kernel::render(&exp, &RenderOptions { backend: level, precision }, &no_progress).float;
                let worst = got.iter().zip(&reference).map(|(g, w)| (*g as f64 - *w as f64).abs()).fold(0.0, f64::max);
                if worst > tol * peak {
                    failures.push(format!(
                        "trial {trial} {precision:?} {}: max |diff| {worst:.3e} vs peak {peak:.3e}\n  args: {}",
                        level.name(),
                        args.join(" ")
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn image_is_identical_for_any_thread_count() {
    let Some(golden) = golden_dir() else { return };
    let manifest = load_manifest(&golden);
    for id in ["combo_256", "quirk_hkl_interp_oob", "mosaic"] {
        let case = cases(&manifest).iter().find(|c| case_id(c) == id).expect(id);
        let tmp = tempfile::tempdir().unwrap();
        let cfg = case_config(&golden, case, tmp.path());
        let (exp, _) = simulate::setup(&cfg).unwrap();
        let images: Vec<Vec<f32>> = [1, 2, 3].iter().map(|&n| simulate::render(&exp, &Default::default(), Some(n), &no_progress).unwrap().float).collect();
        let bits = |v: &Vec<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&images[0]), bits(&images[1]), "{id}: 1 vs 2 threads");
        assert_eq!(bits(&images[0]), bits(&images[2]), "{id}: 1 vs 3 threads");
    }
}

/// Every row, rendered with the hand-written sample loop at the AVX-512 level's group shapes (32
/// pixels in 16 lanes in f64, 32 and 32 in f32; on an AVX-512 CPU with its 512-bit registers too, as that
/// level runs it) and at the AVX2 level's (32 pixels, 8 or 16 lanes, 256-bit registers).
fn rows_at_both_shapes<T: kernel::hand::HandKernel>(exp: &nanobragg::experiment::Experiment) -> [(Vec<u32>, Vec<String>); 2] {
    let prep = fast::Prepared::<T>::new(exp, true);
    let w512 = kernel::simd::detected_level() >= SimdLevel::Avx512;
    let (f, s) = (exp.det.panel().fpixels, exp.det.panel().spixels);
    let wide = std::mem::size_of::<T>() == 4;
    [true, false].map(|avx512| {
        let mut image = vec![0f32; f * s];
        let ends = image
            .chunks_mut(f)
            .enumerate()
            .map(|(row, out)| {
                let interp = exp.structure_factors.interpolate;
                let r = match (avx512, wide, w512) {
                    (true, true, true) => fast::render_row::<T, 32, 32, true, true>(exp, &prep, row, interp, out),
                    (true, false, true) => fast::render_row::<T, 32, 16, true, true>(exp, &prep, row, interp, out),
                    (true, true, false) => fast::render_row::<T, 32, 32, true, false>(exp, &prep, row, interp, out),
                    (true, false, false) => fast::render_row::<T, 32, 16, true, false>(exp, &prep, row, interp, out),
                    (false, true, _) => fast::render_row::<T, 32, 16, true, false>(exp, &prep, row, interp, out),
                    (false, false, _) => fast::render_row::<T, 32, 8, true, false>(exp, &prep, row, interp, out),
                };
                format!("{:?} {:?}", r.omega.to_bits(), r.end)
            })
            .collect();
        (image.iter().map(|x| x.to_bits()).collect(), ends)
    })
}

/// The AVX-512 level runs the AVX2 level's hand-written sample loop on its own, wider groups: each
/// pixel's value must not depend on which group shape carried it (every lane follows the same
/// operations in the same order). Checked here on any AVX2 CPU (the hand loop needs AVX2 and FMA),
/// so that the AVX-512 level's results are covered where no AVX-512 CPU is at hand.
#[test]
fn hand_loop_gives_the_same_bits_at_both_levels_group_shapes() {
    if kernel::simd::detected_level() < SimdLevel::Avx2 {
        eprintln!("SKIPPED hand_loop_gives_the_same_bits_at_both_levels_group_shapes: this CPU has no AVX2+FMA");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let hkl = small_hkl(tmp.path());
    let mut rng = Lcg(0xa5_512);
    // a region of interest leaves groups part-live inside rows too
    let mut trials = vec![heavy_61(&hkl, &[]), heavy_61(&hkl, &["-roi", "5", "50", "2", "58"])];
    trials.extend((0..16).map(|_| random_args(&mut rng, &hkl)));
    let mut hand = 0;
    for args in &trials {
        let mut exp = experiment(args, tmp.path());
        // (tricubic F hands a row over to the reference at a group's first pixel: not this test's)
        exp.structure_factors.interpolate = false;
        hand += usize::from(fast::Prepared::<f64>::new(&exp, true).uses_hand_loop());
        for (precision, [a, b]) in [("f64", rows_at_both_shapes::<f64>(&exp)), ("f32", rows_at_both_shapes::<f32>(&exp))] {
            let pixels = a.0.iter().zip(&b.0).filter(|(x, y)| x != y).count();
            let rows = a.1.iter().zip(&b.1).filter(|(x, y)| x != y).count();
            assert!(pixels == 0 && rows == 0, "{precision}: {pixels} pixels and {rows} rows' omega sums differ between group shapes: {}", args.join(" "));
        }
    }
    assert!(hand >= 8, "only {hand} of {} trials ran the hand loop", trials.len());
}

/// A pixel's value does not depend on whether its neighbours in a SIMD group are rendered: inside a
/// region of interest the image is the full image's, bit for bit, at every level and precision.
#[test]
fn a_pixel_does_not_depend_on_its_neighbours_being_rendered() {
    let tmp = tempfile::tempdir().unwrap();
    let hkl = small_hkl(tmp.path());
    let (full, roi) = (experiment(&heavy_61(&hkl, &[]), tmp.path()), experiment(&heavy_61(&hkl, &["-roi", "5", "50", "2", "58"]), tmp.path()));
    for precision in [Precision::Double, Precision::Single] {
        for level in levels() {
            let (a, b) = (kernel::render(&full, &RenderOptions { backend: level, precision }, &no_progress).float, kernel::render(&roi, &RenderOptions { backend: level, precision }, &no_progress).float);
            let differ = (2..=58).flat_map(|s| (5..=50).map(move |f| s * 61 + f)).filter(|&i| a[i].to_bits() != b[i].to_bits()).count();
            assert_eq!(differ, 0, "{precision:?} {}: ROI pixels differ from the full image's", level.name());
        }
    }
}

/// `NANOBRAGG_HAND_LOOP=off` puts the run on the generic sample loop: another loop (other bits in
/// some pixels, on a CPU with the hand loop; in single precision, where the loops' rounding shows in
/// the f32 image), the same image within the parity tolerance.
#[test]
fn hand_loop_switch_selects_the_generic_loop() {
    if kernel::simd::detected_level() < SimdLevel::Avx2 {
        eprintln!("SKIPPED hand_loop_switch_selects_the_generic_loop: this CPU has no AVX2+FMA (no hand loop to switch off)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let hkl = small_hkl(tmp.path());
    let run = |name: &str, hand: &str| {
        let out = tmp.path().join(name);
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_nanobragg-rs"))
            .args("simulate -cell 70 80 90 85 95 105 -misset 10 20 30 -lambda 1 -distance 100 -pixel 0.1 -detpixels 64 -N 10 -mosaic 0.5 -mosaic_dom 5 -oversample 2 --precision single".split_whitespace())
            .arg("-hkl")
            .arg(&hkl)
            .arg("-floatfile")
            .arg(&out)
            // (in the temporary folder: the run leaves an Fdump.bin there, as the C does)
            .current_dir(tmp.path())
            .env(kernel::plan::HAND_LOOP_ENV, hand)
            .env_remove("NANOBRAGG_SIMD")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{name}");
        read_f32_le(&out)
    };
    let (hand, generic) = (run("hand.bin", "on"), run("generic.bin", "off"));
    assert!(hand.iter().zip(&generic).any(|(a, b)| a.to_bits() != b.to_bits()), "NANOBRAGG_HAND_LOOP=off changed nothing");
    let peak = hand.iter().fold(0.0f32, |m, &v| m.max(v)) as f64;
    let worst = hand.iter().zip(&generic).map(|(a, b)| (*a as f64 - *b as f64).abs()).fold(0.0, f64::max);
    assert!(worst <= 1e-5 * peak, "max |diff| {worst:e} against peak {peak:e}");
}

/// The kernels render a detector panel after panel: one panel cut into two (the lower rows a second
/// panel whose `pix0_vector` starts at the cut) renders the one panel's image, within the rounding of
/// the pixel positions, with every backend; its omega sum too.
#[test]
fn a_panel_cut_in_two_renders_the_same_image() {
    let tmp = tempfile::tempdir().unwrap();
    let hkl = small_hkl(tmp.path());
    for extra in [&[][..], &["-detector_thick", "0.3", "-thicksteps", "2", "-roi", "3", "57", "5", "55"][..]] {
        let whole = experiment(&heavy_61(&hkl, extra), tmp.path());
        let mut cut = whole.clone();
        let p = whole.det.panel().clone();
        let rows = 25;
        let mut top = p.clone();
        top.spixels = rows;
        top.roi.slow = p.roi.slow.start.min(rows)..p.roi.slow.end.min(rows);
        let mut bottom = p.clone();
        bottom.spixels = p.spixels - rows;
        bottom.pix0_vector = std::array::from_fn(|i| p.pix0_vector[i] + rows as f64 * p.pixel_size * p.sdet_vector[i]);
        bottom.roi.slow = p.roi.slow.start.saturating_sub(rows)..p.roi.slow.end.saturating_sub(rows);
        cut.det.panels = vec![top, bottom];
        assert_eq!((cut.det.rows(), cut.pixels()), (61, 61 * 61));
        for level in std::iter::once(Backend::Reference).chain(levels()) {
            let opts = RenderOptions { backend: level, precision: Precision::Double };
            let (a, b) = (kernel::render(&whole, &opts, &no_progress), kernel::render(&cut, &opts, &no_progress));
            let peak = a.float.iter().fold(0.0f64, |m, &v| m.max(v as f64));
            let worst = a.float.iter().zip(&b.float).map(|(&x, &y)| (x as f64 - y as f64).abs()).fold(0.0, f64::max);
            assert!(peak > 0.0 && worst <= 1e-6 * peak, "{} {extra:?}: max |diff| {worst:e} vs peak {peak:e}", level.name());
            assert!(a.float.iter().zip(&b.float).all(|(&x, &y)| (x == 0.0) == (y == 0.0)), "{}: other pixels rendered", level.name());
            approx::assert_relative_eq!(a.omega_sum, b.omega_sum, max_relative = 1e-12);
        }
    }
}

/// The planner's CPU rule (`kernel::simd::cpu_kernel_for`, used by the planner and both of the GPU's
/// fall-backs): a SIMD level, never above the CPU's, where the SIMD kernel supports the experiment;
/// the reference where it was asked for or where the SIMD kernel cannot render (a fractional N); for
/// the GPU, the CPU this process uses. `with_cpu_backend` renders with the kernel it names.
#[test]
fn the_planner_keeps_cpu_requests_within_the_cpu() {
    use kernel::simd::{cpu_kernel_for, with_cpu_backend};
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<String> = "-cell 100 100 100 90 90 90 -N 5 -default_F 100 -lambda 6.2 -detpixels 16".split(' ').map(String::from).collect();
    let mut exp = experiment(&args, dir.path());
    let top = kernel::detected_level();
    for level in [SimdLevel::Portable, SimdLevel::Avx2, SimdLevel::Avx512] {
        assert_eq!(cpu_kernel_for(&exp, Backend::Simd(level)), Backend::Simd(level.min(top)));
        let name = with_cpu_backend(&exp, Backend::Simd(level), Precision::Double, |b| b.name());
        assert_eq!(name, level.min(top).name());
    }
    assert_eq!(cpu_kernel_for(&exp, Backend::Reference), Backend::Reference);
    assert_eq!(cpu_kernel_for(&exp, Backend::Gpu), cpu_kernel_for(&exp, kernel::active_backend()));
    assert_ne!(cpu_kernel_for(&exp, Backend::Gpu), Backend::Gpu);
    exp.crystal.na = 5.5;
    assert_eq!(cpu_kernel_for(&exp, Backend::Simd(top)), Backend::Reference);
    assert_eq!(with_cpu_backend(&exp, Backend::Simd(top), Precision::Single, |b| b.name()), Backend::Reference.name());
}

/// `other` rendered with `first`'s kept geometry gives the same bits and omega sum as computing
/// its geometry in place, at every level and precision.
fn kept_geometry_renders_the_same(first: &nanobragg::experiment::Experiment, other: &nanobragg::experiment::Experiment, what: &str) {
    use kernel::pixel_geometry::PixelGeometry;
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let g = PixelGeometry::build(first).unwrap_or_else(|| panic!("{what}: no geometry kept"));
    // else both renders compute the geometry in place and the cached path goes untested
    assert!(g.fits(other), "{what}: the kept geometry is not used");
    for precision in [Precision::Double, Precision::Single] {
        for level in levels() {
            let opts = RenderOptions { backend: level, precision };
            let (want, got) = (kernel::render(other, &opts, &no_progress), kernel::render_reusing(other, &opts, Some(&g), &no_progress));
            assert_eq!(bits(&got.float), bits(&want.float), "{what} {precision:?} {}", level.name());
            assert_eq!(got.omega_sum.to_bits(), want.omega_sum.to_bits(), "{what} {precision:?} {}: omega sum", level.name());
        }
    }
}

/// The light series' crystal (default_F, one N on every axis) from a kept geometry: at the AVX-512
/// level whole rows run in the fused row function (`avx2::f64x8::kept_row`), the rest of a row
/// (past its multiple of eight, the ROI's edge or a masked pixel) in the group loop. The same bits
/// and omega sum as the geometry computed in place, with one or several orientations (steps ≠ 1),
/// even and odd N, `-nopolar`, a background, an ROI that starts inside the row, and a mask.
#[test]
fn kept_geometry_fused_rows_render_the_same_bits() {
    let tmp = tempfile::tempdir().unwrap();
    let base = "-cell 100 100 100 90 90 90 -default_F 100 -lambda 6.2 -distance 60 -pixel 0.1 -detpixels 77";
    for extra in [
        "-N 5",
        "-N 4 -phisteps 3 -osc 0.3",
        "-N 5 -mosaic 0.5 -mosaic_dom 5 -nopolar",
        "-N 6 -water 100 -roi 0 60 0 76",
        "-N 3 -roi 5 70 2 70 -polar 0.6",
        "-N 1 -misset 10 20 30",
    ] {
        let args: Vec<String> = format!("{base} {extra}").split_whitespace().map(String::from).collect();
        let first = experiment(&args, tmp.path());
        let turned = experiment(&args.iter().cloned().chain(["-phi".into(), "0.7".into()]).collect::<Vec<_>>(), tmp.path());
        kept_geometry_renders_the_same(&first, &turned, extra);
    }
    // a mask: rows with a masked pixel leave the fused function at its multiple of eight
    let args: Vec<String> = format!("{base} -N 5").split_whitespace().map(String::from).collect();
    let mut first = experiment(&args, tmp.path());
    first.det.panels[0].mask = Some((0..77 * 77).map(|i| u16::from(i % 13 != 5)).collect());
    let mut turned = first.clone();
    turned.crystal.orientations.iter_mut().for_each(|o| (o.a, o.b) = (o.b, o.a));
    kept_geometry_renders_the_same(&first, &turned, "mask");
}

/// A dataset's frames read each pixel's geometry from one `PixelGeometry` (series): on random
/// geometries reduced to the sampling it applies to, a frame turned by another phi renders the
/// same bits, and the same omega sum, as when it computes its geometry itself, at every level and
/// precision; on a two-panel detector, with an ROI and a mask too. A geometry of another detector
/// is not used (the image stays right).
#[test]
fn kept_pixel_geometry_renders_the_same_bits() {
    use kernel::pixel_geometry::{applies, PixelGeometry};
    let tmp = tempfile::tempdir().unwrap();
    let hkl = small_hkl(tmp.path());
    let mut rng = Lcg(0x6e0_7731);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let same = kept_geometry_renders_the_same;
    let mut applied = 0;
    for trial in 0..20 {
        let mut args = random_args(&mut rng, &hkl);
        // the sampling it applies to: one source, one sub-pixel, no layers, no -dmin
        args.extend(["-oversample", "1", "-divergence", "0", "-divsteps", "1", "-dispersion", "0", "-dispsteps", "1", "-detector_thick", "0", "-thicksteps", "1", "-dmin", "0"].map(String::from));
        let first = experiment(&args, tmp.path());
        if !applies(&first) {
            assert!(PixelGeometry::build(&first).is_none());
            continue;
        }
        args.extend(["-phi", "0.7"].map(String::from));
        let turned = experiment(&args, tmp.path());
        same(&first, &turned, &format!("trial {trial}: {}", args.join(" ")));
        applied += 1;
    }
    assert!(applied >= 12, "only {applied} random geometries kept their geometry");

    // two panels, an ROI and a mask on the lower one
    let args: Vec<String> = "-cell 70 80 90 85 95 105 -misset 10 20 30 -lambda 1 -distance 100 -pixel 0.1 -detpixels 61 -N 7 -polar 0.6 -roi 3 57 5 55 -oversample 1"
        .split_whitespace()
        .map(String::from)
        .chain(["-hkl".into(), hkl.display().to_string()])
        .collect();
    let mut whole = experiment(&args, tmp.path());
    let p = whole.det.panel().clone();
    let (mut top, mut bottom) = (p.clone(), p.clone());
    top.spixels = 25;
    top.roi.slow = p.roi.slow.start..25;
    bottom.spixels = 36;
    bottom.pix0_vector = std::array::from_fn(|i| p.pix0_vector[i] + 25.0 * p.pixel_size * p.sdet_vector[i]);
    bottom.roi.slow = 0..p.roi.slow.end - 25;
    bottom.mask = Some((0..61 * 36).map(|i| u16::from(i % 7 != 3)).collect());
    whole.det.panels = vec![top, bottom];
    let mut turned = whole.clone();
    turned.crystal.orientations.iter_mut().for_each(|o| (o.a, o.b) = (o.b, o.a));
    same(&whole, &turned, "two panels");

    // tricubic interpolation, out of range on this small grid near the edge: the kept path hands
    // the row over to the reference kernel as the computed one does
    let interpolated: Vec<String> = args.iter().cloned().chain(["-interpolate".into()]).collect();
    let first = experiment(&interpolated, tmp.path());
    assert!(first.structure_factors.interpolate);
    let turned = experiment(&interpolated.iter().cloned().chain(["-phi".into(), "0.7".into()]).collect::<Vec<_>>(), tmp.path());
    same(&first, &turned, "interpolated");

    // another detector distance: the kept geometry is not this experiment's, and is not read
    let far = experiment(&args.iter().map(|a| if a == "100" { "120".into() } else { a.clone() }).collect::<Vec<_>>(), tmp.path());
    let g = PixelGeometry::build(&far).unwrap();
    let near = experiment(&args, tmp.path());
    assert!(!g.fits(&near));
    let opts = RenderOptions::default();
    assert_eq!(bits(&kernel::render_reusing(&near, &opts, Some(&g), &no_progress).float), bits(&kernel::render(&near, &opts, &no_progress).float));
}
