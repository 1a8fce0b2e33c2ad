//! Atomic file writes: write to a temporary name beside the target, then rename.
//!
//! A run that fails or is interrupted half-way must never leave a truncated image under the final
//! name (a reader would take it for a finished result), and must not destroy an older good file.
//! The temporary file lives in the target's own directory so that the final `rename` stays on one
//! file system and is atomic. No fsync: durability against power loss is not a goal, only that the
//! final name holds either the old file or the complete new one.
//!
//! The temporary file itself is `tempfile`'s: [`tempfile::Builder::tempfile_in`] creates it with
//! `O_CREAT|O_EXCL` (never follows or clobbers what is there, retries on a clash) and mode 0666 less
//! the umask (as `fopen` would, not tempfile's default 0600), [`tempfile::TempPath`] removes it when
//! dropped, and [`tempfile::TempPath::persist`] is the rename. What tempfile does not do stays here:
//! the registry of live temps that the SIGINT/SIGTERM/SIGHUP handler removes before exiting (a
//! destructor does not run on `exit`), the pid in the temp name (`.<name>.tmp-<pid>-<random>`) that
//! lets a later run sweep temps of killed processes ([`sweep_stale_temps`]), writing devices and
//! FIFOs in place ([`TargetKind::Special`]), replacing a symlink's target rather than the link, and
//! renaming a set of outputs under one lock ([`commit_all`]). `persist_noclobber` is not used: an
//! output replaces an older file of that name, as the C's `fopen(..., "wb")` does.

use crate::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use tempfile::TempPath;

/// Temporary files of this process that exist right now. Creating, renaming and removing a temp
/// happen under this lock, so the signal handler ([`install_signal_cleanup`]) sees a consistent set:
/// it removes every temp and exits while holding the lock (a commit in progress completes first).
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn forget(live: &mut Vec<PathBuf>, tmp: &Path) {
    if let Some(i) = live.iter().position(|p| p == tmp) {
        live.swap_remove(i);
    }
}

fn out_err(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::Output { path: path.to_path_buf(), reason: reason.to_string() }
}

/// How an output path is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// A regular file (existing or not): temporary file beside it, renamed over it at the end. For a
    /// symbolic link, the file it points to is replaced (the link stays).
    Regular(PathBuf),
    /// A character or block device, FIFO or socket: opened and written in place, as the C does
    /// (`-floatfile /dev/null` must not replace the device with a regular file).
    Special,
}

/// Which paths name the same file: (device, inode) when it exists (through links), else the
/// canonical directory plus the name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileId {
    Inode(u64, u64),
    Path(PathBuf),
}

/// The [`FileId`] of `p` (None when its directory does not exist).
pub fn file_id(p: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(m) = fs::metadata(p) {
        return Some(FileId::Inode(m.dev(), m.ino()));
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = fs::canonicalize(dir).ok()?;
    Some(FileId::Path(dir.join(p.file_name()?)))
}

/// Refuse an output that names one of the run's inputs or another of its outputs (by any spelling
/// or link): `inputs` and `outputs` are (flag, path). Special files (devices, FIFOs) may repeat.
pub fn check_no_clobber(inputs: &[(&str, PathBuf)], outputs: &[(&str, PathBuf)]) -> Result<()> {
    let special = |p: &Path| matches!(target_kind(p), Ok(TargetKind::Special));
    let ids: Vec<Option<FileId>> = inputs.iter().map(|(_, p)| file_id(p)).collect();
    let mut seen: Vec<(&str, Option<FileId>)> = Vec::new();
    for (flag, out) in outputs {
        if special(out) {
            continue;
        }
        let id = file_id(out);
        if id.is_none() {
            continue;
        }
        if let Some(k) = ids.iter().position(|i| *i == id) {
            return Err(out_err(out, format!("the {flag} output would overwrite the {} input {}", inputs[k].0, inputs[k].1.display())));
        }
        if let Some((other, _)) = seen.iter().find(|(_, i)| *i == id) {
            return Err(out_err(out, format!("the {other} and {flag} outputs name the same file")));
        }
        seen.push((flag, id));
    }
    Ok(())
}

/// Decide how `path` will be written; refuses a directory, an empty name and a missing directory.
pub fn target_kind(path: &Path) -> Result<TargetKind> {
    if path.as_os_str().is_empty() {
        return Err(out_err(path, "empty file name"));
    }
    match fs::metadata(path) {
        Ok(m) => {
            let t = m.file_type();
            if t.is_dir() {
                return Err(out_err(path, "is a directory"));
            }
            if t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket() {
                return Ok(TargetKind::Special);
            }
            // follow a symlink to the file it names, so the rename replaces that file, not the link
            let real = if fs::symlink_metadata(path).map(|m| m.file_type().is_symlink()).unwrap_or(false) {
                fs::canonicalize(path).map_err(|e| out_err(path, e))?
            } else {
                path.to_path_buf()
            };
            Ok(TargetKind::Regular(real))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound && is_symlink(path) => {
            // a dangling symlink: write through it (create the file it names), never replace the link
            dangling_link_target(path)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if path.file_name().is_none() {
                return Err(out_err(path, "not a file name"));
            }
            let dir = parent_dir(path);
            if !dir.is_dir() {
                return Err(out_err(path, format!("directory {} does not exist", dir.display())));
            }
            Ok(TargetKind::Regular(path.to_path_buf()))
        }
        Err(e) => Err(out_err(path, e)),
    }
}

fn is_symlink(path: &Path) -> bool {
    fs::symlink_metadata(path).map(|m| m.file_type().is_symlink()).unwrap_or(false)
}

/// The file a dangling symlink names (following a chain of them), which must be in an existing
/// directory.
fn dangling_link_target(path: &Path) -> Result<TargetKind> {
    let mut link = path.to_path_buf();
    for _ in 0..40 {
        let to = fs::read_link(&link).map_err(|e| out_err(path, e))?;
        let to = if to.is_absolute() { to } else { parent_dir(&link).join(to) };
        if !is_symlink(&to) {
            let dir = parent_dir(&to);
            if to.file_name().is_none() || !dir.is_dir() {
                return Err(out_err(path, format!("is a symbolic link to {}, whose directory does not exist", to.display())));
            }
            return Ok(TargetKind::Regular(to));
        }
        link = to;
    }
    Err(out_err(path, "too many levels of symbolic links"))
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Random characters at the end of a temporary name.
const TEMP_RANDOM_LEN: usize = 8;

/// Create a fresh temporary file `.<name>.tmp-<pid>-<random>` next to `path`, registered for cleanup.
fn create_temp(path: &Path) -> Result<(TempPath, File)> {
    let name = path
        .file_name()
        .ok_or_else(|| out_err(path, "not a file name"))?
        .to_string_lossy()
        .into_owned();
    // keep the temp name within NAME_MAX even for a long target name
    let name: String = name.chars().take(180).collect();
    let prefix = format!(".{name}.tmp-{}-", std::process::id());
    let mut reg = live();
    let tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .rand_bytes(TEMP_RANDOM_LEN)
        .permissions(fs::Permissions::from_mode(0o666))
        .tempfile_in(parent_dir(path))
        .map_err(|e| out_err(path, e))?;
    // registered under the same lock that created it: the signal handler sees every temp
    reg.push(tmp.path().to_path_buf());
    let (file, tmp) = tmp.into_parts();
    Ok((tmp, file))
}

/// Remove a temporary file and forget it, under the registry lock.
fn discard(tmp: TempPath) {
    let mut reg = live();
    let p = tmp.to_path_buf();
    drop(tmp); // removes the file
    forget(&mut reg, &p);
}

/// The sha256 and size of the bytes an [`AtomicFile`] wrote, for a caller that records checksums of
/// its outputs (`series` manifests) without reading every file back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenDigest {
    pub sha256: [u8; 32],
    pub bytes: u64,
}

/// A file finished while digests are recorded: hashed as it was written ([`Digesting::AsWritten`]),
/// or kept open until its digest is taken, then hashed from its pages in the cache together with
/// the other files taken at once ([`Digesting::ReadBack`], [`take_digests`]).
enum Written {
    Open { file: File, bytes: u64 },
    Hashed(WrittenDigest),
}

/// The files finished while `holders` > 0 (callers holding a [`DigestRecording`]), by their path as
/// given to [`AtomicFile::create`] (a path finished again replaces its earlier file), and how the
/// files created from now on are hashed.
struct Recording {
    holders: usize,
    how: Digesting,
    files: BTreeMap<PathBuf, Written>,
}

static DIGESTS: Mutex<Recording> = Mutex::new(Recording { holders: 0, how: Digesting::AsWritten, files: BTreeMap::new() });

fn digests() -> MutexGuard<'static, Recording> {
    DIGESTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held while files written through [`AtomicFile`] should have their digests kept ([`take_digests`]);
/// when the last one is dropped, the files not taken are forgotten.
pub struct DigestRecording(());

/// Start keeping the digest of every regular file written through [`AtomicFile`]. Where messages hash
/// together faster than one by one ([`crate::io::sha256::hashing_together_pays`]: two in step through
/// AMD's SHA unit, sixteen in AVX-512's lanes) each file stays open once finished and is read back
/// from the page cache when taken, with the others taken at once (the caller takes several frames'
/// files together); elsewhere each file is hashed as its bytes are written (no read-back, no file
/// kept open).
pub fn record_digests() -> DigestRecording {
    record_digests_by(if crate::io::sha256::hashing_together_pays() { Digesting::ReadBack } else { Digesting::AsWritten })
}

/// How [`record_digests`] hashes the files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Digesting {
    /// Each file as its bytes pass through [`AtomicFile`]'s [`Write`].
    AsWritten,
    /// Each file kept open once finished, read back when taken, hashed together with the others taken
    /// at once ([`crate::io::sha256::sha256_each`]).
    ReadBack,
}

/// [`record_digests`] in the given mode, for a first holder; later holders join the mode already
/// chosen.
pub fn record_digests_by(how: Digesting) -> DigestRecording {
    let mut d = digests();
    if d.holders == 0 {
        d.how = how;
    }
    d.holders += 1;
    DigestRecording(())
}

impl Drop for DigestRecording {
    fn drop(&mut self) {
        let mut d = digests();
        d.holders = d.holders.saturating_sub(1);
        if d.holders == 0 {
            d.files.clear();
        }
    }
}

/// The digest of the file last finished at each path while recording, once: hashed as it was
/// written, or now, the files kept open read back together ([`crate::io::sha256::sha256_each`]: two
/// or sixteen at a time where the CPU has the means); None for a path with no file recorded
/// (written by name through [`AtomicFile::temp_path`], or already taken), or where a kept file could not be read back. The
/// kept files are hashed on up to `threads` threads ([`crate::io::sha256::sha256_each_on`]).
pub fn take_digests(paths: &[&Path], threads: usize) -> Vec<Option<WrittenDigest>> {
    use std::io::{Seek, SeekFrom};
    let written: Vec<Option<Written>> = {
        let mut d = digests();
        paths.iter().map(|p| d.files.remove(*p)).collect()
    };
    let mut files: Vec<(&File, u64)> = written
        .iter()
        .flatten()
        .filter_map(|w| match w {
            Written::Open { file, bytes } => Some((file, *bytes)),
            Written::Hashed(_) => None,
        })
        .collect();
    let rewound = files.iter_mut().try_for_each(|(f, _)| f.seek(SeekFrom::Start(0)).map(drop));
    let mut messages: Vec<crate::io::sha256::Message> = files.iter_mut().map(|(f, len)| crate::io::sha256::Message { len: *len, bytes: f }).collect();
    // a kept file that cannot be read back gets None with the other kept ones (the caller reads them
    // again by name); those hashed as written keep theirs
    let mut sums = match rewound.map(|()| crate::io::sha256::sha256_each_on(&mut messages, threads)) {
        Ok(Ok(sums)) => sums.into_iter().map(Some).collect(),
        _ => vec![None; messages.len()],
    }
    .into_iter();
    written
        .iter()
        .map(|w| match w.as_ref()? {
            Written::Open { bytes, .. } => sums.next().expect("one digest per kept file").map(|sha256| WrittenDigest { sha256, bytes: *bytes }),
            Written::Hashed(d) => Some(d.clone()),
        })
        .collect()
}

/// Write `bytes` to `path` atomically (in place for a device, FIFO or socket).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes).map_err(|e| out_err(path, e))?;
    f.commit()
}

/// A regular output file of a known size written through a shared memory map of its temporary file:
/// the program fills the map in place (the render writes the float image straight into the page
/// cache, so the image is neither held twice nor copied by `write`), then renames it with the other
/// outputs ([`MappedTemp::take_finished`], [`commit_all`]). Dropped before that, the temporary file
/// is removed.
pub struct MappedTemp {
    map: memmap2::MmapMut,
    finished: Option<Finished>,
}

impl MappedTemp {
    /// Map a fresh temporary file of `len` bytes beside `path`'s target. `None` (nothing left behind)
    /// where that cannot be done safely: a device, FIFO or socket (written in place), an empty file,
    /// or a file system that cannot reserve the blocks up front (`fallocate`): a page it could not
    /// back would kill the process (SIGBUS) when first written, so such a file is written the
    /// ordinary way, where a full disk is an error message.
    pub fn create(path: &Path, len: u64) -> Result<Option<MappedTemp>> {
        let TargetKind::Regular(target) = target_kind(path)? else { return Ok(None) };
        if len == 0 || !cfg!(target_os = "linux") {
            return Ok(None);
        }
        let (tmp, file) = create_temp(&target)?;
        if !reserve(&file, len) {
            discard(tmp);
            return Ok(None);
        }
        // SAFETY: the file is this process's own fresh temporary (O_EXCL, a random name), of `len`
        // bytes with every block reserved; nothing else truncates it while it is mapped.
        match unsafe { memmap2::MmapMut::map_mut(&file) } {
            Ok(map) => Ok(Some(MappedTemp { map, finished: Some(Finished { path: path.to_path_buf(), target, tmp: Some(tmp) }) })),
            Err(_) => {
                discard(tmp);
                Ok(None)
            }
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// The file, complete, waiting for its rename ([`commit_all`]); the map stays readable.
    pub fn take_finished(&mut self) -> Option<Finished> {
        self.finished.take()
    }

    /// What pre-faults parts of this map from any thread while the map is being written elsewhere.
    pub fn populator(&self) -> Populator {
        Populator { addr: self.map.as_ptr() as usize, len: self.map.len() }
    }
}

/// Maps pages of a [`MappedTemp`] writable ahead of their first write (`MADV_POPULATE_WRITE`, Linux 5.14),
/// one call for a run of pages instead of a read fault and a write fault per page: the render threads
/// populate the rows a little ahead of those they write, so the pages are made in parallel and without
/// faults. An address range, not a reference to the bytes: madvise neither reads nor writes them, so it
/// may run while the map is borrowed for writing. Where the call is refused (an older kernel) the pages
/// are faulted in as they are written.
#[derive(Clone, Copy, Debug)]
pub struct Populator {
    addr: usize,
    len: usize,
}

impl Populator {
    /// Populate the pages holding bytes `range` of the map (clipped to it).
    pub fn populate(&self, range: std::ops::Range<usize>) {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: sysconf reads no memory of ours
            let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1);
            let start = self.addr + range.start.min(self.len);
            let start = start - (start - self.addr) % page; // the map itself starts on a page
            let end = self.addr + range.end.min(self.len);
            if end > start {
                // SAFETY: a range inside this process's live mapping (the caller keeps the MappedTemp
                // alive while it populates); MADV_POPULATE_WRITE changes no byte the program sees
                unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE) };
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = range;
    }
}

/// Allocate every block of `file`'s first `len` bytes (the file's size becomes `len`).
fn reserve(file: &File, len: u64) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let Ok(len) = libc::off_t::try_from(len) else { return false };
        // SAFETY: a valid open descriptor; fallocate reads no memory of ours
        unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, len);
        false
    }
}

/// Files written under temporary names that appear together, all of them or none: a program with
/// several outputs adds each as it is made and commits the set at the end ([`commit_all`]). Dropped
/// uncommitted (a refusal, an error, a signal), it removes every temporary file.
#[derive(Default)]
pub struct OutputSet {
    files: Vec<Finished>,
}

impl OutputSet {
    /// Write `path`'s temporary file with `write`.
    pub fn add(&mut self, path: &Path, write: impl FnOnce(&mut AtomicFile) -> io::Result<()>) -> Result<()> {
        let mut f = AtomicFile::create(path)?;
        write(&mut f).map_err(|e| out_err(path, e))?;
        self.files.push(f.finish()?);
        Ok(())
    }
    /// Write `bytes` to `path`'s temporary file.
    pub fn add_bytes(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.add(path, |f| f.write_all(bytes))
    }
    /// Rename every file onto its name.
    pub fn commit(self) -> Result<()> {
        commit_all(self.files)
    }
    /// The written files, for a caller that commits them with others ([`commit_all`]).
    pub fn into_finished(self) -> Vec<Finished> {
        self.files
    }
}

/// A file being written under a temporary name; it appears under its final name only on
/// [`AtomicFile::commit`] (or [`commit_all`] after [`AtomicFile::finish`]). Dropping it uncommitted
/// (error, panic) removes the temporary file. A special file (device, FIFO, socket) is written in place.
pub struct AtomicFile {
    path: PathBuf,
    /// Rename target (the path, or the file a symlink points to).
    target: PathBuf,
    /// None once committed or abandoned, and for a special file.
    tmp: Option<TempPath>,
    file: Option<BufWriter<File>>,
    /// While digests are recorded ([`record_digests`]): the count of the bytes written so far, and
    /// their sha256 so far where they are hashed as written ([`Digesting::AsWritten`]).
    counted: Option<(u64, Option<sha2::Sha256>)>,
    /// Whether its temporary path was handed out ([`AtomicFile::temp_path`]): bytes written by name
    /// may have replaced those hashed on their way through [`Write`].
    by_name: std::sync::atomic::AtomicBool,
}

/// A completely written temporary file waiting for its rename (see [`commit_all`]). Dropping it
/// removes the temporary file.
pub struct Finished {
    path: PathBuf,
    target: PathBuf,
    tmp: Option<TempPath>,
}

impl Finished {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Finished {
    fn drop(&mut self) {
        if let Some(t) = self.tmp.take() {
            discard(t);
        }
    }
}

/// Rename every finished file onto its final name, all under one lock (a signal arriving meanwhile
/// waits until the whole set is in place). Stops at the first failure; the rest are removed.
///
/// An existing regular file is replaced by exchanging the two names and then removing the old
/// contents, the removals of a set in parallel ([`replace`]).
pub fn commit_all(files: Vec<Finished>) -> Result<()> {
    let mut reg = live();
    let mut first_err = None;
    let mut old_contents = Vec::new();
    for mut f in files {
        let Some(tmp) = f.tmp.take() else { continue };
        let p = tmp.to_path_buf();
        if first_err.is_none() {
            match replace(tmp, &f.target) {
                Ok(Some(old)) => {
                    old_contents.push(old);
                    continue; // still registered until removed below
                }
                Ok(None) => {}
                Err(e) => first_err = Some(out_err(&f.path, e)),
            }
        } else {
            drop(tmp);
        }
        forget(&mut reg, &p);
    }
    // the old files' pages are freed here, one thread per file (each costs about 5 ms per 16 MiB)
    let names: Vec<PathBuf> = old_contents.iter().map(|t| t.to_path_buf()).collect();
    std::thread::scope(|scope| {
        for old in old_contents {
            scope.spawn(move || {
                let p = old.to_path_buf();
                if let Err(e) = old.close() {
                    crate::base::log::warn(format!("nanobragg-rs: warning: could not remove the replaced file's old contents {}: {e}", p.display()));
                }
            });
        }
    });
    for p in names {
        forget(&mut reg, &p);
    }
    first_err.map_or(Ok(()), Err)
}

/// Put the temporary file `tmp` in place of `target`. Where `target` is an existing regular file
/// (Linux), the two names are exchanged (`renameat2(RENAME_EXCHANGE)`) and the old contents are
/// returned under the temporary name, for the caller to remove: a plain rename over an existing
/// file costs about 15 ms per 16 MiB on ext4, inside the rename, because ext4 starts the new file's
/// writeback there (`auto_da_alloc`, its guard for programs that neither fsync nor want to lose
/// data on power loss, which this module does not promise) and frees the old file's pages. Anything
/// else (no old file, a file system without the exchange, another OS) is a plain rename(2).
fn replace(tmp: TempPath, target: &Path) -> io::Result<Option<TempPath>> {
    #[cfg(target_os = "linux")]
    {
        let is_file = |p: &Path| fs::symlink_metadata(p).map(|m| m.file_type().is_file()).unwrap_or(false);
        if is_file(target) && exchange(&tmp, target).is_ok() {
            if is_file(&tmp) {
                return Ok(Some(tmp));
            }
            // the target changed to something else (a directory) after the test: undo and rename
            exchange(&tmp, target)?;
        }
    }
    tmp.persist(target).map(|_| None).map_err(|e| e.error)
}

/// Swap two names atomically (`renameat2` with `RENAME_EXCHANGE`, Linux 3.15 and later).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let a = CString::new(a.as_os_str().as_bytes())?;
    let b = CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: two NUL-terminated paths that live across the call; no memory is shared with the kernel after it
    let rc = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl AtomicFile {
    /// Start writing `path` (nothing is visible under that name yet, unless it is a special file).
    pub fn create(path: &Path) -> Result<AtomicFile> {
        match target_kind(path)? {
            TargetKind::Special => {
                // as the C's fopen(...,"wb"): a device or FIFO is written where it is
                let f = OpenOptions::new().write(true).open(path).map_err(|e| out_err(path, e))?;
                Ok(AtomicFile { path: path.to_path_buf(), target: path.to_path_buf(), tmp: None, file: Some(BufWriter::with_capacity(1 << 16, f)), counted: None, by_name: Default::default() })
            }
            TargetKind::Regular(target) => {
                let (tmp, f) = create_temp(&target)?;
                let counted = {
                    let d = digests();
                    (d.holders > 0).then(|| (0, (d.how == Digesting::AsWritten).then(<sha2::Sha256 as sha2::Digest>::new)))
                };
                Ok(AtomicFile { path: path.to_path_buf(), target, tmp: Some(tmp), file: Some(BufWriter::with_capacity(1 << 16, f)), counted, by_name: Default::default() })
            }
        }
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file (registered for cleanup), for a writer that must write it by name (libhdf5);
    /// `None` for a special file, written in place.
    pub fn temp_path(&self) -> Option<&Path> {
        self.by_name.store(true, std::sync::atomic::Ordering::Relaxed);
        self.tmp.as_deref()
    }

    /// Flush and close (or, read back together, keep open for its digest: [`record_digests`]), keeping
    /// the temporary name;
    /// the rename happens in [`commit_all`].
    pub fn finish(mut self) -> Result<Finished> {
        let file = self.file.take().expect("AtomicFile used after commit");
        let res = file.into_inner().map_err(|e| e.into_error()).map(|f| self.record_written(f));
        let tmp = self.tmp.take();
        let fin = Finished { path: self.path.clone(), target: self.target.clone(), tmp };
        match res {
            Ok(()) => Ok(fin),
            Err(e) => Err(out_err(&self.path, e)), // `fin` dropped: temp removed
        }
    }

    /// Keep the file's digest (or the file, to hash when taken) when what went through [`Write`] is
    /// the whole file: a file written by name ([`AtomicFile::temp_path`]: libhdf5) holds other bytes,
    /// and gets none.
    fn record_written(&mut self, file: File) {
        if let Some((bytes, hasher)) = self.counted.take() {
            if !self.by_name.load(std::sync::atomic::Ordering::Relaxed) && file.metadata().is_ok_and(|m| m.len() == bytes) {
                let mut d = digests();
                if d.holders > 0 {
                    let w = match hasher {
                        Some(h) => Written::Hashed(WrittenDigest { sha256: sha2::Digest::finalize(h).into(), bytes }),
                        None => Written::Open { file, bytes },
                    };
                    d.files.insert(self.path.clone(), w);
                }
            }
        }
    }

    /// Flush and rename onto the final path. On error the temporary file is removed.
    pub fn commit(self) -> Result<()> {
        let f = self.finish()?;
        commit_all(vec![f])
    }
}

impl AtomicFile {
    /// Count bytes just written, when the file is kept for its digest.
    fn count_written(&mut self, buf: &[u8]) {
        if let Some((n, h)) = self.counted.as_mut() {
            *n += buf.len() as u64;
            if let Some(h) = h {
                sha2::Digest::update(h, buf);
            }
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = match self.file.as_mut() {
            Some(f) => f.write(buf)?,
            None => return Err(io::Error::other("AtomicFile already committed")),
        };
        self.count_written(&buf[..n]);
        Ok(n)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.write_all(buf)?,
            None => return Err(io::Error::other("AtomicFile already committed")),
        }
        self.count_written(buf);
        Ok(())
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
        // close first; discard buffered data without reporting (the write is being abandoned)
        if let Some(f) = self.file.take() {
            let (f, _) = f.into_parts();
            drop(f);
        }
        if let Some(t) = self.tmp.take() {
            discard(t);
        }
    }
}

/// Remove every temporary file of this process now (signal handler; also safe at any time).
pub fn remove_all_temps() {
    let mut reg = live();
    for p in reg.drain(..) {
        let _ = fs::remove_file(p);
    }
}

/// On SIGINT, SIGTERM or SIGHUP: remove this process's temporary files and exit with 128 + the
/// signal number (130, 143, 129). Outputs already renamed stay; an output set being renamed is
/// completed first (see [`commit_all`]).
pub fn install_signal_cleanup() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    // A file-size limit (`ulimit -f`) must fail the write with EFBIG, which is reported and cleaned
    // up, instead of killing the process with SIGXFSZ and leaving temporary files.
    // SAFETY: setting a signal to SIG_IGN has no handler code to run.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new().name("signals".into()).spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let reg = live();
            for p in reg.iter() {
                let _ = fs::remove_file(p);
            }
            // exit while holding the lock: no temp can be created or renamed after the sweep; `_exit`,
            // not `exit`: the C library's exit handlers (HDF5's teardown) ran while the main thread was
            // still in HDF5 calls, and printed screens of HDF5 diagnostics after an interrupt
            // SAFETY: _exit ends the process at once; it has no preconditions.
            unsafe { libc::_exit(128 + sig) };
        }
    });
}

/// Remove temporary files `.<name>.tmp-<pid>-<random>` left in `dir` by processes that no longer
/// exist (killed with SIGKILL, crashed). Temps of live processes are left alone.
pub fn sweep_stale_temps(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let me = std::process::id();
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with('.') {
            continue;
        }
        let Some((_, tail)) = name.rsplit_once(".tmp-") else { continue };
        let Some((pid, n)) = tail.split_once('-') else { continue };
        let (Ok(pid), true) = (pid.parse::<u32>(), !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric())) else { continue };
        if pid == me || pid == 0 || pid > i32::MAX as u32 {
            continue;
        }
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
        if !alive && e.file_type().map(|t| t.is_file()).unwrap_or(false) {
            let _ = fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    /// [`take_digests`] of one path.
    fn take_digest(path: &Path) -> Option<WrittenDigest> {
        take_digests(&[path], 1).pop().flatten()
    }
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

    /// While recorded, a file's digest is the sha256 of its bytes on disk, in either mode (hashed
    /// while written, or read back when taken); a file written by name behind the writer's back gets
    /// none, and nothing is kept once recording stops.
    #[test]
    fn digests_are_of_the_bytes_on_disk() {
        for how in [Digesting::ReadBack, Digesting::AsWritten] {
            digests_of_the_bytes_on_disk(how);
        }
    }

    fn digests_of_the_bytes_on_disk(how: Digesting) {
        let d = tempfile::tempdir().unwrap();
        let (a, b, c) = (d.path().join("a.bin"), d.path().join("b.bin"), d.path().join("c.bin"));
        let rec = record_digests_by(how);
        assert_eq!(digests().how, how);
        let mut f = AtomicFile::create(&a).unwrap();
        f.write_all(b"header ").unwrap();
        assert_eq!(f.write(b"and body").unwrap(), 8);
        f.commit().unwrap();
        let got = take_digest(&a).unwrap();
        let on_disk = fs::read(&a).unwrap();
        assert_eq!((got.sha256, got.bytes), (<[u8; 32]>::from(Sha256::digest(&on_disk)), on_disk.len() as u64));
        assert_eq!(take_digest(&a), None, "taken once");
        let f = AtomicFile::create(&b).unwrap();
        fs::write(f.temp_path().unwrap(), b"written by name").unwrap();
        f.commit().unwrap();
        assert_eq!(take_digest(&b), None);
        write_atomic(&c, b"c").unwrap();
        // several taken at once (read back together, or hashed as written), one never written, one
        // written twice (the last)
        let many: Vec<PathBuf> = (0..5).map(|i| d.path().join(format!("m{i}.bin"))).collect();
        for (i, p) in many.iter().enumerate().take(4) {
            write_atomic(p, &vec![i as u8; 70_000 * i + 3]).unwrap();
        }
        write_atomic(&many[2], b"rewritten").unwrap();
        let paths: Vec<&Path> = many.iter().map(PathBuf::as_path).collect();
        let got = take_digests(&paths, 1);
        for (p, g) in many.iter().zip(&got).take(4) {
            let on_disk = fs::read(p).unwrap();
            assert_eq!(g.as_ref().map(|g| (g.sha256, g.bytes)), Some((<[u8; 32]>::from(Sha256::digest(&on_disk)), on_disk.len() as u64)));
        }
        assert_eq!(got[4], None);
        drop(rec);
        assert_eq!(take_digest(&c), None, "forgotten when recording stops");
        write_atomic(&c, b"c").unwrap();
        assert_eq!(take_digest(&c), None, "not recorded");
    }

    /// Outputs get 0666 less the umask, as the C's fopen gives them (tempfile alone would make 0600).
    #[test]
    fn outputs_are_not_private() {
        let Some(umask) = fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Umask:").and_then(|v| u32::from_str_radix(v.trim(), 8).ok())))
        else {
            println!("SKIPPED: output permission check, because /proc/self/status has no Umask line");
            return;
        };
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.bin");
        write_atomic(&p, b"x").unwrap();
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o666 & !umask);
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

    /// Replacing exchanges the names and removes the old contents: another hard link keeps the old
    /// file (as after rename(2)), no temporary name is left on disk or in the cleanup registry.
    #[test]
    fn replacing_a_set_leaves_old_links_and_no_temps() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, link) = (d.path().join("a.bin"), d.path().join("b.img"), d.path().join("a.link"));
        fs::write(&a, b"old a").unwrap();
        fs::write(&b, b"old b").unwrap();
        fs::hard_link(&a, &link).unwrap();
        let fin: Vec<Finished> = [(&a, &b"new a, longer"[..]), (&b, &b"nb"[..])]
            .iter()
            .map(|(p, bytes)| {
                let mut f = AtomicFile::create(p).unwrap();
                f.write_all(bytes).unwrap();
                f.finish().unwrap()
            })
            .collect();
        commit_all(fin).unwrap();
        assert_eq!(fs::read(&a).unwrap(), b"new a, longer");
        assert_eq!(fs::read(&b).unwrap(), b"nb");
        assert_eq!(fs::read(&link).unwrap(), b"old a");
        assert_eq!(entries(d.path()), vec!["a.bin", "a.link", "b.img"]);
        assert!(!live().iter().any(|t| t.starts_with(d.path())), "temps still registered for cleanup");
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
        let name = tmp.file_name().unwrap().to_string_lossy().into_owned();
        let tail = name.strip_prefix(&format!(".nb_atomic_probe.tmp-{}-", std::process::id())).unwrap();
        assert_eq!(tail.len(), TEMP_RANDOM_LEN);
        assert!(live().contains(&tmp.to_path_buf()));
        let p = tmp.to_path_buf();
        discard(tmp);
        assert!(!p.exists() && !live().contains(&p));
    }
}
