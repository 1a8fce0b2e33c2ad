//! `simulate --gradients`: every derivative image against central finite differences of its flag
//! (fourth order, Richardson: (8(f₊ₕ − f₋ₕ) − (f₊₂ₕ − f₋₂ₕ))/12h), to ≤ 1e-3 relative L2, on small
//! stills from `-mat` and from `-cell -misset` and on a run through every sampling loop; the dual
//! pass's own image equals the kernel's; the refusals.
//!
//! The finite differences are taken of the `-floatfile` images (4-byte floats; `--precision double`
//! renders in double, the file rounds): the steps are chosen so that rounding stays near 1e-5
//! relative. Structure factors are `-default_F` (no Fdump.bin in the scratch folder), so F does not
//! jump between the differences (the derivatives hold the nearest-neighbour F fixed).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_nanobragg-rs");

fn golden_input(name: &str) -> Option<PathBuf> {
    common::golden_dir().map(|g| g.join("inputs").join(name)).filter(|p| p.is_file())
}

/// Run `simulate base + extra` in `dir`; returns the float image and the derivative images.
fn run(dir: &Path, base: &[String], extra: &[String], grads: &[&str]) -> (Vec<f64>, Vec<Vec<f64>>) {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir).arg("simulate").args(base).args(extra);
    cmd.args(["-floatfile", "f.bin", "-intfile", "i.img", "-nonoise", "-nopgm", "-noprogress", "-quiet", "--precision", "double"]);
    if !grads.is_empty() {
        cmd.args(["--gradients", &grads.join(","), "--gradient-prefix", "g_"]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{:?}: {}", cmd, String::from_utf8_lossy(&out.stderr));
    let read = |p: &str| common::read_f32_le(&dir.join(p)).into_iter().map(f64::from).collect::<Vec<f64>>();
    (read("f.bin"), grads.iter().map(|g| read(&format!("g_{g}.bin"))).collect())
}

/// One parameter: its name, the flag words that set it to v, its value in the base run, the step.
struct Spec {
    name: &'static str,
    set: Box<dyn Fn(f64) -> Vec<String>>,
    v0: f64,
    h: f64,
}

fn spec(name: &'static str, set: impl Fn(f64) -> Vec<String> + 'static, v0: f64, h: f64) -> Spec {
    Spec { name, set: Box::new(set), v0, h }
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn flag(f: &'static str) -> impl Fn(f64) -> Vec<String> {
    move |v| vec![f.to_string(), v.to_string()]
}

fn rot(axis: usize) -> impl Fn(f64) -> Vec<String> {
    move |v| {
        let mut w = vec!["--crystal-rot".to_string()];
        w.extend((0..3).map(|i| if i == axis { v.to_string() } else { "0".to_string() }));
        w
    }
}

fn cell(cell: [f64; 6], i: usize) -> impl Fn(f64) -> Vec<String> {
    move |v| {
        let mut w = vec!["-cell".to_string()];
        w.extend((0..6).map(|j| if j == i { v } else { cell[j] }.to_string()));
        w
    }
}

fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

/// Every spec's derivative image against the finite difference of its flag.
fn check(base: &[String], specs: &[Spec]) {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
    let (_, grads) = run(dir.path(), base, &[], &names);
    let mut failures = Vec::new();
    for (s, g) in specs.iter().zip(&grads) {
        let f = |k: f64| run(dir.path(), base, &(s.set)(s.v0 + k * s.h), &[]).0;
        let (p1, m1, p2, m2) = (f(1.0), f(-1.0), f(2.0), f(-2.0));
        let fd: Vec<f64> = (0..p1.len()).map(|i| (8.0 * (p1[i] - m1[i]) - (p2[i] - m2[i])) / (12.0 * s.h)).collect();
        assert!(fd.iter().any(|&x| x != 0.0), "{}: the image does not depend on it here; pick another case", s.name);
        let e = rel_l2(g, &fd);
        eprintln!("{:>14}: relative L2 {e:.2e}", s.name);
        if e > 1e-3 {
            failures.push(format!("{} ({e:.2e})", s.name));
        }
    }
    assert!(failures.is_empty(), "derivative images differ from finite differences: {failures:?}");
}

fn geometry_specs(xbeam: f64, distance: f64) -> Vec<Spec> {
    vec![
        spec("rot_x", rot(0), 0.0, 0.01),
        spec("rot_y", rot(1), 0.0, 0.01),
        spec("rot_z", rot(2), 0.0, 0.01),
        spec("distance", flag("-distance"), distance, 0.01),
        spec("Xbeam", flag("-Xbeam"), xbeam, 0.01),
        spec("Ybeam", flag("-Ybeam"), xbeam, 0.01),
        spec("detector_rotx", flag("-detector_rotx"), 0.0, 0.01),
        spec("detector_roty", flag("-detector_roty"), 0.0, 0.01),
        spec("detector_rotz", flag("-detector_rotz"), 0.0, 0.01),
        spec("Na", flag("-Na"), 6.0, 0.01),
        spec("Nb", flag("-Nb"), 6.0, 0.01),
        spec("Nc", flag("-Nc"), 6.0, 0.01),
        spec("fluence", flag("-fluence"), 1e24, 1e21),
    ]
}

#[test]
fn mat_still_matches_finite_differences() {
    let Some(mat) = golden_input("A.mat") else {
        eprintln!("skipped: no golden inputs (../shared/golden or $NANOBRAGG_GOLDEN)");
        return;
    };
    let base = [vec!["-mat".to_string(), mat.display().to_string()], words("-default_F 100 -lambda 1 -distance 100 -pixel 0.1 -N 6 -detpixels 64 -oversample 2 -fluence 1e24")].concat();
    check(&base, &geometry_specs(3.25, 100.0));
    // with -mat the image does not depend on lambda (the matrix carries it): exactly zero, as the
    // parameter table says (a finite difference left rounding noise on every pixel, which refine
    // followed to λ ≈ 10⁶ Å)
    let dir = tempfile::tempdir().unwrap();
    let (_, g) = run(dir.path(), &base, &[], &["lambda"]);
    assert!(g[0].iter().all(|&x| x == 0.0), "d/dlambda with -mat is not zero");
    // ... and the image is the same at another wavelength (what the zero claims)
    let (a, _) = run(dir.path(), &base, &[], &[]);
    let (b, _) = run(dir.path(), &base, &words("-lambda 1.5"), &[]);
    assert_eq!(a, b, "with -mat the image moved with -lambda");
}

#[test]
fn cell_misset_still_matches_finite_differences() {
    let c = [70.0, 80.0, 90.0, 85.0, 95.0, 100.0];
    let base = [words("-cell 70 80 90 85 95 100 -misset 10 20 30 -default_F 100 -lambda 1.2 -distance 80 -pixel 0.2 -N 6 -detpixels 64 -oversample 2 -fluence 1e24"), vec![]].concat();
    let mut specs = geometry_specs(6.5, 80.0);
    specs.extend([
        spec("a", cell(c, 0), 70.0, 0.07),
        spec("b", cell(c, 1), 80.0, 0.08),
        spec("c", cell(c, 2), 90.0, 0.09),
        spec("alpha", cell(c, 3), 85.0, 0.01),
        spec("beta", cell(c, 4), 95.0, 0.01),
        spec("gamma", cell(c, 5), 100.0, 0.01),
        spec("lambda", flag("-lambda"), 1.2, 1e-4),
    ]);
    check(&base, &specs);
}

#[test]
fn every_sampling_loop_matches_finite_differences() {
    let c = [70.0, 80.0, 90.0, 85.0, 95.0, 100.0];
    let base = words(
        "-cell 70 80 90 85 95 100 -misset 10 20 30 -default_F 100 -lambda 1.2 -distance 80 -pixel 0.2 -N 5 -detpixels 40 \
         -oversample 2 -mosaic 0.5 -mosaic_dom 3 -mosaic_seed 7 -phi 0 -osc 0.3 -phisteps 2 -divergence 0.4 -divsteps 2 \
         -dispersion 0.5 -dispsteps 2 -round_xtal -polar 0.9 -detector_thick 50 -detector_thicksteps 2",
    );
    check(
        &base,
        &[
            spec("mosaic", flag("-mosaic"), 0.5, 0.005),
            spec("rot_x", rot(0), 0.0, 0.01),
            spec("a", cell(c, 0), 70.0, 0.07),
            spec("gamma", cell(c, 5), 100.0, 0.01),
            spec("Nb", flag("-Nb"), 5.0, 0.01),
            spec("lambda", flag("-lambda"), 1.2, 1e-4),
            spec("distance", flag("-distance"), 80.0, 0.01),
            spec("detector_roty", flag("-detector_roty"), 0.0, 0.01),
            spec("Ybeam", flag("-Ybeam"), 4.1, 0.01),
        ],
    );
}

#[test]
fn dual_pass_image_equals_the_kernels() {
    use nanobragg::experiment::tangents::{Param, Resolved};
    let cfg = nanobragg::cli::parse::parse_simulate_args(&words(
        "-cell 70 80 90 85 95 100 -misset 10 20 30 -default_F 100 -lambda 1.2 -distance 80 -pixel 0.2 -N 5 -detpixels 32 -oversample 2 -mosaic 0.3 -mosaic_dom 2 -round_xtal",
    ))
    .unwrap();
    let (exp, _, inputs) = nanobragg::run::simulate::setup_with_inputs(&cfg).unwrap();
    let img = nanobragg::kernel::render_reference(&exp, &|_| {}).float;
    let t = nanobragg::experiment::tangents::tangents(&cfg.params, &inputs, &exp, &[Param::Distance]).unwrap();
    let d = nanobragg::kernel::tangents::render_tangents(&exp, &Resolved::of(&exp), &t, None);
    let peak = img.iter().cloned().fold(0.0f32, f32::max) as f64;
    for (a, b) in img.iter().zip(&d.value) {
        assert!((*a as f64 - b).abs() <= 1e-6 * peak, "{a} vs {b}");
    }
}

#[test]
fn refusals_are_one_line_exit_9() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str); 6] = [
        ("-cell 70 80 90 90 90 90 -default_F 1 -detpixels 8 --loss-out L.json", "--loss-out: needs --observed"),
        ("-cell 70 80 90 90 90 90 -default_F 1 -detpixels 8 --observed nothere.bin", "nothere.bin"),
        ("-cell 70 80 90 90 90 90 -default_F 1 -detpixels 8 --gradients rot_q", "unknown parameter 'rot_q' (valid: rot_x"),
        ("-cell 70 80 90 90 90 90 -default_F 1 -detpixels 8 -tophat_spots --gradients Na", "-tophat_spots"),
        ("-cell 70 80 90 90 90 90 -default_F 1 -detpixels 8 --gradients", "--gradients: missing value"),
        ("-default_F 1 -detpixels 8 -mat MAT --gradients a", "needs the cell from -cell"),
    ];
    let mat = dir.path().join("A.mat");
    std::fs::write(&mat, "0.01 0 0\n0 0.01 0\n0 0 0.01\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n100 100 100 90 90 90\n0 0 0\n").unwrap();
    for (args, want) in cases {
        let args = args.replace("MAT", &mat.display().to_string());
        let out = Command::new(BIN).current_dir(dir.path()).arg("simulate").args(words(&args)).args(["-quiet", "-noprogress"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(9), "{args}: {err}");
        assert!(err.contains(want), "{args}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args}: {err}");
        assert!(!dir.path().join("floatimage.bin").exists(), "{args}: wrote an image");
    }
}

/// dL/dF (editing one `-hkl` line) against finite differences of the loss, both losses, with
/// nearest-neighbour and tricubic F.
#[test]
fn loss_gradients_match_finite_differences() {
    let Some(p1) = golden_input("P1.hkl") else {
        eprintln!("skipped: no golden inputs");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hkl: Vec<(String, f64)> = std::fs::read_to_string(p1)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            (t[..3].join(" "), t[3].parse().unwrap())
        })
        .collect();
    let write_hkl = |name: &str, edit: Option<(usize, f64)>| {
        let text: String = hkl.iter().enumerate().map(|(i, (idx, f))| format!("{idx} {}\n", f + edit.filter(|e| e.0 == i).map_or(0.0, |e| e.1))).collect();
        std::fs::write(d.join(name), text).unwrap();
    };
    write_hkl("base.hkl", None);
    let base = words("-cell 60 70 80 90 100 90 -misset 5 10 15 -lambda 1 -distance 100 -pixel 0.1 -N 3 -detpixels 40 -oversample 2 -dump F.bin");
    let loss_json = |hkl: &str, extra: &[String]| -> serde_json::Value {
        let args = [base.clone(), words(&format!("-hkl {hkl} --observed obs.bin --loss-out L.json")), extra.to_vec()].concat();
        run(d, &args, &[], &[]);
        serde_json::from_str(&std::fs::read_to_string(d.join("L.json")).unwrap()).unwrap()
    };
    for interp in ["-nointerpolate", "-interpolate"] {
        let (mu, _) = run(d, &[base.clone(), words(&format!("-hkl base.hkl {interp}"))].concat(), &[], &[]);
        let obs: Vec<u8> = mu.iter().flat_map(|m| ((m * 1.3 + 0.5) as f32).to_le_bytes()).collect();
        std::fs::write(d.join("obs.bin"), obs).unwrap();
        for loss in ["poisson", "lsq"] {
            let opts = words(&format!("{interp} --loss {loss}"));
            let l0 = loss_json("base.hkl", &[opts.clone(), words("--dfhkl-out G.hkl")].concat());
            assert_eq!(l0["loss"], loss);
            let fd = |set: &dyn Fn(f64) -> (String, Vec<String>), h: f64| -> f64 {
                let v: Vec<f64> = [1.0, -1.0, 2.0, -2.0].iter().map(|k| {
                    let (file, extra) = set(k * h);
                    loss_json(&file, &[opts.clone(), extra].concat())["value"].as_f64().unwrap()
                }).collect();
                (8.0 * (v[0] - v[1]) - (v[2] - v[3])) / (12.0 * h)
            };
            let g: Vec<(usize, f64)> = std::fs::read_to_string(d.join("G.hkl")).unwrap().lines().map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap()).enumerate().collect();
            assert_eq!(g.len(), hkl.len());
            let mut big = g.clone();
            big.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
            for &(i, got) in &big[..3] {
                let want = fd(&|df| {
                    write_hkl("edit.hkl", Some((i, df)));
                    ("edit.hkl".into(), Vec::new())
                }, 0.01);
                assert!((got - want).abs() <= 1e-3 * want.abs(), "{interp} {loss} dL/dF of line {}: {got} vs {want}", i + 1);
            }
        }
    }
}

/// dL/dθ against finite differences of the loss (structure factors from -default_F: the nearest
/// F's jumps at half-integer h, k, l, which the derivatives hold fixed, would show in the differences).
#[test]
fn loss_gradient_by_parameters_matches_finite_differences() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = words("-cell 60 70 80 90 100 90 -misset 5 10 15 -default_F 30 -lambda 1 -distance 100 -pixel 0.1 -N 3 -detpixels 40 -oversample 2");
    let (mu, _) = run(d, &base, &[], &[]);
    let obs: Vec<u8> = mu.iter().enumerate().flat_map(|(i, m)| ((m * 1.3 + 0.5 + (i % 7) as f64) as f32).to_le_bytes()).collect();
    std::fs::write(d.join("obs.bin"), obs).unwrap();
    for loss in ["poisson", "lsq"] {
        let value = |extra: &[String]| -> serde_json::Value {
            run(d, &[base.clone(), words(&format!("--observed obs.bin --loss {loss} --loss-out L.json")), extra.to_vec()].concat(), &[], &[]);
            serde_json::from_str(&std::fs::read_to_string(d.join("L.json")).unwrap()).unwrap()
        };
        let l0 = value(&words("--gradients rot_x,distance,Na,b"));
        for (name, v0, h, f) in [("rot_x", 0.0, 0.01, "--crystal-rot {} 0 0"), ("distance", 100.0, 0.01, "-distance {}"), ("Na", 3.0, 0.01, "-Na {}"), ("b", 70.0, 0.07, "-cell 60 {} 80 90 100 90")] {
            let v: Vec<f64> = [1.0, -1.0, 2.0, -2.0].iter().map(|k| value(&words(&f.replace("{}", &(v0 + k * h).to_string())))["value"].as_f64().unwrap()).collect();
            let want = (8.0 * (v[0] - v[1]) - (v[2] - v[3])) / (12.0 * h);
            let got = l0["gradient"][name].as_f64().unwrap();
            assert!((got - want).abs() <= 1e-3 * want.abs(), "{loss} dL/d{name}: {got} vs {want}");
        }
    }
}

/// The same counts as SMV (less -adc) and as CBF give the same loss.
#[test]
fn observed_smv_and_cbf_read_the_same_counts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = words("-cell 60 70 80 90 100 90 -default_F 50 -lambda 1 -distance 100 -pixel 0.1 -N 3 -detpixels 24 -oversample 1");
    let mut cmd = Command::new(BIN);
    cmd.current_dir(d).arg("simulate").args(&base).args(words("-noisefile n.img -cbffile n.cbf -seed 5 -quiet -noprogress"));
    assert!(cmd.output().unwrap().status.success());
    let value = |obs: &str| -> f64 {
        run(d, &[base.clone(), words(&format!("--observed {obs} --loss-out L.json"))].concat(), &[], &[]);
        let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("L.json")).unwrap()).unwrap();
        j["value"].as_f64().unwrap()
    };
    assert_eq!(value("n.img"), value("n.cbf"));
}

/// A NeXus frame (`-nexusfile`: the CBF's counts) as --observed gives the CBF's loss and gradient
/// (skipped, loudly, without the HDF5 library).
#[test]
fn observed_nexus_reads_the_cbf_counts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = words("-cell 60 70 80 90 100 90 -default_F 50 -lambda 1 -distance 100 -pixel 0.1 -N 3 -detpixels 24 -oversample 1");
    let mut cmd = Command::new(BIN);
    cmd.current_dir(d).arg("simulate").args(&base).args(words("-nexusfile n.nxs -cbffile n.cbf -seed 5 -quiet -noprogress"));
    let out = cmd.output().unwrap();
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("HDF5") {
        eprintln!("SKIPPED: observed_nexus_reads_the_cbf_counts because the HDF5 library is missing");
        return;
    }
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let value = |obs: &str| -> String {
        run(d, &[base.clone(), words(&format!("--observed {obs} --loss-out L.json --gradients rot_x,distance"))].concat(), &[], &["rot_x", "distance"]);
        std::fs::read_to_string(d.join("L.json")).unwrap()
    };
    assert_eq!(value("n.nxs"), value("n.cbf"));
    // a detector of another size is refused with the file's shape
    let mut cmd = Command::new(BIN);
    cmd.current_dir(d).arg("simulate").args(&base).args(words("-detpixels 20 --observed n.nxs -quiet -noprogress -nonoise -nopgm"));
    let out = cmd.output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("24 x 24"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The lane pass (`kernel::tangent_lanes`) against the dual reference at every SIMD level and both
/// precisions, for every parameter it takes, on a still with polarization and a hkl grid and on a run
/// through the sampling loops it supports (mosaic domains × phi steps × divergence × dispersion ×
/// oversample): ≤ 1e-9 of each image's peak in double, `check::tangent_tolerance` in single.
#[test]
fn lane_tangents_match_the_dual_reference_at_every_level() {
    use nanobragg::experiment::params::Precision;
    use nanobragg::experiment::tangents::{Param, Resolved};
    use nanobragg::kernel::{tangent_lanes, Backend, RenderOptions, SimdLevel};
    let cases = [
        "-cell 70 80 90 85 95 100 -misset 10 20 30 -default_F 100 -lambda 1.2 -distance 80 -pixel 0.2 -N 5 -detpixels 24 -polar 0.9 -detector_rotx 2 -detector_roty -3 -detector_rotz 4",
        "-cell 70 80 90 85 95 105 -misset 10 20 30 -default_F 100 -lambda 1 -distance 100 -pixel 0.4 -N 10 -mosaic 0.5 -mosaic_dom 3 -phisteps 2 -osc 0.1 -divergence 0.2 -divsteps 3 -dispersion 0.1 -dispsteps 2 -oversample 2 -detpixels 20 -Xbeam 3 -Ybeam 5",
    ];
    let names: Vec<Param> = Param::ALL.to_vec();
    for flags in cases {
        let cfg = nanobragg::cli::parse::parse_simulate_args(&words(flags)).unwrap();
        let (exp, _, inputs) = nanobragg::run::simulate::setup_with_inputs(&cfg).unwrap();
        assert!(tangent_lanes::supports(&exp), "{flags}");
        let t = nanobragg::experiment::tangents::tangents(&cfg.params, &inputs, &exp, &names).unwrap();
        let base = Resolved::of(&exp);
        let taken: Vec<&Resolved> = t.iter().filter(|t| tangent_lanes::takes(t)).collect();
        let taken_names: Vec<&str> = names.iter().zip(&t).filter(|p| tangent_lanes::takes(p.1)).map(|p| p.0.name()).collect();
        for g in ["rot_x", "rot_y", "rot_z", "a", "b", "c", "alpha", "beta", "gamma", "distance", "Xbeam", "Ybeam", "detector_rotx", "mosaic", "fluence"] {
            assert!(taken_names.contains(&g), "{g} not taken by the lane pass: {taken_names:?}");
        }
        let owned: Vec<Resolved> = taken.iter().map(|t| (*t).clone()).collect();
        let want = nanobragg::kernel::tangents::render_tangents_reference(&exp, &base, &owned, None);
        for precision in [Precision::Double, Precision::Single] {
            for level in SimdLevel::available() {
                let (value, got) = tangent_lanes::render_lanes(&exp, &taken, level, precision);
                let tol = tangent_lanes::tangent_tolerance(precision);
                let (ve, vp) = tangent_lanes::tangent_difference(&value, &want.value);
                assert!(ve <= tol * vp, "{flags}: image at {level:?} {precision:?}: {ve:e} of {vp:e}");
                for (name, (g, w)) in taken_names.iter().zip(got.iter().zip(&want.grads)) {
                    let (e, p) = tangent_lanes::tangent_difference(g, w);
                    eprintln!("{level:?} {precision:?} {name}: {:.2e}", e / p.max(1e-300));
                    assert!(e <= tol * p, "{flags}: {name} at {level:?} {precision:?}: max diff {e:e}, peak {p:e}");
                }
            }
        }
        // the fused plan's image (the lane pass's value as f32) against the forward SIMD kernel's
        let level = *SimdLevel::available().last().unwrap();
        let fwd = nanobragg::kernel::render(&exp, &RenderOptions { backend: Backend::Simd(level), precision: Precision::Double }, &|_| {});
        let (value, _) = tangent_lanes::render_lanes(&exp, &taken, level, Precision::Double);
        let same = fwd.float.iter().zip(&value).filter(|(a, b)| **a == **b as f32).count();
        for (a, b) in fwd.float.iter().zip(&value) {
            assert!((*a as f64 - b).abs() <= 1e-6 * (*a as f64).abs(), "{flags}: image {a} vs {b}");
        }
        eprintln!("{same} of {} float pixels bit for bit", value.len());
        let om = (tangent_lanes::omega_sum(&exp) - fwd.omega_sum) / fwd.omega_sum;
        assert!(om.abs() < 1e-12, "omega sum {om:e}");
        // the planned path (the process's backend, double) renders the same images
        let planned = nanobragg::kernel::tangents::render_tangents_with(&exp, &base, &t, None, &RenderOptions { backend: Backend::Simd(SimdLevel::Avx512), precision: Precision::Double });
        assert_eq!(planned.grads.len(), names.len());
    }
}

/// The library's loss gradient lists dL/dF per reflection read with the grid: it read the `-hkl` file
/// again by its path, so a file changed (or gone, or another under a relative name after a change of
/// folder) after the setup gave another list than the grid the image was rendered from, or an error.
#[test]
fn loss_gradient_lists_the_reflections_read_at_setup() {
    use nanobragg::experiment::tangents::Param;
    use nanobragg::run::config::LossKind;
    let dir = tempfile::tempdir().unwrap();
    let hkl = dir.path().join("F.hkl");
    let text: String = (-3..=3).flat_map(|h| (-3..=3).flat_map(move |k| (-3..=3).map(move |l| format!("{h} {k} {l} 100\n")))).collect();
    std::fs::write(&hkl, &text).unwrap();
    let args = words(&format!("-cell 60 70 80 90 100 90 -lambda 1 -distance 100 -detpixels 32 -N 3 -hkl {} -dump {}", hkl.display(), dir.path().join("Fd.bin").display()));
    let cfg = nanobragg::cli::parse::parse_simulate_args(&args).unwrap();
    let (exp, _, inputs) = nanobragg::run::simulate::setup_with_inputs(&cfg).unwrap();
    let r = nanobragg::run::simulate::render(&exp, &cfg.run.render_options(), Some(1), &|_| {}).unwrap();
    let y: Vec<f64> = r.float.iter().map(|&v| v as f64 + 0.5).collect();
    let lg = || nanobragg::run::gradients::loss_gradient(&cfg, &inputs, &exp, &r.float, &y, LossKind::Poisson, &[Param::RotX], Path::new("observed")).unwrap();
    let before = lg();
    assert_eq!(before.dfhkl.len(), 343);
    std::fs::write(&hkl, "1 1 1 5\n").unwrap();
    let after = lg();
    assert_eq!((after.value, &after.dfhkl), (before.value, &before.dfhkl));
    std::fs::remove_file(&hkl).unwrap();
    assert_eq!(lg().dfhkl, before.dfhkl);
}
