//! Hostile input, round 2, across every subcommand (not only `simulate`): non-finite values never
//! reach a sampler (they hung noisify and nonbragg), non-numbers are refused where the C's `atof`
//! read them as 0, runs too large for the memory are refused before they allocate, sums that
//! overflow a float are refused, `--help` works everywhere, and a junk memory limit is refused.
//! Each case runs the binary as a child under an address-space limit and a time limit: a hang or a
//! runaway allocation fails the test.

mod common;

use common::child::{limit_address_space, wait_or_kill};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nanobragg-rs");
/// Address-space limit for child runs: far below what any refused case would allocate.
const AS_LIMIT: u64 = 3 << 30;

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run `nanobragg-rs args…` in `dir`, killed after `secs` (a hang fails the test).
fn run_in(dir: &Path, args: &[&str], env: &[(&str, &str)], secs: u64) -> Ran {
    let mut c = Command::new(BIN);
    c.current_dir(dir).args(args).env_remove("RAYON_NUM_THREADS").env_remove("NANOBRAGG_MAX_MEMORY");
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    limit_address_space(&mut c, AS_LIMIT);
    let child = c.spawn().expect("start nanobragg-rs");
    let out = wait_or_kill(child, Duration::from_secs(secs)).unwrap_or_else(|e| panic!("{args:?} {e}"));
    Ran { code: out.status.code(), stdout: String::from_utf8_lossy(&out.stdout).into(), stderr: String::from_utf8_lossy(&out.stderr).into() }
}

/// The run is refused: exit 9 and one line on stderr that contains `want`, and no new file in `dir`.
/// Returns that line.
fn refused(dir: &Path, args: &[&str], env: &[(&str, &str)], want: &str) -> String {
    let before = files(dir);
    let r = run_in(dir, args, env, 60);
    assert_eq!(r.code, Some(9), "{args:?}: exit {:?}, stderr {}", r.code, r.stderr);
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{args:?}: not one line: {}", r.stderr);
    assert!(r.stderr.contains(want), "{args:?}: {:?} does not say {want:?}", r.stderr);
    assert_eq!(files(dir), before, "{args:?}: wrote files");
    r.stderr
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

fn write_floats(path: &Path, v: &[f32]) {
    std::fs::write(path, v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
}

/// A 32×32 float image of 5 photons per pixel, with `bad` at pixel 40 (fast 8, slow 1).
fn image_with(dir: &Path, name: &str, bad: f32) {
    let mut v = vec![5.0f32; 32 * 32];
    v[40] = bad;
    write_floats(&dir.join(name), &v);
}

#[test]
fn non_finite_pixels_are_refused_by_every_reader_of_float_images() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    image_with(d, "nan.bin", f32::NAN);
    image_with(d, "inf.bin", f32::INFINITY);
    image_with(d, "ok.bin", 5.0);
    for bad in ["nan.bin", "inf.bin"] {
        // noisify's Poisson loop never ended on a NaN mean
        refused(d, &["noisify", "-floatfile", bad, "-detpixels", "32"], &[], "pixel 40 (fast 8, slow 1)");
        refused(d, &["float-add", bad, "ok.bin", "-o", "sum.bin"], &[], "pixel 40");
        refused(
            d,
            &["simulate", "-cell", "50", "50", "50", "90", "90", "90", "-default_F", "10", "-N", "3", "-detpixels", "32", "-add_float", bad],
            &[],
            "-add_float: pixel 40",
        );
    }
}

#[test]
fn non_numbers_and_non_finite_flag_values_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    image_with(d, "ok.bin", 5.0);
    std::fs::write(d.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    for v in ["nan", "inf", "-inf"] {
        refused(d, &["noisify", "-floatfile", "ok.bin", "-detpixels", "32", "-scale", v], &[], "-scale: ");
    }
    refused(d, &["noisify", "-floatfile", "ok.bin", "-detpixels", "thirty"], &[], "-detpixels: thirty: not an integer");
    // a mistyped scale is not taken for an input image
    refused(d, &["float-add", "ok.bin", "ok.bin", "-scale", "2", "1,5", "-o", "s.bin"], &[], "-scale: 1,5 is not a finite number");
    // a -sourcefile source without a wavelength or a direction (nonbragg, as simulate)
    std::fs::write(d.join("src0.txt"), "0 0 -10 1 0\n").unwrap();
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "32", "-sourcefile", "src0.txt"], &[], "src0.txt line 1: -sourcefile: wavelength 0");
    std::fs::write(d.join("src1.txt"), "0 0 -10 1 1e-10\n0 0 0 1 1e-10\n").unwrap();
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "32", "-sourcefile", "src1.txt"], &[], "src1.txt line 2: -sourcefile: a source at the sample position");
    // a 32x32 image read as 16x16 (its first rows) or as 64x64: the file is not that image
    refused(d, &["noisify", "-floatfile", "ok.bin", "-detpixels", "16"], &[], "holds 4096 bytes (1024 floats), the 16x16 image");
    refused(d, &["noisify", "-floatfile", "ok.bin", "-detpixels", "64"], &[], "the 64x64 image");
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "32", "-distance", "abc"], &[], "-distance: abc: not a number");
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "32", "-lambda", "nan"], &[], "-lambda: nan: not a finite number");
    // a zero wavelength made every pixel NaN and the noise loop endless
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "32", "-lambda", "0"], &[], "-lambda: 0 A: the wavelength must be greater than 0");
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "32", "-pixel", "0"], &[], "-pixel: ");
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "32", "-distance", "0"], &[], "-distance: the detector cannot be at the sample");
}

#[test]
fn runs_too_large_for_the_memory_are_refused_before_they_allocate() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    let small = [("NANOBRAGG_MAX_MEMORY", "1G")];
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "30000"], &small, "-detpixels: 30000x30000 pixels need about");
    // nearbragg names the flags too (it said "nearbragg: 30000x30000 pixels need ...")
    std::fs::write(d.join("a.txt"), "0 0 0\n").unwrap();
    refused(d, &["nearbragg", "-file", "a.txt", "-detpixels", "30000"], &small, "-detpixels: 30000x30000 pixels need about");
    refused(d, &["nearbragg", "-file", "a.txt", "-detsize", "3000", "-pixel", "0.1"], &small, "-detsize/-pixel: 30000x30000 pixels need about");
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "16", "-dispersion", "10", "-dispsteps", "1000000000"], &small, "-dispsteps: 1000000000 sources");
    // a count beyond an int is no count
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "16", "-dispsteps", "1e9"], &small, "-dispsteps: 1e9: not an integer");
}

#[test]
fn a_sum_beyond_the_largest_float_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    image_with(d, "ok.bin", 5.0);
    refused(d, &["float-add", "ok.bin", "ok.bin", "-scale", "1e300", "-o", "sum.bin"], &[], "-scale: the sum's pixel 0 is inf");
}

#[test]
fn a_junk_memory_limit_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for cmd in [&["matrix", "-cell", "50", "50", "50", "90", "90", "90", "-o", "a.mat"][..], &["simulate", "--detector", "16"][..]] {
        refused(tmp.path(), cmd, &[("NANOBRAGG_MAX_MEMORY", "lots")], "NANOBRAGG_MAX_MEMORY: lots: not a size");
    }
}

#[test]
fn every_subcommand_has_help() {
    let tmp = tempfile::tempdir().unwrap();
    for cmd in ["simulate", "series", "noisify", "nonbragg", "nearbragg", "float-add", "matrix"] {
        for flag in ["--help", "-h"] {
            let r = run_in(tmp.path(), &[cmd, flag], &[], 30);
            assert_eq!(r.code, Some(0), "{cmd} {flag}: exit {:?}: {}", r.code, r.stderr);
            assert!(r.stdout.to_lowercase().contains("usage") || r.stdout.contains(cmd), "{cmd} {flag}: {}", r.stdout);
        }
    }
    assert!(files(tmp.path()).is_empty(), "--help wrote files");
}

/// A PDB atom name with a non-ASCII character (columns 13-16) is no panic: the element rule takes
/// characters, and an atom whose element cannot be told is refused.
#[test]
fn a_non_ascii_atom_name_is_refused_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let mut pdb = b"CRYST1   50.000   50.000   50.000  90.00  90.00  90.00 P 1           1\n".to_vec();
    pdb.extend_from_slice(b"ATOM      1  ");
    pdb.extend_from_slice("\u{e9}".as_bytes());
    pdb.extend_from_slice(b"  ALA A   1      10.000  10.000  10.000  1.00 20.00              \nEND\n");
    std::fs::write(d.join("m.pdb"), pdb).unwrap();
    refused(d, &["simulate", "-pdb", "m.pdb", "-N", "3", "-detpixels", "16", "-floatfile", "f.bin"], &[], "m.pdb line 2: cannot tell the element");
}

/// An error in a model's cell names the model's file, not `-cell` (which was not given).
#[test]
fn a_bad_model_cell_names_the_model() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    for (cell, want) in [("-5.000   50.000   50.000  90.00  90.00  90.00", "cell edge a must be positive"), ("50.000   50.000   50.000 170.00 170.00 170.00", "impossible unit cell angles"), ("0.000   50.000   50.000  90.00  90.00  90.00", "has an edge a of 0")] {
        let pdb = format!("CRYST1   {cell} P 1           1\nATOM      1  N   ALA A   1      10.000  10.000  10.000  1.00 20.00           N\nEND\n");
        std::fs::write(d.join("m.pdb"), pdb).unwrap();
        refused(d, &["simulate", "-pdb", "m.pdb", "-N", "3", "-detpixels", "16", "-floatfile", "f.bin"], &[], &format!("m.pdb: the model's unit cell (CRYST1 or _cell)"));
        refused(d, &["simulate", "-pdb", "m.pdb", "-N", "3", "-detpixels", "16", "-floatfile", "f.bin"], &[], want);
    }
    // -dump with a model: it says it writes the cache and does, and the cache gives the same image
    let pdb = "CRYST1   50.000   50.000   50.000  90.00  90.00  90.00 P 1           1\nATOM      1  N   ALA A   1      10.000  10.000  10.000  1.00 20.00           N\nEND\n";
    std::fs::write(d.join("m.pdb"), pdb).unwrap();
    // a detector reaching 2.6 Å, so that the model gives reflections besides F000 (left out)
    let r = run_in(d, &["simulate", "-pdb", "m.pdb", "-N", "3", "-detpixels", "16", "-pixel", "1", "-distance", "20", "-floatfile", "f.bin", "-dump", "x.bin"], &[], 60);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("writing dump file for next time: x.bin") && d.join("x.bin").is_file(), "{}", r.stdout);
    let r = run_in(d, &["simulate", "-cell", "50", "50", "50", "90", "90", "90", "-N", "3", "-detpixels", "16", "-pixel", "1", "-distance", "20", "-floatfile", "g.bin", "-dump", "x.bin"], &[], 60);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(std::fs::read(d.join("f.bin")).unwrap(), std::fs::read(d.join("g.bin")).unwrap(), "the cache gives another image");
}

/// noisify and nonbragg write all their files or none: a file that cannot be created (its folder
/// is missing) leaves none of the others, and no temporary file.
#[test]
fn suite_outputs_are_all_or_none() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    image_with(d, "ok.bin", 5.0);
    std::fs::write(d.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "16", "-noisefile", "missing/noise.img"], &[], "missing/noise.img");
    refused(d, &["noisify", "-floatfile", "ok.bin", "-detpixels", "32", "-noisefile", "missing/noise.img"], &[], "missing/noise.img");
    refused(d, &["noisify", "-floatfile", "ok.bin", "-detpixels", "32", "-nonoise", "-pgmfile", "missing/i.pgm"], &[], "missing/i.pgm");
}

/// A dangling symbolic link given as an output is written through (the file it names is created),
/// never replaced by a regular file, in every subcommand.
#[test]
fn a_dangling_symlink_output_is_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    image_with(d, "ok.bin", 5.0);
    std::fs::write(d.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    let runs: [&[&str]; 5] = [
        &["simulate", "-cell", "50", "50", "50", "90", "90", "90", "-default_F", "10", "-N", "3", "-detpixels", "16", "-floatfile", "link"],
        &["noisify", "-floatfile", "ok.bin", "-detpixels", "32", "-noisefile", "link"],
        &["nonbragg", "-stol", "w.stol", "-detpixels", "16", "-floatfile", "link"],
        &["float-add", "ok.bin", "ok.bin", "-o", "link"],
        &["matrix", "-cell", "50", "50", "50", "90", "90", "90", "-o", "link"],
    ];
    for args in runs {
        let _ = std::fs::remove_file(d.join("link"));
        let _ = std::fs::remove_file(d.join("target"));
        std::os::unix::fs::symlink("target", d.join("link")).unwrap();
        let r = run_in(d, args, &[], 60);
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.stderr);
        assert!(std::fs::symlink_metadata(d.join("link")).unwrap().file_type().is_symlink(), "{args:?}: the link was replaced");
        assert!(d.join("target").is_file(), "{args:?}: the link's file was not written");
    }
}

/// `matrix` never prints nan, numbers that run together or a matrix that has lost its cell: an
/// impossible cell, or a cell or wavelength that gives values wider than the file's columns or too
/// small for its decimals, is refused.
#[test]
fn matrix_refuses_what_it_cannot_print() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let cell = |c: &str| -> Vec<String> { c.split(' ').map(String::from).collect() };
    for (args, want) in [
        ("-cell 50 50 50 170 170 170", "impossible unit cell angles 170 170 170"),
        ("-cell 50 50 50 10 10 90", "impossible unit cell angles"),
        ("-cell 1e300 50 50 90 90 90", "cell edges must be positive and below"),
        ("-cell 1e-300 50 50 90 90 90", "more than the file's columns can hold"),
        ("-cell 50 50 50 90 90 90 -lambda 1e300", "more than the file's columns can hold"),
        // -15 and -12 fill their 12-character fields: `0.00000000-15.00000000` (written, exit 0, then
        // refused by simulate -mat)
        ("-cell 10 10 10 90 90 90 -lambda 150 -misset 0 0 90", "would hold -15 (with -lambda 150), printed '-15.00000000'"),
        ("-cell 1 1 1 90 90 90 -lambda 12 -misset 0 0 90", "more than the file's columns can hold"),
        // entries below the 8 decimals: 70 80 90 read back as 50 100 100, or nine zeros (singular)
        ("-cell 70 80 90 90 90 90 -lambda 1e-6", "is too small for the file's 8 decimals (%12.8f): the cell read back would be off by"),
        ("-cell 100 100 100 90 90 90 -lambda 1e-7", "it would read back as a singular matrix"),
    ] {
        let mut a = vec!["matrix".to_string()];
        a.extend(cell(args));
        a.extend(["-o".to_string(), "A.mat".to_string()]);
        let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        refused(d, &a, &[], want);
    }
    let r = run_in(d, &["matrix", "-cell", "2000", "3000", "1000", "90", "90", "120", "-lambda", "1.5"], &[], 30);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stdout.contains("nan") && r.stdout.lines().all(|l| l.split_whitespace().all(|w| w.len() < 12)), "{}", r.stdout);
}

/// File names that are not UTF-8 work in every subcommand (the bytes reach the file system), as
/// they do in simulate.
#[test]
fn non_utf8_file_names_work_in_every_subcommand() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let name = |s: &[u8]| std::ffi::OsStr::from_bytes(s).to_os_string();
    write_floats(&d.join(name(b"in\xff.bin")), &[5.0; 32 * 32]);
    std::fs::write(d.join(name(b"w\xfe.stol")), "0.0 1.0\n0.5 2.0\n").unwrap();
    std::fs::write(d.join(name(b"a\xfe.txt")), "1 2 3\n4 5 6\n").unwrap();
    let runs: Vec<(Vec<std::ffi::OsString>, &[u8])> = vec![
        (vec!["noisify".into(), "-floatfile".into(), name(b"in\xff.bin"), "-detpixels".into(), "32".into(), "-noisefile".into(), name(b"n\xff.img")], b"n\xff.img"),
        (vec!["nonbragg".into(), "-stol".into(), name(b"w\xfe.stol"), "-detpixels".into(), "16".into(), "-floatfile".into(), name(b"f\xff.bin")], b"f\xff.bin"),
        (vec!["float-add".into(), name(b"in\xff.bin"), name(b"in\xff.bin"), "-o".into(), name(b"s\xff.bin")], b"s\xff.bin"),
        (vec!["matrix".into(), "-cell".into(), "50".into(), "50".into(), "50".into(), "90".into(), "90".into(), "90".into(), "-o".into(), name(b"m\xff.mat")], b"m\xff.mat"),
        (vec!["nearbragg".into(), "-file".into(), name(b"a\xfe.txt"), "-detpixels".into(), "16".into(), "-floatfile".into(), name(b"g\xff.bin")], b"g\xff.bin"),
    ];
    for (args, out) in runs {
        let r = Command::new(BIN).current_dir(d).args(&args).env_remove("RAYON_NUM_THREADS").stdin(Stdio::null()).output().unwrap();
        assert_eq!(r.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
        assert!(d.join(name(out)).is_file(), "{args:?}: no {:?}", name(out));
    }
}

/// No output of any subcommand replaces one of its inputs (-pdb/-cif, -add_float, --params, -stol,
/// the suite's inputs), whatever writes it (images, -hklout, --save-params); side outputs are
/// written only when the whole run succeeds.
#[test]
fn outputs_never_replace_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let pdb = "CRYST1   50.000   50.000   50.000  90.00  90.00  90.00 P 1           1\nATOM      1  N   ALA A   1      10.000  10.000  10.000  1.00 20.00           N\nEND\n";
    std::fs::write(d.join("m.pdb"), pdb).unwrap();
    write_floats(&d.join("add.bin"), &[1.0; 16 * 16]);
    image_with(d, "ok.bin", 5.0);
    std::fs::write(d.join("p.json"), "{}").unwrap();
    std::fs::write(d.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    std::fs::write(d.join("at.txt"), "1 2 3\n4 5 6\n").unwrap();
    let r = run_in(d, &["matrix", "-cell", "50", "50", "50", "90", "90", "90", "-o", "A.mat"], &[], 30);
    assert_eq!(r.code, Some(0));
    let sim = |extra: &[&str]| -> Vec<String> {
        // a detector reaching 2.6 Å, so that the model gives reflections besides F000 (left out)
        let mut v: Vec<String> = "simulate -cell 50 50 50 90 90 90 -default_F 10 -N 3 -detpixels 16 -pixel 1 -distance 20".split(' ').map(String::from).collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (sim(&["-pdb", "m.pdb", "-floatfile", "m.pdb"]), "the float output would overwrite the -pdb input"),
        (sim(&["-pdb", "m.pdb", "-hklout", "m.pdb"]), "the -hklout output would overwrite the -pdb input"),
        (sim(&["-add_float", "add.bin", "-floatfile", "add.bin"]), "would overwrite the -add_float input"),
        (sim(&["-pdb", "m.pdb", "--save-params", "m.pdb"]), "the --save-params output would overwrite the -pdb input"),
        (sim(&["--params", "p.json", "-intfile", "p.json"]), "would overwrite the --params input"),
        (sim(&["-pdb", "m.pdb", "-hklout", "h.hkl", "-floatfile", "h.hkl"]), "name the same file"),
        // refused after the setup: neither side output may appear
        (sim(&["-pdb", "m.pdb", "-hklout", "h.hkl", "--save-params", "s.json", "-intfile", "missing/x.img"]), "missing/x.img"),
        (["noisify", "-floatfile", "ok.bin", "-detpixels", "32", "-noisefile", "ok.bin"].map(String::from).to_vec(), "would overwrite the -floatfile input"),
        (["nonbragg", "-stol", "w.stol", "-detpixels", "16", "-floatfile", "w.stol"].map(String::from).to_vec(), "would overwrite the -stol input"),
        (["float-add", "ok.bin", "ok.bin", "-o", "ok.bin"].map(String::from).to_vec(), "would overwrite the float-add input"),
        (["matrix", "-mat", "A.mat", "-o", "A.mat"].map(String::from).to_vec(), "would overwrite the -mat input"),
        (["nearbragg", "-file", "at.txt", "-detpixels", "16", "-floatfile", "at.txt"].map(String::from).to_vec(), "would overwrite the -file input"),
    ];
    for (args, want) in cases {
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let before: Vec<Vec<u8>> = files(d).iter().map(|f| std::fs::read(d.join(f)).unwrap()).collect();
        refused(d, &a, &[], want);
        let after: Vec<Vec<u8>> = files(d).iter().map(|f| std::fs::read(d.join(f)).unwrap()).collect();
        assert_eq!(before, after, "{a:?} changed a file");
    }
}

/// An absurd thread count runs at once (threads beyond four per core are not started) and gives the
/// same image.
#[test]
fn absurd_thread_counts_are_capped_quickly() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let t = Instant::now();
    let a = run_in(d, &["simulate", "--detector", "16", "-floatfile", "a.bin", "--threads", "20000"], &[], 30);
    let b = run_in(d, &["simulate", "--detector", "16", "-floatfile", "b.bin", "--threads", "1"], &[], 30);
    assert_eq!((a.code, b.code), (Some(0), Some(0)), "{} {}", a.stderr, b.stderr);
    assert!(t.elapsed() < Duration::from_secs(20), "took {:?}", t.elapsed());
    assert_eq!(std::fs::read(d.join("a.bin")).unwrap(), std::fs::read(d.join("b.bin")).unwrap());
}

/// Called as one of the C programs (a link named nanoBragg, noisify, nonBragg, nearBragg), the binary
/// runs that program with the C's flags: scripts written for the C suite run unchanged.
#[test]
fn drop_in_names_run_the_c_programs() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    image_with(d, "ok.bin", 5.0);
    std::fs::write(d.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    std::fs::write(d.join("at.txt"), "1 2 3\n4 5 6\n").unwrap();
    for name in ["nanoBragg", "noisify", "nonBragg", "nearBragg"] {
        std::os::unix::fs::symlink(BIN, d.join(name)).unwrap();
    }
    let runs: [(&str, &[&str], &str); 4] = [
        ("nanoBragg", &["-cell", "50", "50", "50", "90", "90", "90", "-default_F", "10", "-N", "3", "-detpixels", "16", "-floatfile", "a.bin"], "a.bin"),
        ("noisify", &["-floatfile", "ok.bin", "-detpixels", "32", "-noisefile", "n.img"], "n.img"),
        ("nonBragg", &["-stol", "w.stol", "-detpixels", "16", "-floatfile", "b.bin"], "b.bin"),
        ("nearBragg", &["-file", "at.txt", "-detpixels", "16", "-floatfile", "c.bin"], "c.bin"),
    ];
    for (name, args, out) in runs {
        let r = Command::new(d.join(name)).current_dir(d).args(args).stdin(Stdio::null()).output().unwrap();
        assert_eq!(r.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&r.stderr));
        assert!(d.join(out).is_file(), "{name} wrote no {out}");
    }
    // with nothing to do, the hint names the command as typed (`nanoBragg simulate ...` fails)
    let r = Command::new(d.join("nanoBragg")).current_dir(d).stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.code() == Some(9) && err.contains("try `nanoBragg --detector 512`"), "{err}");
}

/// `matrix` reads its values as `simulate` does: `70x`, `1,5`, `30deg`, `0x10` and a fractional
/// seed were read by their prefix (exit 0), a flag short of values took the next flag as one, and
/// `-umat` took any nine numbers (all zeros wrote a singular matrix).
#[test]
fn matrix_values_are_strict() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let cell = ["matrix", "-cell", "70", "80", "90", "85", "95", "105"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { cell.iter().copied().chain(extra.iter().copied()).collect() };
    refused(d, &["matrix", "-cell", "70x", "80", "90", "85", "95", "105", "-o", "t.mat"], &[], "-cell: '70x' is not a number");
    for (extra, want) in [
        (&["-lambda", "1,5", "-o", "t.mat"][..], "-lambda: '1,5' is not a number"),
        (&["-misset", "10", "20", "30deg"], "-misset: '30deg' is not a number"),
        (&["-misset", "0x10", "0", "0"], "-misset: '0x10' is not a number"),
        (&["-misset", "random", "-seed", "5x"], "-seed: '5x' is not an integer"),
        (&["-misset", "random", "-seed", "1.9"], "-seed: expects an integer (got '1.9')"),
        (&["-misset", "1", "2", "-o", "b.mat"], "-misset: needs 3 value(s), got 2 before the next flag -o"),
        (&["-umat", "0", "0", "0", "0", "0", "0", "0", "0", "0", "-o", "z.mat"], "-umat: not a rotation matrix"),
        (&["-umat", "1", "0", "0", "0", "1", "0", "0", "0", "-1", "-o", "z.mat"], "-umat: not a rotation matrix"),
    ] {
        refused(d, &with(extra), &[], want);
    }
    let r = run_in(d, &with(&["-umat", "0", "-1", "0", "1", "0", "0", "0", "0", "1", "-misset", "random", "-seed", "5", "-o", "ok.mat"]), &[], 30);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

/// nonbragg's stol table, sample and run size, and simulate's source file: what gave NaN, infinite
/// or negative images with exit 0 (or ran unbounded, or blamed another flag) is refused naming the
/// file and line, or the flag as given.
#[test]
fn nonbragg_tables_samples_and_sizes_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    let nb = |extra: &[&'static str]| -> Vec<&'static str> {
        ["nonbragg", "-stol", "w.stol", "-detpixels", "16", "-noprogress"].iter().copied().chain(extra.iter().copied()).collect()
    };
    for (name, text, want) in [
        ("text.stol", "hello world\n0.1 1\n", "text.stol line 1: stol table: 'hello' is not a number"),
        ("abc.stol", "0 1\n0.1 abc\n", "abc.stol line 2: stol table: 'abc' is not a number"),
        ("inf.stol", "0 1\n0.1 inf\n", "inf.stol line 2: stol table: 'inf' is not a finite number"),
        ("huge.stol", "0 1\n0.1 1e300\n", "huge.stol line 2: stol table: F = 1e+300 is larger than 1e+100"),
        ("repeat.stol", "0 1\n0.1 2\n0.1 3\n0.2 1\n", "repeat.stol line 3: stol table: stol 0.1 does not increase"),
    ] {
        std::fs::write(d.join(name), text).unwrap();
        refused(d, &["nonbragg", "-stol", name, "-detpixels", "16", "-noprogress"], &[], want);
    }
    std::fs::write(d.join("bin.stol"), b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe\n\x01\x02").unwrap();
    refused(d, &["nonbragg", "-stol", "bin.stol", "-detpixels", "16", "-noprogress"], &[], "bin.stol line 1: stol table: ");
    refused(d, &nb(&["-MW", "0"]), &[], "-MW: 0: must be greater than 0");
    refused(d, &nb(&["-thickness", "-1"]), &[], "-thickness: -1: must be greater than 0");
    refused(d, &nb(&["-density", "-1"]), &[], "-density: -1: must be greater than 0");
    refused(d, &nb(&["-oversample", "100000"]), &[], "-oversample: 100000 sub-pixels per axis is impractical (at most 1000)");
    refused(d, &nb(&["-divsteps", "100000"]), &[("NANOBRAGG_MAX_MEMORY", "1G")], "-divsteps: 10000000000 sources");
    refused(d, &["nonbragg", "-stol", "w.stol", "-detpixels", "1000000"], &[], "-detpixels: 1000000x1000000 pixels is not a detector");
    // a fluence beyond what a float pixel holds: refused, not an infinite image (beyond 1e100 by name,
    // as simulate)
    refused(d, &nb(&["-fluence", "1e60"]), &[], "more than a 4-byte float holds; lower the stol table's F, -fluence/-flux");
    // a pixel far larger than its distance: the geometry is named (it was blamed on F, fluence, sample)
    let e = refused(d, &nb(&["-pixel", "1e100"]), &[], "of the image is inf: more than a 4-byte float holds: the pixel's solid angle is ");
    assert!(e.contains("nanobragg-rs: error: -pixel: ") && e.contains("(a sphere is 4π): a 1e+100 mm pixel with the detector plane 100 mm from the sample cannot be; lower -pixel or raise -distance"), "{e}");
    refused(d, &nb(&["-pixel", "1e200"]), &[], "is NaN: more than a 4-byte float holds: the pixel's solid angle is NaN sr");
    // a sample all but on the detector: the distance is named, not -pixel
    let e = refused(d, &nb(&["-distance", "1e-100"]), &[], "sr (a sphere is 4π): a 0.1 mm pixel with the detector plane 1e-100 mm from the sample cannot be; lower -pixel or raise -distance");
    assert!(e.contains("nanobragg-rs: error: -distance: "), "{e}");
    refused(d, &nb(&["-close_distance", "1e-100"]), &[], "error: -close_distance: ");
    refused(d, &nb(&["-fluence", "1e300"]), &[], "-fluence: 1e+300 photons/m^2 must be between 0 and 1e100");
    std::fs::write(d.join("abc.src"), "-10 0 0 1 1e-10\n-10 abc 0 1 1e-10\n").unwrap();
    for cmd in [&nb(&["-sourcefile", "abc.src"])[..], &["simulate", "-cell", "70", "80", "90", "85", "95", "105", "-N", "5", "-detpixels", "64", "-default_F", "10", "-sourcefile", "abc.src"]] {
        refused(d, cmd, &[], "abc.src line 2: -sourcefile: 'abc' is not a number");
    }
}

/// noisify with a photon scale beyond a float: every pixel is saturated at 65535 (an infinite mean
/// gave NaN for half of them, written as 0).
#[test]
fn noisify_saturates_an_infinite_mean() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    image_with(d, "ok.bin", 5.0);
    for scale in ["1e40", "1e300"] {
        let r = run_in(d, &["noisify", "-floatfile", "ok.bin", "-detpixels", "32", "-scale", scale, "-nopgm", "-noisefile", "n.img", "-intfile", "i.img"], &[], 60);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let img = std::fs::read(d.join("n.img")).unwrap();
        let px: Vec<u16> = img[512..].chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
        assert_eq!(px.len(), 32 * 32);
        assert!(px.iter().all(|&v| v == 65535), "-scale {scale}: {} pixels not saturated", px.iter().filter(|&&v| v != 65535).count());
    }
}

/// float-add of empty files wrote a 0-pixel image with exit 0.
#[test]
fn float_add_refuses_an_empty_image() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("empty.bin"), b"").unwrap();
    image_with(d, "ok.bin", 5.0);
    refused(d, &["float-add", "empty.bin", "empty.bin", "-o", "s.bin"], &[], "empty.bin: float-add: the image is empty (0 pixels)");
    refused(d, &["float-add", "ok.bin", "empty.bin", "-o", "s.bin"], &[], "empty.bin: float-add: the image is empty");
}

/// nearbragg: atoms whose scattering overflows a float still give their image, but never silently:
/// a warning counts the pixels that are not finite.
#[test]
fn nearbragg_flags_pixels_that_overflow() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("at.txt"), "0 0 0 1e300\n").unwrap();
    let r = run_in(d, &["nearbragg", "-file", "at.txt", "-detpixels", "16", "-floatfile", "f.bin", "-intfile", "i.img"], &[], 60);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("pixels are not finite"), "{}", r.stderr);
}

/// An SMV header's numbers (noisify's `-header`, simulate's `-img`/`-mask` sizes) must be numbers:
/// `SIZE1=32x` was read as 32 and `PIXEL_SIZE=abc` as 0 (a division by zero later), as the C's atof.
#[test]
fn smv_header_numbers_are_strict() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    image_with(d, "ok.bin", 5.0);
    let header = |name: &str, fields: &str| {
        let mut b = format!("{{\nHEADER_BYTES=512;\nDIM=2;\nTYPE=unsigned_short;\n{fields}}}\n").into_bytes();
        b.resize(512, b' ');
        b.extend(std::iter::repeat(0u8).take(2 * 32 * 32));
        std::fs::write(d.join(name), b).unwrap();
    };
    header("good.img", "SIZE1=32;\nSIZE2=32;\nPIXEL_SIZE=0.1;\nDISTANCE=100;\nBEAM_CENTER_X=1.6;\nBEAM_CENTER_Y=1.6;\n");
    fn noisify(h: &str) -> [&str; 10] {
        ["noisify", "-floatfile", "ok.bin", "-header", h, "-nopgm", "-noisefile", "n.img", "-intfile", "i.img"]
    }
    let r = run_in(d, &noisify("good.img"), &[], 60);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for f in ["n.img", "i.img"] {
        std::fs::remove_file(d.join(f)).unwrap();
    }
    for (name, fields, want) in [
        ("size.img", "SIZE1=32x;\nSIZE2=32;\n", "size.img: -header: header SIZE1=32x is not a number"),
        ("pixel.img", "SIZE1=32;\nSIZE2=32;\nPIXEL_SIZE=abc;\n", "header PIXEL_SIZE=abc is not a number"),
        ("zero.img", "SIZE1=32;\nSIZE2=32;\nPIXEL_SIZE=0;\n", "-header: PIXEL_SIZE=0 must be positive and finite"),
        ("dist.img", "SIZE1=32;\nSIZE2=32;\nDISTANCE=inf;\n", "DISTANCE=inf must be finite"),
        ("beam.img", "SIZE1=32;\nSIZE2=32;\nBEAM_CENTER_X=inf;\n", "BEAM_CENTER_X=inf must be finite"),
    ] {
        header(name, fields);
        refused(d, &noisify(name), &[], want);
    }
    // the C's own header of a detector swung past 90°: ValueOf("DISTANCE") finds CLOSE_DISTANCE=-50
    header("swung.img", "SIZE1=32;\nSIZE2=32;\nDISTANCE=-50;\nCLOSE_DISTANCE=-50;\n");
    let r = run_in(d, &noisify("swung.img"), &[], 60);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    header("mask.img", "SIZE1=32;\nSIZE2=3 2x;\n");
    refused(d, &["simulate", "-mask", "mask.img", "-cell", "50", "50", "50", "90", "90", "90", "-floatfile", "f.bin"], &[], "mask.img: header SIZE2=3 2x is not a number");
}

/// noisify `-header`: the header copied over the images says what is written under it, as noisify's
/// own header does for the same `-bits` (TYPE=unsigned_short over `-bits 32` data, or long_integer
/// over 2-byte pixels, was copied verbatim, as noisify.c does).
#[test]
fn noisify_header_type_says_what_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    image_with(d, "ok.bin", 5.0);
    let type_line = |f: &str| {
        let b = std::fs::read(d.join(f)).unwrap();
        let h = String::from_utf8_lossy(&b[..512]).into_owned();
        (b.len(), h.lines().filter(|l| l.starts_with("TYPE=") || l.starts_with("BYTE_ORDER=")).map(String::from).collect::<Vec<_>>())
    };
    for (ty, bits, bytes) in [("unsigned_short", "32", 4), ("long_integer", "16", 2)] {
        let mut h = format!("{{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=big_endian;\nTYPE={ty};\nSIZE1=32;\nSIZE2=32;\nPIXEL_SIZE=0.1;\n}}\x0c").into_bytes();
        h.resize(512, b' ');
        std::fs::write(d.join("h.img"), h).unwrap();
        let r = run_in(d, &["noisify", "-floatfile", "ok.bin", "-header", "h.img", "-bits", bits, "-seed", "1", "-nopgm", "-noisefile", "n.img", "-intfile", "i.img"], &[], 60);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        // noisify's own header at the same -bits
        let r = run_in(d, &["noisify", "-floatfile", "ok.bin", "-detpixels", "32", "-bits", bits, "-seed", "1", "-nopgm", "-noisefile", "own.img", "-intfile", "own_i.img"], &[], 60);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let own = type_line("own.img");
        assert_eq!(own.0, 512 + bytes * 32 * 32);
        for f in ["n.img", "i.img"] {
            assert_eq!(type_line(f), own, "{f} with TYPE={ty} and -bits {bits}");
        }
    }
}

/// nonbragg's sources as simulate's: a dispersion of 200 % reaches a wavelength of 0 (the C divides
/// by it), and a source file's wavelength of 1 m is no X-ray (the column is in metres).
#[test]
fn nonbragg_wavelengths_stay_x_rays() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    std::fs::write(d.join("far.txt"), "-10 0 0 1 1\n").unwrap();
    let nb = ["nonbragg", "-stol", "w.stol", "-detpixels", "16", "-noprogress", "-floatfile", "f.bin"];
    refused(d, &[&nb[..], &["-dispersion", "200", "-dispsteps", "3"]].concat(), &[], "-dispersion: 200% around 1e-10 m reaches a wavelength of 0 m");
    refused(d, &[&nb[..], &["-lambda", "1e8"]].concat(), &[], "-lambda: 1e-2 m is not an X-ray wavelength");
    refused(d, &[&nb[..], &["-sourcefile", "far.txt"]].concat(), &[], "far.txt line 1: -sourcefile: wavelength 1 m, outside 1e-16 to 1e-3 m");
}

/// nearbragg's wavelengths as simulate's and nonbragg's: a dispersion of 200 % reached a wavelength of
/// 0 (an all-NaN image, exit 0), 1e6 % a negative one (an image of λ = −5e-7 m, silently).
#[test]
fn nearbragg_wavelengths_stay_x_rays() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("at.txt"), "0 0 0 1\n1 2 3 1\n5 5 5 1\n0 3 1 1\n2 2 2 1\n").unwrap();
    let near = ["nearbragg", "-file", "at.txt", "-detpixels", "32", "-pixel", "0.5", "-distance", "50", "-noprogress", "-floatfile", "o.bin"];
    let sim = ["simulate", "-cell", "50", "50", "50", "90", "90", "90", "-default_F", "10", "-N", "3", "-detpixels", "16", "-floatfile", "o.bin"];
    for (extra, want) in [
        (&["-dispersion", "200", "-dispsteps", "3"][..], "-dispersion: 200% around 1e-10 m reaches a wavelength of 0 m, outside 1e-16 to 1e-3 m"),
        (&["-dispersion", "1e6"], "-dispersion: 1e+06% around 1e-10 m reaches a wavelength of -4.999e-07 m"),
    ] {
        let ours = refused(d, &[&near[..], extra].concat(), &[("OMP_NUM_THREADS", "1")], want);
        // the same line as simulate's, at simulate's default wavelength
        let theirs = refused(d, &[&sim[..], &["-lambda", "1"], extra].concat(), &[], want);
        assert_eq!(ours, theirs);
    }
    // a wavelength outside simulate's range is -lambda's, not -dispersion's
    refused(d, &[&near[..], &["-lambda", "1e8"]].concat(), &[], "-lambda: 1e-2 m is not an X-ray wavelength");
}

/// Values simulate refuses by name that nonbragg and nearbragg took (exit 0): an inverted -roi (an
/// all-zero image), a beam or detector axis without a direction and parallel detector axes (NaN or a
/// line of pixels), a negative -flux or -fluence (negative pixels), a Kahn factor of 5, and nonbragg's
/// -beamsize 0 (an infinite fluence from -flux, blamed on the sample). Each is refused with
/// simulate's line, word for word.
#[test]
fn companion_programs_refuse_what_simulate_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("w.stol"), "0.0 1.0\n0.5 2.0\n").unwrap();
    std::fs::write(d.join("at.txt"), "0 0 0 1\n1 2 3 1\n").unwrap();
    let sim = ["simulate", "-cell", "50", "50", "50", "90", "90", "90", "-default_F", "10", "-N", "3", "-detpixels", "64", "-floatfile", "o.bin"];
    let non = ["nonbragg", "-stol", "w.stol", "-thick", "0.1", "-detpixels", "64", "-noprogress", "-floatfile", "o.bin"];
    let near = ["nearbragg", "-file", "at.txt", "-detpixels", "32", "-noprogress", "-floatfile", "o.bin"];
    let cases: [(&[&str], &str, bool); 9] = [
        (&["-roi", "50", "10", "0", "63"], "-roi: inverted region: needs xmin <= xmax and ymin <= ymax (got 50 10 0 63)", false),
        (&["-roi", "20", "5", "0", "31"], "-roi: inverted region: needs xmin <= xmax and ymin <= ymax (got 20 5 0 31)", true),
        (&["-beam_vector", "0", "0", "0"], "-beam_vector: 0 0 0 has no direction (a zero or non-finite vector)", false),
        (&["-fdet_vector", "0", "0", "0"], "-fdet_vector: 0 0 0 has no direction", true),
        (&["-fdet_vector", "0", "0", "1", "-sdet_vector", "0", "0", "1"], "-sdet_vector: 0 0 1 is parallel to -fdet_vector 0 0 1: the detector needs two directions", true),
        (&["-flux", "-1"], "-flux: -1 photons/s must be between 0 and 1e100", false),
        (&["-fluence", "-1"], "-fluence: must not be negative (got -1)", true),
        (&["-polar", "5"], "-polar: Kahn factor 5 must be between -1 and 1", false),
        (&["-flux", "1e12", "-beamsize", "0"], "-beamsize: must be greater than 0 (got 0)", false),
    ];
    for (extra, want, nearbragg_too) in cases {
        let theirs = refused(d, &[&sim[..], extra].concat(), &[], want);
        assert_eq!(refused(d, &[&non[..], extra].concat(), &[], want), theirs, "nonbragg {extra:?}");
        if nearbragg_too {
            refused(d, &[&near[..], extra].concat(), &[("OMP_NUM_THREADS", "1")], want);
        }
    }
    // bounds not given are the detector's edges (-1, as the C): not an inverted region
    let r = run_in(d, &[&non[..], &["-roi", "50", "-1", "0", "63", "-nonoise", "-nopgm", "-intfile", "i.img"]].concat(), &[], 60);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

/// noisify's -pixel, -lambda and -distance only go into the SMV header it writes, and noisify.c wrote
/// any of them (PIXEL_SIZE=0 or -0.1, WAVELENGTH=0, DISTANCE=0), a header its own -header refuses; a
/// negative distance (a detector swung past 90°, as -header's DISTANCE may be) is kept.
#[test]
fn noisify_header_values_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    image_with(d, "ok.bin", 5.0);
    let base = ["noisify", "-floatfile", "ok.bin", "-intfile", "o.img", "-noisefile", "n.img"];
    for (extra, want) in [
        (&["-pixel", "0", "-detsize", "3.2"][..], "-pixel: must be greater than 0 (got 0)"),
        (&["-pixel", "-0.1", "-detsize", "3.2"], "-pixel: must be greater than 0 (got -0.1)"),
        (&["-lambda", "0"], "-lambda: must be greater than 0 (got 0)"),
        (&["-distance", "0"], "-distance: the detector cannot be at the sample"),
    ] {
        refused(d, &[&base[..], extra].concat(), &[], want);
    }
    let r = run_in(d, &[&base[..], &["-distance", "-50", "-nopgm"]].concat(), &[], 60);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let header = std::fs::read(d.join("o.img")).unwrap();
    assert!(String::from_utf8_lossy(&header[..512]).contains("\nDISTANCE=-50;\n"));
}
