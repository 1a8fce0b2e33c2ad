//! The `benchmark_results.json` schema, `"schema": "nanobragg-rs/bench-detailed/1"`.
//!
//! ```text
//! {
//!   "schema": "nanobragg-rs/bench-detailed/1",
//!   "created_utc": "20261122T031500Z",
//!   "machine": { cpu_model, logical_cores, physical_cores, simd_level (the kernel's), cpu_simd, os, rustc,
//!                git_commit, git_dirty, nanobragg_version },
//!   "config": { name: "bench"|"heavy"|"custom", args: [nanoBragg flags without -detpixels],
//!               sizes, warmup, iterations, threads (null = all cores), precision: "double"|"single",
//!               c_binary (null = no C comparison), rust_binary },
//!   "entries": [ one per size {
//!       config, size, pixels, kernel (SIMD level that rendered it: avx512|avx2|portable|scalar),
//!       sources, domains, phisteps, oversample,
//!       samples_per_pixel (= sources × domains × phisteps × oversample²),
//!       c:            null (no C binary) | { wall_s: Stats|null, peak_rss_mb, runs: [ProcessRun], failed_runs },
//!       rust_cold:    { setup_s, render_s, io_s, total_s: Stats, runs: [Phases] }   (fresh processes, own split)
//!       rust_warm:    { setup_s, render_s, io_s, total_s: Stats, peak_rss_mb, runs: [Phases] } (in process)
//!       rust_process: { wall_s: Stats, peak_rss_mb, runs: [ProcessRun] }   (the same fresh processes, whole)
//!       peak_rss_mb:  { c, rust_process, rust_warm }   (max over measured runs, MiB; null = unknown)
//!       correlation, sum_ratio (Σrust/Σc), c_image_pixels, rust_image_pixels   (null without a C image)
//!       rust_cold_vs_warm_correlation, rust_cold_warm_identical
//!       speedup_warm (C wall median / our warm total median), speedup_process (C wall / our process wall)
//!       throughput: { rust_warm_pixels_per_s, rust_warm_samples_per_s (warm render median),
//!                     rust_process_pixels_per_s, rust_process_samples_per_s (process wall median),
//!                     c_pixels_per_s, c_samples_per_s (C wall median), plausible_samples_per_s_bound }
//!       roofline: { threads, ns_per_sample_per_core, flops_per_sample_estimate, achieved_gflops, peak_gflops,
//!                   peak_level, flop_utilization, bytes_written, write_mb_per_s, peak_write_mb_per_s,
//!                   write_utilization }   (warm medians against `limits`; null in older reports)
//!       warnings: [text]
//!   } ],
//!   "limits": { peaks: [{level, f64_gflops_per_core, f32_gflops_per_core}], write_mb_per_s, method },
//!   "gate": { enabled, min_speedup, min_correlation, speed_check: "checked"|"skipped: …",
//!             correlation_check: "checked"|"skipped: …", checks: [{size, check, value, bound, status, detail}],
//!             passed },
//!   "notes": [text], "warnings": [text]
//! }
//! ```
//! `Stats` is {n, min, median, max, mean, stddev, spread, wide_spread, outliers} over the measured runs;
//! every run, warmups included (`warmup: true`), is kept in `runs`. Times are seconds, memory MiB.

use super::machine::MachineInfo;
use super::measure::{Phases, ProcessRun};
use super::stats::Stats;
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "nanobragg-rs/bench-detailed/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub created_utc: String,
    pub machine: MachineInfo,
    pub config: RunConfig,
    pub entries: Vec<Entry>,
    /// The machine's measured floating-point peaks and write bandwidth (null in older reports).
    #[serde(default)]
    pub limits: Option<super::roofline::MachineLimits>,
    pub gate: Gate,
    #[serde(default)]
    pub notes: Vec<String>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub name: String,
    pub args: Vec<String>,
    pub sizes: Vec<usize>,
    pub warmup: usize,
    pub iterations: usize,
    pub threads: Option<usize>,
    pub precision: String,
    pub c_binary: Option<String>,
    pub rust_binary: String,
    /// `fresh` (outputs removed before each run) or `replace` (each run replaces the last one's).
    #[serde(default = "fresh_outputs")]
    pub outputs: String,
}

fn fresh_outputs() -> String {
    "fresh".into()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub config: String,
    pub size: usize,
    pub pixels: usize,
    /// The kernel that rendered this configuration in process (`kernel::kernel_for(exp, active_level())`).
    pub kernel: String,
    pub sources: usize,
    pub domains: usize,
    pub phisteps: usize,
    pub oversample: usize,
    pub samples_per_pixel: u64,
    pub c: Option<CMeasure>,
    pub rust_cold: PhaseMeasure,
    pub rust_warm: PhaseMeasure,
    pub rust_process: ProcessMeasure,
    pub peak_rss_mb: PeakRss,
    pub correlation: Option<f64>,
    pub sum_ratio: Option<f64>,
    pub c_image_pixels: Option<usize>,
    pub rust_image_pixels: Option<usize>,
    pub rust_cold_vs_warm_correlation: Option<f64>,
    pub rust_cold_warm_identical: Option<bool>,
    pub speedup_warm: Option<f64>,
    pub speedup_process: Option<f64>,
    pub throughput: Throughput,
    /// How close to the machine's limit the warm run is (null in reports from before it existed).
    #[serde(default)]
    pub roofline: Option<super::roofline::Roofline>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CMeasure {
    /// Over the measured runs that succeeded; null when none did.
    pub wall_s: Option<Stats>,
    pub peak_rss_mb: Option<f64>,
    pub runs: Vec<ProcessRun>,
    pub failed_runs: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseMeasure {
    pub setup_s: Option<Stats>,
    pub render_s: Option<Stats>,
    pub io_s: Option<Stats>,
    pub total_s: Option<Stats>,
    pub peak_rss_mb: Option<f64>,
    pub runs: Vec<Phases>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessMeasure {
    pub wall_s: Option<Stats>,
    pub peak_rss_mb: Option<f64>,
    pub runs: Vec<ProcessRun>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PeakRss {
    pub c: Option<f64>,
    pub rust_process: Option<f64>,
    pub rust_warm: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub rust_warm_pixels_per_s: Option<f64>,
    pub rust_warm_samples_per_s: Option<f64>,
    pub rust_process_pixels_per_s: Option<f64>,
    pub rust_process_samples_per_s: Option<f64>,
    pub c_pixels_per_s: Option<f64>,
    pub c_samples_per_s: Option<f64>,
    /// Samples/s no machine like this one can reach (cores × 5 GHz × f32 SIMD lanes, one sample per
    /// lane per cycle); a throughput above it means a timing is wrong.
    pub plausible_samples_per_s_bound: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub enabled: bool,
    pub min_speedup: Option<f64>,
    pub min_correlation: Option<f64>,
    /// "checked", "not requested" or "skipped: <reason>".
    pub speed_check: String,
    pub correlation_check: String,
    pub checks: Vec<GateCheck>,
    pub passed: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateCheck {
    pub size: usize,
    /// "speedup_process", "correlation", "image_size", "c_runs", "rust_cold_vs_warm_correlation".
    pub check: String,
    pub value: Option<f64>,
    pub bound: Option<f64>,
    /// "pass", "fail" or "skipped".
    pub status: String,
    pub detail: String,
}

impl Report {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }

    /// Parse a report, refusing other schemas with a clear message.
    pub fn from_json(text: &str) -> Result<Report, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match v.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            Some(other) => return Err(format!("schema is '{other}', expected '{SCHEMA}'")),
            None => return Err(format!("no \"schema\" field (expected '{SCHEMA}')")),
        }
        serde_json::from_value(v).map_err(|e| format!("does not match {SCHEMA}: {e}"))
    }
}

/// A small made-up report for tests (two sizes, a C reference, no warnings).
#[doc(hidden)]
pub fn sample_report() -> Report {
    use super::machine::MachineInfo;
    let st = |v: &[f64]| Stats::of(v);
    let phases = |scale: f64| PhaseMeasure {
        setup_s: st(&[0.01 * scale, 0.011 * scale]),
        render_s: st(&[1.0 * scale, 1.1 * scale]),
        io_s: st(&[0.1 * scale, 0.1 * scale]),
        total_s: st(&[1.11 * scale, 1.211 * scale]),
        peak_rss_mb: Some(100.0),
        runs: vec![
            Phases { index: 0, warmup: true, setup_s: 0.02, render_s: 1.5, io_s: 0.1, peak_rss_mb: None },
            Phases { index: 1, warmup: false, setup_s: 0.01 * scale, render_s: 1.0 * scale, io_s: 0.1 * scale, peak_rss_mb: Some(100.0) },
        ],
    };
    let run = |i: usize, w: f64| ProcessRun {
        index: i,
        warmup: i == 0,
        wall_s: w,
        peak_rss_mb: Some(50.0),
        exit_code: Some(0),
        ok: true,
        error: None,
    };
    let entry = |size: usize| Entry {
        config: "bench".into(),
        size,
        pixels: size * size,
        kernel: "avx2".into(),
        sources: 1,
        domains: 1,
        phisteps: 1,
        oversample: 1,
        samples_per_pixel: 1,
        c: Some(CMeasure {
            wall_s: st(&[2.0, 2.2]),
            peak_rss_mb: Some(60.0),
            runs: vec![run(0, 2.5), run(1, 2.0), run(2, 2.2)],
            failed_runs: 0,
        }),
        rust_cold: phases(1.0),
        rust_warm: phases(0.9),
        rust_process: ProcessMeasure {
            wall_s: st(&[1.2, 1.3]),
            peak_rss_mb: Some(50.0),
            runs: vec![run(0, 1.4), run(1, 1.2), run(2, 1.3)],
        },
        peak_rss_mb: PeakRss { c: Some(60.0), rust_process: Some(50.0), rust_warm: Some(100.0) },
        correlation: Some(0.999_999),
        sum_ratio: Some(1.000_001),
        c_image_pixels: Some(size * size),
        rust_image_pixels: Some(size * size),
        rust_cold_vs_warm_correlation: Some(1.0),
        rust_cold_warm_identical: Some(true),
        speedup_warm: Some(2.1 / 1.1605),
        speedup_process: Some(2.1 / 1.25),
        throughput: Throughput {
            rust_warm_pixels_per_s: Some((size * size) as f64 / 0.945),
            rust_warm_samples_per_s: Some((size * size) as f64 / 0.945),
            rust_process_pixels_per_s: Some((size * size) as f64 / 1.25),
            rust_process_samples_per_s: Some((size * size) as f64 / 1.25),
            c_pixels_per_s: Some((size * size) as f64 / 2.1),
            c_samples_per_s: Some((size * size) as f64 / 2.1),
            plausible_samples_per_s_bound: 1.6e11,
        },
        roofline: None,
        warnings: vec![],
    };
    Report {
        schema: SCHEMA.into(),
        created_utc: "20261122T031500Z".into(),
        machine: MachineInfo {
            cpu_model: "Test CPU".into(),
            logical_cores: 2,
            physical_cores: 2,
            simd_level: "avx2".into(),
            cpu_simd: "avx2+fma".into(),
            os: "linux x86_64".into(),
            rustc: "rustc 1.0.0".into(),
            git_commit: "0123456789abcdef".into(),
            git_dirty: Some(false),
            nanobragg_version: "0.1.0".into(),
        },
        config: RunConfig {
            name: "bench".into(),
            args: super::plan::split_args(super::plan::BENCH_ARGS),
            sizes: vec![256, 512],
            warmup: 1,
            iterations: 2,
            threads: None,
            precision: "double".into(),
            c_binary: Some("/opt/nanoBragg".into()),
            rust_binary: "nanobragg-rs".into(),
            outputs: "fresh".into(),
        },
        entries: vec![entry(256), entry(512)],
        limits: None,
        gate: Gate::default(),
        notes: vec![],
        warnings: vec![],
    }
}

/// Whether two JSON trees are equal, numbers to a relative 1e-14 (serde_json without its
/// `float_roundtrip` feature may read a float back one unit in the last place off).
#[doc(hidden)]
pub fn json_approx_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-14 * x.abs().max(y.abs()),
            _ => x == y,
        },
        (V::Array(x), V::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_approx_eq(p, q)),
        (V::Object(x), V::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_approx_eq(v, w))),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serialize, parse back, and check nothing was lost (numbers to the last digit or so).
    fn round_trips(r: &Report) -> Report {
        let text = r.to_json();
        let back = Report::from_json(&text).unwrap();
        let a = serde_json::to_value(r).unwrap();
        let b = serde_json::to_value(&back).unwrap();
        assert!(json_approx_eq(&a, &b), "round trip changed the report");
        // and the parsed report is a fixed point
        assert_eq!(Report::from_json(&back.to_json()).unwrap().to_json(), back.to_json());
        back
    }

    #[test]
    fn json_round_trip() {
        let r = sample_report();
        let text = r.to_json();
        assert!(text.contains("\"schema\": \"nanobragg-rs/bench-detailed/1\""));
        let back = round_trips(&r);
        assert_eq!(back.entries[1].size, 512);
        assert_eq!(back.entries[0].c.as_ref().unwrap().runs.len(), 3);
        // the fields the issue names are where it says
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let e = &v["entries"][0];
        for k in [
            "size",
            "pixels",
            "c",
            "rust_cold",
            "rust_warm",
            "rust_process",
            "peak_rss_mb",
            "correlation",
            "sum_ratio",
            "speedup_warm",
            "speedup_process",
            "throughput",
        ] {
            assert!(e.get(k).is_some(), "entry lacks {k}");
        }
        for k in ["cpu_model", "logical_cores", "simd_level", "os", "rustc", "git_commit"] {
            assert!(v["machine"].get(k).is_some(), "machine lacks {k}");
        }
        assert!(v["gate"].is_object());
        assert_eq!(v["config"]["name"], "bench");
    }

    #[test]
    fn no_c_is_null_and_round_trips() {
        let mut r = sample_report();
        r.entries[0].c = None;
        r.entries[0].correlation = None;
        r.entries[0].rust_cold.io_s = Stats::of(&[0.0, 0.001]); // spread undefined -> null
        let text = r.to_json();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(v["entries"][0]["c"].is_null());
        assert!(v["entries"][0]["rust_cold"]["io_s"]["spread"].is_null());
        let back = round_trips(&r);
        assert!(back.entries[0].c.is_none() && back.entries[0].correlation.is_none());
        assert_eq!(back.entries[0].rust_cold.io_s.as_ref().unwrap().spread, None);
    }

    #[test]
    fn other_schemas_are_refused() {
        let text = sample_report().to_json().replace("bench-detailed/1", "bench-detailed/0");
        assert!(Report::from_json(&text).unwrap_err().contains("expected 'nanobragg-rs/bench-detailed/1'"));
        assert!(Report::from_json("{}").unwrap_err().contains("no \"schema\""));
        assert!(Report::from_json("nope").unwrap_err().starts_with("not JSON"));
    }
}
