//! The CI gate: every size must reach `--min-speedup` (C wall / our process wall, medians) and
//! `--min-correlation` (our image vs the C's). Without a C binary the C checks are skipped and the
//! report says so; they are never silently passed. Our own cold (process) and warm (in-process)
//! images must agree to `--min-correlation` in every case.

use super::schema::{Entry, Gate, GateCheck};

/// `--min-correlation` when `--gate` is given without one.
pub const DEFAULT_MIN_CORRELATION: f64 = 0.999;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct GateOptions {
    pub enabled: bool,
    pub min_speedup: Option<f64>,
    pub min_correlation: Option<f64>,
}

impl GateOptions {
    /// The correlation bound in force: the given one, or [`DEFAULT_MIN_CORRELATION`] under `--gate`.
    pub fn correlation_bound(&self) -> Option<f64> {
        self.min_correlation.or(self.enabled.then_some(DEFAULT_MIN_CORRELATION))
    }
}

pub const NO_C_REASON: &str = "skipped: no C binary (give --c-binary PATH or set NB_C_BIN)";
const NO_C_DETAIL: &str = "no C binary (give --c-binary PATH or set NB_C_BIN)";

fn check(size: usize, name: &str, value: Option<f64>, bound: Option<f64>, status: &str, detail: impl Into<String>) -> GateCheck {
    GateCheck { size, check: name.into(), value, bound, status: status.into(), detail: detail.into() }
}

/// Lower-bound check: fails when the value is missing or below the bound.
fn at_least(size: usize, name: &str, value: Option<f64>, bound: f64, what: &str) -> GateCheck {
    match value {
        Some(v) if v >= bound => check(size, name, Some(v), Some(bound), "pass", format!("{what} {v:.6} ≥ {bound}")),
        Some(v) => check(size, name, Some(v), Some(bound), "fail", format!("{what} {v:.6} < {bound}")),
        None => check(size, name, None, Some(bound), "fail", format!("{what} could not be measured")),
    }
}

/// Evaluate the gate over the entries. `c_available`: a C binary was given.
pub fn evaluate(entries: &[Entry], c_available: bool, opts: &GateOptions) -> Gate {
    if !opts.enabled {
        return Gate {
            enabled: false,
            min_speedup: opts.min_speedup,
            min_correlation: opts.min_correlation,
            speed_check: "not requested (no --gate)".into(),
            correlation_check: "not requested (no --gate)".into(),
            checks: Vec::new(),
            passed: true,
        };
    }
    let min_corr = opts.correlation_bound();
    let mut checks = Vec::new();
    for e in entries {
        let s = e.size;
        if c_available {
            let failed = e.c.as_ref().map(|c| c.failed_runs).unwrap_or(0);
            let ok = e.c.as_ref().is_some_and(|c| c.wall_s.is_some());
            if failed == 0 && ok {
                checks.push(check(s, "c_runs", None, None, "pass", "every C run succeeded"));
            } else {
                checks.push(check(s, "c_runs", Some(failed as f64), None, "fail", format!("{failed} C run(s) failed")));
            }
            match (e.rust_image_pixels, e.c_image_pixels) {
                (Some(r), Some(c)) if r == c => checks.push(check(s, "image_size", None, None, "pass", format!("{r} pixels each"))),
                (r, c) => checks.push(check(s, "image_size", None, None, "fail", format!("ours {r:?} pixels, C {c:?}"))),
            }
            if let Some(b) = min_corr {
                checks.push(at_least(s, "correlation", e.correlation, b, "correlation with the C image"));
            }
            if let Some(b) = opts.min_speedup {
                checks.push(at_least(s, "speedup_process", e.speedup_process, b, "speedup (C wall / our process wall)"));
            }
        } else {
            if min_corr.is_some() {
                checks.push(check(s, "correlation", None, min_corr, "skipped", NO_C_DETAIL));
            }
            if opts.min_speedup.is_some() {
                checks.push(check(s, "speedup_process", None, opts.min_speedup, "skipped", NO_C_DETAIL));
            }
        }
        if let Some(b) = min_corr {
            checks.push(at_least(
                s,
                "rust_cold_vs_warm_correlation",
                e.rust_cold_vs_warm_correlation,
                b,
                "our process vs in-process image correlation",
            ));
        }
    }
    let speed_check = match (opts.min_speedup, c_available) {
        (None, _) => "not requested (no --min-speedup)".to_string(),
        (Some(_), true) => "checked".to_string(),
        (Some(_), false) => NO_C_REASON.to_string(),
    };
    let correlation_check = match (min_corr, c_available) {
        (None, _) => "not requested".to_string(),
        (Some(_), true) => "checked".to_string(),
        (Some(_), false) => format!("{NO_C_REASON}; only our process vs in-process images were compared"),
    };
    let passed = !checks.iter().any(|c| c.status == "fail");
    Gate { enabled: true, min_speedup: opts.min_speedup, min_correlation: min_corr, speed_check, correlation_check, checks, passed }
}

/// Lines for the terminal and summary.md.
pub fn gate_lines(g: &Gate) -> Vec<String> {
    if !g.enabled {
        return vec!["Gate: not requested.".into()];
    }
    let mut v = vec![format!(
        "Gate: {} (min speedup {}, min correlation {})",
        if g.passed { "PASSED" } else { "FAILED" },
        g.min_speedup.map(|x| x.to_string()).unwrap_or_else(|| "none".into()),
        g.min_correlation.map(|x| x.to_string()).unwrap_or_else(|| "none".into())
    )];
    v.push(format!("  speed check: {}", g.speed_check));
    v.push(format!("  correlation check: {}", g.correlation_check));
    for c in &g.checks {
        if c.check == "speedup_process" && c.status != "skipped" {
            // The ratios go into every gate log, passing or not, so a CI log shows where speed stands.
            v.push(format!(
                "  size {}: speed vs the C {} (floor {}): {}",
                c.size,
                c.value.map(|x| format!("{x:.2}×")).unwrap_or_else(|| "not measured".into()),
                c.bound.map(|x| format!("{x}×")).unwrap_or_else(|| "none".into()),
                c.status.to_uppercase()
            ));
        } else if c.status != "pass" {
            v.push(format!("  size {}: {} {}: {}", c.size, c.check, c.status.to_uppercase(), c.detail));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::sample_report;

    fn opts(min_speedup: Option<f64>, min_correlation: Option<f64>) -> GateOptions {
        GateOptions { enabled: true, min_speedup, min_correlation }
    }

    #[test]
    fn passes_within_bounds() {
        let r = sample_report();
        let g = evaluate(&r.entries, true, &opts(Some(1.0), Some(0.9999)));
        assert!(g.passed, "{:?}", g.checks);
        assert_eq!(g.speed_check, "checked");
        assert!(g.checks.iter().all(|c| c.status == "pass"));
        // the measured ratios are printed even when they pass
        assert_eq!(gate_lines(&g).iter().filter(|l| l.contains("speed vs the C") && l.ends_with("PASS")).count(), 2);
    }

    #[test]
    fn a_threshold_that_must_fail_fails() {
        let r = sample_report();
        let g = evaluate(&r.entries, true, &opts(Some(100.0), None));
        assert!(!g.passed);
        assert_eq!(g.checks.iter().filter(|c| c.check == "speedup_process" && c.status == "fail").count(), 2);
        let g = evaluate(&r.entries, true, &opts(None, Some(0.999_999_9)));
        assert!(!g.passed);
        assert!(gate_lines(&g).iter().any(|l| l.contains("correlation FAIL")));
        let g = evaluate(&r.entries, true, &opts(Some(100.0), None));
        let lines = gate_lines(&g);
        assert_eq!(lines.iter().filter(|l| l.contains("speed vs the C") && l.ends_with("FAIL")).count(), 2, "{lines:?}");
    }

    #[test]
    fn missing_numbers_fail_and_c_failures_fail() {
        let mut r = sample_report();
        r.entries[0].correlation = None;
        assert!(!evaluate(&r.entries, true, &opts(None, Some(0.9))).passed);
        let mut r = sample_report();
        r.entries[1].c.as_mut().unwrap().failed_runs = 1;
        let g = evaluate(&r.entries, true, &opts(None, None));
        assert!(!g.passed && g.checks.iter().any(|c| c.check == "c_runs" && c.status == "fail"));
        let mut r = sample_report();
        r.entries[1].c_image_pixels = Some(3);
        assert!(!evaluate(&r.entries, true, &opts(None, None)).passed);
    }

    #[test]
    fn without_c_the_speed_part_is_skipped_loudly() {
        let mut r = sample_report();
        for e in &mut r.entries {
            e.c = None;
            e.correlation = None;
            e.speedup_process = None;
        }
        let g = evaluate(&r.entries, false, &opts(Some(1.0), Some(0.99999)));
        assert!(g.passed);
        assert!(g.speed_check.starts_with("skipped: no C binary"));
        assert!(g.correlation_check.starts_with("skipped: no C binary"));
        assert!(g.checks.iter().any(|c| c.check == "speedup_process" && c.status == "skipped"));
        // our own process vs in-process images are still checked
        assert!(g.checks.iter().any(|c| c.check == "rust_cold_vs_warm_correlation" && c.status == "pass"));
        r.entries[0].rust_cold_vs_warm_correlation = Some(0.5);
        assert!(!evaluate(&r.entries, false, &opts(Some(1.0), Some(0.99999))).passed);
    }

    #[test]
    fn defaults_and_disabled() {
        let r = sample_report();
        let g = evaluate(&r.entries, true, &GateOptions::default());
        assert!(!g.enabled && g.passed && g.checks.is_empty());
        let g = evaluate(&r.entries, true, &opts(None, None));
        assert_eq!(g.min_correlation, Some(DEFAULT_MIN_CORRELATION));
        assert_eq!(g.speed_check, "not requested (no --min-speedup)");
    }
}
