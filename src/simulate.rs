//! One simulation from start to finish: setup, render, statistics, output files, noise — what
//! `nanobragg-rs simulate` does, with the C's stdout. Also the pieces separately, for warm benchmarks.

use crate::cfmt::{cf, g};
use crate::config::Config;
use crate::crystal::RTD;
use crate::experiment::{self, resolve_out, Experiment};
use crate::io::smv::{int_pixels, write_smv, SmvHeader};
use crate::kernel::{self, RenderOutput, Trace};
use crate::report::Log;
use crate::stats::{image_stats, ImageStats};
use crate::{Error, Result};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Wall time of each phase of a run.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Timings {
    pub setup_s: f64,
    pub render_s: f64,
    pub io_s: f64,
}

/// What a run produced, for the closing summary and the benchmark harness.
#[derive(Clone, Debug)]
pub struct RunSummary {
    pub stats: ImageStats,
    pub timings: Timings,
    pub pixels: usize,
    pub steps: i64,
    pub files: Vec<PathBuf>,
}

/// Build the experiment (setup phase) and return it with the C's setup messages.
pub fn setup(cfg: &Config) -> Result<(Experiment, Log)> {
    let mut log = Log::default();
    let exp = experiment::build(cfg, &mut log)?;
    Ok((exp, log))
}

/// A rayon pool with `n` threads, built once per process and reused (warm runs should not pay for
/// starting threads).
fn thread_pool(n: usize) -> Result<std::sync::Arc<rayon::ThreadPool>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pools.get(&n) {
        return Ok(p.clone());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| Error::setup(format!("cannot start {n} threads: {e}")))?;
    let pool = Arc::new(pool);
    pools.insert(n, pool.clone());
    Ok(pool)
}

/// Render with the requested thread count (None: rayon's default, which honours RAYON_NUM_THREADS).
pub fn render(exp: &Experiment, threads: Option<usize>, progress: &(dyn Fn(usize) + Sync)) -> Result<RenderOutput> {
    match threads {
        Some(n) => Ok(thread_pool(n)?.install(|| kernel::render(exp, progress))),
        None => Ok(kernel::render(exp, progress)),
    }
}

/// The SMV header values nanoBragg writes, from the resolved experiment.
pub fn smv_header(exp: &Experiment) -> SmvHeader {
    let d = &exp.det;
    let px = d.pixel_size;
    SmvHeader {
        size1: d.fpixels,
        size2: d.spixels,
        pixel_size: px * 1000.0,
        distance: d.distance * 1000.0,
        wavelength: exp.lambda0 * 1e10,
        beam_center_x: d.xbeam * 1000.0,
        beam_center_y: d.ybeam * 1000.0,
        adxv_center_x: d.fbeam * 1000.0,
        adxv_center_y: (d.detsize_s - d.sbeam) * 1000.0,
        mosflm_center_x: (d.sbeam - 0.5 * px) * 1000.0,
        mosflm_center_y: (d.fbeam - 0.5 * px) * 1000.0,
        denzo_x_beam: (d.sbeam - 0.0 * px) * 1000.0,
        denzo_y_beam: (d.fbeam - 0.0 * px) * 1000.0,
        dials_origin: d.dials_origin,
        xds_orgx: d.orgx,
        xds_orgy: d.orgy,
        close_distance: d.close_distance * 1000.0,
        phi: exp.phi0 * RTD,
        osc_start: exp.phi0 * RTD,
        osc_range: exp.osc * RTD,
        twotheta: d.detector_twotheta * RTD,
    }
}

/// Output paths (resolved against `--out-dir`) with their roles, in the order they are written.
pub fn output_paths(cfg: &Config) -> Vec<(&'static str, PathBuf)> {
    let mut v = vec![("float", resolve_out(cfg, &cfg.output.floatfile)), ("int", resolve_out(cfg, &cfg.output.intfile))];
    if cfg.output.write_pgm {
        v.push(("pgm", resolve_out(cfg, &cfg.output.pgmfile)));
    }
    if cfg.output.calculate_noise {
        v.push(("noise", resolve_out(cfg, &cfg.output.noisefile)));
    }
    if let Some(p) = &cfg.output.pngfile {
        v.push(("png", resolve_out(cfg, p)));
    }
    v
}

/// Refuse outputs that would overwrite an input or land in a missing directory, before any work.
pub fn check_outputs(cfg: &Config) -> Result<()> {
    if let Some(dir) = &cfg.output.out_dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::Output { path: dir.clone(), reason: format!("cannot create the output directory: {e}") })?;
    }
    let mut inputs: Vec<&Path> = Vec::new();
    for p in [&cfg.params.hkl_file, &cfg.params.mat_file, &cfg.params.source_file].into_iter().flatten() {
        inputs.push(p);
    }
    if let Some(m) = &cfg.mask {
        inputs.push(&m.path);
    }
    if let Some(m) = &cfg.img {
        inputs.push(&m.path);
    }
    let canon = |p: &Path| std::fs::canonicalize(p).ok();
    let outs = output_paths(cfg);
    for (role, out) in &outs {
        let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(Error::Output { path: out.clone(), reason: format!("directory {} does not exist", parent.display()) });
        }
        if out.is_dir() {
            return Err(Error::Output { path: out.clone(), reason: "is a directory".into() });
        }
        if let Some(co) = canon(out) {
            for inp in &inputs {
                if canon(inp).as_ref() == Some(&co) {
                    return Err(Error::Output { path: out.clone(), reason: format!("the {role} image would overwrite an input file") });
                }
            }
        }
    }
    for (i, (_, a)) in outs.iter().enumerate() {
        for (_, b) in &outs[i + 1..] {
            if a == b {
                return Err(Error::Output { path: a.clone(), reason: "the same file is named for two outputs".into() });
            }
        }
    }
    Ok(())
}

/// Write every output file the C writes (float, int, PGM, noise) plus the PNG preview, printing the
/// C's closing lines. Consumes the RNG state of the experiment for the noise image.
pub fn write_outputs(cfg: &Config, exp: &mut Experiment, r: &RenderOutput, out: &mut dyn Write) -> Result<(ImageStats, Vec<PathBuf>)> {
    let float_path = resolve_out(cfg, &cfg.output.floatfile);
    let _ = writeln!(out, "writing {} as {} 4-byte floats", cfg.output.floatfile.display(), exp.pixels());
    // The float file is written on its own thread while everything derived from the image (statistics,
    // integer, PGM and noise images) is computed and written: they are independent, and writing is
    // mostly a copy into the page cache.
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| crate::io::float::write_float_image(&float_path, &r.float));
        let derived = write_derived_outputs(cfg, exp, r, out);
        let written = writer.join().unwrap_or_else(|_| Err(Error::Output { path: float_path.clone(), reason: "writer thread panicked".into() }));
        written?;
        let (stats, mut files) = derived?;
        files.insert(0, float_path.clone());
        Ok((stats, files))
    })
}

/// Everything after the float file, in the C's order: statistics, int image, PGM, PNG, noise image.
fn write_derived_outputs(cfg: &Config, exp: &mut Experiment, r: &RenderOutput, out: &mut dyn Write) -> Result<(ImageStats, Vec<PathBuf>)> {
    let w = |out: &mut dyn Write, s: String| {
        let _ = writeln!(out, "{s}");
    };
    let d = &exp.det;
    let (fp, sp) = (d.fpixels, d.spixels);
    let mut files = Vec::new();
    let stats = image_stats(&r.float, fp, sp, exp.roi, exp.mask.as_deref(), exp.subpixel_size, exp.oversample);
    w(out, format!("max_I = {}  at {} {}", g(stats.max_i), g(stats.max_i_x), g(stats.max_i_y)));
    w(out, format!("mean= {} rms= {} rmsd= {}", g(stats.mean), g(stats.rms), g(stats.rmsd)));

    let mut intfile_scale = cfg.output.intfile_scale;
    if intfile_scale <= 0.0 {
        intfile_scale = 1.0;
        if stats.max_i > 0.0 {
            intfile_scale = 55000.0 / stats.max_i;
        }
    }
    w(out, format!("intfile_scale = {}", g(intfile_scale)));
    let header = smv_header(exp);
    let roi = exp.roi;
    let noise_path = resolve_out(cfg, &cfg.output.noisefile);
    let seed = exp.seed;
    let rng = &mut exp.rng;
    // The noise image is one serial random stream; it is drawn and written on its own thread while
    // the integer, PGM and PNG images are made, and reported in the C's order afterwards.
    std::thread::scope(|scope| -> Result<()> {
        let noise = cfg.output.calculate_noise.then(|| {
            let (header, noise_path) = (&header, &noise_path);
            scope.spawn(move || {
                let mut seed = seed;
                crate::noise::write_noise_smv(noise_path, header, rng, &mut seed, &r.float, fp, sp, roi, cfg.output.adc_offset)
            })
        });
        let ints = int_pixels(&r.float, fp, sp, roi, intfile_scale, cfg.output.adc_offset);
        w(out, format!("writing {} as 2-byte integers", cfg.output.intfile.display()));
        let int_path = resolve_out(cfg, &cfg.output.intfile);
        write_smv(&int_path, &header, &ints)?;
        files.push(int_path);
        drop(ints);

        if cfg.output.write_pgm {
            let mut pgm_scale = cfg.output.pgm_scale;
            if pgm_scale <= 0.0 {
                pgm_scale = intfile_scale;
                if stats.rmsd > 0.0 {
                    pgm_scale = 250.0 / (5.0 * stats.rmsd);
                }
            }
            w(out, format!("pgm_scale = {}", g(pgm_scale)));
            let bytes = crate::io::pgm::pgm_pixels(&r.float, fp, sp, roi, pgm_scale);
            w(out, format!("writing {} as 1-byte integers", cfg.output.pgmfile.display()));
            let p = resolve_out(cfg, &cfg.output.pgmfile);
            crate::io::pgm::write_pgm(&p, fp, sp, pgm_scale, &bytes)?;
            files.push(p);
        }
        if let Some(png) = &cfg.output.pngfile {
            let p = resolve_out(cfg, png);
            crate::io::png::write_png_preview(&p, &r.float, fp, sp)?;
            files.push(p);
        }
        if let Some(handle) = noise {
            let noise_failed = || Error::Output { path: noise_path.clone(), reason: "noise thread panicked".into() };
            let (photons, overloads) = handle.join().map_err(|_| noise_failed())??;
            w(out, format!("{} photons on noise image ({} overloads)", cf("%.0f", photons), overloads));
            w(out, format!("writing {} as 2-byte integers", cfg.output.noisefile.display()));
            files.push(noise_path.clone());
        }
        Ok(())
    })?;
    Ok((stats, files))
}

/// Print the `-printout` block for one pixel (the C prints it from inside its loop).
fn printout_block(exp: &Experiment, f: usize, s: usize, value: f32, out: &mut dyn Write) {
    let mut interp = kernel::InterpState { enabled: exp.interpolate, first_oob: None };
    let mut t = Trace::default();
    kernel::reference::render_pixel(exp, f, s, &mut interp, Some(&mut t));
    let p = t.pixel_pos;
    let twotheta = (p[1] * p[1] + p[2] * p[2]).sqrt().atan2(p[0]);
    let test = (twotheta / 2.0).sin() / (exp.lambda0 * 1e10);
    let mut lines = vec![
        format!("{} {} : stol = {} or {}", cf_int(f), cf_int(s), g(t.stol), g(test)),
        format!("at {} {} {}", g(p[0]), g(p[1]), g(p[2])),
        format!(
            "hkl= {} {} {}  hkl0= {} {} {}",
            cf("%f", t.hkl[0]),
            cf("%f", t.hkl[1]),
            cf("%f", t.hkl[2]),
            t.hkl0[0],
            t.hkl0[1],
            t.hkl0[2]
        ),
        format!(" F_cell={}  F_latt={}   I = {}", g(t.f_cell), g(t.f_latt), g(t.i)),
        format!("I/steps {}", cf("%15.10g", t.i / exp.steps as f64)),
        format!("polar   {}", cf("%15.10g", t.polar)),
        format!("omega   {}", cf("%15.10g", t.omega)),
        format!("capfrac {}", cf("%15.10g", t.capture)),
        format!("pixel   {}", cf("%15.10g", value as f64)),
        "real-space cell vectors (Angstrom):".to_string(),
        format!("     {:<10}  {:<10}  {:<10}", "a", "b", "c"),
    ];
    for (i, axis) in ["X", "Y", "Z"].iter().enumerate() {
        lines.push(format!(
            "{axis}: {} {} {}",
            cf("%11.8f", t.abc[0][i] * 1e10),
            cf("%11.8f", t.abc[1][i] * 1e10),
            cf("%11.8f", t.abc[2][i] * 1e10)
        ));
    }
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
}

fn cf_int(v: usize) -> String {
    format!("{v:4}")
}

/// The whole `simulate` command: prints the C's messages to `out`, a progress bar on stderr when it is
/// a terminal, and returns the summary.
pub fn run(cfg: &Config, out: &mut dyn Write) -> Result<RunSummary> {
    check_outputs(cfg)?;
    let t0 = Instant::now();
    let (mut exp, mut log) = setup(cfg)?;
    if !cfg.run.quiet {
        let _ = log.flush_to(out);
    }
    let setup_s = t0.elapsed().as_secs_f64();

    let t1 = Instant::now();
    let show_bar = cfg.run.progress && !cfg.run.quiet && !cfg.run.printout && std::io::stderr().is_terminal();
    let bar = if show_bar {
        let b = indicatif::ProgressBar::new(exp.det.spixels as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} rows, ETA {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.enable_steady_tick(Duration::from_millis(200));
        Some(b)
    } else {
        None
    };
    let tick = |n: usize| {
        if let Some(b) = &bar {
            b.inc(n as u64);
        }
    };
    let r = render(&exp, cfg.run.threads, &tick)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let render_s = t1.elapsed().as_secs_f64();

    let mut sink = std::io::sink();
    let out: &mut dyn Write = if cfg.run.quiet { &mut sink } else { out };
    if let Some((h, k, l, h0, k0, l0)) = r.interp_oob {
        let _ = writeln!(
            out,
            "WARNING: out of range for three point interpolation: h,k,l,h0,k0,l0: {},{},{},{},{},{} ",
            g(h),
            g(k),
            g(l),
            h0,
            k0,
            l0
        );
        // no newline: the C's next output (the blank line below) ends this line
        let _ = write!(out, "WARNING: further warnings will not be printed! ");
    }
    if exp.printout {
        let (pf, ps) = exp.printout_pixel.unwrap_or((-1, -1));
        for s in 0..exp.det.spixels {
            for f in 0..exp.det.fpixels {
                if kernel::pixel_active(&exp, f, s) && ((f as i64 == pf && s as i64 == ps) || pf < 0) {
                    printout_block(&exp, f, s, r.float[s * exp.det.fpixels + f], out);
                }
            }
        }
    }
    let _ = writeln!(out);
    let steps = exp.steps as f64;
    let _ = writeln!(
        out,
        "solid angle subtended by detector = {} steradian ( {}% sphere)",
        g(r.omega_sum / steps),
        g(100.0 * r.omega_sum / steps / 4.0 / std::f64::consts::PI)
    );
    let t2 = Instant::now();
    let (stats, files) = write_outputs(cfg, &mut exp, &r, out)?;
    let io_s = t2.elapsed().as_secs_f64();
    Ok(RunSummary {
        stats,
        timings: Timings { setup_s, render_s, io_s },
        pixels: exp.pixels(),
        steps: exp.steps,
        files,
    })
}
