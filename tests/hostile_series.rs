//! Hostile input, round 2, for `series` and for the standard output of every subcommand: shard
//! counts that overflow, frame counts near the integer maximum and huge manifests are refused before
//! anything is allocated; a refused series changes no file (not even the previous run's manifest);
//! every frame's seeds and names are checked, and colliding names refused, before the first frame is
//! rendered; a closed pipe as standard output ends quietly and a full device is exit 9, never a panic.
//! Each case runs the binary as a child under an address-space limit and a time limit: a runaway
//! allocation or a hang fails the test.

mod common;

use common::child::{limit_address_space, wait_or_kill};
use std::collections::BTreeMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_nanobragg-rs");
/// Address-space limit for child runs: far below what any refused case would allocate.
const AS_LIMIT: u64 = 3 << 30;

/// A small crystal and detector: quick frames.
const CRYSTAL: &[&str] = &[
    "-cell", "50", "60", "70", "90", "90", "90", "-default_F", "100", "-N", "4", "-lambda", "1", "-detpixels", "16", "-pixel", "0.4", "-distance",
    "60", "-osc", "0.1", "-nonoise", "-nopgm",
];

/// Where the child's standard output goes.
enum Out {
    Piped,
    /// A pipe whose reading end is closed before the child starts: every write fails (EPIPE).
    ClosedPipe,
    /// A file (a full device made with mknod in the temporary folder).
    File(PathBuf),
}

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two new descriptors into fds; each is owned exactly once below.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    Stdio::from(writer)
}

/// Run `nanobragg-rs args…` in `dir` under the address-space limit, killed after 60 s.
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)], out: Out) -> Ran {
    let mut c = Command::new(BIN);
    c.current_dir(dir).args(args).env_remove("RAYON_NUM_THREADS").env_remove("NANOBRAGG_MAX_MEMORY");
    for v in [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "PMI_RANK",
        "PMI_SIZE",
        "NANOBRAGG_SERIES_KILL_AFTER",
    ] {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::null()).stderr(Stdio::piped());
    match out {
        Out::Piped => c.stdout(Stdio::piped()),
        Out::ClosedPipe => c.stdout(closed_pipe()),
        Out::File(p) => c.stdout(std::fs::OpenOptions::new().write(true).open(p).unwrap()),
    };
    limit_address_space(&mut c, AS_LIMIT);
    let child = c.spawn().expect("start nanobragg-rs");
    let o = wait_or_kill(child, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{args:?} {e}"));
    Ran { code: o.status.code(), stdout: String::from_utf8_lossy(&o.stdout).into(), stderr: String::from_utf8_lossy(&o.stderr).into() }
}

fn series_args(extra: &[&str]) -> Vec<String> {
    let mut v = vec!["series".to_string()];
    v.extend(CRYSTAL.iter().map(|s| s.to_string()));
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn series(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Ran {
    let a = series_args(extra);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    run(dir, &a, env, Out::Piped)
}

/// Every file under `dir` (recursively) with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            m.insert(p.clone(), b"<dir>".to_vec());
            m.extend(snapshot(&p));
        } else if p.is_file() {
            m.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    m
}

/// Exit 9, one line on stderr containing `want`, no panic.
fn assert_refused(r: &Ran, want: &str, ctx: &str) {
    assert_eq!(r.code, Some(9), "{ctx}: exit {:?}\n{}{}", r.code, r.stdout, r.stderr);
    assert!(!r.stderr.contains("panicked"), "{ctx}: panic: {}", r.stderr);
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{ctx}: not one line: {}", r.stderr);
    assert!(r.stderr.contains(want), "{ctx}: {:?} does not say {want:?}", r.stderr);
}

/// A series run in `dir` is refused naming `want`, and no file under `dir` is created or changed.
fn series_refused(dir: &Path, extra: &[&str], env: &[(&str, &str)], want: &str) {
    let before = snapshot(dir);
    let r = series(dir, extra, env);
    assert_refused(&r, want, &format!("{extra:?} {env:?}"));
    let after = snapshot(dir);
    assert_eq!(after.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>(), "{extra:?}: files created or removed");
    for (p, b) in &before {
        assert!(after[p] == *b, "{extra:?}: {} changed", p.display());
    }
}

// ------------------------------------------------------------------------------------ class 2, 3

#[test]
fn shard_counts_that_overflow_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let big = "4294967296"; // 2^32: array count × ranks is 2^64, which wrapped to 0 (a division by zero)
    for (rank, size) in [("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")] {
        let env = [("SLURM_ARRAY_TASK_ID", "0"), ("SLURM_ARRAY_TASK_COUNT", big), (rank, "0"), (size, big)];
        series_refused(p, &["--frames", "3"], &env, size);
    }
    // one level alone may be as large as a number can be: nothing overflows (the last shard has frame 3)
    let max = usize::MAX.to_string();
    let last = (usize::MAX - 1).to_string();
    for env in [vec![("SLURM_ARRAY_TASK_ID", last.as_str()), ("SLURM_ARRAY_TASK_COUNT", max.as_str())], vec![("PMI_RANK", last.as_str()), ("PMI_SIZE", max.as_str())]] {
        let r = series(p, &["--frames", "3", "--quiet"], &env);
        assert_eq!(r.code, Some(0), "{env:?}: {}", r.stderr);
    }
    let shard = format!("{last}/{max}");
    let r = series(p, &["--frames", "3", "--shard", &shard], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("frames 3..3 (1 frames)"), "{}", r.stdout);
    // frames are split exactly even where index × total does not fit in 64 bits
    let r = series(p, &["--frames", "3", "--shard", &format!("{}/{max}", usize::MAX / 3 * 2 - 1)], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("frames 2..2 (1 frames)"), "{}", r.stdout);
}

#[test]
fn huge_frame_counts_are_refused_before_allocating() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let max = usize::MAX.to_string();
    // capacity overflow (a panic) and an 8 GB frame list (an abort) before
    series_refused(p, &["--frames", &max], &[], "--frames: ");
    series_refused(p, &["--frames", "1000000000"], &[], "--frames: 1000000000 frames");
    series_refused(p, &["--stills", "1000000000", "--orientation", "random"], &[], "--stills: ");
    series_refused(p, &["--frames", "1000000000", "--shard", "0/2"], &[], "--frames: 500000000 frames");
    assert!(std::fs::read_dir(p).unwrap().next().is_none());
    // a few frames of a huge dataset are fine
    let r = series(p, &["--frames", "1000000000", "--only", "2-3", "--quiet"], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(p.join("floatimage_0000000002.bin").is_file() && p.join("intimage_0000000003.img").is_file());
    let r = series(p, &["--frames", &max, "--only", &format!("{max}-{max}"), "--quiet", "-seed", "-5"], &[]);
    assert_refused(&r, "-seed: ", "the last frame of usize::MAX");
}

/// A manifest from a real run, rewritten by `edit`, in a fresh folder.
fn edited_manifest(edit: impl Fn(&mut serde_json::Value)) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = series(d.path(), &["--frames", "3", "--quiet"], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mp = d.path().join("series.shard-0-of-1.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&mp).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&mp, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    d
}

#[test]
fn verify_of_huge_manifests_is_refused() {
    // a manifest of 8 GB (sparse): read whole before, an abort under the limit
    let d = tempfile::tempdir().unwrap();
    let f = std::fs::File::create(d.path().join("series.shard-0-of-1.json")).unwrap();
    f.set_len(8 << 30).unwrap();
    let r = run(d.path(), &["series", "--verify"], &[], Out::Piped);
    assert_refused(&r, "--verify: the manifest", "8 GB manifest");
    let r = series(d.path(), &["--frames", "3", "--resume"], &[]);
    assert_refused(&r, "--resume: the manifest", "8 GB manifest, --resume");

    // counts in a manifest size nothing: a table of 2^63 shards (an abort), a loop over 2^63 frames (a hang)
    let huge = 1u64 << 63;
    let d = edited_manifest(|v| v["total_frames"] = huge.into());
    let r = run(d.path(), &["series", "--verify"], &[], Out::Piped);
    assert_refused(&r, &format!("{} of {huge} frames missing, first frame 4", huge - 3), "huge total");
    let d = edited_manifest(|v| {
        v["total_frames"] = huge.into();
        v["shard_count"] = huge.into();
        v["frames"] = serde_json::json!([]);
    });
    let r = run(d.path(), &["series", "--verify"], &[], Out::Piped);
    assert_refused(&r, &format!("no manifest for shard 1 of {huge}"), "huge shard count");
}

// ------------------------------------------------------------------------------------ class 4, 5, 8

#[test]
fn a_refused_series_changes_no_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let r = series(p, &["--frames", "3", "--quiet", "-floatfile", "f_#.bin", "-intfile", "i_#.img"], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let same = ["--frames", "3", "--quiet", "-floatfile", "f_#.bin", "-intfile", "i_#.img"];
    // an input that cannot be read: the manifest of the previous run was rewritten before
    std::fs::write(p.join("bad.hkl"), "hello\n").unwrap();
    let mut a = same.to_vec();
    a.extend(["-hkl", "bad.hkl"]);
    series_refused(p, &a, &[], "bad.hkl");
    let mut a = same.to_vec();
    a.extend(["-hkl", "missing.hkl"]);
    series_refused(p, &a, &[], "missing.hkl");
    // a seed past the largest at frame 3: frames 1 and 2 were rendered before
    let mut a = same.to_vec();
    a.extend(["-seed", "2147483646"]);
    series_refused(p, &a, &[], "-seed: ");
    // frame 3's int image cannot be written (a directory is in the way)
    std::fs::remove_file(p.join("i_3.img")).unwrap();
    std::fs::create_dir(p.join("i_3.img")).unwrap();
    series_refused(p, &same, &[], "i_3.img");
    // a frame needing more memory than there is: refused before anything is written
    let mut a = same.to_vec();
    a.extend(["-detpixels", "40000"]);
    series_refused(p, &a, &[], "memory");
    // in a new --out-dir: the folder is not left behind
    let mut a = same.to_vec();
    a.extend(["--out-dir", "new", "-intfile", "sub/i_#.img"]);
    series_refused(p, &a, &[], "sub");
}

#[test]
fn seeds_and_names_of_every_frame_are_checked_before_the_first_is_rendered() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    series_refused(p, &["--frames", "5", "-seed", "2147483645"], &[], "-seed: ");
    series_refused(p, &["--stills", "5", "--orientation", "random", "-mosaic_seed", "2147483645"], &[], "-mosaic_seed: ");
    std::fs::create_dir(p.join("floatimage_00004.bin")).unwrap();
    series_refused(p, &["--frames", "5"], &[], "floatimage_00004.bin");
    std::fs::remove_dir(p.join("floatimage_00004.bin")).unwrap();
    assert!(std::fs::read_dir(p).unwrap().next().is_none());
}

#[test]
fn colliding_frame_names_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    // frame 11's float image and frame 1's int image are both a11.img
    series_refused(p, &["--frames", "12", "-floatfile", "a#.img", "-intfile", "a1#.img"], &[], "a11.img");
    // a frame's file is the manifest
    series_refused(p, &["--frames", "1", "-floatfile", "series.shard-0-of-#.json"], &[], "the manifest");
    series_refused(p, &["--frames", "4", "--shard", "3/4", "--name", "x", "-intfile", "x.shard-3-of-#.json"], &[], "the manifest");
    // the same file through another spelling of its folder
    std::fs::create_dir(p.join("d")).unwrap();
    series_refused(p, &["--frames", "3", "-floatfile", "d/f#.bin", "-intfile", "d/../d/f#.bin"], &[], "f1.bin");
    assert_eq!(snapshot(p).len(), 1);
}

// ------------------------------------------------------------------------------------ class 10

/// The commands checked, each with the files it must still write when its standard output fails.
fn stdout_cases(p: &Path) -> Vec<(Vec<String>, Vec<&'static str>)> {
    std::fs::write(p.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    std::fs::write(p.join("atoms.txt"), "0 0 0 1\n1 1 1 1\n").unwrap();
    std::fs::write(p.join("in.bin"), [0u8, 0, 160, 64].repeat(256)).unwrap(); // 16×16 pixels of 5.0
    let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    let mut verify = vec!["series".to_string(), "--verify".to_string()];
    verify.extend(["--out-dir".to_string(), "sr".to_string()]);
    let mut s = series_args(&["--frames", "2", "--out-dir", "sr"]);
    s.push("--name".into());
    s.push("series".into());
    vec![
        (s, vec!["sr/floatimage_00002.bin", "sr/series.shard-0-of-1.json"]),
        (verify, vec![]),
        (words("noisify -floatfile in.bin -detpixels 16 -noisefile n.img"), vec!["n.img"]),
        (words("nonbragg -stol w.stol -detpixels 16 -floatfile nb.bin"), vec!["nb.bin"]),
        (words("nearbragg -file atoms.txt -detpixels 8 -floatfile near.bin"), vec!["near.bin"]),
        (words("matrix -cell 10 20 30 90 90 90"), vec![]),
        (words("float-add in.bin in.bin -o sum.bin"), vec!["sum.bin"]),
    ]
}

#[test]
fn standard_output_closed_or_full() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let full = p.join("full");
    let have_full = Command::new("mknod").arg(&full).args(["c", "1", "7"]).status().map(|s| s.success()).unwrap_or(false);
    if !have_full {
        println!("SKIPPED: the full-device cases because mknod failed (not root?)");
    }
    for (args, made) in stdout_cases(p) {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        for f in &made {
            let _ = std::fs::remove_file(p.join(f));
        }
        // a closed pipe (`| head`): quiet, exit 0, the files written all the same
        let r = run(p, &a, &[], Out::ClosedPipe);
        assert_eq!(r.code, Some(0), "{a:?} into a closed pipe: {}", r.stderr);
        assert!(!r.stderr.contains("panicked") && !r.stderr.contains("error"), "{a:?} into a closed pipe: {}", r.stderr);
        for f in &made {
            assert!(p.join(f).is_file(), "{a:?} into a closed pipe: {f} not written");
        }
        if have_full {
            // a full device: exit 9 with one line naming standard output, never success
            let r = run(p, &a, &[], Out::File(full.clone()));
            assert_refused(&r, "standard output", &format!("{a:?} into a full device"));
        }
    }
}
