//! `bench-detailed compare BASELINE.json NEW.json`: match entries by configuration and size, compare
//! the medians of every time metric and the peak memory, and list the regressions, worst first.
//! Percent change = (new − old) / old × 100; positive means slower or larger.
//!
//! A change is a regression only when it is above the threshold *and* statistically significant: the
//! per-run samples kept in the JSON are put to a one-sided Mann–Whitney U test (module
//! `significance`) of "the new runs are slower than the baseline runs + threshold" at level `alpha`.
//! When the samples are too few for the test ever to reach `alpha` (1/C(n+m, n) > alpha, e.g. 3 runs
//! against 3 at 0.01), the change must instead be beyond the spread: every new run slower than every
//! baseline run by more than the threshold ("non-overlapping ranges"). Each row says which decided.
//! Changes above the threshold that are not significant are reported apart, as noise.

use super::schema::{Entry, Report};
use super::significance::{mann_whitney_greater, min_p};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The default significance level of `compare --alpha`.
pub const DEFAULT_ALPHA: f64 = 0.01;

/// One metric of one (config, size) in both reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub config: String,
    pub size: usize,
    pub metric: String,
    /// "time" or "memory".
    pub kind: String,
    /// Median (times) or maximum (peak memory) over the measured runs.
    pub old: f64,
    pub new: f64,
    /// (new − old) / old × 100; None when old is 0.
    pub change_pct: Option<f64>,
    /// Per-run samples behind each side.
    pub n_old: usize,
    pub n_new: usize,
    /// One-sided Mann–Whitney U p-value of "new runs are larger than baseline runs × (1 + threshold)";
    /// None without samples.
    pub p_value: Option<f64>,
    /// What decided `significant`: "Mann-Whitney U (exact)", "Mann-Whitney U (normal approximation)",
    /// "non-overlapping ranges" or "medians only (no per-run samples)".
    pub test: String,
    pub significant: bool,
    /// change_pct > threshold, significant, and the metric is ours (the C reference's time is context).
    pub regression: bool,
    /// change_pct > threshold and ours, but not significant: noise.
    pub noise: bool,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompareResult {
    pub threshold_pct: f64,
    pub alpha: f64,
    /// Every comparison made (both values present).
    pub rows: Vec<Comparison>,
    /// Regressions, worst first.
    pub regressions: Vec<Comparison>,
    /// Our changes above the threshold that are not significant, worst first.
    pub noise: Vec<Comparison>,
    /// (config, size) present in only one report.
    pub unmatched: Vec<String>,
    /// Differences in machine, threads, precision or flags that make the comparison less meaningful.
    pub notes: Vec<String>,
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

impl CompareResult {
    /// "N regressions of M comparisons (…): T in time, M in memory; K changes above the threshold are noise".
    pub fn totals(&self) -> String {
        let time = self.regressions.iter().filter(|r| r.kind == "time").count();
        format!(
            "{} of {} (threshold {}%, significance level {}): {time} in time, {} in memory; {} above the threshold {} noise",
            plural(self.regressions.len(), "regression"),
            plural(self.rows.len(), "comparison"),
            self.threshold_pct,
            self.alpha,
            self.regressions.len() - time,
            plural(self.noise.len(), "change"),
            if self.noise.len() == 1 { "is" } else { "are" }
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

/// One compared metric of an entry.
pub struct Metric {
    pub name: &'static str,
    /// Median (times) or peak (memory); None when not measured.
    pub value: Option<f64>,
    /// Counts as ours (a regression is possible); the C reference is context.
    pub ours: bool,
    /// The measured (non-warmup, successful) per-run values behind `value`.
    pub samples: Vec<f64>,
}

/// The compared metrics of an entry.
pub fn metrics(e: &Entry) -> Vec<Metric> {
    use super::measure::{Phases, ProcessRun};
    let m = |s: &Option<super::stats::Stats>| s.as_ref().map(|s| s.median);
    let ph = |runs: &[Phases], f: fn(&Phases) -> f64| runs.iter().filter(|p| !p.warmup).map(f).collect::<Vec<_>>();
    let ph_rss = |runs: &[Phases]| runs.iter().filter(|p| !p.warmup).filter_map(|p| p.peak_rss_mb).collect::<Vec<_>>();
    let pr = |runs: &[ProcessRun]| runs.iter().filter(|r| !r.warmup && r.ok).map(|r| r.wall_s).collect::<Vec<_>>();
    let pr_rss = |runs: &[ProcessRun]| runs.iter().filter(|r| !r.warmup && r.ok).filter_map(|r| r.peak_rss_mb).collect::<Vec<_>>();
    let metric = |name, value, ours, samples| Metric { name, value, ours, samples };
    let (cold, warm) = (&e.rust_cold, &e.rust_warm);
    let no_runs = Vec::new();
    let c_runs = e.c.as_ref().map(|c| &c.runs).unwrap_or(&no_runs);
    vec![
        metric("rust_cold.setup_s", m(&cold.setup_s), true, ph(&cold.runs, |p| p.setup_s)),
        metric("rust_cold.render_s", m(&cold.render_s), true, ph(&cold.runs, |p| p.render_s)),
        metric("rust_cold.io_s", m(&cold.io_s), true, ph(&cold.runs, |p| p.io_s)),
        metric("rust_cold.total_s", m(&cold.total_s), true, ph(&cold.runs, |p| p.total_s())),
        metric("rust_warm.setup_s", m(&warm.setup_s), true, ph(&warm.runs, |p| p.setup_s)),
        metric("rust_warm.render_s", m(&warm.render_s), true, ph(&warm.runs, |p| p.render_s)),
        metric("rust_warm.io_s", m(&warm.io_s), true, ph(&warm.runs, |p| p.io_s)),
        metric("rust_warm.total_s", m(&warm.total_s), true, ph(&warm.runs, |p| p.total_s())),
        metric("rust_process.wall_s", m(&e.rust_process.wall_s), true, pr(&e.rust_process.runs)),
        metric("peak_rss_mb.rust_process", e.peak_rss_mb.rust_process, true, pr_rss(&e.rust_process.runs)),
        metric("peak_rss_mb.rust_warm", e.peak_rss_mb.rust_warm, true, ph_rss(&warm.runs)),
        metric("c.wall_s", e.c.as_ref().and_then(|c| m(&c.wall_s)), false, pr(c_runs)),
        metric("peak_rss_mb.c", e.peak_rss_mb.c, false, pr_rss(c_runs)),
    ]
}

/// Is `new` larger than `old` by more than `threshold_pct`, significantly at level `alpha`? The
/// baseline runs are scaled by (1 + threshold) and the one-sided Mann–Whitney U test asks whether the
/// new runs are stochastically larger than those: a significant result says the slowdown exceeds the
/// threshold, not merely that there is one (so a dozen metrics of two runs of the same build do not
/// give a dozen chances for a small drift to pass for a regression). When the samples are too few for
/// the test ever to reach `alpha`, the ranges decide: the fastest new run must be above the slowest
/// scaled baseline run (the test's own most extreme case). Returns (significant, p-value, test).
pub fn significance(old: &[f64], new: &[f64], alpha: f64, threshold_pct: f64) -> (bool, Option<f64>, String) {
    let scale = 1.0 + threshold_pct / 100.0;
    let shifted: Vec<f64> = old.iter().map(|x| x * scale).collect();
    let Some(mw) = mann_whitney_greater(new, &shifted) else {
        return (true, None, "medians only (no per-run samples)".into());
    };
    if min_p(new.len(), old.len()) <= alpha {
        (mw.p_greater <= alpha, Some(mw.p_greater), format!("Mann-Whitney U ({})", mw.method.name()))
    } else {
        let lo_new = new.iter().copied().fold(f64::INFINITY, f64::min);
        let hi_old = shifted.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo_new > hi_old, Some(mw.p_greater), "non-overlapping ranges".into())
    }
}

/// Refuse a report whose numbers cannot be compared: a negative, non-finite or zero time median (a
/// measured time is never 0), a negative peak memory, or data that is all zero. `name` names the file.
pub fn validate(r: &Report, name: &str) -> anyhow::Result<()> {
    let mut any_nonzero = false;
    for e in &r.entries {
        for Metric { name: metric, value: v, .. } in metrics(e) {
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

pub fn compare(base: &Report, new: &Report, threshold_pct: f64, alpha: f64) -> CompareResult {
    let mut res = CompareResult { threshold_pct, alpha, ..Default::default() };
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
    if bc.outputs != nc.outputs {
        res.notes.push(format!("different output files: baseline {}, new {} (fresh files or replacing the last run's)", bc.outputs, nc.outputs));
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
        for (bm, nm) in metrics(be).into_iter().zip(metrics(ne)) {
            let (Some(old), Some(newv)) = (bm.value, nm.value) else { continue };
            let change = percent_change(old, newv);
            let above = change.is_some_and(|c| c > threshold_pct);
            let (significant, p_value, test) = significance(&bm.samples, &nm.samples, alpha, threshold_pct);
            res.rows.push(Comparison {
                config: ne.config.clone(),
                size: ne.size,
                metric: bm.name.to_string(),
                kind: if bm.name.starts_with("peak_rss_mb") { "memory" } else { "time" }.to_string(),
                old,
                new: newv,
                change_pct: change,
                n_old: bm.samples.len(),
                n_new: nm.samples.len(),
                p_value,
                test,
                significant,
                regression: bm.ours && above && significant,
                noise: bm.ours && above && !significant,
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
    let worst_first = |v: &mut Vec<Comparison>| v.sort_by(|a, b| b.change_pct.unwrap_or(0.0).total_cmp(&a.change_pct.unwrap_or(0.0)));
    res.regressions = res.rows.iter().filter(|r| r.regression).cloned().collect();
    worst_first(&mut res.regressions);
    res.noise = res.rows.iter().filter(|r| r.noise).cloned().collect();
    worst_first(&mut res.noise);
    res
}

/// The rows as CSV (header from the field names of [`Comparison`]; None as an empty cell).
fn csv_rows(rows: &[Comparison]) -> String {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
    w.write_record(CSV_HEADER).expect("writing to memory");
    for r in rows {
        w.serialize(r).expect("a comparison always serializes");
    }
    String::from_utf8(w.into_inner().expect("writing to memory")).expect("CSV of UTF-8 fields")
}

/// The CSV header (written even when there are no rows).
pub const CSV_HEADER: [&str; 14] = [
    "config", "size", "metric", "kind", "old", "new", "change_pct", "n_old", "n_new", "p_value", "test", "significant",
    "regression", "noise",
];

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
        super::fmt::fmt_time(Some(v))
    }
}

fn fmt_p(r: &Comparison) -> String {
    match r.p_value {
        Some(p) if p < 1e-4 => format!("{p:.1e}"),
        Some(p) => format!("{p:.4}"),
        None => "—".into(),
    }
}

/// A worst-first table of `rows` with the evidence that decided each.
fn table(s: &mut String, rows: &[Comparison], mark: bool) {
    s.push_str("| config | size | kind | metric | baseline | new | change | runs | p (one-sided) | decided by |
");
    s.push_str("|---|---:|---|---|---:|---:|---:|---:|---:|---|
");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {}{} | {}+{} | {} | {}{} |",
            r.config,
            r.size,
            r.kind,
            r.metric,
            fmt_val(&r.metric, r.old),
            fmt_val(&r.metric, r.new),
            r.change_pct.map(|c| format!("{c:+.1}%")).unwrap_or_else(|| "n/a".into()),
            if mark && r.regression { " ⚠" } else { "" },
            r.n_old,
            r.n_new,
            fmt_p(r),
            r.test,
            if r.significant { "" } else { " (not significant)" }
        );
    }
    s.push('\n');
}

/// The Markdown report (also printed to the terminal).
pub fn markdown(res: &CompareResult, base_name: &str, new_name: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Benchmark comparison\n\nbaseline: `{base_name}`  \nnew: `{new_name}`\n");
    let _ = writeln!(s, "**{}**\n", res.totals());
    let _ = writeln!(
        s,
        "A regression is a change above {t}% that is significant: the per-run samples pass a one-sided Mann-Whitney U \
         test of \"new runs slower than baseline runs + {t}%\" at p ≤ {a}, or, when the runs are too few for the test to \
         reach that level, every new run is above every baseline run + {t}% (non-overlapping ranges). Changes above the \
         threshold that fail this are listed as noise. Time is the median, memory the peak over the measured runs.\n",
        t = res.threshold_pct,
        a = res.alpha
    );
    for (kind, title) in [("time", "Time regressions (worst first)"), ("memory", "Memory regressions (worst first)")] {
        let rows: Vec<Comparison> = res.regressions.iter().filter(|r| r.kind == kind).cloned().collect();
        if !rows.is_empty() {
            let _ = writeln!(s, "## {title}\n");
            table(&mut s, &rows, false);
        }
    }
    if !res.noise.is_empty() {
        s.push_str("## Above the threshold but not significant: noise (worst first)\n\n");
        table(&mut s, &res.noise, false);
    }
    if !res.notes.is_empty() || !res.unmatched.is_empty() {
        s.push_str("## Notes\n\n");
        for n in res.notes.iter().chain(&res.unmatched) {
            let _ = writeln!(s, "- {n}");
        }
        s.push('\n');
    }
    s.push_str("## Every comparison\n\n");
    table(&mut s, &res.rows, true);
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
        // temp + rename: an interrupted compare leaves no half-written report
        nanobragg::io::atomic::write_atomic(&p, text.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::sample_report;
    use crate::stats::Stats;

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

    /// A report like [`sample_report`] with `n` measured runs per contender: every time is its base value ×
    /// `factor(metric, size)` × (1 ± 5% uniform noise, and one run in 16 up to 25% slow, as a busy machine
    /// gives), the stats recomputed from the runs. Deterministic for a seed.
    fn noisy_report(seed: u64, n: usize, factor: &dyn Fn(&str, usize) -> f64) -> Report {
        use crate::measure::{Phases, ProcessRun};
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut noise = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = (state >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let spike = if state >> 60 == 0 { 1.0 + 0.25 * u } else { 1.0 };
            (1.0 + 0.05 * (2.0 * u - 1.0)) * spike
        };
        let mut r = sample_report();
        for e in &mut r.entries {
            let size = e.size;
            let mut phases = |scale: f64, name: &str, rss: Option<f64>| -> Vec<Phases> {
                (0..n)
                    .map(|i| Phases {
                        index: i,
                        warmup: false,
                        setup_s: 0.01 * scale * factor(&format!("{name}.setup_s"), size) * noise(),
                        render_s: 1.0 * scale * factor(&format!("{name}.render_s"), size) * noise(),
                        io_s: 0.1 * scale * factor(&format!("{name}.io_s"), size) * noise(),
                        peak_rss_mb: rss.map(|m| m * factor(&format!("peak_rss_mb.{name}"), size)),
                    })
                    .collect()
            };
            e.rust_cold.runs = phases(1.0, "rust_cold", None);
            e.rust_warm.runs = phases(0.9, "rust_warm", Some(100.0));
            let mut procs = |wall: f64, name: &str, mem: &str| -> Vec<ProcessRun> {
                (0..n)
                    .map(|i| ProcessRun {
                        index: i,
                        warmup: false,
                        wall_s: wall * factor(name, size) * noise(),
                        peak_rss_mb: Some(50.0 * factor(mem, size)),
                        exit_code: Some(0),
                        ok: true,
                        error: None,
                    })
                    .collect()
            };
            e.rust_process.runs = procs(1.25, "rust_process.wall_s", "peak_rss_mb.rust_process");
            e.c.as_mut().unwrap().runs = procs(2.1, "c.wall_s", "peak_rss_mb.c");
            for pm in [&mut e.rust_cold, &mut e.rust_warm] {
                let v = |f: fn(&Phases) -> f64| Stats::of(&pm.runs.iter().map(f).collect::<Vec<_>>());
                (pm.setup_s, pm.render_s, pm.io_s, pm.total_s) = (v(|p| p.setup_s), v(|p| p.render_s), v(|p| p.io_s), v(|p| p.total_s()));
                pm.peak_rss_mb = pm.runs.iter().filter_map(|p| p.peak_rss_mb).reduce(f64::max);
            }
            let wall = |runs: &[ProcessRun]| Stats::of(&runs.iter().map(|r| r.wall_s).collect::<Vec<_>>());
            let peak = |runs: &[ProcessRun]| runs.iter().filter_map(|r| r.peak_rss_mb).reduce(f64::max);
            e.rust_process.wall_s = wall(&e.rust_process.runs);
            e.c.as_mut().unwrap().wall_s = wall(&e.c.as_ref().unwrap().runs);
            e.peak_rss_mb.rust_process = peak(&e.rust_process.runs);
            e.peak_rss_mb.c = peak(&e.c.as_ref().unwrap().runs);
            e.peak_rss_mb.rust_warm = e.rust_warm.peak_rss_mb;
        }
        r
    }

    fn same(_: &str, _: usize) -> f64 {
        1.0
    }

    #[test]
    fn identical_reports_have_no_regressions() {
        let r = noisy_report(1, 5, &same);
        let res = compare(&r, &r, 5.0, DEFAULT_ALPHA);
        assert!(res.regressions.is_empty() && res.noise.is_empty());
        assert_eq!(res.rows.len(), 2 * 13);
        assert!(res.rows.iter().all(|c| c.change_pct == Some(0.0) && !c.significant));
        assert_eq!(
            res.totals(),
            "0 regressions of 26 comparisons (threshold 5%, significance level 0.01): 0 in time, 0 in memory; 0 changes above the threshold are noise"
        );
        assert!(res.notes.is_empty() && res.unmatched.is_empty());
    }

    /// Two runs of the same build differ only by noise: 0 regressions, for many seeds and run counts,
    /// though several medians move by more than the threshold (the old median-only rule flagged them).
    #[test]
    fn two_runs_of_the_same_build_report_no_regression() {
        let mut beyond_threshold = 0;
        for n in [3, 5, 9] {
            for seed in 0..20u64 {
                let a = noisy_report(2 * seed, n, &same);
                let b = noisy_report(2 * seed + 1, n, &same);
                let res = compare(&a, &b, 5.0, DEFAULT_ALPHA);
                assert!(res.regressions.is_empty(), "n={n} seed={seed}: {:?}", res.regressions);
                beyond_threshold += res.noise.len();
            }
        }
        assert!(beyond_threshold > 10, "the noise model should move some medians by > 5% ({beyond_threshold})");
    }

    #[test]
    fn a_clear_slowdown_is_flagged_worst_first_with_its_test() {
        // warm render 20% slower at 512, process wall 50% slower at 256, process memory +4% at 256
        let slow = |m: &str, size: usize| match (m, size) {
            ("rust_warm.render_s", 512) => 1.20,
            ("rust_process.wall_s", 256) => 1.5,
            ("peak_rss_mb.rust_process", 256) => 1.04,
            _ => 1.0,
        };
        for n in [3, 5, 9] {
            let base = noisy_report(7, n, &same);
            let new = noisy_report(8, n, &slow);
            let res = compare(&base, &new, 5.0, DEFAULT_ALPHA);
            let names: Vec<(usize, &str)> = res.regressions.iter().map(|r| (r.size, r.metric.as_str())).collect();
            assert!(names.starts_with(&[(256, "rust_process.wall_s")]), "n={n}: {names:?}");
            assert!(names.contains(&(256, "rust_process.wall_s")), "n={n}: {names:?}");
            let worst = &res.regressions[0];
            assert!(worst.change_pct.unwrap() > 30.0 && worst.significant && worst.kind == "time");
            let expect = match n {
                3 => "non-overlapping ranges",
                9 => "Mann-Whitney U (normal approximation)",
                _ => "Mann-Whitney U (exact)",
            };
            assert_eq!(worst.test, expect, "n={n}");
            // memory +4%: below the threshold, whatever the test says
            let mem = res.rows.iter().find(|r| r.size == 256 && r.metric == "peak_rss_mb.rust_process").unwrap();
            assert!((mem.change_pct.unwrap() - 4.0).abs() < 1e-9 && !mem.regression && mem.kind == "memory");
            // the 20% render slowdown against ±5% noise is found with 5 and 9 runs
            if n >= 5 {
                assert!(names.contains(&(512, "rust_warm.render_s")), "n={n}: {names:?}");
            }
            // worst first
            assert!(res.regressions.windows(2).all(|w| w[0].change_pct >= w[1].change_pct));
        }
        // a threshold above the change keeps only the big one
        let res = compare(&noisy_report(7, 9, &same), &noisy_report(8, 9, &slow), 25.0, DEFAULT_ALPHA);
        assert_eq!(res.regressions.len(), 1, "{:?}", res.regressions);
    }

    #[test]
    fn a_memory_regression_is_split_from_time() {
        let fat = |m: &str, _: usize| if m == "peak_rss_mb.rust_warm" { 1.3 } else { 1.0 };
        let res = compare(&noisy_report(3, 5, &same), &noisy_report(4, 5, &fat), 5.0, DEFAULT_ALPHA);
        assert_eq!(res.regressions.len(), 2, "{:?}", res.regressions);
        assert!(res.regressions.iter().all(|r| r.kind == "memory" && r.metric == "peak_rss_mb.rust_warm"));
        // identical values within each side are ties: the normal approximation decides
        assert_eq!(res.regressions[0].test, "Mann-Whitney U (normal approximation)");
        assert!(res.totals().contains(": 0 in time, 2 in memory;"), "{}", res.totals());
        let md = markdown(&res, "a.json", "b.json");
        assert!(md.contains("## Memory regressions (worst first)") && !md.contains("## Time regressions"), "{md}");
    }

    #[test]
    fn significance_rules() {
        // too few runs for p ≤ 0.01 (1/20): the ranges decide
        // (by more than the threshold: 1.3 > 1.2 × 1.05, but 1.25 < 1.2 × 1.05)
        let (sig, p, test) = significance(&[1.0, 1.1, 1.2], &[1.3, 1.4, 1.5], 0.01, 5.0);
        assert!(sig && test == "non-overlapping ranges" && (p.unwrap() - 0.05).abs() < 1e-12);
        assert!(!significance(&[1.0, 1.1, 1.2], &[1.25, 1.4, 1.5], 0.01, 5.0).0);
        assert!(!significance(&[1.0, 1.1, 1.35], &[1.3, 1.4, 1.5], 0.01, 0.0).0);
        // at 0.05 the exact test can decide 3 against 3, against the baseline + threshold
        let (sig, p, test) = significance(&[1.0, 1.1, 1.2], &[1.3, 1.4, 1.5], 0.05, 5.0);
        assert!(sig && test == "Mann-Whitney U (exact)" && p == Some(0.05));
        let (sig, p, _) = significance(&[1.0, 1.1, 1.2], &[1.25, 1.4, 1.5], 0.05, 5.0);
        assert!(!sig && p == Some(0.1), "{p:?}"); // 1.25 < 1.26: U = 8 of 9, P(U ≥ 8) = 2/20
        // with the threshold at 0 it is the plain test: scipy's mannwhitneyu([2.0..2.4], [1.0..1.4], "greater")
        let (sig, p, _) = significance(&[1.0, 1.1, 1.2, 1.3, 1.4], &[2.0, 2.1, 2.2, 2.3, 2.4], 0.01, 0.0);
        assert!(sig && (p.unwrap() - 0.003968253968253968).abs() < 1e-12);
        // no samples: the medians alone decide (reports without runs)
        assert_eq!(significance(&[], &[1.0], 0.01, 5.0), (true, None, "medians only (no per-run samples)".to_string()));
    }

    #[test]
    fn the_c_time_is_context_not_a_regression() {
        let base = noisy_report(5, 5, &same);
        let new = noisy_report(6, 5, &|m, s| if m == "c.wall_s" && s == 256 { 2.0 } else { 1.0 });
        let res = compare(&base, &new, 5.0, DEFAULT_ALPHA);
        assert!(res.regressions.is_empty() && res.noise.iter().all(|r| r.metric != "c.wall_s"));
        let c = res.rows.iter().find(|r| r.metric == "c.wall_s" && r.size == 256).unwrap();
        assert!(c.significant && !c.regression);
        assert!(res.notes.iter().any(|n| n.contains("C reference itself changed by +")), "{:?}", res.notes);
    }

    #[test]
    fn unmatched_sizes_and_settings_are_noted() {
        let base = sample_report();
        let mut new = base.clone();
        new.entries[1].size = 1024;
        new.config.threads = Some(1);
        new.machine.cpu_model = "Other CPU".into();
        let res = compare(&base, &new, 5.0, DEFAULT_ALPHA);
        assert_eq!(res.rows.len(), 13);
        assert!(res.unmatched.iter().any(|u| u == "bench 1024 only in the new report"));
        assert!(res.unmatched.iter().any(|u| u == "bench 512 only in the baseline"));
        assert!(res.notes.iter().any(|n| n.contains("different thread counts")));
        assert!(res.notes.iter().any(|n| n.contains("different machines")));
    }

    #[test]
    fn csv_output() {
        let base = noisy_report(9, 3, &same);
        let new = noisy_report(10, 3, &|m, s| if m == "rust_cold.render_s" && s == 256 { 2.0 } else { 1.0 });
        let res = compare(&base, &new, 5.0, DEFAULT_ALPHA);
        assert_eq!(res.regressions.len(), 2, "{:?}", res.regressions); // render and total
        let reg = regressions_csv(&res);
        let mut rd = csv::Reader::from_reader(reg.as_bytes());
        assert_eq!(rd.headers().unwrap().iter().collect::<Vec<_>>(), CSV_HEADER.to_vec());
        let rows: Vec<Comparison> = rd.deserialize().map(|r| r.unwrap()).collect();
        assert_eq!(rows, res.regressions);
        let render = &rows[0];
        assert_eq!((render.size, render.metric.as_str(), render.n_old, render.n_new), (256, "rust_cold.render_s", 3, 3));
        assert_eq!((render.test.as_str(), render.regression, render.noise), ("non-overlapping ranges", true, false));
        let line = reg.lines().nth(1).unwrap();
        assert!(line.starts_with("bench,256,rust_cold.render_s,time,") && line.ends_with(",0.05,non-overlapping ranges,true,true,false"), "{line}");
        let full = full_csv(&res);
        assert_eq!(full.lines().count(), 1 + res.rows.len());
        // no samples: an empty p_value cell
        assert_eq!(csv_rows(&[Comparison { p_value: None, ..rows[0].clone() }]).lines().nth(1).unwrap().matches(",,").count(), 1);
        // an empty list still has its header
        assert_eq!(regressions_csv(&CompareResult::default()).trim_end(), CSV_HEADER.join(","));
        let md = markdown(&res, "a.json", "b.json");
        assert!(md.contains("**2 regressions of 26 comparisons") && md.contains("## Time regressions (worst first)"), "{md}");
        assert!(md.contains("non-overlapping ranges") && md.contains("| 3+3 |"), "{md}");
    }
}
