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
    # the command line's dataset flags would be ignored here: refused, naming the flag
    sweep = BASE + ["--frames", "2", "-osc", "1"]
    for extra in (["--resume"], ["--verify"], ["--outputs", "float"]):
        with pytest.raises(ValueError, match=f"^{extra[0]}: Series makes the frames in memory"):
            nanobragg.Series(sweep + extra)
    # flags that change no frame pass (a script may hand over the whole command line)
    assert len(nanobragg.Series(sweep + ["--name", "x", "--max-output", "1G"])) == 2


def test_series_yields_the_frames_the_flags_choose(monkeypatch):
    """--only and --shard choose the frames as on the command line (all ten were yielded), the
    Slurm variables are not read, any frame's flags stay at hand, and a series of a million frames is
    not made up front (it aborted the interpreter)."""
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    sweep = BASE + ["--frames", "10", "-osc", "1"]
    assert list(nanobragg.Series(sweep).frames) == list(range(1, 11))
    s = nanobragg.Series(sweep + ["--only", "5-7"])
    assert len(s) == 3 and s.frames == range(5, 8) and [f.index for f in s] == [5, 6, 7]
    assert s.frame_args(6) == nanobragg.Series(sweep).frame_args(6)
    assert s.frame_args(1) == nanobragg.Series(sweep).frame_args(1)
    with pytest.raises(IndexError, match="1..10"):
        s.frame_args(11)
    assert [f.index for f in nanobragg.Series(sweep + ["--shard", "1/2"])] == [6, 7, 8, 9, 10]
    big = nanobragg.Series(BASE + ["--frames", "1000000", "-osc", "0.001", "--only", "999999-1000000"])
    assert len(big) == 2 and "-phi" in big.frame_args(1000000)


def test_stills_must_be_lists_of_flags():
    with pytest.raises(ValueError, match="a list of flags"):
        nanobragg.render_stills(["-cell 50 50 50 90 90 90"])
    with pytest.raises(ValueError, match="a list of flags"):
        next(nanobragg.iter_renders(["-cell"]))


def test_series_warns_once_per_iteration(tmp_path, capfd):
    # every frame reads the -hkl list again; its warning is shown once, as the command line's series does
    (tmp_path / "asu.hkl").write_text("0 0 0 10\n1 0 0 20\n0 1 2 30\n")
    args = BASE + ["-hkl", str(tmp_path / "asu.hkl"), "-detpixels", "32", "--frames", "3", "-osc", "0.1"]
    capfd.readouterr()
    assert [f.index for f in nanobragg.Series(args)] == [1, 2, 3]
    assert capfd.readouterr().err.count("Friedel mate") == 1
    # after the iteration each new simulation warns again
    nanobragg.Series(args).simulation(1)
    assert capfd.readouterr().err.count("Friedel mate") == 1
