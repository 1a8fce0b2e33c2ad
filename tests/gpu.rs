//! The GPU backend on a machine without a GPU: the CUDA kernel's source built for the host (g++, the
//! `gpu_host.cpp` wrapper) renders like the reference kernel on every golden case (both precisions,
//! interpolation hand-overs included); NVRTC compiles it (`NANOBRAGG_NVRTC_DIR` names a directory
//! with libnvrtc.so.13, from PyPI's `nvidia-cuda-nvrtc`: scripts/test.sh sets it); `--backend` is
//! parsed, refused in one line where there is no device, and `auto` falls back to the CPU.
//! The device itself is checked by scripts/gpu_check.sh (reports/gpu/).

mod common;

use common::*;
use nanobragg::experiment::params::Precision;
use nanobragg::experiment::Experiment;
use nanobragg::kernel::gpu::{GpuBackend, HOST_EMULATION_ENV};
use nanobragg::kernel::{render_with_backend, ReferenceBackend};
use nanobragg::run::simulate;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_nanobragg-rs");

/// The kernel built for the host once per test process (None, said loudly, without g++).
fn host_kernel() -> Option<&'static Path> {
    static LIB: OnceLock<Option<PathBuf>> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("nanobragg-gpu-host-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("libgpu_host.so");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernel");
        let built = Command::new("g++")
            .args(["-O2", "-fopenmp", "-shared", "-fPIC", "-I"])
            .arg(&src)
            .arg(src.join("gpu_host.cpp"))
            .arg("-o")
            .arg(&lib)
            .status();
        match built {
            Ok(s) if s.success() => Some(lib),
            Ok(s) => panic!("g++ failed to build the kernel for the host ({s}): gpu.cu or gpu_host.cpp does not compile"),
            Err(e) => {
                println!("SKIPPED: the GPU kernel's host build, because g++ cannot be run ({e})");
                None
            }
        }
    })
    .as_deref()
}

/// The process's GPU device is the host build (set before the first use of the device).
fn emulated() -> bool {
    static SET: OnceLock<bool> = OnceLock::new();
    *SET.get_or_init(|| match host_kernel() {
        Some(lib) => {
            std::env::set_var(HOST_EMULATION_ENV, lib);
            nanobragg::kernel::gpu::device().expect("the host build of the kernel loads");
            true
        }
        None => false,
    })
}

fn experiment(args: &str, out: &Path) -> Experiment {
    let args: Vec<String> = args.split_whitespace().map(String::from).collect();
    let mut cfg = nanobragg::cli::parse::parse_simulate_args(&args).unwrap();
    cfg.output.out_dir = Some(out.to_path_buf());
    simulate::setup(&cfg).unwrap().0
}

/// The GPU kernel's image against the reference's: within the backend contract's tolerance of the
/// peak (1e-6 double, 2e-3 single), the omega sum and the first out-of-range evaluation the same.
fn assert_like_reference(exp: &Experiment, what: &str) {
    let reference = render_with_backend(&ReferenceBackend::new(exp), &|_| {});
    let peak = reference.float.iter().fold(0.0f32, |m, &v| m.max(v.abs())).max(1e-30);
    for (precision, tol) in [(Precision::Double, 1e-6), (Precision::Single, 2e-3)] {
        let gpu = GpuBackend::new(exp, precision).unwrap_or_else(|e| panic!("{what}: {e}"));
        let out = render_with_backend(&gpu, &|_| {});
        let worst = out.float.iter().zip(&reference.float).map(|(a, b)| (a - b).abs() / peak).fold(0.0f32, f32::max);
        assert!(worst <= tol, "{what} {precision:?}: largest difference {worst:e} of the peak (tolerance {tol:e})");
        let rel = (out.omega_sum - reference.omega_sum).abs() / reference.omega_sum.abs().max(1e-300);
        assert!(rel < 1e-12, "{what} {precision:?}: omega sum {} vs {}", out.omega_sum, reference.omega_sum);
        if precision == Precision::Double {
            assert_eq!(out.interp_oob.is_some(), reference.interp_oob.is_some(), "{what}: interpolation switch-off");
        }
    }
}

#[test]
fn the_kernels_host_build_renders_every_golden_case_like_the_reference() {
    if !emulated() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    assert_like_reference(&experiment("-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 -distance 100 -pixel 0.1 -detpixels 64", tmp.path()), "bench crystal");
    // a non-integer N (the reduced lattice factor) and a tophat spot with mosaicity
    assert_like_reference(&experiment("-cell 70 80 90 85 95 105 -misset 10 20 30 -lambda 1 -Na 4.5 -Nb 5 -Nc 3 -default_F 100 -distance 80 -detpixels 48 -mosaic 0.5 -mosaic_domains 5", tmp.path()), "non-integer N");
    let Some(golden) = golden_dir() else {
        println!("SKIPPED: the golden cases on the GPU kernel's host build, because there is no golden folder (../shared/golden or $NANOBRAGG_GOLDEN)");
        return;
    };
    let manifest = load_manifest(&golden);
    let mut rendered = 0;
    for case in cases(&manifest) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = case_config(&golden, case, dir.path());
        let Ok((exp, _)) = simulate::setup(&cfg) else { continue }; // the refusal cases
        assert_like_reference(&exp, case_id(case));
        rendered += 1;
    }
    assert!(rendered >= 50, "only {rendered} golden cases rendered");
}

#[test]
fn a_row_whose_interpolation_leaves_the_grid_is_handed_over() {
    if !emulated() {
        return;
    }
    let Some(golden) = golden_dir() else {
        println!("SKIPPED: the interpolation hand-over on the GPU kernel's host build, because there is no golden folder");
        return;
    };
    let manifest = load_manifest(&golden);
    let case = cases(&manifest).iter().find(|c| case_id(c) == "quirk_hkl_interp_oob").expect("the golden case quirk_hkl_interp_oob");
    let dir = tempfile::tempdir().unwrap();
    let exp = simulate::setup(&case_config(&golden, case, dir.path())).unwrap().0;
    let reference = render_with_backend(&ReferenceBackend::new(&exp), &|_| {});
    let gpu = render_with_backend(&GpuBackend::new(&exp, Precision::Double).unwrap(), &|_| {});
    assert!(reference.interp_oob.is_some(), "the case leaves the grid");
    assert_eq!(gpu.interp_oob, reference.interp_oob, "switched off at the C's evaluation");
}

fn nvrtc_dir() -> Option<PathBuf> {
    match std::env::var_os("NANOBRAGG_NVRTC_DIR").map(PathBuf::from) {
        Some(d) if d.join("libnvrtc.so.13").exists() => Some(d),
        Some(d) => panic!("NANOBRAGG_NVRTC_DIR={} holds no libnvrtc.so.13", d.display()),
        None => {
            println!("SKIPPED: the NVRTC compile of the GPU kernel, because NANOBRAGG_NVRTC_DIR is not set (scripts/test.sh installs nvidia-cuda-nvrtc and sets it)");
            None
        }
    }
}

#[test]
fn nvrtc_compiles_the_kernel_for_the_data_centre_gpus() {
    let Some(dir) = nvrtc_dir() else { return };
    for arch in ["compute_80", "compute_90"] {
        let out = Command::new(BIN).args(["gpu", "--compile", arch]).env("LD_LIBRARY_PATH", &dir).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{arch}: {}{}", text, String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("render_f64, render_f32, row_omega"), "{arch}: {text}");
    }
    // machine code for the H100/H200 (what the backend loads on such a device)
    let out = Command::new(BIN).args(["gpu", "--compile", "sm_90"]).env("LD_LIBRARY_PATH", &dir).output().unwrap();
    assert!(out.status.success(), "sm_90: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("bytes of machine code"));
}

fn simulate_cmd(dir: &Path, args: &str) -> Command {
    let mut c = Command::new(BIN);
    c.arg("simulate").args(args.split_whitespace()).current_dir(dir).env_remove(HOST_EMULATION_ENV);
    c
}

fn has_cuda_driver() -> bool {
    ["/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1"].iter().any(|p| Path::new(p).exists())
}

const SMALL: &str = "-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 -distance 100 -pixel 0.1 -detpixels 32 -nonoise -nopgm -noprogress";

#[test]
fn backend_gpu_without_a_device_is_refused_in_one_line_and_auto_falls_back() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = simulate_cmd(tmp.path(), &format!("{SMALL} --backend quantum -floatfile f.bin")).output().unwrap();
    assert_eq!(bad.status.code(), Some(9));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--backend") && err.contains("'cpu', 'gpu' or 'auto'"), "{err}");
    assert!(!tmp.path().join("f.bin").exists());

    let cpu = simulate_cmd(tmp.path(), &format!("{SMALL} -floatfile cpu.bin")).output().unwrap();
    assert!(cpu.status.success());
    let auto = simulate_cmd(tmp.path(), &format!("{SMALL} --backend auto -floatfile auto.bin")).output().unwrap();
    assert!(auto.status.success(), "{}", String::from_utf8_lossy(&auto.stderr));
    if has_cuda_driver() {
        println!("SKIPPED: the refusal of --backend gpu without a device, because this machine has a CUDA driver");
        return;
    }
    assert_eq!(std::fs::read(tmp.path().join("auto.bin")).unwrap(), std::fs::read(tmp.path().join("cpu.bin")).unwrap(), "auto without a device is the CPU's image");
    let gpu = simulate_cmd(tmp.path(), &format!("{SMALL} --backend gpu -floatfile gpu.bin")).output().unwrap();
    assert_eq!(gpu.status.code(), Some(9));
    let err = String::from_utf8_lossy(&gpu.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--backend gpu: no CUDA driver"), "{err}");
    assert!(!tmp.path().join("gpu.bin").exists(), "nothing written");
    let info = Command::new(BIN).arg("gpu").env_remove(HOST_EMULATION_ENV).output().unwrap();
    assert_eq!(info.status.code(), Some(9));
    // the fallback is the CPU this process would use: NANOBRAGG_SIMD=reference renders single
    // precision in the reference kernel (double), not in the SIMD kernel's floats
    let single = format!("{SMALL} --precision single");
    let run = |args: String| simulate_cmd(tmp.path(), &args).env("NANOBRAGG_SIMD", "reference").output().unwrap();
    assert!(run(format!("{single} -floatfile ref.bin")).status.success());
    assert!(run(format!("{single} --backend auto -floatfile ref_auto.bin")).status.success());
    assert!(simulate_cmd(tmp.path(), &format!("{single} -floatfile simd.bin")).output().unwrap().status.success());
    let read = |n: &str| std::fs::read(tmp.path().join(n)).unwrap();
    assert_ne!(read("ref.bin"), read("simd.bin"), "the two kernels' single-precision images differ here");
    assert_eq!(read("ref_auto.bin"), read("ref.bin"), "auto without a device takes NANOBRAGG_SIMD's kernel");
}

#[test]
fn backend_gpu_renders_through_the_cli_and_refuses_derivatives() {
    let Some(lib) = host_kernel() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &str| simulate_cmd(tmp.path(), args).env(HOST_EMULATION_ENV, lib).output().unwrap();
    let cpu = run(&format!("{SMALL} -floatfile cpu.bin -intfile cpu.img"));
    assert!(cpu.status.success());
    let gpu = run(&format!("{SMALL} --backend gpu -floatfile gpu.bin -intfile gpu.img"));
    assert!(gpu.status.success(), "{}", String::from_utf8_lossy(&gpu.stderr));
    let (a, b) = (read_f32_le(&tmp.path().join("cpu.bin")), read_f32_le(&tmp.path().join("gpu.bin")));
    let peak = a.iter().fold(0.0f32, |m, &v| m.max(v));
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-6 * peak));
    let grad = run(&format!("{SMALL} --backend gpu -floatfile g.bin --gradients distance"));
    assert_eq!(grad.status.code(), Some(9));
    let err = String::from_utf8_lossy(&grad.stderr);
    assert!(err.contains("--backend gpu") && err.contains("--gradients"), "{err}");
    assert!(!tmp.path().join("g.bin").exists());
}

/// `--backend auto` with a device at hand renders a light image on the CPU, without opening the
/// device (no GPU timing), and says so; `series` weighs all its frames together.
#[test]
fn auto_renders_light_runs_on_the_cpu_and_says_so() {
    let Some(lib) = host_kernel() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let timing = tmp.path().join("timing.json");
    let run = |args: &str| simulate_cmd(tmp.path(), args).env(HOST_EMULATION_ENV, lib).env("NANOBRAGG_GPU_TIMING", &timing).output().unwrap();
    assert!(run(&format!("{SMALL} -floatfile cpu.bin")).status.success());
    let auto = run(&format!("{SMALL} --backend auto -floatfile auto.bin"));
    assert!(auto.status.success(), "{}", String::from_utf8_lossy(&auto.stderr));
    let log = String::from_utf8_lossy(&auto.stdout);
    assert!(log.contains("--backend auto: rendering on the CPU: 1.02e3 sample evaluations are fewer than"), "{log}");
    assert!(!timing.exists(), "the device was not used");
    assert_eq!(std::fs::read(tmp.path().join("auto.bin")).unwrap(), std::fs::read(tmp.path().join("cpu.bin")).unwrap());
    // the same light image asked of the GPU by name is rendered there (the rule is auto's alone)
    assert!(run(&format!("{SMALL} --backend gpu -floatfile gpu.bin")).status.success());
    assert!(timing.exists(), "--backend gpu renders on the device");
    let series = Command::new(BIN)
        .arg("series")
        .args(SMALL.split_whitespace())
        .args(["-phi", "10", "-osc", "0.5", "--frames", "3", "--backend", "auto", "--out-dir", "s"])
        .current_dir(tmp.path())
        .env(HOST_EMULATION_ENV, lib)
        .output()
        .unwrap();
    assert!(series.status.success(), "{}", String::from_utf8_lossy(&series.stderr));
    let log = String::from_utf8_lossy(&series.stdout);
    // 3 frames × 32² pixels × 2 phi steps
    assert!(log.contains("series: --backend auto: rendering on the CPU: 6.14e3 sample evaluations") && log.contains("(the dataset's 3 frames together)"), "{log}");
}

#[test]
fn series_renders_its_frames_on_the_gpu_backend() {
    let Some(lib) = host_kernel() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let series = |dir: &str, backend: &str| {
        let out = Command::new(BIN)
            .arg("series")
            .args(SMALL.split_whitespace())
            .args(["-phi", "10", "-osc", "0.5", "--frames", "2", "-floatfile", "f_#####.bin", "--backend", backend, "--out-dir", dir])
            .current_dir(tmp.path())
            .env(HOST_EMULATION_ENV, lib)
            .output()
            .unwrap();
        assert!(out.status.success(), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
    };
    series("cpu", "cpu");
    series("gpu", "gpu");
    for k in 1..=2 {
        let name = format!("f_{k:05}.bin");
        let (a, b) = (read_f32_le(&tmp.path().join("cpu").join(&name)), read_f32_le(&tmp.path().join("gpu").join(&name)));
        let peak = a.iter().fold(0.0f32, |m, &v| m.max(v));
        assert_eq!(a.len(), b.len());
        assert!(peak > 0.0 && a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-6 * peak), "frame {k}");
    }
}

/// Two tilted panels from a CrystFEL geometry (rows of both panels in one image, the panel table's
/// row offsets) render like the reference.
#[test]
fn a_multi_panel_detector_renders_like_the_reference() {
    if !emulated() {
        return;
    }
    const GEOM: &str = "photon_energy = 12398.419843320026\nres = 10000\nclen = 0.06\ncoffset = 0.001\nadu_per_photon = 1\n\
        q0/min_fs = 0\nq0/max_fs = 63\nq0/min_ss = 0\nq0/max_ss = 47\nq0/fs = +0.996194698x +0.087155743z\nq0/ss = +1.0y\nq0/corner_x = -70.0\nq0/corner_y = -30.0\n\
        q1/min_fs = 0\nq1/max_fs = 63\nq1/min_ss = 48\nq1/max_ss = 87\nq1/coffset = -0.002\nq1/fs = +1.0x\nq1/ss = +1.0y\nq1/corner_x = 5.0\nq1/corner_y = -20.0\n";
    let tmp = tempfile::tempdir().unwrap();
    let geom = tmp.path().join("d.geom");
    std::fs::write(&geom, GEOM).unwrap();
    let exp = experiment(&format!("--geom {} -cell 30 32 34 90 90 90 -misset 10 20 30 -N 3 -default_F 100", geom.display()), tmp.path());
    assert_eq!(exp.det.panels.len(), 2);
    assert_like_reference(&exp, "two panels");
    // panels of different sensors (a DIALS detector of mixed modules): each panel's own layers
    let mut mixed = exp;
    mixed.det.panels[1].sensor = nanobragg::experiment::detector::Sensor { thick: 450e-6, mu: 3900.0, thicksteps: 2, thickstep: 225e-6 };
    assert_like_reference(&mixed, "two panels of different sensors");
}
