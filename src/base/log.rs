//! What the simulator tells the user: the C program's setup lines and summary, collected in order
//! ([`Log`]), and warnings ([`warn`]), handed to whoever shows them, so the library itself never
//! prints.

/// Lines to print, in the order the C prints them.
#[derive(Clone, Debug, Default)]
pub struct Log {
    pub lines: Vec<String>,
}

impl Log {
    pub fn line(&mut self, s: impl Into<String>) {
        self.lines.push(s.into());
    }

    /// Print and clear.
    pub fn flush_to(&mut self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        for l in self.lines.drain(..) {
            writeln!(out, "{l}")?;
        }
        Ok(())
    }

    /// Print and clear only the C's warnings (`--quiet`): each line that starts with "WARNING" and
    /// the indented lines that continue it ("         recommend -oversample 5 ...").
    pub fn flush_warnings_to(&mut self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut in_warning = false;
        for l in self.lines.drain(..) {
            in_warning = l.starts_with("WARNING") || (in_warning && l.starts_with("     "));
            if in_warning {
                writeln!(out, "{l}")?;
            }
        }
        Ok(())
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}

/// Where warnings go: a handler the program installs (the command line prints them on stderr as
/// they come), else a buffer the caller drains with [`take_warnings`].
static WARNING_SINK: std::sync::OnceLock<fn(&str)> = std::sync::OnceLock::new();
static WARNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Install the handler every later warning goes to (once per process; later calls are ignored).
pub fn set_warning_sink(sink: fn(&str)) {
    let _ = WARNING_SINK.set(sink);
}

/// A warning for the user (one line, no trailing newline): to the installed handler, else kept.
pub fn warn(message: impl Into<String>) {
    let message = message.into();
    match WARNING_SINK.get() {
        Some(sink) => sink(&message),
        None => WARNINGS.lock().unwrap_or_else(|e| e.into_inner()).push(message),
    }
}

/// The warnings kept since the last call (none when a handler is installed).
pub fn take_warnings() -> Vec<String> {
    std::mem::take(&mut *WARNINGS.lock().unwrap_or_else(|e| e.into_inner()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn warnings_are_kept_until_taken_without_a_handler() {
        super::warn("log test: a warning");
        assert!(super::take_warnings().iter().any(|w| w == "log test: a warning"));
        assert!(!super::take_warnings().iter().any(|w| w == "log test: a warning"));
    }
}

/// Warn that `bad` of an image's `total` pixels are NaN or infinite: a silently wrong image must not
/// look like a good one (nothing when `bad` is 0).
pub fn warn_nonfinite(bad: usize, total: usize) {
    if bad > 0 {
        warn(format!("nanobragg-rs: warning: {bad} of {total} pixels are not finite (NaN or infinite): some input value is too large for the arithmetic"));
    }
}
