//! Output files and refusals, end to end through the `nanobragg-rs` binary: atomic writes (a killed
//! run leaves no partial image), refused inputs leave nothing behind, inputs are never overwritten,
//! and bad command lines get one-line errors naming the flag or file.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nanobragg-rs"))
}

fn run_in(dir: &Path, args: &[&str]) -> Output {
    bin().arg("simulate").args(args).current_dir(dir).output().unwrap()
}

const CRYSTAL: &[&str] = &["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-N", "5", "-lambda", "1", "-detpixels", "64"];

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn default_run_writes_the_c_file_set() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(tmp.path(), &[CRYSTAL, &["-seed", "1"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(files_in(tmp.path()), ["floatimage.bin", "image.pgm", "intimage.img", "noiseimage.img"]);
    assert_eq!(std::fs::metadata(tmp.path().join("floatimage.bin")).unwrap().len(), 64 * 64 * 4);
    assert_eq!(std::fs::metadata(tmp.path().join("intimage.img")).unwrap().len(), 512 + 64 * 64 * 2);
}

#[test]
fn killed_run_leaves_no_output_under_its_final_name() {
    let tmp = tempfile::tempdir().unwrap();
    // a render that takes a few seconds
    let mut child = bin()
        .arg("simulate")
        .args(["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-N", "20", "-lambda", "1"])
        .args(["-detpixels", "1024", "-oversample", "6", "-mosaic", "1", "-mosaic_dom", "20", "--threads", "1"])
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let finished = child.try_wait().unwrap().is_some();
    child.kill().ok();
    child.wait().unwrap();
    assert!(!finished, "the render finished before it could be interrupted; make it longer");
    for name in ["floatimage.bin", "intimage.img", "noiseimage.img", "image.pgm"] {
        assert!(!tmp.path().join(name).exists(), "{name} exists after the run was killed");
    }
}

#[test]
fn refused_runs_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-lambda", "1"],               // no structure factors
        vec!["-default_F", "100", "-lambda", "1"],                                          // no cell... uses demo? no: has F
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-pixel", "-2"], // negative pixel
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-roi", "10", "5", "0", "3"],
        vec!["-cell", "100", "100", "100", "10", "10", "170", "-default_F", "100"],         // impossible angles
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-detpixels", "100000"],
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-hkl", "missing.hkl"],
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-floatfile", "no/such/dir/f.bin"],
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-sourcefile", "none.txt"],
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-mat"],
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-lambda", "abc"],
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-distanse", "100"],
        // CBF/NeXus counts of photons + -adc: past 2^31 - 1 (all saturated) or below 0 (negative counts)
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-adc", "1e10", "-cbffile", "c.cbf"],
        vec!["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-adc", "-5", "-nexusfile", "n.h5"],
    ] {
        let out = run_in(tmp.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(9), "{args:?} should be refused: {err}");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: expected a one-line error, got {err:?}");
        assert!(files_in(tmp.path()).is_empty(), "{args:?} left files: {:?}", files_in(tmp.path()));
    }
}

#[test]
fn errors_name_what_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let check = |args: &[&str], needle: &str| {
        let out = run_in(tmp.path(), args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains(needle), "{args:?}: {err:?} should mention {needle:?}");
    };
    check(&[CRYSTAL, &["-distanse", "100"]].concat(), "-distanse");
    check(&[CRYSTAL, &["-lambda", "abc"]].concat(), "-lambda");
    check(&[CRYSTAL, &["-pixel"]].concat(), "-pixel");
    check(&[CRYSTAL, &["-hkl", "missing.hkl"]].concat(), "missing.hkl");
    std::fs::write(tmp.path().join("bad.hkl"), "1 2 3 4\n1 2 x 5\n").unwrap();
    check(&[CRYSTAL, &["-hkl", "bad.hkl"]].concat(), "line 2");
    std::fs::write(tmp.path().join("notsmv.img"), vec![b'x'; 600]).unwrap();
    check(&[CRYSTAL, &["-mask", "notsmv.img"]].concat(), "notsmv.img");
    std::fs::write(tmp.path().join("short.mat"), "0.01 0 0\n0 0.01 0\n").unwrap();
    check(&["-mat", "short.mat", "-default_F", "100"], "short.mat");
    check(&[CRYSTAL, &["-adc", "1e10", "-cbffile", "c.cbf"]].concat(), "-adc: 10000000000: the CBF/NeXus counts are photons plus this offset");
    // a curved detector's pixels lie on a sphere; these headers describe a flat panel (an audit found
    // the spots 12 pixels from where dxtbx put them)
    for (out, flag) in [(&["-cbffile", "c.cbf"][..], "-cbffile"), (&["-nexusfile", "c.nxs"][..], "-nexusfile"), (&["-dxtbx_smv"][..], "-dxtbx_smv")] {
        check(&[CRYSTAL, &["-curved_det"], out].concat(), &format!("{flag}: the file describes a flat detector and -curved_det"));
    }
    assert!(run_in(tmp.path(), &[CRYSTAL, &["-curved_det", "-intfile", "curved.img"]].concat()).status.success(), "the plain SMV stays, as nanoBragg.c writes it");
    // flags that only act with another did nothing without it (-hklout wrote no file)
    check(&[CRYSTAL, &["-hklout", "F.hkl"]].concat(), "-hklout: applies to structure factors computed from an atomic model");
    check(&[CRYSTAL, &["-k_sol", "0.35"]].concat(), "-k_sol: applies to structure factors computed from an atomic model");
    check(&[CRYSTAL, &["--png-legend"]].concat(), "--png-legend: draws a scale strip on the --png preview");
}

#[test]
fn an_output_never_overwrites_an_input() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("in.hkl"), "0 0 0 10\n1 0 0 20\n").unwrap();
    let before = std::fs::read(tmp.path().join("in.hkl")).unwrap();
    let out = run_in(tmp.path(), &[CRYSTAL, &["-hkl", "in.hkl", "-floatfile", "in.hkl"]].concat());
    assert_eq!(out.status.code(), Some(9));
    assert_eq!(std::fs::read(tmp.path().join("in.hkl")).unwrap(), before);
}

#[test]
fn no_progress_bar_when_stderr_is_not_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let out = run_in(tmp.path(), &[CRYSTAL, &["-nonoise", "-nopgm"]].concat());
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\r') && !err.contains("ETA"), "progress output on a pipe: {err:?}");
    // the closing summary line is still there, and --quiet removes everything
    assert!(err.contains("done:"), "{err}");
    let out = run_in(tmp.path(), &[CRYSTAL, &["-nonoise", "-nopgm", "--quiet"]].concat());
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    assert!(t.elapsed() < Duration::from_secs(60));
}

#[test]
fn help_and_version() {
    let out = bin().args(["simulate", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for flag in ["-hkl", "-mat", "-detpixels", "-oversample_omega", "-mosaic_dom", "-twotheta_axis", "--out-dir"] {
        assert!(help.contains(flag), "help lacks {flag}");
    }
    let out = bin().arg("--version").output().unwrap();
    let v = String::from_utf8_lossy(&out.stdout);
    assert!(v.starts_with("nanobragg-rs ") && v.contains("git"), "{v}");
}

#[test]
fn out_dir_is_created_and_receives_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(tmp.path(), &[CRYSTAL, &["--out-dir", "results/run1", "-nonoise", "-nopgm"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(files_in(&tmp.path().join("results/run1")), ["floatimage.bin", "intimage.img"]);
    // the structure-factor cache goes there too, announced as written (it said "unable to open dump
    // file" because the folder was not made yet)
    std::fs::write(tmp.path().join("f.hkl"), "0 0 0 10\n1 0 0 20\n").unwrap();
    let out = run_in(tmp.path(), &[CRYSTAL, &["-hkl", "f.hkl", "--out-dir", "results/run2", "-nonoise", "-nopgm"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("writing dump file for next time: results/run2/Fdump.bin") && !text.contains("unable"), "{text}");
    assert!(tmp.path().join("results/run2/Fdump.bin").is_file());
    // --save-params too (it went to the working folder)
    let out = run_in(tmp.path(), &[CRYSTAL, &["--out-dir", "results/run3", "--save-params", "p.json", "-nonoise", "-nopgm"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(tmp.path().join("results/run3/p.json").is_file() && !tmp.path().join("p.json").exists());
}

/// `-default_F` with an Fdump.bin left in the folder: the cache is read (as in the C), and a note says
/// that its F replace the uniform F asked for (new-user audit 10: the run said nothing).
#[test]
fn default_f_over_a_cached_fdump_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f.hkl"), "0 0 0 10\n1 0 0 20\n").unwrap();
    let out = run_in(tmp.path(), &[CRYSTAL, &["-hkl", "f.hkl", "-nonoise", "-nopgm"]].concat());
    assert!(out.status.success() && tmp.path().join("Fdump.bin").is_file(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run_in(tmp.path(), &[CRYSTAL, &["-nonoise", "-nopgm"]].concat());
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("reading Fs from Fdump.bin"), "{text}");
    // on stderr: stdout stays the C's
    assert!(!text.contains("note: -default_F"), "{text}");
    let note: Vec<&str> = err.lines().filter(|l| l.starts_with("nanobragg-rs: note: -default_F 100 applies only outside")).collect();
    assert!(note.len() == 1 && note[0].contains("Fdump.bin") && note[0].contains("-dump NEW_FILE"), "{err}");
    // without -default_F the cache is all there is: no note
    let out = run_in(tmp.path(), &["-cell", "100", "100", "100", "90", "90", "90", "-N", "5", "-lambda", "1", "-detpixels", "64", "-nonoise", "-nopgm"]);
    assert!(out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("note: -default_F"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// An `-hkl` list that is an asymmetric unit (here h,k,l >= 0) gets one warning: no symmetry is
/// applied, so most spots would be missing without a word (new-user audit 11); a list with the
/// Friedel mates gets none.
#[test]
fn an_hkl_list_without_friedel_mates_is_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("asu.hkl"), "0 0 0 10\n1 0 0 20\n0 1 2 30\n").unwrap();
    std::fs::write(tmp.path().join("p1.hkl"), "0 0 0 10\n1 0 0 20\n-1 0 0 20\n").unwrap();
    let out = run_in(tmp.path(), &[CRYSTAL, &["-hkl", "asu.hkl", "-nonoise", "-nopgm"]].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    let warned: Vec<&str> = err.lines().filter(|l| l.contains("Friedel mate")).collect();
    assert!(out.status.success() && warned.len() == 1 && warned[0].contains("-hkl asu.hkl: no reflection has its Friedel mate") && warned[0].contains("F = 100"), "{err}");
    let out = run_in(tmp.path(), &[CRYSTAL, &["-hkl", "p1.hkl", "-nonoise", "-nopgm"]].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("Friedel"), "{err}");
    // a hemisphere (l >= 0): the l = 0 plane has its mates, the rest not
    std::fs::write(tmp.path().join("half.hkl"), "1 0 0 20
-1 0 0 20
1 0 1 20
0 1 1 20
1 1 2 20
").unwrap();
    let out = run_in(tmp.path(), &[CRYSTAL, &["-hkl", "half.hkl", "-nonoise", "-nopgm"]].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("3 of the 5 reflections have no Friedel mate"), "{err}");
}

/// Every file a run writes has its "writing" line, with the `--out-dir` folder in its name (new-user
/// audit 16: --png and the gradient files had none, and the lines left the folder out).
#[test]
fn every_written_file_has_a_writing_line_with_its_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(tmp.path(), &[CRYSTAL, &["--out-dir", "r", "-seed", "1", "--png", "p.png"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for f in ["floatimage.bin as 4096 4-byte floats", "intimage.img as 2-byte", "image.pgm as 1-byte", "noiseimage.img as 2-byte", "p.png as an 8-bit PNG"] {
        assert!(text.lines().any(|l| l == format!("writing r/{f}") || l.starts_with(&format!("writing r/{f}"))), "no line for r/{f}: {text}");
    }
    std::fs::write(tmp.path().join("f.hkl"), "0 0 0 10\n1 0 0 20\n-1 0 0 20\n").unwrap();
    let grads = ["-hkl", "f.hkl", "--observed", "r/floatimage.bin", "--gradients", "distance", "--gradient-prefix", "g_", "--loss-out", "L.json", "--dfhkl-out", "d.hkl"];
    let out = run_in(tmp.path(), &[CRYSTAL, &["--out-dir", "r", "-nonoise", "-nopgm", "-floatfile", "mu.bin"], &grads].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for f in ["r/g_distance.bin as 4096 4-byte floats", "r/L.json", "r/d.hkl"] {
        assert!(text.lines().any(|l| l.starts_with(&format!("writing {f}"))), "no line for {f}: {text}");
        assert!(tmp.path().join(f.split(' ').next().unwrap()).is_file(), "{f}");
    }
}

#[test]
fn dxtbx_smv_headers_carry_the_adc_offset() {
    // dxtbx's FormatSMVJHSim takes ADC_OFFSET as the pedestal and assumes 1 without it (#35 item 13)
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(tmp.path(), &[CRYSTAL, &["-seed", "1", "-adc", "25", "-dxtbx_smv", "-nopgm"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for f in ["intimage.img", "noiseimage.img"] {
        let head = std::fs::read(tmp.path().join(f)).unwrap();
        assert!(String::from_utf8_lossy(&head[..512]).contains("\nADC_OFFSET=25;\n"), "{f}");
    }
    let out = run_in(tmp.path(), &[CRYSTAL, &["-seed", "1", "-nopgm", "-intfile", "plain.img"]].concat());
    assert!(out.status.success());
    let head = std::fs::read(tmp.path().join("plain.img")).unwrap();
    assert!(!String::from_utf8_lossy(&head[..512]).contains("ADC_OFFSET"), "the C's header has no ADC_OFFSET");
}

/// A CBF image, or an SMV image written for dxtbx, under a name with no number gets a note: dxtbx
/// opens them only by a numbered name (new-user audit 12: "Could not determine filename template").
#[test]
fn images_for_dxtbx_under_unnumbered_names_get_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let note = |out: &Output| String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("note: dxtbx")).map(String::from).collect::<Vec<_>>();
    let out = run_in(tmp.path(), &[CRYSTAL, &["-seed", "1", "-dxtbx_smv", "-nopgm", "-cbffile", "a.cbf"]].concat());
    let n = note(&out);
    assert!(out.status.success() && n.len() == 1 && n[0].ends_with("cannot open intimage.img, noiseimage.img, a.cbf"), "{n:?}");
    let out = run_in(tmp.path(), &[CRYSTAL, &["-seed", "1", "-dxtbx_smv", "-nopgm", "-intfile", "i_001.img", "-noisefile", "n_001.img", "-cbffile", "c_001.cbf"]].concat());
    assert!(out.status.success() && note(&out).is_empty(), "{:?}", note(&out));
    // plain SMV is the C's file, for any program: no note
    let out = run_in(tmp.path(), &[CRYSTAL, &["-seed", "1", "-nopgm"]].concat());
    assert!(out.status.success() && note(&out).is_empty(), "{:?}", note(&out));
}

/// The PNG preview of a still on a water ring shows the spots (#35 item 10): at least 80 % of the spot
/// pixels (Bragg intensity above the water's at that pixel) are darker than 99 % of the background
/// pixels (Bragg below 1 % of the water), the floor and ceiling are in tEXt chunks, and
/// `--png-legend` adds rows below the image without changing it.
#[test]
fn png_preview_shows_the_spots_on_a_water_ring() {
    let tmp = tempfile::tempdir().unwrap();
    let flags = ["-cell", "79", "79", "38", "90", "90", "90", "-default_F", "100", "-N", "20", "-lambda", "1", "-distance", "100", "-detpixels", "256",
        "-pixel", "0.4", "-misset", "10", "20", "30", "-nonoise", "-nopgm", "-oversample", "1", "-mosaic", "0.3", "-mosaic_dom", "5"];
    let run = |extra: &[&str]| {
        let out = run_in(tmp.path(), &[&flags[..], extra].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    run(&["-water", "0.3", "-floatfile", "both.bin", "--png", "both.png"]);
    run(&["-water", "0.3", "-floatfile", "both2.bin", "--png", "legend.png", "--png-legend"]);
    run(&["-floatfile", "bragg.bin"]);
    let floats = |f: &str| -> Vec<f32> { std::fs::read(tmp.path().join(f)).unwrap().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect() };
    let (both, bragg) = (floats("both.bin"), floats("bragg.bin"));
    let decode = |f: &str| {
        let mut r = png::Decoder::new(std::fs::File::open(tmp.path().join(f)).unwrap()).read_info().unwrap();
        let keys: Vec<String> = r.info().uncompressed_latin1_text.iter().map(|t| t.keyword.clone()).collect();
        let mut buf = vec![0; r.output_buffer_size()];
        let info = r.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (buf, info.height, keys)
    };
    let (grey, rows, keys) = decode("both.png");
    assert_eq!(rows, 256);
    for k in ["nanobragg:floor", "nanobragg:ceiling", "Description"] {
        assert!(keys.iter().any(|x| x == k), "{k} missing from {keys:?}");
    }
    let (with_legend, legend_rows, _) = decode("legend.png");
    assert!(legend_rows > 256 && with_legend[..256 * 256] == grey[..], "the legend changes the image's rows");

    let water: Vec<f32> = both.iter().zip(&bragg).map(|(a, b)| a - b).collect();
    let spot: Vec<u8> = (0..grey.len()).filter(|&i| bragg[i] > water[i]).map(|i| grey[i]).collect();
    let mut background: Vec<u8> = (0..grey.len()).filter(|&i| bragg[i] < 0.01 * water[i]).map(|i| grey[i]).collect();
    assert!(spot.len() > 50 && background.len() > 10000, "test setup: {} spot and {} background pixels", spot.len(), background.len());
    background.sort_unstable();
    let darkest_percent = background[background.len() / 100];
    let darker = spot.iter().filter(|&&g| g < darkest_percent).count() as f64 / spot.len() as f64;
    assert!(darker >= 0.8, "only {:.1} % of the spot pixels are darker than 99 % of the background", 100.0 * darker);
}

/// The float image is rendered straight into its (regular) output file, with the statistics reduced
/// row by row during the render; into a FIFO it is held in memory and written after. Both must give
/// the same float bytes, SMV image and printed statistics.
#[test]
fn a_float_image_rendered_into_its_file_equals_one_written_from_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    let args = [CRYSTAL, &["-roi", "5", "50", "3", "60", "-mosaic", "0.5", "-mosaic_dom", "3", "-nonoise", "-nopgm", "-seed", "3"]].concat();
    let regular = run_in(p, &[&args[..], &["-floatfile", "f.bin", "-intfile", "a.img"]].concat());
    assert!(regular.status.success(), "{}", String::from_utf8_lossy(&regular.stderr));
    assert!(Command::new("mkfifo").arg(p.join("fifo")).status().unwrap().success());
    let fifo = p.join("fifo");
    let reader = std::thread::spawn(move || std::fs::read(fifo).unwrap());
    let piped = run_in(p, &[&args[..], &["-floatfile", "fifo", "-intfile", "b.img"]].concat());
    assert!(piped.status.success(), "{}", String::from_utf8_lossy(&piped.stderr));
    assert_eq!(reader.join().unwrap(), std::fs::read(p.join("f.bin")).unwrap(), "float bytes");
    assert_eq!(std::fs::read(p.join("a.img")).unwrap(), std::fs::read(p.join("b.img")).unwrap(), "SMV image");
    let stats = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with("max_I") || l.starts_with("mean=") || l.starts_with("intfile_scale")).map(str::to_string).collect()
    };
    assert_eq!(stats(&regular).len(), 3);
    assert_eq!(stats(&regular), stats(&piped));
    assert_eq!(files_in(p), ["a.img", "b.img", "f.bin", "fifo"], "no temporary file left");
}

/// The noise image is drawn from the rows as the render finishes them (the C's serial stream, rows in
/// raster order); with `-add_float` (here an image of zeros, which changes no pixel) it is drawn after
/// the render from the whole image. Both must be the same file, with the same photon count printed.
#[test]
fn noise_drawn_during_the_render_equals_noise_drawn_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    std::fs::write(p.join("zero.bin"), vec![0u8; 96 * 80 * 4]).unwrap();
    let args = ["-cell", "70", "80", "90", "85", "95", "105", "-default_F", "100", "-N", "3", "-lambda", "1", "-detsize_f", "9.6", "-detsize_s", "8"];
    let args = [&args[..], &["-pixel", "0.1", "-misset", "random", "-mosaic", "0.5", "-mosaic_dom", "4", "-water", "50", "-roi", "3", "90", "2", "70", "-seed", "11", "-nopgm"]].concat();
    let during = run_in(p, &[&args[..], &["-floatfile", "a.bin", "-intfile", "a.img", "-noisefile", "a.noise"]].concat());
    assert!(during.status.success(), "{}", String::from_utf8_lossy(&during.stderr));
    let after = run_in(p, &[&args[..], &["-floatfile", "b.bin", "-intfile", "b.img", "-noisefile", "b.noise", "-add_float", "zero.bin"]].concat());
    assert!(after.status.success(), "{}", String::from_utf8_lossy(&after.stderr));
    for (x, y) in [("a.bin", "b.bin"), ("a.img", "b.img"), ("a.noise", "b.noise")] {
        assert_eq!(std::fs::read(p.join(x)).unwrap(), std::fs::read(p.join(y)).unwrap(), "{x} vs {y}");
    }
    let photons = |o: &Output| String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains("photons on noise image")).map(str::to_string);
    assert!(photons(&during).is_some());
    assert_eq!(photons(&during), photons(&after));
}

/// Without a PGM the rmsd is summed during the int image's conversion (one read of the image after the
/// render, not two); with one it is a pass of its own before the PGM needs it. Same statistics, same
/// int image either way.
#[test]
fn the_rmsd_summed_during_the_int_conversion_equals_its_own_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    let args = ["-cell", "70", "80", "90", "85", "95", "105", "-default_F", "100", "-N", "3", "-lambda", "1", "-detsize_f", "9.7", "-detsize_s", "8.3"];
    let args = [&args[..], &["-pixel", "0.1", "-misset", "10", "20", "30", "-water", "50", "-roi", "3", "90", "2", "70", "-nonoise"]].concat();
    let fused = run_in(p, &[&args[..], &["-floatfile", "a.bin", "-intfile", "a.img", "-nopgm"]].concat());
    assert!(fused.status.success(), "{}", String::from_utf8_lossy(&fused.stderr));
    let own = run_in(p, &[&args[..], &["-floatfile", "b.bin", "-intfile", "b.img", "-pgmfile", "b.pgm"]].concat());
    assert!(own.status.success(), "{}", String::from_utf8_lossy(&own.stderr));
    assert_eq!(std::fs::read(p.join("a.img")).unwrap(), std::fs::read(p.join("b.img")).unwrap());
    let stats = |o: &Output| String::from_utf8_lossy(&o.stdout).lines().find(|l| l.starts_with("mean=")).map(str::to_string);
    assert!(stats(&fused).is_some_and(|l| l.contains("rmsd=")));
    assert_eq!(stats(&fused), stats(&own));
}

/// The setup lines give the angles rendered: with `--phi-midpoint` (and `--expt`) each sub-step's
/// centre, where they printed its start (an audit: "phi0 = 3, phi1 = 3.25" for 3.125 and 3.375).
#[test]
fn printed_phi_steps_are_the_rendered_angles() {
    let tmp = tempfile::tempdir().unwrap();
    let scan = ["-phi", "3", "-osc", "0.5", "-phisteps", "2", "-nonoise", "-nopgm"];
    let c_like = String::from_utf8_lossy(&run_in(tmp.path(), &[CRYSTAL, &scan].concat()).stdout).into_owned();
    assert!(c_like.contains("phi0 = 3\n") && c_like.contains("phi1 = 3.25\n"), "{c_like}");
    let mid = String::from_utf8_lossy(&run_in(tmp.path(), &[CRYSTAL, &scan, &["--phi-midpoint"]].concat()).stdout).into_owned();
    assert!(mid.contains("phi0 = 3.125\n") && mid.contains("phi1 = 3.375\n"), "{mid}");
}

/// A NANOBRAGG_HDF5_LIB that does not load is an error naming it (the system's library was used
/// silently instead, so a user could not tell which HDF5 wrote the file).
#[test]
fn a_named_hdf5_library_that_does_not_load_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = bin().arg("simulate").current_dir(tmp.path()).env("NANOBRAGG_HDF5_LIB", tmp.path().join("nonexistent.so")).args(CRYSTAL).args(["-nexusfile", "x.nxs"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert!(err.contains("NANOBRAGG_HDF5_LIB=") && err.contains("nonexistent.so: cannot load it as the HDF5 library") && err.trim_end().lines().count() == 1, "{err}");
    assert!(!tmp.path().join("x.nxs").exists());
}

/// `--quiet` prints errors and warnings: the C's WARNING lines too (they went with the setup lines).
#[test]
fn quiet_keeps_the_c_warnings() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(tmp.path(), &[CRYSTAL, &["-mosaic", "0.5", "--quiet", "-nonoise", "-nopgm"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert_eq!(text, "WARNING: finite mosaicity with only one domain! upping to 10 mosaic domains\n");
    let out = run_in(tmp.path(), &[CRYSTAL, &["--quiet", "-nonoise", "-nopgm"]].concat());
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// A mask or image header decides geometry the flags seem to (nanoBragg.c does so silently): its
/// CLOSE_DISTANCE over `-distance`, a mask's BEAM_CENTER_Y as detector size − value. The run renders
/// as the C does and says so on stderr; nothing is said where the flags take it back.
#[test]
fn header_geometry_that_overrides_the_flags_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let header = "{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=unsigned_short;\nSIZE1=64;\nSIZE2=64;\nPIXEL_SIZE=0.1;\nCLOSE_DISTANCE=90;\nBEAM_CENTER_Y=2.0;\n}\n";
    let mut bytes = header.as_bytes().to_vec();
    bytes.resize(512, b' ');
    bytes.extend(std::iter::repeat([1u8, 0u8]).take(64 * 64).flatten());
    std::fs::write(d.join("mask.img"), &bytes).unwrap();
    let run = |extra: &[&str]| {
        let o = run_in(d, &[CRYSTAL, &["-mask", "mask.img", "-floatfile", "f.bin", "-intfile", "i.img", "-nonoise", "-nopgm", "-quiet"], extra].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run(&["-distance", "120"]);
    assert!(err.contains("-mask mask.img: its header's CLOSE_DISTANCE=90 sets the detector distance, not -distance"), "{err}");
    assert!(err.contains("BEAM_CENTER_Y=2 places the beam at Ybeam = detector size − 2 = 4.4 mm"), "{err}");
    let err = run(&["-close_distance", "120", "-Ybeam", "3"]);
    assert!(!err.contains("warning"), "{err}");
}

/// `-hklout` belongs to the outputs renamed together: a run whose image cannot be written (here a
/// file-size limit) leaves the old `-hklout` untouched, as it leaves the old images (it was replaced).
#[test]
fn a_failed_image_write_leaves_the_old_hklout() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(
        d.join("m.pdb"),
        "CRYST1   20.000   25.000   30.000  90.00  90.00  90.00 P 21 21 21\n\
ATOM      1  C   ALA A   1       1.000   2.000   3.000  1.00 10.00           C\n",
    )
    .unwrap();
    std::fs::write(d.join("h.hkl"), "1 2 3 4\n").unwrap();
    let exe = env!("CARGO_BIN_EXE_nanobragg-rs");
    let out = Command::new("sh")
        .current_dir(d)
        .arg("-c")
        .arg(format!("ulimit -f 300; exec {exe} simulate -pdb m.pdb -dmin 4 -detpixels 512 -hklout h.hkl -floatfile f.bin -nonoise -nopgm -intfile i.img"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert_eq!(std::fs::read_to_string(d.join("h.hkl")).unwrap(), "1 2 3 4\n", "{err}");
    assert!(!d.join("f.bin").exists());
    // without the limit the same run writes it
    let out = run_in(d, &["-pdb", "m.pdb", "-dmin", "4", "-detpixels", "64", "-hklout", "h.hkl", "-floatfile", "f.bin", "-nonoise", "-nopgm", "-intfile", "i.img"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(d.join("h.hkl")).unwrap().lines().count() > 10);
    // under --out-dir the log names the file where it is written
    let out = run_in(d, &["-pdb", "m.pdb", "-dmin", "4", "-detpixels", "64", "-hklout", "h2.hkl", "-nonoise", "-nopgm", "--out-dir", "o"]);
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && log.contains(&format!(" reflections to {}", Path::new("o").join("h2.hkl").display())), "{log}");
    assert!(d.join("o/h2.hkl").exists());
}
