//! `matrix` (UBtoA.awk) and `float-add` / `simulate -add_float` through the binary.
use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nanobragg-rs"))
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{:?}: {}", cmd, String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The cell `simulate` reports ("Unit Cell: a b c alpha beta gamma") for an A matrix.
fn cell_read_back(dir: &Path, mat: &str, lambda: &str) -> Vec<f64> {
    let out = run_ok(bin().current_dir(dir).args([
        "simulate", "-mat", mat, "-lambda", lambda, "-default_F", "1", "-N", "1", "-detpixels", "8", "-pixel", "0.1",
        "-distance", "100", "-nonoise", "-nopgm", "-floatfile", "f.bin", "-intfile", "i.img",
    ]));
    let line = out.lines().find(|l| l.starts_with("Unit Cell:")).unwrap_or_else(|| panic!("no Unit Cell line in:\n{out}"));
    line["Unit Cell:".len()..].split_whitespace().map(|v| v.parse().unwrap()).collect()
}

#[test]
fn matrix_reads_back_to_the_same_cell() {
    let dir = tempfile::tempdir().unwrap();
    let cell = [70.0, 80.0, 90.0, 85.0, 95.0, 100.0];
    for (name, orient) in [("m.mat", vec!["-misset", "10", "20", "30"]), ("r.mat", vec!["-misset", "random", "-seed", "7"])] {
        let mut args = vec!["matrix", "-cell", "70", "80", "90", "85", "95", "100", "-lambda", "1.3", "-o", name];
        args.extend(orient);
        run_ok(bin().current_dir(dir.path()).args(&args));
        let got = cell_read_back(dir.path(), name, "1.3");
        for (g, w) in got.iter().zip(cell) {
            // UBtoA.awk's %12.8f layout keeps ~6 significant digits of the small A-matrix entries,
            // which limits the read-back to ~1e-3 relative for a triclinic cell
            assert!((g - w).abs() < 2e-3 * w, "{name}: {got:?} vs {cell:?}");
        }
    }
    // a strongly triclinic cell (UBtoA.awk's B matrix read back c = 45.99 for 50)
    run_ok(bin().current_dir(dir.path()).args(["matrix", "-cell", "30", "40", "50", "100", "110", "120", "-o", "t.mat"]));
    let got = cell_read_back(dir.path(), "t.mat", "1");
    for (g, w) in got.iter().zip([30.0, 40.0, 50.0, 100.0, 110.0, 120.0]) {
        assert!((g - w).abs() < 2e-3 * w, "triclinic: {got:?}");
    }
    // a seed gives the same orientation every time; another seed a different one
    let again = |seed: &str, name: &str| {
        run_ok(bin().current_dir(dir.path()).args(["matrix", "-cell", "70", "80", "90", "85", "95", "100", "-misset", "random", "-seed", seed, "-o", name]));
        std::fs::read_to_string(dir.path().join(name)).unwrap()
    };
    assert_eq!(again("7", "a.mat"), again("7", "b.mat"));
    assert_ne!(again("7", "a.mat"), again("8", "c.mat"));
    // bad input: one-line error, exit 9
    let out = bin().args(["matrix", "-cell", "70", "80"]).output().unwrap();
    assert_eq!(out.status.code(), Some(9));
}

fn write_f32(p: &Path, v: &[f32]) {
    std::fs::write(p, v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
}
fn read_f32(p: &Path) -> Vec<f32> {
    std::fs::read(p).unwrap().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

#[test]
fn float_add_and_simulate_add_float() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_f32(&d.join("a.bin"), &[1.0, 2.0, 3.0, 4.0]);
    write_f32(&d.join("b.bin"), &[10.0, 20.0, 30.0, 40.0]);
    run_ok(bin().current_dir(d).args(["float-add", "a.bin", "b.bin", "-scale", "2", "0.5", "-o", "s.bin"]));
    assert_eq!(read_f32(&d.join("s.bin")), vec![7.0, 14.0, 21.0, 28.0]);
    let out = bin().current_dir(d).args(["float-add", "a.bin", "-o", "x.bin", "-scale", "1", "2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(9));

    // simulate -add_float bg.bin == simulate, then add bg.bin
    let n = 16 * 16;
    let bg: Vec<f32> = (0..n).map(|i| 5.0 + (i % 7) as f32).collect();
    write_f32(&d.join("bg.bin"), &bg);
    let base = ["simulate", "-cell", "50", "50", "50", "90", "90", "90", "-default_F", "100", "-N", "3", "-lambda", "1", "-detpixels", "16", "-pixel", "0.5", "-distance", "50", "-nopgm", "-seed", "3"];
    run_ok(bin().current_dir(d).args(base).args(["-floatfile", "plain.bin", "-intfile", "p.img", "-noisefile", "pn.img"]));
    run_ok(bin().current_dir(d).args(base).args(["-add_float", "bg.bin", "-floatfile", "sum.bin", "-intfile", "s.img", "-noisefile", "sn.img"]));
    let plain = read_f32(&d.join("plain.bin"));
    let sum = read_f32(&d.join("sum.bin"));
    for i in 0..n {
        assert_eq!(sum[i], (plain[i] as f64 + bg[i] as f64) as f32);
    }
    let out = bin().current_dir(d).args(base).args(["-add_float", "a.bin"]).output().unwrap();
    assert_eq!(out.status.code(), Some(9), "size mismatch must be refused");
}

/// `noisify --png` (the port's option) writes a preview of the noise image, with the same noise
/// image as without it.
#[test]
fn noisify_png_preview() {
    let dir = tempfile::tempdir().unwrap();
    let img: Vec<u8> = (0..32 * 24).flat_map(|i| ((i % 17) as f32 * 3.0).to_le_bytes()).collect();
    std::fs::write(dir.path().join("in.bin"), img).unwrap();
    let args = ["noisify", "-floatfile", "in.bin", "-detpixels_x", "32", "-detpixels_y", "24", "-psf", "gauss", "-psf_fwhm", "150", "-seed", "3"];
    run_ok(bin().current_dir(dir.path()).args(args).args(["-noisefile", "a.img", "--png", "a.png"]));
    run_ok(bin().current_dir(dir.path()).args(args).args(["-noisefile", "b.img"]));
    assert_eq!(std::fs::read(dir.path().join("a.img")).unwrap(), std::fs::read(dir.path().join("b.img")).unwrap());
    let png = std::fs::read(dir.path().join("a.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width and height
    assert_eq!(u32::from_be_bytes([png[16], png[17], png[18], png[19]]), 32);
    assert_eq!(u32::from_be_bytes([png[20], png[21], png[22], png[23]]), 24);
}
