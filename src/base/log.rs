//! What the simulator tells the user on stdout: the C program's setup lines and summary, collected
//! in order so the library itself never prints.

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

    pub fn text(&self) -> String {
        let mut s = String::new();
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}
