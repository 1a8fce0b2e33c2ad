//! What to benchmark: the named configurations (`bench`, `heavy`, `custom`), sizes, repetitions,
//! threads and precision, where the C reference is, and where reports go.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The benchmark crystal (README "Quick start").
pub const BENCH_ARGS: &str = "-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 -distance 100 -pixel 0.1";

/// The heavy configuration: triclinic cell with misset, an HKL file, mosaic domains, phi steps,
/// divergence, dispersion and oversampling. `-hkl FILE` is added by [`Plan::base_args`].
pub const HEAVY_ARGS: &str = "-cell 70 80 90 85 95 105 -misset 10 20 30 -lambda 1 -distance 100 -pixel 0.1 \
    -N 10 -mosaic 0.5 -mosaic_dom 5 -phisteps 2 -osc 0.1 -divergence 0.2 -divsteps 3 -dispersion 0.1 -dispsteps 2 -oversample 2";

/// Name of the synthetic HKL file the heavy configuration generates in the run's output directory.
pub const HEAVY_HKL_NAME: &str = "heavy_P1.hkl";

/// Miller index range of the synthetic HKL file (h, k, l each in -R..=R).
pub const HEAVY_HKL_RANGE: i32 = 15;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigKind {
    Bench,
    Heavy,
    Custom,
}

impl ConfigKind {
    pub fn name(self) -> &'static str {
        match self {
            ConfigKind::Bench => "bench",
            ConfigKind::Heavy => "heavy",
            ConfigKind::Custom => "custom",
        }
    }
    pub fn parse(s: &str) -> Option<ConfigKind> {
        match s {
            "bench" => Some(ConfigKind::Bench),
            "heavy" => Some(ConfigKind::Heavy),
            "custom" => Some(ConfigKind::Custom),
            _ => None,
        }
    }
}

/// Everything a benchmark run needs to know.
#[derive(Clone, Debug)]
pub struct Plan {
    pub kind: ConfigKind,
    /// Extra nanoBragg flags (`--args`, custom configuration; appended to the others too).
    pub custom_args: Vec<String>,
    /// Detector sizes (pixels per side, `-detpixels N`).
    pub sizes: Vec<usize>,
    pub warmup: usize,
    pub iterations: usize,
    /// Worker threads for our runs (and OMP_NUM_THREADS for the C's); None: all cores.
    pub threads: Option<usize>,
    pub single_precision: bool,
    /// The C reference binary, if any.
    pub c_binary: Option<PathBuf>,
    /// Our `nanobragg-rs` binary.
    pub rust_binary: PathBuf,
    /// Report directory.
    pub out_dir: PathBuf,
    /// Keep the scratch directory with the images of the last runs.
    pub keep_work: bool,
    /// Leave each run's output files for the next run of the same program to replace (the usual
    /// case of rerunning into one folder); otherwise they are removed, untimed, before each run.
    pub replace_outputs: bool,
    /// Show a progress bar and the table on the terminal.
    pub interactive: bool,
}

impl Plan {
    /// The flags shared by every run of one size, before the output flags: the configuration's crystal,
    /// `--args`, then `-detpixels N`. `hkl` is the heavy configuration's HKL file.
    pub fn base_args(&self, size: usize, hkl: Option<&Path>) -> Vec<String> {
        let mut v: Vec<String> = match self.kind {
            ConfigKind::Bench => split_args(BENCH_ARGS),
            ConfigKind::Heavy => {
                let mut v = split_args(HEAVY_ARGS);
                if let Some(h) = hkl {
                    v.push("-hkl".into());
                    v.push(h.display().to_string());
                }
                v
            }
            ConfigKind::Custom => Vec::new(),
        };
        v.extend(self.custom_args.iter().cloned());
        v.push("-detpixels".into());
        v.push(size.to_string());
        v
    }

    /// The configuration's flags without the size, as recorded in the report (the heavy HKL file is
    /// named by its file name, so reports from different directories compare equal).
    pub fn recorded_args(&self) -> Vec<String> {
        let mut v = self.base_args(0, Some(Path::new(HEAVY_HKL_NAME)));
        v.truncate(v.len() - 2);
        v
    }
}

/// The output flags every C run gets (in its own scratch directory).
pub fn c_output_args() -> Vec<String> {
    split_args("-floatfile c.bin -intfile c.img -nonoise -nopgm -noprogress")
}

/// The output flags of our process runs (`--threads`/`--precision` are added by the runner).
pub fn rust_output_args() -> Vec<String> {
    split_args("-floatfile rust.bin -intfile rust.img -nonoise -nopgm -noprogress")
}

/// The output flags of the in-process (warm) runs.
pub fn warm_output_args() -> Vec<String> {
    split_args("-floatfile warm.bin -intfile warm.img -nonoise -nopgm -noprogress")
}

/// Whitespace-separated words (no quoting: nanoBragg flags never need it).
pub fn split_args(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// Parse `--sizes 512,1024`.
pub fn parse_sizes(s: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        match w.parse::<usize>() {
            Ok(n) if n > 0 => v.push(n),
            _ => return Err(format!("'{w}' is not a detector size (a positive number of pixels per side)")),
        }
    }
    if v.is_empty() {
        return Err("no sizes given".into());
    }
    Ok(v)
}

/// Write the synthetic P1 HKL file of the heavy configuration: every h, k, l in
/// -[`HEAVY_HKL_RANGE`]..=[`HEAVY_HKL_RANGE`] with a deterministic amplitude (a hash of the indices,
/// 10..1010, damped with resolution), so every run and machine simulates the same crystal.
pub fn write_heavy_hkl(path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let r = HEAVY_HKL_RANGE;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    for h in -r..=r {
        for k in -r..=r {
            for l in -r..=r {
                writeln!(w, "{h} {k} {l} {:.2}", heavy_amplitude(h, k, l))?;
            }
        }
    }
    w.flush()
}

/// The amplitude of reflection (h, k, l) in the synthetic HKL file.
pub fn heavy_amplitude(h: i32, k: i32, l: i32) -> f64 {
    // splitmix64 of the packed indices: stable across platforms and Rust versions
    let mut x = ((h as i64 + 512) as u64) << 40 | ((k as i64 + 512) as u64) << 20 | (l as i64 + 512) as u64;
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    let u = (x >> 11) as f64 / (1u64 << 53) as f64;
    let s2 = (h * h + k * k + l * l) as f64 / (3.0 * (HEAVY_HKL_RANGE * HEAVY_HKL_RANGE) as f64);
    10.0 + 1000.0 * u * (-1.5 * s2).exp()
}

/// A UTC timestamp like `20261122T031500Z` for now.
pub fn utc_timestamp() -> String {
    format_datetime(time::OffsetDateTime::now_utc())
}

const STAMP: &[time::format_description::FormatItem<'static>] =
    time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");

fn format_datetime(t: time::OffsetDateTime) -> String {
    t.format(STAMP).unwrap_or_else(|_| "unknown-time".into())
}

/// Format Unix seconds as `YYYYMMDDTHHMMSSZ` (UTC), with the `time` crate.
pub fn format_utc(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs).map(format_datetime).unwrap_or_else(|_| "unknown-time".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(kind: ConfigKind) -> Plan {
        Plan {
            kind,
            custom_args: vec![],
            sizes: vec![64],
            warmup: 1,
            iterations: 5,
            threads: None,
            single_precision: false,
            c_binary: None,
            rust_binary: PathBuf::from("nanobragg-rs"),
            out_dir: PathBuf::from("out"),
            keep_work: false,
            replace_outputs: false,
            interactive: false,
        }
    }

    #[test]
    fn timestamps() {
        assert_eq!(format_utc(0), "19700101T000000Z");
        assert_eq!(format_utc(951_782_400), "20000229T000000Z");
        assert_eq!(format_utc(1_795_317_300), "20261122T031500Z");
        assert_eq!(utc_timestamp().len(), 16);
    }

    #[test]
    fn args_per_config() {
        let b = plan(ConfigKind::Bench).base_args(512, None);
        assert_eq!(b.join(" "), format!("{BENCH_ARGS} -detpixels 512"));
        let h = plan(ConfigKind::Heavy).base_args(256, Some(Path::new("/x/h.hkl")));
        assert!(h.join(" ").ends_with("-oversample 2 -hkl /x/h.hkl -detpixels 256"));
        let mut c = plan(ConfigKind::Custom);
        c.custom_args = split_args("-cell 50 50 50 90 90 90 -default_F 1");
        assert_eq!(c.base_args(8, None).join(" "), "-cell 50 50 50 90 90 90 -default_F 1 -detpixels 8");
        assert_eq!(c.recorded_args().join(" "), "-cell 50 50 50 90 90 90 -default_F 1");
        assert!(plan(ConfigKind::Heavy).recorded_args().join(" ").ends_with("-hkl heavy_P1.hkl"));
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_sizes("512, 1024,2048").unwrap(), vec![512, 1024, 2048]);
        assert!(parse_sizes("0").is_err());
        assert!(parse_sizes("abc").is_err());
        assert!(parse_sizes("").is_err());
    }

    #[test]
    fn heavy_hkl_is_deterministic_p1() {
        let d = std::env::temp_dir().join(format!("nb-hkl-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(HEAVY_HKL_NAME);
        write_heavy_hkl(&p).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let n = (2 * HEAVY_HKL_RANGE + 1) as usize;
        assert_eq!(text.lines().count(), n * n * n);
        assert_eq!(text.lines().next().unwrap().split_whitespace().count(), 4);
        assert_eq!(heavy_amplitude(1, 2, 3), heavy_amplitude(1, 2, 3));
        assert_ne!(heavy_amplitude(1, 2, 3), heavy_amplitude(3, 2, 1));
        for (h, k, l) in [(0, 0, 0), (15, 15, 15), (-15, 3, 7)] {
            let f = heavy_amplitude(h, k, l);
            assert!((10.0..=1010.0).contains(&f), "{f}");
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
