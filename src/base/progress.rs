//! Progress bars on standard error, only when it is a terminal. With the `progress` cargo feature
//! (on by default) they are indicatif bars; without it the library pulls no terminal code and a bar
//! is a no-op, so embedding programs (the Python module, a GPU service) need not carry indicatif.

/// A progress bar over `len` units of work (`unit`: "rows", "frames").
pub struct Bar {
    #[cfg(feature = "progress")]
    inner: indicatif::ProgressBar,
}

impl Bar {
    /// A bar when `show` and stderr is a terminal; `None` otherwise.
    pub fn on_terminal(show: bool, len: u64, unit: &str) -> Option<Bar> {
        use std::io::IsTerminal;
        if !show || !std::io::stderr().is_terminal() {
            return None;
        }
        Self::new(len, unit)
    }

    #[cfg(feature = "progress")]
    fn new(len: u64, unit: &str) -> Option<Bar> {
        let b = indicatif::ProgressBar::new(len);
        let rate = if unit == "frames" { ", {per_sec}" } else { "" };
        b.set_style(
            indicatif::ProgressStyle::with_template(&format!("{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} {unit}{rate}, ETA {{eta}}"))
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.enable_steady_tick(std::time::Duration::from_millis(250));
        Some(Bar { inner: b })
    }

    #[cfg(not(feature = "progress"))]
    fn new(_len: u64, _unit: &str) -> Option<Bar> {
        None
    }

    pub fn inc(&self, n: u64) {
        #[cfg(feature = "progress")]
        self.inner.inc(n);
        #[cfg(not(feature = "progress"))]
        let _ = n;
    }

    pub fn finish_and_clear(&self) {
        #[cfg(feature = "progress")]
        self.inner.finish_and_clear();
    }
}
