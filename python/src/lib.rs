//! `nanobragg._nanobragg`: the native core of the Python package `nanobragg`. It holds one resolved
//! experiment built from nanoBragg flags (through the library's own flag parser and setup, so every
//! flag means what it means on the command line) and renders it with the GIL released. The friendly
//! layer (keywords, numpy inputs, Dask, dxtbx) is Python, in `nanobragg/__init__.py`.

use nbcore::run::config::Config;
use nbcore::experiment::Experiment;
use nbcore::run::simulate;
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// The library's one-line errors as Python exceptions: files that cannot be read or written are
/// OSError, everything else the user gave (flags, file contents, impossible setups) is ValueError.
/// A noise seed no other call or process shares: std's hasher keys come from the OS's entropy, a
/// counter makes calls of one process differ. Negative, as the C keeps its seeds.
fn fresh_seed() -> i64 {
    use std::hash::BuildHasher;
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let v = std::collections::hash_map::RandomState::new().hash_one(CALLS.fetch_add(1, Ordering::Relaxed));
    -((v >> 2) as i64).max(1)
}

fn to_py(e: nbcore::Error) -> PyErr {
    let msg = e.to_string();
    match &e {
        nbcore::Error::Output { .. } | nbcore::Error::OutputIo { .. } | nbcore::Error::FileIo { .. } => PyOSError::new_err(msg),
        nbcore::Error::File { line: None, reason, .. } if reason.starts_with("cannot read") || reason.starts_with("cannot open") => {
            PyOSError::new_err(msg)
        }
        _ => PyValueError::new_err(msg),
    }
}

/// One simulation: the flags, the parsed configuration and the experiment resolved from them.
#[pyclass(module = "nanobragg._nanobragg", name = "Core", frozen)]
struct Core {
    args: Vec<String>,
    cfg: Config,
    exp: Experiment,
    log: Vec<String>,
    /// What the setup read (the derivative images build the setup again around it).
    inputs: nbcore::experiment::inputs::Inputs,
}

/// The `loss=` argument: "poisson" or "lsq".
fn loss_kind(loss: &str) -> PyResult<nbcore::run::config::LossKind> {
    match loss {
        "poisson" => Ok(nbcore::run::config::LossKind::Poisson),
        "lsq" => Ok(nbcore::run::config::LossKind::Lsq),
        other => Err(PyValueError::new_err(format!("loss: expects 'poisson' or 'lsq' (got '{other}')"))),
    }
}

/// `--gradients` names, refused with the list of valid ones.
fn parse_names(names: &[String]) -> PyResult<Vec<nbcore::experiment::tangents::Param>> {
    use nbcore::experiment::tangents::Param;
    names.iter().map(|n| Param::parse(n).ok_or_else(|| PyValueError::new_err(format!("unknown parameter '{n}' (valid: {})", Param::names())))).collect()
}

/// The image's (rows, fast): one panel's (slow, fast), or every panel's rows one after another.
fn shape_of(exp: &Experiment) -> (usize, usize) {
    (exp.det.rows(), exp.det.fpixels())
}

impl Core {
    /// The simulation of `cfg` on inputs already read (a refined fit of this one): the experiment is
    /// built again, no file is read.
    fn from_loaded(args: Vec<String>, cfg: Config, inputs: nbcore::experiment::inputs::Inputs) -> nbcore::Result<Core> {
        let exp = nbcore::run::setup::build_experiment(&cfg, &inputs)?;
        cfg.run.check_backend(&exp, &cfg.output)?;
        let log = nbcore::run::summary::setup_summary(&cfg, &inputs, &exp);
        Ok(Core { args, cfg, exp, log, inputs })
    }

    /// A float image given from Python: C-contiguous float32 of the detector's (slow, fast) shape.
    fn image_slice<'a>(&self, image: &'a PyReadonlyArray2<'_, f32>) -> PyResult<&'a [f32]> {
        let (s, f) = shape_of(&self.exp);
        let shape = image.shape();
        if shape != [s, f] {
            return Err(PyValueError::new_err(format!(
                "image has shape ({}, {}) but the detector is (slow, fast) = ({s}, {f})",
                shape[0], shape[1]
            )));
        }
        let data = image.as_slice().map_err(|_| PyValueError::new_err("image must be a C-contiguous float32 array"))?;
        if let Some(i) = data.iter().position(|v| !v.is_finite()) {
            return Err(PyValueError::new_err(format!("image pixel (slow {}, fast {}) is {} (not finite)", i / f, i % f, data[i])));
        }
        Ok(data)
    }

    fn render_output(image: &[f32]) -> nbcore::kernel::RenderOutput {
        nbcore::kernel::RenderOutput { float: image.to_vec(), omega_sum: 0.0, interp_oob: None }
    }

    fn int_scale(&self, image: &[f32], scale: Option<f64>) -> f64 {
        // as the C: -scale, else 55000 / max_I over the rendered pixels (L2830)
        match scale {
            Some(s) if s > 0.0 => s,
            _ => {
                let st = self.stats_of(image);
                if st.max_i > 0.0 {
                    55000.0 / st.max_i
                } else {
                    1.0
                }
            }
        }
    }

    fn stats_of(&self, image: &[f32]) -> nbcore::stats::ImageStats {
        let e = &self.exp;
        // as the command line: the ROI and -mask of one panel, every pixel of several
        let mask = if e.det.panels.len() == 1 { e.det.panel().mask.as_deref() } else { None };
        nbcore::stats::image_stats(&nbcore::run::outputs::whole_image(e, image), mask, e.sampling.subpixel_size, e.sampling.oversample)
    }

    /// Refuse, for a detector of several panels, a format that holds one panel.
    fn one_panel(&self, what: &str) -> PyResult<()> {
        let n = self.exp.det.panels.len();
        if n > 1 {
            return Err(PyValueError::new_err(format!(
                "{what} holds one panel and this detector has {n}: use write_float or write_nexus, or build the Simulation with --panel N"
            )));
        }
        Ok(())
    }
}

#[pymethods]
impl Core {
    /// Core(args): parse nanoBragg flags and build the experiment (reads -hkl/-mat/... files now).
    #[new]
    fn new(py: Python<'_>, args: Vec<String>) -> PyResult<Self> {
        let (cfg, exp, log) = py
            .detach(|| -> nbcore::Result<_> {
                let cfg = nbcore::cli::parse::parse_simulate_args(&args)?;
                let (exp, log, inputs) = simulate::setup_with_inputs(&cfg)?;
                // `--backend gpu` is refused here as on the command line (this module is built
                // without the GPU backend), never rendered on the CPU instead in silence
                cfg.run.check_backend(&exp, &cfg.output)?;
                Ok((cfg, exp, (log.lines, inputs)))
            })
            .map_err(to_py)?;
        let (log, inputs) = log;
        Ok(Core { args, cfg, exp, log, inputs })
    }

    /// The flags this simulation was built from.
    #[getter]
    fn args(&self) -> Vec<String> {
        self.args.clone()
    }

    /// The setup messages the command line prints before rendering, one string per line.
    #[getter]
    fn log(&self) -> Vec<String> {
        self.log.clone()
    }

    /// (slow, fast) pixels.
    #[getter]
    fn shape(&self) -> (usize, usize) {
        shape_of(&self.exp)
    }

    /// Samples per pixel (sources x mosaic domains x phi steps x oversample^2), as the C counts them.
    #[getter]
    fn steps(&self) -> i64 {
        self.exp.sampling.steps
    }

    /// The noise seed the flags give (the C's stored value, -seed negated), and whether -nonoise was given.
    #[getter]
    fn seed(&self) -> i64 {
        -self.exp.seed
    }

    /// Render the float image: float32 numpy array (slow, fast), photons per pixel, bit-identical to
    /// the command line's -floatfile. The GIL is released while the threads work; `progress(done, total)`
    /// is called from this thread (in rows) about every 0.05 s; Ctrl-C (SIGINT) stops the workers and
    /// raises KeyboardInterrupt within a row's time, leaving the Simulation usable.
    #[pyo3(signature = (threads=None, progress=None))]
    fn render<'py>(&self, py: Python<'py>, threads: Option<usize>, progress: Option<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        if threads == Some(0) {
            return Err(PyValueError::new_err("threads: must be at least 1"));
        }
        let exp = &self.exp;
        let opts = self.cfg.run.render_options();
        let opts = &opts;
        let total = exp.det.rows();
        let done = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        // a Receiver is Send but not Sync: the waits below borrow it from the GIL-free closure
        let rx = std::sync::Mutex::new(rx);
        let (res, py_err) = std::thread::scope(|scope| {
            let handle = scope.spawn(|| {
                let r = simulate::render_until(exp, opts, threads, &|n| {
                    done.fetch_add(n, Ordering::Relaxed);
                }, &stop);
                let _ = tx.send(());
                r
            });
            // this (Python's) thread: Ctrl-C and the progress callback every 0.05 s, the GIL released
            // in between; either stops the workers within a row
            let mut py_err: Option<PyErr> = None;
            let mut last = usize::MAX;
            loop {
                // done, or the worker gone (a panic drops the sender): either way the loop ends
                let finished = py.detach(|| {
                    rx.lock().map(|r| !matches!(r.recv_timeout(Duration::from_millis(50)), Err(std::sync::mpsc::RecvTimeoutError::Timeout))).unwrap_or(true)
                });
                if py_err.is_none() {
                    if let Err(e) = py.check_signals() {
                        py_err = Some(e);
                    } else if let Some(cb) = &progress {
                        let d = done.load(Ordering::Relaxed).min(total);
                        if d != last {
                            last = d;
                            py_err = cb.call1((d, total)).err();
                        }
                    }
                    if py_err.is_some() {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                if finished {
                    break;
                }
            }
            (handle.join(), py_err)
        });
        if let Some(e) = py_err {
            return Err(e);
        }
        let out = match res.map_err(|_| PyRuntimeError::new_err("render thread panicked"))?.map_err(to_py)? {
            Some(out) => out,
            None => return Err(PyRuntimeError::new_err("render stopped")),
        };
        let mut out = out;
        // the flags' -add_float images, as the command line's -floatfile has them
        for p in &self.cfg.params.add_float {
            simulate::add_into(&mut out.float, p).map_err(to_py)?;
        }
        let (s, f) = shape_of(exp);
        let arr = Array2::from_shape_vec((s, f), out.float).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok(arr.into_pyarray(py))
    }

    /// Poisson noise image (uint16, slow x fast) from a float image, as the command line's -noisefile:
    /// with the flags' -seed (or `seed`) it is identical to the CLI's noise image. `adc` defaults to -adc.
    /// `mode` ("c" or "fast", default the flags' --noise) picks the generator: "c" is the C's serial
    /// stream, "fast" the parallel counter-based one (same distributions, not the C's pixels).
    #[pyo3(signature = (image, seed=None, adc=None, mode=None))]
    fn noise<'py>(&self, py: Python<'py>, image: PyReadonlyArray2<'py, f32>, seed: Option<i64>, adc: Option<f64>, mode: Option<&str>) -> PyResult<Bound<'py, PyArray2<u16>>> {
        let mode = match mode {
            None => self.cfg.output.noise_mode,
            Some(m) => nbcore::noise::NoiseMode::parse(m).ok_or_else(|| PyValueError::new_err(format!("mode: expects 'c' or 'fast' (got '{m}')")))?,
        };
        let data = self.image_slice(&image)?;
        if let Some((i, v)) = nbcore::io::float::first_non_finite(data) {
            // the Poisson sampler cannot draw from it (the C's loops forever)
            let fp = self.exp.det.fpixels().max(1);
            return Err(PyValueError::new_err(format!("image: pixel {i} (fast {}, slow {}) is {v}: the image must hold finite values", i % fp, i / fp)));
        }
        if let Some(a) = adc {
            if !a.is_finite() {
                return Err(PyValueError::new_err("adc: must be a finite number"));
            }
        }
        let e = &self.exp;
        let adc = adc.unwrap_or(self.cfg.output.adc_offset);
        let mut rng = e.rng.clone();
        // without `seed=` or the flags' -seed, every call draws new noise
        let mut seed = match (seed, self.cfg.params.seed) {
            (Some(s), _) => nbcore::base::c::rng::c_negated_seed(s),
            (None, Some(_)) => e.seed,
            (None, None) => fresh_seed(),
        };
        let (sp, fp) = shape_of(e);
        let image = nbcore::run::outputs::whole_image(e, data);
        let img = py.detach(|| match mode {
            nbcore::noise::NoiseMode::C => nbcore::noise::noise_image(&mut rng, &mut seed, &image, adc),
            nbcore::noise::NoiseMode::Fast => nbcore::noise::noise_image_fast(seed, &image, adc),
        });
        let arr = Array2::from_shape_vec((sp, fp), img.pixels).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok(arr.into_pyarray(py))
    }

    /// (image, [derivative image per name]) as float32 (slow, fast) arrays, bit for bit the command
    /// line's -floatfile and `--gradients` files. The GIL is released while rendering.
    #[pyo3(signature = (names, threads=None))]
    fn render_gradients<'py>(&self, py: Python<'py>, names: Vec<String>, threads: Option<usize>) -> PyResult<(Bound<'py, PyArray2<f32>>, Vec<Bound<'py, PyArray2<f32>>>)> {
        let params = parse_names(&names)?;
        let (float, grads) = py
            .detach(|| -> nbcore::Result<_> {
                // the command line's plan: the lane pass renders image and derivatives together where it can
                nbcore::experiment::tangents::check(&self.cfg.params, &self.inputs, &params)?;
                let fused = simulate::in_pool(threads, || nbcore::run::gradients::fused_render(&self.cfg, &self.inputs, &self.exp, &params))??;
                let (mut r, g) = match fused {
                    Some((r, g)) => (r, g),
                    None => {
                        let r = simulate::render(&self.exp, &self.cfg.run.render_options(), threads, &|_| {})?;
                        (r, simulate::in_pool(threads, || nbcore::run::gradients::derivative_images(&self.cfg, &self.inputs, &self.exp, &params, None))??)
                    }
                };
                for p in &self.cfg.params.add_float {
                    simulate::add_into(&mut r.float, p)?;
                }
                Ok((r.float, g.grads.into_iter().map(|v| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>()).collect::<Vec<_>>()))
            })
            .map_err(to_py)?;
        let (s, f) = shape_of(&self.exp);
        let arr = |v: Vec<f32>| Array2::from_shape_vec((s, f), v).map_err(|e| PyRuntimeError::new_err(e.to_string())).map(|a| a.into_pyarray(py));
        Ok((arr(float)?, grads.into_iter().map(arr).collect::<PyResult<_>>()?))
    }

    /// (L, [dL/dname], rows of (h, k, l, dL/dF) per -hkl reflection in file order) of the rendered
    /// image (with -add_float) against `observed` (float64 (slow, fast) photons), loss "poisson" or "lsq".
    #[pyo3(signature = (observed, names, loss, threads=None))]
    fn loss_gradient(&self, py: Python<'_>, observed: Vec<f64>, names: Vec<String>, loss: &str, threads: Option<usize>) -> PyResult<(f64, Vec<f64>, Vec<(i32, i32, i32, f64)>)> {
        let params = parse_names(&names)?;
        let kind = loss_kind(loss)?;
        if observed.len() != self.exp.pixels() {
            return Err(PyValueError::new_err(format!("observed: {} pixels, the detector has {}", observed.len(), self.exp.pixels())));
        }
        if let Some(i) = observed.iter().position(|v| !v.is_finite()) {
            return Err(PyValueError::new_err(format!("observed: pixel {i} is not finite")));
        }
        let lg = py
            .detach(|| -> nbcore::Result<_> {
                let mut r = simulate::render(&self.exp, &self.cfg.run.render_options(), threads, &|_| {})?;
                for p in &self.cfg.params.add_float {
                    simulate::add_into(&mut r.float, p)?;
                }
                let label = std::path::Path::new("(observed array)");
                simulate::in_pool(threads, || nbcore::run::gradients::loss_gradient(&self.cfg, &self.inputs, &self.exp, &r.float, &observed, kind, &params, label))?
            })
            .map_err(to_py)?;
        Ok((lg.value, lg.grads.iter().map(|g| g.1).collect(), lg.dfhkl))
    }

    /// refine(observed, names, loss, max_iterations) -> (converged, iterations, loss, [(name, value in
    /// flag units, rot_* relative to the start)], message, flags that set the refined values, the
    /// refined Core): `apps::refine` on this simulation's own inputs (its structure factors and files
    /// as read when it was built: the model fitted is the one rendered), against `observed`, a file
    /// path or float64 photons in the detector's layout (errors name it `observed`). The refined Core
    /// holds the fitted parameters, as the command line's --params-out file; nothing is written. The
    /// GIL is released.
    #[allow(clippy::type_complexity)]
    fn refine(&self, py: Python<'_>, observed: Bound<'_, PyAny>, names: Vec<String>, loss: &str, max_iterations: usize) -> PyResult<(bool, usize, f64, Vec<(String, f64)>, String, Vec<String>, Core)> {
        use nbcore::apps::refine::Observed;
        let params = parse_names(&names)?;
        let kind = loss_kind(loss)?;
        let observed = match observed.extract::<PathBuf>() {
            Ok(p) => Observed::File(p),
            Err(_) => Observed::Pixels { y: observed.extract::<Vec<f64>>()?, label: PathBuf::from("observed") },
        };
        let mut cfg = self.cfg.clone();
        cfg.output.loss.kind = kind;
        let (report, fitted) = py
            .detach(|| nbcore::apps::refine::refine_loaded(&cfg, &self.inputs, &self.exp, observed, &params, max_iterations, &mut std::io::sink()))
            .map_err(to_py)?;
        let words = nbcore::apps::refine::flag_words(&params, &fitted);
        // the fitted run as --params-out holds it: the starting configuration with the fitted values
        let mut fit = self.cfg.clone();
        fit.params = fitted;
        let mut args = self.args.clone();
        args.extend(words.iter().cloned());
        let core = py.detach(|| Core::from_loaded(args, fit, self.inputs.clone())).map_err(to_py)?;
        let values = report.values.iter().map(|(n, v)| (n.name().to_string(), *v)).collect();
        Ok((report.converged, report.iterations, report.loss, values, report.message, words, core))
    }

    /// Image statistics as the command line prints them (over the ROI, masked pixels excluded).
    fn stats<'py>(&self, py: Python<'py>, image: PyReadonlyArray2<'py, f32>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.stats_of(self.image_slice(&image)?);
        let d = PyDict::new(py);
        d.set_item("max_I", st.max_i)?;
        d.set_item("max_I_x_m", st.max_i_x)?;
        d.set_item("max_I_y_m", st.max_i_y)?;
        d.set_item("sum", st.sum)?;
        d.set_item("n", st.n)?;
        d.set_item("mean", st.mean)?;
        d.set_item("rms", st.rms)?;
        d.set_item("rmsd", st.rmsd)?;
        Ok(d)
    }

    /// Write the raw float image (4-byte little-endian floats), as -floatfile.
    fn write_float(&self, py: Python<'_>, path: PathBuf, image: PyReadonlyArray2<'_, f32>) -> PyResult<()> {
        let data = self.image_slice(&image)?;
        py.detach(|| nbcore::io::float::write_float_image(&path, data)).map_err(to_py)
    }

    /// Write the SMV integer image (as -intfile): pixels scaled by `scale` (default: 55000 / max_I) plus -adc.
    #[pyo3(signature = (path, image, scale=None))]
    fn write_smv(&self, py: Python<'_>, path: PathBuf, image: PyReadonlyArray2<'_, f32>, scale: Option<f64>) -> PyResult<f64> {
        self.one_panel("an SMV file")?;
        let data = self.image_slice(&image)?;
        let scale = self.int_scale(data, scale);
        let e = &self.exp;
        let header = simulate::smv_header(e);
        py.detach(|| {
            let ints = nbcore::io::smv::int_pixels(&e.det.panel().image(data), scale, self.cfg.output.adc_offset);
            nbcore::io::smv::write_smv(&path, &header, &ints)
        })
        .map_err(to_py)?;
        Ok(scale)
    }

    /// Write an SMV image of given uint16 pixels (for example a noise image) with this detector's header.
    fn write_smv_counts(&self, py: Python<'_>, path: PathBuf, counts: PyReadonlyArray2<'_, u16>) -> PyResult<()> {
        self.one_panel("an SMV file")?;
        let (s, f) = shape_of(&self.exp);
        if counts.shape() != [s, f] {
            return Err(PyValueError::new_err(format!("counts have shape {:?} but the detector is (slow, fast) = ({s}, {f})", counts.shape())));
        }
        let data = counts.as_slice().map_err(|_| PyValueError::new_err("counts must be a C-contiguous uint16 array"))?;
        let header = simulate::smv_header(&self.exp);
        py.detach(|| nbcore::io::smv::write_smv(&path, &header, data)).map_err(to_py)
    }

    /// Write the 8-bit PGM (as -pgmfile): scale default 250 / (5 rmsd), as the C.
    #[pyo3(signature = (path, image, scale=None))]
    fn write_pgm(&self, py: Python<'_>, path: PathBuf, image: PyReadonlyArray2<'_, f32>, scale: Option<f64>) -> PyResult<f64> {
        self.one_panel("a PGM file")?;
        let data = self.image_slice(&image)?;
        let scale = match scale {
            Some(s) if s > 0.0 => s,
            _ => {
                let st = self.stats_of(data);
                if st.rmsd > 0.0 {
                    250.0 / (5.0 * st.rmsd)
                } else {
                    self.int_scale(data, None)
                }
            }
        };
        let e = &self.exp;
        py.detach(|| {
            let bytes = nbcore::io::pgm::pgm_pixels(&e.det.panel().image(data), scale);
            nbcore::io::pgm::write_pgm(&path, e.det.panel().fpixels, e.det.panel().spixels, scale, &bytes)
        })
        .map_err(to_py)?;
        Ok(scale)
    }

    /// Write the PNG preview (as --png; `legend=True` as --png-legend, default: the flags').
    #[pyo3(signature = (path, image, legend=None))]
    fn write_png(&self, py: Python<'_>, path: PathBuf, image: PyReadonlyArray2<'_, f32>, legend: Option<bool>) -> PyResult<()> {
        self.one_panel("a PNG preview")?;
        let data = self.image_slice(&image)?;
        let legend = legend.unwrap_or(self.cfg.output.png_legend);
        let e = &self.exp;
        py.detach(|| nbcore::io::png::write_png_preview(&path, data, e.det.panel().fpixels, e.det.panel().spixels, legend)).map_err(to_py)
    }

    /// Write a CBF file (as -cbffile: 32-bit byte-offset, the miniCBF geometry header) of `counts`
    /// (int32, slow x fast).
    fn write_cbf(&self, py: Python<'_>, path: PathBuf, counts: PyReadonlyArray2<'_, i32>) -> PyResult<()> {
        self.one_panel("a CBF file")?;
        let e = &self.exp;
        if counts.shape() != [e.det.rows(), e.det.fpixels()] {
            return Err(PyValueError::new_err(format!("counts: shape {:?}, the detector is {:?}", counts.shape(), [e.det.rows(), e.det.fpixels()])));
        }
        let data = counts.as_slice().map_err(|_| PyValueError::new_err("counts: must be a C-contiguous int32 array"))?;
        let meta = nbcore::run::headers::image_meta(e, self.cfg.params.exposure);
        meta.mini_cbf_ok().map_err(|m| PyValueError::new_err(format!("{m}: a miniCBF header cannot describe this geometry; use write_nexus")))?;
        py.detach(|| nbcore::io::cbf::write_cbf(&path, &meta, data, "photon counts (written from Python)")).map_err(to_py)
    }

    /// Write an NXmx file (as -nexusfile) of `counts`: int32 (slow, fast), or (frames, slow, fast) for
    /// a sweep whose frame k starts at -phi + k·-osc.
    fn write_nexus(&self, py: Python<'_>, path: PathBuf, counts: numpy::PyReadonlyArrayDyn<'_, i32>) -> PyResult<()> {
        let e = &self.exp;
        let (s, f) = (e.det.rows(), e.det.fpixels());
        let frames = match counts.shape() {
            [a, b] if [*a, *b] == [s, f] => 1,
            [n, a, b] if [*a, *b] == [s, f] && *n > 0 => *n,
            other => return Err(PyValueError::new_err(format!("counts: shape {other:?}; give ({s}, {f}) or (frames, {s}, {f})"))),
        };
        let data = counts.as_slice().map_err(|_| PyValueError::new_err("counts: must be a C-contiguous int32 array"))?;
        let meta = nbcore::run::headers::image_meta(e, self.cfg.params.exposure);
        py.detach(|| -> nbcore::Result<()> {
            let mut w = nbcore::io::nexus::NexusWriter::create(&path, &meta, frames)?;
            for (k, frame) in data.chunks(s * f).enumerate() {
                w.write_frame(k, frame)?;
            }
            w.finish()
        })
        .map_err(to_py)
    }

    /// Write every file the command line would write for these flags (-floatfile, -intfile, -pgmfile,
    /// -noisefile, --png, -hklout; relative to --out-dir), from `image`. Returns the image paths written.
    fn write_outputs(&self, py: Python<'_>, image: PyReadonlyArray2<'_, f32>) -> PyResult<Vec<PathBuf>> {
        let data = self.image_slice(&image)?;
        let r = Self::render_output(data);
        let mut exp = self.exp.clone();
        let cfg = &self.cfg;
        py.detach(|| {
            simulate::check_outputs(cfg)?;
            // -hklout (a model's reflection list) renamed with the images, as the command line does
            let mut sink = std::io::sink();
            simulate::write_outputs_and_hklout(cfg, &mut exp, &r, &mut sink).map(|(_, files)| files)
        })
        .map_err(to_py)
    }

    /// The resolved detector and beam geometry (lab frame of the C: metres, unit vectors; the beam centre
    /// in each convention as the SMV header gives it, in mm).
    fn geometry<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let e = &self.exp;
        let d = &e.det;
        let panel = d.panel();
        let h = simulate::smv_header(e);
        let g = PyDict::new(py);
        g.set_item("convention", format!("{:?}", d.convention).to_uppercase())?;
        // the lab frame of every vector: the C's (x along the beam), or a DIALS experiment list's own
        g.set_item("frame", if d.from_file { "dials" } else { "nanobragg" })?;
        g.set_item("pivot", format!("{:?}", d.pivot).to_lowercase())?;
        g.set_item("shape", (panel.spixels, panel.fpixels))?;
        g.set_item("pixel_size_m", panel.pixel_size)?;
        g.set_item("distance_m", panel.distance)?;
        g.set_item("close_distance_m", panel.close_distance)?;
        g.set_item("wavelength_m", e.beam.lambda0)?;
        g.set_item("pix0_vector", panel.pix0_vector.to_vec())?;
        g.set_item("fdet_vector", panel.fdet_vector.to_vec())?;
        g.set_item("sdet_vector", panel.sdet_vector.to_vec())?;
        g.set_item("odet_vector", panel.odet_vector.to_vec())?;
        g.set_item("beam_vector", e.beam.beam_vector.to_vec())?;
        g.set_item("polar_vector", e.beam.polar_vector.to_vec())?;
        g.set_item("polarization", e.beam.polarization)?; // the Kahn factor K (-polar)
        g.set_item("spindle_vector", e.scan.spindle_vector.to_vec())?;
        g.set_item("twotheta_axis", d.twotheta_axis.to_vec())?;
        g.set_item("twotheta_deg", d.detector_twotheta.to_degrees())?;
        g.set_item("curved_detector", panel.curved)?;
        g.set_item("oversample", e.sampling.oversample)?;
        g.set_item("subpixel_size_m", e.sampling.subpixel_size)?;
        g.set_item("roi", nbcore::experiment::detector::c_roi_bounds(&self.cfg.params, panel.fpixels, panel.spixels).to_vec())?; // the C's inclusive bounds
        // beam centre: on the rotated detector (fast, slow from pixel 0's corner) and per convention
        g.set_item("fbeam_m", d.centre.fbeam)?;
        g.set_item("sbeam_m", d.centre.sbeam)?;
        g.set_item("fclose_m", d.centre.fclose)?;
        g.set_item("sclose_m", d.centre.sclose)?;
        g.set_item("beam_center_mm", (h.beam_center_x, h.beam_center_y))?;
        g.set_item("adxv_center_mm", (h.adxv_center_x, h.adxv_center_y))?;
        g.set_item("mosflm_center_mm", (h.mosflm_center_x, h.mosflm_center_y))?;
        g.set_item("denzo_beam_mm", (h.denzo_x_beam, h.denzo_y_beam))?;
        g.set_item("xds_org_px", (h.xds_orgx, h.xds_orgy))?;
        g.set_item("dials_origin_mm", h.dials_origin.to_vec())?;
        // every panel (one for the C's flags), in image order: the rows of panel k follow panel k-1's
        let panels = PyList::empty(py);
        for p in &d.panels {
            let q = PyDict::new(py);
            q.set_item("shape", (p.spixels, p.fpixels))?;
            q.set_item("pixel_size_m", p.pixel_size)?;
            q.set_item("distance_m", p.distance)?;
            q.set_item("pix0_vector", p.pix0_vector.to_vec())?;
            q.set_item("fdet_vector", p.fdet_vector.to_vec())?;
            q.set_item("sdet_vector", p.sdet_vector.to_vec())?;
            q.set_item("odet_vector", p.odet_vector.to_vec())?;
            q.set_item("thickness_m", p.sensor.thick)?;
            q.set_item("mu_per_m", p.sensor.mu)?; // linear attenuation coefficient
            panels.append(q)?;
        }
        g.set_item("panels", panels)?;
        Ok(g)
    }

    /// The crystal at phi = 0 without mosaic: real vectors (metres), reciprocal vectors (1/Angstrom), size in cells.
    fn crystal<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let e = &self.exp;
        let l = &e.crystal.lattice;
        let c = PyDict::new(py);
        c.set_item("a_m", l.a0.to_vec())?;
        c.set_item("b_m", l.b0.to_vec())?;
        c.set_item("c_m", l.c0.to_vec())?;
        c.set_item("a_star_per_A", l.a_star.to_vec())?;
        c.set_item("b_star_per_A", l.b_star.to_vec())?;
        c.set_item("c_star_per_A", l.c_star.to_vec())?;
        c.set_item("cell_lengths_m", (l.a_len, l.b_len, l.c_len))?;
        c.set_item("volume_A3", l.v_cell)?;
        c.set_item("N", (e.crystal.na, e.crystal.nb, e.crystal.nc))?;
        c.set_item("mosaic_domains", e.domains())?;
        c.set_item("phisteps", e.scan.phisteps)?;
        c.set_item("phi0_deg", e.scan.phi0.to_degrees())?;
        c.set_item("osc_deg", e.scan.osc.to_degrees())?;
        Ok(c)
    }

    fn __repr__(&self) -> String {
        let (s, f) = shape_of(&self.exp);
        format!("nanobragg.Simulation({} x {} pixels, {} steps)", s, f, self.exp.sampling.steps)
    }
}

/// Every flag the parser knows, as spelled on the command line.
#[pyfunction]
fn flag_names() -> Vec<&'static str> {
    nbcore::cli::parse::all_spellings()
}

/// The flag reference (as `nanobragg-rs simulate --help`).
#[pyfunction]
fn flag_help() -> String {
    nbcore::cli::help::help_text()
}

/// The frames of a `nanobragg-rs series` command line (`--frames N` rotation or `--stills N
/// [--orientation random|fixed]`): the `simulate` flags, the first and last frame the flags choose (`--shard`,
/// `--only`; last < first: none) and the series' number of frames. [`series_frame`] gives each frame's
/// own flags, which make the single-image run byte-identical to the series' frame k.
#[pyfunction]
fn series_frames(args: Vec<String>) -> PyResult<(Vec<String>, usize, usize, usize)> {
    let sa = nbcore::cli::series::split_args(&args).map_err(to_py)?;
    refuse_dataset_flags(&sa)?;
    let plan = nbcore::apps::series::Plan::new(&sa).map_err(to_py)?;
    // the frames the flags choose (--shard I/N, --only K-L; made one at a time): not the Slurm/MPI
    // variables, which a library caller splitting the work itself would not expect to be read
    let frames = nbcore::apps::series::frames_of_run(&sa, &plan, &|_| None).map_err(to_py)?;
    Ok((sa.simulate, *frames.start(), *frames.end(), plan.total))
}

/// The command line's flags for the dataset on disk whose meaning an iterator of frames in memory
/// would drop in silence: refused, naming the flag (each frame's files come from its own output
/// flags, through `frame.simulation.write_outputs`, which `--outputs` does not narrow). `--name` and
/// `--max-output`, which change no frame, pass.
fn refuse_dataset_flags(sa: &nbcore::apps::series::SeriesArgs) -> PyResult<()> {
    let given = [("--resume", sa.resume), ("--verify", sa.verify), ("--outputs", sa.outputs.is_some())];
    match given.iter().find(|(_, on)| *on) {
        Some((flag, _)) => Err(PyValueError::new_err(format!(
            "{flag}: Series makes the frames in memory and keeps no dataset on disk (no manifest to resume or verify, nothing written but what frame.simulation.write_outputs writes from the frame's own output flags); use the command line's `nanobragg-rs series` for a dataset"
        ))),
        None => Ok(()),
    }
}

/// The `simulate` flags of frame `k` of a series (added to the series' own flags), as
/// `nanobragg-rs series` renders it.
#[pyfunction]
fn series_frame(args: Vec<String>, k: usize) -> PyResult<Vec<String>> {
    let sa = nbcore::cli::series::split_args(&args).map_err(to_py)?;
    let plan = nbcore::apps::series::Plan::new(&sa).map_err(to_py)?;
    plan.frame(k).map(|r| r.simulate_flags).map_err(to_py)
}

/// `nanobragg-rs nearbragg` (nearBragg.c) without files: its flags verbatim in; out the float image
/// (float32, slow x fast, photons/pixel) and, with `-coherent`, the sin and cos images (else None).
/// The same images the command line writes (an `-accumulate` run reads the earlier files); nothing is
/// written. The GIL is released while rendering.
#[pyfunction]
#[pyo3(signature = (args, threads=None))]
#[allow(clippy::type_complexity)]
fn nearbragg<'py>(
    py: Python<'py>,
    args: Vec<String>,
    threads: Option<usize>,
) -> PyResult<(Bound<'py, PyArray2<f32>>, Option<Bound<'py, PyArray2<f32>>>, Option<Bound<'py, PyArray2<f32>>>)> {
    if threads == Some(0) {
        return Err(PyValueError::new_err("threads: must be at least 1"));
    }
    let mut c = nbcore::cli::nearbragg::parse_nearbragg_args(&args).map_err(to_py)?;
    if let Some(t) = threads {
        c.threads = t;
    }
    let img = py.detach(|| nbcore::apps::nearbragg::simulate(&c)).map_err(to_py)?;
    let shape = (img.ypixels, img.xpixels);
    let arr = |v: Vec<f32>| Array2::from_shape_vec(shape, v).map(|a| a.into_pyarray(py)).map_err(|e| PyRuntimeError::new_err(e.to_string()));
    let coherent = img.coherent;
    let float = arr(img.float)?;
    if !coherent {
        return Ok((float, None, None));
    }
    Ok((float, Some(arr(img.sin)?), Some(arr(img.cos)?)))
}

/// A folder for the companion programs' files, removed when dropped: they write files by design, and
/// the Python calls hand back arrays instead.
fn scratch() -> PyResult<tempfile::TempDir> {
    tempfile::tempdir().map_err(|e| PyOSError::new_err(format!("cannot make a temporary folder: {e}")))
}

fn scratch_path(d: &tempfile::TempDir, name: &str) -> String {
    d.path().join(name).to_string_lossy().into_owned()
}

/// `noisify -noisefile` on an in-memory float image: noisify.c's flags (`args`), the image's shape as
/// `-detpixels_x/_y`; returns the noise image (uint16, slow x fast).
#[pyfunction]
fn noisify<'py>(py: Python<'py>, image: PyReadonlyArray2<'py, f32>, args: Vec<String>) -> PyResult<Bound<'py, PyArray2<u16>>> {
    let (s, f) = (image.shape()[0], image.shape()[1]);
    let data = image.as_slice().map_err(|_| PyValueError::new_err("image: must be a C-contiguous float32 array"))?.to_vec();
    let dir = scratch()?;
    let input = scratch_path(&dir, "float.bin");
    let mut full = args.clone();
    full.extend(["-floatfile".to_string(), input.clone()]);
    let mut c = nbcore::cli::noisify::parse_noisify_args(&full).map_err(to_py)?;
    if !c.calculate_noise {
        return Err(PyValueError::new_err("-nonoise: noisify() returns the noise image; leave -nonoise out"));
    }
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&input, bytes).map_err(|e| PyOSError::new_err(format!("{input}: {e}")))?;
    (c.xpixels, c.ypixels) = (i32::try_from(f).unwrap_or(i32::MAX), i32::try_from(s).unwrap_or(i32::MAX));
    (c.intfile, c.pgmfile, c.noisefile, c.png) = (scratch_path(&dir, "int.img"), scratch_path(&dir, "image.pgm"), scratch_path(&dir, "noise.img"), None);
    let noise = py
        .detach(|| {
            nbcore::apps::noisify::run(&c, &mut std::io::sink())?;
            nbcore::io::smv::read_smv(std::path::Path::new(&c.noisefile))
        })
        .map_err(to_py)?;
    Array2::from_shape_vec((noise.height, noise.width), noise.data).map(|a| a.into_pyarray(py)).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// `nonbragg -floatfile` in memory: nonBragg.c's flags; returns the float image (float32, slow x fast).
#[pyfunction]
fn nonbragg<'py>(py: Python<'py>, args: Vec<String>) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let mut c = nbcore::cli::nonbragg::parse_nonbragg_args(&args).map_err(to_py)?;
    let dir = scratch()?;
    (c.floatfile, c.intfile, c.pgmfile, c.noisefile) = (scratch_path(&dir, "float.bin"), scratch_path(&dir, "int.img"), scratch_path(&dir, "image.pgm"), scratch_path(&dir, "noise.img"));
    let (float, header) = py
        .detach(|| -> nbcore::Result<(Vec<u8>, nbcore::io::smv::SmvImage)> {
            nbcore::apps::nonbragg::run(&c, &mut std::io::sink())?;
            let float = std::fs::read(&c.floatfile).map_err(|e| nbcore::Error::read(&c.floatfile, "cannot read the float image", e))?;
            Ok((float, nbcore::io::smv::read_smv(std::path::Path::new(&c.intfile))?))
        })
        .map_err(to_py)?;
    let v: Vec<f32> = float.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Array2::from_shape_vec((header.height, header.width), v).map(|a| a.into_pyarray(py)).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// noisify's point-spread function on an image: `psf` "gauss" or "fiber", `fwhm_pixels` its full width
/// at half maximum in pixels, `radius` in pixels (0: noisify's automatic radius). Photons are spread,
/// not made or lost (apart from what falls off the edges).
#[pyfunction]
fn apply_psf<'py>(py: Python<'py>, image: PyReadonlyArray2<'py, f32>, psf: &str, fwhm_pixels: f64, radius: i32) -> PyResult<Bound<'py, PyArray2<f32>>> {
    use nbcore::apps::noisify::PsfType;
    let kind = match psf {
        "gauss" | "gaussian" => PsfType::Gauss,
        "fiber" | "fibre" => PsfType::Fiber,
        _ => return Err(PyValueError::new_err(format!("psf: '{psf}' is not 'gauss' or 'fiber'"))),
    };
    if !(fwhm_pixels.is_finite() && fwhm_pixels > 0.0) {
        return Err(PyValueError::new_err("psf_fwhm: must be a finite number greater than 0"));
    }
    if radius < 0 {
        return Err(PyValueError::new_err("psf_radius: must not be negative"));
    }
    let (s, f) = (image.shape()[0], image.shape()[1]);
    let data = image.as_slice().map_err(|_| PyValueError::new_err("image: must be a C-contiguous float32 array"))?;
    if data.iter().any(|v| !v.is_finite()) {
        return Err(PyValueError::new_err("image: has non-finite pixels"));
    }
    let out = py
        .detach(|| nbcore::apps::noisify::apply_psf(data, f, s, kind, fwhm_pixels, radius, &mut std::io::sink()))
        .map_err(|e| PyOSError::new_err(e.to_string()))?;
    Array2::from_shape_vec((s, f), out).map(|a| a.into_pyarray(py)).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// While `.0` > 0 (a `Series` being iterated): the warnings shown so far, each shown once: every
/// frame loads the inputs again (the command line's series loads them once, and warns once).
static WARNINGS_SEEN: std::sync::Mutex<(usize, Option<std::collections::HashSet<String>>)> = std::sync::Mutex::new((0, None));

/// Show each library warning once from now until the matching `warnings_once(False)` (nested
/// iterations count; the last one to end forgets what was shown).
#[pyfunction]
fn warnings_once(on: bool) {
    let mut seen = WARNINGS_SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if on {
        seen.0 += 1;
        seen.1.get_or_insert_with(Default::default);
    } else {
        seen.0 = seen.0.saturating_sub(1);
        if seen.0 == 0 {
            seen.1 = None;
        }
    }
}

/// A warning to show now: not one already shown during a `Series` iteration.
fn first_time(w: &str) -> bool {
    match WARNINGS_SEEN.lock().unwrap_or_else(|e| e.into_inner()).1.as_mut() {
        Some(seen) => seen.insert(w.to_string()),
        None => true,
    }
}

#[pymodule]
fn _nanobragg(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // the library's warnings (non-finite pixels, a cache not written) on stderr, as the CLI shows them
    nbcore::base::log::set_warning_sink(|w| {
        if first_time(w) {
            eprintln!("{w}")
        }
    });
    m.add_function(wrap_pyfunction!(warnings_once, m)?)?;
    m.add_class::<Core>()?;
    m.add_function(wrap_pyfunction!(flag_names, m)?)?;
    m.add_function(wrap_pyfunction!(flag_help, m)?)?;
    m.add_function(wrap_pyfunction!(series_frames, m)?)?;
    m.add_function(wrap_pyfunction!(series_frame, m)?)?;
    m.add_function(wrap_pyfunction!(nearbragg, m)?)?;
    m.add_function(wrap_pyfunction!(noisify, m)?)?;
    m.add_function(wrap_pyfunction!(nonbragg, m)?)?;
    m.add_function(wrap_pyfunction!(apply_psf, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
