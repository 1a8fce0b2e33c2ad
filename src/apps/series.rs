//! `nanobragg-rs series`: a whole dataset from one command — a rotation sweep (`--frames N`), a set
//! of stills at uniformly random orientations (`--stills N --orientation random`) or of stills of one
//! crystal at the flags' orientation (`--orientation fixed`), on one machine or split into shards over
//! Slurm job arrays, Slurm tasks or MPI ranks.
//!
//! The structure factors are read once. Each frame is then the experiment `simulate` would build with
//! that frame's values (phi start, or misset angles, and seeds) — so frame k is byte-identical to the
//! single-image run with those values, whatever the shard or thread count. Frame k+1 renders while
//! frame k's outputs (int, PGM, noise, PNG, sha256) are made and written on another thread.
//!
//! Per-frame values, frame k counted from 1 (user-facing seed values, as typed after `-seed` etc.):
//! * rotation: phi start = phi0 + (k−1)·osc degrees (computed in double precision, printed with the
//!   shortest decimal that reads back to the same double), range = osc;
//! * noise seed = S + k − 1, where S is `-seed` (default 1 in a series: every shard must agree);
//! * stills: misset angles from a uniformly random rotation drawn from (M, k), M = `-misset_seed`
//!   (default 1), see [`still_misset_deg`]; mosaic seed = `-mosaic_seed` + k − 1 (each still is a new
//!   crystal); in a rotation series and in fixed stills (the same crystal exposed again, each still
//!   its own noise) the mosaic seed and misset stay the same for every frame.
//!
//! Each shard writes a manifest `NAME.shard-I-of-N.json` (parameters, frames, seeds, files and their
//! sha256); `--resume` skips frames whose files are all present with the manifest's sha256, and
//! `--verify` checks that the manifests of all shards together cover the dataset with matching files.

use crate::run::config::Config;
use crate::experiment::params::Misset;
use crate::experiment::Experiment;
use crate::run::config::resolve_out;
use crate::run::setup::write_setup_outputs;
use crate::experiment::inputs::Inputs;
use crate::base::log::Log;
use crate::base::c::rng::c_negated_seed;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Degrees per radian as the flag table converts (`value/RTD`).
use crate::base::consts::RTD;

const MANIFEST_FORMAT: &str = "nanobragg-rs series manifest v1";

/// Rotation sweep or stills.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Rotation,
    /// Stills at random orientations (`--orientation random`).
    Stills,
    /// Stills at the flags' orientation (`--orientation fixed`): one crystal exposed again and again.
    #[serde(rename = "fixed-stills")]
    FixedStills,
}

/// The series-only options, split from the `simulate` flags.
#[derive(Clone, Debug, Default)]
pub struct SeriesArgs {
    pub frames: Option<usize>,
    pub stills: Option<usize>,
    pub orientation: Option<String>,
    pub shard: Option<String>,
    pub resume: bool,
    pub verify: bool,
    pub only: Option<(usize, usize)>,
    pub name: Option<String>,
    /// `--outputs float,int,...`: write only these (see [`OUTPUT_KINDS`]); `None`: what `simulate` writes.
    pub outputs: Option<Vec<String>>,
    /// `--max-output SIZE` (bytes): refuse a run whose files would take more.
    pub max_output: Option<u64>,
    /// Every other word: `simulate` flags.
    pub simulate: Vec<String>,
    /// Those flags, parsed (by the command line's parser).
    pub config: Config,
}

/// The value typed after the last occurrence of `flag` (degrees for -phi/-osc).
fn typed_number(args: &[String], flag: &str) -> Option<f64> {
    let pos = args.iter().rposition(|a| a == flag)?;
    args.get(pos + 1)?.parse::<f64>().ok()
}

// ------------------------------------------------------------------------------------------ shards

/// Which share of the frames this process renders, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
    pub reason: String,
    /// A warning for the user about the launch (Slurm tasks outside any srun job step): `run` says
    /// it, so that resolving the shard stays pure.
    pub warning: Option<String>,
}

fn env_usize(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Result<Option<usize>> {
    match env(name) {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map(Some)
            .map_err(|e| {
                let why = match e.kind() {
                    std::num::IntErrorKind::PosOverflow => "is too large",
                    _ => "is not a whole number",
                };
                Error::setup(format!("environment variable {name}={v} {why}"))
            }),
    }
}

/// Parse `--shard I/N`.
pub fn parse_shard(w: &str) -> Result<Shard> {
    let bad = || Error::flag("--shard", format!("expects I/N with 0 <= I < N (got '{w}')"));
    let (i, n) = w.split_once('/').ok_or_else(bad)?;
    let (i, n) = (i.parse::<usize>().map_err(|_| bad())?, n.parse::<usize>().map_err(|_| bad())?);
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok(Shard { index: i, count: n, reason: format!("--shard {w}"), warning: None })
}

/// The shard from `--shard`, else from the launcher's environment: a Slurm job array
/// (`SLURM_ARRAY_TASK_ID` − `SLURM_ARRAY_TASK_MIN` of `SLURM_ARRAY_TASK_COUNT`) as the outer level,
/// and one rank level inside it, the first present of Open MPI (`OMPI_COMM_WORLD_RANK/SIZE`),
/// MPICH/Hydra (`PMI_RANK/SIZE`) and Slurm tasks (`SLURM_PROCID/SLURM_NTASKS`). MPI comes before the
/// Slurm task variables because `mpirun` inside a Slurm allocation inherits the batch step's
/// `SLURM_PROCID`. Shard = array index × ranks + rank. Pure: a launch warning is
/// returned in [`Shard::warning`], not said.
pub fn resolve_shard(explicit: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Result<Shard> {
    if let Some(w) = explicit {
        return parse_shard(w);
    }
    let mut index = 0;
    let mut count = 1;
    let mut why = Vec::new();
    let mut warning = None;
    if let (Some(id), Some(n)) = (env_usize(env, "SLURM_ARRAY_TASK_ID")?, env_usize(env, "SLURM_ARRAY_TASK_COUNT")?) {
        let min = env_usize(env, "SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        if id < min || id - min >= n || n == 0 {
            return Err(Error::setup(format!(
                "SLURM_ARRAY_TASK_ID={id} is outside SLURM_ARRAY_TASK_MIN={min} .. +SLURM_ARRAY_TASK_COUNT={n} (use a contiguous --array=0-{} or give --shard I/N)",
                n.saturating_sub(1)
            )));
        }
        index = id - min;
        count = n;
        why.push(format!("SLURM_ARRAY_TASK_ID={id} SLURM_ARRAY_TASK_MIN={min} SLURM_ARRAY_TASK_COUNT={n}"));
    }
    for (rank_var, size_var) in [("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")] {
        if let (Some(r), Some(n)) = (env_usize(env, rank_var)?, env_usize(env, size_var)?) {
            if n == 0 || r >= n {
                return Err(Error::setup(format!("{rank_var}={r} is not below {size_var}={n}")));
            }
            let (Some(i), Some(c)) = (index.checked_mul(n).and_then(|i| i.checked_add(r)), count.checked_mul(n)) else {
                return Err(Error::flag(
                    size_var,
                    format!("{size_var}={n} times SLURM_ARRAY_TASK_COUNT={count} shards is more than this program can count (at most {})", usize::MAX),
                ));
            };
            (index, count) = (i, c);
            let mut note = format!("{rank_var}={r} {size_var}={n}");
            if rank_var == "SLURM_PROCID" && n > 1 && outside_job_step(env) {
                note.push_str(", outside any srun job step");
                warning = Some(format!(
                    "nanobragg-rs: warning: series: SLURM_NTASKS={n} but no srun job step (SLURM_STEP_ID): run from an sbatch script's own shell, this renders only shard {r} of {n}; start series with srun (one task per shard), or give --shard 0/1 for the whole dataset"
                ));
            }
            why.push(note);
            break;
        }
    }
    let reason = if why.is_empty() { "no --shard and no Slurm or MPI variables: the whole dataset".to_string() } else { why.join(", ") };
    Ok(Shard { index, count, reason, warning })
}

/// Whether the Slurm task variables come from no `srun` job step: sbatch exports `SLURM_PROCID=0` and
/// `SLURM_NTASKS` to the batch script's own shell, where `SLURM_STEP_ID` is absent or one of Slurm's
/// special step ids (the batch and extern steps, near 2^32); `srun` sets the step's number.
fn outside_job_step(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env("SLURM_STEP_ID").and_then(|v| v.trim().parse::<u64>().ok()).is_none_or(|id| id >= 0xffff_fff0)
}

/// Frames 1..=total of shard `index` of `count`: one contiguous block each, sizes differing by at most 1.
pub fn shard_frames(total: usize, shard: &Shard) -> std::ops::RangeInclusive<usize> {
    // in 128 bits: index × total cannot overflow, and a block never reaches past `total`
    let at = |i: usize| (i as u128 * total as u128 / shard.count.max(1) as u128) as usize;
    let (lo, hi) = (at(shard.index), at(shard.index.saturating_add(1).min(shard.count)));
    (lo + 1)..=hi
}

// ------------------------------------------------------------------------------------------ file names

/// Replace every run of `#` in `name` by `k`, zero-padded to the run's length.
pub fn frame_name(name: &str, k: usize) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut run = 0;
    for ch in name.chars() {
        if ch == '#' {
            run += 1;
            continue;
        }
        if run > 0 {
            out.push_str(&format!("{k:0run$}"));
            run = 0;
        }
        out.push(ch);
    }
    if run > 0 {
        out.push_str(&format!("{k:0run$}"));
    }
    out
}

/// A name without `#` gets `_` and a run of `#` (at least 5, enough for `total`) before its extension,
/// so no two frames share a file.
pub fn template_name(p: &Path, total: usize) -> PathBuf {
    let s = p.to_string_lossy();
    let file = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    if file.contains('#') {
        return p.to_path_buf();
    }
    let width = total.to_string().len().max(5);
    let hashes = "#".repeat(width);
    let new_file = match file.rfind('.') {
        Some(dot) if dot > 0 => format!("{}_{}{}", &file[..dot], hashes, &file[dot..]),
        _ => format!("{file}_{hashes}"),
    };
    let _ = s;
    p.with_file_name(new_file)
}

// ------------------------------------------------------------------------------------------ per-frame values

/// splitmix64 (Steele, Lea & Flood 2014): the mixing step used to draw still orientations.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform deviate j (0..3) in [0, 1) of still k with misset seed m: 53 bits of
/// splitmix64(splitmix64(splitmix64(m) ^ k) ^ j).
fn still_uniform(m: i64, k: u64, j: u64) -> f64 {
    let h = splitmix64(splitmix64(splitmix64(m as u64) ^ k) ^ j);
    (h >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// A uniformly random rotation (Haar measure) for still k: Shoemake's unit quaternion from three
/// uniform deviates u1, u2, u3, as a row-major matrix.
pub fn still_umat(m: i64, k: usize) -> [f64; 9] {
    let (u1, u2, u3) = (still_uniform(m, k as u64, 0), still_uniform(m, k as u64, 1), still_uniform(m, k as u64, 2));
    let tau = 2.0 * std::f64::consts::PI;
    let (a, b) = ((1.0 - u1).sqrt(), u1.sqrt());
    let (x, y, z, w) = (a * (tau * u2).sin(), a * (tau * u2).cos(), b * (tau * u3).sin(), b * (tau * u3).cos());
    [
        1.0 - 2.0 * (y * y + z * z),
        2.0 * (x * y - z * w),
        2.0 * (x * z + y * w),
        2.0 * (x * y + z * w),
        1.0 - 2.0 * (x * x + z * z),
        2.0 * (y * z - x * w),
        2.0 * (x * z - y * w),
        2.0 * (y * z + x * w),
        1.0 - 2.0 * (x * x + y * y),
    ]
}

/// The misset angles (degrees, as `-misset X Y Z` takes them) of still k: [`still_umat`] converted by
/// the C's `umat2misset` (nanoBragg.c, used there for `-misset random`).
pub fn still_misset_deg(m: i64, k: usize) -> [f64; 3] {
    let r = crate::base::c::rng::umat2misset(&still_umat(m, k));
    [r[0] * RTD, r[1] * RTD, r[2] * RTD]
}

/// One output file of a frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub role: String,
    /// As named (relative names are relative to `--out-dir`).
    pub path: PathBuf,
    pub bytes: u64,
    pub sha256: String,
}

/// One frame: the values that make it, and its files once written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameRecord {
    pub frame: usize,
    /// Rotation: `-phi` of the equivalent single-image run (degrees).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub phi_deg: Option<f64>,
    /// Rotation: `-osc` (degrees).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub osc_deg: Option<f64>,
    /// Stills: `-misset X Y Z` of the equivalent single-image run (degrees).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub misset_deg: Option<[f64; 3]>,
    /// `-seed` of the equivalent single-image run (noise).
    pub seed: i64,
    /// `-mosaic_seed` of the equivalent single-image run.
    pub mosaic_seed: i64,
    /// The equivalent `simulate` flags (added to the series' own flags).
    pub simulate_flags: Vec<String>,
    #[serde(default)]
    pub files: Vec<FileRecord>,
}

/// A file that holds several frames (the shard's NeXus file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepFile {
    pub role: String,
    /// As named (relative names are relative to `--out-dir`).
    pub path: PathBuf,
    /// Frames first..=last of the dataset, in order, as frames 0.. of the file.
    pub first_frame: usize,
    pub last_frame: usize,
    pub bytes: u64,
    pub sha256: String,
}

/// The manifest of one shard.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub program: String,
    pub mode: Mode,
    pub total_frames: usize,
    pub shard_index: usize,
    pub shard_count: usize,
    pub shard_reason: String,
    /// The `simulate` flags of the series as given (frame values are added per frame).
    pub simulate_args: Vec<String>,
    /// sha256 of mode, total frames and the result-changing flags: equal for every shard of one dataset.
    pub params_sha256: String,
    pub seed: i64,
    pub mosaic_seed: i64,
    pub misset_seed: i64,
    /// The input files read and their contents (in the parameter hash).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputRecord>,
    /// Frames of this shard (`--only` may narrow them).
    pub frames_planned: Vec<usize>,
    pub frames: Vec<FrameRecord>,
    /// Files holding every frame of the shard (`-nexusfile`), written once all frames are done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweep_files: Vec<SweepFile>,
}

/// An input file as a manifest records it (`inputs`): a resumed run, or a shard, that reads other
/// contents under the same names would make another dataset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRecord {
    pub flag: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub sha256: String,
}

/// The run's input files ([`crate::run::outputs::input_files`]) with their sizes and sha256.
fn input_records(cfg: &Config) -> Result<Vec<InputRecord>> {
    crate::run::outputs::input_files(cfg)
        .into_iter()
        .map(|(flag, path)| {
            let (sha256, bytes) = file_sha256(&path).map_err(|e| Error::file(&path, format!("{flag}: cannot read: {e}")))?;
            Ok(InputRecord { flag: flag.to_string(), path, bytes, sha256 })
        })
        .collect()
}

/// Flags that change no pixel and no file: left out of the parameter hash. `--out-dir` names where
/// the dataset is, not what it holds (its files are recorded relative to it): a dataset moved, or
/// the folder spelled another way, resumes and verifies.
fn result_neutral(flag: &str) -> Option<usize> {
    match flag {
        "--threads" | "--out-dir" => Some(1),
        f if f.starts_with("--threads=") || f.starts_with("--out-dir=") => Some(0),
        _ => legacy_neutral(flag),
    }
}

/// The flags the parameter hash left out before inputs were recorded (`--out-dir` counted then).
fn legacy_neutral(flag: &str) -> Option<usize> {
    match flag {
        "--threads" => Some(1),
        "--quiet" | "-quiet" | "-progress" | "-noprogress" => Some(0),
        _ => None,
    }
}

/// The flags that change the result: `args` without the [`result_neutral`] ones (`neutral` decides).
fn result_args(args: &[String], neutral: impl Fn(&str) -> Option<usize>) -> Vec<String> {
    let mut kept = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if let Some(n) = neutral(&args[i]) {
            i += 1 + n;
            continue;
        }
        kept.push(args[i].clone());
        i += 1;
    }
    kept
}

/// sha256 of what makes the dataset: mode, frames, the result-changing flags and the contents of
/// the input files.
fn params_sha256(mode: Mode, total: usize, args: &[String], inputs: &[InputRecord]) -> String {
    let contents: Vec<(&str, &str)> = inputs.iter().map(|i| (i.flag.as_str(), i.sha256.as_str())).collect();
    let text = serde_json::json!({ "mode": mode, "total_frames": total, "args": result_args(args, result_neutral), "inputs": contents }).to_string();
    hex(&Sha256::digest(text.as_bytes()))
}

/// The parameter hash of manifests written before they recorded their inputs (`--out-dir` then
/// counted, the inputs' contents did not): still resumed and verified with the flags they were
/// made with.
fn legacy_params_sha256(mode: Mode, total: usize, args: &[String]) -> String {
    let text = serde_json::json!({ "mode": mode, "total_frames": total, "args": result_args(args, legacy_neutral) }).to_string();
    hex(&Sha256::digest(text.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 and size of a file.
pub fn file_sha256(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let got = f.read(&mut buf)?;
        if got == 0 {
            break;
        }
        n += got as u64;
        h.update(&buf[..got]);
    }
    Ok((hex(&h.finalize()), n))
}

/// sha256 and size of each output just written: the digests recorded while the series writes
/// ([`crate::io::atomic::record_digests`], hashed on up to `threads` threads), any other file read
/// back by name.
fn written_sha256s(full: &[PathBuf], threads: usize) -> Result<Vec<(String, u64)>> {
    let paths: Vec<&Path> = full.iter().map(PathBuf::as_path).collect();
    let kept = crate::io::atomic::take_digests(&paths, threads);
    full.iter()
        .zip(kept)
        .map(|(p, d)| match d {
            Some(d) => Ok((hex(&d.sha256), d.bytes)),
            None => file_sha256(p).map_err(|e| Error::Output { path: p.clone(), reason: format!("cannot read back: {e}") }),
        })
        .collect()
}

/// The outputs a single-image run writes, by role, as named (before `--out-dir`), in
/// [`crate::run::simulate::output_paths`]' order.
fn output_names(c: &Config) -> Vec<(&'static str, PathBuf)> {
    let mut v = Vec::new();
    if c.output.write_float {
        v.push(("float", c.output.floatfile.clone()));
    }
    if c.output.write_int {
        v.push(("int", c.output.intfile.clone()));
    }
    if c.output.write_pgm {
        v.push(("pgm", c.output.pgmfile.clone()));
    }
    if c.output.calculate_noise && c.output.write_noise {
        v.push(("noise", c.output.noisefile.clone()));
    }
    if let Some(p) = &c.output.pngfile {
        v.push(("png", p.clone()));
    }
    if let Some(p) = &c.output.cbffile {
        v.push(("CBF", p.clone()));
    }
    // -nexusfile is not per frame: one multi-frame file per shard (Plan::nexus)
    v
}

/// The names `--outputs` takes, and the file each writes when no flag names it (frame numbers are added
/// as for every output; the NeXus file holds the whole shard).
pub const OUTPUT_KINDS: &[(&str, &str, &str)] = &[
    ("float", "-floatfile", "floatimage.bin"),
    ("int", "-intfile", "intimage.img"),
    ("pgm", "-pgmfile", "image.pgm"),
    ("noise", "-noisefile", "noiseimage.img"),
    ("png", "--png", "image.png"),
    ("cbf", "-cbffile", "image.cbf"),
    ("nexus", "-nexusfile", "series.nxs"),
];

/// A detector of several panels writes float and NeXus files only: the one-panel formats (SMV, PGM,
/// PNG, noise SMV, CBF) are switched off for every frame, with a note, unless the flags name one or
/// `--outputs` lists one, which is refused here, before any file is written.
fn one_panel_outputs_off(c: &mut Config, listed: Option<&[String]>, panels: usize) -> Result<Vec<String>> {
    if panels <= 1 {
        return Ok(vec![]);
    }
    if let Some(k) = listed.into_iter().flatten().find(|k| matches!(k.as_str(), "int" | "pgm" | "png" | "noise" | "cbf")) {
        return Err(Error::flag("--outputs", format!("{k} holds one panel and the detector has {panels}: list float and nexus, or render one panel with --panel N")));
    }
    // the names as asked for: the folder is created, and each frame's names checked, before rendering
    let (_, notes) = crate::run::outputs::for_panels(crate::run::outputs::requested(c), c, panels)?;
    let o = &mut c.output;
    (o.write_int, o.write_pgm, o.write_noise, o.pngfile, o.cbffile) = (false, false, false, None, None);
    Ok(notes)
}

/// `--outputs`: switch off every output not listed, give the listed optional ones a default name, and
/// refuse a flag that names an output the list leaves out (the user asked for both).
fn select_outputs(c: &mut Config, kinds: &[String], named: &[String]) -> Result<()> {
    for k in kinds {
        if !OUTPUT_KINDS.iter().any(|(n, _, _)| n == k) {
            let all: Vec<&str> = OUTPUT_KINDS.iter().map(|(n, _, _)| *n).collect();
            return Err(Error::flag("--outputs", format!("unknown output '{k}' (choose from {})", all.join(","))));
        }
    }
    let wants = |k: &str| kinds.iter().any(|x| x == k);
    for (kind, flag, _) in OUTPUT_KINDS {
        let flag_given = named.iter().any(|a| a == flag || (*kind == "png" && a == "-pngfile"));
        if flag_given && !wants(kind) {
            return Err(Error::flag("--outputs", format!("{flag} names a {kind} file but --outputs leaves {kind} out: add it to the list or drop {flag}")));
        }
    }
    let o = &mut c.output;
    o.write_float = wants("float");
    o.write_int = wants("int");
    o.write_pgm = wants("pgm");
    o.write_noise = wants("noise");
    let default = |k: &str| OUTPUT_KINDS.iter().find(|(n, _, _)| *n == k).map(|(_, _, d)| PathBuf::from(d));
    if wants("png") && o.pngfile.is_none() {
        o.pngfile = default("png");
    }
    if wants("cbf") && o.cbffile.is_none() {
        o.cbffile = default("cbf");
    }
    if wants("nexus") && o.nexusfile.is_none() {
        o.nexusfile = default("nexus");
    }
    if !wants("png") {
        o.pngfile = None;
    }
    if !wants("cbf") {
        o.cbffile = None;
    }
    if !wants("nexus") {
        o.nexusfile = None;
    }
    Ok(())
}

/// The resolved plan: base configuration, per-frame values and names.
pub struct Plan {
    pub mode: Mode,
    pub total: usize,
    pub base: Config,
    pub args: Vec<String>,
    /// User-facing seeds (the values typed after -seed, -mosaic_seed, -misset_seed).
    pub seed: i64,
    pub mosaic_seed: i64,
    pub misset_seed: i64,
    pub phi0_deg: f64,
    pub osc_deg: f64,
    /// Output roles and name templates (with `#` runs).
    pub outputs: Vec<(&'static str, PathBuf)>,
    /// `-nexusfile`: every frame of the shard in one NXmx file (see [`Plan::nexus_name`]).
    pub nexus: Option<PathBuf>,
    /// What the plan leaves out, said before the run (the one-panel formats of a multi-panel detector).
    pub notes: Vec<String>,
    /// The input files and their contents (part of the parameter hash).
    pub inputs: Vec<InputRecord>,
}

/// Refuse frame files named like the run's manifests (`NAME.shard-*-of-*.json`): `--verify` and
/// `--resume` would take them for manifests.
fn check_not_manifest_names(outputs: &[(&'static str, PathBuf)], name: &str, total: usize) -> Result<()> {
    let prefix = format!("{name}.shard-");
    for (role, template) in outputs {
        for k in [1, total.max(1)] {
            let frame = PathBuf::from(frame_name(&template.to_string_lossy(), k));
            let file = frame.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            if file.starts_with(&prefix) && file.ends_with(".json") {
                let flag = OUTPUT_KINDS.iter().find(|(kind, _, _)| kind.eq_ignore_ascii_case(role)).map_or("--outputs", |(_, f, _)| *f);
                return Err(Error::flag(flag, format!("frame files named {file} would be taken for the manifests {prefix}*.json: choose another name")));
            }
        }
    }
    Ok(())
}

fn seed_plus(flag: &str, base: i64, k: usize) -> Result<i64> {
    match i64::try_from(k).ok().and_then(|k| base.checked_add(k - 1)) {
        Some(v) if v <= i32::MAX as i64 => Ok(v),
        _ => Err(Error::flag(flag, format!("{base} + frame number {k} - 1 exceeds the largest seed ({})", i32::MAX))),
    }
}

impl Plan {
    pub fn new(sa: &SeriesArgs) -> Result<Plan> {
        // `--expt` with a scan: every image of it from --image K (default the first) on
        let scan = match &sa.config.params.expt {
            Some(src) => crate::run::expt::read(src)?.scan.map(|s| {
                let first = src.image.unwrap_or(s.image_range[0]);
                (s.oscillation[0] + (first - s.image_range[0]) as f64 * s.oscillation[1], s.oscillation[1], (s.image_range[1] - first + 1).max(1) as usize)
            }),
            None => None,
        };
        let (mode, total) = match (sa.frames, sa.stills) {
            (Some(_), Some(_)) => return Err(Error::flag("--stills", "give either --frames (rotation) or --stills, not both")),
            (Some(n), None) => (Mode::Rotation, n),
            (None, Some(n)) if sa.orientation.as_deref() == Some("fixed") => (Mode::FixedStills, n),
            (None, Some(n)) => (Mode::Stills, n),
            (None, None) if scan.is_some() => (Mode::Rotation, scan.map_or(1, |s| s.2)),
            (None, None) => {
                return Err(Error::flag(
                    "series",
                    "give --frames N (a rotation sweep with -osc per frame) or --stills N --orientation random",
                ))
            }
        };
        if mode == Mode::Rotation && sa.orientation.is_some() {
            return Err(Error::flag("--orientation", "applies to --stills, not to a rotation series"));
        }
        let mut base = sa.config.clone();
        let phi0_deg = typed_number(&sa.simulate, "-phi").or(scan.map(|s| s.0)).unwrap_or(0.0);
        let osc_deg = typed_number(&sa.simulate, "-osc").or(scan.map(|s| s.1)).unwrap_or(0.0);
        if mode == Mode::Rotation && !(osc_deg > 0.0) {
            return Err(Error::flag("--frames", "a rotation series needs -osc RANGE (degrees per frame, > 0)"));
        }
        if mode == Mode::Stills && base.params.misset.is_some() {
            return Err(Error::flag("-misset", "random stills draw their own orientation (--orientation random): drop -misset, or give --orientation fixed for stills at this one"));
        }
        // C stores seeds negated in `int` (flags.rs); that negation undoes itself, so it gives back
        // the typed value (plain `-s` turned -2147483648 into +2147483648).
        let seed = base.params.seed.map(c_negated_seed).unwrap_or(1);
        let misset_seed = base.params.misset_seed.map(c_negated_seed).unwrap_or(1);
        let mosaic_seed = c_negated_seed(base.params.mosaic_seed);
        base.run.quiet = true;
        base.run.progress = false;
        if let Some(kinds) = &sa.outputs {
            select_outputs(&mut base, kinds, &sa.simulate)?;
        }
        let panels = crate::run::load::detector_panels(&base.params)?.map_or(1, |p| p.len());
        let mut notes = one_panel_outputs_off(&mut base, sa.outputs.as_deref(), panels)?;
        let nexus = base.output.nexusfile.take();
        if let Some(p) = &nexus {
            if p.file_name().is_some_and(|f| f.to_string_lossy().contains('#')) {
                return Err(Error::flag(
                    "-nexusfile",
                    format!("a series writes every frame into one NeXus file: give a name without '#' (got '{}')", p.display()),
                ));
            }
        }
        let mut outputs = output_names(&base);
        for (_, p) in outputs.iter_mut() {
            *p = template_name(p, total);
        }
        if mode == Mode::FixedStills && !(base.output.calculate_noise && (nexus.is_some() || outputs.iter().any(|(r, _)| matches!(*r, "noise" | "CBF" | "NeXus")))) {
            // only the noise differs from one fixed still to the next
            notes.push(format!("--orientation fixed: no output written here depends on the noise seed (the noise image, CBF or NeXus counts with noise on): the {total} stills' files will be the same"));
        }
        if outputs.is_empty() && nexus.is_none() {
            return Err(Error::flag("--outputs", "leaves no file to write: name at least one output"));
        }
        check_not_manifest_names(&outputs, sa.name.as_deref().unwrap_or("series"), total)?;
        let inputs = input_records(&base)?;
        Ok(Plan { mode, total, base, args: sa.simulate.clone(), seed, mosaic_seed, misset_seed, phi0_deg, osc_deg, outputs, nexus, notes, inputs })
    }

    /// The NeXus file of a shard, as named (before `--out-dir`): the `-nexusfile` name itself for an
    /// unsharded run; with N > 1 shards `.shard-I-of-N` goes before the extension
    /// (`sweep.nxs` → `sweep.shard-0-of-4.nxs`), each file holding its shard's contiguous frames.
    pub fn nexus_name(&self, shard: &Shard) -> Option<PathBuf> {
        let p = self.nexus.as_ref()?;
        if shard.count <= 1 {
            return Some(p.clone());
        }
        let file = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let tag = format!(".shard-{}-of-{}", shard.index, shard.count);
        let new_file = match file.rfind('.') {
            Some(dot) if dot > 0 => format!("{}{tag}{}", &file[..dot], &file[dot..]),
            _ => format!("{file}{tag}"),
        };
        Some(p.with_file_name(new_file))
    }

    /// Values and flags of frame k (no files yet).
    pub fn frame(&self, k: usize) -> Result<FrameRecord> {
        let seed = seed_plus("-seed", self.seed, k)?;
        let mut flags = vec!["-seed".to_string(), seed.to_string()];
        let mut rec = FrameRecord { frame: k, phi_deg: None, osc_deg: None, misset_deg: None, seed, mosaic_seed: self.mosaic_seed, simulate_flags: vec![], files: vec![] };
        match self.mode {
            Mode::Rotation => {
                let phi = self.phi0_deg + (k - 1) as f64 * self.osc_deg;
                rec.phi_deg = Some(phi);
                rec.osc_deg = Some(self.osc_deg);
                flags.extend(["-phi".to_string(), format!("{phi}"), "-osc".to_string(), format!("{}", self.osc_deg)]);
            }
            // the flags' orientation and mosaic domains: only the noise seed changes
            Mode::FixedStills => {}
            Mode::Stills => {
                let m = still_misset_deg(self.misset_seed, k);
                rec.misset_deg = Some(m);
                rec.mosaic_seed = seed_plus("-mosaic_seed", self.mosaic_seed, k)?;
                flags.extend(["-misset".to_string(), format!("{}", m[0]), format!("{}", m[1]), format!("{}", m[2])]);
                flags.extend(["-mosaic_seed".to_string(), rec.mosaic_seed.to_string()]);
            }
        }
        for (role, p) in &self.outputs {
            let flag = match *role {
                "float" => "-floatfile",
                "int" => "-intfile",
                "pgm" => "-pgmfile",
                "noise" => "-noisefile",
                "png" => "--png",
                "CBF" => "-cbffile",
                "NeXus" => "-nexusfile",
                _ => continue,
            };
            flags.extend([flag.to_string(), frame_name(&p.to_string_lossy(), k)]);
        }
        rec.simulate_flags = flags;
        Ok(rec)
    }

    /// The configuration `simulate` would parse from the series flags plus the frame's flags.
    pub fn frame_config(&self, rec: &FrameRecord) -> Config {
        let mut c = self.base.clone();
        c.params.seed = Some(c_negated_seed(rec.seed));
        c.params.mosaic_seed = c_negated_seed(rec.mosaic_seed);
        if let Some(phi) = rec.phi_deg {
            c.params.phi0 = phi / RTD;
        }
        if let Some(osc) = rec.osc_deg {
            c.params.osc = Some(osc / RTD);
        }
        if let Some(m) = rec.misset_deg {
            c.params.misset = Some(Misset::Angles([m[0] / RTD, m[1] / RTD, m[2] / RTD]));
        }
        for (role, p) in &self.outputs {
            let name = PathBuf::from(frame_name(&p.to_string_lossy(), rec.frame));
            match *role {
                "float" => c.output.floatfile = name,
                "int" => c.output.intfile = name,
                "pgm" => c.output.pgmfile = name,
                "noise" => c.output.noisefile = name,
                "png" => c.output.pngfile = Some(name),
                "CBF" => c.output.cbffile = Some(name),
                "NeXus" => c.output.nexusfile = Some(name),
                _ => {}
            }
        }
        c
    }

    pub fn params_sha256(&self) -> String {
        params_sha256(self.mode, self.total, &self.args, &self.inputs)
    }

    /// Whether a manifest's parameter hash (and inputs) is this plan's: the same flags and input
    /// contents, or a manifest from before inputs were recorded made with the same flags.
    pub fn made_this(&self, m: &Manifest) -> bool {
        m.params_sha256 == self.params_sha256() || (m.inputs.is_empty() && m.params_sha256 == legacy_params_sha256(self.mode, self.total, &self.args))
    }

    /// Why a manifest with another parameter hash is not this plan's: an input whose contents
    /// changed, else the flags.
    pub fn differs_because(&self, m: &Manifest) -> String {
        for old in &m.inputs {
            match self.inputs.iter().find(|i| i.flag == old.flag) {
                Some(now) if now.sha256 != old.sha256 => {
                    return format!("the {} input {} changed since the manifest was written (sha256 differs)", old.flag, now.path.display());
                }
                None => return format!("the manifest's run read the {} input {}, this one does not", old.flag, old.path.display()),
                Some(_) => {}
            }
        }
        if let Some(new) = self.inputs.iter().find(|i| !m.inputs.is_empty() && !m.inputs.iter().any(|o| o.flag == i.flag)) {
            return format!("this run reads the {} input {}, the manifest's did not", new.flag, new.path.display());
        }
        "manifest is from a run with other parameters (or --frames/--stills)".into()
    }
}

/// Where a shard's manifest lives.
pub fn manifest_path(cfg: &Config, name: &str, shard: &Shard) -> PathBuf {
    resolve_out(cfg, Path::new(&format!("{name}.shard-{}-of-{}.json", shard.index, shard.count)))
}

fn write_manifest(path: &Path, m: &Manifest) -> Result<()> {
    let text = serde_json::to_string_pretty(m).map_err(|e| Error::Output { path: path.to_path_buf(), reason: e.to_string() })?;
    crate::io::atomic::write_atomic(path, text.as_bytes())
}

/// Bytes of memory per byte of a manifest read (its text and the records parsed from it).
const MANIFEST_MEMORY_FACTOR: u64 = 4;

/// Refuse manifests of `bytes` in all that would not fit in the memory once read, naming `flag`.
fn check_manifest_memory(flag: &str, path: &Path, bytes: u64) -> Result<()> {
    crate::base::memory::check_alloc(
        || {
            Error::flag(
                flag,
                format!(
                    "the manifest {} ({}) needs about {} of memory to read but only {} is available",
                    path.display(),
                    crate::base::memory::human(bytes),
                    crate::base::memory::human(bytes.saturating_mul(MANIFEST_MEMORY_FACTOR)),
                    crate::base::memory::human(crate::base::memory::memory_budget())
                ),
            )
        },
        bytes.checked_mul(MANIFEST_MEMORY_FACTOR),
    )
}

fn read_manifest(path: &Path, flag: &str) -> Result<Manifest> {
    let len = std::fs::metadata(path).map_err(|e| Error::file(path, format!("cannot read manifest: {e}")))?.len();
    check_manifest_memory(flag, path, len)?;
    let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, format!("cannot read manifest: {e}")))?;
    let m: Manifest = serde_json::from_str(&text).map_err(|e| Error::file_line(path, e.line(), format!("not a series manifest: {e}")))?;
    if m.format != MANIFEST_FORMAT {
        return Err(Error::file(path, format!("manifest format '{}' is not '{MANIFEST_FORMAT}'", m.format)));
    }
    Ok(m)
}

/// True when the file exists with its recorded size and sha256.
fn sweep_file_matches(cfg: &Config, f: &SweepFile) -> bool {
    matches!(file_sha256(&resolve_out(cfg, &f.path)), Ok((h, n)) if h == f.sha256 && n == f.bytes)
}

/// Whether a NeXus sweep file of `sweep` holds `frame` (a frame of `--outputs nexus` lists no files
/// of its own).
fn in_sweep(sweep: &[SweepFile], frame: usize) -> bool {
    sweep.iter().any(|f| f.role == "NeXus" && (f.first_frame..=f.last_frame).contains(&frame))
}

/// True when every file of the record exists with its recorded sha256.
fn files_match(cfg: &Config, rec: &FrameRecord) -> bool {
    !rec.files.is_empty()
        && rec.files.iter().all(|f| matches!(file_sha256(&resolve_out(cfg, &f.path)), Ok((h, n)) if h == f.sha256 && n == f.bytes))
}

// ------------------------------------------------------------------------------------------ running

/// A rendered frame on its way to the writer thread.
struct Rendered {
    rec: FrameRecord,
    cfg: Config,
    exp: Experiment,
    out: crate::kernel::RenderOutput,
}

/// What a series did.
#[derive(Clone, Debug)]
pub struct SeriesSummary {
    pub shard: Shard,
    pub rendered: usize,
    pub skipped: usize,
    pub seconds: f64,
    pub manifest: PathBuf,
}

/// Test hook: `NANOBRAGG_SERIES_KILL_AFTER=n` sends SIGKILL to this process after n frames are written
/// and recorded (to test `--resume` after a killed run).
fn kill_hook(done: usize) {
    if kill_after() == Some(done) {
        // SAFETY: a signal to this process; no memory is involved
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

/// The `simulate` flags that ask for an output `series` does not write, each with what to do
/// instead: refused (exit 9, before anything is written) rather than accepted with nothing written
/// (`--gradients a` and `--save-params p.json` wrote nothing, exit 0). `--expt-out` wrote a
/// one-image experiment of whichever frame finished last: another file on each run, not in the
/// manifest, under one name for every shard. Read from the parsed flags (a `--params` file may set
/// them too), and from the words for the two whose value can be the default. (A library caller of
/// [`Plan`], such as the Python `Series`, renders frames itself and is not refused.)
fn refuse_unwritten_outputs(sa: &SeriesArgs) -> Result<()> {
    let c = &sa.config;
    let typed = |flag: &str| sa.simulate.iter().any(|w| w == flag || w.strip_prefix(flag).is_some_and(|r| r.starts_with('=')));
    let one_frame = "run simulate with a frame's simulate_flags (from the manifest)";
    let asked = [
        ("--expt-out", c.output.expt_out.is_some(), "series writes no experiment list: run simulate --expt-out with a frame's simulate_flags (from the manifest) for one frame, or dials.import the series' NeXus or CBF files for the scan".to_string()),
        ("--save-params", c.run.save_params.is_some(), "series saves no parameter file: its manifest records the flags and each frame's simulate_flags; run simulate --save-params with them for one frame".to_string()),
        ("--gradients", !c.output.gradients.is_empty(), format!("series writes no derivative images: {one_frame} and --gradients")),
        ("--gradient-prefix", typed("--gradient-prefix"), format!("series writes no derivative images: {one_frame} and --gradients")),
        ("--loss", typed("--loss"), format!("series computes no loss against a measured image: {one_frame} and --observed")),
        ("--loss-out", c.output.loss.loss_out.is_some(), format!("series writes no loss file: {one_frame} and --observed")),
        ("--dfhkl-out", c.output.loss.dfhkl_out.is_some(), format!("series writes no dL/dF file: {one_frame} and --observed")),
        ("--observed", c.output.loss.observed.is_some(), format!("series computes no loss against a measured image: {one_frame} and --observed")),
        ("-printout_pixel", c.run.printout_pixel.is_some(), format!("series prints no pixel values: {one_frame} and -printout_pixel")),
        ("-printout", c.run.printout, format!("series prints no pixel values: {one_frame} and -printout")),
    ];
    match asked.iter().find(|(_, on, _)| *on) {
        Some((flag, _, why)) => Err(Error::flag(*flag, why.clone())),
        None => Ok(()),
    }
}

/// Run `nanobragg-rs series` (without `--verify`).
pub fn run(sa: &SeriesArgs, env: &dyn Fn(&str) -> Option<String>, log_out: &mut dyn std::io::Write) -> Result<SeriesSummary> {
    refuse_unwritten_outputs(sa)?;
    let mut plan = Plan::new(sa)?;
    let shard = resolve_shard(sa.shard.as_deref(), env)?;
    if let Some(w) = &shard.warning {
        crate::base::log::warn(w.clone());
    }
    let name = sa.name.clone().unwrap_or_else(|| "series".to_string());
    let quiet_user = sa.simulate.iter().any(|a| a == "--quiet" || a == "-quiet");
    let frames: Vec<usize> = shard_frames_to_render(sa, &plan, &shard)?.collect();
    let nexus_name = plan.nexus_name(&shard);
    let mpath = manifest_path(&plan.base, &name, &shard);
    if !quiet_user {
        let (a, b) = (frames.first().copied().unwrap_or(0), frames.last().copied().unwrap_or(0));
        let _ = writeln!(
            log_out,
            "series: {} {:?} frames; shard {}/{} ({}): frames {a}..{b} ({} frames); manifest {}",
            plan.total,
            plan.mode,
            shard.index,
            shard.count,
            shard.reason,
            frames.len(),
            mpath.display()
        );
    }
    if !quiet_user {
        for n in &plan.notes {
            let _ = writeln!(log_out, "series: {n}");
        }
    }
    let params = plan.params_sha256();
    let Earlier { done, kept, planned, sweep: sweep_done, legacy } = resumed_frames(sa, &plan, &shard, &frames, &mpath, nexus_name.as_deref(), quiet_user, log_out)?;
    let skipped = done.len();
    let todo: Vec<usize> = frames.iter().copied().filter(|k| !done.contains_key(k)).collect();
    // every check before the first file is written: a refused run changes nothing
    let prepared = prepare(&mut plan, &todo)?;
    if let (Some(n), false) = (&prepared.auto_note, quiet_user) {
        let _ = writeln!(log_out, "series: {n}");
    }
    let workers = prepared.workers;
    check_output_size(sa, &plan, &prepared, todo.len(), nexus_name.is_some(), env, quiet_user, log_out)?;
    check_outputs_before_rendering(&plan, &todo, nexus_name.as_deref(), &mpath)?;
    warn_if_replacing(sa, &plan, &mpath);
    if !quiet_user && skipped > 0 {
        let _ = writeln!(log_out, "series: --resume: {skipped} frames already complete, {} to render", todo.len());
    }
    if !quiet_user && !kept.is_empty() {
        let _ = writeln!(log_out, "series: --only: the manifest keeps its records of {} other frames of the shard", kept.len());
    }
    let mut frames_planned = planned;
    frames_planned.extend(&frames);
    frames_planned.sort_unstable();
    let mut records: Vec<FrameRecord> = done.into_values().chain(kept).collect();
    records.sort_by_key(|r| r.frame);

    let mut manifest = Manifest {
        format: MANIFEST_FORMAT.to_string(),
        program: format!("nanobragg-rs {}", env!("CARGO_PKG_VERSION")),
        mode: plan.mode,
        total_frames: plan.total,
        shard_index: shard.index,
        shard_count: shard.count,
        shard_reason: shard.reason.clone(),
        simulate_args: plan.args.clone(),
        inputs: if legacy.is_some() { Vec::new() } else { plan.inputs.clone() },
        params_sha256: legacy.unwrap_or(params),
        seed: plan.seed,
        mosaic_seed: plan.mosaic_seed,
        misset_seed: plan.misset_seed,
        frames_planned,
        frames: records,
        sweep_files: sweep_done,
    };
    write_manifest(&mpath, &manifest)?;

    let t0 = Instant::now();
    // the first frame's pixel geometry, for every frame (built from the experiment `prepare` made of
    // it, on the frames' pool: rayon's global one would start a thread per core under --threads 1)
    let geometry = if prepared.keep_geometry { crate::run::simulate::in_pool(plan.base.run.threads, || crate::kernel::PixelGeometry::build(&prepared.exp))? } else { None };
    let (inputs, mut nexus) = setup_once(&plan, prepared, &todo, nexus_name.as_ref(), quiet_user, log_out)?;
    let first_frame = todo.first().copied().unwrap_or(1);
    let bar = crate::base::progress::Bar::start(!quiet_user && !todo.is_empty(), todo.len() as u64, "frames");
    // every frame's digests: hashed as written, or the files kept open and hashed together when
    // several frames are done (`io::atomic::record_digests`, `FrameSink::write`)
    let digests = crate::io::atomic::record_digests();
    let mut result = {
        let sink = FrameSink { plan: &plan, mpath: &mpath, bar: &bar, first_frame, frames: todo.len(), nexus: std::sync::Mutex::new(nexus.as_mut().map(|(w, _)| NexusInOrder { w, order: InOrder::default() })) };
        render_and_write(&plan, &todo, (workers, geometry.as_ref()), &inputs, &sink, &mut manifest)
    };
    drop(digests);
    if let (Ok(()), Some((w, nx))) = (&result, nexus.take()) {
        result = finish_nexus(&plan, w, &nx, first_frame, &mut manifest, quiet_user, log_out);
    }
    manifest.frames.sort_by_key(|r| r.frame);
    write_manifest(&mpath, &manifest)?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    result?;
    let seconds = t0.elapsed().as_secs_f64();
    if !quiet_user {
        let n = todo.len();
        let _ = writeln!(
            log_out,
            "series: shard {}/{}: {n} frames rendered in {:.3} s ({:.3} frames/s), {skipped} skipped; manifest {}",
            shard.index,
            shard.count,
            seconds,
            if seconds > 0.0 { n as f64 / seconds } else { 0.0 },
            mpath.display()
        );
    }
    Ok(SeriesSummary { shard, rendered: todo.len(), skipped, seconds, manifest: mpath })
}

/// Bytes of bookkeeping per frame of the shard (its number in the manifest, in memory and as JSON).
const PLANNED_FRAME_BYTES: u64 = 64;
/// A run (not `--resume`, which refuses it) whose manifest path holds another dataset's manifest
/// replaces that dataset's frames and manifest: said on stderr once every check has passed (not
/// refused: rendering again with changed flags is what a user does), so that a dataset lost by a
/// reused `--name` or `--out-dir` is named.
fn warn_if_replacing(sa: &SeriesArgs, plan: &Plan, mpath: &Path) {
    if sa.resume || !mpath.is_file() {
        return;
    }
    if let Ok(old) = read_manifest(mpath, "--resume") {
        if !plan.made_this(&old) {
            crate::base::log::warn(format!(
                "nanobragg-rs: warning: series: {} holds another dataset ({}): this run replaces its manifest and overwrites its frame files where the names coincide; give another --name or --out-dir to keep it",
                mpath.display(),
                plan.differs_because(&old)
            ));
        }
    }
}

/// Bytes of bookkeeping per frame to render: its record (values, flags, files) in memory and as JSON
/// text, and its file names in the check that no two outputs collide.
const RENDERED_FRAME_BYTES: u64 = 4096;

/// The frames this run of `sa` renders: its shard's (`--shard`, else the Slurm/MPI variables `env`
/// gives), within `--only`: what `run` renders and the Python `Series` yields.
pub fn frames_of_run(sa: &SeriesArgs, plan: &Plan, env: &dyn Fn(&str) -> Option<String>) -> Result<std::ops::RangeInclusive<usize>> {
    shard_frames_to_render(sa, plan, &resolve_shard(sa.shard.as_deref(), env)?)
}

/// The frames of `shard`, narrowed by `--only` (refused past the last frame, or with `-nexusfile`,
/// whose file holds the shard's whole sweep), after checking that their records fit in the memory.
fn shard_frames_to_render(sa: &SeriesArgs, plan: &Plan, shard: &Shard) -> Result<std::ops::RangeInclusive<usize>> {
    let mut frames = shard_frames(plan.total, shard);
    if let Some((lo, hi)) = sa.only {
        if hi > plan.total {
            return Err(Error::flag("--only", format!("frame {hi} is past the last frame ({})", plan.total)));
        }
        frames = (*frames.start()).max(lo)..=(*frames.end()).min(hi);
    }
    let n = if frames.is_empty() { 0 } else { (frames.end() - frames.start()) as u64 + 1 };
    let flag = if plan.mode == Mode::Rotation { "--frames" } else { "--stills" };
    crate::base::memory::check_alloc(
        || {
            Error::flag(
                flag,
                format!(
                    "{n} frames in one run need about {} of memory for their records but only {} is available; split the dataset with --shard I/N or --only K-L",
                    crate::base::memory::human(n.saturating_mul(PLANNED_FRAME_BYTES + RENDERED_FRAME_BYTES)),
                    crate::base::memory::human(crate::base::memory::memory_budget())
                ),
            )
        },
        n.checked_mul(PLANNED_FRAME_BYTES + RENDERED_FRAME_BYTES),
    )?;
    if plan.nexus.is_some() {
        if let Some((lo, hi)) = sa.only {
            return Err(Error::flag(
                "--only",
                format!("renders part of a shard ({lo}-{hi}) but -nexusfile holds the shard's whole sweep in one file: drop --only or -nexusfile"),
            ));
        }
    }
    Ok(frames)
}

/// What the shard's existing manifest gives this run ([`resumed_frames`]).
#[derive(Default)]
struct Earlier {
    /// With `--resume`: the records of this run's frames whose files all match (not rendered again).
    done: BTreeMap<usize, FrameRecord>,
    /// With `--only`: the records of the shard's frames outside K-L, kept as they were.
    kept: Vec<FrameRecord>,
    /// With `--only`: the frames outside K-L that the manifest planned.
    planned: Vec<usize>,
    /// The sweep files (NeXus) still complete.
    sweep: Vec<SweepFile>,
    /// The parameter hash to keep: the manifest predates input checks.
    legacy: Option<String>,
}

/// The shard's manifest when this run builds on it, with the parameter hash to keep when it predates
/// input checks: with `--resume` (refused when made by other parameters), and with `--only`, which
/// keeps the records of the frames it does not render (a dataset rendered in several `--only` runs,
/// or one frame of it rendered again, stays complete; they were dropped). Without `--resume` a
/// manifest of other parameters, or one that cannot be read, is replaced, as by a run without `--only`.
fn earlier_manifest(sa: &SeriesArgs, plan: &Plan, mpath: &Path, quiet_user: bool, log_out: &mut dyn std::io::Write) -> Result<Option<(Manifest, Option<String>)>> {
    if !(sa.resume || sa.only.is_some()) || !mpath.is_file() {
        return Ok(None);
    }
    let old = match read_manifest(mpath, "--resume") {
        Ok(m) => m,
        Err(e) if sa.resume => return Err(e),
        Err(_) => return Ok(None),
    };
    if !plan.made_this(&old) {
        if sa.resume {
            return Err(Error::file(mpath, format!("{}; use another --name or remove it", plan.differs_because(&old))));
        }
        return Ok(None);
    }
    let mut legacy = None;
    if old.params_sha256 != plan.params_sha256() {
        // made before inputs were recorded: the shard keeps that form, so that its dataset's other
        // shards still verify with it; its inputs' contents could not be compared
        if !quiet_user {
            let flag = if sa.resume { "--resume" } else { "--only" };
            let _ = writeln!(log_out, "series: {flag}: the manifest predates input checks; the frames kept were made from input files not compared with today's");
        }
        legacy = Some(old.params_sha256.clone());
    }
    Ok(Some((old, legacy)))
}

/// From the shard's manifest ([`earlier_manifest`]): with `--resume` the records of this run's
/// `frames` whose files all match; with `--only` the records of the shard's other frames; the sweep
/// files (NeXus) still complete. A record is taken only with the values and file names this run gives
/// its frame. A NeXus file holds every frame of the shard and is renamed into place only when all are
/// written: unless the manifest records it complete and unchanged, every frame is rendered again (the
/// per-frame files are then rewritten with the same bytes).
#[allow(clippy::too_many_arguments)]
fn resumed_frames(
    sa: &SeriesArgs,
    plan: &Plan,
    shard: &Shard,
    frames: &[usize],
    mpath: &Path,
    nexus_name: Option<&Path>,
    quiet_user: bool,
    log_out: &mut dyn std::io::Write,
) -> Result<Earlier> {
    let mut e = Earlier::default();
    if let Some((old, legacy)) = earlier_manifest(sa, plan, mpath, quiet_user, log_out)? {
        e.legacy = legacy;
        e.sweep = old.sweep_files.iter().filter(|f| sweep_file_matches(&plan.base, f)).cloned().collect();
        let whole = shard_frames(plan.total, shard);
        let outside = |k: &usize| whole.contains(k) && frames.binary_search(k).is_err();
        e.planned = old.frames_planned.iter().copied().filter(outside).collect();
        for rec in old.frames {
            let same_values = plan.frame(rec.frame).ok().map(|mut r| {
                r.files = rec.files.clone();
                r
            });
            if same_values.as_ref() != Some(&rec) {
                continue;
            }
            if outside(&rec.frame) {
                e.kept.push(rec);
                continue;
            }
            // a frame whose only file is the NeXus sweep (`--outputs nexus`) is kept with that file
            let kept_files = files_match(&plan.base, &rec) || (rec.files.is_empty() && in_sweep(&e.sweep, rec.frame));
            if sa.resume && frames.binary_search(&rec.frame).is_ok() && kept_files {
                e.done.insert(rec.frame, rec);
            }
        }
    }
    if let Some(nx) = nexus_name {
        let complete = e.sweep.iter().any(|f| {
            f.role == "NeXus" && f.path == nx && Some(&f.first_frame) == frames.first() && Some(&f.last_frame) == frames.last()
        });
        // the NeXus file is written whole: unless it and every frame are kept, all are rendered again
        // (a second sweep entry for the same file made the manifest grow on every --resume)
        if !complete || !frames.iter().all(|f| e.done.contains_key(f)) {
            if !e.done.is_empty() && !quiet_user {
                // name the real cause: the NeXus file may be complete while another frame's file changed
                let redo: Vec<String> = frames.iter().filter(|f| !e.done.contains_key(f)).map(|f| f.to_string()).collect();
                let why = if complete {
                    format!("frame {} must be rendered again (a file of it is missing or changed) and the NeXus file {} is written whole", redo.join(", "), nx.display())
                } else {
                    format!("the NeXus file {} is not complete", nx.display())
                };
                let _ = writeln!(log_out, "series: --resume: {why}: all {} frames of the shard are rendered again for it", frames.len());
            }
            e.done.clear();
            e.sweep.clear();
        }
    }
    Ok(e)
}

/// The inputs read and the first frame's experiment built, before any file is written.
pub struct Prepared {
    inputs: Inputs,
    exp: Experiment,
    cfg: Config,
    /// Frames rendered side by side ([`frame_workers`]).
    workers: usize,
    /// Whether the first frame's pixel geometry is kept for the others (built in `run`, counted here).
    keep_geometry: bool,
    /// Where `--backend auto` was settled on the CPU, the line that says so.
    auto_note: Option<String>,
}

/// `--backend auto` settled for the whole dataset (a GPU's start-up is paid once for its frames): the
/// CPU (frames side by side, [`frame_workers`]) where its frames, at `first`'s samples each, are too
/// few ([`crate::run::config::RunOptions::settle_auto`]); the line that says so. The dataset's size,
/// not the frames left: every shard, `--only` and `--resume` of it takes the same backend (the GPU's
/// images differ from the CPU's in the last bits). Nothing to render: nothing said.
fn settle_auto(plan: &mut Plan, todo: &[usize], first: &Experiment) -> Option<String> {
    if todo.is_empty() {
        return None;
    }
    plan.base.run.settle_auto(crate::kernel::gpu::image_samples(first) * plan.total as f64, &format!(" (the dataset's {} frames together)", plan.total))
}

/// Before anything is written: the values and memory of a frame checked as `simulate` checks them
/// (with every frame in flight at once: one rendering, two being written and two queued, or one per
/// worker rendering frames side by side, whichever is more), the inputs read and the first frame's
/// experiment built.
/// `--backend auto` is settled there ([`settle_auto`]).
fn prepare(plan: &mut Plan, todo: &[usize]) -> Result<Prepared> {
    let first = todo.first().copied().unwrap_or(1);
    let cfg = plan.frame_config(&plan.frame(first)?);
    crate::run::outputs::check_inputs(&cfg)?;
    crate::run::limits::check_values(&cfg.params)?;
    // the shard's NeXus sweep is written from the frames' counts, not by a frame's own -nexusfile
    crate::run::simulate::check_counts_offset(&cfg, plan.nexus.is_some())?;
    let est = crate::run::limits::check_run(&cfg)?;
    let writers = plan.base.run.threads.unwrap_or(usize::MAX).clamp(1, 2) as u64;
    let frame_bytes = est.bytes.saturating_sub(32 << 20);
    let workers = frame_workers(plan, frame_bytes, crate::base::memory::memory_budget());
    let in_flight = (2 * writers + 1).max(workers as u64).min(todo.len().max(1) as u64);
    let bytes = frame_bytes.saturating_mul(in_flight).saturating_add(32 << 20);
    crate::base::memory::check_alloc(
        || {
            Error::flag(
                "-detpixels",
                format!(
                    "{in_flight} frames in flight (one rendering, the others being written) need about {} of memory but only {} is available; reduce the detector or raise the limit",
                    crate::base::memory::human(bytes),
                    crate::base::memory::human(crate::base::memory::memory_budget())
                ),
            )
        },
        Some(bytes),
    )?;
    let inputs = crate::run::load::load_inputs(&cfg)?;
    let exp = crate::run::setup::build_experiment(&cfg, &inputs)?;
    let auto_note = settle_auto(plan, todo, &exp);
    // frames side by side on the CPU only (counted so in the memory check while auto was open)
    let workers = if plan.base.run.backend == crate::run::config::BackendChoice::Auto { 0 } else { workers };
    // the geometry is kept only beside the frames in flight within the memory limit (it is an
    // optimisation: without it every frame computes its own)
    let geometry = crate::kernel::pixel_geometry::bytes(&exp);
    let keep_geometry = keeps_geometry(plan, todo, &exp) && geometry > 0 && bytes.saturating_add(geometry) <= crate::base::memory::memory_budget();
    // a curved detector in a flat-panel file, named as the series asks for it (--outputs cbf/nexus)
    if crate::run::simulate::is_curved(&exp) {
        if let Some(kind) = [("cbf", cfg.output.cbffile.is_some()), ("nexus", plan.nexus.is_some())].iter().find(|(_, on)| *on).map(|(k, _)| k) {
            return Err(Error::flag("--outputs", format!("{kind}: {}", crate::run::simulate::curved_in_flat_file(&format!("drop -curved_det or the {kind} output")))));
        }
    }
    crate::run::simulate::check_geometry_outputs(&cfg, &exp)?;
    if plan.nexus.is_some() {
        crate::run::simulate::nexus_one_sensor(&exp)?;
    }
    cfg.run.check_backend(&exp, &cfg.output)?;
    Ok(Prepared { inputs, exp, cfg, workers, keep_geometry, auto_note })
}

/// The bytes the frames to render will write (every output of every frame, the shard's NeXus file),
/// printed before rendering; refused (exit 9, nothing written, the estimate in the message) when they
/// exceed `--max-output`/`NANOBRAGG_MAX_OUTPUT` or the free space of the output folder.
#[allow(clippy::too_many_arguments)]
fn check_output_size(
    sa: &SeriesArgs,
    plan: &Plan,
    prepared: &Prepared,
    frames: usize,
    nexus: bool,
    env: &dyn Fn(&str) -> Option<String>,
    quiet_user: bool,
    log_out: &mut dyn std::io::Write,
) -> Result<()> {
    use crate::base::memory::human;
    let pixels: u64 = prepared.exp.det.panels.iter().map(|p| (p.fpixels * p.spixels) as u64).sum();
    let mut per_frame = crate::run::outputs::disk_bytes(&prepared.cfg, pixels, prepared.exp.det.panels.len());
    if nexus {
        per_frame.push(("NeXus", crate::run::outputs::COMPRESSED_BYTES_PER_PIXEL * pixels));
    }
    // the structure-factor cache is one file of the grid's size, not a per-frame image, written with
    // the frames: a resume with none to render writes none
    let dump = (frames > 0 && per_frame.iter().any(|(r, _)| *r == "dump")).then(|| prepared.exp.structure_factors.fhkl.as_ref().map_or(0, |g| crate::io::fdump::fdump_len(g)));
    per_frame.retain(|(r, _)| *r != "dump");
    let frame_total: u64 = per_frame.iter().map(|(_, b)| b).fold(0, |a, b| a.saturating_add(*b));
    let total = frame_total.saturating_mul(frames as u64).saturating_add(dump.unwrap_or(0));
    let parts: Vec<String> = per_frame.iter().map(|(r, b)| format!("{r} {}", human(*b))).collect();
    let once = dump.map(|b| format!(", and the dump {} once", human(b))).unwrap_or_default();
    let what = format!("about {} ({frames} frames x {} = {}{once})", human(total), human(frame_total), parts.join(" + "));
    let dir = plan.base.output.out_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let free = crate::base::disk::free_bytes(&dir);
    if !quiet_user {
        let room = free.map(|f| format!("; {} free in {}", human(f), dir.display())).unwrap_or_default();
        let _ = writeln!(log_out, "series: the outputs take {what}{room}");
    }
    let cap = crate::base::disk::max_output(sa.max_output, env).map_err(|e| Error::flag("--max-output", e))?;
    if let Some(cap) = cap.filter(|c| total > *c) {
        return Err(Error::flag("--max-output", format!("the outputs would take {what}, more than the limit of {}: use --outputs, fewer frames or a higher --max-output", human(cap))));
    }
    if let Some(free) = free.filter(|f| total > *f) {
        return Err(Error::Output {
            path: dir,
            reason: format!("the outputs would take {what} but only {} is free there: use --outputs, fewer frames or another --out-dir", human(free)),
        });
    }
    Ok(())
}

/// Before anything is written: every frame's seeds and outputs are checked as `simulate` checks its
/// own (a directory, a missing folder, a name too long, an input overwritten), and no two outputs of
/// the run (the frames' files, the NeXus file, the manifest) name the same file. `--out-dir` is made
/// here, and removed again when the run is refused.
fn check_outputs_before_rendering(plan: &Plan, todo: &[usize], nexus_name: Option<&Path>, mpath: &Path) -> Result<()> {
    let created = crate::run::outputs::create_out_dir(&plan.base)?;
    let checked = check_every_frame(plan, todo, nexus_name, mpath).inspect_err(|_| crate::run::outputs::remove_created_dirs(&created));
    checked?;
    if let Some(&k) = todo.first() {
        // the first frame as `simulate` checks it: also sweeps stale temporary files of killed runs
        crate::run::simulate::check_outputs(&plan.frame_config(&plan.frame(k)?))?;
    }
    Ok(())
}

/// Which file a path names: (device, inode) when it exists, else its canonical folder and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum FileKey {
    Inode(u64, u64),
    Path(PathBuf),
}

/// The outputs already claimed by the run, by file, with what claimed them.
struct Claims {
    files: HashMap<FileKey, String>,
    dirs: HashMap<PathBuf, Option<PathBuf>>,
}

impl Claims {
    fn key(&mut self, p: &Path) -> FileKey {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata(p) {
            return FileKey::Inode(m.dev(), m.ino());
        }
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        let canon = self.dirs.entry(dir.clone()).or_insert_with(|| std::fs::canonicalize(&dir).ok()).clone();
        match (canon, p.file_name()) {
            (Some(d), Some(f)) => FileKey::Path(d.join(f)),
            _ => FileKey::Path(p.to_path_buf()),
        }
    }

    /// Refuse `p` when an earlier output of the run names the same file.
    fn claim(&mut self, p: &Path, what: String) -> Result<()> {
        let key = self.key(p);
        if let Some(other) = self.files.get(&key) {
            return Err(Error::Output {
                path: p.to_path_buf(),
                reason: format!("{what} and {other} name the same file (refused before any frame is rendered: give the outputs distinct names)"),
            });
        }
        self.files.insert(key, what);
        Ok(())
    }
}

/// Every frame to render: its seeds and flags, its outputs as `simulate` plans them, and no file
/// named twice by the run.
fn check_every_frame(plan: &Plan, todo: &[usize], nexus_name: Option<&Path>, mpath: &Path) -> Result<()> {
    let mut claims = Claims { files: HashMap::new(), dirs: HashMap::new() };
    claims.claim(mpath, "the manifest".to_string())?;
    if let Some(nx) = nexus_name {
        crate::io::nexus::available().map_err(|e| Error::Output { path: resolve_out(&plan.base, nx), reason: e })?;
        claims.claim(&resolve_out(&plan.base, nx), "the NeXus file".to_string())?;
    }
    for (i, &k) in todo.iter().enumerate() {
        let rec = plan.frame(k)?;
        let mut c = plan.frame_config(&rec);
        if let (0, Some(nx)) = (i, nexus_name) {
            c.output.nexusfile = Some(nx.to_path_buf()); // checked with the first frame's files (no aliasing with an input)
        }
        crate::run::outputs::plan(&c)?;
        for (role, p) in &plan.outputs {
            let full = resolve_out(&c, Path::new(&frame_name(&p.to_string_lossy(), k)));
            claims.claim(&full, format!("the {role} file of frame {k}"))?;
        }
    }
    Ok(())
}

/// Setup once, after every check: the inputs read by [`prepare`] (and the structure factors
/// computed) are handed to every frame; `-hklout` and the setup summary come from the first frame;
/// the NeXus file is opened.
fn setup_once(
    plan: &Plan,
    prepared: Prepared,
    todo: &[usize],
    nexus_name: Option<&PathBuf>,
    quiet_user: bool,
    log_out: &mut dyn std::io::Write,
) -> Result<(Inputs, Option<(crate::io::nexus::NexusWriter, PathBuf)>)> {
    let Prepared { mut inputs, exp, cfg, .. } = prepared;
    write_setup_outputs(&cfg, &exp)?;
    // --quiet keeps the C's WARNING lines, as simulate's does
    let mut log = Log { lines: crate::run::summary::setup_summary(&cfg, &inputs, &exp) };
    let _ = if quiet_user { log.flush_warnings_to(log_out) } else { log.flush_to(log_out) };
    let mut nexus = None;
    if let (Some(nx), false) = (nexus_name, todo.is_empty()) {
        // todo is the whole shard here: the file's frame 0 is this first frame (its omega start)
        let mut m = crate::run::headers::image_meta(&exp, cfg.params.exposure);
        if plan.mode != Mode::Rotation {
            m.osc = 0.0; // every still at the same omega (its orientation is in the misset, not in the file)
        }
        let full = resolve_out(&cfg, nx);
        nexus = Some((crate::io::nexus::NexusWriter::create(&full, &m, todo.len())?, nx.clone()));
    }
    // every frame shares these structure factors (computed once when they come from a model)
    inputs.fhkl = exp.structure_factors.fhkl.clone();
    Ok((inputs, nexus))
}

/// Where the writers put a rendered frame: its files, its manifest record, the NeXus frame.
struct FrameSink<'a, 'w> {
    plan: &'a Plan,
    mpath: &'a Path,
    bar: &'a Option<crate::base::progress::Bar>,
    first_frame: usize,
    /// Frames this run writes.
    frames: usize,
    nexus: std::sync::Mutex<Option<NexusInOrder<'w>>>,
}

/// The shard's NeXus file, its frames written in frame order whatever order they finish in (frames
/// rendered side by side finish out of order; HDF5 places chunks in the order they are written).
struct NexusInOrder<'w> {
    w: &'w mut crate::io::nexus::NexusWriter,
    order: InOrder<Vec<i32>>,
}

impl NexusInOrder<'_> {
    /// Frame `i`'s counts, written once the frames before it are.
    fn put(&mut self, i: usize, counts: Vec<i32>) -> Result<()> {
        for (i, c) in self.order.put(i, counts) {
            self.w.write_frame(i, &c)?;
        }
        Ok(())
    }
}

/// Items numbered 0, 1, 2, … handed in any order and given back in order: each as soon as every
/// one before it was. Holds the early ones (at most one per other thread, for the frames here).
#[derive(Default)]
struct InOrder<T> {
    next: usize,
    waiting: std::collections::BTreeMap<usize, T>,
}

impl<T> InOrder<T> {
    /// Item `i`: the items now ready, in order (none while one before `i` is missing).
    fn put(&mut self, i: usize, item: T) -> Vec<(usize, T)> {
        self.waiting.insert(i, item);
        let mut ready = Vec::new();
        while let Some(t) = self.waiting.remove(&self.next) {
            ready.push((self.next, t));
            self.next += 1;
        }
        ready
    }
}

/// The manifest, when it was last saved, how many frames are recorded in it, how many are being
/// hashed (taken from `unhashed`, not yet recorded), and the frames written but not yet taken.
struct Progress<'m> {
    manifest: &'m mut Manifest,
    last_save: Instant,
    recorded: usize,
    hashing: usize,
    unhashed: Vec<Unhashed>,
}

impl Progress<'_> {
    /// Frames written so far: recorded, being hashed, or waiting.
    fn written(&self) -> usize {
        self.recorded + self.hashing + self.unhashed.len()
    }

    /// The frames waiting, now counted as being hashed.
    fn take_unhashed(&mut self) -> Vec<Unhashed> {
        self.hashing += self.unhashed.len();
        std::mem::take(&mut self.unhashed)
    }
}

type ManifestState<'m> = std::sync::Mutex<Progress<'m>>;

/// A frame written, its record without the files' checksums: the files as named in the manifest
/// and as written.
struct Unhashed {
    rec: FrameRecord,
    named: Vec<PathBuf>,
    full: Vec<PathBuf>,
    pixels: usize,
}

/// Where files are hashed together ([`crate::io::sha256::hashing_together_pays`]), the frames written
/// are recorded once they have this many files between them (two sets of sixteen lanes: the longest
/// files first, the lanes stay full to near the end), or this many pixels (their files kept in the
/// page cache: [`PIXELS_HASHED_TOGETHER`]), or when the manifest is due to be saved, or at the last
/// frame but one (so that the last set is hashed while the last frame renders; the last frame's
/// files are hashed after the workers stop, on as many threads as there were workers); elsewhere
/// each frame as it is written.
const FILES_HASHED_TOGETHER: usize = 32;
/// The most pixels of frames waiting to be hashed ([`FILES_HASHED_TOGETHER`]): 16 Mi pixels, about
/// 150 MiB of a series' default files kept for their digests.
const PIXELS_HASHED_TOGETHER: usize = 1 << 24;

/// `NANOBRAGG_SERIES_KILL_AFTER`'s frame count ([`kill_hook`]).
fn kill_after() -> Option<usize> {
    std::env::var("NANOBRAGG_SERIES_KILL_AFTER").ok().and_then(|v| v.parse::<usize>().ok())
}

impl FrameSink<'_, '_> {
    /// Write one rendered frame's outputs and hand its record to [`FrameSink::record`] with the other
    /// frames written and not yet recorded when they are due ([`FILES_HASHED_TOGETHER`] says when),
    /// or a kill is (test hook).
    fn write(&self, mut job: Rendered, state: &ManifestState) -> Result<()> {
        if self.nexus.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
            // the counts `simulate -nexusfile` writes for this frame (same noise stream)
            let counts = crate::run::outputs::photon_counts(&job.cfg, &job.exp, &job.out.float);
            if let Some(w) = self.nexus.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                w.put(job.rec.frame - self.first_frame, counts)?;
            }
        }
        let mut sink = std::io::sink();
        crate::run::simulate::write_outputs(&job.cfg, &mut job.exp, &job.out, &mut sink)?;
        let named: Vec<PathBuf> = self.plan.outputs.iter().map(|(_, p)| PathBuf::from(frame_name(&p.to_string_lossy(), job.rec.frame))).collect();
        let full: Vec<PathBuf> = named.iter().map(|n| resolve_out(&job.cfg, n)).collect();
        let batch = {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            st.unhashed.push(Unhashed { rec: job.rec, named, full, pixels: job.out.float.len() });
            let files: usize = st.unhashed.iter().map(|u| u.full.len()).sum();
            let pixels: usize = st.unhashed.iter().map(|u| u.pixels).sum();
            let written = st.written();
            let due = !crate::io::sha256::hashing_together_pays()
                || files >= FILES_HASHED_TOGETHER
                || written + 1 == self.frames
                || pixels >= PIXELS_HASHED_TOGETHER
                || st.last_save.elapsed() > Duration::from_millis(500)
                || kill_after() == Some(written);
            if due { st.take_unhashed() } else { Vec::new() }
        };
        if let Some(b) = self.bar {
            b.inc(1);
        }
        self.record(batch, state, 1)
    }

    /// Hash the files of frames written (together, on up to `threads` threads: [`written_sha256s`])
    /// and record the frames in the manifest, saved at most every half second (and at the end by the
    /// caller).
    fn record(&self, batch: Vec<Unhashed>, state: &ManifestState, threads: usize) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let full: Vec<PathBuf> = batch.iter().flat_map(|u| u.full.iter().cloned()).collect();
        // a file that cannot be read even by name fails the set: none of its frames is recorded (a
        // resumed run renders them again), and the run stops with that error
        let mut sums = written_sha256s(&full, threads)?.into_iter();
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        let before = st.recorded;
        st.hashing = st.hashing.saturating_sub(batch.len());
        for Unhashed { mut rec, named, .. } in batch {
            for ((role, _), path) in self.plan.outputs.iter().zip(named) {
                let (sha256, bytes) = sums.next().expect("one checksum per file");
                rec.files.push(FileRecord { role: role.to_string(), path, bytes, sha256 });
            }
            st.manifest.frames.push(rec);
            st.recorded += 1;
        }
        let kill_now = kill_after().is_some_and(|n| before < n && n <= st.recorded);
        if kill_now || st.last_save.elapsed() > Duration::from_millis(500) {
            st.manifest.frames.sort_by_key(|r| r.frame);
            write_manifest(self.mpath, st.manifest)?;
            st.last_save = Instant::now();
        }
        for k in before + 1..=st.recorded {
            kill_hook(k);
        }
        Ok(())
    }
}

/// Render and write the frames: whole frames side by side, one per worker ([`frame_workers`]),
/// while there are at least as many frames left as workers ([`frames_side_by_side`]; one worker: one
/// thread does everything, as `--threads 1` asks); the rest (fewer frames than workers, or no
/// worker: the GPU, or memory for fewer than two frames on a machine of several cores) one after the
/// other on every thread ([`render_then_write`]). Every frame's files are the same bytes either way
/// (a frame's render and noise depend on nothing but the frame).
/// `geometry`: the first frame's pixel geometry, where [`prepare`] counted it in the memory.
fn render_and_write(plan: &Plan, todo: &[usize], (workers, geometry): (usize, Option<&crate::kernel::PixelGeometry>), inputs: &Inputs, sink: &FrameSink, manifest: &mut Manifest) -> Result<()> {
    let state: ManifestState = std::sync::Mutex::new(Progress { manifest, last_save: Instant::now(), recorded: 0, hashing: 0, unhashed: Vec::new() });
    let side_by_side = if workers >= 1 { todo.len() - todo.len() % workers } else { 0 };
    let (whole, rest) = todo.split_at(side_by_side);
    let rendered = frames_side_by_side(plan, whole, workers, inputs, geometry, sink, &state).and_then(|()| render_then_write(plan, rest, inputs, geometry, sink, &state));
    // the frames written before an error too: a resumed run keeps them; hashed on every worker's
    // thread, now idle (the last frame's files)
    let last = state.lock().unwrap_or_else(|e| e.into_inner()).take_unhashed();
    rendered.and(sink.record(last, &state, workers.max(1)))
}

/// Whether the series keeps the first frame's pixel geometry for the others: two or more frames
/// the planner renders on the CPU (`--backend cpu`, or `auto` without a device that takes `exp`).
fn keeps_geometry(plan: &Plan, todo: &[usize], exp: &Experiment) -> bool {
    todo.len() >= 2 && crate::kernel::kernel_for(exp, plan.base.run.render_options().backend) != crate::kernel::Backend::Gpu
}

/// Frames rendered side by side: one per thread asked for (`--threads`, else rayon's default), at
/// most one per core, and no more than `budget` holds at `frame_bytes` each beside the run's fixed
/// 32 MiB (so never more frames in memory than fit, where one after another would fit); 0 on the
/// GPU (one device, used a frame at a time).
fn frame_workers(plan: &Plan, frame_bytes: u64, budget: u64) -> usize {
    // (`auto` counts as the CPU here until `prepare` settles it: the larger count of frames in memory)
    if plan.base.run.backend == crate::run::config::BackendChoice::Gpu {
        return 0;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let asked = plan.base.run.threads.unwrap_or_else(rayon::current_num_threads);
    workers_that_fit(asked, cores, frame_bytes, budget)
}

/// `asked` threads, at most `cores`, at most as many frames of `frame_bytes` as `budget` holds beside
/// 32 MiB; 0 (every thread on one frame at a time) where several threads could run but fewer than
/// two frames fit.
fn workers_that_fit(asked: usize, cores: usize, frame_bytes: u64, budget: u64) -> usize {
    let fit = budget.saturating_sub(32 << 20) / frame_bytes.max(1);
    let threads = asked.clamp(1, cores.max(1));
    match threads.min(usize::try_from(fit).unwrap_or(usize::MAX)) {
        w if threads > 1 && w < 2 => 0,
        w => w,
    }
}

/// Each of `threads` workers renders and writes whole frames on one thread of its own (a rayon pool
/// of one, so the render's and the writers' parallel loops run in place): no hand-over between
/// threads within a frame, both cores busy to the end when `frames` is a multiple of `threads`.
/// Frames finish out of order; the manifest is sorted when it is saved.
fn frames_side_by_side(plan: &Plan, frames: &[usize], threads: usize, inputs: &Inputs, geometry: Option<&crate::kernel::PixelGeometry>, sink: &FrameSink, state: &ManifestState) -> Result<()> {
    if frames.is_empty() {
        return Ok(());
    }
    let pools = (0..threads)
        .map(|_| rayon::ThreadPoolBuilder::new().num_threads(1).build())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::setup(format!("cannot start {threads} threads: {e}")))?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let work = |pool: &rayon::ThreadPool| -> Result<()> {
        pool.install(|| loop {
            if failed.load(std::sync::atomic::Ordering::SeqCst) {
                return Ok(());
            }
            let Some(&k) = frames.get(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst)) else { return Ok(()) };
            let done = render_frame(plan, k, inputs, geometry, None).and_then(|job| sink.write(job, state));
            if done.is_err() {
                failed.store(true, std::sync::atomic::Ordering::SeqCst);
                return done;
            }
        })
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = pools.iter().map(|p| scope.spawn(|| work(p))).collect();
        join_first_error(handles, "series worker thread panicked")
    })
}

/// Wait for every thread; the first error among them (a panic as `panicked`), in spawn order.
fn join_first_error(handles: Vec<std::thread::ScopedJoinHandle<'_, Result<()>>>, panicked: &'static str) -> Result<()> {
    let mut res = Ok(());
    for h in handles {
        let w = h.join().unwrap_or_else(|_| Err(Error::setup(panicked)));
        if res.is_ok() {
            res = w;
        }
    }
    res
}

/// Render the frames in order while up to two writer threads write the previous ones (the noise
/// image is one serial random stream per frame, so two writers keep two noise streams going at once).
/// The first error, a renderer's or a writer's, is returned after every thread has stopped.
fn render_then_write(plan: &Plan, todo: &[usize], inputs: &Inputs, geometry: Option<&crate::kernel::PixelGeometry>, sink: &FrameSink, state: &ManifestState) -> Result<()> {
    if todo.is_empty() {
        return Ok(());
    }
    let threads = plan.base.run.threads;
    let writers = threads.unwrap_or(usize::MAX).clamp(1, 2);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Rendered>(writers);
    let rx = std::sync::Mutex::new(rx);
    let failed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| -> Result<()> {
        let (rx, failed) = (&rx, &failed);
        let handles: Vec<_> = (0..writers)
            .map(|_| {
                scope.spawn(move || -> Result<()> {
                    loop {
                        let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                        let Ok(job) = job else { return Ok(()) };
                        if let Err(e) = sink.write(job, state) {
                            failed.store(true, std::sync::atomic::Ordering::SeqCst);
                            return Err(e);
                        }
                    }
                })
            })
            .collect();
        let mut render_err = Ok(());
        let render_threads = Some(threads.unwrap_or_else(rayon::current_num_threads));
        for &k in todo {
            match render_frame(plan, k, inputs, geometry, render_threads) {
                Ok(job) => {
                    if !send_when_free(&tx, job, failed) {
                        break;
                    }
                }
                Err(e) => {
                    render_err = Err(e);
                    break;
                }
            }
        }
        drop(tx);
        join_first_error(handles, "series writer thread panicked").and(render_err)
    })
}

/// Frame k rendered on `render_threads` threads of a pool of their own (never rayon's global pool),
/// with `-add_float` added as in a single-image run. The writers' parallel loops (statistics, noise
/// blocks, conversions) run on the global pool: were the render on it too, every one of them would
/// queue behind the frame being rendered, and the writers would mostly wait.
fn render_frame(plan: &Plan, k: usize, inputs: &Inputs, geometry: Option<&crate::kernel::PixelGeometry>, render_threads: Option<usize>) -> Result<Rendered> {
    let rec = plan.frame(k)?;
    let cfg = plan.frame_config(&rec);
    let exp = crate::run::setup::build_experiment(&cfg, inputs)?;
    let mut out = crate::run::simulate::render_reusing(&exp, &cfg.run.render_options(), render_threads, geometry, &|_| {})?;
    // -add_float as in a single-image run (the same image under every frame)
    for p in &cfg.params.add_float {
        crate::run::simulate::add_into(&mut out.float, p)?;
    }
    Ok(Rendered { rec, cfg, exp, out })
}

/// Wait for a free writer (or a failed one, whose error is reported by the caller); false when the
/// job could not be handed over.
fn send_when_free(tx: &std::sync::mpsc::SyncSender<Rendered>, mut job: Rendered, failed: &std::sync::atomic::AtomicBool) -> bool {
    loop {
        if failed.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        match tx.try_send(job) {
            Ok(()) => return true,
            Err(std::sync::mpsc::TrySendError::Full(j)) => {
                job = j;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(std::sync::mpsc::TrySendError::Disconnected(_)) => return false,
        }
    }
}

/// Close the shard's NeXus file (renamed into place) and record it in the manifest.
fn finish_nexus(
    plan: &Plan,
    w: crate::io::nexus::NexusWriter,
    nx: &Path,
    first_frame: usize,
    manifest: &mut Manifest,
    quiet_user: bool,
    log_out: &mut dyn std::io::Write,
) -> Result<()> {
    let full = resolve_out(&plan.base, nx);
    let n = w.frames();
    w.finish()?;
    let (sha, bytes) = file_sha256(&full).map_err(|e| Error::Output { path: full.clone(), reason: format!("cannot read back: {e}") })?;
    manifest.sweep_files.push(SweepFile { role: "NeXus".into(), path: nx.to_path_buf(), first_frame, last_frame: first_frame + n - 1, bytes, sha256: sha });
    if !quiet_user {
        let _ = writeln!(log_out, "series: wrote {} frames {first_frame}..{} into the NeXus/NXmx file {}", n, first_frame + n - 1, full.display());
    }
    Ok(())
}


// ------------------------------------------------------------------------------------------ verify

/// What `--verify` found.
#[derive(Clone, Debug)]
pub struct VerifyReport {
    pub shards: usize,
    pub frames: usize,
    pub files: usize,
}

/// Check that the manifests `NAME.shard-*-of-*.json` (in `--out-dir` or the current directory)
/// describe one complete dataset: the same parameters, every shard 0..N present once, every frame
/// 1..total exactly once, every file present with its sha256. With series flags given, the
/// parameters must also be theirs.
pub fn verify(sa: &SeriesArgs) -> Result<VerifyReport> {
    let name = sa.name.clone().unwrap_or_else(|| "series".to_string());
    let cfg = &sa.config;
    let dir = cfg.output.out_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let prefix = format!("{name}.shard-");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| Error::file(&dir, format!("cannot list: {e}")))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|f| f.to_str()).is_some_and(|f| f.starts_with(&prefix) && f.ends_with(".json"))
        })
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(Error::file(&dir, format!("no manifests {prefix}*.json here (run the series first, or give --name / --out-dir)")));
    }
    // all of them are held at once: their sizes together must fit
    let mut total = 0u64;
    for p in &paths {
        total = total.saturating_add(std::fs::metadata(p).map(|m| m.len()).unwrap_or(0));
        check_manifest_memory("--verify", p, total)?;
    }
    let mut manifests = Vec::new();
    for p in &paths {
        manifests.push((p.clone(), read_manifest(p, "--verify")?));
    }
    let (p0, m0) = &manifests[0];
    if sa.frames.is_some() || sa.stills.is_some() {
        let plan = Plan::new(sa)?;
        if !plan.made_this(m0) {
            return Err(Error::file(p0, format!("not made by the flags given to --verify: {}", plan.differs_because(m0))));
        }
    }
    let n = m0.shard_count;
    // counts come from files: nothing below is sized by them
    let mut seen_shards: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
    let mut owner: HashMap<usize, PathBuf> = HashMap::new();
    let mut files = 0;
    for (p, m) in &manifests {
        if m.params_sha256 != m0.params_sha256 || m.total_frames != m0.total_frames || m.mode != m0.mode {
            return Err(Error::file(p, format!("parameters differ from {}", p0.display())));
        }
        if m.shard_count != n {
            return Err(Error::file(p, format!("shard of {} but {} is a shard of {n}: mixed runs in one directory", m.shard_count, p0.display())));
        }
        if m.shard_index >= n || !seen_shards.insert(m.shard_index) {
            return Err(Error::file(p, format!("shard {} twice or out of range", m.shard_index)));
        }
        let expect = shard_frames(m.total_frames, &Shard { index: m.shard_index, count: n, reason: String::new(), warning: None });
        for f in &m.sweep_files {
            let full = resolve_out(&cfg, &f.path);
            if f.first_frame > f.last_frame || !expect.contains(&f.first_frame) || !expect.contains(&f.last_frame) {
                return Err(Error::file(p, format!("{} holds frames {}..{} outside shard {}/{n}", f.path.display(), f.first_frame, f.last_frame, m.shard_index)));
            }
            match file_sha256(&full) {
                Ok((h, b)) if h == f.sha256 && b == f.bytes => files += 1,
                Ok(_) => return Err(Error::file(&full, format!("sha256 differs from {}", p.display()))),
                Err(e) => return Err(Error::file(&full, format!("missing or unreadable: {e}"))),
            }
        }
        for rec in &m.frames {
            if !expect.contains(&rec.frame) {
                return Err(Error::file(p, format!("frame {} does not belong to shard {}/{n}", rec.frame, m.shard_index)));
            }
            if let Some(prev) = owner.insert(rec.frame, p.clone()) {
                return Err(Error::file(p, format!("frame {} also in {}", rec.frame, prev.display())));
            }
            if rec.files.is_empty() && !in_sweep(&m.sweep_files, rec.frame) {
                return Err(Error::file(p, format!("frame {} lists no files", rec.frame)));
            }
            for f in &rec.files {
                let full = resolve_out(&cfg, &f.path);
                match file_sha256(&full) {
                    Ok((h, b)) if h == f.sha256 && b == f.bytes => files += 1,
                    Ok(_) => return Err(Error::file(&full, format!("sha256 differs from {} (frame {})", p.display(), rec.frame))),
                    Err(e) => return Err(Error::file(&full, format!("missing or unreadable (frame {}): {e}", rec.frame))),
                }
            }
        }
    }
    if seen_shards.len() < n {
        // the shards seen are distinct and below n: the first absent one is the first gap
        let i = seen_shards.iter().zip(0..).find(|(s, i)| **s != *i).map(|(_, i)| i).unwrap_or(seen_shards.len());
        return Err(Error::file(&dir, format!("no manifest for shard {i} of {n} ({name}.shard-{i}-of-{n}.json)")));
    }
    // every frame recorded is one of 1..=total, once: the first missing one is the first gap
    let mut recorded: Vec<usize> = owner.keys().copied().collect();
    recorded.sort_unstable();
    let first_missing = recorded.iter().zip(1..).find(|(k, i)| **k != *i).map(|(_, i)| i).unwrap_or(recorded.len() + 1);
    if recorded.len() < m0.total_frames {
        return Err(Error::file(
            &dir,
            format!(
                "dataset incomplete: {} of {} frames missing, first frame {first_missing} (rerun that shard with --resume)",
                m0.total_frames - recorded.len(),
                m0.total_frames
            ),
        ));
    }
    Ok(VerifyReport { shards: n, frames: m0.total_frames, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        move |k: &str| m.get(k).cloned()
    }

    #[test]
    fn names() {
        assert_eq!(frame_name("sweep_#####.img", 7), "sweep_00007.img");
        assert_eq!(frame_name("a#b##c", 3), "a3b03c");
        assert_eq!(frame_name("x_##.bin", 1234), "x_1234.bin");
        assert_eq!(template_name(Path::new("dir/intimage.img"), 900), PathBuf::from("dir/intimage_#####.img"));
        assert_eq!(template_name(Path::new("still"), 1_000_000), PathBuf::from("still_#######"));
        assert_eq!(template_name(Path::new("s_###.bin"), 9), PathBuf::from("s_###.bin"));
    }

    /// A manifest written before inputs were recorded (by the build of 2026-11-27, b44f0d6: this
    /// hash is from its `series ... --out-dir h1`) is still this run's; its folder spelled
    /// another way is not a change of parameters now.
    #[test]
    fn legacy_manifest_hash_is_recognised() {
        let args: Vec<String> = "-cell 70 80 90 85 95 105 -N 5 -detpixels 32 -default_F 100 -osc 1 --quiet --out-dir h1".split(' ').map(String::from).collect();
        assert_eq!(legacy_params_sha256(Mode::Rotation, 3, &args), "87fd2ef23ac6066d372e6c74ffa94940827034842b7d6352a2bc51d2670eda80");
        let mut moved = args.clone();
        *moved.last_mut().unwrap() = "./h1/".into();
        assert_eq!(params_sha256(Mode::Rotation, 3, &args, &[]), params_sha256(Mode::Rotation, 3, &moved, &[]));
        let mut joined = args[..args.len() - 2].to_vec();
        joined.extend(["--out-dir=h2".to_string(), "--threads=3".to_string()]);
        assert_eq!(params_sha256(Mode::Rotation, 3, &args, &[]), params_sha256(Mode::Rotation, 3, &joined, &[]));
        let input = |sha: &str| InputRecord { flag: "-hkl".into(), path: "f.hkl".into(), bytes: 9, sha256: sha.into() };
        assert_ne!(params_sha256(Mode::Rotation, 3, &args, &[input("aa")]), params_sha256(Mode::Rotation, 3, &args, &[input("bb")]));
    }

    #[test]
    fn shards_cover_every_frame_once() {
        for total in [1, 2, 7, 900, 1000] {
            for n in 1..6 {
                let mut all = Vec::new();
                for i in 0..n {
                    all.extend(shard_frames(total, &Shard { index: i, count: n, reason: String::new(), warning: None }));
                }
                assert_eq!(all, (1..=total).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn shard_from_environment() {
        let s = resolve_shard(None, &env_of(&[])).unwrap();
        assert_eq!((s.index, s.count), (0, 1));
        let s = resolve_shard(None, &env_of(&[("SLURM_ARRAY_TASK_ID", "5"), ("SLURM_ARRAY_TASK_MIN", "3"), ("SLURM_ARRAY_TASK_COUNT", "4")])).unwrap();
        assert_eq!((s.index, s.count), (2, 4));
        assert!(s.reason.contains("SLURM_ARRAY_TASK_ID=5"));
        let s = resolve_shard(None, &env_of(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "3"), ("SLURM_STEP_ID", "0")])).unwrap();
        assert_eq!((s.index, s.count), (1, 3));
        assert!(!s.reason.contains("outside") && s.warning.is_none(), "{s:?}");
        // an sbatch --ntasks=3 script's own shell (no srun): shard 0 of 3, said so, with the warning run says
        for step in [None, Some("4294967291"), Some("4294967294")] {
            let mut vars = vec![("SLURM_PROCID", "0"), ("SLURM_NTASKS", "3")];
            vars.extend(step.map(|v| ("SLURM_STEP_ID", v)));
            let s = resolve_shard(None, &env_of(&vars)).unwrap();
            assert_eq!((s.index, s.count), (0, 3));
            assert!(s.reason.contains("outside any srun job step"), "{}", s.reason);
            assert!(s.warning.as_deref().is_some_and(|w| w.contains("SLURM_NTASKS=3 but no srun job step")), "{s:?}");
        }
        let s = resolve_shard(None, &env_of(&[("PMI_RANK", "2"), ("PMI_SIZE", "3")])).unwrap();
        assert_eq!((s.index, s.count), (2, 3));
        // Open MPI wins over the Slurm task variables that mpirun inherits inside an allocation.
        let s = resolve_shard(None, &env_of(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2"), ("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2")]))
            .unwrap();
        assert_eq!((s.index, s.count), (1, 2));
        assert!(s.reason.contains("OMPI_COMM_WORLD_RANK=1"));
        // array × ranks
        let s = resolve_shard(None, &env_of(&[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_COUNT", "2"), ("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "3")]))
            .unwrap();
        assert_eq!((s.index, s.count), (4, 6));
        // explicit wins
        let s = resolve_shard(Some("2/3"), &env_of(&[("PMI_RANK", "0"), ("PMI_SIZE", "3")])).unwrap();
        assert_eq!((s.index, s.count), (2, 3));
        assert!(resolve_shard(Some("3/3"), &env_of(&[])).is_err());
        assert!(resolve_shard(None, &env_of(&[("PMI_RANK", "x"), ("PMI_SIZE", "3")])).is_err());
    }

    #[test]
    fn shard_arithmetic_never_overflows() {
        let m = usize::MAX;
        let s = |index, count| shard_frames(3, &Shard { index, count, reason: String::new(), warning: None });
        assert_eq!(s(m - 1, m), 3..=3);
        assert_eq!(s(m / 3 * 2 - 1, m), 2..=2);
        assert!(s(0, m).is_empty());
        let big = shard_frames(m, &Shard { index: 1, count: 2, reason: String::new(), warning: None });
        assert_eq!((*big.start(), *big.end()), (m / 2 + 1, m));
        // 2^32 × 2^32 shards do not fit: refused, not wrapped to 0 (a division by zero)
        let e = resolve_shard(None, &env_of(&[("SLURM_ARRAY_TASK_ID", "0"), ("SLURM_ARRAY_TASK_COUNT", "4294967296"), ("PMI_RANK", "0"), ("PMI_SIZE", "4294967296")]));
        assert!(e.unwrap_err().to_string().contains("PMI_SIZE"));
        assert!(seed_plus("-seed", 1, m).is_err());
        assert!(seed_plus("-seed", i64::MAX, 2).is_err());
        assert_eq!(seed_plus("-seed", -5, 3).unwrap(), -3);
    }

    #[test]
    fn side_by_side_frames_fit_the_cores_and_the_memory() {
        const MIB: u64 = 1 << 20;
        assert_eq!(workers_that_fit(2, 2, 4 * MIB, 1 << 40), 2);
        assert_eq!(workers_that_fit(8, 2, 4 * MIB, 1 << 40), 2);
        assert_eq!(workers_that_fit(0, 2, 4 * MIB, 1 << 40), 1);
        // 16 cores, frames of 100 MiB, 532 MiB free: five fit beside the 32 MiB
        assert_eq!(workers_that_fit(16, 16, 100 * MIB, 532 * MIB), 5);
        assert_eq!(workers_that_fit(16, 16, 100 * MIB, 232 * MIB), 2);
        // one frame fits: all 16 threads on it rather than one thread
        assert_eq!(workers_that_fit(16, 16, 100 * MIB, 150 * MIB), 0);
        assert_eq!(workers_that_fit(16, 16, 100 * MIB, 100 * MIB), 0);
        // one thread asked: that thread does everything
        assert_eq!(workers_that_fit(1, 16, 100 * MIB, 150 * MIB), 1);
        assert_eq!(workers_that_fit(1, 16, 100 * MIB, 100 * MIB), 0);
        assert_eq!(workers_that_fit(4, 16, 0, 0), 0);
    }

    #[test]
    fn items_come_back_in_order() {
        let mut o = InOrder::default();
        assert!(o.put(1, 'b').is_empty());
        assert!(o.put(3, 'd').is_empty());
        assert_eq!(o.put(0, 'a'), vec![(0, 'a'), (1, 'b')]);
        assert_eq!(o.put(2, 'c'), vec![(2, 'c'), (3, 'd')]);
        assert_eq!(o.put(4, 'e'), vec![(4, 'e')]);
        assert!(o.waiting.is_empty());
    }

    /// Haar-uniform rotations: every matrix element has mean 0 and mean square 1/3, and the rotation
    /// angle θ has E[cos θ] = −1/2 (density (1 − cos θ)/π on [0, π]). Checked on the rotation that the
    /// misset angles rebuild through `vec3::rotate` (the path a still takes).
    #[test]
    fn still_orientations_are_uniform() {
        let n = 20000;
        let mut mean = [0.0f64; 9];
        let mut sq = [0.0f64; 9];
        let mut cos_sum = 0.0;
        for k in 1..=n {
            let m = still_misset_deg(1, k);
            let r = [m[0] / RTD, m[1] / RTD, m[2] / RTD];
            let cols = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]].map(|e| crate::base::vec3::rotate(&e, r[0], r[1], r[2]));
            let mut trace = 0.0;
            for i in 0..3 {
                for j in 0..3 {
                    let v = cols[j][i];
                    mean[i * 3 + j] += v;
                    sq[i * 3 + j] += v * v;
                }
                trace += cols[i][i];
            }
            cos_sum += (trace - 1.0) / 2.0;
        }
        for i in 0..9 {
            assert!((mean[i] / n as f64).abs() < 0.02, "mean {i}: {}", mean[i] / n as f64);
            assert!((sq[i] / n as f64 - 1.0 / 3.0).abs() < 0.02, "square {i}: {}", sq[i] / n as f64);
        }
        assert!((cos_sum / n as f64 + 0.5).abs() < 0.02, "E[cos] = {}", cos_sum / n as f64);
    }
}
