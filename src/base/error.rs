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

    /// An input file could not be read by the system; the `io::Error` is kept as the source.
    #[error("{}: {what}: {source}", path.display())]
    FileIo { path: PathBuf, what: String, source: std::io::Error },

    /// An output could not be written by the system (disk full, permissions, ...); the `io::Error`
    /// is kept as the source.
    #[error("cannot write {}: {source}", path.display())]
    OutputIo { path: PathBuf, source: std::io::Error },
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
    /// Reading `path` failed; `what` says what was being read ("cannot read HKL file").
    pub fn read(path: impl Into<PathBuf>, what: impl Into<String>, source: std::io::Error) -> Self {
        Error::FileIo { path: path.into(), what: what.into(), source }
    }
    /// Writing `path` failed.
    pub fn write(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::OutputIo { path: path.into(), source }
    }
    /// The output file this error is about, if any.
    pub fn output_path(&self) -> Option<&std::path::Path> {
        match self {
            Error::Output { path, .. } | Error::OutputIo { path, .. } => Some(path),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn io_errors_keep_one_line_and_their_source() {
        let e = Error::read("x.hkl", "cannot read HKL file", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(e.to_string(), "x.hkl: cannot read HKL file: entity not found");
        assert!(e.source().and_then(|s| s.downcast_ref::<std::io::Error>()).is_some());
        let e = Error::write("out.bin", std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        assert_eq!(e.to_string(), "cannot write out.bin: permission denied");
        assert!(e.source().is_some());
        assert!(!e.to_string().contains('\n'));
    }
}

pub type Result<T> = std::result::Result<T, Error>;
