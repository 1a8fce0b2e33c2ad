"""Simulation.render_gradients / loss_gradient and nanobragg.refine against the command line."""
import json
import subprocess

import numpy as np
import pytest

import nanobragg

FLAGS = ["-cell", "60", "70", "80", "90", "100", "90", "-misset", "5", "10", "15", "-default_F", "30",
         "-lambda", "1", "-distance", "100", "-pixel", "0.1", "-N", "3", "-detpixels", "32", "-oversample", "2"]


def test_render_gradients_equal_the_cli_files(tmp_path, cli):
    exe = str(cli)
    names = ["rot_x", "distance", "Na"]
    image, grads = nanobragg.Simulation(FLAGS).render_gradients(names)
    subprocess.run([exe, "simulate", *FLAGS, "-floatfile", "f.bin", "-nonoise", "-nopgm", "-quiet",
                    "--gradients", ",".join(names)], cwd=tmp_path, check=True)
    assert np.array_equal(image.ravel(), np.fromfile(tmp_path / "f.bin", "<f4"))
    for n in names:
        assert np.array_equal(grads[n].ravel(), np.fromfile(tmp_path / f"grad_{n}.bin", "<f4")), n


def test_loss_gradient_equals_the_cli(tmp_path, cli):
    exe = str(cli)
    sim = nanobragg.Simulation(FLAGS)
    obs = sim.render() * 1.3 + 0.5
    obs.astype("<f4").tofile(tmp_path / "obs.bin")
    value, grads, rows = sim.loss_gradient(obs.astype(np.float32), ["rot_x", "b"], loss="lsq")
    subprocess.run([exe, "simulate", *FLAGS, "-floatfile", "f.bin", "-nonoise", "-nopgm", "-quiet",
                    "--observed", "obs.bin", "--loss", "lsq", "--gradients", "rot_x,b", "--loss-out", "L.json"],
                   cwd=tmp_path, check=True)
    j = json.load(open(tmp_path / "L.json"))
    assert value == pytest.approx(j["value"], rel=1e-12)
    for n in ("rot_x", "b"):
        assert grads[n] == pytest.approx(j["gradient"][n], rel=1e-9)
    assert rows.shape == (0, 4)
    with pytest.raises(ValueError, match="unknown parameter 'q'"):
        sim.render_gradients(["q"])


def test_refine_recovers_a_rotation():
    truth = nanobragg.Simulation(FLAGS + ["-N", "8", "-fluence", "1e28"])
    obs = truth.render()
    start = nanobragg.Simulation(FLAGS + ["-N", "8", "-fluence", "1e28", "--crystal-rot", "0.03", "0", "0"])
    fit, report = nanobragg.refine(start, obs, ["rot_x"], loss="lsq")
    assert report["converged"], report
    assert abs(report["values"]["rot_x"]) < 1e-3
    assert np.allclose(fit.render(), obs, rtol=1e-3, atol=1e-3 * obs.max())


def test_refine_a_simulation_made_from_arrays():
    """Structure factors and an A matrix given as arrays: refine wrote the fit with the simulation's
    scratch files, deleted after its construction ("cannot read HKL file")."""
    hkl = np.array([[h, k, l, 100.0] for h in range(-3, 4) for k in range(-3, 4) for l in range(-3, 4)])
    truth = nanobragg.Simulation(FLAGS + ["-N", "8", "-fluence", "1e28"], hkl=hkl)
    obs = truth.render()
    start = nanobragg.Simulation(FLAGS + ["-N", "8", "-fluence", "1e28", "--crystal-rot", "0.02", "0", "0"], hkl=hkl)
    fit, report = nanobragg.refine(start, obs, ["rot_x"], loss="lsq")
    assert report["converged"], report
    assert np.allclose(fit.render(), obs, rtol=1e-3, atol=1e-3 * obs.max())


def test_refine_names_the_array_for_values_float32_cannot_hold():
    """A float64 observed image past float32's range was refused naming refine's scratch file."""
    sim = nanobragg.Simulation(FLAGS)
    obs = sim.render().astype(np.float64)
    obs[2, 5] = 1e300
    with pytest.raises(ValueError, match=r"observed: pixel 69 \(fast 5, slow 2\) is 1e\+300") as e:
        nanobragg.refine(sim, obs, ["rot_x"], loss="lsq")
    assert "observed.bin" not in str(e.value)
