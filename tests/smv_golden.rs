//! Golden checks of the image writers and the SMV reader against the C program's own files.
//!
//! For every golden case that kept an `int.img` or `image.pgm`, the case's `float.bin` is pushed
//! through `int_pixels` / `pgm_pixels` with the case's scale, ADC offset and ROI, and must give the
//! C's pixels exactly; the headers written from the golden header's own values must reproduce the
//! C's files byte for byte.

use nanobragg::base::image::{ImageView, Roi};
use nanobragg::base::c::printf::cf;
use nanobragg::io::pgm::{pgm_header, pgm_pixels, write_pgm};
use nanobragg::io::smv::{header_value, int_pixels, read_smv, smv_header_bytes, write_smv, SmvHeader};
use nanobragg::io::text::read_text_file;
use std::path::{Path, PathBuf};

/// The golden folder, or None (after saying why) when it is absent outside CI.
fn golden_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("NANOBRAGG_GOLDEN")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/golden"));
    if dir.join("manifest.json").is_file() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_some() {
        panic!("golden data not found at {} (set NANOBRAGG_GOLDEN)", dir.display());
    }
    eprintln!("skipping: golden data not found at {} (set NANOBRAGG_GOLDEN)", dir.display());
    None
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// The `n` words after the exact token `flag` (last occurrence wins, as in the C).
fn arg<'a>(args: &'a [&'a str], flag: &str, n: usize) -> Option<&'a [&'a str]> {
    let i = args.iter().rposition(|a| *a == flag)?;
    args.get(i + 1..i + 1 + n)
}

fn argf(args: &[&str], flag: &str) -> Option<f64> {
    arg(args, flag, 1).map(|v| v[0].parse().unwrap())
}

/// `%g` text of `x` read back: how the manifest's 6-digit stats compare with exact values.
fn g6(x: f64) -> f64 {
    cf("%g", x).parse().unwrap()
}

/// A header value by its exact key (`\nKEY`), via the C-style `header_value`.
fn hv(header: &str, key: &str) -> f64 {
    header_value(header, &format!("\n{key}")).unwrap_or_else(|| panic!("no {key}"))
}

/// The golden header's own numbers, as an `SmvHeader`.
fn parse_header(h: &str) -> SmvHeader {
    let line = h.lines().find(|l| l.starts_with("DIALS_ORIGIN=")).expect("DIALS_ORIGIN");
    let d: Vec<f64> = line["DIALS_ORIGIN=".len()..].split(',').map(|v| v.trim().parse().unwrap()).collect();
    assert_eq!(d[0], hv(h, "DIALS_ORIGIN"));
    SmvHeader {
        size1: hv(h, "SIZE1") as usize,
        size2: hv(h, "SIZE2") as usize,
        pixel_size: hv(h, "PIXEL_SIZE"),
        distance: hv(h, "DISTANCE"),
        wavelength: hv(h, "WAVELENGTH"),
        beam_center_x: hv(h, "BEAM_CENTER_X"),
        beam_center_y: hv(h, "BEAM_CENTER_Y"),
        adxv_center_x: hv(h, "ADXV_CENTER_X"),
        adxv_center_y: hv(h, "ADXV_CENTER_Y"),
        mosflm_center_x: hv(h, "MOSFLM_CENTER_X"),
        mosflm_center_y: hv(h, "MOSFLM_CENTER_Y"),
        denzo_x_beam: hv(h, "DENZO_X_BEAM"),
        denzo_y_beam: hv(h, "DENZO_Y_BEAM"),
        dials_origin: [d[0], d[1], d[2]],
        xds_orgx: hv(h, "XDS_ORGX"),
        xds_orgy: hv(h, "XDS_ORGY"),
        close_distance: hv(h, "CLOSE_DISTANCE"),
        phi: hv(h, "PHI"),
        osc_start: hv(h, "OSC_START"),
        osc_range: hv(h, "OSC_RANGE"),
        twotheta: hv(h, "TWOTHETA"),
        adc_offset: None, // the C writes no ADC_OFFSET key
    }
}

const KEYS: &[&str] = &[
    "HEADER_BYTES", "DIM", "SIZE1", "SIZE2", "PIXEL_SIZE", "DISTANCE", "WAVELENGTH", "BEAM_CENTER_X",
    "BEAM_CENTER_Y", "ADXV_CENTER_X", "ADXV_CENTER_Y", "MOSFLM_CENTER_X", "MOSFLM_CENTER_Y", "DENZO_X_BEAM",
    "DENZO_Y_BEAM", "DIALS_ORIGIN", "XDS_ORGX", "XDS_ORGY", "CLOSE_DISTANCE", "PHI", "OSC_START", "OSC_RANGE",
    "TWOTHETA", "DETECTOR_SN",
];

#[test]
fn golden_int_and_pgm_images() {
    let Some(dir) = golden_dir() else { return };
    let m = manifest(&dir);
    let tmp = tempfile::tempdir().unwrap();
    let (mut n_int, mut n_pgm) = (0, 0);
    for case in m["cases"].as_array().unwrap() {
        let id = case["id"].as_str().unwrap();
        let outputs = &case["outputs"];
        let (has_int, has_pgm) = (outputs.get("int").is_some(), outputs.get("pgm").is_some());
        if !has_int && !has_pgm {
            continue;
        }
        let cdir = dir.join("cases").join(id);
        let args: Vec<&str> = case["args"].as_str().unwrap().split_whitespace().collect();
        let det = case["detector"].as_array().unwrap();
        let (fp, sp) = (det[0].as_u64().unwrap() as usize, det[1].as_u64().unwrap() as usize);
        let float = read_f32(&cdir.join("float.bin"));
        assert_eq!(float.len(), fp * sp, "{id}");
        let stats = &case["stats"];

        // the C's defaults: -scale 55000/max_I, -adc 40, ROI one past the end
        let max_i = float.iter().fold(0.0f64, |m, &v| m.max(v as f64));
        let scale = argf(&args, "-scale").filter(|&s| s > 0.0).unwrap_or(if max_i > 0.0 { 55000.0 / max_i } else { 1.0 });
        if let Some(s) = stats.get("intfile_scale").and_then(|v| v.as_f64()) {
            assert_eq!(g6(scale), s, "{id}: intfile_scale");
        }
        let adc = argf(&args, "-adc").unwrap_or(40.0);
        let roi = arg(&args, "-roi", 4)
            .map(|v| [0, 1, 2, 3].map(|i| v[i].parse::<i64>().unwrap()))
            .unwrap_or([0, fp as i64, 0, sp as i64]);

        if has_int {
            n_int += 1;
            let path = cdir.join(outputs["int"].as_str().unwrap());
            let golden = std::fs::read(&path).unwrap();
            assert_eq!(golden.len(), 512 + 2 * fp * sp, "{id}: C header stayed within 512 bytes");
            let r = read_smv(&path).unwrap();
            assert_eq!((r.width, r.height), (fp, sp), "{id}");
            let ours = int_pixels(&ImageView::new(&float, fp, sp, Roi::from_c_bounds(roi, fp, sp)), scale, adc);
            let bad = ours.iter().zip(&r.data).filter(|(a, b)| a != b).count();
            assert_eq!(bad, 0, "{id}: {bad} int pixels differ");

            // header: parse the C's, rewrite it, expect the same bytes and the same numbers
            let h = parse_header(&r.header);
            assert_eq!((h.size1, h.size2), (fp, sp));
            assert_eq!(smv_header_bytes(&h).unwrap(), &golden[..512], "{id}: header bytes");
            let out = tmp.path().join(format!("{id}.img"));
            write_smv(&out, &h, &ours).unwrap();
            assert!(std::fs::read(&out).unwrap() == golden, "{id}: whole int.img differs");
            let back = read_smv(&out).unwrap();
            for key in KEYS {
                let (a, b) = (header_value(&back.header, key), header_value(&r.header, key));
                assert!(a == b && a.is_some_and(f64::is_finite), "{id}: {key} {a:?} vs {b:?}");
            }
        }

        if has_pgm {
            let path = cdir.join(outputs["pgm"].as_str().unwrap());
            let golden = std::fs::read(&path).unwrap();
            let pgm_scale = match argf(&args, "-pgmscale").filter(|&s| s > 0.0) {
                Some(s) => s,
                None if arg(&args, "-roi", 4).is_none() && arg(&args, "-mask", 1).is_none() => {
                    // the C's rmsd: mean over rendered pixels (all of them here), then over the ROI
                    let sum: f64 = float.iter().map(|&v| v as f64).sum();
                    let avg = sum / float.len() as f64;
                    let ss: f64 = float.iter().map(|&v| (v as f64 - avg).powi(2)).sum();
                    let rmsd = (ss / (float.len().max(2) - 1) as f64).sqrt();
                    assert_eq!(g6(rmsd), stats["rmsd"].as_f64().unwrap(), "{id}: rmsd");
                    if rmsd > 0.0 { 250.0 / (5.0 * rmsd) } else { scale }
                }
                None => {
                    eprintln!("{id}: default pgm scale needs the C's mask/ROI statistics; PGM check skipped");
                    continue;
                }
            };
            n_pgm += 1;
            if let Some(s) = stats.get("pgm_scale").and_then(|v| v.as_f64()) {
                assert_eq!(g6(pgm_scale), s, "{id}: pgm_scale");
            }
            let head = pgm_header(fp, sp, pgm_scale);
            assert_eq!(&golden[..head.len()], head.as_bytes(), "{id}: PGM header");
            let ours = pgm_pixels(&ImageView::new(&float, fp, sp, Roi::from_c_bounds(roi, fp, sp)), pgm_scale);
            let bad = ours.iter().zip(&golden[head.len()..]).filter(|(a, b)| a != b).count();
            assert_eq!(bad, 0, "{id}: {bad} PGM pixels differ");
            let out = tmp.path().join(format!("{id}.pgm"));
            write_pgm(&out, fp, sp, pgm_scale, &ours).unwrap();
            assert!(std::fs::read(&out).unwrap() == golden, "{id}: whole PGM differs");
        }
    }
    eprintln!("checked {n_int} int images and {n_pgm} PGM images");
    assert!(n_int >= 10 && n_pgm >= 2, "expected more golden images ({n_int} int, {n_pgm} pgm)");
}

#[test]
fn golden_smv_inputs() {
    let Some(dir) = golden_dir() else { return };
    let inputs = dir.join("inputs");

    let mask = read_smv(&inputs.join("mask.img")).unwrap();
    assert_eq!((mask.width, mask.height), (128, 128));
    assert_eq!(mask.data.len(), 128 * 128);
    // 0/1 mask: 3-pixel border, column 20, row 91 masked; (3,3) and (50,50) open
    let at = |f: usize, s: usize| mask.data[s * 128 + f];
    assert_eq!((at(0, 0), at(2, 2), at(20, 50), at(50, 91)), (0, 0, 0, 0));
    assert_eq!((at(3, 3), at(50, 50)), (1, 1));
    assert_eq!(mask.data.iter().filter(|&&v| v == 0).count(), 2336);
    assert_eq!(header_value(&mask.header, "DISTANCE"), Some(90.0));
    assert_eq!(header_value(&mask.header, "BEAM_CENTER_Y"), Some(7.0));
    for key in ["PIXEL_SIZE", "DISTANCE", "WAVELENGTH", "BEAM_CENTER_X", "BEAM_CENTER_Y"] {
        assert!(header_value(&mask.header, key).is_some_and(f64::is_finite), "mask {key}");
    }

    let img = read_smv(&inputs.join("header.img")).unwrap();
    assert_eq!((img.width, img.height), (96, 64));
    // the C's ValueOf quirks: DISTANCE finds CLOSE_DISTANCE, ORGX finds XDS_ORGX
    assert_eq!(header_value(&img.header, "DISTANCE"), Some(110.0));
    assert_eq!(header_value(&img.header, "\nDISTANCE"), Some(120.0));
    assert_eq!(header_value(&img.header, "ORGX"), header_value(&img.header, "XDS_ORGX"));
    assert_eq!(header_value(&img.header, "PHI"), Some(5.0));
    assert_eq!(header_value(&img.header, "OSC_RANGE"), Some(0.4));
    assert_eq!(header_value(&img.header, "TWOTHETA"), Some(10.0));
    assert_eq!(header_value(&img.header, "NO_SUCH_KEY"), None);

    // a non-SMV input is a one-line error naming the file
    let e = read_smv(&inputs.join("test.stol")).unwrap_err().to_string();
    assert!(e.contains("test.stol") && e.contains("does not look like an SMV"), "{e}");
}

#[test]
fn golden_text_inputs() {
    let Some(dir) = golden_dir() else { return };
    let inputs = dir.join("inputs");
    let nan = f64::NAN;
    let same = |a: &[f64], b: &[f64]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()));

    // values as the C's read_text_file gives them (blank line skipped, short lines NaN-filled)
    let s = read_text_file(&inputs.join("sources.txt"), 5).unwrap();
    assert!(same(&s[0], &[-10.0; 6]));
    assert!(same(&s[1], &[0.0, 0.02, 0.0, -0.015, 0.01, -0.02]));
    assert!(same(&s[2], &[0.0, 0.0, 0.02, -0.015, -0.01, 0.005]));
    assert!(same(&s[3], &[1.0, 1.0, 0.5, 2.0, nan, nan]));
    assert!(same(&s[4], &[1e-10, 1e-10, 1.02e-10, 0.98e-10, nan, nan]));

    let t = read_text_file(&inputs.join("test.stol"), 2).unwrap();
    assert!(same(&t[0], &[0.0, 0.1, 0.2, 0.3, 0.5]));
    assert!(same(&t[1], &[2.57, 2.4, 1.8, 1.2, 0.6]));

    assert!(read_text_file(&inputs.join("no_such_file.txt"), 2).is_err());
}
