"""Forward vs forward + derivative images, whole process, alternated runs (nanobragg-rs), and the
PyTorch port's forward and forward+backward on the benchmark crystal (torch_worker.py), in one session.

usage: python bench.py BIN ROUNDS OUT.json [TORCH_PYTHON TORCH_SRC]
Run from this folder (heavy_P1.hkl is the 2026-11-22-heavy file).
"""
import json
import os
import subprocess
import sys
import time

BIN, ROUNDS, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
TORCH = sys.argv[4:6] if len(sys.argv) > 5 else None
HERE = os.path.dirname(os.path.abspath(__file__))
HKL = os.path.join(HERE, "..", "2026-11-22-heavy", "heavy_P1.hkl")
HEAVY = (f"-cell 70 80 90 85 95 105 -misset 10 20 30 -lambda 1 -distance 100 -pixel 0.1 -N 10 -mosaic 0.5 "
         f"-mosaic_dom 5 -phisteps 2 -osc 0.1 -divergence 0.2 -divsteps 3 -dispersion 0.1 -dispsteps 2 "
         f"-oversample 2 -hkl {HKL} -detpixels 512").split()
BENCH = "-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 -distance 100 -pixel 0.1 -detpixels 512".split()
TWELVE = "rot_x,rot_y,rot_z,a,b,c,alpha,beta,gamma,distance,Xbeam,Ybeam"
COMMON = "-nonoise -nopgm -noprogress -quiet -floatfile f.bin -intfile i.img".split()


def wall(args, cwd):
    t = time.perf_counter()
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return time.perf_counter() - t


def main():
    work = os.path.join("/tmp", "nb-grad-bench")
    os.makedirs(work, exist_ok=True)
    runs = {k: [] for k in ["heavy_forward", "heavy_grad12", "bench_forward", "bench_grad12", "torch"]}
    for _ in range(ROUNDS):
        runs["heavy_forward"].append(wall([BIN, "simulate", *HEAVY, *COMMON], work))
        runs["heavy_grad12"].append(wall([BIN, "simulate", *HEAVY, *COMMON, "--gradients", TWELVE, "--gradient-prefix", "g_"], work))
        runs["bench_forward"].append(wall([BIN, "simulate", *BENCH, *COMMON], work))
        runs["bench_grad12"].append(wall([BIN, "simulate", *BENCH, *COMMON, "--gradients", TWELVE, "--gradient-prefix", "g_"], work))
        if TORCH:
            env = dict(os.environ, PYTHONPATH=TORCH[1], NANOBRAGG_DISABLE_COMPILE="1")
            t = time.perf_counter()
            r = subprocess.run([TORCH[0], os.path.join(HERE, "torch_worker.py"), "512", "2", "2"], cwd=work, capture_output=True, text=True, env=env)
            assert r.returncode == 0, r.stderr
            j = json.loads(r.stdout.strip().splitlines()[-1])
            j["process_s"] = time.perf_counter() - t
            runs["torch"].append(j)
    json.dump(runs, open(OUT, "w"), indent=1)
    for k, v in runs.items():
        if v and not isinstance(v[0], dict):
            s = sorted(v)
            print(f"{k:>14}: min {s[0]:.3f} median {s[len(s) // 2]:.3f} max {s[-1]:.3f} s")


main()
