"""Parity with the command line: on every golden case the module's float image equals the CLI's
-floatfile bit for bit, and write_outputs() writes the same bytes as the CLI (int, noise, PGM images)."""
import json
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import nanobragg

from conftest import golden_dir


def _cases():
    d = golden_dir()
    if d is None:
        return []
    m = json.loads((d / "manifest.json").read_text())
    return [c for c in m["cases"] if c.get("exit_code", 0) == 0]


def _scratch(golden, case, root):
    """The golden README's layout: cases/<id>/ holding the case's inputs, inputs/ two levels up."""
    shutil.copytree(golden / "inputs", root / "inputs", ignore=shutil.ignore_patterns("legacy"))
    d = root / "cases" / case["id"]
    d.mkdir(parents=True)
    names = case.get("inputs") or []
    for name in (names.keys() if isinstance(names, dict) else names):
        src = golden / "cases" / case["id"] / name
        if src.is_file() and "/" not in name:
            shutil.copy(src, d / name)
    return d


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["id"])
def test_module_equals_cli(case, golden, cli, tmp_path, monkeypatch):
    args = case["args"].split()
    cdir = _scratch(golden, case, tmp_path / "cli")
    r = subprocess.run([str(cli), "simulate", *args], cwd=cdir, capture_output=True, text=True,
                       env={**os.environ, "LC_ALL": "C"})
    assert r.returncode == 0, r.stderr
    mdir = _scratch(golden, case, tmp_path / "module")
    monkeypatch.chdir(mdir)
    sim = nanobragg.from_args(args)
    image = sim.render()
    fp, sp = case["detector"]
    assert image.dtype == np.float32 and image.shape == (sp, fp)
    cli_float = (cdir / "float.bin").read_bytes()
    assert image.tobytes() == cli_float, "float image differs from the CLI's"
    written = sim.write_outputs(image)
    assert written, "nothing written"
    for p in written:
        name = pathlib.Path(p).name
        assert (mdir / p).read_bytes() == (cdir / name).read_bytes(), f"{name} differs from the CLI's"
    if "-noisefile" in args and "-nonoise" not in args:
        noise = sim.noise(image)
        cli_noise = (cdir / args[args.index("-noisefile") + 1]).read_bytes()
        hdr = int(cli_noise[:512].split(b"HEADER_BYTES=")[1].split(b";")[0])
        want = np.frombuffer(cli_noise[hdr:], dtype="<u2").reshape(sp, fp)
        assert (noise == want).all(), "noise() differs from the CLI's noise image"
