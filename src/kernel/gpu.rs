//! The GPU backend (feature `gpu`): the kernel in `gpu.cu`, one thread per pixel, compiled at run time
//! by NVRTC and launched through the CUDA driver, both loaded at run time by `cudarc` (dynamic
//! loading), so the program builds and runs everywhere and only `--backend gpu` needs a device.
//!
//! The driver in `backend.rs` keeps the C's semantics that span rows (the interpolation switch-off
//! rule, the omega sum); this backend renders batches of rows and, where a pixel's interpolation leaves
//! the grid, hands the rest of that row to the reference kernel (`RowEnd::HandOver`).
//!
//! For testing on machines without a GPU the same kernel source compiles for the host with g++
//! (`gpu_host.cpp`); `NANOBRAGG_GPU_HOST_EMULATION=<that library>` makes this backend launch it
//! instead of a device (tests/gpu.rs, scripts/gpu_check.sh's dry run). `NANOBRAGG_GPU_TIMING=<file>`
//! appends one JSON line per render with the setup, upload, kernel and download times.

use super::backend::{RenderBackend, RowEnd, RowHook, RowResult};
use crate::experiment::params::{CrystalShape, Precision};
use crate::experiment::Experiment;
use rayon::prelude::*;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The kernel source (CUDA C++), compiled by NVRTC at run time.
pub const KERNEL_SOURCE: &str = include_str!("gpu.cu");
/// Environment variable naming a host build of the kernel to use instead of a device.
pub const HOST_EMULATION_ENV: &str = "NANOBRAGG_GPU_HOST_EMULATION";
/// Environment variable naming a file that gets one JSON line of timings per render.
pub const TIMING_ENV: &str = "NANOBRAGG_GPU_TIMING";

/// Threads per block of the pixel kernel.
const BLOCK: u32 = 128;
/// Most pixels per launch (their float and solid-angle buffers: 12 bytes each on the device).
const BATCH_PIXELS: usize = 1 << 23;
/// Largest integer N whose lattice factor the kernel evaluates as a Chebyshev polynomial (N − 2
/// multiply-adds per axis and sample); larger or non-integer N take the sine ratio.
const CHEB_MAX_N: f64 = 32.0;
/// Largest N of the unrolled sample loop (`FUSED_MAX_N` in gpu.cu).
const FUSED_MAX_N: f64 = 8.0;
/// Doubles per panel in the panel table (`PANEL_STRIDE` in gpu.cu).
const PANEL_STRIDE: usize = 28;

/// The kernel's launch parameters (`struct Params` in gpu.cu, same order: 8-byte fields first).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Params {
    orient: u64,
    sources: u64,
    panels: u64,
    fgrid: u64,
    fgrid_real: u64,
    mask: u64,
    out: u64,
    omega: u64,
    oob_from: u64,
    a_star: [f64; 3],
    b_star: [f64; 3],
    c_star: [f64; 3],
    polar_vector: [f64; 3],
    beam_vector: [f64; 3],
    polarization: f64,
    re2_fluence: f64,
    subpixel_size: f64,
    dmin: f64,
    default_f: f64,
    water_size: f64,
    na: f64,
    nb: f64,
    nc: f64,
    fudge: f64,
    i_bg: f64,
    steps: f64,
    f_min: [i64; 3],
    f_span: [i64; 3],
    f_range: [i64; 3],
    stride_h: i64,
    stride_k: i64,
    first_row: i32,
    n_rows: i32,
    fpixels: i32,
    n_src: i32,
    n_orient: i32,
    oversample: i32,
    shape: i32,
    n_panels: i32,
    nopolar: i32,
    oversample_omega: i32,
    oversample_thick: i32,
    oversample_polar: i32,
    interpolate: i32,
    has_grid: i32,
    n_cheb: [i32; 3],
    fused_n: i32,
}

/// The experiment's tables as the kernel reads them (host side), and the scalar parameters.
pub struct Tables {
    pub params: Params,
    /// a, b, c per orientation (phi step major), in the kernel's precision.
    pub orient: Vec<u8>,
    pub sources: Vec<f64>,
    pub panels: Vec<f64>,
    pub fgrid: Vec<f64>,
    /// The grid in the kernel's precision (the nearest-neighbour lookups).
    pub fgrid_real: Vec<u8>,
    pub mask: Vec<u16>,
    /// Samples per pixel (sub-pixels × layers × sources × orientations), for the throughput.
    pub samples_per_pixel: f64,
}

/// Sample evaluations per CPU thread from which `--backend auto` takes the GPU, by precision: below
/// them the CPU renders the run before a GPU process has opened its device and copied its image back
/// (0.3–0.45 s whole process on an H200 for any of these runs, mostly the driver and the CUDA context,
/// once per process). Measured there beside 16 Xeon threads (reports/gpu/2026-11-28-auto): the CPU's
/// whole-process time crosses the GPU's near 1.7e9 samples in double (mosaic and divergence alike)
/// and 2.1e9 (divergence) to 4.3e9 (mosaic) in single; divided by the threads.
const AUTO_PER_THREAD: [(Precision, f64); 2] = [(Precision::Double, 1.1e8), (Precision::Single, 2e8)];

/// The run size (sample evaluations, every frame's) from which the GPU pays for its start-up on
/// `threads` CPU threads in `precision` ([`AUTO_PER_THREAD`]).
pub fn auto_break_even(threads: usize, precision: Precision) -> f64 {
    let per_thread = AUTO_PER_THREAD.iter().find(|(p, _)| *p == precision).map_or(AUTO_PER_THREAD[0].1, |&(_, n)| n);
    per_thread * threads.max(1) as f64
}

/// The image's sample evaluations: each panel's pixels × its sensor layers, × sub-pixels × sources ×
/// orientations (the work of the pixel kernel, for the timing report and `--backend auto`).
pub fn image_samples(exp: &Experiment) -> f64 {
    let layer_pixels: f64 = exp.det.panels.iter().map(|p| (p.fpixels * p.spixels) as f64 * p.sensor.thicksteps.max(0) as f64).sum();
    let orientations = exp.crystal.orientations.len().min(exp.scan.phisteps.max(0) as usize * exp.domains());
    layer_pixels * (exp.sampling.oversample * exp.sampling.oversample) as f64 * exp.beam.sources.len() as f64 * orientations as f64
}

/// Why an experiment (or this build) cannot be rendered by the GPU backend: the flag to name.
pub fn unsupported(exp: &Experiment) -> Option<String> {
    let det = &exp.det;
    if det.panels.iter().any(|p| p.fpixels != det.fpixels()) {
        return Some("panels of different widths: --backend gpu renders panels of one width".into());
    }
    if det.rows() > i32::MAX as usize || det.fpixels() > i32::MAX as usize {
        return Some("more than 2^31 rows or columns: --backend gpu".into());
    }
    if exp.structure_factors.fhkl.as_deref().is_some_and(|g| g.data.len() > i32::MAX as usize) {
        return Some("an F grid of 2^31 values or more (-hkl): --backend gpu indexes it with 32 bits".into());
    }
    None
}

fn bytes_of<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: any initialised Copy value is readable as bytes
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn bytes_of_mut<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: callers only pass f32/f64/i32 slices, for which every bit pattern is a valid value
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

impl Tables {
    /// Pack `exp` for the kernel in `precision`.
    pub fn new(exp: &Experiment, precision: Precision) -> Tables {
        let mut p = Params::default();
        let orientations = &exp.crystal.orientations;
        let flat: Vec<f64> = orientations.iter().flat_map(|o| o.a.iter().chain(&o.b).chain(&o.c).copied()).collect();
        let mut orient = match precision {
            Precision::Double => bytes_of(&flat).to_vec(),
            Precision::Single => bytes_of(&flat.iter().map(|&v| v as f32).collect::<Vec<f32>>()).to_vec(),
        };
        if orient.is_empty() {
            orient.resize(8, 0);
        }
        let sources: Vec<f64> = exp.beam.sources.iter().flat_map(|s| [s.dir[0], s.dir[1], s.dir[2], s.lambda]).collect();
        let mut panels = Vec::with_capacity(exp.det.panels.len() * PANEL_STRIDE);
        let mut mask: Vec<u16> = Vec::new();
        let mut first_row = 0usize;
        for panel in &exp.det.panels {
            let mut row = [0.0f64; PANEL_STRIDE];
            row[0..3].copy_from_slice(&panel.fdet_vector);
            row[3..6].copy_from_slice(&panel.sdet_vector);
            row[6..9].copy_from_slice(&panel.odet_vector);
            row[9..12].copy_from_slice(&panel.pix0_vector);
            row[12] = panel.distance;
            row[13] = panel.close_distance;
            row[14] = panel.pixel_size;
            row[15] = panel.sensor.thickstep;
            row[16] = panel.sensor.thick;
            row[17] = panel.sensor.mu;
            row[18] = panel.sensor.thicksteps.max(0) as f64;
            row[19] = f64::from(u8::from(panel.curved));
            row[20] = f64::from(u8::from(panel.point_pixel));
            row[21] = panel.roi.fast.start as f64;
            row[22] = panel.roi.fast.end as f64;
            row[23] = panel.roi.slow.start as f64;
            row[24] = panel.roi.slow.end as f64;
            row[25] = panel.spixels as f64;
            row[26] = first_row as f64;
            row[27] = match &panel.mask {
                Some(m) => {
                    let at = mask.len() as f64;
                    mask.extend_from_slice(m);
                    at
                }
                None => -1.0,
            };
            panels.extend_from_slice(&row);
            first_row += panel.spixels;
        }
        if mask.is_empty() {
            mask.push(0);
        }
        let sf = &exp.structure_factors;
        let grid = sf.fhkl.as_deref().filter(|g| g.hkls != 0 && !g.data.is_empty());
        let fgrid = match grid {
            Some(g) => {
                p.has_grid = 1;
                p.f_min = [g.h_min as i64, g.k_min as i64, g.l_min as i64];
                p.f_span = [(g.h_max - g.h_min) as i64, (g.k_max - g.k_min) as i64, (g.l_max - g.l_min) as i64];
                p.f_range = [g.h_range as i64, g.k_range as i64, g.l_range as i64];
                p.stride_h = (g.k_range as i64 + 1) * (g.l_range as i64 + 1);
                p.stride_k = g.l_range as i64 + 1;
                g.data.clone()
            }
            None => vec![0.0],
        };
        let fgrid_real = match precision {
            Precision::Double => bytes_of(&fgrid).to_vec(),
            Precision::Single => bytes_of(&fgrid.iter().map(|&v| v as f32).collect::<Vec<f32>>()).to_vec(),
        };
        let lat = &exp.crystal.lattice;
        p.a_star = lat.a_star;
        p.b_star = lat.b_star;
        p.c_star = lat.c_star;
        p.polar_vector = exp.beam.polar_vector;
        p.beam_vector = exp.beam.beam_vector;
        p.polarization = exp.beam.polarization;
        p.re2_fluence = crate::base::consts::R_E_SQR * exp.beam.fluence;
        p.subpixel_size = exp.sampling.subpixel_size;
        p.dmin = sf.dmin;
        p.default_f = sf.default_f;
        p.water_size = exp.background.water_size;
        p.na = exp.crystal.na;
        p.nb = exp.crystal.nb;
        p.nc = exp.crystal.nc;
        p.fudge = exp.crystal.fudge;
        let cheb = |n: f64| if n > 1.0 && n <= CHEB_MAX_N && n.fract() == 0.0 { n as i32 } else { 0 };
        p.n_cheb = [cheb(p.na), cheb(p.nb), cheb(p.nc)];
        let square = exp.crystal.shape == CrystalShape::Square;
        if square && p.has_grid == 0 && p.na == p.nb && p.na == p.nc && p.n_cheb[0] != 0 && p.na <= FUSED_MAX_N {
            p.fused_n = p.n_cheb[0];
        }
        p.i_bg = exp.background.i_bg;
        p.steps = exp.sampling.steps as f64;
        p.fpixels = exp.det.fpixels() as i32;
        p.n_src = exp.beam.sources.len() as i32;
        p.n_orient = orientations.len().min(exp.scan.phisteps.max(0) as usize * exp.domains()) as i32;
        p.oversample = exp.sampling.oversample as i32;
        p.shape = match exp.crystal.shape {
            CrystalShape::Square => 0,
            CrystalShape::Round => 1,
            CrystalShape::Gauss => 2,
            CrystalShape::Tophat => 3,
        };
        p.n_panels = exp.det.panels.len() as i32;
        p.nopolar = exp.beam.nopolar as i32;
        p.oversample_omega = exp.sampling.oversample_omega as i32;
        p.oversample_thick = exp.sampling.oversample_thick as i32;
        p.oversample_polar = exp.sampling.oversample_polar as i32;
        let pixels: f64 = exp.det.panels.iter().map(|p| (p.fpixels * p.spixels) as f64).sum();
        let samples_per_pixel = if pixels > 0.0 { image_samples(exp) / pixels } else { 0.0 };
        Tables { params: p, orient, sources, panels, fgrid, fgrid_real, mask, samples_per_pixel }
    }
}

/// A buffer on the device (or, emulated, in host memory aligned for f64).
enum Buf {
    #[cfg(feature = "gpu")]
    Cuda(cudarc::driver::CudaSlice<u8>),
    Host(Vec<u64>),
}

/// Where kernels run: a CUDA device, or the host build of the kernel (emulation).
enum Executor {
    #[cfg(feature = "gpu")]
    Cuda(cuda::Device),
    Host(libloading::Library),
}

/// The process's device: opened, and the kernel compiled, once.
pub struct Device {
    exec: Executor,
    /// The device's name (or "host emulation").
    pub name: String,
    /// Seconds spent opening the device and compiling and loading the kernel.
    pub setup_s: f64,
}

static DEVICE: OnceLock<std::result::Result<Device, String>> = OnceLock::new();

/// The process's device, opened on first use; `Err` says in one line why there is none.
pub fn device() -> std::result::Result<&'static Device, String> {
    DEVICE.get_or_init(open_device).as_ref().map_err(Clone::clone)
}

fn open_device() -> std::result::Result<Device, String> {
    let t = Instant::now();
    if let Some(path) = std::env::var_os(HOST_EMULATION_ENV) {
        // SAFETY: the library is our own host build of gpu_host.cpp (its initialisers do nothing)
        let lib = unsafe { libloading::Library::new(&path) }.map_err(|e| format!("{HOST_EMULATION_ENV}={}: {e}", path.to_string_lossy()))?;
        return Ok(Device { exec: Executor::Host(lib), name: "host emulation".into(), setup_s: t.elapsed().as_secs_f64() });
    }
    #[cfg(feature = "gpu")]
    {
        let (dev, name) = cuda::Device::open()?;
        Ok(Device { exec: Executor::Cuda(dev), name, setup_s: t.elapsed().as_secs_f64() })
    }
    #[cfg(not(feature = "gpu"))]
    Err("this build has no GPU backend (cargo feature `gpu`)".into())
}

impl Device {
    fn upload(&self, bytes: &[u8]) -> std::result::Result<Buf, String> {
        match &self.exec {
            #[cfg(feature = "gpu")]
            Executor::Cuda(d) => d.upload(bytes).map(Buf::Cuda),
            Executor::Host(_) => {
                let mut v = vec![0u64; bytes.len().div_ceil(8).max(1)];
                bytes_of_mut(&mut v)[..bytes.len()].copy_from_slice(bytes);
                Ok(Buf::Host(v))
            }
        }
    }
    /// `len` zero bytes on the device.
    fn zeros(&self, len: usize) -> std::result::Result<Buf, String> {
        match &self.exec {
            #[cfg(feature = "gpu")]
            Executor::Cuda(d) => d.zeros(len).map(Buf::Cuda),
            Executor::Host(_) => Ok(Buf::Host(vec![0u64; len.div_ceil(8).max(1)])),
        }
    }
    fn addr(&self, b: &Buf) -> u64 {
        match b {
            #[cfg(feature = "gpu")]
            Buf::Cuda(s) => cuda::addr(self.cuda(), s),
            Buf::Host(v) => v.as_ptr() as u64,
        }
    }
    fn download(&self, b: &Buf, into: &mut [u8]) -> std::result::Result<(), String> {
        match b {
            #[cfg(feature = "gpu")]
            Buf::Cuda(s) => self.cuda().download(s, into),
            Buf::Host(v) => {
                into.copy_from_slice(&bytes_of(v)[..into.len()]);
                Ok(())
            }
        }
    }
    /// Wait for the kernels started since the last call.
    fn finish(&self) -> std::result::Result<(), String> {
        match &self.exec {
            #[cfg(feature = "gpu")]
            Executor::Cuda(d) => d.finish(),
            Executor::Host(_) => Ok(()),
        }
    }
    #[cfg(feature = "gpu")]
    fn cuda(&self) -> &cuda::Device {
        match &self.exec {
            Executor::Cuda(d) => d,
            Executor::Host(_) => unreachable!("a CUDA buffer on the host executor"),
        }
    }
    /// Start `kernel` over `threads` threads with the parameters in `params` (a device copy of
    /// [`Params`]; and `sums` for row_omega); [`Device::finish`] waits for it (the host build runs
    /// it to the end here).
    fn launch(&self, kernel: &str, params: &Buf, threads: usize, sums: Option<&Buf>) -> std::result::Result<(), String> {
        let blocks = threads.div_ceil(BLOCK as usize) as u32;
        match &self.exec {
            #[cfg(feature = "gpu")]
            Executor::Cuda(d) => d.launch(kernel, self.addr(params), blocks, BLOCK, sums.map(|b| self.addr(b))),
            Executor::Host(lib) => {
                type Launch = unsafe extern "C" fn(*const std::ffi::c_char, *const Params, u32, u32, *mut f64);
                let name = std::ffi::CString::new(kernel).expect("kernel names have no NUL");
                let sums = sums.map_or(std::ptr::null_mut(), |b| self.addr(b) as *mut f64);
                // SAFETY: host_launch is gpu_host.cpp's entry point with this signature; `params`
                // holds a Params whose every address is a live host buffer of this backend
                unsafe {
                    let f = lib.get::<Launch>(b"host_launch\0").map_err(|e| e.to_string())?;
                    f(name.as_ptr(), self.addr(params) as *const Params, blocks, BLOCK, sums);
                }
                Ok(())
            }
        }
    }
}

/// Times of one render, reported through [`TIMING_ENV`].
#[derive(Clone, Copy, Debug, Default)]
struct Timing {
    tables_s: f64,
    kernel_s: f64,
    download_s: f64,
    pixels: f64,
}

/// The GPU backend for one experiment: its tables on the device.
pub struct GpuBackend<'a> {
    exp: &'a Experiment,
    dev: &'static Device,
    precision: Precision,
    params: Params,
    samples_per_pixel: f64,
    /// orient, sources, panels, fgrid, mask, fgrid_real (kept alive for the addresses in `params`)
    _tables: Vec<Buf>,
    timing: Mutex<Timing>,
}

impl<'a> GpuBackend<'a> {
    /// Upload `exp`'s tables to the process's device.
    pub fn new(exp: &'a Experiment, precision: Precision) -> std::result::Result<Self, String> {
        if let Some(why) = unsupported(exp) {
            return Err(why);
        }
        let dev = device()?;
        let t = Instant::now();
        let tables = Tables::new(exp, precision);
        let bufs = vec![
            dev.upload(&tables.orient)?,
            dev.upload(bytes_of(&tables.sources))?,
            dev.upload(bytes_of(&tables.panels))?,
            dev.upload(bytes_of(&tables.fgrid))?,
            dev.upload(bytes_of(&tables.mask))?,
            dev.upload(&tables.fgrid_real)?,
        ];
        let mut params = tables.params;
        params.orient = dev.addr(&bufs[0]);
        params.sources = dev.addr(&bufs[1]);
        params.panels = dev.addr(&bufs[2]);
        params.fgrid = dev.addr(&bufs[3]);
        params.mask = dev.addr(&bufs[4]);
        params.fgrid_real = dev.addr(&bufs[5]);
        let timing = Timing { tables_s: t.elapsed().as_secs_f64(), ..Timing::default() };
        Ok(GpuBackend { exp, dev, precision, params, samples_per_pixel: tables.samples_per_pixel, _tables: bufs, timing: Mutex::new(timing) })
    }

    /// Render rows `first..first + n` into `out` (n × fpixels): each row's omega sum and hand-over
    /// pixel (fpixels: none).
    fn render_batch(&self, first: usize, n: usize, interpolate: bool, out: &mut [f32]) -> std::result::Result<Vec<(f64, usize)>, String> {
        let fp = self.exp.det.fpixels();
        let dev = self.dev;
        let mut p = self.params;
        p.first_row = first as i32;
        p.n_rows = n as i32;
        p.interpolate = interpolate as i32;
        let out_buf = dev.zeros(n * fp * 4)?;
        let omega_buf = dev.zeros(n * fp * 8)?;
        let oob_buf = dev.upload(bytes_of(&vec![fp as i32; n]))?;
        let sums_buf = dev.zeros(n * 8)?;
        p.out = dev.addr(&out_buf);
        p.omega = dev.addr(&omega_buf);
        p.oob_from = dev.addr(&oob_buf);
        let kernel = match self.precision {
            Precision::Double => "render_f64",
            Precision::Single => "render_f32",
        };
        let p_buf = dev.upload(bytes_of(std::slice::from_ref(&p)))?;
        // The copy to the host below makes the pages of the float file's memory map as it writes them
        // (one thread). Making them on every core while the kernel ran was slower on an H200 machine's
        // 16 cores (43-50 ms against 22 ms at 4096²: page faults on one shared file contend), so the
        // copy keeps them (reports/gpu/2026-11-27-h200, run3).
        let t = Instant::now();
        dev.launch(kernel, &p_buf, n * fp, None)?;
        dev.launch("row_omega", &p_buf, n, Some(&sums_buf))?;
        dev.finish()?;
        let kernel_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        dev.download(&out_buf, bytes_of_mut(out))?;
        let mut sums = vec![0.0f64; n];
        let mut oob = vec![0i32; n];
        dev.download(&sums_buf, bytes_of_mut(&mut sums))?;
        dev.download(&oob_buf, bytes_of_mut(&mut oob))?;
        let mut timing = self.timing.lock().unwrap_or_else(|e| e.into_inner());
        timing.kernel_s += kernel_s;
        timing.download_s += t.elapsed().as_secs_f64();
        timing.pixels += (n * fp) as f64;
        Ok(sums.into_iter().zip(oob).map(|(s, o)| (s, o.max(0) as usize)).collect())
    }

    /// Append this render's times to the [`TIMING_ENV`] file, if one is named.
    fn report_timing(&self) {
        let Some(path) = std::env::var_os(TIMING_ENV) else { return };
        let t = *self.timing.lock().unwrap_or_else(|e| e.into_inner());
        let samples = t.pixels * self.samples_per_pixel;
        let line = serde_json::json!({
            "device": self.dev.name,
            "precision": match self.precision { Precision::Double => "double", Precision::Single => "single" },
            "setup_s": self.dev.setup_s,
            "tables_s": t.tables_s,
            "kernel_s": t.kernel_s,
            "download_s": t.download_s,
            "pixels": t.pixels,
            "samples": samples,
            "samples_per_s": if t.kernel_s > 0.0 { samples / t.kernel_s } else { 0.0 },
        });
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&path) {
            let _ = writeln!(f, "{line}");
        }
    }
}

impl RenderBackend for GpuBackend<'_> {
    fn name(&self) -> &'static str {
        "gpu"
    }
    fn experiment(&self) -> &Experiment {
        self.exp
    }
    fn precision(&self) -> Precision {
        self.precision
    }
    fn render_row(&self, s: usize, interpolate: bool, out: &mut [f32]) -> RowResult {
        self.render_rows(s, interpolate, out, &|_| {}, &super::backend::no_row_hook)[0]
    }
    fn render_rows(&self, first: usize, interpolate: bool, out: &mut [f32], progress: &(dyn Fn(usize) + Sync), on_row: RowHook) -> Vec<RowResult> {
        let fp = self.exp.det.fpixels();
        let per_batch = (BATCH_PIXELS / fp.max(1)).max(1);
        let mut results = Vec::with_capacity(out.len() / fp.max(1));
        for (b, chunk) in out.chunks_mut(per_batch * fp).enumerate() {
            let start = first + b * per_batch;
            let n = chunk.len() / fp;
            let rows = match self.render_batch(start, n, interpolate, chunk) {
                Ok(rows) => rows,
                Err(e) => {
                    // a device that fails mid-run: the same rows on the CPU, said once
                    static SAID: std::sync::Once = std::sync::Once::new();
                    SAID.call_once(|| eprintln!("warning: GPU backend failed ({e}); rendering on the CPU instead"));
                    // the CPU this process would use (the planner's fall-back: `NANOBRAGG_SIMD` honoured)
                    let cpu = |b: &dyn RenderBackend| b.render_rows(start, interpolate, chunk, progress, on_row);
                    results.extend(super::simd::with_cpu_backend(self.exp, super::plan::Backend::Gpu, self.precision, cpu));
                    continue;
                }
            };
            chunk.par_chunks(fp).zip(rows.par_iter()).enumerate().for_each(|(i, (row, &(_, from)))| {
                if from >= fp {
                    on_row(start + i, row);
                }
            });
            progress(n);
            results.extend(rows.into_iter().map(|(omega, from)| RowResult { omega, end: if from >= fp { RowEnd::Complete } else { RowEnd::HandOver { from } } }));
        }
        self.report_timing();
        results
    }
}

/// The CUDA side: the driver and NVRTC through cudarc, loaded at run time.
#[cfg(feature = "gpu")]
mod cuda {
    use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};
    use std::sync::Arc;

    pub struct Device {
        ctx: Arc<CudaContext>,
        stream: Arc<CudaStream>,
        functions: Vec<(&'static str, CudaFunction)>,
    }

    fn text(e: impl std::fmt::Debug) -> String {
        format!("{e:?}")
    }

    impl Device {
        /// Open device 0 and compile the kernel for its architecture; the device's name.
        pub fn open() -> Result<(Device, String), String> {
            // SAFETY: only probes whether the libraries can be loaded
            if !unsafe { cudarc::driver::sys::is_culib_present() } {
                return Err("no CUDA driver (libcuda.so) on this machine".into());
            }
            let count = CudaContext::device_count().map_err(|e| format!("CUDA driver: {}", text(e)))?;
            if count < 1 {
                return Err("no CUDA device".into());
            }
            let ctx = CudaContext::new(0).map_err(|e| format!("CUDA device 0: {}", text(e)))?;
            let name = ctx.name().unwrap_or_else(|_| "CUDA device 0".into());
            let (major, minor) = ctx.compute_capability().map_err(text)?;
            // machine code for this device's architecture (no PTX JIT by the driver, whatever PTX
            // version the driver takes); PTX where NVRTC cannot make it
            let arch = format!("sm_{major}{minor}");
            let cached = super::cache_path(&arch);
            let from_cache = cached.as_ref().and_then(|p| std::fs::read(p).ok()).filter(|b| !b.is_empty());
            let module = match from_cache.map(|b| ctx.load_module(cudarc::nvrtc::Ptx::from_binary(b))) {
                Some(Ok(m)) => Ok(m),
                // not cached (or unreadable there): compile, and keep it for the next process
                _ => match super::compile_cubin(&arch) {
                    Ok(cubin) => {
                        if let Some(p) = &cached {
                            let _ = p.parent().map(std::fs::create_dir_all);
                            let _ = crate::io::atomic::write_atomic(p, &cubin);
                        }
                        ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
                    }
                    Err(_) => ctx.load_module(cudarc::nvrtc::Ptx::from_src(super::compile_ptx(&format!("compute_{major}{minor}"))?)),
                },
            }
            .map_err(|e| format!("loading the kernel: {}", text(e)))?;
            let mut functions = Vec::new();
            for name in ["render_f64", "render_f32", "row_omega"] {
                functions.push((name, module.load_function(name).map_err(text)?));
            }
            let stream = ctx.default_stream();
            Ok((Device { ctx, stream, functions }, format!("{name} (sm_{major}{minor})")))
        }

        pub fn upload(&self, bytes: &[u8]) -> Result<CudaSlice<u8>, String> {
            let bytes = if bytes.is_empty() { &[0u8][..] } else { bytes };
            self.stream.clone_htod(bytes).map_err(text)
        }

        pub fn zeros(&self, len: usize) -> Result<CudaSlice<u8>, String> {
            self.stream.alloc_zeros::<u8>(len.max(1)).map_err(text)
        }

        pub fn download(&self, s: &CudaSlice<u8>, into: &mut [u8]) -> Result<(), String> {
            let view = s.slice(..into.len());
            self.stream.memcpy_dtoh(&view, into).map_err(text)?;
            self.stream.synchronize().map_err(text)
        }

        pub fn launch(&self, kernel: &str, params: u64, blocks: u32, threads: u32, sums: Option<u64>) -> Result<(), String> {
            let f = &self.functions.iter().find(|(n, _)| *n == kernel).expect("a kernel of gpu.cu").1;
            let cfg = LaunchConfig { grid_dim: (blocks.max(1), 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
            let mut b = self.stream.launch_builder(f);
            b.arg(&params);
            if let Some(s) = &sums {
                b.arg(s);
            }
            // SAFETY: the kernels take (const Params*) and (const Params*, double*) as pushed; the
            // Params and every address in it are live allocations of this context
            unsafe { b.launch(cfg) }.map_err(text)?;
            Ok(())
        }

        pub fn finish(&self) -> Result<(), String> {
            let _ = &self.ctx;
            self.stream.synchronize().map_err(text)
        }
    }

    pub fn addr(dev: &Device, s: &CudaSlice<u8>) -> u64 {
        let (ptr, _sync) = s.device_ptr(&dev.stream);
        ptr
    }
}

/// Environment variable naming the folder of compiled kernels (default `$XDG_CACHE_HOME/nanobragg-rs`,
/// else `~/.cache/nanobragg-rs`); `off` compiles in every process.
pub const CACHE_ENV: &str = "NANOBRAGG_GPU_CACHE";

/// Where the machine code of this kernel source for `arch` is kept between processes (its name holds
/// a digest of the source and the compile options), or `None` when caching is off.
#[cfg(feature = "gpu")]
fn cache_path(arch: &str) -> Option<std::path::PathBuf> {
    use sha2::{Digest, Sha256};
    let dir = match std::env::var_os(CACHE_ENV) {
        Some(v) if v == "off" => return None,
        Some(v) => std::path::PathBuf::from(v),
        None => match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
            (Some(x), _) if !x.is_empty() => std::path::PathBuf::from(x).join("nanobragg-rs"),
            (_, Some(h)) if !h.is_empty() => std::path::PathBuf::from(h).join(".cache").join("nanobragg-rs"),
            _ => return None,
        },
    };
    let mut h = Sha256::new();
    h.update(KERNEL_SOURCE.as_bytes());
    h.update(nvrtc_options(arch).join(" ").as_bytes());
    let digest: String = h.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect();
    Some(dir.join(format!("gpu-kernel-{arch}-{digest}.cubin")))
}

/// The NVRTC options of every compile of [`KERNEL_SOURCE`] for `arch`.
#[cfg(feature = "gpu")]
fn nvrtc_options(arch: &str) -> Vec<String> {
    vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()]
}

/// Compile [`KERNEL_SOURCE`] to machine code (CUBIN) for `arch` (`sm_90`, say) with NVRTC.
#[cfg(feature = "gpu")]
pub fn compile_cubin(arch: &str) -> std::result::Result<Vec<u8>, String> {
    use cudarc::nvrtc::{result, sys};
    // SAFETY: only probes whether the library can be loaded
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err("no NVRTC library (libnvrtc.so.13) found: add the CUDA toolkit's lib64 to LD_LIBRARY_PATH".into());
    }
    let src = std::ffi::CString::new(KERNEL_SOURCE).expect("the kernel source has no NUL");
    let prog = result::create_program(&src, None).map_err(|e| format!("NVRTC: {e:?}"))?;
    // SAFETY: `prog` is a live program until destroyed below; the buffer holds the size NVRTC gave
    let cubin = unsafe {
        let compiled = result::compile_program(prog, &nvrtc_options(arch)).map_err(|e| format!("NVRTC: {e:?}"));
        let mut size = 0usize;
        let got = compiled.and_then(|_| sys::nvrtcGetCUBINSize(prog, &mut size).result().map_err(|e| format!("NVRTC: {e:?}"))).and_then(|_| {
            let mut buf = vec![0u8; size];
            sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut std::ffi::c_char).result().map(|_| buf).map_err(|e| format!("NVRTC: {e:?}"))
        });
        let _ = result::destroy_program(prog);
        got
    }?;
    if cubin.is_empty() {
        return Err(format!("NVRTC made no machine code for {arch}"));
    }
    Ok(cubin)
}

/// Compile [`KERNEL_SOURCE`] to PTX for `arch` (`compute_90`, say) with NVRTC.
#[cfg(feature = "gpu")]
pub fn compile_ptx(arch: &str) -> std::result::Result<String, String> {
    // SAFETY: only probes whether the library can be loaded
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err("no NVRTC library (libnvrtc.so.13) found: add the CUDA toolkit's lib64 to LD_LIBRARY_PATH".into());
    }
    let opts = cudarc::nvrtc::CompileOptions { options: nvrtc_options(arch), ..Default::default() };
    match cudarc::nvrtc::compile_ptx_with_opts(KERNEL_SOURCE, opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => {
            let log = log.to_string_lossy();
            Err(format!("NVRTC: {}", log.lines().find(|l| l.contains("error")).unwrap_or(&log).trim()))
        }
        Err(e) => Err(format!("NVRTC: {e:?}")),
    }
}

#[cfg(all(test, feature = "gpu"))]
mod tests {
    #[test]
    fn auto_break_even_is_per_thread_and_by_precision() {
        use super::{auto_break_even, Precision};
        // the crossings measured on the H200's 16 threads lie between these (2026-11-28 ladder)
        assert!((1.5e9..2.0e9).contains(&auto_break_even(16, Precision::Double)));
        assert!((2.1e9..4.3e9).contains(&auto_break_even(16, Precision::Single)));
        assert_eq!(auto_break_even(4, Precision::Double) * 4.0, auto_break_even(16, Precision::Double));
        assert_eq!(auto_break_even(0, Precision::Single), auto_break_even(1, Precision::Single));
    }

    use super::*;

    #[test]
    fn the_kernel_cache_is_named_by_source_and_options_and_can_be_turned_off() {
        // the only test that sets this variable
        std::env::set_var(CACHE_ENV, "/tmp/nb-cache");
        let p90 = cache_path("sm_90").expect("a cache path");
        let p80 = cache_path("sm_80").expect("a cache path");
        assert!(p90.starts_with("/tmp/nb-cache") && p90.to_string_lossy().contains("gpu-kernel-sm_90-"));
        assert_ne!(p90, p80, "one file per architecture");
        assert_eq!(p90, cache_path("sm_90").unwrap(), "the same source and options, the same name");
        std::env::set_var(CACHE_ENV, "off");
        assert_eq!(cache_path("sm_90"), None);
        std::env::remove_var(CACHE_ENV);
    }
}
