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
    assert report["values"]["rot_x"] == pytest.approx(-0.03, abs=1e-3)  # relative to the start
    last = len(fit.args) - 1 - fit.args[::-1].index("--crystal-rot")  # later flags win
    assert abs(float(fit.args[last + 1])) < 1e-3  # the whole rotation
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


HKL = np.array([[h, k, l, 100.0] for h in range(-3, 4) for k in range(-3, 4) for l in range(-3, 4)])
PLAIN = ["-cell", "60", "70", "80", "90", "100", "90", "-lambda", "1", "-distance", "100", "-detpixels", "32", "-N", "3"]


def test_loss_gradient_of_a_simulation_made_from_arrays(tmp_path, monkeypatch):
    """Structure factors given as arrays: loss_gradient read the simulation's scratch F.hkl again to list
    dL/dF, deleted after its construction ("cannot read HKL file"). Its rows are the arrays' reflections,
    as for the same reflections from a file."""
    monkeypatch.chdir(tmp_path)
    sim = nanobragg.Simulation(PLAIN, hkl=HKL)
    img = sim.render()
    value, grads, rows = sim.loss_gradient(img + 1, ["rot_x"])
    assert rows.shape == (len(HKL), 4)
    assert np.array_equal(rows[:, :3], HKL[:, :3])
    np.savetxt(tmp_path / "F.hkl", HKL, fmt="%d %d %d %.1f")
    from_file = nanobragg.Simulation(PLAIN + ["-hkl", "F.hkl"])
    want = from_file.loss_gradient(img + 1, ["rot_x"])
    assert value == want[0] and grads == want[1] and np.array_equal(rows, want[2])


def test_loss_gradient_and_refine_use_what_was_read_at_construction(tmp_path, monkeypatch):
    """The -hkl file was read again by its (relative) path at each call: after the file changed (or
    os.chdir) the dL/dF rows and refine's model were another file's while the image was the first's."""
    monkeypatch.chdir(tmp_path)
    np.savetxt(tmp_path / "F.hkl", HKL, fmt="%d %d %d %.1f")
    sim = nanobragg.Simulation(PLAIN + ["-hkl", "F.hkl"])
    img = sim.render()
    before = sim.loss_gradient(img + 0.5, ["rot_x"])
    (tmp_path / "F.hkl").write_text("1 1 1 5\n")
    after = sim.loss_gradient(img + 0.5, ["rot_x"])
    assert after[0] == before[0] and after[1] == before[1]
    assert np.array_equal(after[2], before[2]) and after[2].shape == (len(HKL), 4)
    # refine fits (and returns) the structure factors the simulation was built with
    fit, report = nanobragg.refine(sim, img, ["Na"], loss="lsq")
    assert report["loss"] < 1e-9 * float((img.astype(np.float64) ** 2).sum()), report
    assert np.array_equal(fit.render(), img)


def test_refine_reports_rotations_relative_to_the_start_as_the_cli(tmp_path, cli):
    """report["values"]["rot_*"] was the whole --crystal-rot; the CLI's v.json (and docs/gradients.md)
    give the rotation relative to the start."""
    truth = FLAGS + ["-N", "8", "-fluence", "1e28"]
    obs = nanobragg.Simulation(truth).render()
    obs.astype("<f4").tofile(tmp_path / "obs.bin")
    start = truth + ["--crystal-rot", "0.03", "0.01", "0"]
    fit, report = nanobragg.refine(nanobragg.Simulation(start), obs, ["rot_x", "rot_y"], loss="lsq")
    assert report["values"]["rot_x"] == pytest.approx(-0.03, abs=1e-3)
    assert report["values"]["rot_y"] == pytest.approx(-0.01, abs=1e-3)
    r = subprocess.run([str(cli), "refine", *start, "--observed", "obs.bin", "--loss", "lsq", "--refine", "rot_x,rot_y",
                        "--params-out", "fit.json", "--refined-out", "v.json"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    v = json.load(open(tmp_path / "v.json"))
    assert report["values"] == pytest.approx(v, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("dtype", [complex, bool])
def test_observed_arrays_of_complex_or_bool_are_refused(dtype):
    """A complex observed image lost its imaginary part (a numpy warning only), a boolean one was taken
    as 0/1 photons: both are refused naming `observed`, as Simulation.noise refuses them as `image`."""
    sim = nanobragg.Simulation(FLAGS)
    obs = (sim.render() + 1).astype(dtype)
    with pytest.raises(ValueError, match="^observed: must be a real number array"):
        sim.loss_gradient(obs, ["rot_x"])
    with pytest.raises(ValueError, match="^observed: must be a real number array"):
        nanobragg.refine(sim, obs, ["rot_x"])


def test_refine_names_observed_not_its_scratch_file():
    """An observed image the Poisson loss cannot take was refused naming refine's scratch observed.bin."""
    sim = nanobragg.Simulation(PLAIN, hkl=np.array([[0, 0, 1, 5.0]]))
    with pytest.raises(ValueError, match=r"^observed: --loss poisson: pixel \(0, 0\)") as e:
        nanobragg.refine(sim, np.ones((32, 32)), ["rot_x"])
    assert "observed.bin" not in str(e.value)


def test_refine_of_a_missing_file_is_oserror(tmp_path):
    """docs/python.md: unreadable files raise OSError (it was ValueError)."""
    sim = nanobragg.Simulation(FLAGS)
    with pytest.raises(OSError, match="missing.img"):
        nanobragg.refine(sim, str(tmp_path / "missing.img"), ["rot_x"])
