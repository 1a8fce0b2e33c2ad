"""nanobragg.nearbragg: nearBragg.c's flags in, the command line's images out (issue 36)."""
import random
import subprocess

import numpy as np
import pytest

import nanobragg
from conftest import cli_path, skip_loudly

FLAGS = ["-detpixels", "24", "-pixel", "0.4", "-distance", "60"]


@pytest.fixture
def atoms(tmp_path):
    r = random.Random(5)
    p = tmp_path / "atoms.txt"
    p.write_text("".join("%.3f %.3f %.3f %.2f %.1f %.1f\n" % (r.uniform(-20, 20), r.uniform(-20, 20), r.uniform(-20, 20),
                                                              r.uniform(0.2, 1), r.uniform(0, 20), r.uniform(-180, 180))
                         for _ in range(20)))
    return p


def test_image_shape_determinism_and_coherent(atoms):
    img = nanobragg.nearbragg(["-file", str(atoms)] + FLAGS)
    assert isinstance(img, np.ndarray) and img.dtype == np.float32 and img.shape == (24, 24)
    assert img.sum() > 0
    assert nanobragg.nearbragg(["-file", str(atoms)] + FLAGS, threads=1).tobytes() == \
        nanobragg.nearbragg(["-file", str(atoms)] + FLAGS, threads=2).tobytes()
    img2, sin, cos = nanobragg.nearbragg(" ".join(["-file", str(atoms), "-coherent"] + FLAGS))
    assert sin.shape == cos.shape == img2.shape == (24, 24)
    assert np.abs(cos).sum() > 0 and np.abs(sin).sum() > 0


def test_same_pixels_as_the_command_line(atoms, tmp_path):
    cli = cli_path()
    if cli is None:
        skip_loudly("the nanobragg-rs binary was not found (build it or set NANOBRAGG_CLI)")
    subprocess.run([str(cli), "nearbragg", "-file", str(atoms)] + FLAGS + ["-floatfile", "f.bin", "-intfile", "i.img"],
                   cwd=tmp_path, check=True, capture_output=True)
    ref = np.fromfile(tmp_path / "f.bin", dtype="<f4").reshape(24, 24)
    assert nanobragg.nearbragg(["-file", str(atoms)] + FLAGS).tobytes() == ref.tobytes()


def test_errors(atoms, tmp_path):
    with pytest.raises(ValueError):
        nanobragg.nearbragg(["-file", str(atoms), "-lambda", "0"])
    with pytest.raises(ValueError):
        nanobragg.nearbragg(["-file", str(atoms), "-bogus"])
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2 3\n1 two 3\n")
    with pytest.raises(ValueError, match="line 2"):
        nanobragg.nearbragg(["-file", str(bad)])
    with pytest.raises(OSError):
        nanobragg.nearbragg(["-file", str(tmp_path / "missing.txt")])
    with pytest.raises(ValueError):
        nanobragg.nearbragg(["-file", str(atoms)], threads=0)
