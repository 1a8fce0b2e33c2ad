//! The terminal progress bar (indicatif, cargo feature `progress`) that the command line installs as
//! the library's progress display: on stderr, and only when stderr is a terminal.

use crate::base::progress::ProgressDisplay;

struct Terminal(indicatif::ProgressBar);

impl ProgressDisplay for Terminal {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn finish_and_clear(&self) {
        self.0.finish_and_clear();
    }
}

/// A bar over `len` units of `unit` on stderr when it is a terminal (`base::progress::DisplayFactory`).
pub fn terminal_bar(len: u64, unit: &str) -> Option<Box<dyn ProgressDisplay>> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
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
