//! The `check-kernels` debug feature (as rav1e's `check_asm`): with it, the render driver renders
//! every row of a non-reference backend again with the reference kernel and panics on disagreement.
//! Run with `cargo test --release --features check-kernels --test check_kernels` (scripts/test.sh
//! does); without the feature this file is empty.
#![cfg(feature = "check-kernels")]

mod common;

use common::*;
use nanobragg::experiment::params::Precision;
use nanobragg::experiment::Experiment;
use nanobragg::kernel::{self, Backend, ReferenceBackend, RenderBackend, RenderOptions, RowResult, SimdLevel};
use nanobragg::run::simulate;
use std::path::Path;

fn experiment(args: &[String], out: &Path) -> Experiment {
    let mut cfg = nanobragg::cli::parse::parse_simulate_args(args).unwrap();
    cfg.output.out_dir = Some(out.to_path_buf());
    simulate::setup(&cfg).unwrap().0
}

fn split(flags: &str) -> Vec<String> {
    flags.split_whitespace().map(String::from).collect()
}

/// Every SIMD level, both precisions, on golden cases that cover interpolation leaving its range
/// (the hand-over to the reference), masks/ROI, mosaicity and the spot shapes: rendering under the
/// feature asserts agreement row by row.
#[test]
fn simd_backends_pass_the_row_by_row_check() {
    let mut exercised = 0;
    let mut run = |exp: Experiment, what: &str| {
        for precision in [Precision::Double, Precision::Single] {
            for level in SimdLevel::available() {
                let out = kernel::render(&exp, &RenderOptions { backend: Backend::Simd(level), precision }, &|_| {});
                assert_eq!(out.float.len(), exp.pixels(), "{what}");
                exercised += 1;
            }
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    run(
        experiment(&split("-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 -distance 100 -pixel 0.1 -detpixels 96 -nonoise -nopgm"), tmp.path()),
        "bench crystal",
    );
    if let Some(golden) = golden_dir() {
        let manifest = load_manifest(&golden);
        for id in ["quirk_hkl_interp_oob", "hkl_interp", "combo_256", "mosaic", "mask", "roi_noise", "shape_round", "shape_gauss", "curved_det", "water_fluence_dmin", "thick_oversample_thick"] {
            let Some(case) = cases(&manifest).iter().find(|c| case_id(c) == id) else {
                println!("SKIPPED: golden case {id} because the manifest has no such case");
                continue;
            };
            let dir = tempfile::tempdir().unwrap();
            run(simulate::setup(&case_config(&golden, case, dir.path())).unwrap().0, id);
        }
    }
    assert!(exercised >= 2);
}

/// A backend that is the reference with one pixel off by 0.1 %: the check must catch it.
struct OffByAFraction<'a>(ReferenceBackend<'a>);

impl RenderBackend for OffByAFraction<'_> {
    fn name(&self) -> &'static str {
        "off-by-a-fraction"
    }
    fn experiment(&self) -> &Experiment {
        self.0.experiment()
    }
    fn render_row(&self, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
        let r = self.0.render_row(s, interpolate, out);
        if s == 7 {
            out[11] *= 1.001;
        }
        r
    }
}

#[test]
fn a_wrong_backend_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = experiment(&split("-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 -distance 100 -pixel 0.1 -detpixels 32 -nonoise -nopgm"), tmp.path());
    let wrong = OffByAFraction(ReferenceBackend::new(&exp));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| kernel::render_with_backend(&wrong, &|_| {})));
    let msg = match r {
        Ok(_) => panic!("a backend 0.1 % off at pixel (11, 7) passed the check"),
        Err(e) => e.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(msg.contains("off-by-a-fraction") && msg.contains("(11, 7)"), "{msg}");
    // the reference itself, through the same driver, is not checked and renders the same image
    let a = kernel::render_with_backend(&ReferenceBackend::new(&exp), &|_| {}).float;
    let b = kernel::render_reference(&exp, &|_| {}).float;
    assert_eq!(a, b);
}

/// Derivative images: under the feature, every lane pass (`kernel::tangent_lanes`) is rendered again
/// by the dual reference and compared (`check::check_tangents`), at every SIMD level and precision.
#[test]
fn lane_tangents_pass_the_check() {
    use nanobragg::experiment::tangents::{self, Param, Resolved};
    let flags = "-cell 70 80 90 85 95 105 -misset 10 20 30 -default_F 100 -lambda 1 -distance 100 -pixel 0.4 -N 6 -mosaic 0.5 -mosaic_dom 2 \
                 -phisteps 2 -osc 0.1 -divergence 0.2 -divsteps 3 -dispersion 0.1 -dispsteps 2 -oversample 2 -detpixels 16 -polar 0.9";
    let cfg = nanobragg::cli::parse::parse_simulate_args(&split(flags)).unwrap();
    let (exp, _, inputs) = simulate::setup_with_inputs(&cfg).unwrap();
    let names = [Param::RotX, Param::A, Param::Gamma, Param::Mosaic, Param::Distance, Param::Xbeam, Param::DetectorRotz, Param::Fluence, Param::Na];
    let t = tangents::tangents(&cfg.params, &inputs, &exp, &names).unwrap();
    for precision in [Precision::Double, Precision::Single] {
        for level in SimdLevel::available() {
            let out = kernel::tangents::render_tangents_with(&exp, &Resolved::of(&exp), &t, None, &RenderOptions { backend: Backend::Simd(level), precision });
            assert_eq!(out.grads.len(), names.len());
        }
    }
}

/// nearbragg's SIMD atom loop at every level this CPU has (AVX2 and up; the portable level keeps the
/// scalar loop): under the feature every pixel group is summed again by the scalar loop and compared
/// (`apps::nearbragg::check`), on atom lists with B factors and phases across the flag groups.
#[test]
fn nearbragg_simd_atom_loop_passes_the_group_by_group_check() {
    let tmp = tempfile::tempdir().unwrap();
    let mut atoms = String::new();
    for i in 0..40 {
        let f = |k: u32| ((i * 7919 + k * 104729) % 2000) as f64 / 50.0 - 20.0;
        atoms += &format!("{} {} {} {} {} {}\n", f(1), f(2), f(3), 0.5 + f(4).abs() / 40.0, f(5).abs(), f(6) * 9.0);
    }
    let file = tmp.path().join("atoms.txt");
    std::fs::write(&file, atoms).unwrap();
    let mut exercised = 0;
    for flags in [
        "-detpixels_x 21 -detpixels_y 6 -pixel 0.4 -distance 60",
        "-detpixels 13 -pixel 0.4 -distance 60 -source_distance far -oversample 2 -dispersion 1 -dispsteps 2",
        "-detpixels 13 -pixel 0.4 -distance 60 -coherent -divergence 0.3 -divsteps 2 -source_depth 20 -depthsteps 2",
        "-detpixels 13 -pixel 0.4 -distance 60 -curved_det 1 -roi 2 11 3 9",
    ] {
        let mut args = vec!["-file".to_string(), file.to_string_lossy().into_owned()];
        args.extend(split(flags));
        for level in SimdLevel::available() {
            let mut c = nanobragg::cli::nearbragg::parse_nearbragg_args(&args).unwrap();
            c.backend = Some(Backend::Simd(level));
            let img = nanobragg::apps::nearbragg::simulate(&c).unwrap();
            assert!(img.float.iter().any(|&v| v > 0.0), "{flags}");
            exercised += 1;
        }
    }
    assert!(exercised >= 4);
}
