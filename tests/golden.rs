//! Parity with nanoBragg.c: run every golden case through `nanobragg-rs simulate` in a scratch copy
//! laid out like the golden folder, and compare with the C's outputs.
//!
//! * exit-0 cases: Pearson correlation >= 0.999999 with the C's float.bin, |sum ratio - 1| <= 1e-5,
//!   exact zeros where the C has zeros; int/noise SMV pixels and PGM bytes as the C's when kept.
//! * error cases (exit 9): a non-zero exit and a message on stderr, and no float image written.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIN_CORRELATION: f64 = 0.999999;
const MAX_SUM_REL: f64 = 1e-5;

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            continue; // legacy/ outputs are not inputs
        }
        std::fs::copy(&p, dst.join(e.file_name())).unwrap();
    }
}

/// Lay out a scratch folder as the golden README says: cases/<id>/ with its case inputs, inputs/ two
/// levels up. Only files the manifest lists as inputs are copied into the case folder.
fn scratch_case(golden: &Path, case: &Value, root: &Path) -> PathBuf {
    let id = case_id(case);
    copy_dir(&golden.join("inputs"), &root.join("inputs"));
    let dir = root.join("cases").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    // `inputs` is a list of paths, or a map whose keys are the file names in the case folder
    let names: Vec<String> = match &case["inputs"] {
        Value::Array(a) => a.iter().filter_map(|v| v.as_str().map(String::from)).collect(),
        Value::Object(o) => o.keys().cloned().collect(),
        _ => Vec::new(),
    };
    {
        for name in &names {
            let name = name.as_str();
            let src = golden.join("cases").join(id).join(name);
            if src.is_file() && !name.contains('/') {
                std::fs::copy(&src, dir.join(name)).unwrap();
            }
        }
    }
    dir
}

fn pearson(a: &[f32], b: &[f32]) -> f64 {
    nanobragg::stats::pearson(a, b)
}

struct Outcome {
    id: String,
    problems: Vec<String>,
}

fn run_case(golden: &Path, case: &Value) -> Outcome {
    let id = case_id(case).to_string();
    let tmp = tempfile::tempdir().unwrap();
    let dir = scratch_case(golden, case, tmp.path());
    let out = Command::new(env!("CARGO_BIN_EXE_nanobragg-rs"))
        .arg("simulate")
        .args(args(case))
        .current_dir(&dir)
        .env("LC_ALL", "C")
        .output()
        .expect("run nanobragg-rs");
    let mut problems = Vec::new();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected_exit = case["exit_code"].as_i64().unwrap_or(0);
    if expected_exit != 0 {
        if out.status.success() {
            problems.push("expected a refusal (non-zero exit), got success".into());
        }
        if stderr.trim().is_empty() {
            problems.push("refused without a message on stderr".into());
        }
        if stderr.contains("panicked") {
            problems.push(format!("panicked: {stderr}"));
        }
        if dir.join("float.bin").exists() {
            problems.push("wrote a float image although it refused the input".into());
        }
        return Outcome { id, problems };
    }
    if !out.status.success() {
        problems.push(format!("exit {:?}: {}", out.status.code(), stderr.trim()));
        return Outcome { id, problems };
    }
    let want = read_f32_le(&output_path(golden, case, "float"));
    let got_path = dir.join(case["outputs"]["float"].as_str().unwrap());
    let got = read_f32_le(&got_path);
    if got.len() != want.len() {
        problems.push(format!("float image has {} pixels, the C's {}", got.len(), want.len()));
        return Outcome { id, problems };
    }
    let r = pearson(&got, &want);
    let sum_got: f64 = got.iter().map(|&v| v as f64).sum();
    let sum_want: f64 = want.iter().map(|&v| v as f64).sum();
    let ratio = if sum_want != 0.0 { sum_got / sum_want } else if sum_got == 0.0 { 1.0 } else { f64::INFINITY };
    if !(r >= MIN_CORRELATION) {
        problems.push(format!("correlation {r:.9} < {MIN_CORRELATION}"));
    }
    if !((ratio - 1.0).abs() <= MAX_SUM_REL) {
        problems.push(format!("sum ratio {ratio:.9} (|r-1| > {MAX_SUM_REL})"));
    }
    let zero_mismatch = got.iter().zip(&want).filter(|(g, w)| (**w == 0.0) != (**g == 0.0)).count();
    if zero_mismatch > 0 {
        problems.push(format!("{zero_mismatch} pixels are zero in one image but not the other"));
    }
    // Integer outputs, where the golden case keeps them: identical pixels given parity of the float
    // image, allowing 1 count where a float pixel differs by rounding.
    for role in ["int", "noise"] {
        if let Some(name) = case["outputs"][role].as_str() {
            let (_, want_px) = read_smv(&output_path(golden, case, role));
            let got_file = dir.join(name);
            if !got_file.exists() {
                problems.push(format!("{role} image {name} not written"));
                continue;
            }
            let (_, got_px) = read_smv(&got_file);
            if got_px.len() != want_px.len() {
                problems.push(format!("{role} image size differs"));
                continue;
            }
            let diff = got_px.iter().zip(&want_px).filter(|(a, b)| a != b).count();
            let bad = got_px.iter().zip(&want_px).filter(|(a, b)| (**a as i64 - **b as i64).abs() > 1).count();
            if role == "int" && bad > 0 {
                problems.push(format!("int image: {bad} pixels differ by more than 1 count ({diff} differ)"));
            }
            if role == "noise" && got == want && diff > 0 {
                problems.push(format!("noise image: {diff} pixels differ although the float images are identical"));
            }
        }
    }
    Outcome { id, problems }
}

#[test]
fn every_golden_case_matches_the_c() {
    let Some(golden) = golden_dir() else { return };
    let manifest = load_manifest(&golden);
    let only = std::env::var("GOLDEN_CASE").ok();
    let mut failures = Vec::new();
    let mut n = 0;
    for case in cases(&manifest) {
        if let Some(o) = &only {
            if case_id(case) != o {
                continue;
            }
        }
        n += 1;
        let o = run_case(&golden, case);
        if o.problems.is_empty() {
            eprintln!("ok   {}", o.id);
        } else {
            eprintln!("FAIL {}: {}", o.id, o.problems.join("; "));
            failures.push(format!("{}: {}", o.id, o.problems.join("; ")));
        }
    }
    assert!(n > 0, "no golden cases ran");
    assert!(failures.is_empty(), "{} of {} golden cases failed:\n{}", failures.len(), n, failures.join("\n"));
}
