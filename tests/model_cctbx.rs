//! Structure factors from atomic models (-pdb/-cif) against cctbx (direct summation, WK1995 table,
//! Henke f'/f''), on real models shipped with cctbx's Python tree (read there at test time, never
//! copied): 1yjp (P 1 21 1), 2ERL (C 1 2 1, ANISOU; also as mmCIF) and a 1brf fragment with Fe
//! (P 21 21 21, anomalous). Skipped loudly when cctbx is not installed.

use nanobragg::sfcalc::{compute, read_mmcif, read_pdb, SfOptions};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> String {
    std::env::var("NANOBRAGG_CCTBX_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into())
}

/// The directory holding iotbx/ and mmtbx/, or None (with the reason) when cctbx is absent.
fn cctbx_tree() -> Result<PathBuf, String> {
    let out = Command::new(python())
        .args(["-c", "import os, iotbx.pdb, mmtbx; print(os.path.dirname(os.path.dirname(iotbx.__file__)))"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python()))?;
    if !out.status.success() {
        return Err(format!("{} cannot import cctbx (iotbx, mmtbx)", python()));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn read_ref(p: &Path) -> HashMap<[i32; 3], (f64, f64)> {
    let mut m = HashMap::new();
    for line in std::fs::read_to_string(p).unwrap().lines() {
        let v: Vec<f64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
        m.insert([v[0] as i32, v[1] as i32, v[2] as i32], (v[3], v[4]));
    }
    m
}

fn corr(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    sxy / (sxx * syy).sqrt()
}

/// Compare our |F| with cctbx's on the reflections cctbx lists; returns (ours, ref) by hkl.
fn compare(name: &str, ours: &nanobragg::sfcalc::ModelF, reference: &HashMap<[i32; 3], (f64, f64)>) -> HashMap<[i32; 3], f64> {
    let amps = ours.amplitudes();
    let mine: HashMap<[i32; 3], f64> = ours.hkl.iter().cloned().zip(amps).collect();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut missing = 0;
    for (h, (f, _)) in reference {
        match mine.get(h) {
            Some(v) => {
                a.push(*v);
                b.push(*f);
            }
            None => missing += 1,
        }
    }
    let r = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).sum::<f64>() / b.iter().sum::<f64>();
    let c = corr(&a, &b);
    eprintln!("{name}: {} reflections compared ({missing} of cctbx's missing here, {} here), CC = {c:.7}, R = {:.4}%", a.len(), ours.hkl.len(), 100.0 * r);
    assert!(missing * 1000 <= reference.len(), "{name}: {missing} of cctbx's reflections missing");
    assert!(c >= 0.9999, "{name}: CC {c}");
    assert!(r < 0.005, "{name}: R {r}");
    mine
}

#[test]
fn models_against_cctbx() {
    let tree = match cctbx_tree() {
        Ok(t) => t,
        Err(why) => {
            eprintln!("SKIPPED: model_cctbx::models_against_cctbx because {why}");
            return;
        }
    };
    let m_1yjp = tree.join("iotbx/regression/data/1yjp.pdb");
    let m_2erl = tree.join("iotbx/regression/data/2ERL.pdb");
    let m_1brf = tree.join("mmtbx/regression/pdbs/Fe_1brf_snip_reduced.pdb");
    for m in [&m_1yjp, &m_2erl, &m_1brf] {
        if !m.is_file() {
            eprintln!("SKIPPED: model_cctbx::models_against_cctbx because {} is absent", m.display());
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/model/cctbx_fcalc.py");
    let (d1, d2, d3, wl) = (1.2, 1.8, 2.0, 1.6);
    let st = Command::new(python())
        .arg(&script)
        .args([m_1yjp.to_str().unwrap(), &d1.to_string(), "0", d.join("1yjp.txt").to_str().unwrap(), "--"])
        .args([m_2erl.to_str().unwrap(), &d2.to_string(), "0", d.join("2erl.txt").to_str().unwrap(), d.join("2erl.cif").to_str().unwrap(), "--"])
        .args([m_1brf.to_str().unwrap(), &d3.to_string(), &wl.to_string(), d.join("1brf.txt").to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success(), "cctbx reference script failed");

    let opts = |d_min: f64, lam: Option<f64>| SfOptions { d_min, anomalous_lambda: lam, bulk: None, f000: true };
    // 1yjp, P 1 21 1
    let model = read_pdb(&m_1yjp).unwrap();
    let f = compute(&model, &m_1yjp, &opts(d1, None)).unwrap();
    assert_eq!(f.space_group, "P1211");
    let mine = compare("1yjp P 1 21 1", &f, &read_ref(&d.join("1yjp.txt")));
    assert!(mine.contains_key(&[0, 0, 0]) && mine[&[0, 0, 0]] > 100.0, "F000 present");

    // 2ERL, C 1 2 1 with ANISOU, from PDB and from mmCIF
    let model = read_pdb(&m_2erl).unwrap();
    assert!(model.atoms.iter().filter(|a| a.u_aniso.is_some()).count() > 600);
    let r2 = read_ref(&d.join("2erl.txt"));
    let f = compute(&model, &m_2erl, &opts(d2, None)).unwrap();
    assert_eq!(f.space_group, "C121");
    compare("2ERL C 1 2 1 ANISOU (PDB)", &f, &r2);
    let cif = d.join("2erl.cif");
    let model_cif = read_mmcif(&cif).unwrap();
    assert_eq!(model_cif.atoms.len(), model.atoms.len());
    assert!(model_cif.atoms.iter().filter(|a| a.u_aniso.is_some()).count() > 600);
    let f = compute(&model_cif, &cif, &opts(d2, None)).unwrap();
    compare("2ERL C 1 2 1 ANISOU (mmCIF)", &f, &r2);

    // 1brf fragment with Fe, P 21 21 21, Henke f'/f'' at 1.6 A: amplitudes and Bijvoet differences
    let model = read_pdb(&m_1brf).unwrap();
    let r3 = read_ref(&d.join("1brf.txt"));
    let f = compute(&model, &m_1brf, &opts(d3, Some(wl))).unwrap();
    assert_eq!(f.space_group, "P212121");
    let mine = compare("1brf P 21 21 21 anomalous", &f, &r3);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (h, (fp, _)) in &r3 {
        let m = [-h[0], -h[1], -h[2]];
        if let (Some(fm), Some(x), Some(y)) = (r3.get(&m).map(|v| v.0), mine.get(h), mine.get(&m)) {
            a.push(x - y);
            b.push(fp - fm);
        }
    }
    let c = corr(&a, &b);
    let rms = (b.iter().map(|v| v * v).sum::<f64>() / b.len() as f64).sqrt();
    eprintln!("1brf Bijvoet differences: {} pairs, rms {rms:.3} e, CC = {c:.5}", a.len());
    assert!(rms > 0.1, "anomalous differences are present");
    assert!(c >= 0.99, "Bijvoet CC {c}");
}

/// The one-command path: an image from a model file, the -hklout list, and clear refusals.
#[test]
fn simulate_from_model() {
    let exe = env!("CARGO_BIN_EXE_nanobragg-rs");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // a tiny model of our own: two atoms in P 21 21 21
    let pdb = d.join("tiny.pdb");
    std::fs::write(
        &pdb,
        "CRYST1   20.000   25.000   30.000  90.00  90.00  90.00 P 21 21 21    4\n\
ATOM      1  C   ALA A   1       1.000   2.000   3.000  1.00 10.00           C\n\
HETATM    2 ZN    ZN A   2       5.000   6.000   7.000  1.00 15.00          ZN2+\n",
    )
    .unwrap();
    let out = Command::new(exe)
        .current_dir(d)
        .args(["simulate", "-pdb", "tiny.pdb", "-lambda", "1", "-N", "5", "-detpixels", "64", "-pixel", "0.4", "-distance", "60"])
        .args(["-hklout", "P1.hkl", "-floatfile", "img.bin", "-dmin", "3"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("computed") && log.contains("structure factors"), "{log}");
    // the setup log comes before -hklout is written (with the images): it must not say it was
    assert!(log.contains("will write ") && log.contains(" reflections to P1.hkl") && !log.contains("wrote "), "{log}");
    assert_eq!(std::fs::metadata(d.join("img.bin")).unwrap().len(), 64 * 64 * 4);
    let hkl = std::fs::read_to_string(d.join("P1.hkl")).unwrap();
    assert!(!hkl.lines().any(|l| l.starts_with("0 0 0 ")), "F000 is left out by default");
    // the written list reads back as an -hkl file
    let out = Command::new(exe)
        .current_dir(d)
        .args(["simulate", "-hkl", "P1.hkl", "-cell", "20", "25", "30", "90", "90", "90", "-lambda", "1", "-N", "5"])
        .args(["-detpixels", "64", "-pixel", "0.4", "-distance", "60", "-floatfile", "img2.bin", "-dmin", "3"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(d.join("img.bin")).unwrap() == std::fs::read(d.join("img2.bin")).unwrap(), "-pdb and -hkl of its -hklout give different images");

    // -F000 keeps it; everything else is the same list
    let model_run = |model: &str, extra: &[&str], hklout: &str| {
        Command::new(exe)
            .current_dir(d)
            .args(["simulate", "-pdb", model, "-lambda", "1", "-N", "5", "-detpixels", "64", "-pixel", "0.4", "-distance", "60", "-dmin", "3"])
            .args(extra)
            .args(["-hklout", hklout, "-floatfile", "scratch.bin", "-nonoise", "-nopgm"])
            .output()
            .unwrap()
    };
    let out = model_run("tiny.pdb", &["-F000"], "with_f000.hkl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let with = std::fs::read_to_string(d.join("with_f000.hkl")).unwrap();
    let f000: Vec<&str> = with.lines().filter(|l| l.starts_with("0 0 0 ")).collect();
    assert_eq!(f000.len(), 1, "-F000 keeps F000");
    assert_eq!(with.lines().filter(|l| !l.starts_with("0 0 0 ")).collect::<Vec<_>>(), hkl.lines().collect::<Vec<_>>());

    // the same symmetry from a CNS remark (cctbx reads `REMARK sg= P2(1)2(1)2(1) a= ...` as P 21 21 21
    // with that cell when there is no CRYST1), and from -cell and -spacegroup for a model with none
    let atoms = "ATOM      1  C   ALA A   1       1.000   2.000   3.000  1.00 10.00           C
HETATM    2 ZN    ZN A   2       5.000   6.000   7.000  1.00 15.00          ZN2+
";
    std::fs::write(d.join("cns.pdb"), format!("REMARK sg= P2(1)2(1)2(1) a= 20.000 b= 25.000 c= 30.000 alpha= 90.00 beta= 90.00 gamma= 90.00\n{atoms}")).unwrap();
    std::fs::write(d.join("bare.pdb"), atoms).unwrap();
    for (model, extra, name) in [
        ("cns.pdb", vec![], "cns.hkl"),
        ("bare.pdb", vec!["-cell", "20", "25", "30", "90", "90", "90", "-spacegroup", "19"], "bare19.hkl"),
        ("bare.pdb", vec!["-cell", "20", "25", "30", "90", "90", "90", "-spacegroup", "P 21 21 21"], "bare_sym.hkl"),
    ] {
        let out = model_run(model, &extra, name);
        assert!(out.status.success(), "{model} {extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(std::fs::read_to_string(d.join(name)).unwrap(), hkl, "{model} {extra:?}");
    }
    // a model with no cell and no -cell, and a space group that does not exist: one line, exit 9
    for (extra, needle) in [(vec![], "-cell"), (vec!["-cell", "20", "25", "30", "90", "90", "90", "-spacegroup", "231"], "-spacegroup")] {
        let out = model_run("bare.pdb", &extra, "never.hkl");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(9), "{err}");
        assert!(err.contains(needle) && err.trim().lines().count() == 1, "{err}");
        assert!(!d.join("never.hkl").exists());
    }

    // unknown space group: exit 9 naming the file
    std::fs::write(d.join("bad.pdb"), "CRYST1   20.000   25.000   30.000  90.00  90.00  90.00 Q 7 7\nATOM      1  C   ALA A   1       1.000   2.000   3.000  1.00 10.00           C\n").unwrap();
    let out = Command::new(exe).current_dir(d).args(["simulate", "-pdb", "bad.pdb", "-detpixels", "16"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert!(err.contains("bad.pdb") && err.contains("space group"), "{err}");
    // garbage coordinates: exit 9 naming the line
    std::fs::write(d.join("bad2.pdb"), "CRYST1   20.000   25.000   30.000  90.00  90.00  90.00 P 1\nATOM      1  C   ALA A   1       1.000   xxxxx   3.000  1.00 10.00           C\n").unwrap();
    let out = Command::new(exe).current_dir(d).args(["simulate", "-pdb", "bad2.pdb", "-detpixels", "16"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert!(err.contains("bad2.pdb") && err.contains('2'), "{err}");
}

/// Every reflection a pixel reads is computed: a model's image equals the image of the same model's
/// complete list (`-hkl` of an `-hklout` to far past the detector) for a small cell with the
/// interpolation (the list stopped 5 % past the detector, and a missing neighbour switched the
/// interpolation off: 16 175 of 16 384 pixels differed), on a curved detector (which reaches past a
/// flat one's corners), from a source shorter than `-lambda`, and under a larger `-cell`; a
/// placeholder CRYST1 (1 1 1) takes `-cell`.
#[test]
fn a_models_image_reads_only_computed_reflections() {
    let exe = env!("CARGO_BIN_EXE_nanobragg-rs");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let atoms = "ATOM      1  C   ALA A   1       1.000   2.000   3.000  1.00 10.00           C\n\
ATOM      2  N   ALA A   1       3.000   1.000   5.000  1.00 10.00           N\n\
ATOM      3  O   ALA A   1       5.000   6.000   2.000  1.00 10.00           O\n\
ATOM      4  S   MET A   2       2.000   7.000   8.000  1.00 10.00           S\n";
    std::fs::write(d.join("small.pdb"), format!("CRYST1    8.000    9.000   10.000  90.00  90.00  90.00 P 1           1\n{atoms}")).unwrap();
    std::fs::write(d.join("placeholder.pdb"), format!("CRYST1    1.000    1.000    1.000  90.00  90.00  90.00 P 1           1\n{atoms}")).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(exe).current_dir(d).arg("simulate").args(args).args(["-nonoise", "-nopgm", "-intfile", "i.img", "-dump", "F.dump"]).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let sum = |f: &str| -> f64 { std::fs::read(d.join(f)).unwrap().chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).sum() };
    run(&["-pdb", "small.pdb", "-dmin", "0.3", "-hklout", "full.hkl", "-floatfile", "x.bin", "-detpixels", "8"]);
    let cases: [&[&str]; 4] = [
        &["-lambda", "1", "-N", "2", "-distance", "100", "-detpixels", "96", "-pixel", "0.8", "-interpolate"],
        &["-lambda", "2", "-N", "3", "-distance", "50", "-detpixels", "96", "-pixel", "1", "-curved_det", "-misset", "10", "20", "30", "-nointerpolate"],
        &["-lambda", "1", "-N", "3", "-distance", "60", "-detpixels", "96", "-pixel", "0.5", "-sourcefile", "src.txt", "-nointerpolate"],
        &["-lambda", "1", "-N", "3", "-distance", "60", "-detpixels", "96", "-pixel", "0.5", "-misset", "10", "20", "30", "-nointerpolate"],
    ];
    std::fs::write(d.join("src.txt"), "-1 0 0 1 1e-10\n-1 0 0 1 0.7e-10\n").unwrap();
    for (i, case) in cases.iter().enumerate() {
        let cell: &[&str] = if i == 3 { &["-cell", "9.6", "10.8", "12", "90", "90", "90"] } else { &["-cell", "8", "9", "10", "90", "90", "90"] };
        let model_cell: &[&str] = if i == 3 { cell } else { &[] };
        let model = run(&[&["-pdb", "small.pdb", "-floatfile", "model.bin"], model_cell, *case].concat());
        assert!(!model.contains("out of range"), "case {i}: {model}");
        run(&[&["-hkl", "full.hkl", "-floatfile", "list.bin"], cell, *case].concat());
        let (a, b) = (sum("model.bin"), sum("list.bin"));
        assert!((a / b - 1.0).abs() < 1e-6, "case {i}: the model's image holds {a} photons, its complete list's {b}");
    }
    let log = run(&["-pdb", "placeholder.pdb", "-cell", "8", "9", "10", "90", "90", "90", "-floatfile", "p.bin", "-detpixels", "32"]);
    assert!(log.contains("cell 8 9 10 90 90 90"), "{log}");
}

/// Models the program cannot compute right are refused (exit 9, one line naming the flag or the file's
/// line), and no -hklout is written: a space group the cell cannot have (cctbx: "Space group is
/// incompatible with unit cell parameters"), a B that makes F blow up, an oversized -k_sol, an mmCIF
/// naming its space group only by a Hall symbol (it was read as P 1).
#[test]
fn models_that_would_give_wrong_f_are_refused() {
    let exe = env!("CARGO_BIN_EXE_nanobragg-rs");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let atom = "ATOM      1  C   ALA A   1       1.000   2.000   3.000  1.00 10.00           C\n";
    let mono = "CRYST1   34.292   20.318   33.482  90.00 112.00  90.00 C 1 2 1\n";
    std::fs::write(d.join("mono.pdb"), format!("{mono}{atom}")).unwrap();
    std::fs::write(d.join("p61.pdb"), format!("CRYST1    8.000    9.000   10.000  90.00  90.00  90.00 P 61\n{atom}")).unwrap();
    std::fs::write(
        d.join("negb.pdb"),
        "CRYST1    8.000    9.000   10.000  90.00  90.00  90.00 P 1\n\
ATOM      1  C   ALA A   1       1.000   2.000   3.000  1.00 10.00           C\n\
ATOM      2  O   ALA A   1       4.000   2.000   3.000  1.00-999.9           O\n",
    )
    .unwrap();
    let cif = |sym: &str| {
        format!(
            "data_x\n_cell.length_a 20\n_cell.length_b 22\n_cell.length_c 24\n_cell.angle_alpha 90\n_cell.angle_beta 90\n\
_cell.angle_gamma 90\n{sym}\nloop_\n_atom_site.group_PDB\n_atom_site.id\n_atom_site.type_symbol\n_atom_site.label_atom_id\n\
_atom_site.Cartn_x\n_atom_site.Cartn_y\n_atom_site.Cartn_z\nATOM 1 C C 1 2 3\nATOM 2 O O 4 2 3\n"
        )
    };
    std::fs::write(d.join("hall.cif"), cif("_symmetry.space_group_name_Hall '-P 2ac 2n'")).unwrap();
    std::fs::write(d.join("it.cif"), cif("_space_group.IT_number 19")).unwrap();
    std::fs::write(d.join("hm.cif"), cif("_symmetry.space_group_name_H-M 'P 21 21 21'")).unwrap();
    let run = |model: &str, extra: &[&str]| {
        let flag = if model.ends_with(".cif") { "-cif" } else { "-pdb" };
        Command::new(exe)
            .current_dir(d)
            .args(["simulate", flag, model, "-detpixels", "16", "-distance", "20", "-floatfile", "f.bin", "-nonoise", "-nopgm", "-hklout", "out.hkl"])
            .args(extra)
            .output()
            .unwrap()
    };
    for (model, extra, needles) in [
        ("mono.pdb", &["-spacegroup", "96", "-dmin", "3"][..], &["-spacegroup", "'96'", "34.292 20.318 33.482 90 112 90"][..]),
        ("p61.pdb", &["-dmin", "3"], &["p61.pdb line 1", "P61", "8 9 10 90 90 90"]),
        ("negb.pdb", &["-dmin", "1"], &["negb.pdb line 3", "B-factor -999.9"]),
        ("negb.pdb", &["-dmin", "0.5"], &["negb.pdb line 3", "B-factor -999.9"]),
        ("mono.pdb", &["-dmin", "3", "-k_sol", "1e300"], &["-k_sol", "1e300"]),
        ("hall.cif", &["-dmin", "3"], &["hall.cif line 8", "Hall symbol '-P 2ac 2n'", "-spacegroup"]),
    ] {
        let out = run(model, extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(9), "{model} {extra:?}: {err}");
        assert!(err.trim_end().lines().count() == 1 && needles.iter().all(|n| err.contains(n)), "{model} {extra:?}: {err}");
        assert!(!d.join("out.hkl").exists() && !d.join("f.bin").exists(), "{model} {extra:?}");
    }
    // the Hall-only file with -spacegroup, the IT-number-only file and the H-M file: the same P 21 21 21 list
    let mut lists = Vec::new();
    for (model, extra) in [("hm.cif", &["-dmin", "3"][..]), ("it.cif", &["-dmin", "3"]), ("hall.cif", &["-dmin", "3", "-spacegroup", "19"])] {
        let out = run(model, extra);
        assert!(out.status.success(), "{model}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("4 symmetry operators of P212121"), "{model}");
        lists.push(std::fs::read_to_string(d.join("out.hkl")).unwrap());
    }
    assert!(lists[0] == lists[1] && lists[0] == lists[2]);
}

/// A model whose structure factors would not fit in memory is refused before anything is allocated,
/// naming the file and the estimate (a 400 Å cell to 3 Å with --max-memory 200M ran to 870 MB; a
/// 1000 Å cell aborted the process on the allocation).
#[test]
fn a_model_too_large_for_memory_is_refused_before_it_is_summed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("big.pdb"),
        "CRYST1  400.000  400.000  400.000  90.00  90.00  90.00 P 1           1\n\
ATOM      1  C   ALA A   1       1.000   2.000   3.000  1.00 10.00           C\n\
ATOM      2  N   ALA A   1       3.000   1.000   5.000  1.00 10.00           N\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nanobragg-rs"))
        .current_dir(d)
        .args(["simulate", "-pdb", "big.pdb", "-dmin", "3", "--max-memory", "200M", "-detpixels", "32", "-floatfile", "x.bin", "-nonoise", "-nopgm", "-intfile", "i.img"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert!(err.contains("big.pdb: its structure factors to") && err.contains("of memory, but 200.0 MiB is available: give a larger -dmin"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!d.join("x.bin").exists());
}
