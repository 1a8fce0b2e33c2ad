//! Measuring runs: whole-process wall time and peak RSS of a child (`wait4`, the child's own rusage),
//! the in-process high-water mark (`VmHWM` in /proc/self/status, reset through /proc/self/clear_refs),
//! the phase split our `simulate` writes as JSON, and float images.

use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One whole-process run (ours or the C's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessRun {
    /// 0-based; warmup runs come first and are excluded from the statistics.
    pub index: usize,
    pub warmup: bool,
    /// Wall time from spawn to reaping the child.
    pub wall_s: f64,
    /// The child's peak resident set (its own `ru_maxrss` from wait4), MiB.
    pub peak_rss_mb: Option<f64>,
    /// Exit code (None when killed by a signal).
    pub exit_code: Option<i32>,
    /// Exited 0 and wrote a float image of the expected size.
    pub ok: bool,
    /// Why the run is not ok (exit status, missing or short float image), with the end of its stderr.
    pub error: Option<String>,
}

impl ProcessRun {
    /// A run as measured, counted ok until a check says otherwise.
    pub fn finished(index: usize, warmup: bool, r: &ChildResult) -> Self {
        ProcessRun { index, warmup, wall_s: r.wall_s, peak_rss_mb: r.peak_rss_mb, exit_code: r.exit_code, ok: true, error: None }
    }
}

/// The phase split of one Rust run (cold: parsed from the child's stderr; warm: timed in process).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    pub index: usize,
    pub warmup: bool,
    pub setup_s: f64,
    pub render_s: f64,
    pub io_s: f64,
    /// In-process runs only: high-water mark of this process during the run, MiB.
    pub peak_rss_mb: Option<f64>,
}

impl Phases {
    pub fn total_s(&self) -> f64 {
        self.setup_s + self.render_s + self.io_s
    }
}

/// What a finished child left behind.
pub struct ChildResult {
    pub wall_s: f64,
    pub peak_rss_mb: Option<f64>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// First argument that puts `bench-detailed` into its child-measuring mode (see [`measure_child_main`]).
pub const MEASURE_CHILD_ARG: &str = "__measure-child";

/// Run `program args` in `cwd` with stdout/stderr captured to files there (no pipe can fill up),
/// timing it from spawn to reap and reading its own peak RSS with `wait4`.
///
/// On Linux a child starts its `ru_maxrss` at the resident size of the process that forked it, so a
/// child forked by this (large, warm-run) process would report at least our size. When running as
/// `bench-detailed`, each child is therefore started by a small copy of ourselves in
/// [`MEASURE_CHILD_ARG`] mode, which forks it while tiny and reports its wall time and peak RSS.
pub fn run_child(program: &Path, args: &[String], cwd: &Path, env: &[(String, String)]) -> std::io::Result<ChildResult> {
    let out_path = cwd.join(".bench-stdout");
    let err_path = cwd.join(".bench-stderr");
    let result_path = cwd.join(".bench-result");
    let wrapper = std::env::current_exe().ok().filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("bench-detailed")));
    let mut cmd = match &wrapper {
        Some(w) => {
            let mut c = Command::new(w);
            c.arg(MEASURE_CHILD_ARG).arg(&result_path).arg(program);
            c
        }
        None => Command::new(program),
    };
    cmd.args(args).current_dir(cwd).stdin(Stdio::null()).stdout(File::create(&out_path)?).stderr(File::create(&err_path)?);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let _ = std::fs::remove_file(&result_path);
    let t0 = Instant::now();
    let child = cmd.spawn()?;
    let (status, rusage) = wait_rusage(child)?;
    let mut wall_s = t0.elapsed().as_secs_f64();
    let read = |p: &Path| std::fs::read(p).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let (mut exit_code, mut signal, mut peak_rss_mb) = status_parts(status, rusage);
    if wrapper.is_some() {
        // what the wrapper measured (see measure_child_main)
        match std::fs::read(&result_path).ok().and_then(|b| serde_json::from_slice::<ChildOutcome>(&b).ok()) {
            Some(o) => {
                wall_s = o.wall_s;
                peak_rss_mb = o.peak_rss_mb;
                exit_code = o.exit_code;
                signal = o.signal;
            }
            None => {
                return Err(std::io::Error::other(format!("cannot start {}: {}", program.display(), tail_lines(&read(&err_path), 3))))
            }
        }
    }
    Ok(ChildResult { wall_s, peak_rss_mb, exit_code, signal, stdout: read(&out_path), stderr: read(&err_path) })
}

/// What the `__measure-child` wrapper measured of its child, written as JSON to its RESULT file.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildOutcome {
    pub wall_s: f64,
    pub peak_rss_mb: Option<f64>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

/// `bench-detailed __measure-child RESULT PROGRAM ARGS...`: run PROGRAM (inheriting cwd, stdio and
/// environment), reap it with `wait4` and write a [`ChildOutcome`] to RESULT.
pub fn measure_child_main(args: &[OsString]) -> i32 {
    let (Some(result), Some(program)) = (args.first(), args.get(1)) else {
        eprintln!("usage: bench-detailed {MEASURE_CHILD_ARG} RESULT PROGRAM [ARGS...]");
        return 2;
    };
    let t0 = Instant::now();
    let child = match Command::new(program).args(&args[2..]).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot run {}: {e}", Path::new(program).display());
            return 127;
        }
    };
    let Ok((status, rusage)) = wait_rusage(child) else { return 2 };
    let wall_s = t0.elapsed().as_secs_f64();
    let (exit, sig, rss) = status_parts(status, rusage);
    let json = serde_json::to_vec(&ChildOutcome { wall_s, peak_rss_mb: rss, exit_code: exit, signal: sig }).expect("numbers always serialize");
    if std::fs::write(result, json).is_err() {
        return 2;
    }
    0
}

#[cfg(unix)]
type RawStatus = libc::c_int;
#[cfg(unix)]
type RawRusage = Option<libc::rusage>;
#[cfg(not(unix))]
type RawStatus = std::process::ExitStatus;
#[cfg(not(unix))]
type RawRusage = ();

/// Reap the child with `wait4`, which returns that child's own rusage (RUSAGE_CHILDREN would give the
/// maximum over every child ever reaped, so one large C run would mask every later run).
#[cfg(unix)]
fn wait_rusage(child: std::process::Child) -> std::io::Result<(RawStatus, RawRusage)> {
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; wait4 fills it in for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is a child of this process that nothing else waits for (we own `child`, and
        // dropping a std Child neither waits nor kills).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    drop(child);
    Ok((status, Some(ru)))
}

#[cfg(not(unix))]
fn wait_rusage(mut child: std::process::Child) -> std::io::Result<(RawStatus, RawRusage)> {
    Ok((child.wait()?, ()))
}

#[cfg(unix)]
fn status_parts(status: RawStatus, ru: RawRusage) -> (Option<i32>, Option<i32>, Option<f64>) {
    let exit = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let sig = libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status));
    // Linux reports ru_maxrss in KiB (macOS in bytes).
    let scale = if cfg!(target_os = "macos") { 1.0 / (1024.0 * 1024.0) } else { 1.0 / 1024.0 };
    let rss = ru.map(|r| r.ru_maxrss as f64 * scale).filter(|&m| m > 0.0);
    (exit, sig, rss)
}

#[cfg(not(unix))]
fn status_parts(status: RawStatus, _ru: RawRusage) -> (Option<i32>, Option<i32>, Option<f64>) {
    (status.code(), None, None)
}

/// Peak resident set of this process so far (VmHWM), MiB; None where /proc is unavailable.
pub fn self_peak_rss_mb() -> Option<f64> {
    proc_status_kb("VmHWM:").map(|kb| kb / 1024.0)
}

/// Current resident set of this process (VmRSS), MiB.
pub fn self_rss_mb() -> Option<f64> {
    proc_status_kb("VmRSS:").map(|kb| kb / 1024.0)
}

fn proc_status_kb(key: &str) -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse::<f64>().ok()
}

/// Reset this process's peak RSS to its current RSS (Linux ≥ 4.0: write 5 to /proc/self/clear_refs),
/// so the next [`self_peak_rss_mb`] measures one warm iteration. Returns whether the reset worked.
pub fn reset_self_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The phase split our `simulate` wrote as JSON to the file named by
/// [`nanobragg::run::simulate::TIMINGS_JSON_ENV`].
pub fn read_timings(path: &Path) -> anyhow::Result<nanobragg::run::simulate::PhaseTimings> {
    let bytes = std::fs::read(path)?;
    Ok(serde_json::from_slice(&bytes)?)
}

/// A little-endian f32 image as nanoBragg writes it (`-floatfile`).
pub fn read_float_image(path: &Path) -> std::io::Result<Vec<f32>> {
    let b = std::fs::read(path)?;
    Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// The last `n` lines of a text (for error messages).
pub fn tail_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// A scratch directory (`tempfile`'s) under the system temp folder, removed when dropped unless kept,
/// and on SIGINT, SIGTERM or SIGHUP (a destructor does not run when a signal ends the process, and a
/// 4096² run leaves ~200 MiB of images there).
pub struct WorkDir {
    pub path: PathBuf,
    dir: Option<tempfile::TempDir>,
}

/// Scratch directories that a signal removes (those not kept).
static SCRATCH: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn scratch() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    SCRATCH.lock().unwrap_or_else(|e| e.into_inner())
}

/// Once per process: on SIGINT, SIGTERM or SIGHUP remove every registered scratch directory and exit
/// with 128 + the signal number. A child being measured gets the terminal's SIGINT itself; after a
/// SIGTERM to this process alone it finishes its run in the removed directory and exits.
fn install_scratch_cleanup() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else { return };
        let _ = std::thread::Builder::new().name("bench-signals".into()).spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let dirs = scratch();
                for d in dirs.iter() {
                    let _ = std::fs::remove_dir_all(d);
                }
                eprintln!("bench-detailed: interrupted (signal {sig}); scratch directory removed, no report written");
                std::process::exit(128 + sig);
            }
        });
    });
}

impl WorkDir {
    pub fn new(prefix: &str) -> std::io::Result<WorkDir> {
        install_scratch_cleanup();
        let mut reg = scratch();
        let dir = tempfile::Builder::new().prefix(&format!("{prefix}-")).tempdir()?;
        reg.push(dir.path().to_path_buf());
        Ok(WorkDir { path: dir.path().to_path_buf(), dir: Some(dir) })
    }

    /// Leave the directory in place when this is dropped (or a signal ends the run).
    pub fn keep(&mut self) {
        if let Some(d) = self.dir.take() {
            scratch().retain(|p| p != d.path());
            let _ = d.keep();
        }
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Some(d) = self.dir.take() {
            let mut reg = scratch();
            reg.retain(|p| p != d.path());
            drop(d); // removed under the lock: the signal handler never races the removal
        }
    }
}

/// `OsString` arguments to `String`s (for clap-free callers).
pub fn os_args_to_strings(args: impl IntoIterator<Item = OsString>) -> Vec<String> {
    args.into_iter().map(|a| a.to_string_lossy().into_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_json_is_read() {
        let w = WorkDir::new("nb-measure-test").unwrap();
        let p = w.path.join("t.json");
        std::fs::write(&p, r#"{"setup_s":0.002,"render_s":0.004,"io_s":0.0,"resolution_s":1e-9,"pixels":4096,"steps":1}"#).unwrap();
        let t = read_timings(&p).unwrap();
        assert_eq!((t.setup_s, t.render_s, t.io_s, t.resolution_s, t.pixels, t.steps), (0.002, 0.004, 0.0, 1e-9, 4096, 1));
        std::fs::write(&p, "done: 4096 pixels, 1 steps, setup 0.002 s, render 0.004 s, output 0.000 s").unwrap();
        assert!(read_timings(&p).is_err());
        assert!(read_timings(&w.path.join("missing.json")).is_err());
    }

    #[test]
    fn child_runs_are_timed_and_measured() {
        let w = WorkDir::new("nb-measure-test").unwrap();
        let r = run_child(Path::new("/bin/sh"), &["-c".into(), "echo out; echo err >&2; exit 3".into()], &w.path, &[]).unwrap();
        assert_eq!(r.exit_code, Some(3));
        assert_eq!(r.stdout.trim(), "out");
        assert_eq!(r.stderr.trim(), "err");
        assert!(r.wall_s > 0.0);
        if cfg!(target_os = "linux") {
            assert!(r.peak_rss_mb.unwrap() > 0.0);
        }
        let p = w.path.clone();
        drop(w);
        assert!(!p.exists());
    }

    #[test]
    fn self_rss_is_read() {
        if cfg!(target_os = "linux") {
            // the current size first: other tests allocate concurrently, and the peak only grows
            let rss = self_rss_mb().unwrap();
            let peak = self_peak_rss_mb().unwrap();
            assert!(peak > 0.0 && peak >= rss * 0.99, "peak {peak} < rss {rss}");
        }
    }

    #[test]
    fn float_images_round_trip() {
        let w = WorkDir::new("nb-measure-test").unwrap();
        let p = w.path.join("f.bin");
        let v = [1.5f32, -2.0, 0.0];
        std::fs::write(&p, v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        assert_eq!(read_float_image(&p).unwrap(), v.to_vec());
        assert_eq!(tail_lines("a\nb\nc", 2), "b | c");
    }
}
