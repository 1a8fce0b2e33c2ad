"""Simulation.from_expt: a DIALS experiment list with several panels, in Python as on the command line
(`simulate --expt`): render() gives (panels, slow, fast), or a list when the panels differ in height,
bit for bit the command line's -floatfile; formats of one panel are refused with one line."""
import json
import subprocess

import numpy as np
import pytest

import nanobragg

FLAGS = ["-default_F", "100", "-N", "5", "-oversample", "1"]


@pytest.fixture(autouse=True)
def scratch_cwd(tmp_path, monkeypatch):
    # as nanoBragg.c, a run without -hkl reads Fdump.bin from the working folder if there is one
    monkeypatch.chdir(tmp_path)


def panel(name, origin, size):
    return {"name": name, "type": "SENSOR_PAD", "fast_axis": [1.0, 0.0, 0.0], "slow_axis": [0.0, -1.0, 0.0],
            "origin": origin, "raw_image_offset": [0, 0], "image_size": size, "pixel_size": [0.2, 0.2],
            "trusted_range": [0.0, 1e6], "thickness": 0.0, "material": "Si", "mu": 0.0, "identifier": "",
            "mask": [], "gain": 1.0, "pedestal": 0.0, "px_mm_strategy": {"type": "SimplePxMmStrategy"}}


def write_expt(path, heights):
    """Panels 40 pixels wide stacked down the detector, `heights` rows each, 1 mm apart, at 60 mm."""
    panels, y = [], 8.0
    for i, h in enumerate(heights):
        panels.append(panel(f"p{i}", [-4.0, y, -60.0], [40, h]))
        y -= h * 0.2 + 1.0
    e = {"__id__": "ExperimentList",
         "experiment": [{"__id__": "Experiment", "beam": 0, "detector": 0, "goniometer": 0, "scan": 0, "crystal": 0}],
         "imageset": [],
         "beam": [{"direction": [0.0, 0.0, 1.0], "wavelength": 1.0, "polarization_normal": [0.0, 1.0, 0.0],
                   "polarization_fraction": 0.99}],
         "detector": [{"panels": panels}],
         "goniometer": [{"rotation_axis": [1.0, 0.0, 0.0], "fixed_rotation": [1, 0, 0, 0, 1, 0, 0, 0, 1],
                         "setting_rotation": [1, 0, 0, 0, 1, 0, 0, 0, 1]}],
         "scan": [{"image_range": [1, 5], "oscillation": [0.0, 0.5], "batch_offset": 0, "exposure_time": [1.0] * 5,
                   "epochs": [1.0, 2.0, 3.0, 4.0, 5.0], "valid_image_ranges": {}}],
         "crystal": [{"__id__": "crystal", "real_space_a": [30.0, 2.0, 1.0], "real_space_b": [-2.0, 35.0, 3.0],
                      "real_space_c": [1.0, -3.0, 40.0], "space_group_hall_symbol": " P 1"}]}
    path.write_text(json.dumps(e))
    return path


def cli_float(cli, tmp_path, expt, extra):
    out = tmp_path / "cli.bin"
    subprocess.run([str(cli), "simulate", "--expt", str(expt)] + extra + FLAGS + ["-floatfile", str(out), "-nonoise"],
                   check=True, capture_output=True, cwd=tmp_path)
    return np.fromfile(out, dtype="<f4")


def test_equal_panels_render_as_panels_slow_fast(cli, tmp_path):
    expt = write_expt(tmp_path / "two.expt", [30, 30])
    sim = nanobragg.Simulation.from_expt(expt, image=3, flags=FLAGS)
    assert sim.panels == 2 and sim.shape == (2, 30, 40)
    img = sim.render()
    assert img.shape == (2, 30, 40) and img.max() > 0
    np.testing.assert_array_equal(img.ravel(), cli_float(cli, tmp_path, expt, ["--image", "3"]))
    # a different scan image turns the crystal: another picture
    assert not np.array_equal(img, nanobragg.Simulation.from_expt(expt, flags=FLAGS).render())
    # the float file of the whole detector, the statistics of every panel together
    sim.write_float(tmp_path / "py.bin", img)
    np.testing.assert_array_equal(np.fromfile(tmp_path / "py.bin", dtype="<f4"), img.ravel())
    assert sim.stats(img)["max_I"] == pytest.approx(float(img.max()))
    pos = sim.pixel_positions()
    g = sim.geometry()
    assert g["frame"] == "dials" and len(g["panels"]) == 2 and pos.shape == (2, 30, 40, 3)
    # panel 1's first pixel centre: its origin + half a pixel along fast and slow (metres)
    np.testing.assert_allclose(pos[1, 0, 0], [(-4.0 + 0.1) * 1e-3, (8.0 - 30 * 0.2 - 1.0 - 0.1) * 1e-3, -0.06], atol=1e-12)
    assert isinstance(sim.resolution(), np.ndarray) and sim.resolution().shape == (2, 30, 40)


def test_panels_of_different_heights_render_as_a_list(cli, tmp_path):
    expt = write_expt(tmp_path / "three.expt", [20, 30, 10])
    sim = nanobragg.Simulation.from_expt(expt, flags=FLAGS)
    assert sim.shape == ((20, 40), (30, 40), (10, 40))
    img = sim.render()
    assert [p.shape for p in img] == [(20, 40), (30, 40), (10, 40)]
    np.testing.assert_array_equal(np.concatenate(img).ravel(), cli_float(cli, tmp_path, expt, []))
    image, grads = sim.render_gradients(["lambda"])
    assert [p.shape for p in grads["lambda"]] == [(20, 40), (30, 40), (10, 40)]
    assert any(np.abs(p).max() > 0 for p in grads["lambda"])
    # the loss takes the observation in the same form; the wrong number of panels is refused
    value, _, _ = sim.loss_gradient([p + 1.0 for p in img], ["lambda"])
    assert np.isfinite(value)
    with pytest.raises(ValueError, match="2 panels given, the detector has 3"):
        sim.loss_gradient(img[:2], ["lambda"])
    # the file's panels do not move with -distance: its derivative (all 0) and its fit are refused
    with pytest.raises(ValueError, match="'distance' moves the detector of the flags, but the panels come from the --expt file"):
        sim.render_gradients(["distance"])
    obs = tmp_path / "obs.bin"
    np.concatenate(img).astype("<f4").tofile(obs)
    with pytest.raises(ValueError, match="--refine: 'distance' moves the detector"):
        nanobragg.refine(sim, obs, ["distance"])
    # the noise image comes in the same layout as the render (a list of panels here)
    noise = sim.noise(img, seed=1)
    assert [p.shape for p in noise] == [(20, 40), (30, 40), (10, 40)] and noise[0].dtype == np.uint16
    # a pixel that is not a number is refused, as --observed refuses it from a file
    bad = [p.copy() for p in img]
    bad[1][0, 0] = np.nan
    with pytest.raises(ValueError, match="observed: pixel .* is not finite"):
        sim.loss_gradient(bad, ["lambda"])


def test_one_panel_formats_are_refused_and_panel_n_renders_one(tmp_path):
    expt = write_expt(tmp_path / "two.expt", [30, 30])
    sim = nanobragg.Simulation.from_expt(expt, flags=FLAGS)
    img = sim.render()
    for write in (sim.write_smv, sim.write_pgm, sim.write_png):
        with pytest.raises(ValueError, match="holds one panel and this detector has 2"):
            write(tmp_path / "x", img)
    with pytest.raises(ValueError, match="holds one panel"):
        sim.write_cbf(tmp_path / "x.cbf", np.zeros((2, 30, 40), dtype=np.int32))
    with pytest.raises(ValueError, match="not one string"):
        nanobragg.Simulation.from_expt(expt, flags="-N 5")
    one = nanobragg.Simulation.from_expt(expt, flags=FLAGS + ["--panel", "1"])
    assert one.panels == 1 and one.shape == (30, 40)
    np.testing.assert_array_equal(one.render(), img[1])


def test_an_fdump_cache_in_the_working_folder_is_said(cli, tmp_path):
    # a -hkl run leaves the C's Fdump.bin cache; a later run without -hkl there reads it, as the C does
    (tmp_path / "F.hkl").write_text("1 2 3 500\n")
    flags = ["-cell", "40", "50", "60", "90", "90", "90", "-N", "3", "-lambda", "1", "-distance", "80", "-detpixels", "16"]
    subprocess.run([str(cli), "simulate", "-hkl", "F.hkl", "-floatfile", "f.bin", "-nonoise"] + flags, check=True,
                   capture_output=True, cwd=tmp_path)
    assert (tmp_path / "Fdump.bin").exists()
    with pytest.warns(UserWarning, match="structure factors read from the cache Fdump.bin"):
        nanobragg.Simulation(flags)
