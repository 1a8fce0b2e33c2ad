#!/usr/bin/env python3
"""GPU parity on the golden cases: every case of a golden folder (cases/<id>/args.txt, inputs/) run
with `--backend cpu` and `--backend gpu`, in double and single precision, the two float images
compared (double: correlation >= 0.999999 and sums within 1e-5; single: correlation >= 0.9999).
Cases the C refuses must be refused by both backends with the same exit code.

usage: gpu_parity.py BINARY GOLDEN_DIR WORK_DIR OUT_JSON [--jobs N]
Prints one line per case and precision; exits 1 when any comparison fails.
"""
import concurrent.futures
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from array import array

MIN_CORR = {"double": 0.999999, "single": 0.9999}
MAX_SUM_REL = {"double": 1e-5, "single": 1e-3}


def read_floats(path):
    a = array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def compare(x, y):
    n = len(x)
    if n != len(y) or n == 0:
        return {"pixels": n, "corr": float("nan"), "sum_rel": float("inf"), "max_rel": float("inf")}
    sx = math.fsum(x)
    sy = math.fsum(y)
    mx, my = sx / n, sy / n
    sxx = math.fsum((v - mx) ** 2 for v in x)
    syy = math.fsum((v - my) ** 2 for v in y)
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y))
    if sxx == 0 and syy == 0:
        corr = 1.0 if all(a == b for a, b in zip(x, y)) else 0.0
    else:
        corr = sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else 0.0
    peak = max(max(abs(v) for v in x), 1e-300)
    max_rel = max(abs(a - b) for a, b in zip(x, y)) / peak
    sum_rel = abs(sx - sy) / max(abs(sx), 1e-300)
    return {"pixels": n, "corr": corr, "sum_rel": sum_rel, "max_rel": max_rel, "sum_cpu": sx, "sum_gpu": sy}


def run_case(binary, golden, work, case, backend, precision):
    """Run one case in its own folder laid out as the golden one (../../inputs); (rc, seconds, float path)."""
    root = os.path.join(work, f"{backend}-{precision}")
    cdir = os.path.join(root, "cases", case)
    os.makedirs(cdir, exist_ok=True)
    inputs = os.path.join(root, "inputs")
    if not os.path.exists(inputs):
        try:
            os.symlink(os.path.abspath(os.path.join(golden, "inputs")), inputs)
        except FileExistsError:
            pass
    src = os.path.join(golden, "cases", case)
    for extra in ("Fdump.bin",):
        if os.path.exists(os.path.join(src, extra)):
            shutil.copy(os.path.join(src, extra), cdir)
    args = shlex.split(open(os.path.join(src, "args.txt")).read())
    if "-floatfile" not in args and "-float" not in args:
        args += ["-floatfile", "float.bin"]
    args += ["--backend", backend, "--precision", precision]
    t = time.perf_counter()
    p = subprocess.run([binary, "simulate"] + args, cwd=cdir, capture_output=True, text=True)
    dt = time.perf_counter() - t
    fi = args.index("-floatfile") if "-floatfile" in args else args.index("-float")
    return p.returncode, dt, os.path.join(cdir, args[fi + 1]), p.stderr.strip().splitlines()[-1:] if p.returncode else []


def check(binary, golden, work, case, precision):
    rc_c, t_c, f_c, err_c = run_case(binary, golden, work, case, "cpu", precision)
    rc_g, t_g, f_g, err_g = run_case(binary, golden, work, case, "gpu", precision)
    rec = {"case": case, "precision": precision, "rc_cpu": rc_c, "rc_gpu": rc_g, "cpu_s": t_c, "gpu_s": t_g}
    if rc_c != 0 or rc_g != 0:
        rec["ok"] = rc_c == rc_g
        rec["refused"] = True
        rec["error_cpu"], rec["error_gpu"] = err_c, err_g
        return rec
    rec.update(compare(read_floats(f_c), read_floats(f_g)))
    rec["ok"] = rec["corr"] >= MIN_CORR[precision] and rec["sum_rel"] <= MAX_SUM_REL[precision]
    return rec


def main():
    binary, golden, work, out_json = sys.argv[1:5]
    jobs = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 4
    binary = os.path.abspath(binary)
    cases = sorted(c for c in os.listdir(os.path.join(golden, "cases")) if os.path.exists(os.path.join(golden, "cases", c, "args.txt")))
    todo = [(c, p) for c in cases for p in ("double", "single")]
    results = []
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for rec in pool.map(lambda cp: check(binary, golden, work, cp[0], cp[1]), todo):
            results.append(rec)
            if rec.get("refused"):
                print(f"{'ok  ' if rec['ok'] else 'FAIL'} {rec['case']:40s} {rec['precision']:6s} refused by cpu (rc {rec['rc_cpu']}) and gpu (rc {rec['rc_gpu']}) {rec['error_gpu']}", flush=True)
            else:
                print(f"{'ok  ' if rec['ok'] else 'FAIL'} {rec['case']:40s} {rec['precision']:6s} corr {rec['corr']:.9f} sum_rel {rec['sum_rel']:.2e} max_rel {rec['max_rel']:.2e} cpu {rec['cpu_s']:.2f} s gpu {rec['gpu_s']:.2f} s", flush=True)
    failed = [r for r in results if not r["ok"]]
    summary = {"cases": len(cases), "comparisons": len(results), "failed": len(failed), "min_corr": MIN_CORR, "max_sum_rel": MAX_SUM_REL, "results": results}
    with open(out_json, "w") as f:
        json.dump(summary, f, indent=1)
    print(f"parity: {len(results) - len(failed)}/{len(results)} comparisons ok over {len(cases)} golden cases")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
