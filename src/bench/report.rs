//! Human-readable and spreadsheet outputs: `summary.md` (also printed to the terminal),
//! `benchmark_results.csv` (one row per size), `runs.csv` (every run) and `benchmark_results.json`.

use super::gate::gate_lines;
use super::runner::fmt_opt;
use super::schema::{Entry, Report};
use super::stats::Stats;
use std::fmt::Write as _;
use std::path::Path;

pub const JSON_NAME: &str = "benchmark_results.json";
pub const SUMMARY_NAME: &str = "summary.md";
pub const CSV_NAME: &str = "benchmark_results.csv";
pub const RUNS_CSV_NAME: &str = "runs.csv";

/// A duration for people: "1.234 s", "12.3 ms", "850 µs".
pub fn fmt_time(s: Option<f64>) -> String {
    match s {
        None => "—".into(),
        Some(s) if s >= 1.0 => format!("{s:.3} s"),
        Some(s) if s >= 1e-3 => format!("{:.1} ms", s * 1e3),
        Some(s) => format!("{:.0} µs", s * 1e6),
    }
}

fn fmt_x(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}×")).unwrap_or_else(|| "—".into())
}

fn fmt_mb(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "—".into())
}

fn fmt_rate(v: Option<f64>) -> String {
    v.map(|x| format!("{:.2}", x / 1e6)).unwrap_or_else(|| "—".into())
}

fn med(s: &Option<Stats>) -> Option<f64> {
    s.as_ref().map(|s| s.median)
}

/// One line per size for the progress output.
pub fn entry_one_line(e: &Entry) -> String {
    format!(
        "C {} | ours process {} | warm render {} | correlation {} | speedup {}",
        fmt_time(e.c.as_ref().and_then(|c| med(&c.wall_s))),
        fmt_time(med(&e.rust_process.wall_s)),
        fmt_time(med(&e.rust_warm.render_s)),
        fmt_opt(e.correlation, 6),
        fmt_x(e.speedup_process)
    )
}

/// The at-a-glance table (medians).
pub fn summary_table(r: &Report) -> String {
    let mut s = String::new();
    s.push_str("| size | kernel | C wall | ours process | ours cold setup / render / io | ours warm setup / render / io | speedup process | speedup warm | peak RSS MiB C / process / warm | correlation | sum ratio | Mpixel/s warm | Msample/s warm |\n");
    s.push_str("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for e in &r.entries {
        let phases = |p: &super::schema::PhaseMeasure| {
            format!("{} / {} / {}", fmt_time(med(&p.setup_s)), fmt_time(med(&p.render_s)), fmt_time(med(&p.io_s)))
        };
        let _ = writeln!(
            s,
            "| {}² | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} | {} | {} | {} | {} |",
            e.size,
            e.kernel,
            fmt_time(e.c.as_ref().and_then(|c| med(&c.wall_s))),
            fmt_time(med(&e.rust_process.wall_s)),
            phases(&e.rust_cold),
            phases(&e.rust_warm),
            fmt_x(e.speedup_process),
            fmt_x(e.speedup_warm),
            fmt_mb(e.peak_rss_mb.c),
            fmt_mb(e.peak_rss_mb.rust_process),
            fmt_mb(e.peak_rss_mb.rust_warm),
            e.correlation.map(|x| format!("{x:.6}")).unwrap_or_else(|| "—".into()),
            e.sum_ratio.map(|x| format!("{x:.6}")).unwrap_or_else(|| "—".into()),
            fmt_rate(e.throughput.rust_warm_pixels_per_s),
            fmt_rate(e.throughput.rust_warm_samples_per_s),
        );
    }
    s
}

/// min / median / max of every timing, per size.
pub fn detail_table(r: &Report) -> String {
    let mut s = String::new();
    s.push_str("| size | metric | n | min | median | max | max/min | outliers |\n|---:|---|---:|---:|---:|---:|---:|---:|\n");
    for e in &r.entries {
        let mut rows: Vec<(&str, &Option<Stats>)> = Vec::new();
        if let Some(c) = &e.c {
            rows.push(("C wall", &c.wall_s));
        }
        rows.extend([
            ("ours process wall", &e.rust_process.wall_s),
            ("ours cold setup", &e.rust_cold.setup_s),
            ("ours cold render", &e.rust_cold.render_s),
            ("ours cold io", &e.rust_cold.io_s),
            ("ours warm setup", &e.rust_warm.setup_s),
            ("ours warm render", &e.rust_warm.render_s),
            ("ours warm io", &e.rust_warm.io_s),
            ("ours warm total", &e.rust_warm.total_s),
        ]);
        for (name, st) in rows {
            match st {
                Some(st) => {
                    let _ = writeln!(
                        s,
                        "| {} | {name} | {} | {} | {} | {} | {}{} | {} |",
                        e.size,
                        st.n,
                        fmt_time(Some(st.min)),
                        fmt_time(Some(st.median)),
                        fmt_time(Some(st.max)),
                        st.spread.map(|x| format!("{x:.2}")).unwrap_or_else(|| "∞".into()),
                        if st.wide_spread && st.n > 1 { " ⚠" } else { "" },
                        st.outliers
                    );
                }
                None => {
                    let _ = writeln!(s, "| {} | {name} | 0 | — | — | — | — | — |", e.size);
                }
            }
        }
    }
    s
}

fn all_warnings(r: &Report) -> Vec<String> {
    let mut w: Vec<String> = r.warnings.clone();
    for e in &r.entries {
        w.extend(e.warnings.iter().map(|x| format!("size {}: {x}", e.size)));
    }
    w
}

/// The roofline lines: the machine's measured limits, then one line per size.
pub fn roofline_lines(r: &Report) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(l) = &r.limits {
        let peaks: Vec<String> = l
            .peaks
            .iter()
            .map(|p| format!("{} {:.1} (f64) / {:.1} (f32) GFLOP/s per core", p.level, p.f64_gflops_per_core, p.f32_gflops_per_core))
            .collect();
        v.push(format!(
            "machine limits (measured at start-up): {}; page-cache write {}",
            peaks.join(", "),
            l.write_mb_per_s.map(|w| format!("{w:.0} MB/s")).unwrap_or_else(|| "n/a".into())
        ));
    }
    for e in &r.entries {
        if let Some(rf) = &e.roofline {
            v.push(format!("size {} ({}): {}", e.size, e.kernel, super::roofline::one_line(rf)));
        }
    }
    v
}

/// `summary.md`.
pub fn summary_markdown(r: &Report) -> String {
    let mut s = String::new();
    let c = &r.config;
    let _ = writeln!(s, "# nanobragg-rs benchmark — `{}` configuration, {}\n", c.name, r.created_utc);
    let _ = writeln!(s, "- machine: {}", r.machine.one_line());
    let _ = writeln!(
        s,
        "- runs per size: {} warmup + {} measured; threads: {}; precision: {}",
        c.warmup,
        c.iterations,
        c.threads.map(|t| t.to_string()).unwrap_or_else(|| format!("all ({})", r.machine.logical_cores)),
        c.precision
    );
    let _ = writeln!(s, "- nanoBragg flags: `{} -detpixels SIZE`", c.args.join(" "));
    let _ = writeln!(s, "- C reference: {}\n", c.c_binary.as_deref().unwrap_or("**none — no C comparison was made**"));
    s.push_str(
        "Medians. *cold* = a fresh `nanobragg-rs simulate` process (its own phase split), *process* = the same runs' \
                whole-process wall time, *warm* = setup + render + output repeated inside one process. \
                speedup = C time / ours (> 1: we are faster).\n\n",
    );
    s.push_str(&summary_table(r));
    s.push('\n');
    for line in gate_lines(&r.gate) {
        let _ = writeln!(s, "{line}  ");
    }
    s.push('\n');
    let roof = roofline_lines(r);
    if !roof.is_empty() {
        s.push_str(
            "## How close to the limit (warm medians)\n\nns per sample per core = render time × threads / samples; the \
             floating-point work per sample is an estimate counted from the fast kernel (FMA = 2 flops); the write rate \
             is the output phase's bytes over its time (it also converts and sums, so a lower bound). \
             Below 10% or above 90% of a measured peak is flagged.\n\n",
        );
        for line in roof {
            let _ = writeln!(s, "- {line}");
        }
        s.push('\n');
    }
    if !r.notes.is_empty() {
        s.push_str("## Notes\n\n");
        for n in &r.notes {
            let _ = writeln!(s, "- {n}");
        }
        s.push('\n');
    }
    let w = all_warnings(r);
    s.push_str("## Warnings\n\n");
    if w.is_empty() {
        s.push_str("None.\n");
    }
    for x in &w {
        let _ = writeln!(s, "- ⚠ {x}");
    }
    s.push_str("\n## Every timing (measured runs; warmups excluded)\n\n");
    s.push_str(&detail_table(r));
    s
}

/// What the terminal shows at the end of a run.
pub fn terminal_summary(r: &Report, out_dir: &Path) -> String {
    let mut s = String::new();
    s.push_str(&summary_table(r));
    s.push('\n');
    for line in gate_lines(&r.gate) {
        let _ = writeln!(s, "{line}");
    }
    for line in roofline_lines(r) {
        let _ = writeln!(s, "{line}");
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    for w in all_warnings(r) {
        let _ = writeln!(s, "warning: {w}");
    }
    let _ = writeln!(s, "reports: {}/{{{SUMMARY_NAME},{JSON_NAME},{CSV_NAME},{RUNS_CSV_NAME}}}", out_dir.display());
    s
}

/// Quote a CSV field when needed.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

/// One row per size.
pub fn results_csv(r: &Report) -> String {
    let mut s = String::from(
        "config,size,pixels,kernel,samples_per_pixel,c_wall_min_s,c_wall_median_s,c_wall_max_s,rust_process_wall_min_s,rust_process_wall_median_s,\
rust_process_wall_max_s,rust_cold_setup_median_s,rust_cold_render_median_s,rust_cold_io_median_s,rust_warm_setup_median_s,\
rust_warm_render_min_s,rust_warm_render_median_s,rust_warm_render_max_s,rust_warm_io_median_s,rust_warm_total_median_s,\
speedup_process,speedup_warm,peak_rss_mb_c,peak_rss_mb_rust_process,peak_rss_mb_rust_warm,correlation,sum_ratio,\
rust_warm_pixels_per_s,rust_warm_samples_per_s,rust_process_pixels_per_s,c_pixels_per_s,warnings\n",
    );
    for e in &r.entries {
        let cw = e.c.as_ref().and_then(|c| c.wall_s.as_ref());
        let pw = e.rust_process.wall_s.as_ref();
        let wr = e.rust_warm.render_s.as_ref();
        let cells = [
            csv_field(&e.config),
            e.size.to_string(),
            e.pixels.to_string(),
            csv_field(&e.kernel),
            e.samples_per_pixel.to_string(),
            num(cw.map(|s| s.min)),
            num(cw.map(|s| s.median)),
            num(cw.map(|s| s.max)),
            num(pw.map(|s| s.min)),
            num(pw.map(|s| s.median)),
            num(pw.map(|s| s.max)),
            num(med(&e.rust_cold.setup_s)),
            num(med(&e.rust_cold.render_s)),
            num(med(&e.rust_cold.io_s)),
            num(med(&e.rust_warm.setup_s)),
            num(wr.map(|s| s.min)),
            num(wr.map(|s| s.median)),
            num(wr.map(|s| s.max)),
            num(med(&e.rust_warm.io_s)),
            num(med(&e.rust_warm.total_s)),
            num(e.speedup_process),
            num(e.speedup_warm),
            num(e.peak_rss_mb.c),
            num(e.peak_rss_mb.rust_process),
            num(e.peak_rss_mb.rust_warm),
            num(e.correlation),
            num(e.sum_ratio),
            num(e.throughput.rust_warm_pixels_per_s),
            num(e.throughput.rust_warm_samples_per_s),
            num(e.throughput.rust_process_pixels_per_s),
            num(e.throughput.c_pixels_per_s),
            e.warnings.len().to_string(),
        ];
        s.push_str(&cells.join(","));
        s.push('\n');
    }
    s
}

/// Every run, warmups included.
pub fn runs_csv(r: &Report) -> String {
    let mut s = String::from("config,size,kind,index,warmup,wall_s,setup_s,render_s,io_s,peak_rss_mb,exit_code,ok,error\n");
    for e in &r.entries {
        let mut push = |kind: &str, index: usize, warmup: bool, cells: [String; 8]| {
            let _ = writeln!(s, "{},{},{kind},{index},{warmup},{}", csv_field(&e.config), e.size, cells.join(","));
        };
        if let Some(c) = &e.c {
            for r in &c.runs {
                push(
                    "c",
                    r.index,
                    r.warmup,
                    [
                        r.wall_s.to_string(),
                        String::new(),
                        String::new(),
                        String::new(),
                        num(r.peak_rss_mb),
                        r.exit_code.map(|c| c.to_string()).unwrap_or_default(),
                        r.ok.to_string(),
                        csv_field(r.error.as_deref().unwrap_or("")),
                    ],
                );
            }
        }
        for r in &e.rust_process.runs {
            push(
                "rust_process",
                r.index,
                r.warmup,
                [
                    r.wall_s.to_string(),
                    String::new(),
                    String::new(),
                    String::new(),
                    num(r.peak_rss_mb),
                    r.exit_code.map(|c| c.to_string()).unwrap_or_default(),
                    r.ok.to_string(),
                    String::new(),
                ],
            );
        }
        for (kind, runs) in [("rust_cold", &e.rust_cold.runs), ("rust_warm", &e.rust_warm.runs)] {
            for p in runs {
                push(
                    kind,
                    p.index,
                    p.warmup,
                    [
                        String::new(),
                        p.setup_s.to_string(),
                        p.render_s.to_string(),
                        p.io_s.to_string(),
                        num(p.peak_rss_mb),
                        String::new(),
                        "true".into(),
                        String::new(),
                    ],
                );
            }
        }
    }
    s
}

/// Write the JSON, summary.md and the CSVs into `dir`.
pub fn write_all(r: &Report, dir: &Path) -> std::io::Result<()> {
    std::fs::write(dir.join(JSON_NAME), r.to_json())?;
    std::fs::write(dir.join(SUMMARY_NAME), summary_markdown(r))?;
    std::fs::write(dir.join(CSV_NAME), results_csv(r))?;
    std::fs::write(dir.join(RUNS_CSV_NAME), runs_csv(r))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::schema::sample_report;

    #[test]
    fn times_for_people() {
        assert_eq!(fmt_time(Some(1.23456)), "1.235 s");
        assert_eq!(fmt_time(Some(0.01234)), "12.3 ms");
        assert_eq!(fmt_time(Some(0.000_85)), "850 µs");
        assert_eq!(fmt_time(None), "—");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }

    #[test]
    fn summary_and_csvs() {
        let r = sample_report();
        let md = summary_markdown(&r);
        assert!(md.contains("| 256² |") && md.contains("| 512² |"));
        assert!(md.contains("0.999999"));
        assert!(md.contains("Gate: not requested"));
        let csv = results_csv(&r);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        let cols = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == cols));
        assert!(lines[1].starts_with("bench,256,65536,avx2,1,2,2.1,2.2,"), "{}", lines[1]);
        let runs = runs_csv(&r);
        // per size: 3 C + 3 process + 2 cold + 2 warm
        assert_eq!(runs.lines().count(), 1 + 2 * 10);
        let cols = runs.lines().next().unwrap().split(',').count();
        assert!(runs.lines().all(|l| l.split(',').count() == cols), "{runs}");
    }
}
