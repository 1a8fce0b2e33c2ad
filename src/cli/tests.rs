//! Tests of the flag table and parser.

use super::flags::{Arity, FLAGS};
use crate::base::consts::RTD;
use crate::run::config::Config;
use crate::Error;
use super::flags::Flag;
use std::path::Path;
use super::help::*;
use super::parse::*;
use crate::experiment::params::{Convention, CrystalShape, Misset, Pivot, Precision};
use std::path::PathBuf;

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn parse(s: &str) -> Config {
    parse_simulate_args(&words(s)).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn parse_err(s: &str) -> String {
    match parse_simulate_args(&words(s)) {
        Ok(_) => panic!("{s}: parsed, but an error was expected"),
        Err(e) => {
            assert!(
                matches!(e, Error::Flag { .. }),
                "{s}: not a flag error: {e}"
            );
            let m = e.to_string();
            assert!(!m.contains('\n'), "multi-line error: {m}");
            m
        }
    }
}

/// Every spelling nanoBragg.c accepts according to checklist §1.
#[rustfmt::skip]
const CHECKLIST_SPELLINGS: &[&str] = &[
    // crystal
    "-cell", "-mat", "-misset", "-N", "-Na", "-Nb", "-Nc", "-samplesize", "-sample_size", "-xtalsize",
    "-xtal_size", "-sample_thick", "-sample_x", "-xtal_thick", "-xtal_x", "-sample_width", "-sample_y",
    "-xtal_width", "-xtal_y", "-width", "-sample_heigh", "-sample_height", "-sample_z", "-xtal_heigh",
    "-xtal_height", "-xtal_z", "-heigh", "-height", "-density", "-sample_den", "-MW", "-molec",
    "-square_xtal", "-round_xtal", "-gauss_xtal", "-binary_spots", "-tophat_spots", "-fudge",
    // structure factors
    "-hkl", "-dump", "-default_F", "-interpolate", "-nointerpolate",
    // beam
    "-lambda", "-wave", "-wavelength", "-energy", "-fluence", "-flux", "-exposure", "-beamsize",
    "-sourcefile", "-polar", "-nopolar", "-coherent", "-divergence", "-hdivrange", "-vdivrange",
    "-hdivstep", "-vdivstep", "-hdivsteps", "-vdivsteps", "-divsteps", "-round_div", "-square_div",
    "-dispersion", "-dispsteps",
    // geometry
    "-distance", "-close_distance", "-pixel", "-detsize", "-detsize_f", "-detsize_s", "-detpixels",
    "-detpixels_f", "-detpixels_x", "-detpixels_s", "-detpixels_y", "-Xbeam", "-Ybeam", "-Xclose",
    "-Yclose", "-ORGX", "-ORGY", "-pivot", "-mosflm", "-denzo", "-adxv", "-xds", "-dials", "-fdet_vector",
    "-sdet_vector", "-odet_vector", "-beam_vector", "-polar_vector", "-spindle_axis", "-twotheta_axis",
    "-pix0_vector", "-pix0_vector_mm", "-twotheta", "-detector_rotx", "-detector_roty", "-detector_rotz",
    "-curved_det", "-point_pixel", "-img", "-mask",
    // physics, sampling
    "-detector_abs", "-detector_absorb", "-detector_thick", "-detector_thicksteps", "-thicksteps",
    "-oversample", "-oversample_thick", "-oversample_polar", "-oversample_omega", "-roi", "-dmin",
    "-mosaic", "-mosaici", "-mosaicity", "-mosaic_spr", "-mosaic_spread", "-mosaic_dom", "-mosaic_domains",
    "-mosaic_seed", "-phi", "-osc", "-phistep", "-phisteps", "-water", "-stol", "-4stol", "-Q", "-stolout",
    // outputs
    "-floatfile", "-floatimage", "-intfile", "-intimage", "-pgmfile", "-pgmimage", "-pgmscale",
    "-noisefile", "-noiseimage", "-nopgm", "-nonoise", "-scale", "-adc", "-seed", "-misset_seed",
    "-printout", "-printout_pixel", "-progress", "-noprogress",
];

/// Readable long options and port-only spellings required by the design.
#[rustfmt::skip]
const PORT_SPELLINGS: &[&str] = &[
    "--detector", "--pixel", "--distance", "--hkl", "--mat", "--cell", "--lambda", "--N", "--default-F",
    "--out-dir", "--threads", "--precision", "--png", "-pngfile", "--quiet", "--seed", "--floatfile",
    "--intfile", "--noisefile", "--nonoise", "--nopgm", "--help",
];

/// Sample words for a flag's values (files are not read, except -img/-mask).
fn sample_values(f: &Flag) -> Vec<String> {
    let v: &[&str] = match (f.name, f.arity) {
        ("-pivot", _) => &["sample"],
        ("--precision", _) => &["single"],
        ("--backend", _) => &["auto"],
        ("--max-memory", _) => &["64G"],
        ("--noise", _) => &["fast"],
        ("--gradients", _) => &["rot_x,Na"],
        ("--loss", _) => &["lsq", "--observed", "obs.bin"],
        ("-detector_absorb", _) => &["250"],
        ("-spacegroup", _) => &["P 21 21 21"],
        (_, Arity::Switch) => &[],
        (_, Arity::SwitchNeedsNext) => &["-nonoise"],
        (_, Arity::Numbers(1)) | (_, Arity::Ints(1)) => &["3"],
        (_, Arity::Numbers(2)) | (_, Arity::Ints(2)) => &["3", "4"],
        (_, Arity::Numbers(3)) => &["1", "0", "0"],
        (_, Arity::Ints(4)) => &["1", "2", "3", "4"],
        (_, Arity::Path) => &["some.file"],
        (_, Arity::Cell) => &["70", "80", "90", "85", "95", "105"],
        (_, Arity::Misset) => &["10", "20", "30"],
        (n, a) => panic!("no sample values for {n} {a:?}"),
    };
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn spellings_are_unique_and_well_formed() {
    let all = all_spellings();
    let mut seen = std::collections::HashSet::new();
    for s in &all {
        assert!(seen.insert(*s), "duplicate spelling {s}");
        assert!(s.starts_with('-') && !is_number(s), "bad spelling {s}");
    }
    for f in FLAGS {
        assert!(!f.help.is_empty(), "{} has no help", f.name);
        assert!(
            f.name == "--help" || !f.default.is_empty(),
            "{} has no default text",
            f.name
        );
    }
    eprintln!("{} flags, {} spellings", FLAGS.len(), all.len());
}

#[test]
fn every_checklist_and_port_spelling_is_known() {
    for s in CHECKLIST_SPELLINGS.iter().chain(PORT_SPELLINGS) {
        assert!(lookup(s).is_some(), "{s} is not accepted");
    }
    eprintln!("checklist §1 spellings: {}", CHECKLIST_SPELLINGS.len());
}

#[test]
fn every_spelling_parses() {
    for f in FLAGS {
        if ["-img", "-mask", "--params", "--expt", "--geom", "--experiment", "--image", "--panel"].contains(&f.name) {
            continue; // these read files (or choose from one); see the img/mask, params and expt tests
        }
        for s in f.spellings() {
            let mut args = vec![s.to_string()];
            args.extend(sample_values(f));
            if let Err(e) = parse_simulate_args(&args) {
                panic!("{args:?}: {e}");
            }
        }
    }
}

#[test]
fn no_arguments_give_the_defaults() {
    let c = parse_simulate_args(&[]).unwrap();
    assert_eq!(c.params.distance, 0.1);
    assert_eq!(c.params.convention, Convention::Mosflm);
    assert!(c.output.calculate_noise && c.output.write_pgm && c.run.progress);
}

fn golden_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("NANOBRAGG_GOLDEN") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/golden"),
    };
    if dir.join("manifest.json").is_file() {
        return Some(dir);
    }
    let msg = format!(
        "golden data not found at {} (set NANOBRAGG_GOLDEN)",
        dir.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("skipping: {msg}");
    None
}

/// Every golden case's arguments, with `../../inputs/` made absolute.
fn golden_cases() -> Vec<(String, Vec<String>)> {
    let Some(dir) = golden_dir() else {
        return vec![];
    };
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let m: serde_json::Value = serde_json::from_str(&text).unwrap();
    let inputs = format!("{}/", dir.join("inputs").display());
    m["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let args = c["args"].as_str().unwrap().split_whitespace();
            let args = args.map(|w| w.replace("../../inputs/", &inputs)).collect();
            (c["id"].as_str().unwrap().to_string(), args)
        })
        .collect()
}

fn uses_smv(args: &[String]) -> bool {
    args.iter().any(|a| a == "-img" || a == "-mask")
}

#[test]
fn golden_arguments_parse() {
    for (id, args) in golden_cases() {
        if uses_smv(&args) {
            continue; // golden_arguments_with_img_or_mask_parse
        }
        if let Err(e) = parse_simulate_args(&args) {
            panic!("case {id}: {e}");
        }
    }
}

#[test]
fn golden_arguments_with_img_or_mask_parse() {
    for (id, args) in golden_cases() {
        if uses_smv(&args) {
            if let Err(e) = parse_simulate_args(&args) {
                panic!("case {id}: {e}");
            }
        }
    }
}

#[test]
fn golden_argument_values() {
    let cases = golden_cases();
    let get = |id: &str| {
        let (_, a) = cases.iter().find(|(i, _)| i == id).unwrap();
        parse_simulate_args(a).unwrap()
    };
    if cases.is_empty() {
        return;
    }
    let c = get("base_mosflm_cubic");
    assert_eq!(c.params.cell.unwrap().a, 100.0);
    assert_eq!(c.params.cell.unwrap().gamma, 90.0 / RTD);
    assert_eq!((c.params.na, c.params.nb, c.params.nc), (5.0, 5.0, 5.0));
    assert_eq!((c.params.fpixels, c.params.spixels), (128, 128));
    assert_eq!(c.params.seed, Some(-12345));
    assert!(!c.run.progress && c.output.calculate_noise && c.output.write_pgm);
    assert_eq!(c.output.noisefile, PathBuf::from("noise.img"));

    let c = get("conv_custom_beam");
    assert_eq!(c.params.convention, Convention::Custom);
    assert_eq!(c.params.fdet_vector, [-1.0, 0.0, 0.0]);
    assert_eq!(c.params.pivot, Pivot::Beam);
    assert_eq!(c.params.polarization, 0.8);

    let c = get("conv_custom_sample");
    assert_eq!(c.params.pix0_vector, Some([0.01, 0.02, 0.1]));
    assert_eq!(c.params.close_distance, Some(95.0 / 1000.0));
    assert_eq!(c.params.pivot, Pivot::Sample);

    let c = get("noeffect_flags");
    assert_eq!(c.params.stol_file.as_ref().unwrap().1, 1e10);

    let c = get("combo_256");
    assert_eq!(c.params.mosaic_seed, -99);
    assert_eq!(c.params.detector_mu, Some(1.0 / (300.0 * 1e-6)));
    assert_eq!(c.params.detector_thicksteps, Some(2));
    assert_eq!(c.params.hdivsteps, Some(3));
    assert_eq!(c.params.vdivrange, Some(0.4 / 1000.0));

    let c = get("conv_xds_orgx");
    assert_eq!(c.params.convention, Convention::Xds);
    assert_eq!((c.params.orgx, c.params.orgy), (Some(40.5), Some(70.2)));
    assert_eq!((c.params.fpixels, c.params.spixels), (96, 128));
}

#[test]
fn unit_conversions() {
    let c = parse(
        "-distance 100 -pixel 0.172 -lambda 1.5 -Xbeam 51.2 -Ybeam -3 -detsize 30 -twotheta 15 \
         -detector_rotx 5 -phi 10 -osc 2 -phistep 0.5 -mosaic 0.8 -divergence 1.2 -hdivstep 0.3 \
         -dispersion 1.5 -detector_thick 300 -water 0.5 -dmin 4 -beamsize 0.15 -sample_thick 0.0008 \
         -cell 70 80 90 85 95 105 -misset 10 -20 30",
    );
    assert_eq!(c.params.distance, 100.0 / 1000.0);
    assert_eq!(c.params.pixel_size, 0.172 / 1000.0);
    assert_eq!(c.params.lambda0, 1.5 / 1.0e10);
    assert_eq!(c.params.xbeam, Some(51.2 / 1000.0));
    assert_eq!(c.params.ybeam, Some(-3.0 / 1000.0));
    assert_eq!((c.params.detsize_f, c.params.detsize_s), (0.03, 0.03));
    assert_eq!(RTD, 180.0 * std::f64::consts::FRAC_1_PI);
    assert_eq!(c.params.detector_twotheta, 15.0 / RTD);
    assert_eq!(c.params.detector_rotx, 5.0 / RTD);
    assert_eq!(c.params.phi0, 10.0 / RTD);
    assert_eq!(c.params.osc, Some(2.0 / RTD));
    assert_eq!(c.params.phistep, Some(0.5 / RTD));
    assert_eq!(c.params.mosaic_spread, Some(0.8 / RTD));
    assert_eq!(
        (c.params.hdivrange, c.params.vdivrange),
        (Some(1.2 / 1000.0), Some(1.2 / 1000.0))
    );
    assert_eq!(c.params.hdivstep, Some(0.3 / 1000.0));
    assert_eq!(c.params.dispersion, 1.5 / 100.0);
    assert_eq!(c.params.detector_thick, 300.0 * 1e-6);
    assert_eq!(c.params.water_size, 0.5 / 1e6);
    assert_eq!(c.params.dmin, 4.0 * 1e-10);
    assert_eq!(c.params.beamsize, 0.15 / 1000.0);
    assert_eq!(c.params.sample_x, 0.0008 / 1000.0);
    let cell = c.params.cell.unwrap();
    assert_eq!((cell.a, cell.b, cell.c), (70.0, 80.0, 90.0));
    assert_eq!(
        (cell.alpha, cell.beta, cell.gamma),
        (85.0 / RTD, 95.0 / RTD, 105.0 / RTD)
    );
    assert_eq!(
        c.params.misset,
        Some(Misset::Angles([10.0 / RTD, -20.0 / RTD, 30.0 / RTD]))
    );

    assert_eq!(
        parse("-energy 12000").params.lambda0,
        (12398.42 / 12000.0) / 1.0e10
    );
    assert_eq!(parse("-wavelength 2").params.lambda0, 2e-10);
    assert_eq!(parse("-close_distance 95").params.close_distance, Some(0.095));
    assert_eq!(
        parse("-detector_abs 250").params.detector_mu,
        Some(1.0 / (250.0 * 1e-6))
    );
    let c = parse("-detector_thick 300 -detector_absorb inf");
    assert_eq!((c.params.detector_thick, c.params.detector_mu), (0.0, Some(0.0)));
    let c = parse("-detector_thick 300 -detector_abs 0");
    assert_eq!((c.params.detector_thick, c.params.detector_mu), (0.0, Some(0.0)));
    // Order matters, as in the C: a later thickness survives.
    assert_eq!(
        parse("-detector_abs inf -detector_thick 300").params.detector_thick,
        300.0 * 1e-6
    );
    let c = parse("-xtalsize 0.25");
    assert_eq!(
        (c.params.sample_x, c.params.sample_y, c.params.sample_z),
        (0.25 / 1000.0, 0.25 / 1000.0, 0.25 / 1000.0)
    );
    assert_eq!(parse("-height 0.1").params.sample_z, 0.1 / 1000.0);
    assert_eq!(parse("-ORGX 40.5").params.orgx, Some(40.5));
    assert_eq!(parse("-stol a").params.stol_file, Some((PathBuf::from("a"), 1e10)));
    assert_eq!(
        parse("-4stol a").params.stol_file,
        Some((PathBuf::from("a"), 1e10 / 4.0))
    );
    assert_eq!(
        parse("-Q a").params.stol_file,
        Some((PathBuf::from("a"), 1e10 / std::f64::consts::PI / 4.0))
    );
}

#[test]
fn integer_flags() {
    let c = parse("-N 5 -Nb 7");
    assert_eq!((c.params.na, c.params.nb, c.params.nc), (5.0, 7.0, 5.0));
    let c =
        parse("-detpixels 128 -detpixels_y 96 -oversample 3 -phisteps 4 -dispsteps 2 -divsteps 5");
    assert_eq!((c.params.fpixels, c.params.spixels), (128, 96));
    assert_eq!(c.params.oversample, Some(3));
    assert_eq!(c.params.phisteps, Some(4));
    assert_eq!(c.params.dispsteps, Some(2));
    assert_eq!((c.params.hdivsteps, c.params.vdivsteps), (Some(5), Some(5)));
    assert_eq!(parse("-roi 20 90 30 100").params.roi, Some([20, 90, 30, 100]));
    assert_eq!(parse("-roi 5 5 0 0").params.roi, Some([5, 5, 0, 0]));
    assert_eq!(parse("-N 4.0").params.na, 4.0);
    // As in the C, N <= 1 is accepted here and clamped later.
    assert_eq!(parse("-N 0").params.na, 0.0);
    assert_eq!(parse("-Na -3").params.na, -3.0);
    assert_eq!(
        parse("-printout_pixel 70 60").run.printout_pixel,
        Some((70, 60))
    );
}

#[test]
fn seeds_are_stored_negated() {
    let c = parse("-seed 12345 -mosaic_seed 777");
    assert_eq!(c.params.seed, Some(-12345));
    assert_eq!(c.params.mosaic_seed, -777);
    assert_eq!(c.params.misset_seed, None);
    let c = parse("-misset_seed 42 -misset random");
    assert_eq!(c.params.misset, Some(Misset::Random));
    assert_eq!(c.params.misset_seed, Some(-42));
    assert_eq!(c.params.seed, None);
    // -misset_seed does not read misset angles (the C's substring match would).
    assert_eq!(parse("-misset_seed 42 -N 5").params.misset, None);
    assert!(parse_err("-misset_seed 42 10 20 30").starts_with("10: unexpected word"));
    assert_eq!(parse("-misset randomize").params.misset, Some(Misset::Random));
    assert_eq!(parse("--seed 9").params.seed, Some(-9));
    // the C negates in int: -2147483648 wraps to itself (it was +2147483648, another noise stream)
    let c = parse("-seed -2147483648 -mosaic_seed -2147483648 -misset_seed -2147483648");
    assert_eq!((c.params.seed, c.params.mosaic_seed, c.params.misset_seed), (Some(-2147483648), -2147483648, Some(-2147483648)));
}

#[test]
fn side_effects_convention_and_pivot() {
    for f in [
        "-fdet_vector",
        "-sdet_vector",
        "-odet_vector",
        "-beam_vector",
        "-polar_vector",
        "-spindle_axis",
        "-twotheta_axis",
        "-pix0_vector",
        "-pix0_vector_mm",
    ] {
        let c = parse(&format!("-xds {f} 0 -1 0"));
        assert_eq!(c.params.convention, Convention::Custom, "{f}");
    }
    assert_eq!(parse("-fdet_vector -1 0 0").params.fdet_vector, [-1.0, 0.0, 0.0]);
    assert_eq!(parse("-spindle_axis 0 1 0").params.spindle_vector, [0.0, 1.0, 0.0]);
    assert_eq!(
        parse("-pix0_vector_mm 1 2 3").params.pix0_vector,
        Some([1.0, 2.0, 3.0])
    );
    // A later convention flag wins over custom vectors (last occurrence wins).
    assert_eq!(
        parse("-beam_vector 0 0 1 -adxv").params.convention,
        Convention::Adxv
    );

    for (args, conv, pivot) in [
        ("-mosflm", Convention::Mosflm, Pivot::Beam),
        ("-xds", Convention::Xds, Pivot::Sample),
        ("-adxv", Convention::Adxv, Pivot::Beam),
        ("-denzo", Convention::Denzo, Pivot::Beam),
        ("-dials", Convention::Dials, Pivot::Beam),
    ] {
        let c = parse(&format!("-pivot sample {args}"));
        assert_eq!((c.params.convention, c.params.pivot), (conv, pivot), "{args}");
    }
    for (args, pivot) in [
        ("-Xbeam 5", Pivot::Beam),
        ("-Ybeam 5", Pivot::Beam),
        ("-distance 5", Pivot::Beam),
        ("-Xclose 5", Pivot::Sample),
        ("-Yclose 5", Pivot::Sample),
        ("-ORGX 5", Pivot::Sample),
        ("-ORGY 5", Pivot::Sample),
        ("-close_distance 5", Pivot::Sample),
        ("-twotheta 5", Pivot::Sample),
        ("-pivot sample", Pivot::Sample),
        ("-pivot beam", Pivot::Beam),
        ("-twotheta 5 -pivot beam", Pivot::Beam),
        ("-pivot sample -Xbeam 5", Pivot::Beam),
        ("-xds -distance 100", Pivot::Beam),
    ] {
        assert_eq!(parse(&format!("-mosflm {args}")).params.pivot, pivot, "{args}");
        let start = if pivot == Pivot::Beam {
            "-pivot sample"
        } else {
            "-pivot beam"
        };
        assert_eq!(parse(&format!("{start} {args}")).params.pivot, pivot, "{args}");
    }
    // -twotheta_axis sets neither the angle nor the pivot.
    let c = parse("-pivot beam -twotheta_axis 0 0 -1");
    assert_eq!((c.params.detector_twotheta, c.params.pivot), (0.0, Pivot::Beam));
}

#[test]
fn twotheta_axis_keeps_the_angle() {
    let c = parse("-twotheta 15 -twotheta_axis 0 0 -1");
    assert_eq!(c.params.detector_twotheta, 15.0 / RTD);
    assert_eq!(c.params.twotheta_axis, [0.0, 0.0, -1.0]);
    assert_eq!(c.params.convention, Convention::Custom);
    assert_eq!(c.params.pivot, Pivot::Sample);
}

#[test]
fn last_occurrence_wins() {
    let c = parse("-nonoise -noisefile n.img");
    assert!(c.output.calculate_noise);
    assert_eq!(c.output.noisefile, PathBuf::from("n.img"));
    assert!(!parse("-noisefile n.img -nonoise").output.calculate_noise);
    assert!(parse("-nopgm -pgmfile p.pgm").output.write_pgm);
    let c = parse("-nopgm -pgmscale 2");
    assert!(c.output.write_pgm);
    assert_eq!(c.output.pgm_scale, 2.0);
    assert!(!parse("-pgmscale 2 -nopgm").output.write_pgm);
    assert_eq!(
        parse("-interpolate -nointerpolate").params.interpolate,
        Some(false)
    );
    assert_eq!(parse("-nointerpolate -interpolate").params.interpolate, Some(true));
    let c = parse("-nopolar -polar 0.5");
    assert!(!c.params.nopolar);
    assert_eq!(c.params.polarization, 0.5);
    assert!(parse("-polar 0.5 -nopolar").params.nopolar);
    assert!(!parse("-progress -noprogress").run.progress);
    assert!(parse("-noprogress -progress").run.progress);
    assert_eq!(parse("-lambda 2 -energy 12398.42").params.lambda0, 1e-10);
    assert_eq!(parse("-N 3 -Na 2").params.na, 2.0);
    assert_eq!(parse("-Na 2 -N 3").params.na, 3.0);
    assert_eq!(parse("-round_xtal -gauss_xtal").params.shape, CrystalShape::Gauss);
    assert_eq!(parse("-binary_spots").params.shape, CrystalShape::Tophat);
    assert!(!parse("-square_div").params.round_div);
    assert!(parse("-square_div -round_div").params.round_div);
    assert!(parse("-printout").run.printout);
    assert!(parse("-printout_pixel 1 2").run.printout);
}

#[test]
fn cell_values() {
    let c = parse("-cell 100 -N 5");
    let cell = c.params.cell.unwrap();
    assert_eq!((cell.a, cell.b, cell.c, cell.alpha), (100.0, 0.0, 0.0, 0.0));
    assert_eq!(c.params.na, 5.0);
    let cell = parse("-cell 70 80 90 -distance 10").params.cell.unwrap();
    assert_eq!(
        (cell.a, cell.b, cell.c, cell.gamma),
        (70.0, 80.0, 90.0, 0.0)
    );
    let cell = parse("--cell 70 80 90 85 95 105").params.cell.unwrap();
    assert_eq!(cell.beta, 95.0 / RTD);
    // A word starting with '-' ends the list (as in the C), so a negative value becomes a stray word.
    assert!(parse_err("-cell 70 -80 90").starts_with("-80: "));
    assert!(parse_err("-cell -N 5").starts_with("-cell: missing value"));
    assert!(parse_err("-cell").starts_with("-cell: missing value"));
    assert!(parse_err("-cell 70 80 90 85 95 105 110").starts_with("110: unexpected word"));
    assert!(parse_err("-cell 70 eighty").starts_with("-cell: 'eighty' is not a number"));
}

#[test]
fn curved_det_needs_a_following_word() {
    assert!(parse("-curved_det -nonoise").params.curved_detector);
    assert!(!parse("-nonoise -curved_det").params.curved_detector);
}

#[test]
fn long_options() {
    let c = parse(
        "--detector 256 --pixel 0.05 --distance 80 --hkl P1.hkl --mat A.mat --lambda 1.2 --N 4 \
         --default-F 50 --out-dir out --threads 3 --precision single --png p.png --quiet \
         --floatfile f.bin --intfile i.img --noisefile n.img --nonoise --nopgm",
    );
    assert_eq!((c.params.fpixels, c.params.spixels), (256, 256));
    assert_eq!(c.params.pixel_size, 0.05 / 1000.0);
    assert_eq!(c.params.distance, 0.08);
    assert_eq!(c.params.hkl_file, Some(PathBuf::from("P1.hkl")));
    assert_eq!(c.params.mat_file, Some(PathBuf::from("A.mat")));
    assert_eq!(c.params.lambda0, 1.2 / 1e10);
    assert_eq!((c.params.na, c.params.nb, c.params.nc), (4.0, 4.0, 4.0));
    assert_eq!(c.params.default_f, 50.0);
    assert_eq!(c.output.out_dir, Some(PathBuf::from("out")));
    assert_eq!(c.run.threads, Some(3));
    assert_eq!(c.run.precision, Precision::Single);
    assert_eq!(c.output.pngfile, Some(PathBuf::from("p.png")));
    assert!(c.run.quiet);
    assert_eq!(c.output.floatfile, PathBuf::from("f.bin"));
    assert_eq!(c.output.intfile, PathBuf::from("i.img"));
    assert_eq!(c.output.noisefile, PathBuf::from("n.img"));
    assert!(!c.output.calculate_noise && !c.output.write_pgm);
    assert_eq!(
        parse("-pngfile q.png").output.pngfile,
        Some(PathBuf::from("q.png"))
    );
    assert_eq!(parse("--threads 0").run.threads, None);
    assert_eq!(parse("--precision double").run.precision, Precision::Double);
    let c = parse("--distance=80 --out-dir=o");
    assert_eq!((c.params.distance, c.output.out_dir), (0.08, Some(PathBuf::from("o"))));
    assert!(wants_help(&words("-N 5 --help")));
    assert!(wants_help(&words("-h")));
    assert!(!wants_help(&words("-N 5")));
    assert!(parse_simulate_args(&words("--help")).is_ok());
}

#[test]
fn no_effect_flags_are_accepted() {
    let c = parse("-coherent -density 1.4 -sample_den 2 -MW 30000 -molec 12 -stolout out.stol");
    let d = Config::default();
    assert_eq!(format!("{c:?}"), format!("{d:?}"));
}

#[test]
fn errors_name_the_flag() {
    let m = parse_err("-distanse 100");
    assert!(
        m.starts_with("-distanse: unknown flag") && m.contains("-distance"),
        "{m}"
    );
    let m = parse_err("-detector_absorption 100");
    assert!(m.contains("-detector_absorb"), "{m}");
    assert!(
        parse_err("--frobnicate-everything").starts_with("--frobnicate-everything: unknown flag")
    );
    // Exact matching: substrings the C accepted are errors now.
    for w in ["-lambdas 1", "-Nabc 3", "-xxx-distance 3", "-pixels 0.1"] {
        assert!(parse_err(w).contains("unknown flag"), "{w}");
    }
    // Missing values.
    assert!(parse_err("-distance").starts_with("-distance: missing value"));
    assert!(parse_err("-distance -nonoise").starts_with("-distance: missing value"));
    assert!(parse_err("-distance -nonoise").contains("followed by -nonoise"));
    assert!(parse_err("-fdet_vector 1 0").starts_with("-fdet_vector: missing value"));
    assert!(parse_err("-fdet_vector 1 0 -nonoise").starts_with("-fdet_vector: missing value"));
    assert!(parse_err("-roi 1 2 3").starts_with("-roi: missing value"));
    assert!(parse_err("-floatfile").starts_with("-floatfile: missing value"));
    assert!(parse_err("-floatfile -nonoise").starts_with("-floatfile: missing value"));
    assert!(parse_err("-detector_abs").starts_with("-detector_abs: missing value"));
    assert!(parse_err("-detector_thick").starts_with("-detector_thick: missing value"));
    assert!(parse_err("-thicksteps").starts_with("-thicksteps: missing value"));
    assert!(parse_err("-misset 10 20").starts_with("-misset: missing value"));
    assert!(parse_err("-misset").starts_with("-misset: missing value"));
    assert!(parse_err("-printout_pixel 3").starts_with("-printout_pixel: missing value"));
    assert!(parse_err("--out-dir").starts_with("--out-dir: missing value"));
    // Non-numeric values.
    assert!(parse_err("-distance abc").starts_with("-distance: 'abc' is not a number"));
    assert!(parse_err("-distance nan").starts_with("-distance:"));
    assert!(parse_err("-N five").starts_with("-N: 'five' is not a number"));
    assert!(parse_err("-detpixels 1e20").starts_with("-detpixels:"));
    assert!(parse_err("-seed 99999999999").starts_with("-seed:"));
    assert!(parse_err("-detector_abs thick").starts_with("-detector_abs:"));
    assert!(parse_err("-pivot middle").starts_with("-pivot: expects 'sample' or 'beam'"));
    assert!(parse_err("--precision half").starts_with("--precision:"));
    // Impossible values.
    for w in [
        "-pixel 0",
        "-pixel -0.1",
        "-distance 0",
        "-close_distance -5",
        "-lambda 0",
        "-wave -1",
        "-energy 0",
        "-detpixels 0",
        "-detpixels_x -5",
        "-detpixels_s 0",
        "--detector 0",
        "-detsize 0",
        "-detsize_f -1",
        "-detsize_s 0",
        "-oversample -1",
        "-mosaic_domains -2",
        "-fluence -1",
        "-beamsize 0",
        "--threads -1",
    ] {
        let m = parse_err(w);
        let flag = w.split_whitespace().next().unwrap();
        assert!(m.starts_with(&format!("{flag}: ")), "{w}: {m}");
    }
    assert_eq!(parse("-fluence 0").params.fluence, 0.0);
    // a loss with nothing to compare
    assert!(parse_err("--loss lsq").starts_with("--loss: needs --observed IMAGE"));
    // 0 is nanoBragg.c's "auto" for these two counts (it was refused)
    assert_eq!(parse("-oversample 3 -oversample 0").params.oversample, None);
    assert_eq!(parse("-mosaic_dom 0").params.mosaic_domains, None);
    // ROI.
    assert!(parse_err("-roi 90 20 30 100").starts_with("-roi: inverted"));
    assert!(parse_err("-roi 20 90 100 30").starts_with("-roi: inverted"));
    assert!(parse_err("-roi -1 90 30 100").starts_with("-roi: bounds must not be negative"));
    // Stray words.
    assert!(parse_err("-N 5 foo").starts_with("foo: unexpected word"));
    assert!(parse_err("-nonoise 5").starts_with("5: unexpected word"));
    assert!(parse_err("-nonoise -5").starts_with("-5: unexpected word"));
    // Unreadable images.
    assert!(
        parse_err("-img /nonexistent/x.img").starts_with("-img: cannot read /nonexistent/x.img")
    );
    assert!(parse_err("-mask /nonexistent/m.img").starts_with("-mask: cannot read"));
}

#[test]
fn negative_numbers_are_values() {
    let c = parse("-fdet_vector -1 0 0 -sdet_vector 0 -1 0 -Xbeam -5 -misset -10 -20 -30 -adc -3");
    assert_eq!(c.params.fdet_vector, [-1.0, 0.0, 0.0]);
    assert_eq!(c.params.sdet_vector, [0.0, -1.0, 0.0]);
    assert_eq!(c.params.xbeam, Some(-0.005));
    assert_eq!(
        c.params.misset,
        Some(Misset::Angles([-10.0 / RTD, -20.0 / RTD, -30.0 / RTD]))
    );
    assert_eq!(c.output.adc_offset, -3.0);
    assert_eq!(
        parse("-beam_vector -1e0 -.5 -0.").params.beam_vector,
        [-1.0, -0.5, -0.0]
    );
}

#[test]
fn help_and_markdown_cover_every_flag() {
    let h = help_text().split_whitespace().collect::<Vec<_>>().join(" ");
    let md = markdown_reference();
    for f in FLAGS {
        for s in f.spellings() {
            assert!(h.contains(s), "help lacks {s}");
            assert!(md.contains(&format!("`{s}`")), "markdown lacks {s}");
        }
        assert!(h.contains(&format!(
            "default: {}",
            if f.default.is_empty() { "-" } else { f.default }
        )));
    }
    assert!(h.contains("[units: mm; default: 100]"), "{h}");
    for cat in super::flags::Category::ALL {
        assert!(h.contains(cat.title()) && md.contains(cat.title()));
    }
    // Every table row has the 6 columns.
    for line in md.lines().filter(|l| l.starts_with('|')) {
        assert_eq!(line.replace("\\|", "").matches('|').count(), 7, "{line}");
    }
}

// ---------------------------------------------------------------------------------- -img / -mask

fn golden_input(name: &str) -> Option<String> {
    golden_dir().map(|d| d.join("inputs").join(name).display().to_string())
}

#[test]
fn img_header_is_applied_before_the_flags() {
    let Some(img) = golden_input("header.img") else {
        return;
    };
    let c = parse(&format!("-img {img}"));
    let smv = c.img.as_ref().unwrap();
    assert_eq!((smv.width, smv.height), (96, 64));
    assert_eq!((c.params.fpixels, c.params.spixels), (96, 64));
    assert_eq!(c.params.pixel_size, 0.15 / 1000.0);
    assert_eq!(
        (c.params.detsize_f, c.params.detsize_s),
        (0.15 / 1000.0 * 96.0, 0.15 / 1000.0 * 64.0)
    );
    // ValueOf finds the last substring occurrence: DISTANCE reads CLOSE_DISTANCE's value.
    assert_eq!(c.params.distance, 110.0 / 1000.0);
    assert_eq!(c.params.close_distance, Some(110.0 / 1000.0));
    assert_eq!(c.params.lambda0, 1.3 / 1e10);
    assert_eq!(c.params.xbeam, Some(4.5 / 1000.0));
    assert_eq!(c.params.ybeam, Some(5.2 / 1000.0));
    assert_eq!((c.params.orgx, c.params.orgy), (Some(31.5), Some(29.0)));
    assert_eq!(c.params.phi0, 5.0 / RTD);
    assert_eq!(c.params.osc, Some(0.4 / RTD));
    assert_eq!(c.params.detector_twotheta, 0.0);
    assert_eq!(c.params.pivot, Pivot::Beam);
    // Flags override the header wherever they appear.
    let c = parse(&format!("-detpixels 32 -lambda 2 -img {img} -Xbeam 1"));
    assert_eq!((c.params.fpixels, c.params.lambda0, c.params.xbeam), (32, 2e-10, Some(0.001)));
}

#[test]
fn mask_header_is_applied_then_img() {
    let (Some(mask), Some(img)) = (golden_input("mask.img"), golden_input("header.img")) else {
        return;
    };
    let c = parse(&format!("-mask {mask}"));
    let m = c.mask.as_ref().unwrap();
    assert_eq!((m.width, m.height, m.data.len()), (128, 128, 128 * 128));
    assert_eq!((c.params.fpixels, c.params.spixels), (128, 128));
    assert_eq!(c.params.pixel_size, 0.1 / 1000.0);
    assert_eq!(c.params.distance, 90.0 / 1000.0);
    assert_eq!(c.params.close_distance, None);
    assert_eq!(c.params.lambda0, 1.2 / 1e10);
    assert_eq!(c.params.xbeam, Some(6.0 / 1000.0));
    // The mask's BEAM_CENTER_Y is measured from the other edge.
    assert_eq!(c.params.ybeam, Some(0.1 / 1000.0 * 128.0 - 7.0 / 1000.0));
    assert_eq!(c.img, None);
    // Mask first, then img, whatever the order on the command line.
    let c = parse(&format!("-img {img} -mask {mask}"));
    assert!(c.mask.is_some() && c.img.is_some());
    assert_eq!((c.params.fpixels, c.params.lambda0), (96, 1.3 / 1e10));
}

fn nanobragg_run_with(mut r: crate::run::config::RunOptions, params_file: &std::path::Path) -> crate::run::config::RunOptions {
    r.params_file = Some(params_file.to_path_buf());
    r
}

#[test]
fn save_params_never_saves_quiet() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("run.json");
    parse("-cell 70 80 90 90 90 90 -quiet").save_json(&f).unwrap();
    let back = parse(&format!("--params {}", f.display()));
    assert!(!back.run.quiet);
}

#[test]
fn params_file_is_the_base_and_flags_override_it() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("run.json");
    let saved = parse("-cell 70 80 90 90 90 90 -N 7 -distance 250 -lambda 1.3 -nonoise -seed 5 --threads 2");
    saved.save_json(&f).unwrap();
    let back = parse(&format!("--params {}", f.display()));
    assert_eq!(back.params, saved.params);
    assert_eq!(back.output, saved.output);
    // the same run options, and the file they came from (an input no output may replace)
    assert_eq!(back.run, nanobragg_run_with(saved.run.clone(), &f));
    // wherever --params stands, the flags win
    let c = parse(&format!("-distance 120 --params {} -N 3", f.display()));
    assert_eq!(c.params.distance, 0.12);
    assert_eq!(c.params.na, 3.0);
    assert_eq!(c.params.lambda0, 1.3 / 1.0e10);
    assert!(!c.output.calculate_noise);
    let e = parse_err(&format!("--params {}", d.path().join("missing.json").display()));
    assert!(e.starts_with("--params: "), "{e}");
    std::fs::write(&f, "{\"params\": {\"nonsense\": 1}}").unwrap();
    let e = parse_err(&format!("--params {}", f.display()));
    assert!(e.contains("nonsense"), "{e}");
    // values the flags would refuse are refused from the file too (not rendered)
    std::fs::write(&f, "{\"params\": {\"distance\": -0.001}}").unwrap();
    let e = parse_err(&format!("--params {}", f.display()));
    assert!(e.contains("\"distance\" must be a positive number"), "{e}");
}

#[test]
fn setters_match_the_flags() {
    let mut p = crate::experiment::params::Params::default();
    p.cell_deg(100.0, 100.0, 100.0, 90.0, 90.0, 90.0).n_cells(5).lambda_angstrom(6.2).distance_mm(200.0).default_f(100.0);
    let c = super::parse::parse_simulate_args(
        &"-cell 100 100 100 90 90 90 -N 5 -lambda 6.2 -distance 200 -default_F 100".split(' ').map(String::from).collect::<Vec<_>>(),
    )
    .unwrap();
    assert_eq!(p, c.params);
    let mut q = crate::experiment::params::Params::default();
    q.close_distance_mm(95.0).energy_kev(12.39842);
    assert_eq!(q.pivot, crate::experiment::params::Pivot::Sample);
    assert_eq!(q.close_distance, Some(0.095));
}
