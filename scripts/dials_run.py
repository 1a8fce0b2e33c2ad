"""The one helper the DIALS check scripts share: run a program, stop the check with its output on failure."""
import subprocess


def run(cmd, cwd):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        raise SystemExit(f"FAIL: {' '.join(cmd[:3])} ... exited {r.returncode}")
    return r.stdout
