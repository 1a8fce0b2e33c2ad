//! Running the binary as a child the way the hostile-input tests need: an address-space cap (a
//! runaway allocation fails the test instead of passing on a big machine) and a deadline (a hang
//! fails it instead of stalling CI).

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// Cap the child's address space at `bytes` (RLIMIT_AS).
pub fn limit_address_space(c: &mut Command, bytes: u64) {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let rl = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
            if libc::setrlimit(libc::RLIMIT_AS, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The child's output, or `Err` after killing it when it runs longer than `limit`.
pub fn wait_or_kill(mut child: Child, limit: Duration) -> Result<Output, String> {
    let t = Instant::now();
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("hung (killed after {} s)", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().map_err(|e| e.to_string())
}
