//! Human-readable and spreadsheet outputs: `summary.md` (also printed to the terminal),
//! `benchmark_results.csv` (one row per size), `runs.csv` (every run) and `benchmark_results.json`.

use super::fmt::{fmt_mb, fmt_opt, fmt_rate, fmt_time, fmt_x, med};
use super::gate::gate_lines;
use super::schema::{Entry, Report};
use super::stats::Stats;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

pub const JSON_NAME: &str = "benchmark_results.json";
pub const SUMMARY_NAME: &str = "summary.md";
pub const CSV_NAME: &str = "benchmark_results.csv";
pub const RUNS_CSV_NAME: &str = "runs.csv";

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
        "- runs per size: {} warmup + {} measured; threads: {}; precision: {}; output files: {}",
        c.warmup,
        c.iterations,
        c.threads.map(|t| t.to_string()).unwrap_or_else(|| format!("all ({})", r.machine.logical_cores)),
        c.precision,
        if c.outputs == "replace" { "each run replaces the last run's" } else { "fresh (the last run's removed first, untimed)" }
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

/// One row of `benchmark_results.csv` (one per size); the column names are the field names.
/// `None` is an empty cell.
#[derive(Debug, Serialize)]
pub struct ResultRow<'a> {
    pub config: &'a str,
    pub size: usize,
    pub pixels: usize,
    pub kernel: &'a str,
    pub samples_per_pixel: u64,
    pub c_wall_min_s: Option<f64>,
    pub c_wall_median_s: Option<f64>,
    pub c_wall_max_s: Option<f64>,
    pub rust_process_wall_min_s: Option<f64>,
    pub rust_process_wall_median_s: Option<f64>,
    pub rust_process_wall_max_s: Option<f64>,
    pub rust_cold_setup_median_s: Option<f64>,
    pub rust_cold_render_median_s: Option<f64>,
    pub rust_cold_io_median_s: Option<f64>,
    pub rust_warm_setup_median_s: Option<f64>,
    pub rust_warm_render_min_s: Option<f64>,
    pub rust_warm_render_median_s: Option<f64>,
    pub rust_warm_render_max_s: Option<f64>,
    pub rust_warm_io_median_s: Option<f64>,
    pub rust_warm_total_median_s: Option<f64>,
    pub speedup_process: Option<f64>,
    pub speedup_warm: Option<f64>,
    pub peak_rss_mb_c: Option<f64>,
    pub peak_rss_mb_rust_process: Option<f64>,
    pub peak_rss_mb_rust_warm: Option<f64>,
    pub correlation: Option<f64>,
    pub sum_ratio: Option<f64>,
    pub rust_warm_pixels_per_s: Option<f64>,
    pub rust_warm_samples_per_s: Option<f64>,
    pub rust_process_pixels_per_s: Option<f64>,
    pub c_pixels_per_s: Option<f64>,
    /// How many warnings the size has (their text is in summary.md and the JSON).
    pub warnings: usize,
}

/// The header of `benchmark_results.csv` (written even without rows; a test checks it against
/// [`ResultRow`]'s field names).
pub const RESULTS_CSV_HEADER: [&str; 32] = [
    "config", "size", "pixels", "kernel", "samples_per_pixel", "c_wall_min_s", "c_wall_median_s", "c_wall_max_s",
    "rust_process_wall_min_s", "rust_process_wall_median_s", "rust_process_wall_max_s", "rust_cold_setup_median_s",
    "rust_cold_render_median_s", "rust_cold_io_median_s", "rust_warm_setup_median_s", "rust_warm_render_min_s",
    "rust_warm_render_median_s", "rust_warm_render_max_s", "rust_warm_io_median_s", "rust_warm_total_median_s",
    "speedup_process", "speedup_warm", "peak_rss_mb_c", "peak_rss_mb_rust_process", "peak_rss_mb_rust_warm",
    "correlation", "sum_ratio", "rust_warm_pixels_per_s", "rust_warm_samples_per_s", "rust_process_pixels_per_s",
    "c_pixels_per_s", "warnings",
];

impl<'a> ResultRow<'a> {
    pub fn of(e: &'a Entry) -> Self {
        let cw = e.c.as_ref().and_then(|c| c.wall_s.as_ref());
        let pw = e.rust_process.wall_s.as_ref();
        let wr = e.rust_warm.render_s.as_ref();
        ResultRow {
            config: &e.config,
            size: e.size,
            pixels: e.pixels,
            kernel: &e.kernel,
            samples_per_pixel: e.samples_per_pixel,
            c_wall_min_s: cw.map(|s| s.min),
            c_wall_median_s: cw.map(|s| s.median),
            c_wall_max_s: cw.map(|s| s.max),
            rust_process_wall_min_s: pw.map(|s| s.min),
            rust_process_wall_median_s: pw.map(|s| s.median),
            rust_process_wall_max_s: pw.map(|s| s.max),
            rust_cold_setup_median_s: med(&e.rust_cold.setup_s),
            rust_cold_render_median_s: med(&e.rust_cold.render_s),
            rust_cold_io_median_s: med(&e.rust_cold.io_s),
            rust_warm_setup_median_s: med(&e.rust_warm.setup_s),
            rust_warm_render_min_s: wr.map(|s| s.min),
            rust_warm_render_median_s: wr.map(|s| s.median),
            rust_warm_render_max_s: wr.map(|s| s.max),
            rust_warm_io_median_s: med(&e.rust_warm.io_s),
            rust_warm_total_median_s: med(&e.rust_warm.total_s),
            speedup_process: e.speedup_process,
            speedup_warm: e.speedup_warm,
            peak_rss_mb_c: e.peak_rss_mb.c,
            peak_rss_mb_rust_process: e.peak_rss_mb.rust_process,
            peak_rss_mb_rust_warm: e.peak_rss_mb.rust_warm,
            correlation: e.correlation,
            sum_ratio: e.sum_ratio,
            rust_warm_pixels_per_s: e.throughput.rust_warm_pixels_per_s,
            rust_warm_samples_per_s: e.throughput.rust_warm_samples_per_s,
            rust_process_pixels_per_s: e.throughput.rust_process_pixels_per_s,
            c_pixels_per_s: e.throughput.c_pixels_per_s,
            warnings: e.warnings.len(),
        }
    }
}

/// One row of `runs.csv`: one run of one contender (warmups included). Process runs have a wall
/// time, exit code and error; cold and warm runs their phase split.
#[derive(Debug, Serialize)]
pub struct RunRow<'a> {
    pub config: &'a str,
    pub size: usize,
    /// "c", "rust_process", "rust_cold" or "rust_warm".
    pub kind: &'static str,
    pub index: usize,
    pub warmup: bool,
    pub wall_s: Option<f64>,
    pub setup_s: Option<f64>,
    pub render_s: Option<f64>,
    pub io_s: Option<f64>,
    pub peak_rss_mb: Option<f64>,
    pub exit_code: Option<i32>,
    pub ok: bool,
    pub error: Option<&'a str>,
}

/// The header of `runs.csv` (checked against [`RunRow`] by a test).
pub const RUNS_CSV_HEADER: [&str; 13] =
    ["config", "size", "kind", "index", "warmup", "wall_s", "setup_s", "render_s", "io_s", "peak_rss_mb", "exit_code", "ok", "error"];

/// Every row of `runs.csv` for one size: C, our process, our cold and our warm runs.
pub fn run_rows(e: &Entry) -> Vec<RunRow<'_>> {
    let mut v = Vec::new();
    let process = |kind, r: &'_ super::measure::ProcessRun| RunRow {
        config: &e.config,
        size: e.size,
        kind,
        index: r.index,
        warmup: r.warmup,
        wall_s: Some(r.wall_s),
        setup_s: None,
        render_s: None,
        io_s: None,
        peak_rss_mb: r.peak_rss_mb,
        exit_code: r.exit_code,
        ok: r.ok,
        error: None,
    };
    if let Some(c) = &e.c {
        v.extend(c.runs.iter().map(|r| RunRow { error: r.error.as_deref(), ..process("c", r) }));
    }
    v.extend(e.rust_process.runs.iter().map(|r| process("rust_process", r)));
    for (kind, runs) in [("rust_cold", &e.rust_cold.runs), ("rust_warm", &e.rust_warm.runs)] {
        v.extend(runs.iter().map(|p| RunRow {
            config: &e.config,
            size: e.size,
            kind,
            index: p.index,
            warmup: p.warmup,
            wall_s: None,
            setup_s: Some(p.setup_s),
            render_s: Some(p.render_s),
            io_s: Some(p.io_s),
            peak_rss_mb: p.peak_rss_mb,
            exit_code: None,
            ok: true,
            error: None,
        }));
    }
    v
}

/// `header` then `rows`, as CSV (the `csv` crate quotes what needs quoting).
fn to_csv<T: Serialize>(header: &[&str], rows: impl IntoIterator<Item = T>) -> String {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
    w.write_record(header).expect("writing to memory");
    for r in rows {
        w.serialize(r).expect("a row of numbers and strings always serializes");
    }
    String::from_utf8(w.into_inner().expect("writing to memory")).expect("CSV of UTF-8 fields")
}

/// `benchmark_results.csv`: one row per size.
pub fn results_csv(r: &Report) -> String {
    to_csv(&RESULTS_CSV_HEADER, r.entries.iter().map(ResultRow::of))
}

/// `runs.csv`: every run, warmups included.
pub fn runs_csv(r: &Report) -> String {
    to_csv(&RUNS_CSV_HEADER, r.entries.iter().flat_map(run_rows))
}

/// Write the JSON, summary.md and the CSVs into `dir`, each under a temporary name renamed into
/// place (an interrupted run leaves no half-written report).
pub fn write_all(r: &Report, dir: &Path) -> nanobragg::Result<()> {
    use nanobragg::io::atomic::write_atomic;
    write_atomic(&dir.join(JSON_NAME), r.to_json().as_bytes())?;
    write_atomic(&dir.join(SUMMARY_NAME), summary_markdown(r).as_bytes())?;
    write_atomic(&dir.join(CSV_NAME), results_csv(r).as_bytes())?;
    write_atomic(&dir.join(RUNS_CSV_NAME), runs_csv(r).as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::sample_report;

    /// The header constants name exactly the row structs' fields, in order.
    #[test]
    fn csv_headers_match_the_rows() {
        fn header_of<T: Serialize>(row: &T) -> Vec<String> {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.serialize(row).unwrap();
            let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
            text.lines().next().unwrap().split(',').map(String::from).collect()
        }
        let r = sample_report();
        assert_eq!(header_of(&ResultRow::of(&r.entries[0])), RESULTS_CSV_HEADER);
        assert_eq!(header_of(&run_rows(&r.entries[0])[0]), RUNS_CSV_HEADER);
    }

    #[test]
    fn csv_fields_are_quoted_and_read_back() {
        let mut r = sample_report();
        r.entries[0].config = "odd, \"name\"".into();
        if let Some(c) = r.entries[0].c.as_mut() {
            c.runs[0].ok = false;
            c.runs[0].error = Some("exit code 3; stderr: a, \"b\"\nc".into());
        }
        let runs = runs_csv(&r);
        let mut rd = csv::Reader::from_reader(runs.as_bytes());
        let recs: Vec<csv::StringRecord> = rd.records().map(|x| x.unwrap()).collect();
        assert_eq!(rd.headers().unwrap(), RUNS_CSV_HEADER.as_slice());
        assert_eq!(&recs[0][0], "odd, \"name\"");
        assert_eq!(&recs[0][2], "c");
        assert_eq!(&recs[0][11], "false");
        assert_eq!(&recs[0][12], "exit code 3; stderr: a, \"b\"\nc");
        let results = results_csv(&r);
        let mut rd = csv::Reader::from_reader(results.as_bytes());
        assert_eq!(&rd.records().next().unwrap().unwrap()[0], "odd, \"name\"");
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
        assert_eq!(lines[0], RESULTS_CSV_HEADER.join(","));
        let cols = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == cols));
        assert!(lines[1].starts_with("bench,256,65536,avx2,1,2.0,2.1,2.2,"), "{}", lines[1]);
        let runs = runs_csv(&r);
        // per size: 3 C + 3 process + 2 cold + 2 warm
        assert_eq!(runs.lines().count(), 1 + 2 * 10);
        let cols = runs.lines().next().unwrap().split(',').count();
        assert!(runs.lines().all(|l| l.split(',').count() == cols), "{runs}");
    }
}
