//! What machine and build a benchmark ran on: CPU model, cores, SIMD level, OS, rustc, git commit.
//! Everything is looked up at run time and falls back to "unknown" rather than failing.

use serde::{Deserialize, Serialize};
use std::process::Command;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// Logical CPUs (what rayon uses by default).
    pub logical_cores: usize,
    pub physical_cores: usize,
    /// The SIMD level the fast kernel uses on this machine (`kernel::simd_level_name()`: avx512, avx2,
    /// portable or scalar; `NANOBRAGG_SIMD` can lower it; " (hand loop off)" added under
    /// `NANOBRAGG_HAND_LOOP=off`). Per-size `kernel` says which one a
    /// configuration actually ran (the reference kernel where the fast one does not apply).
    pub simd_level: String,
    /// The best SIMD instruction set the CPU offers (avx512f, avx2+fma, avx2, sse2, neon, none).
    pub cpu_simd: String,
    /// e.g. "linux x86_64, Ubuntu 24.04 LTS, kernel 6.8.0".
    pub os: String,
    /// `rustc --version` of the compiler that built this binary (stamped by build.rs), or "unknown".
    pub rustc: String,
    /// `git rev-parse HEAD` in the working directory, else the commit stamped at build time, else "unknown".
    pub git_commit: String,
    /// Uncommitted changes in the working tree (None when git is unavailable).
    pub git_dirty: Option<bool>,
    /// This package's version.
    pub nanobragg_version: String,
}

fn command_line(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// `model name` (x86) or `Model`/`CPU part` (ARM) from /proc/cpuinfo.
pub fn cpu_model() -> String {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    for key in ["model name", "Model", "Hardware", "cpu model"] {
        for line in text.lines() {
            if let Some((k, v)) = line.split_once(':') {
                if k.trim() == key && !v.trim().is_empty() {
                    return v.trim().to_string();
                }
            }
        }
    }
    "unknown".into()
}

/// The best SIMD level of this CPU, by run-time feature detection (independent of the kernel).
pub fn detect_simd() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return "avx512f";
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return "avx2+fma";
        }
        if std::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
        "sse2"
    }
    #[cfg(target_arch = "aarch64")]
    {
        "neon"
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        "none"
    }
}

/// f32 lanes of the widest vector unit of `simd_level` (for the plausibility bound on throughput).
pub fn simd_lanes_f32(simd_level: &str) -> f64 {
    if simd_level.contains("avx512") {
        16.0
    } else if simd_level.contains("avx") {
        8.0
    } else {
        4.0
    }
}

fn os_description() -> String {
    let mut s = format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
    if let Ok(t) = std::fs::read_to_string("/etc/os-release") {
        if let Some(name) = t.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=")) {
            s.push_str(&format!(", {}", name.trim_matches('"')));
        }
    }
    if let Ok(k) = std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        s.push_str(&format!(", kernel {}", k.trim()));
    }
    s
}

impl MachineInfo {
    pub fn detect() -> MachineInfo {
        let git_commit = command_line("git", &["rev-parse", "HEAD"])
            .or_else(|| Some(nanobragg::base::build::GIT_COMMIT).filter(|c| *c != "unknown").map(str::to_string))
            .unwrap_or_else(|| "unknown".into());
        let git_dirty = Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=no"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| !o.stdout.is_empty());
        MachineInfo {
            cpu_model: cpu_model(),
            logical_cores: num_cpus::get(),
            physical_cores: num_cpus::get_physical(),
            simd_level: match nanobragg::kernel::plan::hand_loop_enabled() {
                true => nanobragg::kernel::simd_level_name().to_string(),
                false => format!("{} (hand loop off)", nanobragg::kernel::simd_level_name()),
            },
            cpu_simd: detect_simd().to_string(),
            os: os_description(),
            rustc: nanobragg::base::build::RUSTC_VERSION.to_string(),
            git_commit,
            git_dirty,
            nanobragg_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// One line for the report header.
    pub fn one_line(&self) -> String {
        format!(
            "{} ({} logical / {} physical cores, CPU SIMD {}, kernel {}), {}, {}, git {}{}",
            self.cpu_model,
            self.logical_cores,
            self.physical_cores,
            self.cpu_simd,
            self.simd_level,
            self.os,
            self.rustc,
            short_commit(&self.git_commit),
            if self.git_dirty == Some(true) { " (dirty)" } else { "" }
        )
    }
}

pub fn short_commit(c: &str) -> &str {
    if c.len() > 12 && c.chars().all(|ch| ch.is_ascii_hexdigit()) {
        &c[..12]
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_fills_every_field() {
        let m = MachineInfo::detect();
        assert!(!m.cpu_model.is_empty());
        assert!(m.logical_cores >= 1);
        assert!(["avx512", "avx2", "portable", "scalar"].contains(&m.simd_level.as_str()), "{}", m.simd_level);
        assert!(!m.cpu_simd.is_empty());
        assert!(m.os.starts_with(std::env::consts::OS));
        assert!(!m.rustc.is_empty() && !m.git_commit.is_empty());
        assert!(m.one_line().contains("cores"));
    }

    #[test]
    fn lanes() {
        assert_eq!(simd_lanes_f32("avx512f"), 16.0);
        assert_eq!(simd_lanes_f32("avx2+fma"), 8.0);
        assert_eq!(simd_lanes_f32("avx512"), 16.0);
        assert_eq!(simd_lanes_f32("portable"), 4.0);
        assert_eq!(simd_lanes_f32("neon"), 4.0);
        assert_eq!(short_commit("0123456789abcdef0123"), "0123456789ab");
        assert_eq!(short_commit("unknown"), "unknown");
    }
}
