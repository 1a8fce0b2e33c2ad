"""The README's ten-line example prints the CLI's numbers for the same flags."""
import re
import subprocess
import sys
import pathlib

import pytest

import nanobragg

HERE = pathlib.Path(__file__).resolve().parent


def test_benchmark_example_matches_cli(tmp_path, cli):
    r = subprocess.run([sys.executable, str(HERE.parent / "examples" / "render_benchmark.py")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "shape (1024, 1024)" in r.stdout
    c = subprocess.run([str(cli), "simulate", *nanobragg.BENCHMARK_CRYSTAL, "-detpixels", "1024", "-seed", "42",
                        "-floatfile", "f.bin", "-intfile", "i.img", "-noisefile", "n.img"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert c.returncode == 0, c.stderr
    for pattern in [r"max_I = (\S+)", r"mean= (\S+)", r"(\d+) photons on noise image"]:
        want = re.search(pattern, c.stdout).group(1)
        got = re.search(pattern, r.stdout).group(1)
        assert float(got) == pytest.approx(float(want), rel=1e-5), pattern
    assert (tmp_path / "noise.img").read_bytes() == (tmp_path / "n.img").read_bytes()
    s = float(re.search(r"sum (\S+)", r.stdout).group(1))
    import numpy as np
    cli_sum = np.fromfile(tmp_path / "f.bin", dtype="<f4").sum(dtype=np.float64)
    assert s == pytest.approx(cli_sum, rel=1e-6)
