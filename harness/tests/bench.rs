//! End-to-end tests of `bench-detailed` on a tiny detector with a fake "C binary" (a shell script that
//! copies a known float image to whatever follows `-floatfile`). No timing is asserted: timings
//! depend on the machine; only that the numbers exist, the gate exits as it must, and compare flags
//! a deliberate slowdown.

#![cfg(unix)]

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BENCH: &str = env!("CARGO_BIN_EXE_bench-detailed");
/// The simulator, built beside bench-detailed in the workspace's target folder (`cargo build --release`
/// or `cargo test --release` at the root builds both).
fn sim() -> PathBuf {
    let p = Path::new(BENCH).with_file_name(if cfg!(windows) { "nanobragg-rs.exe" } else { "nanobragg-rs" });
    assert!(p.is_file(), "{} is not built: run `cargo build --release` at the workspace root first", p.display());
    p
}
const SIZE: usize = 32;

/// Our image of the `bench` configuration at SIZE, rendered by our simulator.
fn reference_image(dir: &Path) -> PathBuf {
    let out = dir.join("known.bin");
    let mut args: Vec<String> = nanobragg_harness::plan::split_args(nanobragg_harness::plan::BENCH_ARGS);
    args.extend(["-detpixels".into(), SIZE.to_string(), "-floatfile".into(), out.display().to_string()]);
    args.extend(nanobragg_harness::plan::split_args("-intfile known.img -nonoise -nopgm -noprogress"));
    let o = Command::new(sim()).arg("simulate").args(&args).current_dir(dir).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// A fake C nanoBragg: copies `image` to the -floatfile argument, writes an -intfile, exits `code`.
fn fake_c(dir: &Path, name: &str, image: &Path, code: i32) -> PathBuf {
    let p = dir.join(name);
    let script = format!(
        "#!/bin/sh\nout=''\nint=''\nwhile [ $# -gt 0 ]; do\n  case \"$1\" in\n    -floatfile) out=\"$2\" ;;\n    -intfile) int=\"$2\" ;;\n  esac\n  shift\ndone\n\
         echo 'fake nanoBragg'\n[ {code} -ne 0 ] && {{ echo 'fake failure' >&2; exit {code}; }}\ncp '{}' \"$out\"\n: > \"$int\"\nexit 0\n",
        image.display()
    );
    std::fs::write(&p, script).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn bench(out: &Path, c: Option<&Path>, extra: &[&str]) -> Output {
    bench_n(out, c, 1, extra)
}

fn bench_n(out: &Path, c: Option<&Path>, iterations: usize, extra: &[&str]) -> Output {
    let mut cmd = Command::new(BENCH);
    cmd.args(["--sizes", &SIZE.to_string(), "--iterations", &iterations.to_string(), "--warmup", "0", "--no-progress"])
        .arg("--out")
        .arg(out)
        .arg("--rust-binary")
        .arg(sim())
        .args(extra)
        .env_remove("NB_C_BIN");
    if let Some(c) = c {
        cmd.arg("--c-binary").arg(c);
    }
    cmd.output().unwrap()
}

fn json(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("benchmark_results.json")).unwrap()).unwrap()
}

fn text(o: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn end_to_end_with_a_fake_c_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let known = reference_image(tmp.path());
    let c = fake_c(tmp.path(), "fake-nanoBragg", &known, 0);
    let out = tmp.path().join("report");
    let o = bench(&out, Some(&c), &["--gate", "--min-correlation", "0.99"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    let v = json(&out);
    assert_eq!(v["schema"], "nanobragg-rs/bench-detailed/1");
    assert_eq!(v["config"]["name"], "bench");
    assert_eq!(v["config"]["c_binary"], c.display().to_string());
    for k in ["cpu_model", "logical_cores", "simd_level", "os", "rustc", "git_commit"] {
        assert!(!v["machine"][k].is_null(), "machine.{k}");
    }
    let e = &v["entries"][0];
    assert_eq!(e["size"], SIZE);
    assert_eq!(e["pixels"], SIZE * SIZE);
    assert!(["avx512", "avx2", "portable", "scalar"].contains(&e["kernel"].as_str().unwrap()), "{}", e["kernel"]);
    // the C entry: one successful run with a wall time and a peak RSS
    let cm = &e["c"];
    assert!(cm.is_object(), "no C entry: {e}");
    assert_eq!(cm["failed_runs"], 0);
    assert_eq!(cm["runs"].as_array().unwrap().len(), 1);
    assert!(cm["wall_s"]["median"].as_f64().unwrap() > 0.0);
    assert!(cm["runs"][0]["peak_rss_mb"].as_f64().unwrap() > 0.0);
    // same image as ours: correlation and sum ratio are numbers, and ~1
    let corr = e["correlation"].as_f64().expect("correlation is a number");
    assert!(corr > 0.999_999, "{corr}");
    assert!((e["sum_ratio"].as_f64().unwrap() - 1.0).abs() < 1e-6);
    assert!(e["speedup_process"].as_f64().unwrap() > 0.0);
    assert!(e["speedup_warm"].as_f64().unwrap() > 0.0);
    assert_eq!(e["rust_cold_warm_identical"], true);
    // our cold, warm and process measurements, each with its run kept
    for k in ["setup_s", "render_s", "io_s", "total_s"] {
        assert!(e["rust_cold"][k]["median"].is_number(), "rust_cold.{k}");
        assert!(e["rust_warm"][k]["median"].is_number(), "rust_warm.{k}");
    }
    assert!(e["rust_process"]["wall_s"]["median"].as_f64().unwrap() > 0.0);
    assert!(e["peak_rss_mb"]["rust_process"].as_f64().unwrap() > 0.0);
    assert!(e["throughput"]["rust_warm_pixels_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(e["samples_per_pixel"], 1);
    assert_eq!(v["gate"]["enabled"], true);
    assert_eq!(v["gate"]["passed"], true);

    // the human-readable and CSV outputs
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains(&format!("| {SIZE}² |")), "{md}");
    assert!(md.contains("Gate: PASSED"));
    let csv = std::fs::read_to_string(out.join("benchmark_results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2);
    let runs = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert!(runs.lines().any(|l| l.starts_with(&format!("bench,{SIZE},c,0,false,"))));
    // the table is printed too
    assert!(String::from_utf8_lossy(&o.stdout).contains("correlation"));
}

#[test]
fn gate_fails_when_it_must() {
    let tmp = tempfile::tempdir().unwrap();
    let known = reference_image(tmp.path());
    // a different image: our image reversed
    let mut img: Vec<u8> = std::fs::read(&known).unwrap();
    let mut floats: Vec<[u8; 4]> = img.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]).collect();
    floats.reverse();
    img = floats.concat();
    let wrong = tmp.path().join("wrong.bin");
    std::fs::write(&wrong, img).unwrap();

    // correlation far below the bound
    let c = fake_c(tmp.path(), "fake-wrong", &wrong, 0);
    let o = bench(&tmp.path().join("r1"), Some(&c), &["--gate", "--min-correlation", "0.999"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v = json(&tmp.path().join("r1"));
    assert_eq!(v["gate"]["passed"], false);
    assert!(v["entries"][0]["correlation"].as_f64().unwrap() < 0.999);

    // an impossible speedup
    let good = fake_c(tmp.path(), "fake-good", &known, 0);
    let o = bench(&tmp.path().join("r2"), Some(&good), &["--gate", "--min-speedup", "1e9"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v = json(&tmp.path().join("r2"));
    let checks = v["gate"]["checks"].as_array().unwrap();
    assert!(checks.iter().any(|c| c["check"] == "speedup_process" && c["status"] == "fail"));

    // a C binary that fails: warned about, and the gate fails
    let bad = fake_c(tmp.path(), "fake-fails", &known, 3);
    let o = bench(&tmp.path().join("r3"), Some(&bad), &["--gate"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v = json(&tmp.path().join("r3"));
    let e = &v["entries"][0];
    assert_eq!(e["c"]["failed_runs"], 1);
    assert!(e["correlation"].is_null());
    assert!(e["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("C run 0 failed: exit code 3")));
    // without --gate the same failure is reported but does not change the exit code
    let o = bench(&tmp.path().join("r4"), Some(&bad), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// `--replace-outputs`: every run of each program replaces the last run's files; the report says so
/// (the default, fresh files, too), and `compare` notes a baseline measured the other way.
#[test]
fn replacing_outputs_is_measured_and_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let c = fake_c(tmp.path(), "fake_nb", &reference_image(tmp.path()), 0);
    let (fresh, replace) = (tmp.path().join("fresh"), tmp.path().join("replace"));
    let o = bench_n(&fresh, Some(&c), 2, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = bench_n(&replace, Some(&c), 2, &["--replace-outputs", "--keep-work"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&fresh)["config"]["outputs"], "fresh");
    let v = json(&replace);
    assert_eq!(v["config"]["outputs"], "replace");
    assert_eq!(v["entries"][0]["c"]["failed_runs"], 0, "{v}");
    assert!(std::fs::read_to_string(replace.join("summary.md")).unwrap().contains("each run replaces the last run's"));
    let o = Command::new(BENCH).arg("compare").arg(fresh.join("benchmark_results.json")).arg(replace.join("benchmark_results.json")).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("different output files: baseline fresh, new replace"), "{}", text(&o));
}

/// SIGTERM while a (slow) C run is measured: exit 143, and the scratch directory with its images is
/// removed, not left in the temp folder.
#[test]
fn a_signal_removes_the_scratch_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let slow = tmp.path().join("slow_nb");
    std::fs::write(&slow, "#!/bin/sh\nsleep 20\n").unwrap();
    std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    let scratch_root = tmp.path().join("tmp");
    std::fs::create_dir(&scratch_root).unwrap();
    let mut child = Command::new(BENCH)
        .args(["--sizes", "8", "--iterations", "1", "--warmup", "0", "--no-progress", "--rust-binary"]).arg(sim())
        .arg("--c-binary")
        .arg(&slow)
        .arg("--out")
        .arg(tmp.path().join("r"))
        .env("TMPDIR", &scratch_root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // wait until the C run has started in the scratch directory
    let t0 = std::time::Instant::now();
    let started = || {
        std::fs::read_dir(&scratch_root).unwrap().flatten().any(|d| d.path().join("c").join(".bench-stdout").exists())
    };
    while !started() {
        assert!(t0.elapsed().as_secs() < 60, "the C run never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: plain kill(2) of our own child
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("scratch directory removed"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&scratch_root).unwrap().flatten().map(|d| d.path()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn without_c_the_speed_gate_is_skipped_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("r");
    let o = bench(&out, None, &["--gate", "--min-speedup", "1.0", "--min-correlation", "0.99999"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no C comparison will be made"), "{err}");
    assert!(err.contains("SKIPPED"), "{err}");
    let v = json(&out);
    assert!(v["entries"][0]["c"].is_null());
    assert!(v["entries"][0]["correlation"].is_null());
    assert!(v["gate"]["speed_check"].as_str().unwrap().starts_with("skipped: no C binary"));
    assert!(v["notes"][0].as_str().unwrap().starts_with("No C comparison was made"));
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("no C comparison was made"));
    // roofline: the machine's measured limits and each size's figures, in the JSON, summary.md and console
    let peaks = v["limits"]["peaks"].as_array().unwrap();
    assert!(peaks.iter().any(|p| p["level"] == "portable" && p["f64_gflops_per_core"].as_f64().unwrap() > 0.0), "{peaks:?}");
    assert!(v["limits"]["write_mb_per_s"].as_f64().unwrap() > 0.0);
    let rf = &v["entries"][0]["roofline"];
    for k in ["ns_per_sample_per_core", "flops_per_sample_estimate", "achieved_gflops", "peak_gflops", "flop_utilization", "bytes_written", "write_utilization"] {
        assert!(rf[k].as_f64().is_some_and(|x| x > 0.0), "roofline.{k}: {rf}");
    }
    assert!(md.contains("## How close to the limit") && md.contains("ns/sample/core"), "{md}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("machine limits (measured at start-up)"), "{}", text(&o));
}

#[test]
fn compare_flags_a_deliberate_slowdown_and_calls_a_median_only_change_noise() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("base");
    let o = bench_n(&out, None, 3, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let base = out.join("benchmark_results.json");
    let write = |name: &str, v: &Value| {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("benchmark_results.json");
        std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
        (dir, p)
    };

    // the same report, every run of our warm render 2-2.2× slower than the slowest baseline run (a
    // clear slowdown whatever the noise of this tiny size)
    let mut v = json(&out);
    let old = v["entries"][0]["rust_warm"]["render_s"]["median"].as_f64().unwrap();
    let slowest = v["entries"][0]["rust_warm"]["render_s"]["max"].as_f64().unwrap();
    v["entries"][0]["rust_warm"]["render_s"]["median"] = Value::from(slowest * 2.1);
    for (i, r) in v["entries"][0]["rust_warm"]["runs"].as_array_mut().unwrap().iter_mut().enumerate() {
        r["render_s"] = Value::from(slowest * (2.0 + 0.1 * i as f64));
    }
    let (slow_dir, slow) = write("slow", &v);
    let o = Command::new(BENCH).arg("compare").arg(&base).arg(&slow).args(["--threshold", "5", "--fail-on-regression"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let reg = std::fs::read_to_string(slow_dir.join("regressions.csv")).unwrap();
    let line = reg.lines().find(|l| l.contains(",rust_warm.render_s,")).expect("regression listed");
    // 3 runs against 3 cannot reach p ≤ 0.01: the ranges decided, and say so
    assert!(line.contains(",3,3,0.05,non-overlapping ranges,true,true,false"), "{line}\n{}", text(&o));
    let full = std::fs::read_to_string(slow_dir.join("full_comparison.csv")).unwrap();
    assert!(full.lines().count() > reg.lines().count());
    let md = std::fs::read_to_string(slow_dir.join("comparison.md")).unwrap();
    assert!(md.contains("regression") && md.contains("## Time regressions (worst first)"), "{md}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("rust_warm.render_s"));

    // only the median moved, not the runs: above the threshold but not significant, so noise
    let mut m = json(&out);
    m["entries"][0]["rust_warm"]["render_s"]["median"] = Value::from(old * 2.0);
    let (noise_dir, noisy) = write("noise", &m);
    let o = Command::new(BENCH).arg("compare").arg(&base).arg(&noisy).arg("--fail-on-regression").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("0 regressions of"), "{}", text(&o));
    let md = std::fs::read_to_string(noise_dir.join("comparison.md")).unwrap();
    assert!(md.contains("not significant: noise") && md.contains("(not significant)"), "{md}");

    // without --fail-on-regression the exit code stays 0; a report against itself has none
    let o = Command::new(BENCH).arg("compare").arg(&base).arg(&slow).arg("--out").arg(tmp.path().join("c2")).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = Command::new(BENCH)
        .arg("compare")
        .arg(&base)
        .arg(&base)
        .arg("--fail-on-regression")
        .arg("--out")
        .arg(tmp.path().join("c3"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("0 regressions of"));
    // a bad --alpha is a usage error
    let o = Command::new(BENCH).arg("compare").arg(&base).arg(&base).args(["--alpha", "1.5"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn heavy_configuration_generates_its_hkl_file() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("heavy");
    let mut cmd = Command::new(BENCH);
    cmd.args(["--config", "heavy", "--sizes", "8", "--iterations", "1", "--warmup", "0", "--no-progress", "--rust-binary"]).arg(sim())
        .arg("--out")
        .arg(&out)
        .env_remove("NB_C_BIN");
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(out.join("heavy_P1.hkl").is_file());
    let v = json(&out);
    let e = &v["entries"][0];
    let spp = e["samples_per_pixel"].as_u64().unwrap();
    let parts = ["sources", "domains", "phisteps"].iter().map(|k| e[k].as_u64().unwrap()).product::<u64>()
        * e["oversample"].as_u64().unwrap().pow(2);
    assert_eq!(spp, parts);
    assert_eq!((e["domains"].as_u64(), e["phisteps"].as_u64(), e["oversample"].as_u64()), (Some(5), Some(2), Some(2)));
    assert!(v["config"]["args"].as_array().unwrap().iter().any(|a| a == "heavy_P1.hkl"));
}

#[test]
fn usage_errors_exit_2() {
    let o = Command::new(BENCH).args(["--config", "custom"]).env_remove("NB_C_BIN").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--args"));
    let o = Command::new(BENCH).args(["--min-speedup", "2"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let tmp = tempfile::tempdir().unwrap();
    let bogus = tmp.path().join("x.json");
    std::fs::write(&bogus, "{\"schema\": \"something-else\"}").unwrap();
    let o = Command::new(BENCH).arg("compare").arg(&bogus).arg(&bogus).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected 'nanobragg-rs/bench-detailed/1'"));
    let o = Command::new(BENCH)
        .args(["--c-binary", "/nonexistent/nanoBragg", "--sizes", "8", "--rust-binary"]).arg(sim())
        .arg("--out")
        .arg(tmp.path().join("o"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn custom_arguments_are_used() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("custom");
    let o = Command::new(BENCH)
        .args(["--config", "custom", "--args", "-cell 50 60 70 90 90 90 -lambda 1.5 -N 3 -default_F 10 -oversample 2"])
        .args(["--sizes", "16", "--iterations", "2", "--warmup", "1", "--no-progress", "--threads", "1", "--precision", "double"])
        .arg("--rust-binary")
        .arg(sim())
        .arg("--out")
        .arg(&out)
        .env_remove("NB_C_BIN")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&out);
    assert_eq!(v["config"]["name"], "custom");
    assert_eq!(v["config"]["threads"], 1);
    let e = &v["entries"][0];
    assert_eq!(e["oversample"], 2);
    assert_eq!(e["samples_per_pixel"], 4);
    // warmups are kept but excluded from the statistics
    assert_eq!(e["rust_warm"]["runs"].as_array().unwrap().len(), 3);
    assert_eq!(e["rust_warm"]["runs"][0]["warmup"], true);
    assert_eq!(e["rust_warm"]["render_s"]["n"], 2);
    assert_eq!(e["rust_process"]["wall_s"]["n"], 2);
}

/// Issue 9 point 9: paths are the caller's, errors name what they are about, bad data is refused and a
/// failed run leaves no --out folder of its own.
#[test]
fn hostile_paths_and_data() {
    let tmp = tempfile::tempdir().unwrap();
    let known = reference_image(tmp.path());
    fake_c(tmp.path(), "fake-nanoBragg", &known, 0);

    // a relative --c-binary is the caller's, not the scratch folder's
    let out = tmp.path().join("rel");
    let o = Command::new(BENCH)
        .args(["--sizes", &SIZE.to_string(), "--iterations", "1", "--warmup", "0", "--no-progress", "--c-binary", "./fake-nanoBragg"])
        .arg("--rust-binary")
        .arg(sim())
        .arg("--out")
        .arg(&out)
        .current_dir(tmp.path())
        .env_remove("NB_C_BIN")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&out);
    assert_eq!(v["config"]["c_binary"], tmp.path().join("fake-nanoBragg").display().to_string());
    assert!(v["entries"][0]["c"]["wall_s"]["median"].as_f64().unwrap() > 0.0);

    // a directory is said to be one; no --out folder is left behind
    let out_dir = tmp.path().join("never");
    let o = bench(&out_dir, Some(tmp.path()), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a directory"), "{}", text(&o));
    assert!(!out_dir.exists());

    // a run that fails midway (our simulator exits 3) removes the --out folder it created
    let bad_sim = tmp.path().join("bad-sim");
    std::fs::write(&bad_sim, "#!/bin/sh\necho broken >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&bad_sim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out_fail = tmp.path().join("failed");
    let o = Command::new(BENCH)
        .args(["--sizes", "8", "--iterations", "1", "--warmup", "0", "--no-progress"])
        .arg("--rust-binary")
        .arg(&bad_sim)
        .arg("--out")
        .arg(&out_fail)
        .env_remove("NB_C_BIN")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!out_fail.exists(), "a failed run left {}", out_fail.display());

    // compare --out that cannot be created names it
    let base = out.join("benchmark_results.json");
    let blocker = tmp.path().join("plain-file");
    std::fs::write(&blocker, "x").unwrap();
    let target = blocker.join("sub");
    let o = Command::new(BENCH).arg("compare").arg(&base).arg(&base).arg("--out").arg(&target).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains(&target.display().to_string()), "{}", text(&o));

    // zero and negative medians, and all-zero data, are refused (even with --fail-on-regression)
    let mut zero = json(&out);
    zero["entries"][0]["rust_process"]["wall_s"]["median"] = Value::from(0.0);
    let zp = tmp.path().join("zero.json");
    std::fs::write(&zp, serde_json::to_string(&zero).unwrap()).unwrap();
    let mut neg = json(&out);
    neg["entries"][0]["rust_warm"]["render_s"]["median"] = Value::from(-0.5);
    let np = tmp.path().join("neg.json");
    std::fs::write(&np, serde_json::to_string(&neg).unwrap()).unwrap();
    let mut empty = json(&out);
    empty["entries"] = Value::Array(vec![]);
    let ep = tmp.path().join("empty.json");
    std::fs::write(&ep, serde_json::to_string(&empty).unwrap()).unwrap();
    for (p, what) in [(&zp, "rust_process.wall_s is 0"), (&np, "rust_warm.render_s is -0.5"), (&ep, "no measurement")] {
        for (a, b) in [(&base, p), (p, &base)] {
            let o = Command::new(BENCH)
                .arg("compare")
                .arg(a)
                .arg(b)
                .arg("--fail-on-regression")
                .arg("--out")
                .arg(tmp.path().join("cmp"))
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(2), "{}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains(what) && err.contains(&p.display().to_string()), "{}", text(&o));
        }
    }
}

/// `simulate` reports its phase split as JSON in the file $NANOBRAGG_TIMINGS_JSON names (what the
/// harness reads for its cold runs), keeps its human `done:` line, and refuses an unwritable path
/// with one line and exit 9.
#[test]
fn simulate_writes_its_phase_timings_as_json() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("timings.json");
    let o = Command::new(sim())
        .args(["simulate", "--detector", "16", "-nopgm", "-nonoise", "-noprogress"])
        .env(nanobragg::run::simulate::TIMINGS_JSON_ENV, &t)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("done: 256 pixels"));
    let v: Value = serde_json::from_slice(&std::fs::read(&t).unwrap()).unwrap();
    for k in ["setup_s", "render_s", "io_s", "resolution_s"] {
        assert!(v[k].as_f64().is_some_and(|x| x >= 0.0), "{k} in {v}");
    }
    assert_eq!(v["pixels"], 256);
    let typed: nanobragg::run::simulate::PhaseTimings = serde_json::from_value(v).unwrap();
    assert!(typed.resolution_s > 0.0 && typed.resolution_s < 1e-3);

    let bad = tmp.path().join("no-such-dir").join("t.json");
    let o = Command::new(sim())
        .args(["simulate", "--detector", "16", "-nopgm", "-nonoise", "-noprogress"])
        .env(nanobragg::run::simulate::TIMINGS_JSON_ENV, &bad)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(9));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no-such-dir"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
