//! The setup stage (geometry, conventions, pivots, rotations, cell and reciprocal vectors, misset,
//! sources, step counts) checked number by number against what the C printed for each golden case.
//! These run in-process on `simulate::setup`, independent of the stdout formatting.

mod common;

use common::*;
use nanobragg::run::simulate;
use std::path::Path;

/// The numbers after `prefix` on the first stdout line that starts with it.
fn numbers_after(stdout: &str, prefix: &str) -> Option<Vec<f64>> {
    let line = stdout.lines().find(|l| l.starts_with(prefix))?;
    Some(
        line[prefix.len()..]
            .split(|c: char| c.is_whitespace() || c == '=' || c == ',')
            .filter_map(|t| t.parse::<f64>().ok())
            .collect(),
    )
}

/// %g keeps 6 significant digits: agree to that, with an absolute floor for printed zeros.
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 6e-6 * want.abs().max(got.abs()) + 1e-12
}

#[test]
fn setup_matches_the_numbers_the_c_printed() {
    let Some(golden) = golden_dir() else { return };
    let manifest = load_manifest(&golden);
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases(&manifest) {
        if case["exit_code"].as_i64() != Some(0) {
            continue;
        }
        let id = case_id(case);
        let stdout = std::fs::read_to_string(output_path(&golden, case, "stdout")).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let cfg = case_config(&golden, case, tmp.path());
        let (exp, _) = simulate::setup(&cfg).unwrap();
        let d = &exp.det;
        let panel = d.panel();
        let mut check = |what: &str, got: &[f64], prefix: &str| check_line(&mut failures, id, &stdout, what, got, prefix);
        // detector basis after rotations and two-theta
        check("fdet", &panel.fdet_vector, "  DIRECTION_OF_DETECTOR_X-AXIS=");
        check("sdet", &panel.sdet_vector, "  DIRECTION_OF_DETECTOR_Y-AXIS=");
        check("odet", &panel.odet_vector, "  DIRECTION_OF_DETECTOR_Z-AXIS=");
        check("beam", &exp.beam.beam_vector, "  INCIDENT_BEAM_DIRECTION=");
        check("spindle", &exp.scan.spindle_vector, "  spindle ROTATION_AXIS=");
        // pix0 through the DIALS origin, beam centres in each convention
        check("dials origin (pix0)", &d.centre.dials_origin, "  dials origin=");
        check("Fbeam/Sbeam", &[d.centre.fbeam, d.centre.sbeam], "  Fbeam=");
        check("Fclose/Sclose", &[d.centre.fclose, d.centre.sclose], "  Fclose=");
        check("Xbeam/Ybeam", &[d.centre.xbeam, d.centre.ybeam], "  Xbeam=");
        check("distance", &[panel.distance], "  distance=");
        // cell and orientation: real-space vectors (Angstrom) and reciprocal vectors (1/Angstrom)
        let l = &exp.crystal.lattice;
        let a = l.a0.map(|x| x * 1e10);
        let b = l.b0.map(|x| x * 1e10);
        let c = l.c0.map(|x| x * 1e10);
        let rows = stdout.lines().skip_while(|s| !s.starts_with("real-space cell vectors")).skip(2).take(3).collect::<Vec<_>>();
        for (i, row) in rows.iter().enumerate() {
            let want: Vec<f64> = row[2..].split_whitespace().filter_map(|t| t.parse().ok()).collect();
            for (g, w) in [a[i], b[i], c[i]].iter().zip(&want) {
                if (g - w).abs() > 1.5e-8 {
                    failures.push(format!("{id}: real-space row {i}: port {:?}, C {want:?}", [a[i], b[i], c[i]]));
                    break;
                }
            }
        }
        check_line(&mut failures, id, &stdout, "volume", &[l.v_cell], "volume = ");
        // "  parallelpiped xtal: 5x5x5 cells" (or ellipsoidal/gaussian/tophat-spot)
        let cells: Vec<f64> = stdout
            .lines()
            .find(|s| s.contains(" xtal: "))
            .and_then(|s| s.split(" xtal: ").nth(1))
            .map(|s| s.trim_end_matches(" cells").split('x').filter_map(|t| t.parse().ok()).collect())
            .unwrap_or_default();
        if cells != [exp.crystal.na, exp.crystal.nb, exp.crystal.nc] {
            failures.push(format!("{id}: cells port {:?}, C {cells:?}", [exp.crystal.na, exp.crystal.nb, exp.crystal.nc]));
        }
        let count = |suffix: &str| {
            stdout
                .lines()
                .find(|s| s.starts_with("  created a total of ") && s.ends_with(suffix))
                .and_then(|s| s.split_whitespace().nth(4))
                .and_then(|t| t.parse::<usize>().ok())
        };
        if count("sources:") != Some(exp.beam.sources.len()) || count("mosaic domains") != Some(exp.domains()) {
            failures.push(format!("{id}: sources/domains port {}/{}, C {:?}/{:?}", exp.beam.sources.len(), exp.domains(), count("sources:"), count("mosaic domains")));
        }
        checked += 1;
    }
    assert!(checked >= 50, "only {checked} cases checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn check_line(failures: &mut Vec<String>, id: &str, stdout: &str, what: &str, got: &[f64], prefix: &str) {
    match numbers_after(stdout, prefix) {
        Some(want) if want.len() >= got.len() => {
            if got.iter().zip(&want).any(|(g, w)| !close(*g, *w)) {
                failures.push(format!("{id}: {what}: port {got:?}, C {want:?}"));
            }
        }
        _ => failures.push(format!("{id}: C stdout has no '{prefix}' line")),
    }
}

#[test]
fn numbers_after_reads_printed_values() {
    let s = "  Fbeam=0.006 Sbeam=2.1261e-05\n  dials origin= 95.1315 0.0212318 -6\n";
    assert_eq!(numbers_after(s, "  Fbeam="), Some(vec![0.006, 2.1261e-05]));
    assert_eq!(numbers_after(s, "  dials origin="), Some(vec![95.1315, 0.0212318, -6.0]));
    assert!(Path::new(env!("CARGO_MANIFEST_DIR")).is_dir());
}

/// The pure steps, one by one: `Inputs::load` reads the files, `Experiment::build` resolves the
/// experiment, `summary::setup_summary` prints the C's setup messages. For every golden case those
/// lines are the C's stdout up to its pixel loop, line for line (the "reading", cache and warning
/// lines in the C's places among the summary).
#[test]
fn setup_summary_is_the_c_stdout_before_the_pixel_loop() {
    use nanobragg::run::summary::setup_summary;
    let Some(golden) = golden_dir() else { return };
    let manifest = load_manifest(&golden);
    let inputs_dir = golden.join("inputs");
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases(&manifest) {
        if case["exit_code"].as_i64() != Some(0) {
            continue;
        }
        let id = case_id(case);
        let stdout = std::fs::read_to_string(output_path(&golden, case, "stdout")).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let abs = inputs_dir.to_str().unwrap();
        let cfg = case_config(&golden, case, tmp.path());
        let inputs = nanobragg::run::load::load_inputs(&cfg).unwrap();
        let exp = nanobragg::run::setup::build_experiment(&cfg, &inputs).unwrap();
        // our paths are absolute here; the C ran in the case folder
        let out_prefix = format!("{}/", tmp.path().display());
        let got: Vec<String> = setup_summary(&cfg, &inputs, &exp).iter().map(|l| l.replace(abs, "../../inputs").replace(&out_prefix, "")).collect();
        let want: Vec<&str> = stdout.lines().filter(|l| !l.starts_with("mmap(")).collect();
        if let Some(i) = (0..got.len()).find(|&i| want.get(i) != Some(&got[i].as_str())) {
            failures.push(format!("{id}: line {}: C {:?}, summary {:?}", i + 1, want.get(i), got[i]));
        }
        checked += 1;
    }
    assert!(checked >= 50, "only {checked} cases checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
