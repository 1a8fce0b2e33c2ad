"""Series as an iterator of frames: each frame equals the CLI series' frame, bit for bit."""
import pathlib
import subprocess

import numpy as np
import pytest

import nanobragg

BASE = nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "48", "-mosaic", "0.5", "-mosaic_dom", "3"]


@pytest.mark.parametrize("extra", [
    ["--frames", "3", "-phi", "10", "-osc", "2", "-seed", "5"],
    ["--stills", "3", "--orientation", "random", "-misset_seed", "9"],
])
def test_series_frames_equal_cli_series(extra, cli, tmp_path):
    args = BASE + extra + ["-floatfile", "f_###.bin", "-intfile", "i_###.img", "-nonoise", "-nopgm"]
    frames = list(nanobragg.Series(args))
    assert [f.index for f in frames] == [1, 2, 3]
    r = subprocess.run([str(cli), "series", *args], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for f in frames:
        want = (tmp_path / f"f_{f.index:03d}.bin").read_bytes()
        assert f.image.tobytes() == want, f"frame {f.index} differs from the CLI series"
    assert len({f.image.tobytes() for f in frames}) == 3


def test_series_errors():
    with pytest.raises(ValueError, match="--frames"):
        nanobragg.Series(BASE)
    with pytest.raises(ValueError, match="-osc"):
        nanobragg.Series(BASE + ["--frames", "3"])
    with pytest.raises(IndexError):
        nanobragg.Series(BASE + ["--frames", "2", "-osc", "1"]).frame_args(3)
