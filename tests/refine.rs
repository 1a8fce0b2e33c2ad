//! `refine`: a 256² still with Poisson noise (fixed seed), started with the crystal rotated by 0.05° about
//! each axis, a and c off by ±0.5 %, Na off by 20 % and the distance by 0.5 mm, recovers the truth to
//! rotations ≤ 0.005°, cell ≤ 0.02 %, Na ≤ 0.5 %, distance ≤ 0.01 mm; the fit loads with
//! `simulate --params`; a fit cut short exits 1 with a message.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_nanobragg-rs");

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

const COMMON: &str = "-misset 10 20 30 -default_F 100 -lambda 1.0 -pixel 0.2 -detpixels 256 -oversample 2 -fluence 1e28 -mosaic 0.2 -mosaic_dom 5 -mosaic_seed 3 -noprogress";

fn observe(d: &Path) {
    let out = Command::new(BIN)
        .current_dir(d)
        .arg("simulate")
        .args(words(&format!("-cell 40 50 60 85 95 100 -N 10 -distance 60 {COMMON} -cbffile obs.cbf -seed 3 -nopgm -quiet")))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn refine(d: &Path, extra: &str) -> std::process::Output {
    Command::new(BIN)
        .current_dir(d)
        .arg("refine")
        .args(words(&format!(
            "-cell 40.2 50 59.7 85 95 100 -N 10 -Na 8 -distance 60.5 --crystal-rot 0.05 -0.05 0.05 {COMMON} --observed obs.cbf \
             --refine rot_x,rot_y,rot_z,a,c,Na,distance --params-out fit.json --refined-out v.json {extra}"
        )))
        .output()
        .unwrap()
}

#[test]
fn refine_recovers_a_noisy_still() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    observe(d);
    let out = refine(d, "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("refine: iteration 1: L = "), "{text}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("v.json")).unwrap()).unwrap();
    let get = |k: &str| v[k].as_f64().unwrap();
    for (k, want) in [("rot_x", -0.05), ("rot_y", 0.05), ("rot_z", -0.05)] {
        assert!((get(k) - want).abs() <= 0.005, "{k} = {} (relative to the start; truth {want})", get(k));
    }
    assert!((get("a") / 40.0 - 1.0).abs() <= 2e-4, "a = {}", get("a"));
    assert!((get("c") / 60.0 - 1.0).abs() <= 2e-4, "c = {}", get("c"));
    assert!((get("Na") / 10.0 - 1.0).abs() <= 5e-3, "Na = {}", get("Na"));
    assert!((get("distance") - 60.0).abs() <= 0.01, "distance = {}", get("distance"));
    // the fit renders with simulate --params
    let out = Command::new(BIN).current_dir(d).args(words("simulate --params fit.json -floatfile fit.bin -nonoise -nopgm -quiet")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::metadata(d.join("fit.bin")).unwrap().len(), 256 * 256 * 4);
}

#[test]
fn refine_that_does_not_converge_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    observe(d);
    let out = refine(d, "--max-iterations 1");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("did not converge in 1 iterations"), "{err}");
    assert!(d.join("fit.json").is_file());
    // bad input: exit 9
    let out = refine(d, "--refine rot_q");
    assert_eq!(out.status.code(), Some(9));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown parameter 'rot_q'"));
}

/// The fit's outputs never replace what it reads or each other (by any spelling), and a missing
/// folder is refused: exit 9 with one line before any fitting, the observed image untouched.
#[test]
fn refine_refuses_outputs_over_inputs_before_fitting() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let obs = vec![7u8; 64 * 64 * 4];
    std::fs::write(d.join("obs.bin"), &obs).unwrap();
    let base = "-cell 70 80 90 85 95 105 -N 5 -detpixels 64 -default_F 100 -noprogress --observed obs.bin --refine distance";
    for (outs, want) in [
        ("--params-out obs.bin", "--observed"),
        ("--params-out ./obs.bin", "--observed"),
        ("--params-out a.json --refined-out ./a.json", "name the same file"),
        ("--params-out missing/fit.json", "does not exist"),
    ] {
        let out = Command::new(BIN).current_dir(d).arg("refine").args(words(&format!("{base} {outs}"))).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(9), "{outs}: {err}");
        assert!(err.contains(want) && err.trim_end().lines().count() == 1, "{outs}: {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("refine: start"), "{outs}: fitted before refusing");
        assert_eq!(std::fs::read(d.join("obs.bin")).unwrap(), obs, "{outs}");
        assert!(!d.join("a.json").exists(), "{outs}");
    }
}

/// What an audit of the release binary found `refine` accepting and then reporting as "converged":
/// a CBF/NeXus observation written with -adc read without its offset, a start where the image does
/// not move (N = 1), values past the flags' ranges (one huge pixel), negative Poisson counts, fewer
/// pixels than parameters, a name twice, and image outputs it never wrote.
#[test]
fn refine_refuses_what_it_cannot_fit_honestly() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let truth = "-cell 50 50 50 90 90 90 -default_F 100 -lambda 1 -distance 100 -detpixels 64 -pixel 0.4 -seed 1 -noprogress";
    let run = |args: String| Command::new(BIN).current_dir(d).args(words(&args)).output().unwrap();
    let o = run(format!("simulate {truth} -N 5 -floatfile obs.bin -adc 10 -noisefile adc.img -cbffile adc.cbf -nopgm -quiet"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let start = format!("{truth} -Na 4 -Nb 5 -Nc 5");
    let fit = |obs: &str, extra: &str| {
        let names = if extra.contains("--refine") { "" } else { "--refine Na" };
        run(format!("refine {start} --observed {obs} {names} --params-out p.json --refined-out v.json {extra}"))
    };
    let na = || -> f64 {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("v.json")).unwrap()).unwrap();
        v["Na"].as_f64().unwrap()
    };
    // the SMV and the CBF of one noise image give one fit: the CBF's counts less the -adc it holds
    let o = fit("adc.img", "-adc 10");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let from_smv = na();
    let o = fit("adc.cbf", "-adc 10");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!((na() - from_smv).abs() < 1e-9 && (from_smv - 5.0).abs() < 0.1, "CBF {} vs SMV {from_smv}", na());

    let refused = |o: std::process::Output, want: &str| {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(9), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err:?} should say {want:?}");
    };
    std::fs::remove_file(d.join("p.json")).unwrap();
    refused(run(format!("refine {truth} -N 1 --observed obs.bin --refine Na --params-out p.json")), "the image does not change with 'Na' at its start value 1");
    // flat for a reason N's hint did not name: -flux sets the fluence; a -mat file carries lambda
    refused(fit("obs.bin", "-flux 1e12 --refine fluence"), "-flux sets the fluence (with -exposure and -beamsize)");
    let o = run("matrix -cell 50 50 50 90 90 90 -lambda 1 -o A.mat".into());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mat = "-mat A.mat -default_F 100 -lambda 1 -distance 100 -detpixels 64 -pixel 0.4 -N 5 -noprogress";
    refused(run(format!("refine {mat} --observed obs.bin --refine lambda,Na --params-out p.json")), "with a -mat file the matrix carries the wavelength");
    refused(fit("obs.bin", "-roi 10 10 10 10 --refine Na,Nb"), "2 parameters cannot be fitted to 1 observed pixels");
    refused(fit("obs.bin", "--refine Na,Nb,Na"), "--refine: 'Na' is named twice");
    // a second list replaced the first without a word
    refused(run(format!("refine {start} --observed obs.bin --refine Na --refine Nb --params-out p.json")), "--refine: given twice");
    refused(fit("obs.bin", "-floatfile f.bin"), "-floatfile: refine writes only --params-out and --refined-out");
    refused(fit("obs.bin", "--gradients Na"), "--gradients: refine writes only");
    // a negative count (a detector's gap flag) under the Poisson loss
    let mut px: Vec<f32> = std::fs::read(d.join("obs.bin")).unwrap().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    px[70] = -1.0;
    std::fs::write(d.join("neg.bin"), px.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    refused(fit("neg.bin", ""), "pixel (6, 1) is observed as -1, below 0 counts");
    assert!(!d.join("p.json").exists());
    // one huge pixel pulls N up, but never past what -Na accepts: the fit loads with simulate --params
    px[70] = 3e38;
    std::fs::write(d.join("huge.bin"), px.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let _ = fit("huge.bin", "--loss lsq --max-iterations 30");
    assert!(na() <= 1e7, "Na = {}", na());
    let o = run("simulate --params p.json -floatfile again.bin -nonoise -nopgm -quiet".into());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// With no crystal, refine takes the built-in one as simulate does (it stopped at "no structure
/// factors", so the demo a new user renders could not be fitted).
#[test]
fn refine_takes_the_built_in_crystal_as_simulate_does() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let run = |args: &str| Command::new(BIN).current_dir(d).args(words(args)).output().unwrap();
    let o = run("simulate --detector 48 -distance 100.5 -floatfile obs.bin -nonoise -nopgm -quiet");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run("refine --detector 48 --observed obs.bin --refine distance --loss lsq --params-out fit.json");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("no crystal given: using the built-in benchmark crystal"), "{text}");
    let v: f64 = text.lines().find_map(|l| l.strip_prefix("refine: distance = ")).and_then(|l| l.split_whitespace().next()?.parse().ok()).expect(&text);
    assert!((v - 100.5).abs() < 0.01, "{text}");
}

/// The progress lines gave `rot_*` as the whole `--crystal-rot` while the final lines and `v.json` gave
/// it relative to the start (with nothing saying which): every line now gives the relative rotation.
#[test]
fn refine_prints_rotations_relative_to_the_start_on_every_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let truth = "-cell 60 70 80 90 100 90 -misset 5 10 15 -default_F 30 -lambda 1 -distance 100 -pixel 0.1 -N 8 -detpixels 32 -oversample 2 -fluence 1e28 -noprogress";
    let run = |args: String| Command::new(BIN).current_dir(d).args(words(&args)).output().unwrap();
    let o = run(format!("simulate {truth} -floatfile obs.bin -nonoise -nopgm -quiet"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(format!("refine {truth} --crystal-rot 0.03 0 0 --observed obs.bin --loss lsq --refine rot_x --params-out fit.json --refined-out v.json"));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}\n{}", String::from_utf8_lossy(&o.stderr));
    let rot_x = |line: &str| -> f64 { line.split("rot_x").nth(1).unwrap().trim_start_matches([' ', '=']).split_whitespace().next().unwrap().parse().unwrap() };
    let start = text.lines().find(|l| l.starts_with("refine: start:")).unwrap();
    assert_eq!(rot_x(start), 0.0, "{start}");
    let last = text.lines().filter(|l| l.starts_with("refine: iteration")).last().unwrap();
    let fin = text.lines().find(|l| l.starts_with("refine: rot_x = ")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("v.json")).unwrap()).unwrap();
    let want = v["rot_x"].as_f64().unwrap();
    assert!((want + 0.03).abs() < 1e-3, "v.json rot_x = {want}");
    assert!((rot_x(last) - want).abs() < 1e-8, "{last} vs v.json {want}");
    assert_eq!(rot_x(fin), want, "{fin}");
}
