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

/// The header text of an SMV file (up to its HEADER_BYTES).
fn header_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).into_owned()
}

/// The keys of an SMV header, in order.
fn smv_keys(bytes: &[u8]) -> Vec<String> {
    header_text(bytes)
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().to_string()))
        .filter(|k| !k.is_empty() && !k.starts_with('{'))
        .collect()
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
    // stdout: the C's lines, numbers formatted as the C formats them (geometry, cell, sources, steps,
    // statistics). Lines that differ by nature are left out: heap pointers, progress percentages.
    let keep = |t: &str| t.lines().filter(|l| !l.starts_with("mmap(") && !l.ends_with("% done")).map(String::from).collect::<Vec<_>>();
    let c_stdout = std::fs::read_to_string(output_path(golden, case, "stdout")).unwrap_or_default();
    let (want_lines, got_lines) = (keep(&c_stdout), keep(&String::from_utf8_lossy(&out.stdout)));
    if want_lines != got_lines {
        let first = want_lines.iter().zip(&got_lines).position(|(a, b)| a != b).unwrap_or(want_lines.len().min(got_lines.len()));
        problems.push(format!(
            "stdout differs from the C's at line {}: C {:?}, port {:?}",
            first + 1,
            want_lines.get(first),
            got_lines.get(first)
        ));
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
    // Every other file the golden case keeps (SMV int and noise images, PGM, Fdump) must be
    // byte-identical to the C's, header included: the kernels keep the C's arithmetic where a float
    // pixel's last bit would otherwise move a noise draw.
    let float_identical = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
    if !float_identical {
        let n = got.iter().zip(&want).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        eprintln!("note {id}: {n} float pixels differ from the C's in their last bits");
    }
    for role in ["int", "noise", "pgm", "dump"] {
        let Some(name) = case["outputs"][role].as_str() else { continue };
        let got_file = dir.join(name);
        if !got_file.exists() {
            problems.push(format!("{role} file {name} not written"));
            continue;
        }
        let want_bytes = std::fs::read(output_path(golden, case, role)).unwrap();
        let got_bytes = std::fs::read(&got_file).unwrap();
        if role == "int" || role == "noise" {
            let (want_h, want_px) = read_smv(&output_path(golden, case, role));
            let (got_h, got_px) = read_smv(&got_file);
            let _ = (want_h, got_h);
            for key in smv_keys(&want_bytes) {
                let w = nanobragg::io::smv::header_value(&header_text(&want_bytes), &key);
                let g = nanobragg::io::smv::header_value(&header_text(&got_bytes), &key);
                let same = match (w, g) {
                    (Some(w), Some(g)) => w == g || (w - g).abs() <= 1e-9 * w.abs().max(1.0),
                    _ => false,
                };
                if !same {
                    problems.push(format!("{role} header {key}: C {w:?}, port {g:?}"));
                }
            }
            if got_px.len() != want_px.len() {
                problems.push(format!("{role} image size differs"));
                continue;
            }
            let diff = got_px.iter().zip(&want_px).filter(|(a, b)| a != b).count();
            let bad = got_px.iter().zip(&want_px).filter(|(a, b)| (**a as i64 - **b as i64).abs() > 1).count();
            if diff > 0 {
                problems.push(format!("{role} image: {diff} pixels differ from the C's ({bad} by more than 1 count)"));
            }
        }
        if got_bytes != want_bytes {
            problems.push(format!("{role} file {name} is not byte-identical to the C's"));
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
