//! One simulation from start to finish: setup, render, statistics, output files, noise — what
//! `nanobragg-rs simulate` does, with the C's stdout. Also the pieces separately, for warm benchmarks.

use crate::base::c::printf::{cf, g};
use crate::run::config::Config;
use crate::base::consts::RTD;
use crate::experiment::Experiment;
use crate::run::config::resolve_out;
use crate::run::setup::add_setup_outputs;
use crate::run::outputs::{self, OutputCtx, Planned};
use crate::io::smv::SmvHeader;
use crate::kernel::{self, RenderOptions, RenderOutput, Trace};
use crate::base::log::Log;
use crate::stats::{image_stats, ImageStats};
use crate::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Wall time of each phase of a run.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Timings {
    pub setup_s: f64,
    pub render_s: f64,
    pub io_s: f64,
}

/// The environment variable naming a file where `nanobragg-rs simulate` writes its [`PhaseTimings`]
/// as JSON after a successful run (bench-detailed sets it for its fresh-process runs, so it never
/// parses the human-readable `done:` line).
pub const TIMINGS_JSON_ENV: &str = "NANOBRAGG_TIMINGS_JSON";

/// What `simulate` writes to `$NANOBRAGG_TIMINGS_JSON`: the phase split of the run.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PhaseTimings {
    pub setup_s: f64,
    pub render_s: f64,
    pub io_s: f64,
    /// Resolution of the clock the phases were timed with (`clock_getres(CLOCK_MONOTONIC)`, which
    /// `std::time::Instant` reads on Linux), seconds.
    pub resolution_s: f64,
    pub pixels: usize,
    pub steps: i64,
}

impl PhaseTimings {
    pub fn of(summary: &RunSummary) -> Self {
        let t = summary.timings;
        PhaseTimings {
            setup_s: t.setup_s,
            render_s: t.render_s,
            io_s: t.io_s,
            resolution_s: monotonic_resolution_s(),
            pixels: summary.pixels,
            steps: summary.steps,
        }
    }
}

/// The resolution of the monotonic clock (1 ns where it cannot be read).
fn monotonic_resolution_s() -> f64 {
    // SAFETY: timespec is plain old data that clock_getres fills in.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and a valid pointer to a timespec.
    let ok = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) } == 0;
    let r = ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
    if ok && r > 0.0 {
        r
    } else {
        1e-9
    }
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

/// The setup phase: read the inputs ([`Inputs::load`]), build the experiment from them without I/O
/// ([`Experiment::build`]) and return the experiment with the C's setup messages
/// ([`crate::run::summary::setup_summary`]). `-hklout` is written with the images ([`write_outputs_and_hklout`]).
pub fn setup(cfg: &Config) -> Result<(Experiment, Log)> {
    setup_with_inputs(cfg).map(|(e, l, _)| (e, l))
}

/// `cfg` with `--backend auto` settled on the CPU where `samples` are too few for a GPU
/// ([`crate::run::config::RunOptions::settle_auto`]), and the line that says so; `None` otherwise.
fn with_auto_settled(cfg: &Config, samples: f64) -> Option<(Config, String)> {
    if cfg.run.backend != crate::run::config::BackendChoice::Auto {
        return None;
    }
    let mut c = cfg.clone();
    let note = c.run.settle_auto(samples, "")?;
    Some((c, note))
}

/// [`setup`], keeping the inputs (the derivative images build the setup again around them).
pub fn setup_with_inputs(cfg: &Config) -> Result<(Experiment, Log, crate::experiment::inputs::Inputs)> {
    let inputs = crate::run::load::load_inputs(cfg)?;
    let exp = crate::run::setup::build_experiment(cfg, &inputs)?;
    let log = Log { lines: crate::run::summary::setup_summary(cfg, &inputs, &exp) };
    Ok((exp, log, inputs))
}

/// A rayon pool with `n` threads, built once per process and reused (warm runs should not pay for
/// starting threads).
fn thread_pool(n: usize) -> Result<std::sync::Arc<rayon::ThreadPool>> {
    let n = crate::base::cpu::useful_threads(n);
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

/// Render with `opts` on the requested thread count (None: rayon's default, which honours
/// RAYON_NUM_THREADS).
pub fn render(exp: &Experiment, opts: &RenderOptions, threads: Option<usize>, progress: &(dyn Fn(usize) + Sync)) -> Result<RenderOutput> {
    render_reusing(exp, opts, threads, None, progress)
}

/// [`render`], each pixel's geometry read from `geometry` where it is this experiment's (a dataset's
/// frames: [`kernel::PixelGeometry`]).
pub fn render_reusing(exp: &Experiment, opts: &RenderOptions, threads: Option<usize>, geometry: Option<&kernel::PixelGeometry>, progress: &(dyn Fn(usize) + Sync)) -> Result<RenderOutput> {
    in_pool(threads, || kernel::render_reusing(exp, opts, geometry, progress))
}

/// [`render`] that stops early when `stop` is set (from any thread); `Ok(None)` when it was stopped.
pub fn render_until(exp: &Experiment, opts: &RenderOptions, threads: Option<usize>, progress: &(dyn Fn(usize) + Sync), stop: &std::sync::atomic::AtomicBool) -> Result<Option<RenderOutput>> {
    in_pool(threads, || kernel::render_until(exp, opts, progress, stop))
}

/// The SMV header values nanoBragg writes, from the resolved experiment.
pub fn smv_header(exp: &Experiment) -> SmvHeader {
    let d = &exp.det;
    let panel = d.panel();
    let px = panel.pixel_size;
    SmvHeader {
        size1: panel.fpixels,
        size2: panel.spixels,
        pixel_size: px * 1000.0,
        distance: panel.distance * 1000.0,
        wavelength: exp.beam.lambda0 * 1e10,
        beam_center_x: d.centre.xbeam * 1000.0,
        beam_center_y: d.centre.ybeam * 1000.0,
        adxv_center_x: d.centre.fbeam * 1000.0,
        adxv_center_y: (d.detsize_s - d.centre.sbeam) * 1000.0,
        mosflm_center_x: (d.centre.sbeam - 0.5 * px) * 1000.0,
        mosflm_center_y: (d.centre.fbeam - 0.5 * px) * 1000.0,
        denzo_x_beam: (d.centre.sbeam - 0.0 * px) * 1000.0,
        denzo_y_beam: (d.centre.fbeam - 0.0 * px) * 1000.0,
        dials_origin: d.centre.dials_origin,
        xds_orgx: d.centre.orgx,
        xds_orgy: d.centre.orgy,
        close_distance: panel.close_distance * 1000.0,
        phi: exp.scan.phi0 * RTD,
        osc_start: exp.scan.phi0 * RTD,
        osc_range: exp.scan.osc * RTD,
        twotheta: d.detector_twotheta * RTD,
        adc_offset: None,
    }
}

/// `-dxtbx_smv`: BEAM_CENTER_X/Y as dxtbx's reader of these files (FormatSMVJHSim, chosen by
/// `BEAMLINE=fake`) reads them: it takes (X + pixel, SIZE2·pixel − Y + pixel) as the beam centre from
/// the first pixel's corner along +fast and +slow, so X = fbeam − pixel, Y = SIZE2·pixel − sbeam + pixel.
pub fn dxtbx_beam_centre(h: &mut SmvHeader, exp: &Experiment) {
    let d = &exp.det;
    let panel = d.panel();
    let px = panel.pixel_size;
    h.beam_center_x = (d.centre.fbeam - px) * 1000.0;
    h.beam_center_y = (panel.spixels as f64 * px - d.centre.sbeam + px) * 1000.0;
}

/// Refuse, before rendering, a CBF whose geometry a miniCBF header cannot carry and a NeXus file
/// without the HDF5 library.
pub fn check_geometry_outputs(cfg: &Config, exp: &Experiment) -> Result<()> {
    // -curved_det puts every pixel on a sphere about the sample; each of these headers describes a
    // flat panel, where dxtbx would place the spots off by pixels (the plain SMV header stays, as
    // nanoBragg.c writes it)
    if is_curved(exp) {
        let curved = [("-cbffile", cfg.output.cbffile.is_some()), ("-nexusfile", cfg.output.nexusfile.is_some()), ("-dxtbx_smv", cfg.output.smv_dxtbx)];
        if let Some((flag, _)) = curved.iter().find(|(_, given)| *given) {
            return Err(Error::flag(*flag, curved_in_flat_file("write -floatfile or -intfile, or drop -curved_det")));
        }
    }
    if let Some(p) = &cfg.output.cbffile {
        let m = crate::run::headers::image_meta(exp, cfg.params.exposure);
        if let Err(e) = m.mini_cbf_ok() {
            return Err(Error::flag("-cbffile", format!("{e}: a miniCBF header cannot describe this geometry ({}); -nexusfile writes it", p.display())));
        }
    }
    if cfg.output.smv_dxtbx {
        let m = crate::run::headers::image_meta(exp, cfg.params.exposure);
        if let Err(e) = m.mini_cbf_ok() {
            return Err(Error::flag("-dxtbx_smv", format!("{e}: dxtbx reads SMV files as a detector normal to the beam with the spindle along fast; use -nexusfile")));
        }
    }
    if let Some(p) = &cfg.output.nexusfile {
        crate::io::nexus::available().map_err(|e| Error::Output { path: p.clone(), reason: e })?;
        nexus_one_sensor(exp)?;
    }
    Ok(())
}

/// Whether the detector is `-curved_det`'s sphere of pixels.
pub fn is_curved(exp: &Experiment) -> bool {
    exp.det.panels.iter().any(|p| p.curved)
}

/// Why a flat-panel file (CBF, NeXus, dxtbx's SMV) is refused for a curved detector, and `what_to_do`.
pub fn curved_in_flat_file(what_to_do: &str) -> String {
    format!("the file describes a flat detector and -curved_det puts the pixels on a sphere (its spots would be misplaced): {what_to_do}")
}

/// The NeXus writer describes one sensor (`sensor_thickness`) for every module: a detector whose
/// panels have different sensors is refused rather than written with the first one's.
pub fn nexus_one_sensor(exp: &Experiment) -> Result<()> {
    let panels = &exp.det.panels;
    match panels.iter().position(|p| p.sensor != panels[0].sensor) {
        Some(i) => Err(Error::flag(
            "-nexusfile",
            format!(
                "panels 0 and {i} have different sensors ({} and {} mm thick) and the NeXus file describes one: write -floatfile, or one panel with --panel N",
                crate::base::c::printf::cf("%g", panels[0].sensor.thick * 1e3),
                crate::base::c::printf::cf("%g", panels[i].sensor.thick * 1e3)
            ),
        )),
        None => Ok(()),
    }
}


/// Output paths (resolved against `--out-dir`) with their roles, in the order they are written
/// (the list of writers in [`crate::run::outputs::WRITERS`]).
pub fn output_paths(cfg: &Config) -> Vec<(&'static str, PathBuf)> {
    crate::run::outputs::WRITERS
        .iter()
        .filter_map(|w| w.requested(cfg).map(|p| (w.role(), resolve_out(cfg, &p))))
        .collect()
}

/// The 32-bit counts of `-cbffile`/`-nexusfile` are photons plus a given `-adc`: an offset below 0 or
/// past 2³¹ − 1 made every pixel a negative count (below the files' underload of −1) or saturated
/// every one, silently.
/// `nexus_sweep`: a `series` shard's NeXus file, which its frames' configurations do not name.
pub fn check_counts_offset(cfg: &Config, nexus_sweep: bool) -> Result<()> {
    let adc = cfg.output.counts_offset();
    if (cfg.output.cbffile.is_some() || cfg.output.nexusfile.is_some() || nexus_sweep) && !(0.0..=i32::MAX as f64).contains(&adc) {
        return Err(crate::Error::flag("-adc", format!("{adc}: the CBF/NeXus counts are photons plus this offset, which must be from 0 to 2147483647")));
    }
    Ok(())
}

/// Refuse, before any work, unreadable inputs and outputs that cannot be written, would overwrite an
/// input or each other. Creates `--out-dir` (only after every input was found).
pub fn check_outputs(cfg: &Config) -> Result<Vec<Planned>> {
    check_counts_offset(cfg, false)?;
    outputs::check_inputs(cfg)?;
    let created = outputs::create_out_dir(cfg)?;
    let planned = outputs::plan(cfg).inspect_err(|_| outputs::remove_created_dirs(&created))?;
    // temporary files of earlier runs that were killed (SIGKILL, crash) in these folders
    let mut dirs: Vec<PathBuf> = Vec::new();
    for p in &planned {
        if let crate::io::atomic::TargetKind::Regular(t) = &p.kind {
            let d = t.parent().filter(|d| !d.as_os_str().is_empty()).map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
            if !dirs.contains(&d) {
                crate::io::atomic::sweep_stale_temps(&d);
                dirs.push(d);
            }
        }
    }
    Ok(planned)
}

/// Write every output file the C writes (Fdump, float, int, PGM, noise) plus the PNG preview, printing
/// the C's closing lines. Every file is written under a temporary name and renamed at the end, all
/// together: a failed run leaves no new file. `-hklout` is not among them (a series writes it once,
/// [`crate::run::setup::write_setup_outputs`]; [`write_outputs_and_hklout`] adds it).
pub fn write_outputs(cfg: &Config, exp: &mut Experiment, r: &RenderOutput, out: &mut dyn Write) -> Result<(ImageStats, Vec<PathBuf>)> {
    write_outputs_with(cfg, exp, r, out, Default::default())
}

/// [`write_outputs`] with `-hklout` renamed together with the images, as `simulate` writes them.
pub fn write_outputs_and_hklout(cfg: &Config, exp: &mut Experiment, r: &RenderOutput, out: &mut dyn Write) -> Result<(ImageStats, Vec<PathBuf>)> {
    let mut extra = crate::io::atomic::OutputSet::default();
    add_setup_outputs(cfg, exp, &mut extra)?;
    write_outputs_with(cfg, exp, r, out, extra)
}

fn write_outputs_with(cfg: &Config, exp: &mut Experiment, r: &RenderOutput, out: &mut dyn Write, extra: crate::io::atomic::OutputSet) -> Result<(ImageStats, Vec<PathBuf>)> {
    // a multi-panel detector: only the formats that hold every panel (float, NeXus)
    let (planned, _) = outputs::for_panels(outputs::plan(cfg)?, cfg, exp.det.panels.len())?;
    write_planned(&planned, cfg, exp, Rendered { float: &r.float, rows: None, prewritten: Vec::new() }, out, extra)
}

/// The rendered image as the writers get it: its pixels, the first statistics pass if the render
/// made it ([`crate::stats::RowCollector`]), and the outputs the render wrote (float, noise).
struct Rendered<'a> {
    float: &'a [f32],
    rows: Option<Vec<crate::stats::RowStats>>,
    prewritten: Vec<outputs::Prewritten>,
}

fn write_planned(planned: &[Planned], cfg: &Config, exp: &Experiment, r: Rendered, out: &mut dyn Write, extra: crate::io::atomic::OutputSet) -> Result<(ImageStats, Vec<PathBuf>)> {
    let d = &exp.det;
    let panel = d.panel();
    let multi = d.panels.len() > 1;
    let mask = if multi { None } else { panel.mask.as_deref() };
    let image = outputs::whole_image(exp, r.float);
    let (sub, os) = (exp.sampling.subpixel_size, exp.sampling.oversample);
    // the rmsd pass within the int image's conversion (one read of the image instead of two) where
    // nothing written needs the rmsd first: the PGM's automatic scale does
    let has = |role: &str| planned.iter().any(|p| p.writer.role() == role);
    let defer_rmsd = r.rows.is_some() && !multi && has("int") && !has("pgm");
    let stats = match &r.rows {
        Some(rows) if defer_rmsd => crate::stats::first_pass_from_rows(rows, sub, os),
        Some(rows) => crate::stats::image_stats_from_rows(&image, rows, sub, os),
        None => image_stats(&image, mask, sub, os),
    };
    let intfile_scale = crate::stats::int_scale(cfg.output.intfile_scale, stats.max_i);
    let pgm_scale = crate::stats::pgm_scale(cfg.output.pgm_scale, intfile_scale, stats.rmsd);
    let header = int_header(cfg, exp);
    let prewritten = std::sync::Mutex::new(r.prewritten);
    let rmsd = defer_rmsd.then(|| crate::stats::DeferredRmsd::new(stats.mean));
    let ctx = OutputCtx { cfg, exp, float: r.float, stats, intfile_scale, pgm_scale, header, counts: Default::default(), rmsd, prewritten };
    let mut stats = stats;
    let stats_lines = || {
        if let Some(d) = &ctx.rmsd {
            stats = d.complete(stats, &image);
        }
        let lines = vec![
            format!("max_I = {}  at {} {}", g(stats.max_i), g(stats.max_i_x), g(stats.max_i_y)),
            format!("mean= {} rms= {} rmsd= {}", g(stats.mean), g(stats.rms), g(stats.rmsd)),
            format!("intfile_scale = {}", g(intfile_scale)),
        ];
        if multi {
            [panel_stats_lines(exp, r.float), lines].concat()
        } else {
            lines
        }
    };
    let (lines, files) = outputs::write_all(planned, &ctx, stats_lines, extra)?;
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    Ok((stats, files))
}

/// The header of the SMV images (int and noise): nanoBragg's, or dxtbx's reading of it with `-dxtbx_smv`.
fn int_header(cfg: &Config, exp: &Experiment) -> SmvHeader {
    let mut header = smv_header(exp);
    if cfg.output.smv_dxtbx {
        dxtbx_beam_centre(&mut header, exp);
        header.adc_offset = Some(cfg.output.adc_offset);
    }
    header
}

/// One line of statistics per panel of a multi-panel detector (the lines after them are the whole
/// detector's).
fn panel_stats_lines(exp: &Experiment, float: &[f32]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut first = 0;
    for (i, p) in exp.det.panels.iter().enumerate() {
        let n = p.fpixels * p.spixels;
        let st = image_stats(&p.image(&float[first..first + n]), None, exp.sampling.subpixel_size, exp.sampling.oversample);
        lines.push(format!("panel {i}: max_I = {}  at {} {}  mean= {} rms= {} rmsd= {}", g(st.max_i), g(st.max_i_x), g(st.max_i_y), g(st.mean), g(st.rms), g(st.rmsd)));
        first += n;
    }
    lines.push(format!("all {} panels:", exp.det.panels.len()));
    lines
}

/// Print the `-printout` block for one pixel (the C prints it from inside its loop).
fn printout_block(exp: &Experiment, f: usize, s: usize, value: f32, out: &mut dyn Write) {
    let mut interp = kernel::InterpState { enabled: exp.structure_factors.interpolate, first_oob: None };
    let mut t = Trace::default();
    kernel::reference::render_pixel(exp, exp.det.panel(), f, s, &mut interp, Some(&mut t));
    let p = t.pixel_pos;
    let twotheta = (p[1] * p[1] + p[2] * p[2]).sqrt().atan2(p[0]);
    let test = (twotheta / 2.0).sin() / (exp.beam.lambda0 * 1e10);
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
        format!("I/steps {}", cf("%15.10g", t.i / exp.sampling.steps as f64)),
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
/// a terminal, warnings through `base::log::warn`, and returns the summary.
pub fn run(cfg: &Config, out: &mut dyn Write) -> Result<RunSummary> {
    outputs::check_inputs(cfg)?;
    crate::run::limits::check_values(&cfg.params)?;
    crate::run::limits::check_dependent_outputs(cfg)?;
    let estimate = crate::run::limits::check_run(cfg)?;
    if !cfg.run.quiet {
        if let Some(hint) = crate::run::limits::time_hint(estimate.samples) {
            crate::base::log::warn(format!("nanobragg-rs: {hint}"));
        }
    }
    let t0 = Instant::now();
    let (exp, mut log, inputs) = setup_with_inputs(cfg)?;
    let settled = with_auto_settled(cfg, crate::kernel::gpu::image_samples(&exp));
    let cfg = settled.as_ref().map_or(cfg, |(c, _)| c);
    if let Some((_, note)) = &settled {
        log.line(note.clone());
    }
    crate::run::gradients::check(cfg, &inputs)?;
    cfg.run.check_backend(&exp, &cfg.output)?;
    let planned = check_outputs(cfg)?;
    let _ = if cfg.run.quiet { log.flush_warnings_to(out) } else { log.flush_to(out) };
    let (planned, mut notes) = outputs::for_panels(planned, cfg, exp.det.panels.len())?;
    notes.extend(outputs::unnumbered_for_dxtbx(&planned, cfg));
    check_geometry_outputs(cfg, &exp)?;
    if !cfg.run.quiet {
        for n in notes {
            let _ = writeln!(out, "{n}");
        }
    }
    check_add_float(cfg, exp.pixels())?;
    let setup_s = t0.elapsed().as_secs_f64();

    let t1 = Instant::now();
    let bar = crate::base::progress::Bar::start(cfg.run.progress && !cfg.run.quiet && !cfg.run.printout, exp.det.rows() as u64, "rows");
    let tick = |n: usize| {
        if let Some(b) = &bar {
            b.inc(n as u64);
        }
    };
    // --gradients without dL/dF: the lane pass may render the image with the derivatives
    let fused = if cfg.output.loss.dfhkl_out.is_none() {
        in_pool(cfg.run.threads, || crate::run::gradients::fused_render(cfg, &inputs, &exp, &cfg.output.gradients))??
    } else {
        None
    };
    let (mut r, rendered) = match fused {
        Some((r, t)) => (RunImage { float: FloatImage::Held(r.float), omega_sum: r.omega_sum, interp_oob: r.interp_oob, rows: None, prewritten: Vec::new() }, Some(t)),
        None => (render_streamed(cfg, &exp, &planned, &tick)?, None),
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    for p in &cfg.params.add_float {
        add_into(r.float.pixels_mut(), p)?;
        r.rows = None; // the statistics are of the sum
    }
    let derived = in_pool(cfg.run.threads, || crate::run::gradients::derivative_outputs(cfg, &inputs, &exp, r.float.pixels(), rendered))??;
    let render_s = t1.elapsed().as_secs_f64();

    // the interpolation warning is printed even with --quiet; the summary below is not
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
        if cfg.run.quiet {
            let _ = writeln!(out); // the blank line that ends it is the summary's
        }
    }
    let mut sink = std::io::sink();
    let out: &mut dyn Write = if cfg.run.quiet { &mut sink } else { out };
    if cfg.run.printout {
        let (pf, ps) = cfg.run.printout_pixel.unwrap_or((-1, -1));
        for s in 0..exp.det.panel().spixels {
            for f in 0..exp.det.panel().fpixels {
                if kernel::pixel_active(exp.det.panel(), f, s) && ((f as i64 == pf && s as i64 == ps) || pf < 0) {
                    printout_block(&exp, f, s, r.float.pixels()[s * exp.det.panel().fpixels + f], out);
                }
            }
        }
    }
    let _ = writeln!(out);
    let steps = exp.sampling.steps as f64;
    let _ = writeln!(
        out,
        "solid angle subtended by detector = {} steradian ( {}% sphere)",
        g(r.omega_sum / steps),
        g(100.0 * r.omega_sum / steps / 4.0 / std::f64::consts::PI)
    );
    let t2 = Instant::now();
    // -hklout, once every check has passed, under a temporary name: renamed with the images
    let mut extra = derived.files;
    add_setup_outputs(cfg, &exp, &mut extra)?;
    for l in &derived.lines {
        let _ = writeln!(out, "{l}");
    }
    // a silently wrong image must not look like a good one
    let bad = match &r.rows {
        Some(rows) => rows.iter().map(|row| row.nonfinite as usize).sum(),
        None => {
            use rayon::prelude::*;
            r.float.pixels().par_chunks(1 << 16).map(|c| c.iter().filter(|v| !v.is_finite()).count()).sum::<usize>()
        }
    };
    let mut prewritten = std::mem::take(&mut r.prewritten);
    if let Some(file) = r.float.take_file() {
        prewritten.push(outputs::Prewritten { role: "float", outcome: Ok((file, outputs::float_lines(cfg, r.float.pixels().len()))) });
    }
    let image = Rendered { float: r.float.pixels(), rows: r.rows.take(), prewritten };
    let (stats, files) = write_planned(&planned, cfg, &exp, image, out, extra)?;
    crate::base::log::warn_nonfinite(bad, r.float.pixels().len());
    let io_s = t2.elapsed().as_secs_f64();
    Ok(RunSummary {
        stats,
        timings: Timings { setup_s, render_s, io_s },
        pixels: exp.pixels(),
        steps: exp.sampling.steps,
        files,
    })
}

/// The float image of a `simulate` run: in memory, or rendered straight into the `-floatfile`'s
/// temporary file ([`crate::io::float::MappedFloat`]).
enum FloatImage {
    Held(Vec<f32>),
    Mapped(crate::io::float::MappedFloat),
}

impl FloatImage {
    fn pixels(&self) -> &[f32] {
        match self {
            FloatImage::Held(v) => v,
            FloatImage::Mapped(m) => m.pixels(),
        }
    }
    fn pixels_mut(&mut self) -> &mut [f32] {
        match self {
            FloatImage::Held(v) => v,
            FloatImage::Mapped(m) => m.pixels_mut(),
        }
    }
    /// The float file, complete, when the render wrote it.
    fn take_file(&mut self) -> Option<crate::io::atomic::Finished> {
        match self {
            FloatImage::Held(_) => None,
            FloatImage::Mapped(m) => m.take_finished(),
        }
    }
}

/// What a `simulate` render leaves: the image, the C's omega sum and interpolation warning, and the
/// statistics' first pass by row when the render made it.
struct RunImage {
    float: FloatImage,
    omega_sum: f64,
    interp_oob: Option<kernel::OutOfRange>,
    rows: Option<Vec<crate::stats::RowStats>>,
    /// The noise image when it was drawn from the rows as the render finished them.
    prewritten: Vec<outputs::Prewritten>,
}

/// Render the image into the `-floatfile`'s temporary file where it can be mapped (else into memory),
/// reducing each finished row for the statistics while it is in cache: the float file is then
/// complete when the render ends and the statistics need one pass (the rmsd) instead of two, so the
/// outputs after the render are the SMV, PGM and noise conversions alone. The same pixels and
/// numbers as [`render`] and [`image_stats`].
fn render_streamed(cfg: &Config, exp: &Experiment, planned: &[Planned], tick: &(dyn Fn(usize) + Sync)) -> Result<RunImage> {
    let n = exp.det.fpixels() * exp.det.rows();
    let float_out = planned.iter().find(|p| p.writer.role() == "float");
    let mapped = match float_out {
        Some(p) => crate::io::float::MappedFloat::create(&p.path, n)?,
        None => None,
    };
    let mut float = mapped.map_or_else(|| FloatImage::Held(vec![0.0; n]), FloatImage::Mapped);
    let collector = stats_collector(exp);
    let opts = cfg.run.render_options();
    let noise_out = planned.iter().find(|p| p.writer.role() == "noise").filter(|_| noise_follows_render(cfg, exp));
    // the float file's pages: populated by the render threads ahead of the rows they write (rows are
    // handed out in raster order); the first rows' pages come with the first write's fault, whose
    // readahead makes several MB of pages on that thread while the other renders (populating them
    // here first kept every thread waiting: 2048² 1-2 ms longer, 2026-11-27)
    let row_bytes = 4 * exp.det.fpixels();
    let populate = match &float {
        FloatImage::Mapped(m) => Some(m.populator()),
        FloatImage::Held(_) => None,
    };
    let pixels = float.pixels_mut();
    let (omega_sum, interp_oob, noise) = std::thread::scope(|scope| -> Result<_> {
        let (rows_tx, drawn) = match noise_out {
            Some(p) => {
                let (tx, rx) = std::sync::mpsc::sync_channel(NOISE_ROWS_IN_FLIGHT);
                (Some(tx), Some(scope.spawn(move || follow_with_noise(cfg, exp, &p.path, rx))))
            }
            None => (None, None),
        };
        let hook = |s: usize, row: &[f32]| {
            collector.add(s, row);
            if let (Some(p), 0) = (&populate, s % POPULATE_ROWS) {
                let from = s + POPULATE_AHEAD + POPULATE_ROWS;
                p.populate(from * row_bytes..(from + POPULATE_ROWS) * row_bytes);
            }
            if let Some(tx) = &rows_tx {
                // what the serial draws need that the render threads can compute (exp(−mean), the
                // large means' terms), here
                let ahead = crate::noise::RowAhead::new(row);
                // an error here means the noise thread stopped on a write error, which it reports
                let _ = tx.send((s, row.to_vec(), ahead));
            }
        };
        let rendered = in_pool(cfg.run.threads, || kernel::render_into(exp, &opts, pixels, tick, &hook));
        drop(rows_tx); // the noise thread's row stream ends
        let noise = drawn.map(|h| outputs::Prewritten {
            role: "noise",
            outcome: h.join().unwrap_or_else(|_| Err(Error::Output { path: PathBuf::new(), reason: "the noise thread panicked".into() })),
        });
        let (omega_sum, interp_oob) = rendered?;
        Ok((omega_sum, interp_oob, noise))
    })?;
    Ok(RunImage { float, omega_sum, interp_oob, rows: Some(collector.into_rows()), prewritten: noise.into_iter().collect() })
}

/// The float file's pages are populated `POPULATE_ROWS` rows at a time, that many and `POPULATE_AHEAD`
/// more rows ahead of the row just finished.
const POPULATE_ROWS: usize = 16;
const POPULATE_AHEAD: usize = 16;

/// Rows the render may finish ahead of the noise draws (each in flight holds two copies of a row):
/// the render waits beyond that, so memory does not grow when the serial draws are the slower part.
const NOISE_ROWS_IN_FLIGHT: usize = 16;

/// Whether the C-mode noise image can be drawn from the rows as the render finishes them: every row's
/// first rendering is its last (no interpolation that may switch off and render rows again, no
/// `-add_float` added after), one panel.
fn noise_follows_render(cfg: &Config, exp: &Experiment) -> bool {
    cfg.output.noise_mode == crate::noise::NoiseMode::C && !exp.structure_factors.interpolate && cfg.params.add_float.is_empty() && exp.det.panels.len() == 1
}

/// The noise image drawn from the rendered rows (row index, pixels, what the draws need of them
/// ahead: [`crate::noise::RowAhead`]) as they come,
/// in raster order (rows that come early wait): the C's serial stream, the same file as
/// [`outputs::NoiseWriter`] writes after the render.
fn follow_with_noise(cfg: &Config, exp: &Experiment, path: &Path, rows: std::sync::mpsc::Receiver<(usize, Vec<f32>, crate::noise::RowAhead)>) -> Result<(crate::io::atomic::Finished, Vec<String>)> {
    let panel = exp.det.panel();
    let mut file = crate::io::atomic::AtomicFile::create(path)?;
    let header = crate::io::smv::smv_header_bytes(&int_header(cfg, exp)).map_err(|e| Error::Output { path: path.to_path_buf(), reason: e.to_string() })?;
    file.write_all(&header).map_err(|e| Error::write(path, e))?;
    let mut noise = crate::noise::CNoiseRows::new(exp.rng.clone(), exp.seed, panel.roi.clone(), panel.fpixels, cfg.output.adc_offset);
    let mut waiting = std::collections::BTreeMap::new();
    let mut next = 0;
    for (s, row, ahead) in rows {
        waiting.insert(s, (row, ahead));
        while let Some((row, ahead)) = waiting.remove(&next) {
            let (px, _) = noise.draw(next, &row, &ahead);
            crate::io::write_le(&mut file, px).map_err(|e| Error::write(path, e))?;
            next += 1;
        }
    }
    if next != panel.spixels {
        return Err(Error::Output { path: path.to_path_buf(), reason: format!("the render stopped after {next} of {} rows", panel.spixels) });
    }
    file.flush().map_err(|e| Error::write(path, e))?;
    Ok((file.finish()?, outputs::noise_lines(cfg, noise.photons, noise.overloads)))
}

/// The row collector for the image [`write_planned`] takes its statistics of
/// ([`outputs::whole_image`]): the one panel with its ROI and mask, or every row of a multi-panel
/// detector.
fn stats_collector(exp: &Experiment) -> crate::stats::RowCollector<'_> {
    let d = &exp.det;
    if d.panels.len() == 1 {
        let p = d.panel();
        crate::stats::RowCollector::new(p.roi.clone(), p.fpixels, p.spixels, p.mask.as_deref())
    } else {
        crate::stats::RowCollector::new(crate::base::image::Roi::full(d.fpixels(), d.rows()), d.fpixels(), d.rows(), None)
    }
}

/// Run `f` on the requested thread count (None: rayon's default).
pub fn in_pool<R: Send>(threads: Option<usize>, f: impl FnOnce() -> R + Send) -> Result<R> {
    match threads {
        Some(n) => Ok(thread_pool(n)?.install(f)),
        None => Ok(f()),
    }
}

/// Each `-add_float` image has the detector's size (checked before the render; its pixels are
/// checked finite when it is added).
fn check_add_float(cfg: &Config, pixels: usize) -> Result<()> {
    for p in &cfg.params.add_float {
        let len = std::fs::metadata(p).map_err(|e| Error::file(p, format!("-add_float: cannot read: {e}")))?.len();
        if len != 4 * pixels as u64 {
            return Err(Error::file(p, format!("-add_float: has {} bytes, the detector's {pixels} floats need {}", len, 4 * pixels)));
        }
    }
    Ok(())
}

/// Add the float image in `path` to `image` (pixel by pixel, in double, stored as float): the
/// `simulate -add_float` step. The sizes must match.
pub fn add_into(image: &mut [f32], path: &Path) -> Result<()> {
    let add = crate::io::float::read_float_image(path)?;
    if add.len() != image.len() {
        return Err(Error::file(path, format!("-add_float: has {} pixels, the detector has {}", add.len(), image.len())));
    }
    crate::io::float::require_finite(&add, path, "-add_float", None)?;
    for (o, a) in image.iter_mut().zip(&add) {
        *o = (*o as f64 + *a as f64) as f32;
    }
    Ok(())
}
