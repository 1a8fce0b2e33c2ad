//! Every output file of a run, one writer each, in one list ([`WRITERS`]). Planning (which files a run
//! writes), the pre-flight checks (before any work: writable, not a directory, no output naming an
//! input or another output) and the writing itself all loop over this list, so a new format is one
//! writer here plus its module.
//!
//! Writing: every regular file is written under a temporary name beside its target; only when all of
//! them are complete are they renamed, together ([`atomic::commit_all`]). A run that fails or is
//! interrupted before that leaves no new file and every old one intact. Devices, FIFOs and sockets
//! are written in place, as the C does.

use crate::io::atomic::{self, AtomicFile, Finished, TargetKind};
use crate::base::c::printf::{cf, g};
use crate::run::config::Config;
use crate::experiment::Experiment;
use crate::run::config::resolve_out;
use crate::io::smv::{smv_header_bytes, write_int_pixels, write_int_pixels_then, SmvHeader};
use crate::stats::ImageStats;
use crate::{Error, Result};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What the writers need: the rendered image and what the run derived from it.
pub struct OutputCtx<'a> {
    pub cfg: &'a Config,
    pub exp: &'a Experiment,
    pub float: &'a [f32],
    /// The image's statistics; their rmsd is 0 while `rmsd` is set (the int writer sums it then).
    pub stats: ImageStats,
    pub intfile_scale: f64,
    pub pgm_scale: f64,
    pub header: SmvHeader,
    /// The 32-bit counts of the CBF and NeXus images, made once by whichever needs them first.
    pub counts: std::sync::OnceLock<Vec<i32>>,
    /// The rmsd pass, when the int image's conversion makes it ([`crate::stats::DeferredRmsd`]).
    pub rmsd: Option<crate::stats::DeferredRmsd>,
    /// Outputs the render already wrote (the float image into a map of its temporary file, the noise
    /// image from the rows as they were finished): renamed with the others instead of written again.
    pub prewritten: std::sync::Mutex<Vec<Prewritten>>,
}

/// An output written during the render: its complete temporary file and the lines its writer prints,
/// or why it could not be written (reported in the writers' order, as if written after the render).
pub struct Prewritten {
    pub role: &'static str,
    pub outcome: Result<(Finished, Vec<String>)>,
}

impl OutputCtx<'_> {
    /// The output of `role` if the render wrote it.
    fn take_prewritten(&self, role: &str) -> Option<Prewritten> {
        let mut v = self.prewritten.lock().unwrap_or_else(|e| e.into_inner());
        let i = v.iter().position(|p| p.role == role)?;
        Some(v.swap_remove(i))
    }
}

impl OutputCtx<'_> {
    /// Counts for the CBF and NeXus images: with noise, the noise image's own draws (the same random
    /// stream, replayed from the experiment's RNG state) without the SMV's 65535 cap; with `-nonoise`,
    /// the expected photons rounded half up; plus `-adc` only when it was given. 0 outside the ROI.
    pub fn counts(&self) -> &[i32] {
        self.counts.get_or_init(|| photon_counts(self.cfg, self.exp, self.float))
    }

    /// What the CBF/NeXus pixels hold, for their headers and the log.
    pub fn counts_description(&self) -> String {
        let offset = match self.cfg.output.counts_offset() {
            0.0 => String::new(),
            a => format!(" + {} ADC offset", g(a)),
        };
        if self.cfg.output.calculate_noise {
            format!("Poisson photon counts{offset} (the noise image's draws without its 65535 cap)")
        } else {
            format!("noiseless expected photons rounded to integers{offset} (-nonoise)")
        }
    }
}

/// The 32-bit counts of the CBF and NeXus images of one rendered frame (see [`OutputCtx::counts`]);
/// `series -nexusfile` calls it for each frame of its multi-frame file, so frame k's counts are those
/// of the single-image run.
pub fn photon_counts(cfg: &Config, exp: &Experiment, float: &[f32]) -> Vec<i32> {
    let image = whole_image(exp, float);
    let adc = cfg.output.counts_offset();
    if cfg.output.calculate_noise && cfg.output.noise_mode == crate::noise::NoiseMode::Fast {
        crate::noise::noise_counts_fast(exp.seed, &image, adc)
    } else if cfg.output.calculate_noise {
        let mut rng = exp.rng.clone();
        let mut seed = exp.seed;
        crate::noise::noise_counts(&mut rng, &mut seed, &image, adc)
    } else {
        crate::io::map_roi(&image, |v| ((v as f64) + adc + 0.5).floor() as i32)
    }
}

/// The image of every panel (panel after panel along the slow axis): the one panel with its ROI, or
/// all rows of a multi-panel detector.
pub fn whole_image<'a>(exp: &Experiment, float: &'a [f32]) -> crate::base::image::ImageView<'a> {
    let d = &exp.det;
    if d.panels.len() == 1 {
        d.panel().image(float)
    } else {
        crate::base::image::ImageView::new(float, d.fpixels(), d.rows(), crate::base::image::Roi::full(d.fpixels(), d.rows()))
    }
}

/// The note for CBF images, and SMV images written for dxtbx (`-dxtbx_smv`), whose file names hold no
/// digit: dxtbx opens those formats only by a numbered name, its image template, and fails on
/// `a.cbf` or `intimage.img` with "Could not determine filename template". `None` when all have one.
pub fn unnumbered_for_dxtbx(planned: &[Planned], cfg: &Config) -> Option<String> {
    let for_dxtbx = |role: &str| role == "CBF" || (cfg.output.smv_dxtbx && (role == "int" || role == "noise"));
    let numbered = |p: &Path| p.file_name().is_some_and(|n| n.as_encoded_bytes().iter().any(u8::is_ascii_digit));
    let names: Vec<String> = planned.iter().filter(|p| for_dxtbx(p.writer.role()) && !numbered(&p.given)).map(|p| p.given.display().to_string()).collect();
    (!names.is_empty()).then(|| format!("note: dxtbx (DIALS) opens SMV and CBF images only by a numbered name such as image_001.cbf: it cannot open {}", names.join(", ")))
}

/// The writers that describe one panel (SMV, PGM, PNG, noise SMV, CBF): with more than one panel the
/// ones written by default are left out with a note, the ones named on the command line refused.
/// Returns the outputs to write and the notes.
pub fn for_panels(planned: Vec<Planned>, cfg: &Config, panels: usize) -> Result<(Vec<Planned>, Vec<String>)> {
    if panels <= 1 {
        return Ok((planned, vec![]));
    }
    let d = crate::run::config::OutputSettings::default();
    let mut keep = Vec::new();
    let mut notes = Vec::new();
    for p in planned {
        if !holds_one_panel(p.writer.role()) {
            keep.push(p);
            continue;
        }
        let (flag, named) = match p.writer.role() {
            "int" => ("-intfile", cfg.output.intfile != d.intfile),
            "pgm" => ("-pgmfile", cfg.output.pgmfile != d.pgmfile),
            "png" => ("--png", true),
            "noise" => ("-noisefile", cfg.output.noisefile != d.noisefile),
            "CBF" => ("-cbffile", true),
            _ => ("-nexusfile", true),
        };
        if named {
            return Err(Error::flag(
                flag,
                format!("{} holds one panel and the detector has {panels}: write every panel with -nexusfile FILE (and -floatfile), or one with --panel N", p.given.display()),
            ));
        }
        notes.push(format!("note: not writing {} ({}): the detector has {panels} panels; -nexusfile writes them all, --panel N one", p.given.display(), p.writer.role()));
    }
    Ok((keep, notes))
}

/// One output format.
pub trait OutputWriter: Sync {
    /// Short name used in messages ("float", "int", ...).
    fn role(&self) -> &'static str;
    /// The path as the user gave it (before `--out-dir`), when the run writes this output.
    fn requested(&self, cfg: &Config) -> Option<PathBuf>;
    /// Write the whole file to `w`; returns the lines the C prints about it, in its order.
    fn write(&self, ctx: &OutputCtx, path: &Path, w: &mut (dyn Write + Send)) -> Result<Vec<String>>;
    /// A cache whose failure is only a warning (the C goes on without its Fdump.bin).
    fn optional(&self) -> bool {
        false
    }
    /// Written on a thread of its own beside the others (long serial work).
    fn own_thread(&self) -> bool {
        false
    }
    /// Its lines come before the image statistics (the C prints "writing floatfile" first).
    fn before_stats(&self) -> bool {
        false
    }
    /// Bytes of memory it needs for an image of `pixels` (beyond the float image): a writer that
    /// streams its image needs a bounded amount.
    fn memory(&self, pixels: u64) -> u64 {
        let _ = pixels;
        0
    }
    /// Bytes the file takes on disk for an image of `pixels`: exact for the uncompressed formats, a
    /// typical size for the compressed ones (see [`COMPRESSED_BYTES_PER_PIXEL`]).
    fn disk_bytes(&self, pixels: u64) -> u64;
}

/// What a compressed image (CBF byte offset, NeXus gzip, PNG) takes per pixel on a diffraction image,
/// mostly background of a few photons: about one byte (measured 0.6–1.1 on the golden cases); the
/// estimate says "about".
pub const COMPRESSED_BYTES_PER_PIXEL: u64 = 1;

/// Bytes on disk of every output `cfg` asks for, for an image of `pixels`, by role.
pub fn disk_bytes(cfg: &Config, pixels: u64, panels: usize) -> Vec<(&'static str, u64)> {
    WRITERS
        .iter()
        .filter(|w| w.requested(cfg).is_some() && (panels <= 1 || !holds_one_panel(w.role())))
        .map(|w| (w.role(), w.disk_bytes(pixels)))
        .collect()
}

/// The formats that hold one panel: a detector of several writes none of them (see [`for_panels`]).
fn holds_one_panel(role: &str) -> bool {
    matches!(role, "int" | "pgm" | "png" | "noise" | "CBF") || (role == "NeXus" && !crate::run::headers::MULTI_MODULE_NEXUS)
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::write(path, e)
}

/// `-dump` (Fdump.bin), written when `-hkl` was read (nanoBragg.c L2200) or F were computed from a
/// `-pdb`/`-cif` model (reading it back gives the same image).
pub struct FdumpWriter;
impl OutputWriter for FdumpWriter {
    fn role(&self) -> &'static str {
        "dump"
    }
    fn disk_bytes(&self, pixels: u64) -> u64 {
        // the grid's size does not scale with the image; counted as nothing here
        let _ = pixels;
        0
    }
    fn requested(&self, cfg: &Config) -> Option<PathBuf> {
        (cfg.params.hkl_file.is_some() || cfg.params.model.path().is_some()).then(|| cfg.params.dump_file.clone())
    }
    fn write(&self, ctx: &OutputCtx, path: &Path, w: &mut (dyn Write + Send)) -> Result<Vec<String>> {
        if let Some(grid) = &ctx.exp.structure_factors.fhkl {
            w.write_all(&crate::io::fdump::fdump_bytes(grid)).map_err(io_err(path))?;
        }
        Ok(vec![])
    }
    fn optional(&self) -> bool {
        true
    }
}

/// `-floatfile`: raw little-endian f32.
pub struct FloatWriter;
impl OutputWriter for FloatWriter {
    fn role(&self) -> &'static str {
        "float"
    }
    fn disk_bytes(&self, pixels: u64) -> u64 {
        4 * pixels
    }
    fn requested(&self, cfg: &Config) -> Option<PathBuf> {
        cfg.output.write_float.then(|| cfg.output.floatfile.clone())
    }
    fn write(&self, ctx: &OutputCtx, path: &Path, w: &mut (dyn Write + Send)) -> Result<Vec<String>> {
        crate::io::write_le(w, ctx.float).map_err(io_err(path))?;
        Ok(float_lines(ctx.cfg, ctx.float.len()))
    }
    fn own_thread(&self) -> bool {
        true
    }
    fn before_stats(&self) -> bool {
        true
    }
}

/// What the float writer prints for an image of `pixels`.
pub fn float_lines(cfg: &Config, pixels: usize) -> Vec<String> {
    vec![format!("writing {} as {} 4-byte floats", resolve_out(cfg, &cfg.output.floatfile).display(), pixels)]
}

/// What the noise writer prints after drawing `photons` in all with `overloads` capped pixels.
pub fn noise_lines(cfg: &Config, photons: f64, overloads: u64) -> Vec<String> {
    let mut lines = Vec::new();
    if cfg.output.noise_mode == crate::noise::NoiseMode::Fast {
        lines.push("noise image by the fast generator (--noise fast: ChaCha8 per row; not the C's pixels)".to_string());
    }
    lines.extend([format!("{} photons on noise image ({} overloads)", cf("%.0f", photons), overloads), format!("writing {} as 2-byte integers", resolve_out(cfg, &cfg.output.noisefile).display())]);
    lines
}

/// `-intfile`: SMV with the scaled image.
pub struct IntWriter;
impl OutputWriter for IntWriter {
    fn role(&self) -> &'static str {
        "int"
    }
    fn disk_bytes(&self, pixels: u64) -> u64 {
        crate::io::smv::HEADER_BYTES as u64 + 2 * pixels
    }
    fn requested(&self, cfg: &Config) -> Option<PathBuf> {
        cfg.output.write_int.then(|| cfg.output.intfile.clone())
    }
    fn write(&self, ctx: &OutputCtx, path: &Path, w: &mut (dyn Write + Send)) -> Result<Vec<String>> {
        let d = &ctx.exp.det;
        w.write_all(&smv_header_bytes(&ctx.header).map_err(|e| with_path(e, path))?).map_err(io_err(path))?;
        // converted and written batch by batch: the 16-bit image is never held whole
        let (image, adc) = (d.panel().image(ctx.float), ctx.cfg.output.adc_offset);
        match &ctx.rmsd {
            Some(rmsd) => {
                let rows_per = crate::stats::ROWS_TOGETHER;
                let blocks = write_int_pixels_then(w, &image, ctx.intfile_scale, adc, rows_per, |rows| crate::stats::rows_deviation(rows, rmsd.mean)).map_err(io_err(path))?;
                rmsd.set(blocks.into_iter().flatten().collect());
            }
            None => write_int_pixels(w, &image, ctx.intfile_scale, adc).map_err(io_err(path))?,
        }
        Ok(vec![format!("writing {} as 2-byte integers", path.display())])
    }
    fn memory(&self, pixels: u64) -> u64 {
        streamed(pixels, 2)
    }
}

/// `-pgmfile` (unless `-nopgm`).
pub struct PgmWriter;
impl OutputWriter for PgmWriter {
    fn role(&self) -> &'static str {
        "pgm"
    }
    fn disk_bytes(&self, pixels: u64) -> u64 {
        pixels + 64
    }
    fn requested(&self, cfg: &Config) -> Option<PathBuf> {
        cfg.output.write_pgm.then(|| cfg.output.pgmfile.clone())
    }
    fn write(&self, ctx: &OutputCtx, path: &Path, w: &mut (dyn Write + Send)) -> Result<Vec<String>> {
        let d = &ctx.exp.det;
        w.write_all(crate::io::pgm::pgm_header(d.panel().fpixels, d.panel().spixels, ctx.pgm_scale).as_bytes()).map_err(io_err(path))?;
        crate::io::pgm::write_pgm_pixels(w, &d.panel().image(ctx.float), ctx.pgm_scale).map_err(io_err(path))?;
        Ok(vec![format!("pgm_scale = {}", g(ctx.pgm_scale)), format!("writing {} as 1-byte integers", path.display())])
    }
    fn memory(&self, pixels: u64) -> u64 {
        streamed(pixels, 1)
    }
}

/// `--png`: an 8-bit preview (port option).
pub struct PngWriter;
impl OutputWriter for PngWriter {
    fn role(&self) -> &'static str {
        "png"
    }
    fn disk_bytes(&self, pixels: u64) -> u64 {
        COMPRESSED_BYTES_PER_PIXEL * pixels
    }
    fn requested(&self, cfg: &Config) -> Option<PathBuf> {
        cfg.output.pngfile.clone()
    }
    fn write(&self, ctx: &OutputCtx, path: &Path, w: &mut (dyn Write + Send)) -> Result<Vec<String>> {
        let d = &ctx.exp.det;
        let bytes = crate::io::png::png_bytes(ctx.float, d.panel().fpixels, d.panel().spixels, ctx.cfg.output.png_legend).map_err(|e| with_path(e, path))?;
        w.write_all(&bytes).map_err(io_err(path))?;
        Ok(vec![format!("writing {} as an 8-bit PNG preview", path.display())])
    }
    fn memory(&self, pixels: u64) -> u64 {
        pixels * 3
    }
}

/// `-noisefile` (unless `-nonoise`): the Poisson image, one serial random stream.
pub struct NoiseWriter;
impl OutputWriter for NoiseWriter {
    fn role(&self) -> &'static str {
        "noise"
    }
    fn disk_bytes(&self, pixels: u64) -> u64 {
        crate::io::smv::HEADER_BYTES as u64 + 2 * pixels
    }
    fn requested(&self, cfg: &Config) -> Option<PathBuf> {
        (cfg.output.calculate_noise && cfg.output.write_noise).then(|| cfg.output.noisefile.clone())
    }
    fn write(&self, ctx: &OutputCtx, path: &Path, w: &mut (dyn Write + Send)) -> Result<Vec<String>> {
        let d = &ctx.exp.det;
        w.write_all(&smv_header_bytes(&ctx.header).map_err(|e| with_path(e, path))?).map_err(io_err(path))?;
        let (photons, overloads) = match ctx.cfg.output.noise_mode {
            crate::noise::NoiseMode::C => {
                // the noise stream continues the experiment's RNG state (misset and mosaic draws came first)
                let mut rng = ctx.exp.rng.clone();
                let mut seed = ctx.exp.seed;
                crate::noise::write_noise_rows(w, &mut rng, &mut seed, &d.panel().image(ctx.float), ctx.cfg.output.adc_offset)
                    .map_err(io_err(path))?
            }
            crate::noise::NoiseMode::Fast => {
                crate::noise::write_noise_rows_fast(w, ctx.exp.seed, &d.panel().image(ctx.float), ctx.cfg.output.adc_offset)
                    .map_err(io_err(path))?
            }
        };
        Ok(noise_lines(ctx.cfg, photons, overloads))
    }
    fn own_thread(&self) -> bool {
        true
    }
    fn memory(&self, pixels: u64) -> u64 {
        // c: blocks of exp(-mean) values ahead of the draws (2 x 16 rows of f32) and a row of u16 and
        // of i32; fast: two batches of u16 (drawn while the previous one is written) and, per thread, a
        // row of 16-bit random numbers and two generators. Either is a few MiB at most.
        let c = pixels.min(1 << 22) * 8;
        let threads = rayon::current_num_threads() as u64;
        let fast = 4 * pixels.min(crate::noise::FAST_BATCH_PIXELS as u64) + threads * (2 * pixels.min(1 << 20) + 1024);
        c.max(fast)
    }
}

/// `-cbffile`: the photon counts as 32-bit byte-offset CBF with a miniCBF header (port option).
pub struct CbfWriter;
impl OutputWriter for CbfWriter {
    fn role(&self) -> &'static str {
        "CBF"
    }
    fn disk_bytes(&self, pixels: u64) -> u64 {
        COMPRESSED_BYTES_PER_PIXEL * pixels + 4096
    }
    fn requested(&self, cfg: &Config) -> Option<PathBuf> {
        cfg.output.cbffile.clone()
    }
    fn write(&self, ctx: &OutputCtx, path: &Path, w: &mut (dyn Write + Send)) -> Result<Vec<String>> {
        let m = crate::run::headers::image_meta(ctx.exp, ctx.cfg.params.exposure);
        let what = ctx.counts_description();
        w.write_all(&crate::io::cbf::cbf_bytes(&m, ctx.counts(), &what)).map_err(io_err(path))?;
        Ok(vec![format!("writing {} as 4-byte integers (CBF, byte-offset): {what}", path.display())])
    }
    fn own_thread(&self) -> bool {
        true
    }
    fn memory(&self, pixels: u64) -> u64 {
        pixels * 4 + pixels * 2 // the counts, then the compressed stream (at most ~5 bytes a pixel, usually 1-2)
    }
}

/// `-nexusfile`: the photon counts as an NXmx HDF5 file (port option).
pub struct NexusWriter;
impl OutputWriter for NexusWriter {
    fn role(&self) -> &'static str {
        "NeXus"
    }
    fn disk_bytes(&self, pixels: u64) -> u64 {
        COMPRESSED_BYTES_PER_PIXEL * pixels + 65536
    }
    fn requested(&self, cfg: &Config) -> Option<PathBuf> {
        cfg.output.nexusfile.clone()
    }
    fn write(&self, ctx: &OutputCtx, path: &Path, w: &mut (dyn Write + Send)) -> Result<Vec<String>> {
        let m = crate::run::headers::image_meta(ctx.exp, ctx.cfg.params.exposure);
        let what = ctx.counts_description();
        w.write_all(&crate::io::nexus::nexus_bytes(&m, ctx.counts()).map_err(|e| with_path(e, path))?).map_err(io_err(path))?;
        Ok(vec![format!("writing {} as 4-byte integers (NeXus/NXmx, deflate): {what}", path.display())])
    }
    fn own_thread(&self) -> bool {
        true
    }
    fn memory(&self, pixels: u64) -> u64 {
        pixels * 4 + pixels * 2
    }
}

/// `--expt-out`: the simulated experiment as a DIALS experiment list naming the `-nexusfile` image
/// (port option).
pub struct ExptWriter;
impl OutputWriter for ExptWriter {
    fn role(&self) -> &'static str {
        "experiment list"
    }
    fn requested(&self, cfg: &Config) -> Option<PathBuf> {
        cfg.output.expt_out.clone()
    }
    fn write(&self, ctx: &OutputCtx, path: &Path, w: &mut (dyn Write + Send)) -> Result<Vec<String>> {
        let m = crate::run::expt::simulated(ctx.exp, &ctx.cfg.params, ctx.cfg.params.exposure, 1);
        let image = ctx.cfg.output.nexusfile.as_ref().map(|p| {
            let p = resolve_out(ctx.cfg, p);
            std::path::absolute(&p).unwrap_or(p)
        });
        w.write_all(crate::io::expt::expt_json(&m, image.as_deref(), ctx.cfg.params.exposure).as_bytes()).map_err(io_err(path))?;
        Ok(vec![format!("writing {} (DIALS experiment list of the simulated experiment)", path.display())])
    }
    fn disk_bytes(&self, _pixels: u64) -> u64 {
        16 << 10 // a few kB of JSON
    }
}

/// Memory of a writer that streams its image ([`crate::io::write_map_roi`]) with `bytes` per pixel: two
/// batches of whole rows (rows up to 2²⁰ pixels wide).
fn streamed(pixels: u64, bytes: u64) -> u64 {
    2 * bytes * pixels.min((crate::io::STREAM_BATCH_PIXELS as u64).max(1 << 20))
}

/// Every output, in the order the C writes them, then the port's own. A new format: one writer above
/// and one entry here.
pub static WRITERS: &[&dyn OutputWriter] =
    &[&FdumpWriter, &FloatWriter, &IntWriter, &PgmWriter, &PngWriter, &NoiseWriter, &CbfWriter, &NexusWriter, &ExptWriter];

fn with_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Output { reason, .. } => Error::Output { path: path.to_path_buf(), reason },
        Error::OutputIo { source, .. } => Error::OutputIo { path: path.to_path_buf(), source },
        e => e,
    }
}

/// One planned output.
pub struct Planned {
    pub writer: &'static dyn OutputWriter,
    /// The path as given (printed in messages).
    pub given: PathBuf,
    /// Resolved against `--out-dir`.
    pub path: PathBuf,
    pub kind: TargetKind,
}

use crate::io::atomic::{file_id, FileId};

/// Every input file a run reads (the Fdump cache when it will be read), with the flag naming it.
pub fn input_files(cfg: &Config) -> Vec<(&'static str, PathBuf)> {
    let mut v: Vec<(&'static str, PathBuf)> = Vec::new();
    if let Some(p) = &cfg.params.hkl_file {
        v.push(("-hkl", p.clone()));
    } else if cfg.params.model.path().is_none() {
        // with -pdb/-cif the cache is not read (run/load.rs) but rewritten from the model
        let dump = resolve_out(cfg, &cfg.params.dump_file);
        if dump.is_file() {
            v.push(("-dump (Fdump cache being read)", dump));
        }
    }
    if let Some(p) = &cfg.params.mat_file {
        v.push(("-mat", p.clone()));
    }
    if let Some(e) = &cfg.params.expt {
        v.push(("--expt", e.path.clone()));
    }
    if let Some(g) = &cfg.params.geom {
        v.push(("--geom", g.clone()));
    }
    if let Some(p) = &cfg.params.source_file {
        v.push(("-sourcefile", p.clone()));
    }
    if let Some((p, _)) = &cfg.params.stol_file {
        v.push(("-stol", p.clone()));
    }
    if let Some(m) = &cfg.mask {
        v.push(("-mask", m.path.clone()));
    }
    if let Some(m) = &cfg.img {
        v.push(("-img", m.path.clone()));
    }
    if let Some(p) = cfg.params.model.path() {
        v.push((if cfg.params.model.cif.is_some() { "-cif" } else { "-pdb" }, p.to_path_buf()));
    }
    for p in &cfg.params.add_float {
        v.push(("-add_float", p.clone()));
    }
    if let Some(p) = &cfg.run.params_file {
        v.push(("--params", p.clone()));
    }
    if let Some(p) = &cfg.output.loss.observed {
        v.push(("--observed", p.clone()));
    }
    v
}

/// The files a run writes besides its images: `-hklout`, `--save-params` and the `--gradients` images. They are checked with
/// the images (never over an input or another output) and written only after every check passed.
pub fn side_outputs(cfg: &Config) -> Vec<(&'static str, PathBuf)> {
    let mut v = Vec::new();
    if let Some(p) = &cfg.params.model.hklout {
        v.push(("-hklout", resolve_out(cfg, p)));
    }
    if let Some(p) = &cfg.run.save_params {
        v.push(("--save-params", resolve_out(cfg, p)));
    }
    for (_, p) in crate::run::gradients::gradient_paths(cfg) {
        v.push(("--gradients", p));
    }
    if let Some(p) = &cfg.output.loss.loss_out {
        v.push(("--loss-out", resolve_out(cfg, p)));
    }
    if let Some(p) = &cfg.output.loss.dfhkl_out {
        v.push(("--dfhkl-out", resolve_out(cfg, p)));
    }
    v
}

/// Refuse a side output ([`side_outputs`]) that names an input or an image output.
fn check_side_outputs(cfg: &Config, inputs: &[(&str, PathBuf, Option<FileId>)], planned: &[(Planned, Option<FileId>)]) -> Result<()> {
    for (flag, path) in side_outputs(cfg) {
        atomic::target_kind(&path)?;
        let Some(id) = file_id(&path) else { continue };
        if let Some((iflag, inp, _)) = inputs.iter().find(|(_, _, iid)| *iid == Some(id.clone())) {
            return Err(Error::Output { path, reason: format!("the {flag} output would overwrite the {iflag} input {}", inp.display()) });
        }
        if let Some((p, _)) = planned.iter().find(|(p, oid)| matches!(p.kind, TargetKind::Regular(_)) && *oid == Some(id.clone())) {
            return Err(Error::Output { path, reason: format!("the {flag} and {} outputs name the same file", p.writer.role()) });
        }
    }
    Ok(())
}

/// Check every input can be opened (before anything is created, `--out-dir` included).
pub fn check_inputs(cfg: &Config) -> Result<()> {
    for (flag, p) in input_files(cfg) {
        match std::fs::metadata(&p) {
            Ok(m) if m.is_dir() => return Err(Error::file(&p, format!("{flag}: is a directory"))),
            Ok(_) => {}
            Err(e) => return Err(Error::file(&p, format!("{flag}: cannot open: {e}"))),
        }
        if let Err(e) = std::fs::File::open(&p) {
            return Err(Error::file(&p, format!("{flag}: cannot open: {e}")));
        }
    }
    Ok(())
}

/// The outputs `cfg` asks for, as given and resolved against `--out-dir`, without looking at the file
/// system: what is decided before the output folder exists (`series` leaves out a multi-panel
/// detector's one-panel formats when it reads its flags, but creates `--out-dir` and checks every
/// frame's names with [`plan`] only once the run is checked; [`plan`] here refused a new folder).
pub fn requested(cfg: &Config) -> Vec<Planned> {
    WRITERS
        .iter()
        .filter_map(|&w| {
            let given = w.requested(cfg)?;
            let path = resolve_out(cfg, &given);
            Some(Planned { writer: w, given, kind: TargetKind::Regular(path.clone()), path })
        })
        .collect()
}

/// The outputs of a run and how each will be written; refuses, before any work, a target that is a
/// directory, lies in a missing directory, has an empty or over-long name, or names an input or
/// another output. `--out-dir` must exist already (see [`create_out_dir`]).
pub fn plan(cfg: &Config) -> Result<Vec<Planned>> {
    let inputs: Vec<(&str, PathBuf, Option<FileId>)> = input_files(cfg).into_iter().map(|(f, p)| {
        let id = std::fs::metadata(&p).ok().map(|m| FileId::Inode(m.dev(), m.ino()));
        (f, p, id)
    }).collect();
    let mut planned: Vec<(Planned, Option<FileId>)> = Vec::new();
    for &w in WRITERS {
        let Some(given) = w.requested(cfg) else { continue };
        let path = resolve_out(cfg, &given);
        let kind = match atomic::target_kind(&path) {
            Ok(k) => k,
            Err(e) if w.optional() => {
                let _ = e;
                continue; // the setup log already warned that the cache cannot be written
            }
            Err(e) => return Err(e),
        };
        if let TargetKind::Regular(target) = &kind {
            if let Some(name) = target.file_name() {
                // the temporary name adds ".", ".tmp-PID-N": keep within NAME_MAX
                if name.len() > 255 {
                    return Err(Error::Output { path: path.clone(), reason: "file name too long".into() });
                }
            }
            let dir = match target.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            if !dir_writable(&dir) {
                if w.optional() {
                    continue;
                }
                return Err(Error::Output { path: path.clone(), reason: format!("directory {} is not writable", dir.display()) });
            }
        }
        let id = file_id(&path);
        if kind == TargetKind::Regular(path.clone()) || matches!(kind, TargetKind::Regular(_)) {
            for (flag, inp, iid) in &inputs {
                if id.is_some() && id == *iid {
                    return Err(Error::Output {
                        path: path.clone(),
                        reason: format!("the {} output would overwrite the {flag} input {}", w.role(), inp.display()),
                    });
                }
            }
            for (other, oid) in &planned {
                if matches!(other.kind, TargetKind::Regular(_)) && id.is_some() && id == *oid {
                    return Err(Error::Output {
                        path: path.clone(),
                        reason: format!("the {} and {} outputs name the same file", other.writer.role(), w.role()),
                    });
                }
            }
        }
        planned.push((Planned { writer: w, given, path, kind }, id));
    }
    check_side_outputs(cfg, &inputs, &planned)?;
    Ok(planned.into_iter().map(|(p, _)| p).collect())
}

fn dir_writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// Create `--out-dir` when missing; returns the directories it created (to remove again if the run
/// is refused before writing).
pub fn create_out_dir(cfg: &Config) -> Result<Vec<PathBuf>> {
    let Some(dir) = &cfg.output.out_dir else { return Ok(vec![]) };
    let mut created = Vec::new();
    let mut p = dir.clone();
    while !p.as_os_str().is_empty() && !p.exists() {
        created.push(p.clone());
        match p.parent() {
            Some(q) => p = q.to_path_buf(),
            None => break,
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::Output { path: dir.clone(), reason: format!("cannot create the output directory: {e}") })?;
    Ok(created)
}

/// Remove directories [`create_out_dir`] made (innermost first), if still empty.
pub fn remove_created_dirs(created: &[PathBuf]) {
    for d in created {
        let _ = std::fs::remove_dir(d);
    }
}

/// Write every planned output: all regular files under temporary names, then renamed together.
/// Returns the lines to print, in the C's order: lines of the `before_stats` writers, `stats_lines`,
/// then the others. `extra` (files already written under temporary names, e.g. the derivative
/// images) are renamed with them.
pub fn write_all(planned: &[Planned], ctx: &OutputCtx, stats_lines: impl FnOnce() -> Vec<String>, extra: atomic::OutputSet) -> Result<(Vec<String>, Vec<PathBuf>)> {
    type One = Result<(Vec<String>, Option<Finished>)>;
    let run_one = |p: &Planned| -> One {
        if let Some(done) = ctx.take_prewritten(p.writer.role()) {
            return done.outcome.map(|(file, lines)| (lines, Some(file)));
        }
        let mut f = AtomicFile::create(&p.path)?;
        let lines = p.writer.write(ctx, &p.path, &mut f)?;
        f.flush().map_err(io_err(&p.path))?;
        Ok((lines, Some(f.finish()?)))
    };
    // on a thread of a one-thread rayon pool (`series` rendering frames side by side, a frame per
    // core), every writer runs in place: the other cores are busy with other frames, and a thread of
    // its own would hand its parallel loops to the global pool
    let own_thread = |p: &Planned| p.writer.own_thread() && !(rayon::current_thread_index().is_some() && rayon::current_num_threads() == 1);
    let results: Vec<One> = std::thread::scope(|scope| {
        let handles: Vec<_> = planned.iter().map(|p| if own_thread(p) { Some(scope.spawn(|| run_one(p))) } else { None }).collect();
        let mut inline: Vec<Option<One>> = planned.iter().map(|p| (!own_thread(p)).then(|| run_one(p))).collect();
        handles
            .into_iter()
            .zip(planned)
            .enumerate()
            .map(|(i, (h, p))| match h {
                Some(h) => h.join().unwrap_or_else(|_| Err(Error::Output { path: p.path.clone(), reason: "writer thread panicked".into() })),
                None => inline[i].take().expect("inline result"),
            })
            .collect()
    });
    let mut finished = Vec::new();
    let mut before = Vec::new();
    let mut after = Vec::new();
    let mut first_err = None;
    let mut files = Vec::new();
    for (p, r) in planned.iter().zip(results) {
        match r {
            Ok((lines, fin)) => {
                if p.writer.before_stats() {
                    before.extend(lines);
                } else {
                    after.extend(lines);
                }
                finished.extend(fin);
                files.push(p.path.clone());
            }
            Err(e) if p.writer.optional() => {
                crate::base::log::warn(format!("nanobragg-rs: warning: {e} (cache not written)"));
            }
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e); // `finished` dropped: every temporary file removed, old files intact
    }
    let extra = extra.into_finished();
    files.extend(extra.iter().map(|f| f.path().to_path_buf()));
    finished.extend(extra);
    atomic::commit_all(finished)?;
    before.extend(stats_lines());
    before.extend(after);
    Ok((before, files))
}
