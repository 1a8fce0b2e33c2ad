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
