//! A bounded fuzz test of every subcommand: random argument vectors made of the subcommands' own
//! flags and hostile values (empty, huge, tiny, negative, NaN, inf, not a number, past an int, not
//! UTF-8, a folder, a dangling link, a link to a folder, a device node made in the temporary
//! folder), each run as a child under an address-space cap and a time limit. Asserted: no panic,
//! no abort or other signal, no hang, exit 0 or 9 (9 with one line on stderr), and no file written
//! outside the temporary folder (every name given is inside it; the run's folder is the temporary
//! folder).
//!
//! The seed is `NANOBRAGG_FUZZ_SEED` or the clock, printed first, so a failure reproduces:
//! `NANOBRAGG_FUZZ_SEED=<seed> cargo test --release --test fuzz -- --nocapture`. The run stops after
//! `NANOBRAGG_FUZZ_SECONDS` (default 60) or 4,000 cases.

use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::ExitStatusExt;

mod common;

use common::child::{limit_address_space, wait_or_kill};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nanobragg-rs");
const AS_LIMIT: u64 = 3 << 30;
/// A case that runs longer than this is a hang.
const CASE_LIMIT: Duration = Duration::from_secs(60);
const MAX_CASES: usize = 4000;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// Hostile values, as bytes (some are not UTF-8); paths are relative to the temporary folder.
fn values() -> Vec<Vec<u8>> {
    let words = [
        "", "0", "-1", "nan", "inf", "-inf", "abc", "1e308", "-1e308", "1e-308", "2147483648", "-2147483649", "99999999999999999999",
        "1,2", "0x10", "dir", "dangling", "dirlink", "null", "in.bin", "at.txt", "w.stol", "A.mat", "m.pdb", "out.bin", "sub/../out2.bin",
    ];
    let mut v: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
    v.push(b"\xff\xfe.bin".to_vec());
    v.push(b"n\xc3".to_vec());
    v
}

/// Each subcommand with the arguments of a small valid run and its flags.
fn subcommands() -> Vec<(&'static str, Vec<&'static str>, Vec<String>)> {
    let flag_words = |usage: &str| -> Vec<String> {
        usage.split(|c: char| c.is_whitespace() || c == '[' || c == ']' || c == '|').filter(|w| w.starts_with('-') && w.len() > 1 && !w.starts_with("--")).map(String::from).collect()
    };
    let mut simulate: Vec<String> = nanobragg::cli::flags::FLAGS.iter().flat_map(|f| std::iter::once(f.name).chain(f.aliases.iter().copied())).map(String::from).collect();
    simulate.retain(|f| f != "--help" && f != "-h");
    vec![
        ("simulate", "-cell 50 50 50 90 90 90 -default_F 10 -N 2 -detpixels 8 -noprogress".split(' ').collect(), simulate.clone()),
        ("series", "--frames 2 -osc 0.1 -cell 50 50 50 90 90 90 -default_F 10 -N 2 -detpixels 8".split(' ').collect(), simulate),
        ("noisify", "-floatfile in.bin -detpixels 8".split(' ').collect(), flag_words(nanobragg::cli::noisify::NOISIFY_USAGE)),
        ("nonbragg", "-stol w.stol -detpixels 8 -noprogress".split(' ').collect(), flag_words(nanobragg::cli::nonbragg::NONBRAGG_USAGE)),
        ("nearbragg", "-file at.txt -detpixels 8 -noprogress".split(' ').collect(), flag_words(nanobragg::cli::nearbragg::NEARBRAGG_USAGE)),
        ("float-add", "in.bin in.bin -o sum.bin".split(' ').collect(), vec!["-scale".into(), "-o".into()]),
        ("matrix", "-cell 50 50 50 90 90 90".split(' ').collect(), flag_words(nanobragg::apps::matrix::MATRIX_USAGE)),
    ]
}

/// The temporary folder's inputs and hostile paths.
fn prepare(d: &Path) -> bool {
    std::fs::write(d.join("in.bin"), [5.0f32; 64].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    std::fs::write(d.join("at.txt"), "1 2 3\n4 5 6\n").unwrap();
    std::fs::write(d.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    std::fs::write(d.join("m.pdb"), "CRYST1   50.000   50.000   50.000  90.00  90.00  90.00 P 1           1\nATOM      1  N   ALA A   1      10.000  10.000  10.000  1.00 20.00           N\nEND\n").unwrap();
    let ok = Command::new(BIN).current_dir(d).args(["matrix", "-cell", "50", "50", "50", "90", "90", "90", "-o", "A.mat"]).status().unwrap().success();
    assert!(ok);
    std::fs::create_dir(d.join("dir")).unwrap();
    std::os::unix::fs::symlink("missing/target", d.join("dangling")).unwrap();
    std::os::unix::fs::symlink("dir", d.join("dirlink")).unwrap();
    // a null device of our own (never the system's)
    Command::new("mknod").arg(d.join("null")).args(["c", "1", "3"]).status().is_ok_and(|s| s.success())
}

fn run_case(d: &Path, args: &[Vec<u8>]) -> Result<(), String> {
    let mut c = Command::new(BIN);
    c.current_dir(d).args(args.iter().map(|a| std::ffi::OsString::from_vec(a.clone())));
    c.env_remove("RAYON_NUM_THREADS").env_remove("NANOBRAGG_MAX_MEMORY").env("NANOBRAGG_MAX_MEMORY", "1G");
    c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    limit_address_space(&mut c, AS_LIMIT);
    let child = c.spawn().map_err(|e| e.to_string())?;
    let out = wait_or_kill(child, CASE_LIMIT)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(sig) = out.status.signal() {
        return Err(format!("killed by signal {sig}: {stderr}"));
    }
    if stderr.contains("panicked") || out.status.code() == Some(101) {
        return Err(format!("panicked: {stderr}"));
    }
    match out.status.code() {
        Some(0) => Ok(()),
        Some(9) => {
            let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
            if errors.len() == 1 {
                Ok(())
            } else {
                Err(format!("exit 9 with {} error lines: {stderr}", errors.len()))
            }
        }
        Some(code) => Err(format!("exit {code}: {stderr}")),
        None => Err("no exit status".into()),
    }
}

#[test]
fn random_hostile_command_lines_never_panic_hang_or_abort() {
    let seed: u64 = std::env::var("NANOBRAGG_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    });
    let budget = Duration::from_secs(std::env::var("NANOBRAGG_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(60));
    println!("fuzz seed: {seed} (rerun with NANOBRAGG_FUZZ_SEED={seed})");
    eprintln!("fuzz seed: {seed} (rerun with NANOBRAGG_FUZZ_SEED={seed})");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    if !prepare(d) {
        println!("fuzz: no device node (mknod failed: not root?); the 'null' value is an absent file");
    }
    let (mut rng, vals, subs) = (Rng(seed), values(), subcommands());
    let t = Instant::now();
    let mut failures = Vec::new();
    let mut cases = 0;
    while cases < MAX_CASES && t.elapsed() < budget {
        let (cmd, base, flags) = rng.pick(&subs);
        let mut args: Vec<Vec<u8>> = vec![cmd.as_bytes().to_vec()];
        args.extend(base.iter().map(|w| w.as_bytes().to_vec()));
        for _ in 0..1 + rng.below(3) {
            args.push(rng.pick(flags).as_bytes().to_vec());
            for _ in 0..rng.below(4) {
                args.push(rng.pick(&vals).clone());
            }
        }
        if let Err(e) = run_case(d, &args) {
            let shown: Vec<String> = args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            failures.push(format!("{shown:?}: {e}"));
        }
        cases += 1;
    }
    println!("fuzz: {cases} cases in {:.1} s, {} failures", t.elapsed().as_secs_f64(), failures.len());
    assert!(failures.is_empty(), "seed {seed}: {} of {cases} cases failed:\n{}", failures.len(), failures.join("\n"));
}
