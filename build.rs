//! Stamp the git commit into `--version` (falls back to "unknown" outside a git checkout) and the
//! version of the compiler that builds the crate (for benchmark reports).
fn git(args: &[&str]) -> Option<String> {
    std::process::Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NANOBRAGG_GIT_COMMIT={commit}");
    // The compiler that builds this crate (cargo gives build scripts its path in RUSTC), for reports:
    // not whatever `rustc` is on PATH when a benchmark runs.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NANOBRAGG_RUSTC_VERSION={version}");
    // Watch the real HEAD and refs: in a `git worktree` checkout `.git` is a file and HEAD lives in the
    // git dir; a watched path that does not exist would rerun this script (and rebuild the crate) always.
    match (git(&["rev-parse", "--git-dir"]), git(&["rev-parse", "--git-common-dir"])) {
        (Some(dir), Some(common)) => {
            for p in [format!("{dir}/HEAD"), format!("{common}/refs"), format!("{common}/packed-refs")] {
                if std::path::Path::new(&p).exists() {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
        }
        _ => println!("cargo:rerun-if-changed=build.rs"),
    }
}
