//! Live randomized parity with the C program (issue 16): random but valid nanoBragg command lines on
//! small detectors, run through the reference binary (`../shared/cref/nanoBragg`, or `$NB_C_BIN`) and
//! through `nanobragg-rs simulate`, each in its own scratch folder holding the golden inputs.
//!
//! * float image: the golden tolerances (tests/golden.rs): correlation ≥ 0.999999, |sum ratio − 1| ≤ 1e-5,
//!   zeros where the C has zeros;
//! * SMV int and noise images, PGM and Fdump.bin: byte-identical to the C's.
//!
//! The run's seed is printed; `NB_PARITY_SEED=<seed>` replays the run, `NB_PARITY_CASE=<k>` only its
//! case k, `NB_PARITY_CASES=<n>` sets how many cases (default 40). A failing case prints the two command
//! lines that reproduce it. Without the C binary the test says SKIPPED and passes.
//!
//! The C runs with `OMP_NUM_THREADS=1`: its output at an out-of-range interpolation or a φ of 0 depends
//! on the thread count (checklist Q15, Q20), and this port reproduces the single-threaded C.
//! Flags whose C parsing collides by substring (`-twotheta_axis`, `-printout_pixel`) are not generated;
//! `-misset_seed` comes before `-misset random` as in the golden `misset_random` case.

mod common;

use common::random::{d, Rng};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const MIN_CORRELATION: f64 = 0.999999;
const MAX_SUM_REL: f64 = 1e-5;
const DEFAULT_CASES: u64 = 40;


struct Case {
    args: Vec<String>,
    inputs: Vec<&'static str>,
    outputs: Vec<&'static str>,
}

/// One random but valid command line. Sample counts stay small (at most a few hundred per pixel on
/// at most 96×96 pixels) so a case takes well under a second in either program.
fn generate(rng: &mut Rng) -> Case {
    let mut a: Vec<String> = Vec::new();
    let mut inputs = Vec::new();
    let push = |a: &mut Vec<String>, words: &[String]| a.extend(words.iter().cloned());
    let s = |x: &str| x.to_string();

    // --- convention, detector size and beam centre -------------------------------------------
    let conv = rng.pick(&["", "", "-mosflm", "-xds", "-adxv", "-denzo", "-dials"]);
    if !conv.is_empty() {
        a.push(s(conv));
    }
    let pixel = rng.pick(&["0.1", "0.1", "0.15", "0.2"]);
    let (nf, ns) = if rng.chance(0.7) {
        let n = rng.pick(&["32", "48", "64", "80", "96"]);
        push(&mut a, &[s("-detpixels"), s(n)]);
        (n.parse::<f64>().unwrap(), n.parse::<f64>().unwrap())
    } else {
        let (f, sl) = (rng.i(24, 96), rng.i(24, 96));
        push(&mut a, &[s("-detpixels_x"), f.to_string(), s("-detpixels_y"), sl.to_string()]);
        (f as f64, sl as f64)
    };
    push(&mut a, &[s("-pixel"), s(pixel)]);
    let px: f64 = pixel.parse().unwrap();
    if rng.chance(0.4) {
        let (xb, yb) = (rng.f(0.2, 0.8) * nf * px, rng.f(0.2, 0.8) * ns * px);
        push(&mut a, &[s("-Xbeam"), d(xb, 2), s("-Ybeam"), d(yb, 2)]);
    } else if conv == "-xds" && rng.chance(0.5) {
        push(&mut a, &[s("-ORGX"), d(rng.f(0.2, 0.8) * nf, 1), s("-ORGY"), d(rng.f(0.2, 0.8) * ns, 1)]);
    }
    if rng.chance(0.15) {
        push(&mut a, &[s("-close_distance"), d(rng.f(50.0, 150.0), 1)]);
    } else {
        push(&mut a, &[s("-distance"), d(rng.f(50.0, 150.0), 1)]);
    }
    if rng.chance(0.3) {
        push(&mut a, &[s("-pivot"), s(rng.pick(&["beam", "sample"]))]);
    }
    if rng.chance(0.25) {
        push(&mut a, &[s("-twotheta"), d(rng.f(-25.0, 25.0), 1)]);
    }
    if rng.chance(0.3) {
        for r in ["-detector_rotx", "-detector_roty", "-detector_rotz"] {
            if rng.chance(0.6) {
                push(&mut a, &[s(r), d(rng.f(-10.0, 10.0), 2)]);
            }
        }
    }
    if rng.chance(0.08) {
        a.push(s("-curved_det"));
    } else if rng.chance(0.08) {
        a.push(s("-point_pixel"));
    }

    // --- beam ----------------------------------------------------------------------------------
    if rng.chance(0.8) {
        push(&mut a, &[s("-lambda"), d(rng.f(0.7, 2.0), 3)]);
    } else {
        push(&mut a, &[s("-energy"), d(rng.f(7000.0, 15000.0), 0)]);
    }
    let mut sources = 1;
    if rng.chance(0.12) {
        push(&mut a, &[s("-sourcefile"), s("sources.txt")]);
        inputs.push("sources.txt");
        sources = 4;
    } else {
        if rng.chance(0.3) {
            let n = rng.i(1, 3);
            push(&mut a, &[s("-divergence"), d(rng.f(0.05, 1.0), 2), s("-divsteps"), n.to_string()]);
            if rng.chance(0.5) {
                a.push(s(rng.pick(&["-round_div", "-square_div"])));
            }
            sources *= n * n;
        }
        if rng.chance(0.3) {
            let n = rng.i(1, 3);
            push(&mut a, &[s("-dispersion"), d(rng.f(0.05, 1.0), 2), s("-dispsteps"), n.to_string()]);
            sources *= n;
        }
    }
    if rng.chance(0.3) {
        push(&mut a, &[s("-polar"), d(rng.f(0.0, 1.0), 2)]);
    } else if rng.chance(0.1) {
        a.push(s("-nopolar"));
    }
    if rng.chance(0.2) {
        push(&mut a, &[s("-fluence"), format!("{:.2e}", 10f64.powf(rng.f(22.0, 26.0)))]);
    }

    // --- crystal -------------------------------------------------------------------------------
    if rng.chance(0.12) {
        push(&mut a, &[s("-mat"), s("A.mat")]);
        inputs.push("A.mat");
    } else {
        a.push(s("-cell"));
        for _ in 0..3 {
            a.push(d(rng.f(40.0, 120.0), 1));
        }
        let triclinic = rng.chance(0.5);
        for _ in 0..3 {
            a.push(if triclinic { d(rng.f(82.0, 100.0), 1) } else { s("90") });
        }
        if rng.chance(0.15) {
            push(&mut a, &[s("-misset_seed"), rng.i(1, 99999).to_string(), s("-misset"), s("random")]);
        } else if rng.chance(0.7) {
            push(&mut a, &[s("-misset"), d(rng.f(-90.0, 90.0), 1), d(rng.f(-90.0, 90.0), 1), d(rng.f(-90.0, 90.0), 1)]);
        }
    }
    let hkl = rng.chance(0.45);
    if rng.chance(0.6) {
        push(&mut a, &[s("-N"), rng.i(2, 8).to_string()]);
    } else {
        for n in ["-Na", "-Nb", "-Nc"] {
            push(&mut a, &[s(n), rng.i(2, 9).to_string()]);
        }
    }
    if hkl {
        push(&mut a, &[s("-hkl"), s("P1.hkl")]);
        inputs.push("P1.hkl");
        let interp = rng.pick(&["", "-interpolate", "-nointerpolate"]);
        if !interp.is_empty() {
            a.push(s(interp));
        }
        if rng.chance(0.3) {
            push(&mut a, &[s("-default_F"), d(rng.f(1.0, 100.0), 1)]);
        }
    } else {
        push(&mut a, &[s("-default_F"), d(rng.f(10.0, 200.0), 1)]);
    }
    let shape = rng.pick(&["", "", "-round_xtal", "-gauss_xtal", "-tophat_spots", "-square_xtal"]);
    if !shape.is_empty() {
        a.push(s(shape));
        if shape != "-square_xtal" && rng.chance(0.5) {
            push(&mut a, &[s("-fudge"), d(rng.f(0.5, 2.0), 2)]);
        }
    }
    let mut domains = 1;
    if rng.chance(0.3) {
        domains = rng.i(1, 4);
        push(&mut a, &[
            s("-mosaic"),
            d(rng.f(0.05, 1.0), 2),
            s("-mosaic_dom"),
            domains.to_string(),
            s("-mosaic_seed"),
            rng.i(1, 99999).to_string(),
        ]);
    }
    let mut phisteps = 1;
    if rng.chance(0.3) {
        phisteps = rng.i(1, 4);
        push(&mut a, &[
            s("-phi"),
            d(rng.f(-30.0, 30.0), 1),
            s("-osc"),
            d(rng.f(0.1, 3.0), 2),
            s("-phisteps"),
            phisteps.to_string(),
        ]);
    }

    // --- detector physics and sampling ------------------------------------------------------------
    let mut thick = 1;
    if rng.chance(0.2) {
        thick = rng.i(1, 3);
        push(&mut a, &[
            s("-detector_thick"),
            d(rng.f(50.0, 400.0), 0),
            s("-detector_abs"),
            d(rng.f(100.0, 500.0), 0),
            s("-detector_thicksteps"),
            thick.to_string(),
        ]);
    }
    // -oversample_* before -oversample (the C reads `-oversample` as a prefix of them only when no
    // `continue` intervenes; it does, but keep the explicit count last in any case).
    let budget = 4000 / (sources * domains * phisteps * thick).max(1);
    if rng.chance(0.35) {
        for f in ["-oversample_thick", "-oversample_polar", "-oversample_omega"] {
            if rng.chance(0.3) {
                a.push(s(f));
            }
        }
        let max_os = if budget >= 9 * 9 { 3 } else if budget >= 4 * 4 { 2 } else { 1 };
        push(&mut a, &[s("-oversample"), rng.i(1, max_os).to_string()]);
    }
    if rng.chance(0.2) {
        push(&mut a, &[s("-water"), d(rng.f(0.0, 1.0), 2)]);
    }
    if rng.chance(0.15) {
        let (x0, y0) = (rng.i(0, nf as i64 / 2), rng.i(0, ns as i64 / 2));
        let (x1, y1) = (rng.i(x0, nf as i64 - 1), rng.i(y0, ns as i64 - 1));
        push(&mut a, &[s("-roi"), x0.to_string(), x1.to_string(), y0.to_string(), y1.to_string()]);
    }
    if rng.chance(0.15) {
        push(&mut a, &[s("-dmin"), d(rng.f(1.0, 6.0), 1)]);
    }

    // --- outputs ---------------------------------------------------------------------------------
    let mut outputs = vec!["float.bin", "int.img"];
    push(&mut a, &[s("-floatfile"), s("float.bin"), s("-intfile"), s("int.img")]);
    if rng.chance(0.3) {
        push(&mut a, &[s("-scale"), d(rng.f(0.1, 10.0), 2)]);
    }
    if rng.chance(0.2) {
        push(&mut a, &[s("-adc"), d(rng.f(0.0, 40.0), 1)]);
    }
    if rng.chance(0.5) {
        push(&mut a, &[s("-noisefile"), s("noise.img")]);
        outputs.push("noise.img");
    } else {
        a.push(s("-nonoise"));
    }
    if rng.chance(0.4) {
        push(&mut a, &[s("-pgmfile"), s("image.pgm")]);
        outputs.push("image.pgm");
        if rng.chance(0.4) {
            push(&mut a, &[s("-pgmscale"), d(rng.f(0.1, 5.0), 2)]);
        }
    } else {
        a.push(s("-nopgm"));
    }
    push(&mut a, &[s("-seed"), rng.i(1, 999_999).to_string(), s("-noprogress")]);
    if hkl {
        outputs.push("Fdump.bin");
    }
    Case { args: a, inputs, outputs }
}

/// `../shared/cref/nanoBragg`, or `$NB_C_BIN`; `None` (said loudly) when it is not there.
fn c_binary() -> Option<PathBuf> {
    let p = match std::env::var_os("NB_C_BIN").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/cref/nanoBragg"),
    };
    if p.is_file() {
        return Some(std::fs::canonicalize(&p).unwrap_or(p));
    }
    log(&format!("SKIPPED: randomized parity with the C, because there is no C binary at {} (set NB_C_BIN)", p.display()));
    None
}

fn inputs_dir() -> Option<PathBuf> {
    let g = match std::env::var_os("NANOBRAGG_GOLDEN") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/golden"),
    };
    let i = g.join("inputs");
    if i.join("P1.hkl").is_file() {
        Some(i)
    } else {
        log(&format!("SKIPPED: randomized parity with the C, because the golden inputs are not at {}", i.display()));
        None
    }
}

fn quote(args: &[String]) -> String {
    args.join(" ")
}

struct Run {
    code: Option<i32>,
    stderr: String,
}

fn run_in(dir: &Path, inputs_src: &Path, inputs: &[&str], program: &Path, pre: &[&str], args: &[String], c: bool) -> Run {
    std::fs::create_dir_all(dir).unwrap();
    for i in inputs {
        std::fs::copy(inputs_src.join(i), dir.join(i)).unwrap();
    }
    let mut cmd = Command::new(program);
    cmd.args(pre).args(args).current_dir(dir).env("LC_ALL", "C");
    if c {
        cmd.env("OMP_NUM_THREADS", "1");
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    Run { code: out.status.code(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

/// What differs between the two folders' outputs.
fn compare(c_dir: &Path, rs_dir: &Path, outputs: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for name in outputs {
        let (cp, rp) = (c_dir.join(name), rs_dir.join(name));
        match (cp.is_file(), rp.is_file()) {
            (false, false) => continue,
            (true, false) => {
                problems.push(format!("{name}: written by the C, not by us"));
                continue;
            }
            (false, true) => {
                problems.push(format!("{name}: written by us, not by the C"));
                continue;
            }
            _ => {}
        }
        if *name == "float.bin" {
            let (want, got) = (read_f32_le(&cp), read_f32_le(&rp));
            if want.len() != got.len() {
                problems.push(format!("float image: {} pixels, the C's {}", got.len(), want.len()));
                continue;
            }
            let r = nanobragg::stats::pearson(&got, &want);
            let (sg, sw): (f64, f64) = (got.iter().map(|&v| v as f64).sum(), want.iter().map(|&v| v as f64).sum());
            let ratio = if sw != 0.0 { sg / sw } else if sg == 0.0 { 1.0 } else { f64::INFINITY };
            let all_same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
            // A constant image (e.g. all zeros) has no correlation; equal bits are then the test.
            if !all_same && !(r >= MIN_CORRELATION) {
                problems.push(format!("float correlation {r:.9} < {MIN_CORRELATION}"));
            }
            if !((ratio - 1.0).abs() <= MAX_SUM_REL) {
                problems.push(format!("float sum ratio {ratio:.9} (|r-1| > {MAX_SUM_REL})"));
            }
            let zeros = got.iter().zip(&want).filter(|(g, w)| (**w == 0.0) != (**g == 0.0)).count();
            if zeros > 0 {
                problems.push(format!("float: {zeros} pixels zero in one image only"));
            }
        } else {
            let (w, g) = (std::fs::read(&cp).unwrap(), std::fs::read(&rp).unwrap());
            // README "Differences": our SMV header never runs past 512 bytes, the C's can (checklist
            // Q30); then the pixels after each header must still be identical.
            let long_c_header = name.ends_with(".img") && w.len() > g.len() && g.len() >= 512;
            if long_c_header && w[w.len() - (g.len() - 512)..] == g[512..] {
                continue;
            }
            if w != g {
                let first = w.iter().zip(&g).position(|(a, b)| a != b).unwrap_or(w.len().min(g.len()));
                problems.push(format!(
                    "{name}: not byte-identical to the C's ({} vs {} bytes, first difference at byte {first})",
                    g.len(),
                    w.len()
                ));
            }
        }
    }
    problems
}

/// A line straight to the process's stderr, past the test harness's capture, so the seed and the summary
/// are in every CI log even when the test passes.
fn log(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.trim().parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")))
}

#[test]
fn random_command_lines_match_the_c() {
    let Some(c_bin) = c_binary() else { return };
    let Some(inputs_src) = inputs_dir() else { return };
    let rs_bin = PathBuf::from(env!("CARGO_BIN_EXE_nanobragg-rs"));
    let seed = env_u64("NB_PARITY_SEED").unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        (t.as_nanos() as u64) % 1_000_000_000
    });
    let n = env_u64("NB_PARITY_CASES").unwrap_or(DEFAULT_CASES);
    let only = env_u64("NB_PARITY_CASE");
    log(&format!("randomized parity: seed {seed} (replay: NB_PARITY_SEED={seed} cargo test --release --test random_parity)"));
    log(&format!("randomized parity: C binary {}", c_bin.display()));
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut ran = 0;
    for k in 0..n {
        if only.is_some_and(|o| o != k) {
            continue;
        }
        let case = generate(&mut Rng::new(seed, k));
        let (c_dir, rs_dir) = (tmp.path().join(format!("{k}-c")), tmp.path().join(format!("{k}-rs")));
        let t0 = Instant::now();
        let c = run_in(&c_dir, &inputs_src, &case.inputs, &c_bin, &[], &case.args, true);
        let t_c = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let r = run_in(&rs_dir, &inputs_src, &case.inputs, &rs_bin, &["simulate"], &case.args, false);
        let t_rs = t1.elapsed().as_secs_f64();
        ran += 1;
        let mut problems = Vec::new();
        if c.code != Some(0) {
            problems.push(format!("the C exited {:?} (the generator made an invalid case?): {}", c.code, c.stderr.trim()));
        }
        if r.code != Some(0) {
            problems.push(format!("we exited {:?}: {}", r.code, r.stderr.trim()));
        }
        if problems.is_empty() {
            problems = compare(&c_dir, &rs_dir, &case.outputs);
        }
        if problems.is_empty() {
            eprintln!("ok   case {k:2} (C {t_c:.2} s, ours {t_rs:.2} s): {}", quote(&case.args));
            let _ = std::fs::remove_dir_all(&c_dir);
            let _ = std::fs::remove_dir_all(&rs_dir);
        } else {
            let copy = if case.inputs.is_empty() {
                String::new()
            } else {
                format!(
                    "cp {} . && ",
                    case.inputs.iter().map(|i| inputs_src.join(i).display().to_string()).collect::<Vec<_>>().join(" ")
                )
            };
            let msg = format!(
                "case {k} (seed {seed}): {}\n  replay: NB_PARITY_SEED={seed} NB_PARITY_CASE={k} cargo test --release --test random_parity\n  \
                 C:    mkdir c && cd c && {copy}OMP_NUM_THREADS=1 {} {}\n  ours: mkdir rs && cd rs && {copy}{} simulate {}",
                problems.join("; "),
                c_bin.display(),
                quote(&case.args),
                rs_bin.display(),
                quote(&case.args)
            );
            log(&format!("FAIL {msg}"));
            failures.push(msg);
        }
    }
    log(&format!(
        "randomized parity: seed {seed}: {} of {ran} random cases match the C ({:.1} s)",
        ran - failures.len(),
        started.elapsed().as_secs_f64()
    ));
    assert!(failures.is_empty(), "{} of {ran} random cases differ from the C:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_generator_replays_and_varies() {
    let a = generate(&mut Rng::new(7, 3)).args;
    assert_eq!(a, generate(&mut Rng::new(7, 3)).args);
    assert_ne!(a, generate(&mut Rng::new(7, 4)).args);
    assert_ne!(a, generate(&mut Rng::new(8, 3)).args);
}
