//! Detectors from a DIALS experiment list (`--expt`), end to end through the binary: a one-panel list
//! gives the image of the same geometry typed as custom-vector flags; a panel split in two gives the
//! pixels of the whole; each panel of a multi-panel run is the image of that panel alone (`--panel N`)
//! and of its custom vectors; bad lists and outputs that hold one panel are refused with one line.
//! Every list is written here as JSON (no dxtbx needed).

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nanobragg-rs")).arg("simulate").args(args).current_dir(dir).output().unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run_in(dir, args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn refused(dir: &Path, args: &[&str], needle: &str) {
    let out = run_in(dir, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{args:?} should be refused: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{args:?}: {err:?} should mention {needle:?}");
}

fn floats(path: &Path) -> Vec<f32> {
    std::fs::read(path).unwrap().chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn assert_close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: sizes");
    let peak = a.iter().chain(b).fold(0f32, |m, v| m.max(v.abs())) as f64;
    assert!(peak > 0.0, "{what}: empty image");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let d = (*x as f64 - *y as f64).abs();
        assert!(d <= 1e-6 * peak, "{what}: pixel {i}: {x} vs {y} (peak {peak})");
    }
}

/// A panel as dxtbx writes it (local frame = global without a hierarchy).
fn panel(name: &str, fast: [f64; 3], slow: [f64; 3], origin: [f64; 3], size: [usize; 2]) -> Value {
    json!({"name": name, "type": "SENSOR_PAD", "fast_axis": fast, "slow_axis": slow, "origin": origin,
           "raw_image_offset": [0, 0], "image_size": size, "pixel_size": [0.1, 0.1], "trusted_range": [0.0, 1e6],
           "thickness": 0.0, "material": "Si", "mu": 0.0, "identifier": "", "mask": [], "gain": 1.0, "pedestal": 0.0,
           "px_mm_strategy": {"type": "SimplePxMmStrategy"}})
}

const S: [f64; 9] = [0.984807753, -0.173648178, 0.0, 0.173648178, 0.984807753, 0.0, 0.0, 0.0, 1.0]; // 10° about z
const F: [f64; 9] = [0.939692621, 0.0, 0.342020143, 0.0, 1.0, 0.0, -0.342020143, 0.0, 0.939692621]; // 20° about y
const A: [f64; 3] = [24.0, 5.0, -3.0];
const B: [f64; 3] = [-4.0, 26.0, 2.0];
const C: [f64; 3] = [3.0, -1.0, 29.0];

fn expt(panels: Vec<Value>, hierarchy: Option<Value>) -> Value {
    let mut det = json!({"panels": panels});
    if let Some(h) = hierarchy {
        det["hierarchy"] = h;
    }
    json!({"__id__": "ExperimentList",
        "experiment": [{"__id__": "Experiment", "identifier": "", "beam": 0, "detector": 0, "goniometer": 0, "scan": 0, "crystal": 0}],
        "imageset": [],
        "beam": [{"direction": [0.01, -0.02, 1.0], "wavelength": 1.1, "divergence": 0.0, "sigma_divergence": 0.0,
                  "polarization_normal": [0.0, 1.0, 0.0], "polarization_fraction": 0.9, "flux": 0.0, "transmission": 1.0}],
        "detector": [det],
        "goniometer": [{"rotation_axis": [1.0, 0.1, 0.0], "fixed_rotation": F, "setting_rotation": S}],
        "scan": [{"image_range": [1, 20], "batch_offset": 0, "oscillation": [5.0, 0.5]}],
        "crystal": [{"__id__": "crystal", "real_space_a": A, "real_space_b": B, "real_space_c": C, "space_group_hall_symbol": " P 1"}],
        "profile": [], "scaling_model": []})
}

fn write(dir: &Path, name: &str, v: &Value) -> String {
    std::fs::write(dir.join(name), serde_json::to_string_pretty(v).unwrap()).unwrap();
    name.to_string()
}

const RUN: &[&str] = &["-default_F", "100", "-N", "6", "-oversample", "1", "-nonoise", "-nopgm"];

fn unit(v: [f64; 3]) -> [f64; 3] {
    let n = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    v.map(|x| x / n)
}
fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}
fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn mv(m: &[f64; 9], v: [f64; 3]) -> [f64; 3] {
    [m[0] * v[0] + m[1] * v[1] + m[2] * v[2], m[3] * v[0] + m[4] * v[1] + m[5] * v[2], m[6] * v[0] + m[7] * v[1] + m[8] * v[2]]
}

/// The flags of a CUSTOM-convention run with the same beam, crystal, spindle, image 7 and panel
/// (fast, slow, origin in mm; pixels fast × slow).
fn flags_for(dir: &Path, fast: [f64; 3], slow: [f64; 3], origin: [f64; 3], size: [usize; 2]) -> Vec<String> {
    let beam = unit([-0.01, 0.02, -1.0]);
    let e = unit(cross([0.0, 1.0, 0.0], beam));
    let spindle = unit(mv(&S, unit([1.0, 0.1, 0.0])));
    let [a, b, c] = [A, B, C].map(|v| mv(&S, mv(&F, v)));
    let v = dot(a, cross(b, c));
    let stars = [cross(b, c), cross(c, a), cross(a, b)].map(|x| x.map(|y| y / v * 1.1));
    let mat: String = (0..3).map(|r| format!("{:.17e} {:.17e} {:.17e}\n", stars[0][r], stars[1][r], stars[2][r])).collect();
    std::fs::write(dir.join("A.mat"), mat).unwrap();
    let (f, s) = (unit(fast), unit(slow));
    let o = unit(cross(f, s));
    let close = dot(origin, o);
    let s3 = |v: [f64; 3]| v.iter().map(|x| format!("{x:.17e}")).collect::<Vec<_>>();
    let mut args: Vec<String> = vec!["-mat".into(), "A.mat".into(), "-lambda".into(), "1.1".into()];
    for (flag, vec) in [("-beam_vector", beam), ("-polar_vector", e), ("-spindle_axis", spindle), ("-fdet_vector", f), ("-sdet_vector", s), ("-odet_vector", o)] {
        args.push(flag.into());
        args.extend(s3(vec));
    }
    args.extend(
        [
            "-polar", "0.8", "-pivot", "sample", "-pixel", "0.1",
        ]
        .map(String::from),
    );
    args.extend([
        "-detpixels_f".into(),
        size[0].to_string(),
        "-detpixels_s".into(),
        size[1].to_string(),
        "-Xbeam".into(),
        format!("{:.17e}", -dot(origin, f)),
        "-Ybeam".into(),
        format!("{:.17e}", -dot(origin, s)),
        "-close_distance".into(),
        format!("{close:.17e}"),
        "-phi".into(),
        "8".into(),
        "-osc".into(),
        "0.5".into(),
        "--phi-midpoint".into(),
    ]);
    args
}

const TILTED_F: [f64; 3] = [0.9961946980917455, 0.0, -0.08715574274765817];
const TILTED_O: [f64; 3] = [-13.0, 6.3, -60.5];
const SECOND_F: [f64; 3] = [0.9925461516413221, 0.0, 0.1218693434051475];
const SECOND_O: [f64; 3] = [0.76, 6.3, -57.5];

#[test]
fn one_panel_list_equals_the_same_geometry_as_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let e = write(d, "one.expt", &expt(vec![panel("p", TILTED_F, [0.0, -1.0, 0.0], TILTED_O, [96, 80])], None));
    ok(d, &[&["--expt", &e, "--image", "7", "-floatfile", "expt.bin"], RUN].concat());
    let flags = flags_for(d, TILTED_F, [0.0, -1.0, 0.0], TILTED_O, [96, 80]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    ok(d, &[&flags[..], &["-floatfile", "flags.bin"], RUN].concat());
    assert_close(&floats(&d.join("expt.bin")), &floats(&d.join("flags.bin")), "--expt vs flags");
}

#[test]
fn a_panel_split_in_two_gives_the_pixels_of_the_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let s = [0.0, -1.0, 0.0];
    let whole = write(d, "whole.expt", &expt(vec![panel("p", TILTED_F, s, TILTED_O, [96, 80])], None));
    let lower = [TILTED_O[0], TILTED_O[1] - 4.0, TILTED_O[2]]; // 40 rows of 0.1 mm down the slow axis
    let split = write(d, "split.expt", &expt(vec![panel("a", TILTED_F, s, TILTED_O, [96, 40]), panel("b", TILTED_F, s, lower, [96, 40])], None));
    ok(d, &[&["--expt", &whole, "--image", "3", "-floatfile", "whole.bin"], RUN].concat());
    let out = ok(d, &[&["--expt", &split, "--image", "3", "-floatfile", "split.bin"], RUN].concat());
    assert!(out.contains("panel 1: max_I"), "per-panel statistics: {out}");
    assert!(out.contains("note: not writing intimage.img"), "{out}");
    assert_close(&floats(&d.join("whole.bin")), &floats(&d.join("split.bin")), "two halves vs whole");
}

/// A two-level hierarchy: each module a group (tilted, at its own distance) holding one panel.
fn hierarchical() -> Value {
    let root = |children: Vec<Value>| {
        let mut r = panel("", [1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 0.0], [0, 0]);
        r["children"] = json!(children);
        r
    };
    // root frame = lab; groups hold the global frames of SECOND/TILTED, panels sit 0.2/0.1/0.5 mm off
    let group = |f: [f64; 3], o: [f64; 3], i: usize| {
        // local frame in the root (f_root = x, s_root = −y, n_root = −z)
        let mut g = panel("", [f[0], -f[1], -f[2]], [0.0, 1.0, 0.0], [o[0], -o[1], -o[2]], [0, 0]);
        g["children"] = json!([{"panel": i}]);
        g
    };
    let mut p0 = panel("m0", [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.2, 0.1, 0.5], [64, 48]);
    let mut p1 = panel("m1", [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.3, 0.0], [64, 40]);
    p0["image_size"] = json!([64, 48]);
    p1["image_size"] = json!([64, 40]);
    expt(vec![p0, p1], Some(root(vec![group(TILTED_F, TILTED_O, 0), group(SECOND_F, SECOND_O, 1)])))
}

/// Global frame of a panel at local (x, y, z) with local axes (1,0,0), (0,1,0) in a group whose global
/// frame is (f, s = (0,−1,0), o).
fn global(f: [f64; 3], o: [f64; 3], local: [f64; 3]) -> ([f64; 3], [f64; 3], [f64; 3]) {
    let s = [0.0, -1.0, 0.0];
    let n = cross(f, s);
    let origin = [0, 1, 2].map(|i| o[i] + local[0] * f[i] + local[1] * s[i] + local[2] * n[i]);
    (f, s, origin)
}

#[test]
fn each_panel_of_a_multi_panel_run_is_that_panel_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let e = write(d, "h.expt", &hierarchical());
    ok(d, &[&["--expt", &e, "--image", "7", "-floatfile", "all.bin"], RUN].concat());
    let all = floats(&d.join("all.bin"));
    assert_eq!(all.len(), 64 * 48 + 64 * 40);
    let parts = [(0, 0..64 * 48, global(TILTED_F, TILTED_O, [0.2, 0.1, 0.5]), [64, 48]), (1, 64 * 48..all.len(), global(SECOND_F, SECOND_O, [0.0, 0.3, 0.0]), [64, 40])];
    for (i, range, (f, s, o), size) in parts {
        let name = format!("p{i}.bin");
        ok(d, &[&["--expt", &e, "--image", "7", "--panel", &i.to_string(), "-floatfile", &name, "-intfile", "p.img"], RUN].concat());
        assert_eq!(&all[range.clone()], &floats(&d.join(&name))[..], "panel {i} alone (bit for bit)");
        let flags = flags_for(d, f, s, o, size);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        ok(d, &[&flags[..], &["-floatfile", "f.bin"], RUN].concat());
        assert_close(&all[range], &floats(&d.join("f.bin")), &format!("panel {i} vs its custom vectors"));
    }
}

#[test]
fn each_panel_has_its_own_sensor() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let mut h = hierarchical();
    h["detector"][0]["panels"][1]["thickness"] = json!(0.45);
    h["detector"][0]["panels"][1]["mu"] = json!(3.9);
    let e = write(d, "thick.expt", &h);
    ok(d, &[&["--expt", &e, "-floatfile", "all.bin"], RUN].concat());
    let all = floats(&d.join("all.bin"));
    for (i, range) in [(0, 0..64 * 48), (1, 64 * 48..all.len())] {
        ok(d, &[&["--expt", &e, "--panel", &i.to_string(), "-floatfile", "p.bin"], RUN].concat());
        assert_eq!(&all[range], &floats(&d.join("p.bin"))[..], "panel {i} with its own sensor (bit for bit)");
    }
    let thin = write(d, "thin.expt", &hierarchical());
    ok(d, &[&["--expt", &thin, "-floatfile", "thin.bin"], RUN].concat());
    assert_ne!(floats(&d.join("thin.bin"))[64 * 48..], all[64 * 48..], "the 0.45 mm sensor changes panel 1");
    // a sensor flag after the list is every panel's
    ok(d, &[&["--expt", &e, "-detector_thick", "100", "-floatfile", "flag.bin"], RUN].concat());
    ok(d, &[&["--expt", &thin, "-detector_thick", "100", "-floatfile", "flag_thin.bin"], RUN].concat());
    assert_eq!(floats(&d.join("flag.bin")), floats(&d.join("flag_thin.bin")));
    // NeXus describes one sensor for every module
    refused(d, &[&["--expt", &e, "-nexusfile", "x.nxs"], RUN].concat(), "different sensors");
    // a 1e300 mm sensor (accepted before: the layers' offsets carried the pixels away)
    h["detector"][0]["panels"][1]["thickness"] = json!(1e300);
    let huge = write(d, "huge.expt", &h);
    refused(d, &[&["--expt", &huge, "-floatfile", "h.bin"], RUN].concat(), "thickness: 1e+300 mm is not a sensor's thickness");
}

#[test]
fn bad_lists_and_one_panel_outputs_are_refused_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let s = [0.0, -1.0, 0.0];
    let two_panels = || expt(vec![panel("a", TILTED_F, s, TILTED_O, [96, 40]), panel("b", SECOND_F, s, SECOND_O, [96, 40])], None);
    let good = write(d, "good.expt", &two_panels());

    let mut two = two_panels();
    let e0 = two["experiment"][0].clone();
    two["experiment"] = json!([e0.clone(), e0]);
    let two = write(d, "two.expt", &two);
    refused(d, &[&["--expt", &two], RUN].concat(), "--experiment");
    ok(d, &[&["--expt", &two, "--experiment", "1", "-floatfile", "x.bin"], RUN].concat());

    let mut sv = two_panels();
    sv["crystal"][0]["A_at_scan_points"] = json!([[1, 0, 0, 0, 1, 0, 0, 0, 1]]);
    let sv = write(d, "sv.expt", &sv);
    refused(d, &[&["--expt", &sv], RUN].concat(), "scan-varying");

    let mut rect = two_panels();
    rect["detector"][0]["panels"][1]["pixel_size"] = json!([0.1, 0.2]);
    let rect = write(d, "rect.expt", &rect);
    refused(d, &[&["--expt", &rect], RUN].concat(), "not square");

    let mut behind = two_panels();
    behind["detector"][0]["panels"][0]["origin"] = json!([-13.0, 6.3, 60.0]);
    let behind = write(d, "behind.expt", &behind);
    refused(d, &[&["--expt", &behind], RUN].concat(), "distance");

    // a panel too large for any machine: the file that sized it is named, not the flags
    let mut huge = two_panels();
    huge["detector"][0]["panels"][0]["image_size"] = json!([4000000, 4000000]);
    let huge = write(d, "huge.expt", &huge);
    refused(d, &[&["--expt", &huge, "--panel", "0"], RUN].concat(), "--expt huge.expt");

    let notjson = write(d, "bad.expt", &json!("not a list"));
    refused(d, &[&["--expt", &notjson], RUN].concat(), "bad.expt");

    for out in [&["-intfile", "x.img"][..], &["-noisefile", "n.img"], &["-pgmfile", "x.pgm"], &["--png", "x.png"], &["-cbffile", "x.cbf"]] {
        refused(d, &[&["--expt", &good], RUN, out].concat(), "--panel");
    }
    refused(d, &[&["--expt", &good, "--panel", "2"], RUN].concat(), "--panel");
    refused(d, &[&["--expt", &good, "--image", "21"], RUN].concat(), "--image");
    refused(d, &[&["--expt", &good, "-distance", "100"], RUN].concat(), "-distance");
    refused(d, &[&["--panel", "0"], RUN].concat(), "--expt");
    // a flag after --expt overrides it: -lambda changes the image
    ok(d, &[&["--expt", &good, "-floatfile", "l1.bin"], RUN].concat());
    ok(d, &[&["--expt", &good, "-lambda", "1.0", "-floatfile", "l2.bin"], RUN].concat());
    assert_ne!(floats(&d.join("l1.bin")), floats(&d.join("l2.bin")));
}

#[test]
fn hostile_values_in_a_list_are_refused_naming_the_file_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let s = [0.0, -1.0, 0.0];
    let list = || expt(vec![panel("a", TILTED_F, s, TILTED_O, [96, 40])], None);
    let cases: Vec<(&str, fn(&mut Value), &str)> = vec![
        ("range.expt", |v| v["scan"][0]["image_range"] = json!([i64::MIN, i64::MAX]), "range.expt: scan[0].image_range: [-9223372036854775808, 9223372036854775807] holds more images than can be counted"),
        ("osc.expt", |v| v["scan"][0] = json!({"image_range": [1, 3], "properties": {"oscillation": [0.0, "x", 1.0]}}), "osc.expt: scan[0].properties.oscillation[1]: \"x\" is not a finite number"),
        ("scaled.expt", |v| v["goniometer"][0]["fixed_rotation"] = json!([1e10, 0, 0, 0, 1e10, 0, 0, 0, 1e10]), "scaled.expt: goniometer[0].fixed_rotation: "),
        ("shear.expt", |v| v["goniometer"][0]["setting_rotation"] = json!([1, 0.5, 0, 0, 1, 0, 0, 0, 1]), "rows are not orthonormal"),
        ("mirror.expt", |v| v["goniometer"][0]["setting_rotation"] = json!([-1, 0, 0, 0, 1, 0, 0, 0, 1]), "mirror.expt: goniometer[0].setting_rotation: [-1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0] is a reflection"),
        ("axis.expt", |v| v["goniometer"][0]["rotation_axis"] = json!([1e200, 0, 0]), "axis.expt: goniometer[0].rotation_axis: [1e200, 0.0, 0.0] is no direction"),
        ("wl.expt", |v| v["beam"][0]["wavelength"] = json!(1e300), "wl.expt: beam[0].wavelength: 1e300 Å is not an X-ray wavelength"),
        ("dir.expt", |v| v["beam"][0]["direction"] = json!([0, 0, 1e308]), "dir.expt: beam[0].direction: [0.0, 0.0, 1e308] is no direction"),
    ];
    for (name, edit, needle) in cases {
        let mut v = list();
        edit(&mut v);
        let e = write(d, name, &v);
        refused(d, &[&["--expt", &e], RUN].concat(), needle);
        let out = Command::new(env!("CARGO_BIN_EXE_nanobragg-rs")).args([&["series", "--expt", &e][..], RUN].concat()).current_dir(d).output().unwrap();
        assert_eq!(out.status.code(), Some(9), "series --expt {name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // rotations typed to six digits are rotations
    let mut v = list();
    v["goniometer"][0]["fixed_rotation"] = json!([0.939693, 0.0, 0.34202, 0.0, 1.0, 0.0, -0.34202, 0.0, 0.939693]);
    let e = write(d, "six.expt", &v);
    ok(d, &[&["--expt", &e, "-floatfile", "six.bin"], RUN].concat());
}

#[test]
fn the_written_experiment_list_simulates_the_same_image() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let e = write(d, "h.expt", &hierarchical());
    ok(d, &[&["--expt", &e, "--image", "7", "-floatfile", "a.bin", "--expt-out", "sim.expt"], RUN].concat());
    let sim: Value = serde_json::from_str(&std::fs::read_to_string(d.join("sim.expt")).unwrap()).unwrap();
    assert_eq!(sim["detector"][0]["panels"].as_array().unwrap().len(), 2);
    assert_eq!(sim["scan"][0]["oscillation"], json!([8.0, 0.5]));
    ok(d, &[&["--expt", "sim.expt", "-floatfile", "b.bin"], RUN].concat());
    assert_close(&floats(&d.join("a.bin")), &floats(&d.join("b.bin")), "re-simulated from --expt-out");
}

const GEOM: &str = "; two tilted panels, CrystFEL style
photon_energy = 12398.419843320026 ; eV
res = 10000        ; 0.1 mm pixels
clen = 0.06
coffset = 0.001
adu_per_photon = 1
data = /entry/data/data

q0/min_fs = 0
q0/max_fs = 63
q0/min_ss = 0
q0/max_ss = 47
q0/fs = +0.996194698x +0.087155743z
q0/ss = +1.0y
q0/corner_x = -70.0
q0/corner_y = -30.0

q1/min_fs = 0
q1/max_fs = 63
q1/min_ss = 48
q1/max_ss = 87
q1/coffset = -0.002
q1/fs = +1.0x
q1/ss = -0.0y +1.0y
q1/corner_x = 5.0
q1/corner_y = -20.0

rigid_group_a = q0,q1
rigid_group_collection_all = a
";

/// A geometry file's panel along the beam (fs = z) has no distance to the beam spot: the log says inf
/// (it said 1.43815e+305, nanoBragg.c's close_distance/DBL_MIN, which detectors built from the C's
/// flags keep printing: tests/hostile.rs).
#[test]
fn an_edge_on_panel_logs_an_infinite_distance() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let geom = "photon_energy = 9500\nclen = 0.12\nres = 10000\np0/min_fs = 0\np0/max_fs = 15\np0/min_ss = 0\np0/max_ss = 15\n\
        p0/fs = z\np0/ss = y\np0/corner_x = -8\np0/corner_y = -8\n";
    std::fs::write(d.join("edge.geom"), geom).unwrap();
    let log = ok(d, &[&["--geom", "edge.geom", "-cell", "100", "100", "100", "90", "90", "90", "-floatfile", "e.bin"], RUN].concat());
    assert!(log.contains("  distance=inf detsize="), "{log}");
    assert!(floats(&d.join("e.bin")).iter().all(|v| v.is_finite()));
    // a panel facing the beam prints its distance as before
    std::fs::write(d.join("face.geom"), geom.replace("p0/fs = z", "p0/fs = x")).unwrap();
    let log = ok(d, &[&["--geom", "face.geom", "-cell", "100", "100", "100", "90", "90", "90", "-floatfile", "f.bin"], RUN].concat());
    assert!(log.contains("  distance=0.12 detsize="), "{log}");
    // the C's own flags edge-on to the beam print what nanoBragg.c prints (close_distance/DBL_MIN
    // with close_distance = DBL_MIN·distance: the distance itself)
    let flags = ["-odet_vector", "0", "1", "0", "-fdet_vector", "0", "0", "1", "-sdet_vector", "1", "0", "0", "-pivot", "sample", "-detpixels", "16"];
    let log = ok(d, &[&flags[..], &["-cell", "100", "100", "100", "90", "90", "90", "-lambda", "1", "-floatfile", "c.bin"], RUN].concat());
    assert!(log.contains("  distance=0.1 detsize="), "{log}");
}

#[test]
fn a_geom_file_and_the_equivalent_expt_give_the_same_image() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("d.geom"), GEOM).unwrap();
    // the same panels as a DIALS list: (x, y, z) CrystFEL → (−x, y, −z), mm
    let c = 0.996194698;
    let s = 0.087155743;
    let p0 = panel("q0", [-c, 0.0, -s], [0.0, 1.0, 0.0], [7.0, -3.0, -61.0], [64, 48]);
    let p1 = panel("q1", [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-0.5, -2.0, -58.0], [64, 40]);
    let mut e = expt(vec![p0, p1], None);
    e["beam"][0] = json!({"direction": [0.0, 0.0, 1.0], "wavelength": 1.0, "polarization_normal": [0.0, 1.0, 0.0], "polarization_fraction": 0.5});
    e["goniometer"][0] = json!({"rotation_axis": [1.0, 0.0, 0.0]});
    e["experiment"][0] = json!({"beam": 0, "detector": 0, "goniometer": 0});
    let e = write(d, "d.expt", &e);
    let xtal = ["-cell", "30", "32", "34", "90", "90", "90", "-misset", "10", "20", "30"];
    ok(d, &[&["--geom", "d.geom", "-floatfile", "g.bin"], &xtal[..], RUN].concat());
    ok(d, &[&["--expt", &e, "-floatfile", "e.bin"], &xtal[..], RUN].concat());
    let (g, x) = (floats(&d.join("g.bin")), floats(&d.join("e.bin")));
    assert_close(&g, &x, "--geom vs --expt");
    // --geom after --expt gives the detector; a bad region masks its pixels
    std::fs::write(d.join("bad.geom"), format!("{GEOM}\nbad_corner/min_x = -70\nbad_corner/max_x = -60\nbad_corner/min_y = -30\nbad_corner/max_y = -20\n")).unwrap();
    ok(d, &[&["--expt", &e, "--geom", "bad.geom", "-floatfile", "b.bin"], &xtal[..], RUN].concat());
    let b = floats(&d.join("b.bin"));
    // pixel centres x = −70 + (fs + ½)·0.996, y = −30 + ss + ½: fs, ss ≤ 9 lie in the region
    for ss in 0..48 {
        for fs in 0..64 {
            let (i, inside) = (ss * 64 + fs, fs <= 9 && ss <= 9);
            assert_eq!(b[i], if inside { 0.0 } else { g[i] }, "pixel {fs},{ss} of the panel with a bad region");
        }
    }
    assert_eq!(b[64 * 48..], g[64 * 48..], "the other panel is untouched");
    std::fs::write(d.join("clen.geom"), GEOM.replace("clen = 0.06", "clen = /LCLS/detector_1/EncoderValue")).unwrap();
    refused(d, &[&["--geom", "clen.geom"], &xtal[..], RUN].concat(), "clen");
    refused(d, &[&["--geom", "d.geom", "-intfile", "x.img"], &xtal[..], RUN].concat(), "--panel");
}

#[test]
fn hostile_geom_files_are_refused_with_one_line_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let xtal = ["-cell", "30", "32", "34", "90", "90", "90"];
    let geom = |name: &str, text: String| {
        std::fs::write(d.join(name), text).unwrap();
        name.to_string()
    };
    // a panel too large for any machine: refused before its mask or image is allocated
    let huge = geom("huge.geom", GEOM.replace("q0/max_fs = 63", "q0/max_fs = 2000000000").replace("q0/max_ss = 47", "q0/max_ss = 2000000000"));
    refused(d, &[&["--geom", &huge], &xtal[..], RUN].concat(), "huge.geom line 9: panel q0: 2000000001 x 2000000001 pixels");
    let big = geom("big.geom", GEOM.replace("q0/max_fs = 63", "q0/max_fs = 4000000000"));
    refused(d, &[&["--geom", &big], &xtal[..], RUN].concat(), "big.geom line 10: q0/max_fs = 4000000000: not a pixel index");
    let wide = geom("wide.geom", format!("{}bad_a/panel = q0\nbad_a/min_fs = 1\n", GEOM.replace("q0/max_fs = 63", "q0/max_fs = 999999").replace("q0/max_ss = 47", "q0/max_ss = 999999")));
    refused(d, &[&["--geom", &wide, "--panel", "0"], &xtal[..], RUN].concat(), "--geom wide.geom");
    // units CrystFEL does not take, and bad regions of no panel, are refused with their line
    let mm = geom("mm.geom", GEOM.replace("clen = 0.06", "clen = 60 mm"));
    refused(d, &[&["--geom", &mm], &xtal[..], RUN].concat(), "mm.geom line 4: q0/clen = 60 mm");
    let unknown = geom("unknown.geom", format!("{GEOM}bad_x/panel = qZ\nbad_x/min_fs = 0\n"));
    refused(d, &[&["--geom", &unknown], &xtal[..], RUN].concat(), "unknown.geom line 30: bad_x/panel = qZ: no such panel");
    let far = geom("far.geom", GEOM.replace("photon_energy = 12398.419843320026", "photon_energy = 1e300"));
    refused(d, &[&["--geom", &far], &xtal[..], RUN].concat(), "far.geom line 2: photon_energy = 1e300");
    let g = geom("g.geom", GEOM.to_string());
    refused(d, &[&["--geom", &g, "-distance", "100"], &xtal[..], RUN].concat(), "which this flag cannot change: leave it out");
    // given before it, replaced by the file's: said
    let out = run_in(d, &[&["-distance", "100", "-Xbeam", "3", "--geom", &g, "-floatfile", "before.bin"], &xtal[..], RUN].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("-Xbeam, -distance given before --geom: replaced by the file's detector and beam"), "{err}");
    // photon_energy in keV and a byte-order mark give the image of the plain file
    ok(d, &[&["--geom", &g, "-floatfile", "ev.bin"], &xtal[..], RUN].concat());
    let kev = geom("kev.geom", format!("\u{feff}{}", GEOM.replace("photon_energy = 12398.419843320026 ; eV", "photon_energy = 12.398419843320026 keV")));
    ok(d, &[&["--geom", &kev, "-floatfile", "kev.bin"], &xtal[..], RUN].concat());
    assert_close(&floats(&d.join("ev.bin")), &floats(&d.join("kev.bin")), "photon_energy in keV");
}

#[test]
fn series_renders_every_image_of_the_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let e = write(d, "h.expt", &hierarchical());
    let out = Command::new(env!("CARGO_BIN_EXE_nanobragg-rs"))
        .args([&["series", "--expt", &e, "--image", "18", "--outputs", "float"][..], RUN].concat())
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for k in 1..=3 {
        let image = (17 + k).to_string();
        ok(d, &[&["--expt", &e, "--image", &image, "-floatfile", "one.bin"], RUN].concat());
        assert_eq!(floats(&d.join(format!("floatimage_{k:05}.bin"))), floats(&d.join("one.bin")), "frame {k} = image {image}");
    }
    assert!(!d.join("floatimage_00004.bin").exists(), "images 18 to 20: three frames");
}

#[test]
fn series_of_several_panels_leaves_out_or_refuses_one_panel_files_before_any_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let series = |dir: &Path, args: &[&str]| Command::new(env!("CARGO_BIN_EXE_nanobragg-rs")).arg("series").args(args).current_dir(dir).output().unwrap();
    let e = write(d, "h.expt", &hierarchical());
    let out = series(d, &[&["--expt", &e, "--image", "19"][..], RUN].concat());
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{log}");
    assert!(log.contains("not writing intimage.img (int)"), "the default SMV is left out with a note: {log}");
    assert!(d.join("floatimage_00001.bin").exists() && !d.join("intimage_00001.img").exists());
    for extra in [&["-intfile", "x_#####.img"][..], &["--outputs", "float,cbf"][..]] {
        let t = tempfile::tempdir().unwrap();
        let e = write(t.path(), "h.expt", &hierarchical());
        let out = series(t.path(), &[&["--expt", &e][..], extra, RUN].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(9), "{extra:?}: {err}");
        assert!(err.contains("holds one panel"), "{extra:?}: {err}");
        let left: Vec<_> = std::fs::read_dir(t.path()).unwrap().map(|f| f.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("h.expt")], "{extra:?}: nothing written");
    }
}

#[test]
fn the_dials_origin_of_an_experiment_list_is_its_first_panels_origin() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let e = write(d, "o.expt", &expt(vec![panel("a", [1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [-4.5, 8.25, -60.0], [40, 30])], None));
    let out = ok(d, &[&["--expt", &e, "-floatfile", "o.bin"][..], RUN].concat());
    assert!(out.contains("  dials origin= -4.5 8.25 -60\n"), "{out}");
}

/// A multi-axis goniometer as dxtbx writes it (axes from the sample out, their angles, the scanning
/// one; no rotation_axis) renders as the same goniometer written as one axis with F and S (it was
/// refused): here 20° about y inside the scan axis and 10° about z outside it.
#[test]
fn a_multi_axis_goniometer_renders_as_its_single_axis_form() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let one = expt(vec![panel("p", TILTED_F, [0.0, -1.0, 0.0], TILTED_O, [96, 80])], None);
    let mut multi = one.clone();
    multi["goniometer"][0] = json!({"axes": [[0.0, 1.0, 0.0], [1.0, 0.1, 0.0], [0.0, 0.0, 1.0]], "angles": [20.0, 0.0, 10.0],
                                    "names": ["PHI", "OMEGA", "TWO"], "scan_axis": 1});
    let one = write(d, "one.expt", &one);
    let multi = write(d, "multi.expt", &multi);
    ok(d, &[&["--expt", &one, "-floatfile", "one.bin"], RUN].concat());
    ok(d, &[&["--expt", &multi, "-floatfile", "multi.bin"], RUN].concat());
    assert_close(&floats(&d.join("multi.bin")), &floats(&d.join("one.bin")), "multi-axis vs single-axis goniometer");
}
