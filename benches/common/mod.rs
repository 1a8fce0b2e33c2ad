//! The two experiments the criterion benchmarks render, built through the typed API (no argv): the
//! benchmark crystal of bench-detailed, and a sample-heavy case (like bench-detailed's `heavy`, but
//! with -default_F instead of its HKL file). tests/library_api.rs checks each against its flags.
#![allow(dead_code)]
use nanobragg::run::config::Config;
use std::path::Path;

/// Outputs off except the float image, written under `out` (benchmarks render into memory).
fn quiet(mut cfg: Config, out: &Path) -> Config {
    cfg.output.write_pgm = false;
    cfg.output.calculate_noise = false;
    cfg.output.out_dir = Some(out.to_path_buf());
    cfg
}

/// The benchmark crystal: `-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 -distance 100
/// -pixel 0.1 -detpixels N -nonoise -nopgm`, one sample per pixel.
pub fn bench_crystal(pixels: i64, out: &Path) -> Config {
    let mut cfg = Config::default();
    cfg.params
        .cell_deg(100.0, 100.0, 100.0, 90.0, 90.0, 90.0)
        .lambda_angstrom(6.2)
        .n_cells(5)
        .default_f(100.0)
        .distance_mm(100.0)
        .pixel_mm(0.1)
        .detpixels(pixels, pixels);
    quiet(cfg, out)
}

/// A sample-heavy case: triclinic cell, misset, 5 mosaic domains, 2 phi steps, 3×3 divergence (round),
/// 2 wavelengths, 2×2 oversampling.
pub fn heavy_case(pixels: i64, out: &Path) -> Config {
    let mut cfg = Config::default();
    cfg.params
        .cell_deg(70.0, 80.0, 90.0, 85.0, 95.0, 105.0)
        .misset_deg(10.0, 20.0, 30.0)
        .default_f(100.0)
        .lambda_angstrom(1.0)
        .distance_mm(100.0)
        .pixel_mm(0.1)
        .n_cells(10)
        .mosaic_deg(0.5)
        .osc_deg(0.1)
        .divergence_mrad(0.2)
        .dispersion_percent(0.1)
        .detpixels(pixels, pixels);
    let p = &mut cfg.params;
    p.mosaic_domains = Some(5);
    p.phisteps = Some(2);
    (p.hdivsteps, p.vdivsteps) = (Some(3), Some(3));
    p.dispsteps = Some(2);
    p.oversample = Some(2);
    quiet(cfg, out)
}

pub const BENCH_FLAGS: &str =
    "-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 -distance 100 -pixel 0.1 -detpixels {N} -nonoise -nopgm";
pub const HEAVY_FLAGS: &str = "-cell 70 80 90 85 95 105 -misset 10 20 30 -default_F 100 -lambda 1 -distance 100 -pixel 0.1 -N 10 \
     -mosaic 0.5 -mosaic_dom 5 -phisteps 2 -osc 0.1 -divergence 0.2 -divsteps 3 -dispersion 0.1 -dispsteps 2 \
     -oversample 2 -detpixels {N} -nonoise -nopgm";
