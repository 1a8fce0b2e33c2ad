#!/usr/bin/env python3
"""Where the GPU pays for its start-up: whole-process wall times of `simulate` on the CPU (every thread,
and 4 threads) and on the GPU over a ladder of work (the mosaic case at 1024² with 1 to 3,000 domains;
beam divergence and dispersion with 75 to 1,200 sources), in double and single precision, and what
`--backend auto` picked for each. Then `series` on the GPU against the CPU (the same frames). Run on
the device machine by scripts/gpu_check.sh (GPU_CHECK_LADDER=1), which sets up NVRTC.

usage: gpu_auto_ladder.py BINARY WORK_DIR OUT_DIR [--deadline-s S]
Writes OUT_DIR/ladder.json and OUT_DIR/ladder.md; prints the table.
"""
import json
import os
import statistics
import subprocess
import sys
import time

from gpu_parity import compare, read_floats  # beside this script

binary, work, out = (os.path.abspath(a) for a in sys.argv[1:4])
deadline = time.time() + (float(sys.argv[sys.argv.index("--deadline-s") + 1]) if "--deadline-s" in sys.argv else 300.0)
os.makedirs(work, exist_ok=True)
os.makedirs(out, exist_ok=True)
REPEATS = 3
COMMON = "-cell 100 100 100 90 90 90 -N 5 -default_F 100 -distance 100 -pixel 0.1 -oversample 1 -nonoise -nopgm -noprogress"


def mosaic(domains, size=1024):
    return f"{COMMON} -detpixels {size} -lambda 1 -mosaic 0.5 -mosaic_domains {domains} -seed 12345".split(), size * size * domains


def divergence(steps, size=1024):
    args = f"{COMMON} -detpixels {size} -lambda 1 -hdivrange 0.2 -vdivrange 0.2 -hdivsteps {steps} -vdivsteps {steps} -dispersion 0.5 -dispsteps 3"
    return args.split(), size * size * steps * steps * 3


CASES = [(f"mosaic {d}", *mosaic(d)) for d in (1, 10, 30, 100, 300, 1000, 3000)] + \
        [(f"divergence {s}x{s}x3", *divergence(s)) for s in (5, 10, 20)]
CPUS = os.cpu_count() or 1


def run(args, backend, precision, threads=None):
    flt = os.path.join(work, "img.bin")
    timing = os.path.join(work, "timing.json")
    if os.path.exists(timing):
        os.remove(timing)
    cmd = [binary, "simulate", *args, "-floatfile", flt, "--backend", backend, "--precision", precision]
    if threads:
        cmd += ["--threads", str(threads)]
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=dict(os.environ, NANOBRAGG_GPU_TIMING=timing))
    wall = time.perf_counter() - t
    text = p.stdout + p.stderr
    on_gpu = os.path.exists(timing)
    return {"wall_s": wall, "rc": p.returncode, "gpu_used": on_gpu, "settled_cpu": "--backend auto: rendering on the CPU" in text,
            "error": text.strip().splitlines()[-1:] if p.returncode else None}


def ladder():
    rows = []
    for name, args, samples in CASES:
        for precision in ("double", "single"):
            if time.time() > deadline:
                rows.append({"case": name, "precision": precision, "skipped": "deadline"})
                continue
            modes = [("cpu", None), ("cpu", 4), ("gpu", None), ("auto", None)]
            runs = {f"{b}{'' if t is None else t}": [] for b, t in modes}
            for _ in range(REPEATS):  # alternated: each repeat runs every mode once
                for b, t in modes:
                    runs[f"{b}{'' if t is None else t}"].append(run(args, b, precision, t))
            med = {k: statistics.median(r["wall_s"] for r in v) for k, v in runs.items()}
            auto = runs["auto"][-1]
            rows.append({"case": name, "precision": precision, "samples": samples, "median_s": med,
                         "min_s": {k: min(r["wall_s"] for r in v) for k, v in runs.items()},
                         "auto_on_gpu": auto["gpu_used"], "auto_settled_cpu": auto["settled_cpu"],
                         "faster": "gpu" if med["gpu"] < med["cpu"] else "cpu",
                         "errors": [r["error"] for v in runs.values() for r in v if r["rc"]]})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def series_check():
    """Four frames of the 100-domain mosaic at 512² on each backend: the same frames; times."""
    args, _ = mosaic(100, 512)
    res = {}
    for backend in ("cpu", "gpu", "auto"):
        d = os.path.join(work, f"series-{backend}")
        t = time.perf_counter()
        p = subprocess.run([binary, "series", *args, "--frames", "4", "-phi", "0", "-osc", "0.5", "--out-dir", d, "--backend", backend],
                           capture_output=True, text=True)
        res[backend] = {"wall_s": time.perf_counter() - t, "rc": p.returncode, "tail": (p.stdout + p.stderr).strip().splitlines()[-3:]}
    frames = []
    cpu_dir, gpu_dir = os.path.join(work, "series-cpu"), os.path.join(work, "series-gpu")
    names = sorted(f for f in os.listdir(cpu_dir) if f.endswith(".bin")) if os.path.isdir(cpu_dir) else []
    for name in names:
        if not os.path.exists(os.path.join(gpu_dir, name)):
            frames.append({"file": name, "error": "no GPU frame"})
            continue
        frames.append({"file": name, **compare(read_floats(os.path.join(cpu_dir, name)), read_floats(os.path.join(gpu_dir, name)))})
    res["frames"] = frames
    print(json.dumps(res), flush=True)
    return res


def table(rows):
    lines = [f"CPU threads: {CPUS}", "",
             "| case | precision | samples | CPU (all threads) | CPU (4 threads) | GPU | auto | auto took | faster |",
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['case']} | {r['precision']} | | | | | | skipped ({r['skipped']}) | |")
            continue
        m = r["median_s"]
        took = "GPU" if r["auto_on_gpu"] else ("CPU (settled)" if r["auto_settled_cpu"] else "CPU (fallback)")
        lines.append(f"| {r['case']} | {r['precision']} | {r['samples']:.2e} | {m['cpu']:.3f} s | {m['cpu4']:.3f} s | {m['gpu']:.3f} s | {m['auto']:.3f} s | {took} | {r['faster']} |")
    return "\n".join(lines)


def main():
    rows = ladder()
    ser = series_check() if time.time() < deadline + 60 else {"skipped": "deadline"}
    with open(os.path.join(out, "ladder.json"), "w") as f:
        json.dump({"cpus": CPUS, "ladder": rows, "series": ser}, f, indent=1)
    md = table(rows)
    with open(os.path.join(out, "ladder.md"), "w") as f:
        f.write(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
