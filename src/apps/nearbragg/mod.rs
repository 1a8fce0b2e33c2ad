//! `nearbragg`: nearBragg.c, the suite's assumption-free simulator. Instead of a crystal lattice it
//! sums the waves of a list of point scatterers (`-file`: X Y Z [occupancy B phase]) over the exact
//! source → atom → pixel path lengths, for every pixel, sub-pixel, wavelength, divergence point and
//! source depth: near-field geometry, finite source distance and depth, coherent sums with phases
//! (`-coherent`, with its sin/cos images) and runs that add to earlier ones (`-accumulate`).
//!
//! Rows are rendered in parallel, each pixel in the C's order and arithmetic (its truncated 2π and
//! π included), so the float image does not depend on the thread count and the SMV file is the C's.
//! The atom loop runs eight adjacent pixels as SIMD lanes (`simd`, AVX-512 or AVX2+FMA picked at run
//! time, `NANOBRAGG_SIMD=scalar` or a CPU without FMA keeps the scalar loop that mirrors the C): the
//! same path lengths and phases to the bit, sin/cos/exp within a few 10⁻¹⁶ of glibc's, and an atom
//! and pixel in about 2.8 ns of one AVX-512 core against the C's 63-67 ns (glibc's sin and cos of
//! 10⁹–10¹² rad are slow; reports/benchmarks/2026-11-26-nearbragg-simd).
//!
//! Differences from nearBragg.c:
//! * refused with a one-line error (exit 9), nothing written: a missing or malformed atom list (a
//!   value that is not a finite number, with its line number), zero or negative wavelength, pixel or
//!   distance, a detector, step count or amount of work that cannot fit ([`MAX_WORK`]), a
//!   `-accumulate` input that is not exactly the image's size; the C reads garbage, divides by zero
//!   or overflows, or takes a larger file's first rows as the image; one with a NaN or infinite pixel;
//! * refused as simulate refuses them, with its checks and messages: a `-lambda` or `-dispersion`
//!   step outside simulate's wavelength range (200 % reached 0: NaN pixels), an inverted `-roi` (an
//!   all-zero image), zero or parallel detector axes, a negative `-fluence`;
//! * all outputs are written at the end under temporary names and renamed together;
//! * the C's OpenMP loop shares variables between threads (wrong with two threads); the port's is
//!   deterministic.

mod atoms;
#[cfg(any(test, feature = "check-kernels"))]
pub(crate) mod check;
mod config;
mod output;
pub(crate) mod render;
mod setup;
pub(crate) mod simd;

pub use atoms::{parse_atoms, read_atoms, Atoms};
pub use config::{NearBraggConfig, PI, RTD, TWO_PI, UNSET};
pub use output::Stats;
pub use setup::{resolve_steps, BeamSteps, Detector, Steps};

use crate::base::os_text::os_path;
use crate::base::c::printf::cf;
use crate::io::atomic::{commit_all, AtomicFile};
use crate::{Error, Result};
use render::{Images, Scene};
use std::fmt::Write as _;
use std::io::Write;

/// Most atom-wave sums (rendered pixels × sub-pixels × wavelengths × divergence points × depths ×
/// atoms) of one run: 10¹³ takes about 8 CPU-hours with the SIMD atom loop (2.8 ns per wave on an
/// AVX-512 core) and a week with the scalar one (the C's 67 ns); more is refused before anything runs.
pub const MAX_WORK: f64 = 1e13;

/// A run's images: the float image (photons/pixel), and with `-coherent` the average complex
/// amplitude's sin and cos images.
#[derive(Clone, Debug)]
pub struct NearBraggImages {
    pub xpixels: usize,
    pub ypixels: usize,
    pub float: Vec<f32>,
    pub sin: Vec<f32>,
    pub cos: Vec<f32>,
    pub coherent: bool,
    pub stats: Stats,
}

/// Everything set up before the pixel loop.
pub(crate) struct Prepared {
    pub(crate) det: Detector,
    pub(crate) atoms: Atoms,
    pub(crate) steps: BeamSteps,
    pub(crate) div: Vec<(f64, f64)>,
    pub(crate) oversample: i32,
    pub(crate) nsteps: i32,
    pub(crate) images: Images,
}

/// Read `path` as native floats (`fread`, lines 872-899), refused unless it holds exactly the image:
/// the C read garbage past a shorter file's end and took the first rows of a larger one (another
/// detector size) as this image, then wrote back only those (as noisify's `-floatfile`).
fn read_floats(path: &str, (xpixels, ypixels): (i32, i32), flag: &str) -> Result<Vec<f32>> {
    let n = xpixels as usize * ypixels as usize;
    let bytes = std::fs::read(os_path(path)).map_err(|e| Error::file(path, format!("{flag}: cannot read: {e}")))?;
    if bytes.len() != 4 * n {
        return Err(Error::file(
            path,
            format!("{flag}: holds {} bytes ({} floats), the {xpixels}x{ypixels} image (-detpixels/-detsize/-pixel) is {n} floats (-accumulate)", bytes.len(), bytes.len() / 4),
        ));
    }
    let pixels: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    // a NaN or infinite pixel would stay so whatever is added (refused as noisify's -floatfile is)
    crate::io::float::require_finite(&pixels, os_path(path).as_path(), flag, Some(xpixels as usize))?;
    Ok(pixels)
}

/// No output over the atom list or another output (with `-accumulate` the images are read and then
/// written again on purpose).
fn check_files(c: &NearBraggConfig) -> Result<()> {
    let inputs: Vec<(&str, std::path::PathBuf)> = c.file.iter().map(|f| ("-file", os_path(f))).collect();
    let mut outputs = vec![("-floatfile", os_path(&c.floatfile)), ("-intfile", os_path(&c.intfile))];
    if c.coherent {
        outputs.push(("-sinfile", os_path(&c.sinfile)));
        outputs.push(("-cosfile", os_path(&c.cosfile)));
    }
    crate::io::atomic::check_no_clobber(&inputs, &outputs)
}

/// The starting images (lines 860-902): zeros, or the earlier run's files with `-accumulate`.
fn start_images(c: &NearBraggConfig, det: &Detector, log: &mut String) -> Result<Images> {
    let n = det.pixels();
    let mut img = Images { float: vec![0.0; n], sin: vec![0.0; n], cos: vec![0.0; n] };
    if !c.accumulate {
        return Ok(img);
    }
    let mut load = |name: &str, what: &str, init: &str, flag: &str, dst: &mut Vec<f32>| -> Result<()> {
        if !os_path(name).as_path().exists() {
            let _ = writeln!(log, "WARNING: no {name} {what}-file to read!\nsetting initial {init} to all zeroes...");
            return Ok(());
        }
        let _ = writeln!(log, "importing {}: {name}", if what == "float" { "intensity" } else { what });
        *dst = read_floats(name, (det.xpixels, det.ypixels), flag)?;
        Ok(())
    };
    if c.coherent {
        load(&c.sinfile, "sin", "Im(F)", "-sinfile", &mut img.sin)?;
        load(&c.cosfile, "cos", "Re(F)", "-cosfile", &mut img.cos)?;
    } else {
        load(&c.floatfile, "float", "image", "-floatfile", &mut img.float)?;
    }
    Ok(img)
}

/// Refuse a run whose images or amount of work cannot fit; the memory refusal names the flags that
/// sized the detector (`-detpixels`, else `-detsize` over `-pixel`), as nonbragg's does.
fn check_size(c: &NearBraggConfig, det: &Detector, atoms: usize, steps: f64) -> Result<()> {
    use crate::base::memory::{human, memory_budget};
    let bytes = det.pixels() as u64 * 14 + 512;
    let flag = if c.xpixels != 0 || c.ypixels != 0 { "-detpixels" } else { "-detsize/-pixel" };
    crate::base::memory::check_alloc(
        || Error::flag(flag, format!("{}x{} pixels need about {} of memory; {} is available", det.xpixels, det.ypixels, human(bytes), human(memory_budget()))),
        Some(bytes),
    )?;
    if steps > i32::MAX as f64 {
        return Err(Error::setup(format!("nearbragg: {} sub-steps per pixel is more than the C's int can count", cf("%g", steps))));
    }
    let work = det.roi_pixels() as f64 * steps * atoms as f64;
    if work > MAX_WORK {
        return Err(Error::setup(format!(
            "nearbragg: {} pixels x {} steps x {} atoms = {} atom waves, more than {} (many CPU-hours); use fewer atoms, pixels (-roi) or steps",
            det.roi_pixels(),
            cf("%g", steps),
            atoms,
            cf("%g", work),
            cf("%g", MAX_WORK)
        )));
    }
    Ok(())
}

/// Lines 457-918: read the atoms, set up detector and steps, load the accumulated images.
pub(crate) fn prepare(c: &NearBraggConfig, log: &mut String) -> Result<Prepared> {
    setup::check(c)?;
    let file = c.file.as_deref().ok_or_else(|| Error::flag("-file", "no atom list given (usage: nearbragg -file atom_list.txt)"))?;
    let bytes = std::fs::read(os_path(file)).map_err(|e| Error::file(file, format!("cannot read atom list: {e}")))?;
    let counted = atoms::count_atoms(&bytes);
    if c.debug {
        let blanks = bytes.split_inclusive(|&b| b == b'\n').count().saturating_sub(counted);
        *log += &"blank\n".repeat(blanks);
    }
    let _ = writeln!(log, "counted {counted} atoms in {file}");
    let det = setup::detector(c)?;
    let steps = BeamSteps::new(c)?;
    setup::check_dispersion(c, &steps)?;
    let _ = writeln!(log, "reading {file}");
    let atoms = parse_atoms(os_path(file).as_path(), &bytes, c.debug, log)?;
    let oversample = setup::oversample(c, atoms.size_max, log)?;
    let div = steps.divergence();
    let nsteps_f = div.len() as f64 * steps.disp.steps as f64 * steps.depth.steps as f64 * oversample as f64 * oversample as f64;
    check_size(c, &det, atoms.len(), nsteps_f)?;
    let images = start_images(c, &det, log)?;
    let nsteps = nsteps_f as i32;
    Ok(Prepared { det, atoms, steps, div, oversample, nsteps, images })
}

/// The report printed before the pixel loop (lines 904-952).
fn report(c: &NearBraggConfig, p: &Prepared, s: &mut String) {
    let g = |x: f64| cf("%g", x);
    for &(h, v) in &p.div {
        let _ = writeln!(s, "divergence deviation: {} {}", g(h), g(v));
    }
    for k in 0..p.steps.disp.steps {
        let _ = writeln!(s, "lambda{k} = {}", cf("%.15g", p.steps.lambda(c.lambda0, k)));
    }
    for k in 0..p.steps.depth.steps {
        let _ = writeln!(s, "depth{k} = {} A", g(p.steps.ddepth(k) * 1e10));
    }
    let (d, st) = (&p.det, &p.steps);
    let _ = writeln!(s, "  {} atoms", p.atoms.len());
    let _ = writeln!(s, "  wave={} meters +/- {}% in {} steps", g(c.lambda0), g(st.disp.range * 100.0), st.disp.steps);
    let _ = writeln!(s, "  distance={} detsize={}x{}  pixel={} meters ({}x{} pixels)", g(c.distance), g(d.detsize_x), g(d.detsize_y), g(c.pixel), d.xpixels, d.ypixels);
    let _ = writeln!(s, "  Xbeam={} Ybeam={}", g(d.xbeam), g(d.ybeam));
    let _ = writeln!(s, "  roi: {} < z < {} && {} < y < {}", d.roi[0], d.roi[1], d.roi[2], d.roi[3]);
    let _ = writeln!(s, "  hdivrange={} hdivstep={}  radians", g(st.hdiv.range), g(st.hdiv.step));
    let _ = writeln!(s, "  vdivrange={} vdivstep={}  radians", g(st.vdiv.range), g(st.vdiv.step));
    let _ = writeln!(s, "  {} divergence steps", p.div.len());
    if c.far_source {
        *s += "  source is VERY far away\n";
    } else {
        let _ = writeln!(s, "  source at {} meters and {} deep in {} depth steps", g(c.source_distance), g(st.depth.range), st.depth.steps);
    }
    let _ = writeln!(s, "  {} pixel oversample steps", p.oversample);
    let _ = writeln!(s, "  coherent source: {}", c.coherent as i32);
}

/// The atom loop's SIMD level (see [`NearBraggConfig::backend`]), or `None` for the scalar loop.
pub(crate) fn level_of(c: &NearBraggConfig) -> Option<crate::base::cpu::SimdLevel> {
    match c.backend.unwrap_or_else(crate::kernel::active_backend) {
        crate::kernel::Backend::Reference => None,
        crate::kernel::Backend::Simd(level) => simd::fast_level(level),
        crate::kernel::Backend::Gpu => simd::fast_level(crate::kernel::detected_level()),
    }
}

/// Run the pixel loop on `c.threads` threads (0: the global pool); returns the printout text.
fn render_all(c: &NearBraggConfig, p: &mut Prepared) -> Result<String> {
    let scene = Scene { c, det: &p.det, atoms: &p.atoms, steps: &p.steps, div: &p.div, oversample: p.oversample, nsteps: p.nsteps, level: level_of(c) };
    if c.threads == 0 {
        return Ok(render::render(&scene, &mut p.images));
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(crate::base::cpu::useful_threads(c.threads)).build().map_err(|e| Error::setup(format!("nearbragg: cannot start {} threads: {e}", c.threads)))?;
    Ok(pool.install(|| render::render(&scene, &mut p.images)))
}

/// The statistics of a rendered run.
fn stats_of(c: &NearBraggConfig, p: &Prepared) -> Stats {
    let scene = Scene { c, det: &p.det, atoms: &p.atoms, steps: &p.steps, div: &p.div, oversample: p.oversample, nsteps: p.nsteps, level: level_of(c) };
    let last = p.oversample - 1;
    output::statistics(&p.det, &p.images.float, |x, y| {
        let (xd, yd, _) = render::subpixel_position(&scene, x, y, last, last);
        (xd, yd)
    })
}

/// Render nearBragg.c's images without writing files or printing (the library's and Python's entry).
pub fn simulate(c: &NearBraggConfig) -> Result<NearBraggImages> {
    let mut log = String::new();
    let mut p = prepare(c, &mut log)?;
    render_all(c, &mut p)?;
    let stats = stats_of(c, &p);
    let (xpixels, ypixels) = (p.det.xpixels as usize, p.det.ypixels as usize);
    let Images { float, sin, cos } = p.images;
    Ok(NearBraggImages { xpixels, ypixels, float, sin, cos, coherent: c.coherent, stats })
}

/// Run nearBragg.c: render, print its report to `out`, write its files (all of them, or none).
pub fn run(c: &NearBraggConfig, out: &mut dyn Write) -> Result<()> {
    check_files(c)?;
    let mut s = String::from("nearBragg assumption-free diffraction simulator - James Holton 11-21-17\n");
    let prepared = prepare(c, &mut s);
    let mut p = match prepared {
        Ok(p) => p,
        Err(e) => {
            flush(out, &mut s)?;
            return Err(e);
        }
    };
    report(c, &p, &mut s);
    flush(out, &mut s)?;
    let printout = render_all(c, &mut p)?;
    if c.printout {
        s += &printout;
    } else if c.progress {
        s += &output::progress_lines(&p.det, p.det.roi_pixels());
    }
    let scene = Scene { c, det: &p.det, atoms: &p.atoms, steps: &p.steps, div: &p.div, oversample: p.oversample, nsteps: p.nsteps, level: level_of(c) };
    let omega_sum = render::omega_sum(&scene);
    let st = stats_of(c, &p);
    s += "\n";
    let _ = writeln!(s, "solid angle subtended by detector = {} steradian ( {}% sphere)", cf("%g", omega_sum), cf("%g", 100.0 * omega_sum / 4.0 / PI));
    write_outputs(c, &p, &st, &mut s, out)?;
    let bad = p.images.float.iter().filter(|v| !v.is_finite()).count();
    crate::base::log::warn_nonfinite(bad, p.images.float.len());
    Ok(())
}

/// Lines 1221-1272: the float image, the sin/cos images with `-coherent`, the SMV file; each line of
/// the report as the C prints it, the files renamed into place together at the end.
fn write_outputs(c: &NearBraggConfig, p: &Prepared, st: &Stats, s: &mut String, out: &mut dyn Write) -> Result<()> {
    let n = p.det.pixels();
    let mut files = Vec::new();
    let mut floats = |name: &str, v: &[f32], s: &mut String| -> Result<()> {
        let _ = writeln!(s, "writing {name} as {n} 4-byte floats");
        let mut f = AtomicFile::create(os_path(name).as_path())?;
        crate::io::write_le(&mut f, v).map_err(|e| Error::write(name, e))?;
        files.push(f.finish()?);
        Ok(())
    };
    floats(&c.floatfile, &p.images.float, s)?;
    if c.coherent {
        floats(&c.sinfile, &p.images.sin, s)?;
        floats(&c.cosfile, &p.images.cos, s)?;
    }
    let _ = writeln!(s, "max_I = {}  at {} {}", cf("%g", st.max_i), cf("%g", st.max_x), cf("%g", st.max_y));
    let _ = writeln!(s, "mean= {} rms= {}", cf("%g", st.avg), cf("%g", st.rms));
    let scale = output::int_scale(c.intfile_scale, st.max_i);
    let _ = writeln!(s, "intfile_scale = {}", cf("%g", scale));
    let ints = output::int_image(&p.det, &p.images.float, scale);
    let _ = writeln!(s, "writing {} as 2-byte integers", c.intfile);
    let mut f = AtomicFile::create(os_path(&c.intfile).as_path())?;
    f.write_all(&output::smv_bytes(c, &p.det, &ints)).map_err(|e| Error::write(&c.intfile, e))?;
    files.push(f.finish()?);
    commit_all(files)?;
    flush(out, s)
}

/// Print what `s` holds to `out` and empty it.
fn flush(out: &mut dyn Write, s: &mut String) -> Result<()> {
    out.write_all(s.as_bytes()).map_err(|e| Error::setup(format!("writing stdout: {e}")))?;
    s.clear();
    Ok(())
}
