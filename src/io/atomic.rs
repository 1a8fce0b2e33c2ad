//! Atomic file writes: write to a temporary name beside the target, then rename.
//!
//! A run that fails or is interrupted half-way must never leave a truncated image under the final
//! name (a reader would take it for a finished result), and must not destroy an older good file.
//! The temporary file lives in the target's own directory so that the final `rename` stays on one
//! file system and is atomic. No fsync: durability against power loss is not a goal, only that the
//! final name holds either the old file or the complete new one.

use crate::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Distinguishes temporary files of concurrent writers inside one process.
static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn out_err(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::Output { path: path.to_path_buf(), reason: reason.to_string() }
}

/// Create a fresh temporary file `.<name>.tmp-<pid>-<n>` next to `path`.
fn create_temp(path: &Path) -> Result<(PathBuf, File)> {
    let name = path
        .file_name()
        .ok_or_else(|| out_err(path, "not a file name"))?
        .to_string_lossy()
        .into_owned();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let pid = std::process::id();
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.tmp-{pid}-{n}"));
        // create_new: never follow or clobber something already there (e.g. a stale temp or a symlink)
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < usize::MAX => continue,
            Err(e) => return Err(out_err(path, e)),
        }
    }
}

/// Write `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes).map_err(|e| out_err(path, e))?;
    f.commit()
}

/// A file being written under a temporary name; it appears under its final name only on
/// [`AtomicFile::commit`]. Dropping it uncommitted (error, panic) removes the temporary file.
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Start writing `path` (nothing is visible under that name yet).
    pub fn create(path: &Path) -> Result<AtomicFile> {
        let (tmp, f) = create_temp(path)?;
        Ok(AtomicFile { path: path.to_path_buf(), tmp, file: Some(BufWriter::with_capacity(1 << 16, f)) })
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flush and rename onto the final path. On error the temporary file is removed.
    pub fn commit(mut self) -> Result<()> {
        let file = self.file.take().expect("AtomicFile used after commit");
        let res = file
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|f| {
                drop(f); // close before the rename
                fs::rename(&self.tmp, &self.path)
            });
        match res {
            Ok(()) => {
                self.tmp = PathBuf::new(); // nothing left to clean up
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&self.tmp);
                self.tmp = PathBuf::new();
                Err(out_err(&self.path, e))
            }
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.file.as_mut() {
            Some(f) => f.write(buf),
            None => Err(io::Error::other("AtomicFile already committed")),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.write_all(buf),
            None => Err(io::Error::other("AtomicFile already committed")),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            // close first; discard buffered data without reporting (the write is being abandoned)
            if let Some(f) = self.file.take() {
                let (f, _) = f.into_parts();
                drop(f);
            }
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn writes_and_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.bin");
        write_atomic(&p, b"first").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"first");
        write_atomic(&p, b"second, longer").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"second, longer");
        assert_eq!(entries(d.path()), vec!["a.bin"]);
    }

    #[test]
    fn streaming_commit_and_abandon() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.img");
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(&vec![7u8; 200_000]).unwrap();
        assert!(!p.exists(), "final name must not appear before commit");
        assert_eq!(entries(d.path()).len(), 1);
        f.commit().unwrap();
        assert_eq!(fs::read(&p).unwrap().len(), 200_000);

        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"partial").unwrap();
        drop(f);
        assert_eq!(entries(d.path()), vec!["s.img"], "temp removed on drop");
        assert_eq!(fs::read(&p).unwrap().len(), 200_000, "old file intact");
    }

    #[test]
    fn errors_name_the_path() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("no_such_dir").join("x.bin");
        match write_atomic(&p, b"x") {
            Err(Error::Output { path, .. }) => assert_eq!(path, p),
            other => panic!("unexpected {other:?}"),
        }
        // target is a non-empty directory: rename fails, temp must be cleaned up
        let t = d.path().join("dir");
        fs::create_dir(&t).unwrap();
        fs::write(t.join("keep"), b"k").unwrap();
        assert!(matches!(write_atomic(&t, b"x"), Err(Error::Output { .. })));
        assert_eq!(entries(d.path()), vec!["dir"]);
    }

    #[test]
    fn relative_name_without_dir() {
        // a bare file name resolves against the current directory; just check the temp naming logic
        let (tmp, f) = create_temp(Path::new(&std::env::temp_dir().join("nb_atomic_probe"))).unwrap();
        drop(f);
        assert!(tmp.file_name().unwrap().to_string_lossy().starts_with(".nb_atomic_probe.tmp-"));
        fs::remove_file(tmp).unwrap();
    }
}
