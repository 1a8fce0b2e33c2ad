//! One error type for the library. Every variant renders as a single line that names the flag, file
//! or line at fault, so the binaries can print it and exit non-zero.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command-line flag was unknown, lacked a value or had a bad value.
    #[error("{flag}: {reason}")]
    Flag { flag: String, reason: String },

    /// An input file could not be read or is malformed.
    #[error("{}{}: {reason}", path.display(), line.map(|l| format!(" line {l}")).unwrap_or_default())]
    File { path: PathBuf, line: Option<usize>, reason: String },

    /// The combination of inputs describes no possible experiment.
    #[error("{0}")]
    Setup(String),

    /// An output could not be written.
    #[error("cannot write {}: {reason}", path.display())]
    Output { path: PathBuf, reason: String },
}

impl Error {
    pub fn flag(flag: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Flag { flag: flag.into(), reason: reason.into() }
    }
    pub fn file(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::File { path: path.into(), line: None, reason: reason.into() }
    }
    pub fn file_line(path: impl Into<PathBuf>, line: usize, reason: impl Into<String>) -> Self {
        Error::File { path: path.into(), line: Some(line), reason: reason.into() }
    }
    pub fn setup(msg: impl Into<String>) -> Self {
        Error::Setup(msg.into())
    }
}

pub type Result<T> = std::result::Result<T, Error>;
