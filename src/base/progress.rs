//! Progress of long runs (rows of an image, frames of a series). The library only counts: it asks
//! for a [`Bar`] and advances it; whoever embeds it decides whether and how progress is shown by
//! installing a display ([`set_progress_display`]). The command line installs a terminal bar on
//! stderr (`cli::progress`); without a display, as in the Python module, nothing is shown.

use std::sync::OnceLock;

/// A display of one run's progress.
pub trait ProgressDisplay: Send + Sync {
    /// `n` more units done.
    fn inc(&self, n: u64);
    /// The run is over: remove the display.
    fn finish_and_clear(&self);
}

/// Makes a display for `len` units of `unit` ("rows", "frames"), or `None` (e.g. not a terminal).
pub type DisplayFactory = fn(len: u64, unit: &str) -> Option<Box<dyn ProgressDisplay>>;

static DISPLAY: OnceLock<DisplayFactory> = OnceLock::new();

/// Install how progress is shown, once per process (later calls are ignored).
pub fn set_progress_display(factory: DisplayFactory) {
    let _ = DISPLAY.set(factory);
}

/// A run's progress, shown by the installed display.
pub struct Bar {
    display: Box<dyn ProgressDisplay>,
}

impl Bar {
    /// A bar over `len` units when `show` and a display is installed (and makes one); `None` otherwise.
    pub fn start(show: bool, len: u64, unit: &str) -> Option<Bar> {
        if !show {
            return None;
        }
        DISPLAY.get().and_then(|make| make(len, unit)).map(|display| Bar { display })
    }

    pub fn inc(&self, n: u64) {
        self.display.inc(n);
    }

    pub fn finish_and_clear(&self) {
        self.display.finish_and_clear();
    }
}
