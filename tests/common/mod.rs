//! Shared helpers for the integration tests that compare against the C program's golden outputs.
//!
//! The golden folder lives outside the crate (it is data produced by the C program), so its location
//! comes from `NANOBRAGG_GOLDEN` or defaults to `../shared/golden` next to the crate. Without it the
//! golden tests skip locally but fail under CI, where a silent skip would hide a regression.
#![allow(dead_code)]

pub mod child;
pub mod random;

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The golden folder (the one holding `manifest.json`), or `None` (after printing why) when it is
/// absent outside CI. Panics when it is absent and the `CI` environment variable is set.
pub fn golden_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("NANOBRAGG_GOLDEN") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/golden"),
    };
    if dir.join("manifest.json").is_file() {
        return Some(dir);
    }
    let msg = format!(
        "golden data not found at {} (set NANOBRAGG_GOLDEN to the folder holding manifest.json)",
        dir.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("skipping: {msg}");
    None
}

/// The parsed `manifest.json`.
pub fn load_manifest(golden: &Path) -> Value {
    let path = golden.join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every case entry of the manifest.
pub fn cases(manifest: &Value) -> &[Value] {
    manifest["cases"]
        .as_array()
        .map(Vec::as_slice)
        .expect("manifest has no cases array")
}

/// The cases whose `outputs` include `role` (`float`, `int`, `noise`, `pgm`, ...).
pub fn cases_with_output<'a>(manifest: &'a Value, role: &str) -> Vec<&'a Value> {
    cases(manifest)
        .iter()
        .filter(|c| c["outputs"].get(role).is_some())
        .collect()
}

/// A case's id.
pub fn case_id(case: &Value) -> &str {
    case["id"].as_str().expect("case without id")
}

/// The folder of a case: `<golden>/cases/<id>`.
pub fn case_dir(golden: &Path, case: &Value) -> PathBuf {
    golden.join("cases").join(case_id(case))
}

/// The path of one of a case's outputs, by role.
pub fn output_path(golden: &Path, case: &Value, role: &str) -> PathBuf {
    let name = case["outputs"][role]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no {role} output", case_id(case)));
    case_dir(golden, case).join(name)
}

/// The case's argument words (split on whitespace, as the golden arguments never quote).
pub fn args(case: &Value) -> Vec<String> {
    case["args"]
        .as_str()
        .expect("case without args")
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// A golden case's `Config` as the C ran it: input paths made absolute, outputs sent to `out`, and
/// the case's Fdump.bin copied there when the case reads the cache instead of an `-hkl` file.
pub fn case_config(golden: &Path, case: &Value, out: &Path) -> nanobragg::run::config::Config {
    let inputs = golden.join("inputs");
    let args: Vec<String> = args(case).into_iter().map(|a| a.replace("../../inputs", inputs.to_str().unwrap())).collect();
    let mut cfg = nanobragg::cli::parse::parse_simulate_args(&args).unwrap();
    cfg.output.out_dir = Some(out.to_path_buf());
    let dump = golden.join("cases").join(case_id(case)).join("Fdump.bin");
    if cfg.params.hkl_file.is_none() && dump.is_file() {
        std::fs::copy(&dump, out.join(&cfg.params.dump_file)).unwrap();
    }
    cfg
}

/// `[fpixels, spixels]` from the manifest's `detector`.
pub fn detector(case: &Value) -> (usize, usize) {
    let d = case["detector"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no detector", case_id(case)));
    (
        d[0].as_u64().unwrap() as usize,
        d[1].as_u64().unwrap() as usize,
    )
}

/// A number from the case's `stats`, if present.
pub fn stat(case: &Value, key: &str) -> Option<f64> {
    case["stats"].get(key).and_then(Value::as_f64)
}

/// A little-endian f32 file (`float.bin`).
pub fn read_f32_le(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        bytes.len() % 4,
        0,
        "{}: size not a multiple of 4",
        path.display()
    );
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// An SMV file split into its declared `HEADER_BYTES` and the little-endian u16 pixels that follow.
pub fn read_smv(path: &Path) -> (usize, Vec<u16>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]);
    let header_bytes: usize = head
        .split_once("HEADER_BYTES=")
        .and_then(|(_, rest)| rest.split(';').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}: no HEADER_BYTES", path.display()));
    let data = &bytes[header_bytes.min(bytes.len())..];
    (
        header_bytes,
        data.chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect(),
    )
}
