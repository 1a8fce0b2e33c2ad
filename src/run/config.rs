//! `Config`: one simulation as asked for: the physics ([`Params`]), the outputs ([`OutputSettings`])
//! and the run options ([`RunOptions`]). It saves to and loads from JSON (`--save-params`,
//! `--params`); the images read for `-img`/`-mask` are not part of the saved form (their paths are).

use std::path::{Path, PathBuf};

use crate::experiment::params::{Params, Precision};
use crate::io::smv::SmvImage;
use crate::{Error, Result};

/// Resolve an output (or cache) path against `--out-dir`.
pub fn resolve_out(cfg: &Config, p: &Path) -> PathBuf {
    match &cfg.output.out_dir {
        Some(d) if p.is_relative() => d.join(p),
        _ => p.to_path_buf(),
    }
}

/// Everything the user asked for. Defaults are the C program's.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub params: Params,
    pub output: OutputSettings,
    pub run: RunOptions,
    /// The `-img` image, once read (its path is `params.img_file`).
    #[serde(skip)]
    pub img: Option<SmvImage>,
    /// The `-mask` image, once read (its path is `params.mask_file`).
    #[serde(skip)]
    pub mask: Option<SmvImage>,
}

impl Config {
    /// The JSON form (`--save-params`): params, output and run sections, floats exact.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a Config always serializes")
    }

    /// Parse the JSON form; missing fields take their defaults, unknown fields are errors.
    pub fn from_json(text: &str) -> std::result::Result<Config, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Read a JSON parameter file (`--params`). The mask named in it is read too.
    pub fn load_json(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
        let mut c = Config::from_json(&text).map_err(|e| Error::file_line(path, e.line(), format!("bad parameter file: {e}")))?;
        c.params.check_ranges().map_err(|e| Error::file(path, format!("bad parameter file: {e}")))?;
        if let Some(m) = c.params.mask_file.clone() {
            c.mask = Some(crate::io::smv::read_smv(&m)?);
        }
        Ok(c)
    }

    /// Write the JSON form to `path` (atomically: no partial file on failure).
    pub fn save_json(&self, path: &Path) -> Result<()> {
        // `-quiet` is how this run was watched, not part of the experiment: a `--params` run of the
        // saved file would print nothing, and no flag turns it back on
        let mut saved = self.clone();
        saved.run.quiet = false;
        let mut text = saved.to_json();
        text.push('\n');
        crate::io::atomic::write_atomic(path, text.as_bytes())
    }
}

/// Which files are written and how they are scaled. Relative names are resolved against `out_dir`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputSettings {
    pub floatfile: PathBuf,
    pub intfile: PathBuf,
    pub pgmfile: PathBuf,
    pub noisefile: PathBuf,
    pub pngfile: Option<PathBuf>,
    /// CBF image (32-bit counts, miniCBF geometry header), not in the C.
    pub cbffile: Option<PathBuf>,
    /// NeXus/NXmx HDF5 image with the full geometry, not in the C.
    pub nexusfile: Option<PathBuf>,
    /// `--expt-out`: the simulated experiment as a DIALS experiment list, not in the C.
    pub expt_out: Option<PathBuf>,
    /// SMV headers with the keys dxtbx's ADSC reader expects (opt-in; the default header is the C's).
    pub smv_dxtbx: bool,
    /// Which generator makes the noise image (`--noise`): the C's serial stream (default) or fast.
    pub noise_mode: crate::noise::NoiseMode,
    pub write_pgm: bool,
    /// `--png-legend`: a scale strip below the PNG preview's rows.
    pub png_legend: bool,
    /// Write the float and int images (always, in `simulate` as in the C; `series --outputs` may leave
    /// them out).
    pub write_float: bool,
    pub write_int: bool,
    /// Write the noise SMV image (when `calculate_noise`); the noise draws still make the CBF/NeXus
    /// counts without it (`series --outputs cbf`).
    pub write_noise: bool,
    pub calculate_noise: bool,
    /// counts/photon, 0 = auto
    pub intfile_scale: f64,
    /// grey levels/photon, 0 = auto
    pub pgm_scale: f64,
    /// counts
    pub adc_offset: f64,
    /// `-adc` was given: only then do the CBF and NeXus counts carry the offset (the SMV images always
    /// do, as the C's); a DIALS user reading a CBF expects photons, and 40 in every empty pixel is not.
    pub adc_given: bool,
    /// Directory that relative output names are resolved against.
    pub out_dir: Option<PathBuf>,
    /// `--gradients`: the parameters whose derivative images are written (`<prefix><name>.bin`).
    pub gradients: Vec<crate::experiment::tangents::Param>,
    /// `--gradient-prefix`: what the derivative images' names start with (default `grad_`).
    pub gradient_prefix: PathBuf,
    /// `--observed`, `--loss`, `--loss-out`, `--dfhkl-out`: a loss against a measured image.
    pub loss: LossSettings,
}

/// The loss of the rendered image against an observed one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LossKind {
    /// L = Σ(μ − y ln μ): the negative Poisson log-likelihood up to a constant.
    #[default]
    Poisson,
    /// L = ½Σ(μ − y)².
    Lsq,
}

impl LossKind {
    pub fn name(self) -> &'static str {
        match self {
            LossKind::Poisson => "poisson",
            LossKind::Lsq => "lsq",
        }
    }
}

/// `--observed OBS --loss poisson|lsq [--loss-out L.json] [--dfhkl-out G.hkl]`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LossSettings {
    /// The measured image: raw float, SMV, CBF or NeXus.
    pub observed: Option<PathBuf>,
    pub kind: LossKind,
    /// `{"loss", "value", "gradient": {NAME: dL/dθ}}`.
    pub loss_out: Option<PathBuf>,
    /// `h k l dL/dF` per `-hkl` reflection, in file order.
    pub dfhkl_out: Option<PathBuf>,
}

impl OutputSettings {
    /// The offset added to the CBF and NeXus counts: `-adc` when given, else 0 (plain photon counts).
    pub fn counts_offset(&self) -> f64 {
        if self.adc_given {
            self.adc_offset
        } else {
            0.0
        }
    }
}

impl Default for OutputSettings {
    fn default() -> Self {
        OutputSettings {
            floatfile: PathBuf::from("floatimage.bin"),
            intfile: PathBuf::from("intimage.img"),
            pgmfile: PathBuf::from("image.pgm"),
            noisefile: PathBuf::from("noiseimage.img"),
            pngfile: None,
            cbffile: None,
            nexusfile: None,
            expt_out: None,
            smv_dxtbx: false,
            noise_mode: crate::noise::NoiseMode::C,
            write_pgm: true,
            png_legend: false,
            write_float: true,
            write_int: true,
            write_noise: true,
            calculate_noise: true,
            intfile_scale: 0.0,
            pgm_scale: 0.0,
            adc_offset: 40.0,
            adc_given: false,
            out_dir: None,
            gradients: Vec::new(),
            gradient_prefix: PathBuf::from("grad_"),
            loss: LossSettings::default(),
        }
    }
}

/// How the run is carried out; nothing here changes the image.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunOptions {
    /// Worker threads (`None` = one per core).
    pub threads: Option<usize>,
    pub precision: Precision,
    /// `--backend`: the CPU kernels, the GPU, or the GPU where there is one.
    pub backend: BackendChoice,
    pub progress: bool,
    pub quiet: bool,
    pub printout: bool,
    pub printout_pixel: Option<(i64, i64)>,
    /// Where `--save-params` writes the parameters (not itself saved).
    #[serde(skip)]
    pub save_params: Option<PathBuf>,
    /// The `--params` file the parameters were loaded from (an input: no output may replace it).
    #[serde(skip)]
    pub params_file: Option<PathBuf>,
}

impl RunOptions {
    /// The kernel's options for this run: the planned backend, in this run's precision.
    pub fn render_options(&self) -> crate::kernel::RenderOptions {
        let cpu = crate::kernel::RenderOptions { precision: self.precision, ..Default::default() };
        match self.backend {
            BackendChoice::Cpu => cpu,
            BackendChoice::Gpu | BackendChoice::Auto => crate::kernel::RenderOptions { backend: crate::kernel::Backend::Gpu, ..cpu },
        }
    }

    /// `--backend auto` settled for a run of `samples` sample evaluations (every frame's): the CPU
    /// where they are too few for a GPU's start-up to pay ([`crate::kernel::gpu::auto_break_even`]
    /// on this run's threads; the device is then never opened) or where there is no device (a
    /// series then renders its frames side by side), else left to the planner (the GPU where the
    /// experiment fits it, else the CPU). The line that says so when it settled (`counted` after
    /// the samples: what they are of), `None` otherwise.
    pub fn settle_auto(&mut self, samples: f64, counted: &str) -> Option<String> {
        if self.backend != BackendChoice::Auto {
            return None;
        }
        // threads beyond the cores render no faster
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = self.threads.unwrap_or_else(rayon::current_num_threads).min(cores);
        let from = crate::kernel::gpu::auto_break_even(threads, self.precision);
        let why = if samples >= from {
            format!("no GPU ({})", crate::kernel::gpu::device().err()?)
        } else {
            let on = if threads == 1 { "1 thread".to_string() } else { format!("{threads} threads") };
            format!("{samples:.2e} sample evaluations are fewer than the {from:.1e} from which a GPU's start-up pays on {on}{counted}")
        };
        self.backend = BackendChoice::Cpu;
        Some(format!("--backend auto: rendering on the CPU: {why}"))
    }

    /// Refuse `--backend gpu` where it cannot render (no device, no NVRTC, a build without the
    /// backend, an experiment or output it does not support), in one line naming the cause; `auto`
    /// falls back to the CPU there instead (the planner, `kernel::kernel_for`).
    pub fn check_backend(&self, exp: &crate::experiment::Experiment, output: &OutputSettings) -> crate::Result<()> {
        if self.backend != BackendChoice::Gpu {
            return Ok(());
        }
        let refuse = |why: String| Err(crate::Error::setup(format!("--backend gpu: {why}")));
        if !output.gradients.is_empty() {
            return refuse("derivative images (--gradients) are rendered on the CPU only; use --backend cpu".into());
        }
        if let Some(why) = crate::kernel::gpu::unsupported(exp) {
            return refuse(why);
        }
        match crate::kernel::gpu::device() {
            Ok(_) => Ok(()),
            Err(why) => refuse(why),
        }
    }
}

/// Where the pixel kernel runs (`--backend`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// The SIMD kernel at the CPU's level (or the reference, `NANOBRAGG_SIMD`).
    #[default]
    Cpu,
    /// The CUDA kernel; refused where there is no device.
    Gpu,
    /// The GPU where there is a device and the experiment fits it, else the CPU.
    Auto,
}

impl BackendChoice {
    pub fn parse(s: &str) -> Option<BackendChoice> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Some(BackendChoice::Cpu),
            "gpu" | "cuda" => Some(BackendChoice::Gpu),
            "auto" => Some(BackendChoice::Auto),
            _ => None,
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { threads: None, precision: Precision::Double, backend: BackendChoice::Cpu, progress: true, quiet: false, printout: false, printout_pixel: None, save_params: None, params_file: None }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn auto_settles_on_the_cpu_below_the_gpus_break_even_only() {
        use super::{BackendChoice, RunOptions};
        let auto = RunOptions { backend: BackendChoice::Auto, threads: Some(1), ..Default::default() };
        let from = crate::kernel::gpu::auto_break_even(1, auto.precision);
        let mut light = auto.clone();
        let note = light.settle_auto(from / 2.0, "").expect("settled");
        assert_eq!(light.backend, BackendChoice::Cpu);
        assert!(note.starts_with("--backend auto: rendering on the CPU") && note.ends_with("pays on 1 thread"), "{note}");
        // threads beyond the cores count as the cores
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut many = RunOptions { threads: Some(cores * 64), ..auto.clone() };
        let note = many.settle_auto(crate::kernel::gpu::auto_break_even(cores * 2, auto.precision), "");
        assert!(note.as_ref().is_none_or(|n| n.contains("no GPU")), "{note:?}");
        let mut heavy = auto.clone();
        match crate::kernel::gpu::device() {
            Ok(_) => {
                assert_eq!(heavy.settle_auto(from, ""), None);
                assert_eq!(heavy.backend, BackendChoice::Auto, "left to the planner: the GPU");
            }
            Err(why) => {
                assert_eq!(heavy.settle_auto(from, ""), Some(format!("--backend auto: rendering on the CPU: no GPU ({why})")));
                assert_eq!(heavy.backend, BackendChoice::Cpu);
            }
        }
        for asked in [BackendChoice::Cpu, BackendChoice::Gpu] {
            let mut o = RunOptions { backend: asked, ..Default::default() };
            assert_eq!(o.settle_auto(0.0, ""), None);
            assert_eq!(o.backend, asked);
        }
    }

    use super::*;
    use crate::experiment::params::Misset;

    #[test]
    fn json_round_trip_is_exact() {
        let mut c = Config::default();
        c.params.cell_deg(78.1, 79.3, 38.7, 90.0, 91.1, 119.9).lambda_angstrom(0.9793).mosaic_deg(0.123).phi_deg(33.3);
        c.params.misset = Some(Misset::Angles([0.1, 0.2, 0.3]));
        c.params.roi = Some([1, 2, 3, 4]);
        c.output.pngfile = Some("a.png".into());
        c.run.threads = Some(3);
        let back = Config::from_json(&c.to_json()).unwrap();
        assert_eq!(back.params, c.params);
        assert_eq!(back.output, c.output);
        assert_eq!(back.run, c.run);
        // partial files take defaults; unknown names are errors
        let p = Config::from_json(r#"{"params": {"distance": 0.2}}"#).unwrap();
        assert_eq!(p.params.distance, 0.2);
        assert_eq!(p.params.lambda0, Params::default().lambda0);
        assert!(Config::from_json(r#"{"params": {"distanse": 0.2}}"#).is_err());
    }
}
