//! `nonbragg`: the diffuse scattering of an amorphous sample (water, air, solvent) from a table of
//! sin(θ)/λ vs F, as nonBragg.c renders it: for every pixel, sub-pixel and source, the scattering
//! vector's sin(θ)/λ is looked up in the table by 4-point (cubic) interpolation, squared, times
//! polarization and solid angle, then scaled by r_e², fluence and the number of molecules.
//!
//! Rows are rendered in parallel (each pixel's sum keeps the C's order, so the float image is the
//! C's); statistics, the integer/PGM conversions and the Poisson noise stream follow the C's serial
//! order, so the SMV, PGM and noise files are byte-identical.
//!
//! Differences from nonBragg.c (each a C bug):
//! * the PGM file holds `pixels` bytes (the C writes `2*pixels` bytes, half of them read past the
//!   end of its buffer) and `-nopgm` is honoured (the C parses it but writes the PGM anyway);
//! * the mean is divided by the number of pixels (the C's counter starts uninitialised).
//!
//! Kept because the golden files depend on it: the rmsd that sets the PGM scale is taken over the
//! float image shifted by one pixel (the C's `++j` before use, reading the zero after the end).

mod config;
mod geometry;
mod output;
mod render;
mod setup;
mod stol;

pub use config::{NonBraggConfig, Pivot};
pub use stol::{read_stol_table, StolTable};

use crate::base::os_text::os_path;
use crate::base::c::printf::cf;
use crate::base::consts::R_E_SQR;
use crate::base::vec3::V3;
use crate::io::atomic::OutputSet;
use crate::{Error, Result};
use geometry::{Geometry, Source};
use render::{Grid, Scene, Stats};
use setup::{BeamSteps, DetectorSize, Sample};
use std::fmt::Write as _;
use std::io::Write;

/// Run nonBragg.c: render, print its report to `out`, write its files.
pub fn run(c: &NonBraggConfig, out: &mut dyn Write) -> Result<()> {
    let mut s = String::new();
    s += "nonBragg amorphous material diffraction simulator - James Holton and Ken Frankel 3-19-16\n";
    let Some(stolfile) = &c.stolfile else {
        return Err(Error::flag("-stol", "no stol table given"));
    };
    check_files(c, stolfile)?;
    let det = setup::detector_size(c)?;
    let roi = setup::Roi::new(c, det.fpixels, det.spixels);
    roi.check()?;
    let grid = Grid::new(c, det.fpixels, det.spixels, roi);
    let sample = setup::sample(c, &mut s);
    let osc = setup::osc_range(c);
    let steps = BeamSteps::new(c);
    setup::validate(c, &det, &steps)?;
    let g = geometry::geometry(c, &det, &mut s);

    let _ = writeln!(s, "reading {stolfile}");
    flush(out, &mut s)?;
    let table = stol::read_stol_table(os_path(stolfile).as_path(), c.stol_file_mult)?;
    let (src, divsteps) = geometry::sources(c, &g, &steps, &mut s)?;
    let _ = writeln!(s, "  {} initialized F points (will cubic-spline interpolate between them)", table.stol.len());
    report(c, &Report { det: &det, grid: &grid, sample: &sample, steps: &steps, g: &g, src: &src, divsteps }, &mut s);
    let mut seed: i64 = c.seed.unwrap_or_else(|| {
        -(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0))
    });
    if c.calculate_noise {
        let _ = writeln!(s, "\n  noise image paramters:\n  seed: {}", seed);
    }
    flush(out, &mut s)?;

    // render: rows in parallel, each pixel's sum in the C's order
    let scene = Scene { c, g: &g, grid: &grid, src: &src, table: &table, scale: R_E_SQR * sample.fluence * sample.molecules };
    let (floatimage, last_pos) = render::render(&scene);
    check_finite(&floatimage, c, &g, &grid)?;
    let omega_sum = render::omega_sum(c, &g, &grid);
    // statistics in raster order
    let stats = render::statistics(c, &grid, &floatimage, &last_pos, &mut s);
    drop(last_pos);
    s += "\n";
    let _ = writeln!(
        s,
        "solid angle subtended by detector = {} steradian ( {}% sphere)",
        cf("%g", omega_sum),
        cf("%g", 100.0 * omega_sum / 4.0 / std::f64::consts::PI)
    );
    let _ = writeln!(s, "writing {} as {} 4-byte floats", c.floatfile, floatimage.len());
    flush(out, &mut s)?;
    // every file under a temporary name until the last is written: all of them or none
    let mut files = OutputSet::default();
    files.add(os_path(&c.floatfile).as_path(), |f| crate::io::write_le(f, &floatimage))?;
    let header = output::smv_header(c, &g, &grid, det.detsize_y, osc);
    write_images(c, &grid, &floatimage, &stats, &header, &mut seed, &mut s, &mut files, out)?;
    files.commit()
}

/// What the parameter report prints besides the configuration.
struct Report<'a> {
    det: &'a DetectorSize,
    grid: &'a Grid,
    sample: &'a Sample,
    steps: &'a BeamSteps,
    g: &'a Geometry,
    src: &'a [Source],
    divsteps: i32,
}

/// The parameter report nonBragg.c prints before its pixel loop, into `s`.
fn report(c: &NonBraggConfig, r: &Report, s: &mut String) {
    let (sample, g, grid) = (r.sample, r.g, r.grid);
    let _ = writeln!(s, "  wave={} meters +/- {}% in {} steps", cf("%g", c.lambda0), cf("%g", r.steps.disp.range * 100.0), r.steps.disp.steps);
    if c.nopolar {
        *s += "  polarization effect disabled\n";
    } else {
        let _ = writeln!(s, "  Kahn polarization factor: {}", cf("%f", c.polarization));
    }
    if c.curved {
        *s += "  curved detector: all pixels same distance from origin\n";
    }
    if c.point_pixel {
        *s += "  pixel obliquity effect disabled\n";
    }
    if c.fmap {
        *s += "  Fmap mode: plotting structure factor at every pixel\n";
    }
    let _ = writeln!(s, "  incident fluence: {} photons/m^2", cf("%lg", sample.fluence));
    let _ = writeln!(
        s,
        "  sample is {} m thick x {} m high x {} m wide, {} g/cm^3 and {} g/mol ({} molecules)",
        cf("%lg", sample.x),
        cf("%lg", sample.y),
        cf("%lg", sample.z),
        cf("%lg", sample.density / 1e6),
        cf("%lg", c.molecular_weight),
        cf("%lg", sample.molecules)
    );
    let _ = writeln!(
        s,
        "  distance={} detsize={}x{}  pixel={} meters ({}x{} pixels)",
        cf("%g", g.distance),
        cf("%g", r.det.detsize_x),
        cf("%g", r.det.detsize_y),
        cf("%g", c.pixel),
        grid.fpixels,
        grid.spixels
    );
    let _ = writeln!(s, "  Xbeam={} Ybeam={}", cf("%g", g.xbeam), cf("%g", g.ybeam));
    let v3 = |v: &V3| format!("{} {} {}", cf("%g", v[0]), cf("%g", v[1]), cf("%g", v[2]));
    let _ = writeln!(s, "  detector origin: {}", v3(&g.pix0));
    let _ = writeln!(s, "  DIRECTION_OF_DETECTOR_X-AXIS= {}", v3(&g.fdet));
    let _ = writeln!(s, "  DIRECTION_OF_DETECTOR_Y-AXIS= {}", v3(&g.sdet));
    let _ = writeln!(s, "  INCIDENT_BEAM_DIRECTION= {}", v3(&g.beam));
    let _ = writeln!(s, "  POLARIZATION_PLANE_NORMAL= {}", v3(&g.polar_vector));
    let roi = &grid.roi;
    let _ = writeln!(s, "  roi: {} < x < {} && {} < y < {}", roi.xmin, roi.xmax, roi.ymin, roi.ymax);
    let (h, v) = (&r.steps.hdiv, &r.steps.vdiv);
    let _ = writeln!(s, "  hdivrange={} hdivstep={}  radians", cf("%g", h.range), cf("%g", h.step));
    let _ = writeln!(s, "  vdivrange={} vdivstep={}  radians", cf("%g", v.range), cf("%g", v.step));
    let _ = writeln!(s, "  {} divergence steps", r.divsteps);
    let _ = writeln!(s, "  {} sources", r.src.len());
    let _ = writeln!(s, "  {} pixel oversample steps", grid.oversample);
}

/// The report of the statistics, then the integer image, the PGM (unless `-nopgm`) and the noise
/// image (unless `-nonoise`), each file written after its line of the report.
#[allow(clippy::too_many_arguments)]
fn write_images(
    c: &NonBraggConfig,
    grid: &Grid,
    floatimage: &[f32],
    st: &Stats,
    header: &[u8],
    seed: &mut i64,
    s: &mut String,
    files: &mut OutputSet,
    out: &mut dyn Write,
) -> Result<()> {
    let _ = writeln!(s, "max_I = {}  at {} {}", cf("%g", st.max_i), cf("%g", st.max_x), cf("%g", st.max_y));
    let _ = writeln!(s, "mean= {} rms= {} rmsd= {}", cf("%g", st.avg), cf("%g", st.rms), cf("%g", st.rmsd));
    let intfile_scale = crate::stats::int_scale(c.intfile_scale, st.max_i);
    let _ = writeln!(s, "intfile_scale = {}", cf("%g", intfile_scale));
    let (fp, sp) = (grid.fpixels as usize, grid.spixels as usize);
    let intimage = crate::io::smv::int_pixels(&grid.image(floatimage), intfile_scale, c.adc);
    let _ = writeln!(s, "writing {} as 2-byte integers", c.intfile);
    flush(out, s)?;
    files.add_bytes(os_path(&c.intfile).as_path(), &output::smv_bytes(header, &intimage))?;

    let pgm_scale = crate::stats::pgm_scale(c.pgm_scale, intfile_scale, st.rmsd);
    let _ = writeln!(s, "pgm_scale = {}", cf("%g", pgm_scale));
    if c.write_pgm {
        let pgm = crate::io::pgm::pgm_pixels(&grid.image(floatimage), pgm_scale);
        let _ = writeln!(s, "writing {} as 1-byte integers", c.pgmfile);
        flush(out, s)?;
        files.add_bytes(os_path(&c.pgmfile).as_path(), &crate::io::pgm::pgm_bytes(fp, sp, pgm_scale, &pgm))?;
    }
    if !c.calculate_noise {
        return flush(out, s);
    }
    let (noise, psum, overloads) = output::noise_image(c, grid, floatimage, seed);
    let _ = writeln!(s, "{} photons on noise image ({} overloads)", cf("%.0f", psum), overloads);
    let _ = writeln!(s, "writing {} as 2-byte integers", c.noisefile);
    flush(out, s)?;
    files.add_bytes(os_path(&c.noisefile).as_path(), &output::smv_bytes(header, &noise))?;
    Ok(())
}

/// A pixel beyond a 4-byte float (F² × r_e² × fluence × molecules × solid angle too large) is
/// refused before anything is written: the C wrote an infinite image. A solid angle beyond a sphere's
/// (or not finite) names the geometry (`-pixel 1e100` was blamed on F, fluence and sample).
fn check_finite(floatimage: &[f32], c: &NonBraggConfig, g: &Geometry, grid: &Grid) -> Result<()> {
    let Some(i) = floatimage.iter().position(|v| !v.is_finite()) else { return Ok(()) };
    let (f, s) = (i % grid.fpixels as usize, i / grid.fpixels as usize);
    let at = format!("pixel {i} (fast {f}, slow {s}) of the image is {}: more than a 4-byte float holds", floatimage[i]);
    let omega = render::pixel_solid_angle(c, g, grid, f as i64, s as i64);
    // a point pixel's "solid angle" is 1/r² (m⁻²): no sphere bound, but NaN still means no geometry
    let impossible = omega.is_nan() || (!c.point_pixel && omega > 4.0 * std::f64::consts::PI);
    if !impossible {
        return Err(Error::setup(format!("{at}; lower the stol table's F, -fluence/-flux or the sample (-thickness, -density, -molecules, -MW)")));
    }
    let mm = |m: f64| cf("%g", m * 1000.0);
    // Ω ≈ pixel²/distance², so both flags set it: the one named is the one further from its
    // default (0.1 mm, 100 mm); the plane's distance is -distance's only without -close_distance/rotations
    let far = if c.close_distance.is_nan() { "-distance" } else { "-close_distance" };
    let (pixel_off, far_off) = ((c.pixel / 1e-4).ln().abs(), (g.close_distance / 0.1).ln().abs());
    Err(Error::flag(
        if far_off > pixel_off { far } else { "-pixel" },
        format!(
            "{at}: the pixel's solid angle is {} sr (a sphere is 4π): a {} mm pixel with the detector plane {} mm from the sample cannot be; lower -pixel or raise {far}",
            if omega.is_nan() { "NaN".to_string() } else { cf("%g", omega) },
            mm(c.pixel),
            mm(g.close_distance)
        ),
    ))
}

/// No output over the stol table, the source file or another output.
fn check_files(c: &NonBraggConfig, stolfile: &str) -> Result<()> {
    let mut inputs = vec![("-stol", os_path(stolfile))];
    if let Some(f) = &c.sourcefile {
        inputs.push(("-sourcefile", os_path(f)));
    }
    let mut outputs = vec![("-floatfile", os_path(&c.floatfile)), ("-intfile", os_path(&c.intfile))];
    if c.write_pgm {
        outputs.push(("-pgmfile", os_path(&c.pgmfile)));
    }
    if c.calculate_noise {
        outputs.push(("-noisefile", os_path(&c.noisefile)));
    }
    crate::io::atomic::check_no_clobber(&inputs, &outputs)
}

/// Print what `s` holds to `out` and empty it.
fn flush(out: &mut dyn Write, s: &mut String) -> Result<()> {
    out.write_all(s.as_bytes()).map_err(|e| Error::setup(format!("writing stdout: {e}")))?;
    s.clear();
    Ok(())
}
