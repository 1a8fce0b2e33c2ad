//! Live randomized parity of the suite's companion programs with the C (issue 17), in the style of
//! tests/random_parity.rs: random but valid `noisify` and `nonBragg` command lines on small images, run
//! through the reference binaries (`../shared/cref/noisify` and `../shared/cref/nonBragg`, or
//! `$NB_C_NOISIFY` / `$NB_C_NONBRAGG`) and through `nanobragg-rs noisify` / `nanobragg-rs nonbragg`, each
//! in its own scratch folder.
//!
//! * noisify: every integer image (SMV int and noise images, PGM) byte-identical and stdout identical;
//! * nonBragg: float image with the golden tolerances (correlation ≥ 0.999999, |sum ratio − 1| ≤ 1e-5),
//!   SMV int and noise images byte-identical, and the PGM's valid part (nonBragg.c writes twice the
//!   image's bytes, the second half read past its buffer; see ../shared/golden-suite/README.md).
//!
//! The run's seed is printed; `NB_SUITE_PARITY_SEED=<seed>` replays the run, `NB_SUITE_PARITY_CASE=<k>`
//! only its case k, `NB_SUITE_PARITY_CASES=<n>` sets how many cases per program (default 20). A failing
//! case prints the two command lines that reproduce it. Without a C binary the test says SKIPPED and
//! passes.

mod common;

use common::random::{d, Rng};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const MIN_CORRELATION: f64 = 0.999999;
const MAX_SUM_REL: f64 = 1e-5;
const DEFAULT_CASES: u64 = 20;


struct Case {
    args: Vec<String>,
    /// files to make in the scratch folder before the run (name, bytes)
    inputs: Vec<(String, Vec<u8>)>,
    outputs: Vec<&'static str>,
}

/// A noiseless photons/pixel image: a sloped background, a ring and a few sharp spots, sometimes a
/// zero or negative pixel.
fn float_image(rng: &mut Rng, nx: i64, ny: i64) -> Vec<u8> {
    let bg = rng.f(0.0, 3.0);
    let ring = rng.f(0.0, 20.0);
    let spots: Vec<(f64, f64, f64)> =
        (0..rng.i(0, 6)).map(|_| (rng.f(0.0, nx as f64), rng.f(0.0, ny as f64), rng.f(10.0, 3000.0))).collect();
    let mut b = Vec::with_capacity((nx * ny * 4) as usize);
    for y in 0..ny {
        for x in 0..nx {
            let (fx, fy) = (x as f64 - nx as f64 / 2.0, y as f64 - ny as f64 / 2.0);
            let r = (fx * fx + fy * fy).sqrt() / nx.max(ny) as f64;
            let mut v = bg * (1.0 + x as f64 / nx as f64) + ring * (-((r - 0.3) / 0.1).powi(2)).exp();
            for &(sx, sy, h) in &spots {
                v += h * (-((x as f64 - sx).powi(2) + (y as f64 - sy).powi(2)) / 1.2).exp();
            }
            let v = match rng.i(0, 400) {
                0 => 0.0,
                1 => -0.5,
                _ => v,
            };
            b.extend_from_slice(&(v as f32).to_le_bytes());
        }
    }
    b
}

fn generate_noisify(rng: &mut Rng) -> Case {
    let s = |x: &str| x.to_string();
    let mut a: Vec<String> = vec![s("-floatfile"), s("in.bin")];
    let fiber_auto_ok;
    let (nx, ny) = if rng.chance(0.5) {
        let n = rng.i(8, 64);
        if rng.chance(0.7) {
            a.extend([s("-detpixels"), n.to_string()]);
        } // else: the C guesses the size of a square image
        (n, n)
    } else {
        let (x, y) = (rng.i(8, 72), rng.i(8, 72));
        a.extend([s("-detpixels_x"), x.to_string(), s("-detpixels_y"), y.to_string()]);
        (x, y)
    };
    fiber_auto_ok = nx.max(ny) <= 40;
    let pixel = rng.f(0.05, 0.2);
    a.extend([s("-pixel"), d(pixel, 3), s("-distance"), d(rng.f(50.0, 300.0), 1), s("-lambda"), d(rng.f(0.8, 2.0), 3)]);
    if rng.chance(0.3) {
        a.extend([s("-Xbeam"), d(rng.f(0.2, 0.8) * nx as f64 * pixel, 2), s("-Ybeam"), d(rng.f(0.2, 0.8) * ny as f64 * pixel, 2)]);
    }
    if rng.chance(0.6) {
        a.extend([s("-scale"), d(rng.f(0.5, 200.0), 2)]);
    }
    if rng.chance(0.4) {
        a.extend([s("-gain"), d(rng.f(0.5, 4.0), 2)]);
    }
    if rng.chance(0.4) {
        a.extend([s("-adc"), d(rng.f(0.0, 100.0), 1)]);
    }
    if rng.chance(0.5) {
        a.extend([s(rng.pick(&["-readout_noise", "-readnoise"])), d(rng.f(0.0, 5.0), 2)]);
    }
    if rng.chance(0.4) {
        a.extend([s("-flicker"), d(rng.f(0.0, 0.1), 3)]);
    }
    if rng.chance(0.5) {
        a.extend([s("-calibration"), d(rng.f(0.0, 0.05), 3)]);
    }
    if rng.chance(0.4) {
        a.extend([s("-calib_seed"), rng.i(1, 99999).to_string()]);
    }
    if rng.chance(0.3) {
        a.extend([s("-bits"), s(rng.pick(&["16", "32"]))]);
    }
    if rng.chance(0.6) {
        let fiber = rng.chance(0.5);
        a.extend([s("-psf"), s(if fiber { "fiber" } else { "gauss" })]);
        a.extend([s(rng.pick(&["-psf_fwhm", "-psf_width", "-psf_sigma"])), d(rng.f(20.0, 3.0 * pixel * 1000.0), 1)]);
        if rng.chance(0.5) || (fiber && !fiber_auto_ok) {
            a.extend([s("-psf_radius"), rng.i(1, 9).to_string()]);
        }
    }
    if rng.chance(0.2) {
        a.extend([s("-phi"), d(rng.f(0.0, 90.0), 1), s("-osc"), d(rng.f(0.1, 2.0), 2)]);
    }
    if rng.chance(0.1) {
        a.push(s("-nonoise"));
    }
    if rng.chance(0.2) {
        a.push(s("-nopgm"));
    }
    a.extend([s("-seed"), rng.i(1, 999999).to_string()]);
    a.extend([s("-intfile"), s("int.img"), s("-noisefile"), s("noise.img"), s("-pgmfile"), s("image.pgm")]);
    let img = float_image(rng, nx, ny);
    Case { args: a, inputs: vec![("in.bin".into(), img)], outputs: vec!["int.img", "noise.img", "image.pgm"] }
}

fn generate_nonbragg(rng: &mut Rng, stol: &Path) -> Case {
    let s = |x: &str| x.to_string();
    let mut a: Vec<String> = Vec::new();
    let water = rng.chance(0.7);
    let table = if water { "water.stol" } else { "air.stol" };
    a.extend([s("-stol"), s(table)]);
    if water {
        if rng.chance(0.6) {
            a.extend([s("-thickness"), d(rng.f(0.01, 0.5), 3)]);
        } else {
            a.extend([s("-samplesize"), d(rng.f(0.01, 0.2), 3)]);
        }
    } else {
        a.extend([s("-thickness"), d(rng.f(10.0, 200.0), 1), s("-density"), s("0.0012"), s("-MW"), s("29")]);
    }
    if rng.chance(0.8) {
        a.extend([s("-lambda"), d(rng.f(0.7, 2.0), 3)]);
    } else {
        a.extend([s("-energy"), d(rng.f(7000.0, 15000.0), 0)]);
    }
    if rng.chance(0.3) {
        a.extend([s("-dispersion"), d(rng.f(0.1, 1.0), 2), s("-dispsteps"), rng.i(2, 3).to_string()]);
    }
    if rng.chance(0.3) {
        let (h, v) = (rng.f(0.1, 1.0), rng.f(0.1, 1.0));
        a.extend([s("-hdivrange"), d(h, 2), s("-vdivrange"), d(v, 2), s("-hdivstep"), d(h / 2.0, 3), s("-vdivstep"), d(v / 2.0, 3)]);
    }
    let n = rng.i(16, 48);
    let pixel = rng.pick(&["0.1", "0.2", "0.4"]);
    a.extend([s("-detpixels"), n.to_string(), s("-pixel"), s(pixel), s("-distance"), d(rng.f(40.0, 200.0), 1)]);
    let px: f64 = pixel.parse().unwrap();
    if rng.chance(0.4) {
        a.extend([s("-Xbeam"), d(rng.f(0.2, 0.8) * n as f64 * px, 2), s("-Ybeam"), d(rng.f(0.2, 0.8) * n as f64 * px, 2)]);
    }
    if rng.chance(0.3) {
        a.extend([s("-oversample"), rng.i(1, 3).to_string()]);
    }
    if rng.chance(0.25) {
        a.extend([s("-fluence"), format!("{:.1e}", rng.f(1e19, 1e22))]);
    } else {
        a.extend([s("-flux"), format!("{:.1e}", rng.f(1e10, 1e13)), s("-exposure"), d(rng.f(0.1, 2.0), 2)]);
        a.extend([s("-beamsize"), d(rng.f(0.01, 0.2), 3)]);
    }
    if rng.chance(0.15) {
        a.push(s("-nopolar"));
    }
    if rng.chance(0.15) {
        a.push(s("-point_pixel"));
    }
    a.extend([s("-seed"), rng.i(1, 999999).to_string(), s("-noprogress")]);
    a.extend([s("-floatfile"), s("float.bin"), s("-intfile"), s("int.img"), s("-noisefile"), s("noise.img"), s("-pgmfile"), s("image.pgm")]);
    let bytes = std::fs::read(stol.join(table)).unwrap_or_else(|e| panic!("{}: {e}", stol.join(table).display()));
    Case { args: a, inputs: vec![(table.into(), bytes)], outputs: vec!["float.bin", "int.img", "noise.img", "image.pgm"] }
}

fn log(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.trim().parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")))
}

fn c_binary(name: &str, var: &str) -> Option<PathBuf> {
    let p = match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/cref").join(name),
    };
    if p.is_file() {
        return Some(std::fs::canonicalize(&p).unwrap_or(p));
    }
    log(&format!("SKIPPED: randomized {name} parity with the C, because there is no C binary at {} (set {var})", p.display()));
    None
}

fn suite_inputs() -> Option<PathBuf> {
    let g = match std::env::var_os("NANOBRAGG_GOLDEN_SUITE") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/golden-suite"),
    };
    let i = g.join("inputs");
    if i.join("water.stol").is_file() {
        Some(i)
    } else {
        log(&format!("SKIPPED: randomized nonBragg parity with the C, because the golden-suite inputs are not at {}", i.display()));
        None
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run_in(dir: &Path, case: &Case, program: &Path, pre: &[&str]) -> Run {
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in &case.inputs {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let out = Command::new(program)
        .args(pre)
        .args(&case.args)
        .current_dir(dir)
        .env("LC_ALL", "C")
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn read_f32(p: &Path) -> Vec<f32> {
    std::fs::read(p).unwrap().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn compare(c_dir: &Path, rs_dir: &Path, outputs: &[&str], nonbragg: bool) -> Vec<String> {
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
        if name.ends_with(".bin") {
            let (want, got) = (read_f32(&cp), read_f32(&rp));
            if want.len() != got.len() {
                problems.push(format!("{name}: {} floats, the C's {}", got.len(), want.len()));
                continue;
            }
            let all_same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
            if all_same {
                continue;
            }
            let r = nanobragg::stats::pearson(&got, &want);
            let (sg, sw): (f64, f64) = (got.iter().map(|&v| v as f64).sum(), want.iter().map(|&v| v as f64).sum());
            let ratio = if sw != 0.0 { sg / sw } else if sg == 0.0 { 1.0 } else { f64::INFINITY };
            if !(r >= MIN_CORRELATION) {
                problems.push(format!("{name}: correlation {r:.9} < {MIN_CORRELATION}"));
            }
            if !((ratio - 1.0).abs() <= MAX_SUM_REL) {
                problems.push(format!("{name}: sum ratio {ratio:.9} (|r-1| > {MAX_SUM_REL})"));
            }
        } else {
            let (mut w, g) = (std::fs::read(&cp).unwrap(), std::fs::read(&rp).unwrap());
            if nonbragg && *name == "image.pgm" && w.len() > g.len() {
                // nonBragg.c writes 2 bytes per pixel, the second half from past its buffer
                w.truncate(g.len());
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

/// Run `n` random cases of one program; returns the failure messages.
fn run_cases(program: &str, sub: &str, c_bin: &Path, seed: u64, gen: &dyn Fn(&mut Rng) -> Case) -> (u64, Vec<String>) {
    let rs_bin = PathBuf::from(env!("CARGO_BIN_EXE_nanobragg-rs"));
    let n = env_u64("NB_SUITE_PARITY_CASES").unwrap_or(DEFAULT_CASES);
    let only = env_u64("NB_SUITE_PARITY_CASE");
    let tmp = tempfile::tempdir().unwrap();
    let tag = if sub == "noisify" { 1 } else { 2 };
    let mut failures = Vec::new();
    let mut ran = 0;
    for k in 0..n {
        if only.is_some_and(|o| o != k) {
            continue;
        }
        let case = gen(&mut Rng::for_program(seed, k, tag));
        let (c_dir, rs_dir) = (tmp.path().join(format!("{k}-c")), tmp.path().join(format!("{k}-rs")));
        let t0 = Instant::now();
        let c = run_in(&c_dir, &case, c_bin, &[]);
        let t_c = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let r = run_in(&rs_dir, &case, &rs_bin, &[sub]);
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
            problems = compare(&c_dir, &rs_dir, &case.outputs, sub == "nonbragg");
            if sub == "noisify" && c.stdout != r.stdout {
                let line = c.stdout.lines().zip(r.stdout.lines()).position(|(a, b)| a != b).unwrap_or(0);
                problems.push(format!(
                    "stdout differs from line {}: C {:?}, ours {:?}",
                    line + 1,
                    c.stdout.lines().nth(line).unwrap_or(""),
                    r.stdout.lines().nth(line).unwrap_or("")
                ));
            }
        }
        let args = case.args.join(" ");
        if problems.is_empty() {
            eprintln!("ok   {program} case {k:2} (C {t_c:.2} s, ours {t_rs:.2} s): {args}");
            let _ = std::fs::remove_dir_all(&c_dir);
            let _ = std::fs::remove_dir_all(&rs_dir);
        } else {
            let inputs: Vec<&str> = case.inputs.iter().map(|(n, _)| n.as_str()).collect();
            let msg = format!(
                "{program} case {k} (seed {seed}): {}\n  replay: NB_SUITE_PARITY_SEED={seed} NB_SUITE_PARITY_CASE={k} cargo test --release --test suite_random_parity\n  \
                 (inputs {} are kept in {})\n  C:    cd {} && {} {args}\n  ours: cd {} && {} {sub} {args}",
                problems.join("; "),
                inputs.join(", "),
                c_dir.display(),
                c_dir.display(),
                c_bin.display(),
                rs_dir.display(),
                rs_bin.display()
            );
            log(&format!("FAIL {msg}"));
            failures.push(msg);
        }
    }
    if !failures.is_empty() {
        // keep the folders of the failing cases for a look
        let _ = tmp.keep();
    }
    (ran, failures)
}

fn seed() -> u64 {
    env_u64("NB_SUITE_PARITY_SEED").unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        (t.as_nanos() as u64) % 1_000_000_000
    })
}

#[test]
fn random_noisify_command_lines_match_the_c() {
    let Some(c_bin) = c_binary("noisify", "NB_C_NOISIFY") else { return };
    let seed = seed();
    log(&format!("randomized noisify parity: seed {seed} (replay: NB_SUITE_PARITY_SEED={seed} cargo test --release --test suite_random_parity)"));
    let started = Instant::now();
    let (ran, failures) = run_cases("noisify", "noisify", &c_bin, seed, &generate_noisify);
    log(&format!(
        "randomized noisify parity: seed {seed}: {} of {ran} random cases match the C ({:.1} s)",
        ran - failures.len() as u64,
        started.elapsed().as_secs_f64()
    ));
    assert!(failures.is_empty(), "{} of {ran} random noisify cases differ from the C:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn random_nonbragg_command_lines_match_the_c() {
    let Some(c_bin) = c_binary("nonBragg", "NB_C_NONBRAGG") else { return };
    let Some(inputs) = suite_inputs() else { return };
    let seed = seed();
    log(&format!("randomized nonBragg parity: seed {seed} (replay: NB_SUITE_PARITY_SEED={seed} cargo test --release --test suite_random_parity)"));
    let started = Instant::now();
    let (ran, failures) = run_cases("nonBragg", "nonbragg", &c_bin, seed, &|r: &mut Rng| generate_nonbragg(r, &inputs));
    log(&format!(
        "randomized nonBragg parity: seed {seed}: {} of {ran} random cases match the C ({:.1} s)",
        ran - failures.len() as u64,
        started.elapsed().as_secs_f64()
    ));
    assert!(failures.is_empty(), "{} of {ran} random nonBragg cases differ from the C:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_generators_replay_and_vary() {
    let a = generate_noisify(&mut Rng::for_program(7, 3, 1)).args;
    assert_eq!(a, generate_noisify(&mut Rng::for_program(7, 3, 1)).args);
    assert_ne!(a, generate_noisify(&mut Rng::for_program(7, 4, 1)).args);
    assert_ne!(a, generate_noisify(&mut Rng::for_program(8, 3, 1)).args);
}

/// nonbragg's stdout where it printed otherwise than nonBragg.c: `-1 divergence steps` with a
/// `-sourcefile` (the C's `divsteps` keeps its initial -1; ours said 0), and `rms= inf` once a pixel's
/// square overflows a float (the C squares the float pixel in float arithmetic; ours said 7.3e+19).
/// Checked against the C where its binary is at hand, and by the lines themselves everywhere.
#[test]
fn nonbragg_stdout_is_the_cs_with_a_source_file_and_an_overflowing_rms() {
    let Some(inputs) = suite_inputs() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let stol = std::fs::read(inputs.join("water.stol")).unwrap();
    let sources = b"-10 0 0 1 1e-10\n-10 0.01 0 1 1e-10\n".to_vec();
    let base = "-stol water.stol -thick 0.1 -detpixels 32 -seed 1 -noprogress";
    for (k, (extra, want)) in [("-sourcefile sources.txt", "\n  -1 divergence steps\n"), ("-curved_det -point_pixel", " rms= inf ")].into_iter().enumerate() {
        let case = Case {
            args: format!("{base} {extra}").split(' ').map(String::from).collect(),
            inputs: vec![("water.stol".into(), stol.clone()), ("sources.txt".into(), sources.clone())],
            outputs: vec![],
        };
        let ours = run_in(&tmp.path().join(format!("{k}-rs")), &case, Path::new(env!("CARGO_BIN_EXE_nanobragg-rs")), &["nonbragg"]);
        assert_eq!(ours.code, Some(0), "{extra}: {}", ours.stderr);
        assert!(ours.stdout.contains(want), "{extra}: no {want:?} in\n{}", ours.stdout);
        if let Some(c_bin) = c_binary("nonBragg", "NB_C_NONBRAGG") {
            let c = run_in(&tmp.path().join(format!("{k}-c")), &case, &c_bin, &[]);
            assert_eq!(c.stdout, ours.stdout, "{extra}: stdout differs from the C's");
        }
    }
}

/// nonbragg's `-curved_det` as nonBragg.c tests it: only with an argument after it. Given last it is
/// ignored (the port applied it: every image differed from the C's); `-curved_det 1` curves the
/// detector (the port refused the `1`). Both forms byte-identical to the C's where its binary is at
/// hand, and the curve said (or not) on stdout everywhere.
#[test]
fn nonbragg_curved_det_is_the_cs_last_and_with_a_value() {
    let tmp = tempfile::tempdir().unwrap();
    let base = "-stol two.stol -distance 100 -detpixels 32 -pixel 0.8 -floatfile float.bin -intfile int.img -noisefile noise.img -seed 1 -noprogress";
    for (k, (extra, curved)) in [("-curved_det", false), ("-curved_det 1", true), ("-curved_det -point_pixel", true)].into_iter().enumerate() {
        let case = Case {
            args: format!("{base} {extra}").split(' ').map(String::from).collect(),
            inputs: vec![("two.stol".into(), b"0 1\n0.001 2\n".to_vec())],
            outputs: vec!["float.bin", "int.img", "noise.img"],
        };
        let rs_dir = tmp.path().join(format!("{k}-rs"));
        let ours = run_in(&rs_dir, &case, Path::new(env!("CARGO_BIN_EXE_nanobragg-rs")), &["nonbragg"]);
        assert_eq!(ours.code, Some(0), "{extra}: {}", ours.stderr);
        assert_eq!(ours.stdout.contains("curved detector"), curved, "{extra}:\n{}", ours.stdout);
        if let Some(c_bin) = c_binary("nonBragg", "NB_C_NONBRAGG") {
            let c_dir = tmp.path().join(format!("{k}-c"));
            let c = run_in(&c_dir, &case, &c_bin, &[]);
            assert_eq!(c.stdout, ours.stdout, "{extra}: stdout differs from the C's");
            for name in &case.outputs {
                assert_eq!(std::fs::read(c_dir.join(name)).unwrap(), std::fs::read(rs_dir.join(name)).unwrap(), "{extra}: {name} differs from the C's");
            }
        }
    }
}

/// `-seed -2147483648` (and `-calib_seed`, `-mosaic_seed`, `-misset_seed`) as the C stores it: its
/// `-atoi(...)` negates in int, so the seed stays −2147483648. The port negated in 64 bits: a positive
/// seed, another noise stream (noisify's noise image differed), and `seed: 2147483648` on stdout.
/// Checked against each C binary at hand (noisify, nonBragg, nanoBragg), and by the seed line everywhere.
#[test]
fn the_most_negative_seed_is_the_cs() {
    let tmp = tempfile::tempdir().unwrap();
    let floats: Vec<u8> = (0..100 * 37).flat_map(|i| ((i % 53) as f32 * 3.5 + 1.0).to_le_bytes()).collect();
    let s = "-2147483648";
    let runs = [
        ("noisify", "noisify", "NB_C_NOISIFY", format!("-floatfile f.bin -detpixels_x 100 -detpixels_y 37 -scale 10 -seed {s} -calib_seed {s} -calibration 0.1 -noisefile noise.img -intfile int.img -nopgm"), vec!["noise.img", "int.img"]),
        ("nonbragg", "nonBragg", "NB_C_NONBRAGG", format!("-stol two.stol -detpixels 16 -seed {s} -noprogress -floatfile float.bin -intfile int.img -noisefile noise.img"), vec!["float.bin", "int.img", "noise.img"]),
        ("simulate", "nanoBragg", "NB_C_BIN", format!("-default_F 100 -cell 100 100 100 90 90 90 -N 3 -detpixels 16 -seed {s} -mosaic_seed {s} -misset_seed {s} -misset random -mosaic 1 -mosaic_dom 3 -floatfile float.bin -noisefile noise.img -intfile int.img -nopgm -noprogress"), vec!["float.bin", "int.img", "noise.img"]),
    ];
    for (k, (sub, c_name, var, args, outputs)) in runs.into_iter().enumerate() {
        let case = Case {
            args: args.split(' ').map(String::from).collect(),
            inputs: vec![("f.bin".into(), floats.clone()), ("two.stol".into(), b"0 1\n0.001 2\n".to_vec())],
            outputs,
        };
        let rs_dir = tmp.path().join(format!("{k}-rs"));
        let ours = run_in(&rs_dir, &case, Path::new(env!("CARGO_BIN_EXE_nanobragg-rs")), &[sub]);
        assert_eq!(ours.code, Some(0), "{sub}: {}", ours.stderr);
        assert!(ours.stdout.contains(&format!("seed: {s}\n")), "{sub}: no 'seed: {s}' in\n{}", ours.stdout);
        let Some(c_bin) = c_binary(c_name, var) else { continue };
        let c_dir = tmp.path().join(format!("{k}-c"));
        let c = run_in(&c_dir, &case, &c_bin, &[]);
        for name in &case.outputs {
            assert_eq!(std::fs::read(c_dir.join(name)).unwrap(), std::fs::read(rs_dir.join(name)).unwrap(), "{sub}: {name} differs from the C's");
        }
        let seed_lines = |out: &str| out.lines().filter(|l| l.contains("seed")).map(String::from).collect::<Vec<_>>();
        assert_eq!(seed_lines(&c.stdout), seed_lines(&ours.stdout), "{sub}: seed lines differ from the C's");
    }
}
