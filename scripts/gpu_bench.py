#!/usr/bin/env python3
"""The GPU check's benchmarks (scripts/gpu_check.sh): our GPU backend on the benchmark crystal at
4096^2 and a mosaic-heavy crystal (1,000 domains) at 1024^2, in double and single precision --
setup, table upload, kernel and download timed separately (NANOBRAGG_GPU_TIMING), samples/s --
beside our CPU backend on the same machine and the PyTorch port (gpu_torch_bench.py) on the same
GPU and cases, eager and with its torch.compile. Writes bench.json and summary.md into OUT.

usage: gpu_bench.py BINARY TORCH_SRC WORK OUT [--deadline-s S] [--sizes crystal=4096,mosaic=1024]
  GPU_CHECK_TORCH_MODES=eager,compiled (default) picks the PyTorch port's modes.
"""
import json
import os
import statistics
import subprocess
import sys
import time

binary, torch_src, work, out_dir = (os.path.abspath(a) for a in sys.argv[1:5])
deadline = time.time() + (float(sys.argv[sys.argv.index("--deadline-s") + 1]) if "--deadline-s" in sys.argv else 300)
sizes = dict(kv.split("=") for kv in (sys.argv[sys.argv.index("--sizes") + 1].split(",") if "--sizes" in sys.argv else ["crystal=4096", "mosaic=1024"]))
REPEATS = 3
os.makedirs(work, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))


def case_args(kind, size):
    common = f"-cell 100 100 100 90 90 90 -N 5 -default_F 100 -distance 100 -pixel 0.1 -detpixels {size} -oversample 1 -nonoise -nopgm -noprogress"
    if kind == "crystal":
        return f"{common} -lambda 6.2".split()
    return f"{common} -lambda 1 -mosaic 0.5 -mosaic_domains 1000 -seed 12345".split()


def ours(kind, size, backend, precision, repeats):
    """Whole-process wall times and (GPU) the backend's timing lines; the float file of the last run."""
    runs = []
    flt = os.path.join(work, f"{kind}-{size}-{backend}-{precision}.bin")
    for i in range(repeats):
        timing = os.path.join(work, f"timing-{kind}-{backend}-{precision}-{i}.json")
        env = dict(os.environ, NANOBRAGG_GPU_TIMING=timing)
        t = time.perf_counter()
        p = subprocess.run([binary, "simulate", *case_args(kind, size), "-floatfile", flt, "--backend", backend, "--precision", precision],
                           cwd=work, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t
        rec = {"wall_s": wall, "rc": p.returncode}
        done = [l for l in p.stderr.splitlines() + p.stdout.splitlines() if l.startswith("done:")]
        if done:
            rec["done"] = done[-1]
        if p.returncode != 0:
            rec["error"] = p.stderr.strip().splitlines()[-1:] 
        if os.path.exists(timing):
            rec["gpu"] = [json.loads(l) for l in open(timing) if l.strip()]
        runs.append(rec)
    return {"kind": kind, "size": size, "backend": backend, "precision": precision, "runs": runs, "float": flt}


def torch_run(kind, size, precision, mode, ours_float, timeout):
    env = dict(os.environ, PYTHONPATH=torch_src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, os.path.join(here, "gpu_torch_bench.py"), f"{kind}-{size}", precision, mode, str(REPEATS), ours_float],
                           capture_output=True, text=True, env=env, timeout=timeout)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        rec = json.loads(lines[-1]) if lines else {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    except subprocess.TimeoutExpired:
        rec = {"error": f"did not finish in {timeout:.0f} s (time box of this check)"}
    rec.update({"case": f"{kind}-{size}", "precision": precision, "mode": mode, "process_s": time.perf_counter() - t})
    return rec


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    results = {"ours": [], "torch": []}
    cases = [(k, int(s)) for k, s in sizes.items()]
    for kind, size in cases:
        for precision in ("double", "single"):
            results["ours"].append(ours(kind, size, "gpu", precision, 1 + REPEATS))
            results["ours"].append(ours(kind, size, "cpu", precision, 1))
    json.dump(results, open(os.path.join(out_dir, "bench.json"), "w"), indent=1)
    # the PyTorch port: eager first (no compile time), then its torch.compile while time is left
    order = [(k, s, p) for p in ("single", "double") for k, s in reversed(cases)]  # the heavy case's single first
    for mode in os.environ.get("GPU_CHECK_TORCH_MODES", "eager,compiled").split(","):
        for kind, size, precision in order:
            if True:
                left = deadline - time.time()
                if left < 20:
                    results["torch"].append({"case": f"{kind}-{size}", "precision": precision, "mode": mode, "error": "not run: the check's time box was spent"})
                    continue
                flt = os.path.join(work, f"{kind}-{size}-gpu-{precision}.bin")
                results["torch"].append(torch_run(kind, size, precision, mode, flt, min(left - 10, 150 if mode == "compiled" else 90)))
                json.dump(results, open(os.path.join(out_dir, "bench.json"), "w"), indent=1)
    json.dump(results, open(os.path.join(out_dir, "bench.json"), "w"), indent=1)
    open(os.path.join(out_dir, "summary.md"), "w").write(summary(results))
    print(summary(results))


def summary(results):
    lines = ["## Our GPU backend (median of 3 after one warm-up; whole process includes start, CUDA context, NVRTC compile, writing the float file)", "",
             "| case | precision | samples | setup s | tables ms | kernel ms | download ms | process s | G samples/s (kernel) | G samples/s (kernel+download) | CPU process s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    ours_by = {}
    for r in results["ours"]:
        ours_by[(r["kind"], r["size"], r["backend"], r["precision"])] = r
    for (kind, size, backend, precision), r in ours_by.items():
        if backend != "gpu":
            continue
        timed = [x for x in r["runs"][1:] if x.get("gpu")] or [x for x in r["runs"] if x.get("gpu")]
        if not timed:
            lines.append(f"| {kind} {size}² | {precision} | – | failed: {r['runs'][0].get('error')} | | | | | | | |")
            continue
        g = [x["gpu"][-1] for x in timed]
        k = med([x["kernel_s"] for x in g])
        d = med([x["download_s"] for x in g])
        samples = g[0]["samples"]
        cpu = ours_by.get((kind, size, "cpu", precision))
        cpu_s = cpu["runs"][0]["wall_s"] if cpu else float("nan")
        lines.append(f"| {kind} {size}² | {precision} | {samples:.3g} | {med([x['setup_s'] for x in g]):.3f} | {1e3 * med([x['tables_s'] for x in g]):.2f} | {1e3 * k:.2f} | {1e3 * d:.2f} | "
                     f"{med([x['wall_s'] for x in timed]):.3f} | {samples / k / 1e9:.1f} | {samples / (k + d) / 1e9:.1f} | {cpu_s:.3f} |")
    lines += ["", "## The PyTorch port on the same GPU (median of 3 warm forward renders after one first call; torch.cuda.synchronize around each; the image's copy to the host timed apart, as ours)", "",
              "| case | precision | mode | first call s | forward ms | + to host ms | G samples/s | ours kernel ms | ours + to host ms | ours faster (compute) | ours faster (with the copy to the host) | corr. with ours | note |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in results["torch"]:
        kind, size = t["case"].split("-")
        r = ours_by.get((kind, int(size), "gpu", t["precision"]))
        k_ms, d_ms, samples = float("nan"), float("nan"), float("nan")
        if r:
            timed = [x for x in r["runs"][1:] if x.get("gpu")]
            if timed:
                g = [x["gpu"][-1] for x in timed]
                k_ms = 1e3 * med([x["kernel_s"] for x in g])
                d_ms = 1e3 * med([x["download_s"] for x in g])
                samples = g[0]["samples"]
        fwd = 1e3 * med(t.get("forward_s") or [])
        dl = 1e3 * med(t.get("download_s") or [])
        speed = samples / fwd / 1e6 if fwd == fwd and fwd > 0 else float("nan")
        note = t.get("error", "") or t.get("note", "")
        lines.append(f"| {t['case']} | {t['precision']} | {t['mode']} | {t.get('first_s', float('nan')):.2f} | {fwd:.2f} | {dl:.2f} | {speed:.2f} | {k_ms:.2f} | {k_ms + d_ms:.2f} | "
                     f"{fwd / k_ms:.1f}× | {(fwd + dl) / (k_ms + d_ms):.1f}× | {t.get('corr_with_ours', float('nan')):.6f} | {note} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
