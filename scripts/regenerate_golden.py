#!/usr/bin/env python3
"""Re-run a nanoBragg binary (the C reference, or nanobragg-rs with a `simulate` prefix) over every case
of the golden manifest and compare its outputs with the stored ones.

usage: regenerate_golden.py BINARY OUTDIR [--golden DIR] [--prefix WORD]

Each case runs in OUTDIR/cases/<id>/ with the shared inputs at OUTDIR/inputs/, as the golden README
prescribes, single-threaded with LC_ALL=C. Prints one line per case and a closing "N passed, M failed".
"""
import argparse
import json
import os
import shutil
import subprocess
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("outdir")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--golden", default=os.environ.get("NANOBRAGG_GOLDEN", os.path.join(here, "..", "..", "shared", "golden")))
    ap.add_argument("--prefix", default="", help="word before the flags, e.g. 'simulate' for nanobragg-rs")
    a = ap.parse_args()
    golden = os.path.abspath(a.golden)
    manifest = json.load(open(os.path.join(golden, "manifest.json")))
    out = os.path.abspath(a.outdir)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(os.path.join(golden, "inputs"), os.path.join(out, "inputs"))
    env = dict(os.environ, OMP_NUM_THREADS="1", LC_ALL="C")
    passed = failed = 0
    for case in manifest["cases"]:
        cid = case["id"]
        src = os.path.join(golden, "cases", cid)
        dst = os.path.join(out, "cases", cid)
        os.makedirs(dst)
        inputs = case.get("inputs") or {}
        for name in (inputs.keys() if isinstance(inputs, dict) else inputs):
            p = os.path.join(src, name)
            if os.path.isfile(p):
                shutil.copy(p, dst)
        args = case["args"].split()
        cmd = [os.path.abspath(a.binary)] + ([a.prefix] if a.prefix else []) + args
        r = subprocess.run(cmd, cwd=dst, env=env, capture_output=True)
        problems = []
        if r.returncode != case["exit_code"] and not (case["exit_code"] != 0 and r.returncode != 0):
            problems.append(f"exit {r.returncode}, expected {case['exit_code']}")
        for role, name in case.get("outputs", {}).items():
            if role in ("stdout", "stderr"):
                continue
            mine, ref = os.path.join(dst, name), os.path.join(src, name)
            if not os.path.exists(mine):
                problems.append(f"{name} missing")
            elif open(mine, "rb").read() != open(ref, "rb").read():
                problems.append(f"{name} differs")
        if problems:
            failed += 1
            print(f"DIFF {cid}: {'; '.join(problems)}")
        else:
            passed += 1
            print(f"same {cid}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
