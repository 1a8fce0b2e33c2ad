//! Room on the disk an output goes to, and the user's cap on what one run may write (`--max-output`,
//! `NANOBRAGG_MAX_OUTPUT`), so a dataset too large for its disk is refused before its first file
//! instead of dying with "No space left on device" halfway through.
//!
//! `statvfs` comes from `libc`, already linked for the process limits; one call does not justify a
//! crate such as `fs4`.

use std::path::Path;

/// Bytes an unprivileged process may still write on the file system holding `dir` (or, when `dir`
/// does not exist yet, its nearest existing ancestor); `None` when the system cannot tell.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let mut at = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    while !at.exists() {
        at = match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
    }
    let c = std::ffi::CString::new(at.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` is written by statvfs before it is read.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    (st.f_bavail as u64).checked_mul(st.f_frsize as u64)
}

/// The cap on a run's output: `explicit` (`--max-output`), else `NANOBRAGG_MAX_OUTPUT` (k/M/G/T, as
/// `--max-memory`); an unreadable variable is an error naming it.
pub fn max_output(explicit: Option<u64>, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<u64>, String> {
    if explicit.is_some() {
        return Ok(explicit);
    }
    match env("NANOBRAGG_MAX_OUTPUT") {
        None => Ok(None),
        Some(s) => crate::base::memory::parse_size(&s)
            .map(Some)
            .ok_or_else(|| format!("NANOBRAGG_MAX_OUTPUT: '{s}' is not a size (bytes, or with k, M, G, T)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_of_a_folder_not_made_yet_is_its_parents() {
        let d = tempfile::tempdir().unwrap();
        let here = free_bytes(d.path()).unwrap();
        let later = free_bytes(&d.path().join("not/made/yet")).unwrap();
        // the same file system; other processes may write in between
        assert!(here > 0 && later.abs_diff(here) < here / 10 + (64 << 20));
    }

    #[test]
    fn cap_from_flag_or_environment() {
        let none = |_: &str| None;
        let env = |_: &str| Some("2G".to_string());
        let bad = |_: &str| Some("lots".to_string());
        assert_eq!(max_output(None, &none), Ok(None));
        assert_eq!(max_output(None, &env), Ok(Some(2 << 30)));
        assert_eq!(max_output(Some(5), &env), Ok(Some(5)));
        assert!(max_output(None, &bad).unwrap_err().contains("NANOBRAGG_MAX_OUTPUT"));
    }
}
