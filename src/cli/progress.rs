//! The progress display the command line installs as the library's (`base::progress`): a bar on
//! stderr when it is a terminal (indicatif, cargo feature `progress`), else a line every
//! [`LOG_EVERY`] of a long run, so that a batch job's log (Slurm, `> log 2>&1`) shows it is alive.

use crate::base::progress::ProgressDisplay;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a log line is written: a run shorter than this writes none.
pub const LOG_EVERY: Duration = Duration::from_secs(30);

struct Terminal(indicatif::ProgressBar);

impl ProgressDisplay for Terminal {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn finish_and_clear(&self) {
        self.0.finish_and_clear();
    }
}

/// Progress as lines, at most one per `every`, on `out` (stderr).
struct LogLines {
    len: u64,
    unit: String,
    done: AtomicU64,
    start: Instant,
    every: Duration,
    /// The last line's time, and where lines go (one writer at a time; a busy lock skips a line).
    last: Mutex<(Instant, Box<dyn std::io::Write + Send>)>,
}

impl ProgressDisplay for LogLines {
    fn inc(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        let Ok(mut last) = self.last.try_lock() else { return };
        if last.0.elapsed() >= self.every {
            last.0 = Instant::now();
            let _ = writeln!(last.1, "{}", progress_line(done, self.len, &self.unit, self.start.elapsed()));
        }
    }
    fn finish_and_clear(&self) {}
}

/// `progress: 120/512 rows (23%), 31 s`.
fn progress_line(done: u64, len: u64, unit: &str, elapsed: Duration) -> String {
    let pct = if len > 0 { 100.0 * done as f64 / len as f64 } else { 100.0 };
    format!("progress: {done}/{len} {unit} ({pct:.0}%), {:.0} s", elapsed.as_secs_f64())
}

/// A display over `len` units of `unit` (`base::progress::DisplayFactory`): the bar on a terminal,
/// else log lines on stderr.
pub fn terminal_bar(len: u64, unit: &str) -> Option<Box<dyn ProgressDisplay>> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return Some(Box::new(log_lines(len, unit, LOG_EVERY, Box::new(std::io::stderr()))));
    }
    let b = indicatif::ProgressBar::new(len);
    let rate = if unit == "frames" { ", {per_sec}" } else { "" };
    b.set_style(
        indicatif::ProgressStyle::with_template(&format!("{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} {unit}{rate}, ETA {{eta}}"))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    b.enable_steady_tick(std::time::Duration::from_millis(250));
    Some(Box::new(Terminal(b)))
}

fn log_lines(len: u64, unit: &str, every: Duration, out: Box<dyn std::io::Write + Send>) -> LogLines {
    let now = Instant::now();
    LogLines { len, unit: unit.to_string(), done: AtomicU64::new(0), start: now, every, last: Mutex::new((now, out)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Shares the lines written with the test.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// No line before the interval has passed; then one line with the count, the share and the time.
    #[test]
    fn log_lines_say_a_long_run_is_alive() {
        let sink = Sink::default();
        let quick = log_lines(512, "rows", Duration::from_secs(3600), Box::new(sink.clone()));
        quick.inc(100);
        assert!(sink.0.lock().unwrap().is_empty());
        let slow = log_lines(512, "rows", Duration::from_millis(20), Box::new(sink.clone()));
        std::thread::sleep(Duration::from_millis(30));
        slow.inc(120);
        slow.inc(1);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.starts_with("progress: 120/512 rows (23%), 0 s"), "{text}");
        assert_eq!(progress_line(512, 512, "frames", Duration::from_secs(95)), "progress: 512/512 frames (100%), 95 s");
    }
}
