//! The typed library API gives the same experiment and image as the command line: parameters set with
//! the setters in crystallographers' units equal the flags' parse, and an in-memory reflection list
//! renders exactly as the same list read from an `-hkl` file.
use nanobragg::cli::parse::parse_simulate_args;
use nanobragg::{experiment::inputs::Inputs, run::simulate, experiment::structure_factors::HklGrid, run::config::Config};

fn typed() -> Config {
    let mut cfg = Config::default();
    cfg.params
        .cell_deg(50.0, 60.0, 70.0, 90.0, 95.0, 90.0)
        .misset_deg(10.0, 20.0, 30.0)
        .n_cells(5)
        .lambda_angstrom(1.2)
        .distance_mm(80.0)
        .pixel_mm(0.1)
        .detpixels(96, 80)
        .beam_center_mm(4.0, 5.0)
        .mosaic_deg(0.5)
        .default_f(3.0);
    cfg.params.mosaic_domains = Some(3);
    cfg
}

const FLAGS: &str = "-cell 50 60 70 90 95 90 -misset 10 20 30 -N 5 -lambda 1.2 -distance 80 -pixel 0.1 -detpixels_f 96 -detpixels_s 80 -Xbeam 4 -Ybeam 5 -mosaic 0.5 -mosaic_domains 3 -default_F 3";

fn reflections() -> Vec<(i32, i32, i32, f64)> {
    (-2..=2).flat_map(|h| (-2..=2).flat_map(move |k| (-1..=1).map(move |l| (h, k, l, 100.0 + (h * 9 + k * 3 + l) as f64)))).collect()
}

#[test]
fn setters_equal_the_flags() {
    let args: Vec<String> = FLAGS.split_whitespace().map(String::from).collect();
    let parsed = parse_simulate_args(&args).unwrap();
    assert_eq!(parsed.params, typed().params);
}

#[test]
fn in_memory_reflections_render_as_the_hkl_file() {
    let dir = tempfile::tempdir().unwrap();
    let hkl = dir.path().join("list.hkl");
    let text: String = reflections().iter().map(|(h, k, l, f)| format!("{h} {k} {l} {f}\n")).collect();
    std::fs::write(&hkl, text).unwrap();
    let mut args: Vec<String> = FLAGS.split_whitespace().map(String::from).collect();
    args.extend(["-hkl".to_string(), hkl.display().to_string()]);
    let from_file = parse_simulate_args(&args).unwrap();
    let (exp_file, _) = simulate::setup(&from_file).unwrap();

    let grid = HklGrid::from_entries(&reflections(), 3.0).unwrap();
    let exp_mem = nanobragg::run::setup::build_experiment(&typed(), &Inputs::with_fhkl(grid)).unwrap();
    let a = simulate::render(&exp_file, &Default::default(), Some(2), &|_| {}).unwrap().float;
    let b = simulate::render(&exp_mem, &Default::default(), Some(2), &|_| {}).unwrap().float;
    assert!(a.iter().any(|&v| v > 0.0));
    assert_eq!(a.len(), b.len());
    assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "in-memory list renders differently from the -hkl file");
}

#[test]
fn json_round_trip_is_exact() {
    let cfg = typed();
    let back = Config::from_json(&cfg.to_json()).unwrap();
    assert_eq!(back.params, cfg.params);
    assert_eq!(back.output, cfg.output);
}

/// `Experiment::build` reads no file: with the input files deleted after `Inputs::load`, it builds the
/// same experiment and the same setup messages as `simulate::setup` did with the files present.
#[test]
fn build_does_no_file_io() {
    use nanobragg::run::summary::setup_summary;
    let dir = tempfile::tempdir().unwrap();
    let (hkl, mat, src) = (dir.path().join("list.hkl"), dir.path().join("A.mat"), dir.path().join("sources.txt"));
    std::fs::write(&hkl, reflections().iter().map(|(h, k, l, f)| format!("{h} {k} {l} {f}\n")).collect::<String>()).unwrap();
    // MOSFLM A matrix (reciprocal vectors times lambda = 1.2 A) of a 50 x 60 x 70 A orthorhombic cell
    std::fs::write(&mat, format!("{} 0 0\n0 {} 0\n0 0 {}\n", 1.2 / 50.0, 1.2 / 60.0, 1.2 / 70.0)).unwrap();
    std::fs::write(&src, "-10 0 0 1 1.2e-10\n-10 0.02 0 0.5 1.21e-10\n").unwrap();
    let mut cfg = typed();
    cfg.params.cell = None;
    cfg.params.hkl_file = Some(hkl);
    cfg.params.mat_file = Some(mat);
    cfg.params.source_file = Some(src);
    cfg.output.out_dir = Some(dir.path().join("out"));
    cfg.params.misset_seed = Some(7);
    cfg.params.seed = Some(11);

    let (want, want_log) = simulate::setup(&cfg).unwrap();
    let inputs = nanobragg::run::load::load_inputs(&cfg).unwrap();
    drop(dir); // every input file is gone now
    assert!(nanobragg::run::load::load_inputs(&cfg).is_err(), "the loader reads the files");
    let got = nanobragg::run::setup::build_experiment(&cfg, &inputs).unwrap();
    assert_eq!(setup_summary(&cfg, &inputs, &got), want_log.lines);
    assert_eq!(got.beam.sources, want.beam.sources);
    assert_eq!(got.beam.sources.len(), 2);
    assert_eq!((got.crystal.lattice.a0, got.crystal.lattice.b0, got.crystal.lattice.c0), (want.crystal.lattice.a0, want.crystal.lattice.b0, want.crystal.lattice.c0));
    assert!((got.crystal.lattice.a_len * 1e10 - 50.0).abs() < 1e-9, "cell from the matrix: a = {}", got.crystal.lattice.a_len * 1e10);
    assert_eq!(got.structure_factors.fhkl.as_ref().unwrap().hkls, reflections().len() as i64);
    assert!(std::sync::Arc::ptr_eq(got.structure_factors.fhkl.as_ref().unwrap(), inputs.fhkl.as_ref().unwrap()), "the grid is shared, not copied");
    let a = simulate::render(&want, &Default::default(), Some(2), &|_| {}).unwrap().float;
    let b = simulate::render(&got, &Default::default(), Some(2), &|_| {}).unwrap().float;
    assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
}

#[path = "../benches/common/mod.rs"]
mod bench_configs;

/// The benchmarks build their two experiments with the typed API; they must be the bench-detailed flags.
#[test]
fn bench_configs_equal_their_flags() {
    let out = std::path::Path::new("/nonexistent-out");
    for (typed, flags) in [
        (bench_configs::bench_crystal(128, out), bench_configs::BENCH_FLAGS),
        (bench_configs::heavy_case(64, out), bench_configs::HEAVY_FLAGS),
    ] {
        let n = if flags == bench_configs::BENCH_FLAGS { "128" } else { "64" };
        let args: Vec<String> = flags.replace("{N}", n).split_whitespace().map(String::from).collect();
        let mut parsed = parse_simulate_args(&args).unwrap();
        parsed.output.out_dir = Some(out.to_path_buf());
        assert_eq!(parsed.params, typed.params, "{flags}");
        assert_eq!(parsed.output, typed.output, "{flags}");
    }
}
