//! Build an experiment from typed parameters and an in-memory reflection list, render it and write an
//! SMV image — no argv, no input files. `cargo run --release --example in_memory [OUT.img]`
use nanobragg::{experiment::inputs::Inputs, io::smv, run::simulate, experiment::structure_factors::HklGrid, run::summary, run::config::Config};

fn main() -> nanobragg::Result<()> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "in_memory.img".into());
    let mut cfg = Config::default();
    cfg.params
        .cell_deg(78.0, 78.0, 38.0, 90.0, 90.0, 90.0) // Å, degrees
        .misset_deg(10.0, 20.0, 30.0)
        .n_cells(5)
        .lambda_angstrom(1.0)
        .distance_mm(100.0)
        .pixel_mm(0.1)
        .detpixels(256, 256)
        .default_f(0.0);
    // (h, k, l, F): a few strong low-order reflections
    let reflections: Vec<(i32, i32, i32, f64)> =
        (-3..=3).flat_map(|h| (-3..=3).flat_map(move |k| (-2..=2).map(move |l| (h, k, l, 1000.0 / (1 + h * h + k * k + l * l) as f64)))).collect();
    let grid = HklGrid::from_entries(&reflections, 0.0)?;

    // the pure path: data in memory (no Inputs::load), experiment built with no file I/O
    let inputs = Inputs::with_fhkl(grid);
    let exp = nanobragg::run::setup::build_experiment(&cfg, &inputs)?;
    println!("{}", summary::setup_summary(&cfg, &inputs, &exp).join("\n")); // the C's setup messages
    let image = simulate::render(&exp, &cfg.run.render_options(), None, &|_| {})?.float; // photons/pixel, slow-major
    let (fp, sp) = (exp.det.panel().fpixels, exp.det.panel().spixels);
    let max = image.iter().cloned().fold(0.0f32, f32::max) as f64;
    let ints = smv::int_pixels(&exp.det.panel().image(&image), if max > 0.0 { 55000.0 / max } else { 1.0 }, 40.0);
    smv::write_smv(out.as_ref(), &simulate::smv_header(&exp), &ints)?;
    println!("wrote {out}: {fp}x{sp} pixels, max {max:.3} photons");
    Ok(())
}
