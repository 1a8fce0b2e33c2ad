//! The benchmark harness behind the `bench-detailed` binary (issue 5).
//!
//! * [`plan`]: configurations (`bench`, `heavy` with its generated HKL file, `custom`), sizes, repetitions
//! * [`measure`]: child processes (wall time, own peak RSS via `wait4`), in-process peak RSS (`VmHWM`)
//! * [`stats`]: min / median / max, spread, hyperfine-style outliers
//! * [`runner`]: C, our process and our warm runs interleaved per size; correlation, sanity warnings
//! * [`gate`]: `--gate --min-speedup --min-correlation`
//! * [`schema`]: `benchmark_results.json` (`nanobragg-rs/bench-detailed/1`); [`machine`]: machine info
//! * [`report`]: summary.md, terminal table, CSVs (serde rows); [`compare`]: regressions between two reports
//! * [`fmt`]: number formatting shared by the runner, the reports and `compare`
//! * [`cli`]: the command line
//!
//! No timing is asserted anywhere in the tests: timings depend on the machine.

pub mod cli;
pub mod compare;
pub mod fmt;
pub mod gate;
pub mod machine;
pub mod measure;
pub mod plan;
pub mod report;
pub mod roofline;
pub mod runner;
pub mod schema;
pub mod significance;
pub mod stats;

pub use schema::{Report, SCHEMA};
