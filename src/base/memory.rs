//! The memory a process may still allocate, and the check made before each large allocation, so a
//! run too large for the machine is refused with one line instead of aborting (or being killed).

use crate::base::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};

/// A user-set memory limit in bytes (0 = none), from `--max-memory` or `NANOBRAGG_MAX_MEMORY`.
static USER_LIMIT: AtomicU64 = AtomicU64::new(0);

/// Whether the budget is the user's (`--max-memory` or `NANOBRAGG_MAX_MEMORY`), not the machine's.
pub fn user_limited() -> bool {
    USER_LIMIT.load(Ordering::Relaxed) > 0 || std::env::var_os("NANOBRAGG_MAX_MEMORY").is_some()
}

/// Set the memory limit (bytes; 0 = the machine's).
pub fn set_max_memory(bytes: u64) {
    USER_LIMIT.store(bytes, Ordering::Relaxed);
}

/// Parse a size such as `4G`, `512M`, `1e9` or `2GiB` into bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let t = s.trim();
    if let Ok(v) = t.parse::<f64>() {
        return (v.is_finite() && v >= 1.0 && v < 1.8e19).then_some(v as u64);
    }
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.trim().parse().ok().filter(|v: &f64| v.is_finite() && *v > 0.0)?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0f64.powi(4),
        _ => return None,
    };
    let b = v * mult;
    (b >= 1.0 && b < 1.8e19).then_some(b as u64)
}

fn meminfo(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Bytes this process may still allocate: the user's limit, else available RAM plus free swap, also
/// bounded by the address-space limit (RLIMIT_AS) less what is already mapped.
pub fn memory_budget() -> u64 {
    let user = USER_LIMIT.load(Ordering::Relaxed);
    let user = if user > 0 {
        Some(user)
    } else {
        std::env::var("NANOBRAGG_MAX_MEMORY").ok().and_then(|s| parse_size(&s))
    };
    let mut budget = match user {
        Some(u) => u,
        None => match meminfo("MemAvailable:") {
            Some(a) => a.saturating_add(meminfo("SwapFree:").unwrap_or(0)),
            None => u64::MAX,
        },
    };
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut rl) } == 0 && rl.rlim_cur != libc::RLIM_INFINITY {
        let mapped = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|t| t.lines().find(|l| l.starts_with("VmSize:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
            .map(|kb| kb * 1024)
            .unwrap_or(0);
        // thread stacks and allocator slack come out of the same address space
        budget = budget.min((rl.rlim_cur as u64).saturating_sub(mapped) / 10 * 8);
    }
    budget
}

/// Human-readable bytes.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1024.0f64.powi(4) {
        format!("{:.1} TiB", b / 1024.0f64.powi(4))
    } else if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} GiB", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KiB", (b / 1024.0).ceil())
    }
}

/// Refuse an allocation of `bytes` for `what` when it exceeds the budget.
pub fn check_alloc(what: impl FnOnce() -> Error, bytes: Option<u64>) -> Result<()> {
    let budget = memory_budget();
    match bytes {
        Some(b) if b <= budget => Ok(()),
        _ => Err(what()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1k"), Some(1024));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("1e6"), Some(1_000_000));
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("5 parsecs"), None);
    }
}
