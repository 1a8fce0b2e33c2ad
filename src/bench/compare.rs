//! `bench-detailed compare BASELINE.json NEW.json`: match entries by configuration and size, compare
//! the medians of every time metric and the peak memory, and list the changes above a threshold,
//! worst first. Percent change = (new − old) / old × 100; positive means slower or larger.

use super::report::csv_field;
use super::schema::{Entry, Report};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One metric of one (config, size) in both reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub config: String,
    pub size: usize,
    pub metric: String,
    pub old: f64,
    pub new: f64,
    /// (new − old) / old × 100; None when old is 0.
    pub change_pct: Option<f64>,
    /// change_pct > threshold and the metric is ours (the C reference's time is context, not a regression).
    pub regression: bool,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompareResult {
    pub threshold_pct: f64,
    /// Every comparison made (both values present).
    pub rows: Vec<Comparison>,
    /// Regressions, worst first.
    pub regressions: Vec<Comparison>,
    /// (config, size) present in only one report.
    pub unmatched: Vec<String>,
    /// Differences in machine, threads, precision or flags that make the comparison less meaningful.
    pub notes: Vec<String>,
}

impl CompareResult {
    /// "N regressions of M comparisons".
    pub fn totals(&self) -> String {
        format!(
            "{} regression{} of {} comparison{} (threshold {}%)",
            self.regressions.len(),
            if self.regressions.len() == 1 { "" } else { "s" },
            self.rows.len(),
            if self.rows.len() == 1 { "" } else { "s" },
            self.threshold_pct
        )
    }
}

/// (new − old) / old × 100, None when old is 0 or either value is not finite.
pub fn percent_change(old: f64, new: f64) -> Option<f64> {
    if old == 0.0 || !old.is_finite() || !new.is_finite() {
        return None;
    }
    Some((new - old) / old * 100.0)
}

/// The compared metrics of an entry: (name, median or peak, counts as ours).
pub fn metrics(e: &Entry) -> Vec<(&'static str, Option<f64>, bool)> {
    let m = |s: &Option<super::stats::Stats>| s.as_ref().map(|s| s.median);
    vec![
        ("rust_cold.setup_s", m(&e.rust_cold.setup_s), true),
        ("rust_cold.render_s", m(&e.rust_cold.render_s), true),
        ("rust_cold.io_s", m(&e.rust_cold.io_s), true),
        ("rust_cold.total_s", m(&e.rust_cold.total_s), true),
        ("rust_warm.setup_s", m(&e.rust_warm.setup_s), true),
        ("rust_warm.render_s", m(&e.rust_warm.render_s), true),
        ("rust_warm.io_s", m(&e.rust_warm.io_s), true),
        ("rust_warm.total_s", m(&e.rust_warm.total_s), true),
        ("rust_process.wall_s", m(&e.rust_process.wall_s), true),
        ("peak_rss_mb.rust_process", e.peak_rss_mb.rust_process, true),
        ("peak_rss_mb.rust_warm", e.peak_rss_mb.rust_warm, true),
        ("c.wall_s", e.c.as_ref().and_then(|c| m(&c.wall_s)), false),
        ("peak_rss_mb.c", e.peak_rss_mb.c, false),
    ]
}

/// Refuse a report whose numbers cannot be compared: a negative, non-finite or zero time median (a
/// measured time is never 0), a negative peak memory, or data that is all zero. `name` names the file.
pub fn validate(r: &Report, name: &str) -> anyhow::Result<()> {
    let mut any_nonzero = false;
    for e in &r.entries {
        for (metric, v, _) in metrics(e) {
            let Some(v) = v else { continue };
            let is_time = metric.ends_with("_s");
            if !v.is_finite() || v < 0.0 || (is_time && v == 0.0) {
                anyhow::bail!(
                    "{name}: {} {}: {metric} is {v}, not a measurement ({})",
                    e.config,
                    e.size,
                    if is_time { "a time median must be positive" } else { "a peak memory must be ≥ 0" }
                );
            }
            any_nonzero |= v != 0.0;
        }
    }
    if !any_nonzero {
        anyhow::bail!("{name}: no measurement to compare (no entries, or every number is zero or missing)");
    }
    Ok(())
}

pub fn compare(base: &Report, new: &Report, threshold_pct: f64) -> CompareResult {
    let mut res = CompareResult { threshold_pct, ..Default::default() };
    let (bm, nm) = (&base.machine, &new.machine);
    if bm.cpu_model != nm.cpu_model || bm.logical_cores != nm.logical_cores {
        res.notes.push(format!(
            "different machines: baseline {} ({} cores), new {} ({} cores)",
            bm.cpu_model, bm.logical_cores, nm.cpu_model, nm.logical_cores
        ));
    }
    let (bc, nc) = (&base.config, &new.config);
    if bc.threads != nc.threads {
        res.notes.push(format!("different thread counts: baseline {:?}, new {:?}", bc.threads, nc.threads));
    }
    if bc.precision != nc.precision {
        res.notes.push(format!("different precision: baseline {}, new {}", bc.precision, nc.precision));
    }
    if bc.name == nc.name && bc.args != nc.args {
        res.notes.push(format!(
            "same configuration name with different flags: baseline `{}`, new `{}`",
            bc.args.join(" "),
            nc.args.join(" ")
        ));
    }

    for ne in &new.entries {
        let Some(be) = base.entries.iter().find(|b| b.config == ne.config && b.size == ne.size) else {
            res.unmatched.push(format!("{} {} only in the new report", ne.config, ne.size));
            continue;
        };
        for ((name, old, ours), (_, newv, _)) in metrics(be).into_iter().zip(metrics(ne)) {
            let (Some(old), Some(newv)) = (old, newv) else { continue };
            let change = percent_change(old, newv);
            let regression = ours && change.is_some_and(|c| c > threshold_pct);
            res.rows.push(Comparison {
                config: ne.config.clone(),
                size: ne.size,
                metric: name.to_string(),
                old,
                new: newv,
                change_pct: change,
                regression,
            });
        }
    }
    for be in &base.entries {
        if !new.entries.iter().any(|n| n.config == be.config && n.size == be.size) {
            res.unmatched.push(format!("{} {} only in the baseline", be.config, be.size));
        }
    }
    let c_changes: Vec<&Comparison> =
        res.rows.iter().filter(|r| r.metric == "c.wall_s" && r.change_pct.is_some_and(|c| c.abs() > threshold_pct)).collect();
    for c in c_changes {
        res.notes.push(format!(
            "the C reference itself changed by {:+.1}% at {} {}: the machine or its load differs, so our changes there are suspect",
            c.change_pct.unwrap_or(0.0),
            c.config,
            c.size
        ));
    }
    res.regressions = res.rows.iter().filter(|r| r.regression).cloned().collect();
    res.regressions.sort_by(|a, b| b.change_pct.unwrap_or(0.0).total_cmp(&a.change_pct.unwrap_or(0.0)));
    res
}

fn csv_rows(rows: &[Comparison]) -> String {
    let mut s = String::from("config,size,metric,old,new,change_pct,regression\n");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{}",
            csv_field(&r.config),
            r.size,
            r.metric,
            r.old,
            r.new,
            r.change_pct.map(|c| format!("{c:.4}")).unwrap_or_default(),
            r.regression
        );
    }
    s
}

/// `regressions.csv`: the regressions, worst first.
pub fn regressions_csv(res: &CompareResult) -> String {
    csv_rows(&res.regressions)
}

/// `full_comparison.csv`: every comparison, in report order.
pub fn full_csv(res: &CompareResult) -> String {
    csv_rows(&res.rows)
}

fn fmt_val(metric: &str, v: f64) -> String {
    if metric.starts_with("peak_rss_mb") {
        format!("{v:.1} MiB")
    } else {
        super::report::fmt_time(Some(v))
    }
}

/// The Markdown report (also printed to the terminal).
pub fn markdown(res: &CompareResult, base_name: &str, new_name: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Benchmark comparison\n\nbaseline: `{base_name}`  \nnew: `{new_name}`\n");
    let _ = writeln!(s, "**{}**\n", res.totals());
    if !res.regressions.is_empty() {
        s.push_str("## Regressions (worst first)\n\n| config | size | metric | baseline | new | change |\n|---|---:|---|---:|---:|---:|\n");
        for r in &res.regressions {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:+.1}% |",
                r.config,
                r.size,
                r.metric,
                fmt_val(&r.metric, r.old),
                fmt_val(&r.metric, r.new),
                r.change_pct.unwrap_or(0.0)
            );
        }
        s.push('\n');
    }
    if !res.notes.is_empty() || !res.unmatched.is_empty() {
        s.push_str("## Notes\n\n");
        for n in res.notes.iter().chain(&res.unmatched) {
            let _ = writeln!(s, "- {n}");
        }
        s.push('\n');
    }
    s.push_str("## Every comparison\n\n| config | size | metric | baseline | new | change |\n|---|---:|---|---:|---:|---:|\n");
    for r in &res.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {}{} |",
            r.config,
            r.size,
            r.metric,
            fmt_val(&r.metric, r.old),
            fmt_val(&r.metric, r.new),
            r.change_pct.map(|c| format!("{c:+.1}%")).unwrap_or_else(|| "n/a".into()),
            if r.regression { " ⚠" } else { "" }
        );
    }
    s
}

pub const REGRESSIONS_CSV: &str = "regressions.csv";
pub const FULL_CSV: &str = "full_comparison.csv";
pub const COMPARISON_MD: &str = "comparison.md";

/// Write comparison.md, regressions.csv and full_comparison.csv into `dir`.
/// Errors name the folder or file that could not be written.
pub fn write_all(res: &CompareResult, dir: &std::path::Path, base_name: &str, new_name: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create the --out folder {}", dir.display()))?;
    for (file, text) in [
        (COMPARISON_MD, markdown(res, base_name, new_name)),
        (REGRESSIONS_CSV, regressions_csv(res)),
        (FULL_CSV, full_csv(res)),
    ] {
        let p = dir.join(file);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::schema::sample_report;
    use crate::bench::stats::Stats;

    #[test]
    fn validate_refuses_zero_negative_and_all_zero_data() {
        let r = sample_report();
        validate(&r, "r.json").unwrap();
        let mut z = r.clone();
        z.entries[0].rust_process.wall_s.as_mut().unwrap().median = 0.0;
        let e = validate(&z, "z.json").unwrap_err().to_string();
        assert!(e.contains("z.json") && e.contains("rust_process.wall_s is 0"), "{e}");
        let mut n = r.clone();
        n.entries[1].rust_warm.render_s.as_mut().unwrap().median = -1.0;
        assert!(validate(&n, "n.json").unwrap_err().to_string().contains("rust_warm.render_s is -1"));
        let mut m = r.clone();
        m.entries[0].peak_rss_mb.rust_warm = Some(f64::NAN);
        assert!(validate(&m, "m.json").is_err());
        let mut empty = r.clone();
        empty.entries.clear();
        assert!(validate(&empty, "e.json").unwrap_err().to_string().contains("no measurement"));
    }

    #[test]
    fn percent_change_arithmetic() {
        assert_eq!(percent_change(2.0, 3.0), Some(50.0));
        assert_eq!(percent_change(4.0, 3.0), Some(-25.0));
        assert_eq!(percent_change(1.0, 1.0), Some(0.0));
        assert_eq!(percent_change(0.0, 1.0), None);
        assert_eq!(percent_change(1.0, f64::NAN), None);
    }

    #[test]
    fn identical_reports_have_no_regressions() {
        let r = sample_report();
        let res = compare(&r, &r, 5.0);
        assert!(res.regressions.is_empty());
        assert_eq!(res.rows.len(), 2 * 13);
        assert!(res.rows.iter().all(|c| c.change_pct == Some(0.0)));
        assert_eq!(res.totals(), "0 regressions of 26 comparisons (threshold 5%)");
        assert!(res.notes.is_empty() && res.unmatched.is_empty());
    }

    #[test]
    fn a_slowdown_is_flagged_worst_first() {
        let base = sample_report();
        let mut new = base.clone();
        // warm render 10% slower at 512, process wall 50% slower at 256, memory +4% (below threshold)
        new.entries[1].rust_warm.render_s = Stats::of(&[1.1 * 0.9 * 1.1, 1.1 * 0.9 * 1.1]);
        let old_render = base.entries[1].rust_warm.render_s.as_ref().unwrap().median;
        new.entries[0].rust_process.wall_s = Stats::of(&[1.875, 1.875]);
        new.entries[0].peak_rss_mb.rust_process = Some(52.0);
        let res = compare(&base, &new, 5.0);
        assert_eq!(res.regressions.len(), 2, "{:?}", res.regressions);
        let worst = &res.regressions[0];
        assert_eq!((worst.size, worst.metric.as_str()), (256, "rust_process.wall_s"));
        assert!((worst.change_pct.unwrap() - 50.0).abs() < 1e-9);
        let second = &res.regressions[1];
        assert_eq!((second.size, second.metric.as_str()), (512, "rust_warm.render_s"));
        let expect = (1.1 * 0.9 * 1.1 - old_render) / old_render * 100.0;
        assert!((second.change_pct.unwrap() - expect).abs() < 1e-9);
        let mem = res.rows.iter().find(|r| r.size == 256 && r.metric == "peak_rss_mb.rust_process").unwrap();
        assert!((mem.change_pct.unwrap() - 4.0).abs() < 1e-9 && !mem.regression);
        assert_eq!(res.totals(), "2 regressions of 26 comparisons (threshold 5%)");
        // a looser threshold keeps only the big one
        assert_eq!(compare(&base, &new, 20.0).regressions.len(), 1);
    }

    #[test]
    fn the_c_time_is_context_not_a_regression() {
        let base = sample_report();
        let mut new = base.clone();
        new.entries[0].c.as_mut().unwrap().wall_s = Stats::of(&[4.2, 4.2]);
        let res = compare(&base, &new, 5.0);
        assert!(res.regressions.is_empty());
        assert!(res.notes.iter().any(|n| n.contains("C reference itself changed by +100.0%")));
    }

    #[test]
    fn unmatched_sizes_and_settings_are_noted() {
        let base = sample_report();
        let mut new = base.clone();
        new.entries[1].size = 1024;
        new.config.threads = Some(1);
        new.machine.cpu_model = "Other CPU".into();
        let res = compare(&base, &new, 5.0);
        assert_eq!(res.rows.len(), 13);
        assert!(res.unmatched.iter().any(|u| u == "bench 1024 only in the new report"));
        assert!(res.unmatched.iter().any(|u| u == "bench 512 only in the baseline"));
        assert!(res.notes.iter().any(|n| n.contains("different thread counts")));
        assert!(res.notes.iter().any(|n| n.contains("different machines")));
    }

    #[test]
    fn csv_output() {
        let base = sample_report();
        let mut new = base.clone();
        new.entries[0].rust_cold.render_s = Stats::of(&[2.1, 2.1]);
        let res = compare(&base, &new, 5.0);
        let reg = regressions_csv(&res);
        let lines: Vec<&str> = reg.lines().collect();
        assert_eq!(lines[0], "config,size,metric,old,new,change_pct,regression");
        assert_eq!(lines.len(), 1 + res.regressions.len());
        // old median 1.05 -> 2.1: +100%
        assert!(lines.contains(&"bench,256,rust_cold.render_s,1.05,2.1,100.0000,true"), "{reg}");
        let full = full_csv(&res);
        assert_eq!(full.lines().count(), 1 + res.rows.len());
        assert!(full.lines().skip(1).all(|l| l.split(',').count() == 7));
        let md = markdown(&res, "a.json", "b.json");
        assert!(md.contains("**1 regression of 26 comparisons (threshold 5%)**") && md.contains("+100.0%"), "{md}");
    }
}
