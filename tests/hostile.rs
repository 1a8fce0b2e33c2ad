//! Hostile and careless input: the promise is a one-line error and exit 9, never a panic, never a
//! runaway allocation, never a partial or clobbered output set, never a silently wrong image.
//!
//! * property tests of the flag parser and every reader (HKL, Fdump, matrix, source file, SMV/mask,
//!   text), in process with a small memory limit and a bounded number of cases;
//! * runs of the binary as a child under an address-space limit (RLIMIT_AS), so that a runaway
//!   allocation fails the test instead of passing on a big machine;
//! * special files (device nodes made with mknod in a temporary folder, a FIFO), aliasing, partial
//!   output sets, write errors (RLIMIT_FSIZE, a full device as stdout, a closed pipe), SIGINT and
//!   SIGTERM in the middle of a run, stale temporary files of killed runs.

use proptest::prelude::*;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nanobragg-rs");
/// Address-space limit for child runs: far below what any refused case would allocate.
const AS_LIMIT: u64 = 3 << 30;

fn base() -> Vec<String> {
    "-cell 100 100 100 90 90 90 -default_F 100 -lambda 6.2 -N 5 -distance 100 -pixel 0.1"
        .split(' ')
        .map(String::from)
        .collect()
}

fn cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir).arg("simulate");
    c.args(args);
    c.env_remove("RAYON_NUM_THREADS").env_remove("NANOBRAGG_MAX_MEMORY");
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    limit(&mut c, libc::RLIMIT_AS, AS_LIMIT);
    c
}

fn limit(c: &mut Command, which: libc::__rlimit_resource_t, bytes: u64) {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let rl = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
            if libc::setrlimit(which, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn run(dir: &Path, args: &[&str]) -> Output {
    let t = Instant::now();
    let out = cmd(dir, args).output().expect("start nanobragg-rs");
    assert!(t.elapsed() < Duration::from_secs(60), "{args:?} took {:?}", t.elapsed());
    out
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Exit 9 with one line on stderr naming `what`.
fn refused(o: &Output, what: &str, ctx: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(9), "{ctx}: expected exit 9, got {:?}\n{}", o.status, text(o));
    assert!(!err.contains("panicked"), "{ctx}: panic\n{err}");
    let line = err.lines().find(|l| l.contains("error:")).unwrap_or_else(|| panic!("{ctx}: no error line\n{err}"));
    assert!(line.contains(what), "{ctx}: error should name {what:?}: {line}");
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

fn no_temps(dir: &Path, ctx: &str) {
    let t: Vec<String> = entries(dir).into_iter().filter(|n| n.contains(".tmp-")).collect();
    assert!(t.is_empty(), "{ctx}: temporary files left: {t:?}");
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn small(extra: &[&str]) -> Vec<String> {
    let mut v = base();
    v.extend(["-detpixels", "64", "-nonoise", "-nopgm"].iter().map(|s| s.to_string()));
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn run_small(dir: &Path, extra: &[&str]) -> Output {
    let a = small(extra);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    run(dir, &a)
}

// ------------------------------------------------------------------------- property tests, in process

fn config() -> ProptestConfig {
    ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() }
}

fn hostile_word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("-0".to_string()),
        Just("1e300".to_string()),
        Just("-1e300".to_string()),
        Just("1e-300".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("2147483648".to_string()),
        Just("-2147483649".to_string()),
        Just("9223372036854775807".to_string()),
        Just("".to_string()),
        Just("random".to_string()),
        Just("=".to_string()),
        Just("0x10".to_string()),
        Just("1,5".to_string()),
        "[ -~]{0,12}",
        any::<f64>().prop_map(|x| x.to_string()),
        any::<i64>().prop_map(|x| x.to_string()),
    ]
}

fn flag_word() -> impl Strategy<Value = String> {
    let names = nanobragg::cli::parse::all_spellings();
    prop_oneof![
        3 => proptest::sample::select(names).prop_map(|s| s.to_string()),
        1 => hostile_word(),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// The parser returns a Config or an error for any words; it never panics. (-img/-mask name
    /// files that do not exist here, so no file is read.)
    #[test]
    fn parser_never_panics(words in proptest::collection::vec(flag_word(), 0..14)) {
        nanobragg::base::memory::set_max_memory(256 << 20);
        std::env::set_var("NANOBRAGG_MAX_MEMORY", "256M");
        let _ = nanobragg::cli::parse::parse_simulate_args(&words);
        let _ = nanobragg::cli::parse::suggest(words.first().map(String::as_str).unwrap_or(""));
    }

    #[test]
    fn readers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..700), texty in "[-0-9 .e\n\tinfa]{0,300}") {
        nanobragg::base::memory::set_max_memory(256 << 20);
        std::env::set_var("NANOBRAGG_MAX_MEMORY", "256M");
        let d = tmp();
        for (i, content) in [bytes.clone(), texty.clone().into_bytes()].iter().enumerate() {
            let p = d.path().join(format!("in{i}"));
            std::fs::write(&p, content).unwrap();
            let _ = nanobragg::io::hkl::read_hkl(&p, 1.0, &mut nanobragg::base::log::Log::default());
            let _ = nanobragg::io::fdump::read_fdump(&p);
            let _ = nanobragg::io::matrix::read_matrix_file(&p);
            let _ = nanobragg::io::sourcefile::read_source_file(&p, &[1.0, 0.0, 0.0], 1e-10);
            let _ = nanobragg::io::smv::read_smv(&p);
            let _ = nanobragg::io::text::read_text_file(&p, 2);
        }
        // an SMV header with hostile values, through the -img/-mask path of the parser
        let hdr = format!("{{\nHEADER_BYTES=512;\nSIZE1=2;\nSIZE2=2;\n{}}}\x0c", texty.replace('\n', ";\n"));
        let mut b = hdr.into_bytes();
        b.resize(512, b' ');
        b.extend_from_slice(&[1, 0, 2, 0, 3, 0, 4, 0]);
        let p = d.path().join("h.img");
        std::fs::write(&p, &b).unwrap();
        let _ = nanobragg::cli::parse::parse_simulate_args(&["-img".into(), p.display().to_string()]);
        let _ = nanobragg::cli::parse::parse_simulate_args(&["-mask".into(), p.display().to_string()]);
    }

    /// An Fdump header claiming any ranges never allocates more than the file holds.
    #[test]
    fn fdump_header_is_checked_before_allocating(r in proptest::array::uniform6(any::<i32>()), extra in 0usize..64) {
        nanobragg::base::memory::set_max_memory(256 << 20);
        std::env::set_var("NANOBRAGG_MAX_MEMORY", "256M");
        let d = tmp();
        let p = d.path().join("Fdump.bin");
        let mut b = format!("{} {} {} {} {} {}\n\x0c", r[0], r[1], r[2], r[3], r[4], r[5]).into_bytes();
        b.extend(vec![0u8; extra]);
        std::fs::write(&p, &b).unwrap();
        let _ = nanobragg::io::fdump::read_fdump(&p);
    }
}

#[test]
fn suggestions_are_close_matches_only() {
    use nanobragg::cli::parse::suggest;
    assert_eq!(suggest("-cbf"), None);
    assert_eq!(suggest("-h5"), None);
    assert_eq!(suggest("-distnace"), Some("-distance"));
    assert_eq!(suggest("-lamda"), Some("-lambda"));
    assert_eq!(suggest("--floatfile").map(|s| s.trim_start_matches('-')), Some("floatfile"));
}

#[test]
fn fdump_reader_refuses_damage() {
    use nanobragg::io::fdump::read_fdump;
    let d = tmp();
    let p = d.path().join("Fdump.bin");
    let good = |vals: &[f64]| {
        let mut b = b"0 0 0 0 0 1\n\x0c".to_vec();
        for v in vals {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    };
    // 2 x 2 x 3 grid = 12 values
    std::fs::write(&p, good(&[1.0; 12])).unwrap();
    assert!(read_fdump(&p).is_ok());
    let mut nan = [1.0; 12];
    nan[5] = f64::NAN;
    std::fs::write(&p, good(&nan)).unwrap();
    assert!(read_fdump(&p).unwrap_err().to_string().contains("NaN"));
    let mut b = good(&[1.0; 12]);
    b.truncate(b.len() - 3);
    std::fs::write(&p, &b).unwrap();
    assert!(read_fdump(&p).unwrap_err().to_string().contains("truncated"));
    std::fs::write(&p, b"-2147483648 2147483647 0 0 0 0\n\x0c").unwrap();
    assert!(read_fdump(&p).is_err());
}

// ------------------------------------------------------------------------- runaway sizes and panics

#[test]
fn huge_sizes_are_refused_before_allocating() {
    let d = tmp();
    for args in [["-detsize", "1e300"], ["-pixel", "1e-300"]] {
        let o = run(d.path(), &["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-nonoise", "-nopgm", args[0], args[1]]);
        refused(&o, "far too large", &format!("{args:?}"));
    }
    for extra in [
        &["-detpixels", "32768"][..],
        &["-phisteps", "1000000000", "-osc", "1"],
        &["-hdivsteps", "1000000000", "-hdivrange", "1"],
        &["-divsteps", "1000000000", "-divergence", "1"],
        &["-dispsteps", "1000000000", "-dispersion", "10"],
        &["-detector_thicksteps", "1000000000", "-detector_thick", "100"],
        &["-mosaic_dom", "2147483647", "-mosaic", "1"],
    ] {
        let o = run_small(d.path(), extra);
        assert_eq!(o.status.code(), Some(9), "{extra:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{extra:?}");
    }
    assert!(entries(d.path()).is_empty(), "refused runs wrote {:?}", entries(d.path()));

    std::fs::write(d.path().join("big.hkl"), "500 500 500 1\n-500 -500 -500 1\n").unwrap();
    let o = run_small(d.path(), &["-hkl", "big.hkl"]);
    refused(&o, "big.hkl", "sparse HKL range");
    // a truncated Fdump whose header claims a huge grid
    std::fs::write(d.path().join("Fdump.bin"), b"-1000 1000 -1000 1000 -1000 1000\n\x0c\0\0\0\0").unwrap();
    let o = run(d.path(), &["-cell", "100", "100", "100", "90", "90", "90", "-detpixels", "16", "-nonoise", "-nopgm"]);
    refused(&o, "Fdump.bin", "huge Fdump header");
}

#[test]
fn thread_env_and_non_utf8_names() {
    let d = tmp();
    let a = small(&[]);
    let o = cmd(d.path(), &a.iter().map(String::as_str).collect::<Vec<_>>()).env("RAYON_NUM_THREADS", "100000").output().unwrap();
    refused(&o, "RAYON_NUM_THREADS", "huge thread count");

    let name = OsString::from_vec(b"f\xff.bin".to_vec());
    let mut c = cmd(d.path(), &a.iter().map(String::as_str).collect::<Vec<_>>());
    c.arg("-floatfile").arg(&name);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::metadata(d.path().join(PathBuf::from(name))).unwrap().len(), 64 * 64 * 4);
}

// ------------------------------------------------------------------------- values and messages

#[test]
fn wrong_images_are_refused_or_flagged() {
    let d = tmp();
    for (extra, what) in [
        (&["-default_F", "1e300"][..], "-default_F"),
        (&["-fluence", "1e300"], "-fluence"),
        (&["-flux", "-1e12", "-exposure", "1"], "-flux"),
        (&["-flux", "1e300", "-exposure", "1"], "-flux"),
        (&["-polar", "1e300"], "-polar"),
        (&["-mosaic", "1e300", "-mosaic_dom", "2"], "-mosaic"),
        (&["-water", "-1"], "-water"),
        (&["-water", "1e300"], "-water"),
        (&["-beam_vector", "0", "0", "0"], "-beam_vector"),
        (&["-lambda", "1e-300"], "-lambda"),
        (&["-lambda", "1e300"], "-lambda: 1e290 m is not an X-ray wavelength"),
        (&["-N", "1000000000"], "-N"),
    ] {
        let o = run_small(d.path(), extra);
        refused(&o, what, &format!("{extra:?}"));
        assert!(!text(&o).contains("9223372036854775807"), "{extra:?}: {}", text(&o));
    }
    std::fs::write(d.path().join("f.hkl"), "1 2 3 1e300\n").unwrap();
    refused(&run_small(d.path(), &["-hkl", "f.hkl"]), "f.hkl", "F = 1e300");
    std::fs::write(d.path().join("idx.hkl"), "10000000 0 0 1\n").unwrap();
    let o = run_small(d.path(), &["-hkl", "idx.hkl"]);
    refused(&o, "out of range", "index out of range");
    std::fs::write(d.path().join("src.txt"), "hello world\n").unwrap();
    let o = run_small(d.path(), &["-sourcefile", "src.txt"]);
    refused(&o, "src.txt line 1: -sourcefile: 'hello' is not a number", "text line in a source file");
    let o = run(d.path(), &["-cell", "0", "-default_F", "1", "-detpixels", "16", "-nonoise", "-nopgm"]);
    refused(&o, "-cell", "-cell 0");
    let o = run(d.path(), &["-cbf", "x"]);
    refused(&o, "-cbf", "-cbf");
    assert!(!text(&o).contains("did you mean"), "{}", text(&o));

    // a folder named as the structure-factor cache is no cache
    std::fs::create_dir_all(d.path().join("cache_dir")).unwrap();
    let o = run_small(d.path(), &["-dump", "cache_dir"]);
    refused(&o, "is a directory", "-dump DIR");

    // parallel detector axes (every pixel on one line) are no detector
    for v in [["0", "0", "1"], ["0", "0", "-2"]] {
        let o = run_small(d.path(), &["-fdet_vector", "0", "0", "1", "-sdet_vector", v[0], v[1], v[2]]);
        refused(&o, "parallel", "parallel detector axes");
    }

    // SMV headers are held to the same rules as the flags
    // (a value that is not numbers is refused, not read as its prefix or 0)
    for bad in ["WAVELENGTH=0", "WAVELENGTH=inf", "DISTANCE=-100", "PIXEL_SIZE=-0.1", "BEAM_CENTER_X=inf", "PIXEL_SIZE=0.15x", "ORGX=abc", "PHI=1 x"] {
        let mut b = format!("{{\nHEADER_BYTES=512;\nSIZE1=16;\nSIZE2=16;\n{bad};\n}}\x0c").into_bytes();
        b.resize(512 + 2 * 256, 0);
        std::fs::write(d.path().join("h.img"), &b).unwrap();
        let o = run_small(d.path(), &["-img", "h.img"]);
        refused(&o, bad.split('=').next().unwrap(), bad);
    }

    // what cannot be known up front is flagged: non-finite pixels never exit 0 silently
    let o = run_small(d.path(), &["-default_F", "1e100", "-fluence", "1e100"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not finite"), "{}", text(&o));
}

#[test]
fn help_preamble_mentions_builtin_crystal() {
    let o = Command::new(BIN).args(["simulate", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("built-in benchmark crystal"));
}

#[test]
fn fdump_in_folder_is_named_when_no_cell() {
    let d = tmp();
    std::fs::write(d.path().join("x.hkl"), "0 0 0 10\n1 1 1 10\n").unwrap();
    assert!(run_small(d.path(), &["-hkl", "x.hkl"]).status.success());
    assert!(d.path().join("Fdump.bin").is_file());
    let o = run(d.path(), &["--detector", "16", "-nonoise", "-nopgm"]);
    refused(&o, "Fdump.bin", "no cell, Fdump present");
}

// ------------------------------------------------------------------------- special files

#[test]
fn special_files_are_written_in_place() {
    let d = tmp();
    let null = d.path().join("null");
    let st = Command::new("mknod").arg(&null).args(["c", "1", "3"]).status();
    if !st.map(|s| s.success()).unwrap_or(false) {
        println!("SKIPPED: special-file test because mknod failed (not root?)");
        return;
    }
    let o = run_small(d.path(), &["-floatfile", "null", "-intfile", "null"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(std::fs::metadata(&null).unwrap().file_type().is_char_device(), "device node replaced");
    no_temps(d.path(), "device");

    // a FIFO is written in place too (a reader on the other end gets the image)
    let fifo = d.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap().len())
    };
    let o = run_small(d.path(), &["-floatfile", "fifo"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(reader.join().unwrap(), 64 * 64 * 4);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());

    // a directory is refused
    std::fs::create_dir(d.path().join("adir")).unwrap();
    refused(&run_small(d.path(), &["-intfile", "adir"]), "adir", "directory output");
    assert!(!d.path().join("floatimage.bin").exists(), "float written although int was refused");
}

// ------------------------------------------------------------------------- aliasing and partial sets

#[test]
fn outputs_never_overwrite_inputs_or_each_other() {
    let d = tmp();
    let p = d.path();
    refused(&run_small(p, &["-floatfile", "f.bin", "-intfile", "./f.bin"]), "f.bin", "float = int");
    assert!(entries(p).is_empty(), "{:?}", entries(p));

    std::fs::write(p.join("x.hkl"), "0 0 0 10\n1 1 1 10\n").unwrap();
    refused(&run_small(p, &["-hkl", "x.hkl", "-dump", "x.hkl"]), "x.hkl", "-dump = -hkl");
    assert_eq!(std::fs::read_to_string(p.join("x.hkl")).unwrap(), "0 0 0 10\n1 1 1 10\n");

    std::fs::write(p.join("A.mat"), "0.01 0 0\n0 0.01 0\n0 0 0.01\n").unwrap();
    refused(&run_small(p, &["-mat", "A.mat", "-intfile", "A.mat"]), "A.mat", "-intfile = -mat");
    std::fs::write(p.join("s.txt"), "-10 0 0 1 6.2e-10\n").unwrap();
    refused(&run_small(p, &["-sourcefile", "s.txt", "-floatfile", "s.txt"]), "s.txt", "output = -sourcefile");
    std::fs::write(p.join("t.stol"), "0.1 1\n0.2 2\n").unwrap();
    refused(&run_small(p, &["-stol", "t.stol", "-floatfile", "./t.stol"]), "t.stol", "output = -stol");

    // the Fdump cache is an input when it is read
    assert!(run_small(p, &["-hkl", "x.hkl"]).status.success());
    let cache = std::fs::read(p.join("Fdump.bin")).unwrap();
    let o = run(p, &["-cell", "100", "100", "100", "90", "90", "90", "-detpixels", "16", "-nonoise", "-nopgm", "-floatfile", "Fdump.bin"]);
    refused(&o, "Fdump.bin", "float = Fdump being read");
    assert_eq!(std::fs::read(p.join("Fdump.bin")).unwrap(), cache);
    no_temps(p, "aliasing");
}

#[test]
fn refused_runs_write_nothing() {
    let d = tmp();
    let p = d.path();
    refused(&run_small(p, &["-intfile", ""]), "", "empty int name");
    let long = "x".repeat(100_000);
    let o = run_small(p, &["-intfile", &long]);
    assert_eq!(o.status.code(), Some(9), "{}", text(&o));
    refused(&run_small(p, &["-floatfile", "nodir/f.bin"]), "nodir", "missing directory");
    assert!(entries(p).is_empty(), "{:?}", entries(p));

    refused(&run_small(p, &["--out-dir", "newdir", "-sourcefile", "missing.txt"]), "missing.txt", "missing sourcefile");
    assert!(!p.join("newdir").exists(), "--out-dir created before the inputs were checked");

    std::fs::write(p.join("x.hkl"), "0 0 0 10\n1 1 1 10\n").unwrap();
    std::fs::write(p.join("bad.txt"), "hello\n").unwrap();
    refused(&run_small(p, &["-hkl", "x.hkl", "-sourcefile", "bad.txt"]), "bad.txt", "bad sourcefile");
    std::fs::write(p.join("empty.stol"), "").unwrap();
    refused(&run_small(p, &["-hkl", "x.hkl", "-stol", "empty.stol"]), "empty.stol", "bad stol");
    assert!(!p.join("Fdump.bin").exists(), "Fdump.bin written by a refused run");
    assert_eq!(entries(p), vec!["bad.txt", "empty.stol", "x.hkl"]);
}

// ------------------------------------------------------------------------- write errors

#[test]
fn write_errors_leave_old_outputs_intact() {
    let d = tmp();
    let p = d.path();
    for f in ["floatimage.bin", "intimage.img", "noiseimage.img", "image.pgm"] {
        std::fs::write(p.join(f), format!("old {f}")).unwrap();
    }
    // 256x256: the float image (256 KiB) is over the 100 KiB file-size limit, the PGM is not
    let mut c = cmd(p, &["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-detpixels", "256", "-seed", "1"]);
    limit(&mut c, libc::RLIMIT_FSIZE, 100 << 10);
    let o = c.output().unwrap();
    refused(&o, "floatimage.bin", "RLIMIT_FSIZE");
    for f in ["floatimage.bin", "intimage.img", "noiseimage.img", "image.pgm"] {
        assert_eq!(std::fs::read_to_string(p.join(f)).unwrap(), format!("old {f}"), "{f} replaced by a failed run");
    }
    no_temps(p, "RLIMIT_FSIZE");
}

#[test]
fn stdout_errors() {
    let d = tmp();
    // a closed pipe: quiet, exit 0
    for args in [&["--help"][..], &["--version"], &["simulate", "--help"]] {
        let mut c = Command::new(BIN);
        c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        assert!(o.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    // a full device: exit 9 with a message
    let full = d.path().join("full");
    if Command::new("mknod").arg(&full).args(["c", "1", "7"]).status().map(|s| s.success()).unwrap_or(false) {
        let o = Command::new(BIN).arg("--version").stdout(std::fs::OpenOptions::new().write(true).open(&full).unwrap()).output().unwrap();
        assert_eq!(o.status.code(), Some(9));
        assert!(String::from_utf8_lossy(&o.stderr).contains("standard output"));
    } else {
        println!("SKIPPED: full-device stdout test because mknod failed (not root?)");
    }
}

// ------------------------------------------------------------------------- signals and stale temps

#[test]
fn interrupted_runs_leave_no_temp_and_old_outputs() {
    let d = tmp();
    let p = d.path();
    // The noise image goes to a FIFO nobody reads: its writer blocks opening it while the other
    // outputs are being written to temporary files, so the signal lands in the middle of writing.
    assert!(Command::new("mkfifo").arg(p.join("fifo")).status().unwrap().success());
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        std::fs::write(p.join("floatimage.bin"), "old").unwrap();
        let mut c = cmd(p, &["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-detpixels", "512", "-noisefile", "fifo"]);
        c.stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let t = Instant::now();
        while !entries(p).iter().any(|n| n.contains(".tmp-")) && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        let st = child.wait().unwrap();
        assert_eq!(st.code(), Some(code), "signal {sig}");
        no_temps(p, "after a signal");
        assert_eq!(std::fs::read_to_string(p.join("floatimage.bin")).unwrap(), "old");
        assert!(!p.join("intimage.img").exists());
    }
}

#[test]
fn stale_temps_of_dead_runs_are_swept() {
    let d = tmp();
    let p = d.path();
    // a pid that is certainly dead: a child that has exited and been reaped
    let dead = Command::new("true").spawn().unwrap();
    let pid = dead.id();
    let mut dead = dead;
    dead.wait().unwrap();
    let stale = p.join(format!(".floatimage.bin.tmp-{pid}-0"));
    std::fs::write(&stale, "junk").unwrap();
    let live = p.join(format!(".floatimage.bin.tmp-{}-0", std::process::id()));
    std::fs::write(&live, "mine").unwrap();
    assert!(run_small(p, &[]).status.success());
    assert!(!stale.exists(), "stale temp of a dead process left");
    assert!(live.exists(), "temp of a live process removed");
}

/// What an audit found the flags' checks did not reach: crystal sizes past the 1e7 cells an axis
/// `-N` allows, a zero two-theta axis (the detector's axes shrank), dispersions that reach
/// wavelengths of 0 and below (a NaN image), and source-file wavelengths no X-ray has.
#[test]
fn derived_values_stay_within_the_flags_ranges() {
    let d = tmp();
    for (extra, what) in [
        (&["-xtalsize", "1e300"][..], "-sample_thick (or -xtalsize): 1e+300 mm is"),
        (&["-sample_thick", "1e3"][..], "-sample_thick (or -xtalsize): 1000 mm is 1e+08 unit cells (at most 1e7 per axis)"),
        (&["-sample_height", "1e5", "-beamsize", "1e6"][..], "-sample_height (or -xtalsize)"),
        (&["-twotheta_axis", "0", "0", "0", "-twotheta", "45"][..], "-twotheta_axis: 0 0 0 has no direction"),
        (&["-dispersion", "200", "-dispsteps", "3"][..], "-dispersion: 200% around 6.2e-10 m reaches a wavelength of 0 m"),
        (&["-dispersion", "1e6", "-dispsteps", "2"][..], "-dispersion"),
        // a 1e294 m sensor put the pixels' layers at infinity (an empty image, exit 0)
        (&["-detector_thick", "1e300"][..], "-detector_thick: 1e+300 um is not a sensor's thickness"),
        // thickness without absorption: nothing captured, an all-zero image (as nanoBragg.c)
        (&["-detector_abs", "inf", "-detector_thick", "100"][..], "-detector_absorb: an infinite absorption depth"),
        (&["-detector_thick", "100", "-detector_abs", "INF"][..], "-detector_absorb: an infinite absorption depth"),
        // pivoting about the direct-beam spot, 2θ >= 90° leaves the spot in or behind the sample's
        // plane (an "oversampling of 4e15" at 90°, an empty image at 100°)
        (&["-twotheta", "90"][..], "-twotheta: puts the detector's plane through or behind the sample"),
        (&["-twotheta", "100"][..], "-twotheta: puts the detector's plane through or behind the sample"),
    ] {
        refused(&run_small(d.path(), extra), what, &format!("{extra:?}"));
    }
    // a crystal of 1e7 cells an axis from its size is still one; a zero two-theta axis at 0° is unused
    assert!(run_small(d.path(), &["-sample_thick", "1e-3", "-N", "1"]).status.success());
    assert!(run_small(d.path(), &["-twotheta_axis", "0", "0", "0", "-twotheta", "0"]).status.success());
    // a plane still in front of the sample is a geometry: a back-scattering detector by its vectors,
    // a rotation past 90° about the beam spot (nanoBragg.c renders both; a review found them refused)
    assert!(run_small(d.path(), &["-odet_vector", "-1", "0", "0"]).status.success());
    assert!(run_small(d.path(), &["-mosflm", "-detector_roty", "120"]).status.success());
    std::fs::write(d.path().join("far.txt"), "-10 0 0 1 1\n").unwrap();
    refused(&run_small(d.path(), &["-sourcefile", "far.txt"]), "far.txt: source 1: wavelength 1 m, outside 1e-16 to 1e-3 m", "1 m source");
}

/// A detector read from a file does not move with -distance/-Xbeam/-detector_rot*: their derivative
/// images were all 0 and `refine` "converged" without moving; both are refused naming the file.
#[test]
fn detector_parameters_of_a_file_detector_are_refused() {
    let d = tmp();
    let p = d.path();
    let geom = "photon_energy = 12400\nres = 10000\nclen = 0.06\nadu_per_photon = 1\n\
                q0/min_fs = 0\nq0/max_fs = 31\nq0/min_ss = 0\nq0/max_ss = 31\nq0/fs = +1.0x\nq0/ss = +1.0y\n\
                q0/corner_x = -16\nq0/corner_y = -16\n";
    std::fs::write(p.join("det.geom"), geom).unwrap();
    let flags = ["--geom", "det.geom", "-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-N", "5", "-nonoise", "-nopgm"];
    let with = |more: &[&'static str]| -> Vec<&'static str> { [&flags[..], more].concat() };
    let o = run(p, &with(&["--gradients", "lambda,distance", "-floatfile", "f.bin"]));
    refused(&o, "--gradients: 'distance' moves the detector of the flags, but the panels come from the --geom file", "distance");
    assert!(!p.join("f.bin").exists());
    assert!(run(p, &with(&["--gradients", "lambda", "-floatfile", "f.bin"])).status.success());
    let mut c = Command::new(BIN);
    c.current_dir(p).arg("refine").args(with(&["--observed", "f.bin", "--refine", "Xbeam", "--params-out", "fit.json"]));
    let o = c.output().unwrap();
    refused(&o, "--refine: 'Xbeam' moves the detector", "refine Xbeam");
    assert!(!p.join("fit.json").exists());
}

/// Flags accepted (as the C) that place nothing say so on stderr: -pix0_vector(_mm), which only
/// switches to the CUSTOM convention, -Xbeam/-Ybeam and -Xclose/-Yclose under -xds/-dials, and
/// -Xclose/-Yclose/-ORGX/-ORGY under MOSFLM, DENZO and ADXV; a beam centre that does act says nothing.
#[test]
fn unused_geometry_flags_warn() {
    let d = tmp();
    for (flags, want) in [
        (&["-pix0_vector", "0.1", "0.02", "-0.02"][..], Some("-pix0_vector is not applied")),
        (&["-pix0_vector_mm", "100", "20", "-20"][..], Some("-pix0_vector_mm is not applied")),
        (&["-xds", "-Xbeam", "3", "-Ybeam", "2"][..], Some("-Xbeam/-Ybeam under -xds/-dials only fill the header")),
        (&["-dials", "-Ybeam", "2"][..], Some("-Ybeam under -xds/-dials")),
        (&["-mosflm", "-Xbeam", "3", "-Ybeam", "2"][..], None),
        // the image is the same without them (checked against nanoBragg.c): said
        (&["-ORGX", "20", "-ORGY", "30"][..], Some("-ORGX/-ORGY under the MOSFLM convention place nothing")),
        (&["-denzo", "-Xclose", "2"][..], Some("-Xclose under the DENZO convention places nothing")),
        (&["-adxv", "-Yclose", "2", "-ORGX", "3"][..], Some("-Yclose/-ORGX under the ADXV convention place nothing")),
        (&["-xds", "-Xclose", "2", "-Yclose", "3"][..], Some("-Xclose/-Yclose under -xds/-dials only fill the header")),
        (&["-xds", "-ORGX", "20"][..], None),
    ] {
        let o = run_small(d.path(), flags);
        assert!(o.status.success(), "{flags:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        match want {
            Some(w) => assert_eq!(err.matches(w).count(), 1, "{flags:?}: {err}"),
            None => assert!(!err.contains("warning"), "{flags:?}: {err}"),
        }
    }
}

/// The built-in crystal's note names the flags that replace its values (it listed -N 5 while the
/// run rendered -N 10), and adds nothing when none is given.
#[test]
fn builtin_crystal_note_names_overrides() {
    let d = tmp();
    let o = run(d.path(), &["--detector", "16", "-N", "10", "-lambda", "1", "-nonoise", "-nopgm"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("-lambda 6.2; your -N, -lambda replace these)"), "{}", text(&o));
    let o = run(d.path(), &["--detector", "16", "-nonoise", "-nopgm"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("-lambda 6.2)"), "{}", text(&o));
}
