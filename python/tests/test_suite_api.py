"""The rest of the suite from Python (#35 item 5): CBF and NeXus writers for arrays, noisify, nonbragg and
noisify's PSF, each equal to the command line's files."""
import os
import subprocess

import numpy as np
import pytest

import nanobragg
from conftest import skip_loudly

FLAGS = ["-cell", "70", "80", "90", "90", "90", "90", "-N", "5", "-default_F", "100", "-lambda", "1",
         "-distance", "80", "-pixel", "0.2", "-detpixels", "64", "-seed", "3", "-phi", "5", "-osc", "0.25"]


@pytest.fixture(scope="module")
def sim():
    return nanobragg.from_args(FLAGS)


def test_write_cbf_equals_the_cli(sim, cli, tmp_path):
    image = sim.render()
    counts = sim.noise(image).astype(np.int32) - 40  # plain photon counts, as -cbffile holds them
    sim.write_cbf(tmp_path / "py.cbf", counts)
    subprocess.run([str(cli), "simulate", *FLAGS, "-cbffile", "cli.cbf", "-nopgm", "--quiet"], cwd=tmp_path, check=True)
    py, c = (tmp_path / "py.cbf").read_bytes(), (tmp_path / "cli.cbf").read_bytes()
    # the same binary section and geometry header; only the "# Data:" line says who wrote it
    assert py.split(b"_array_data.data")[1] == c.split(b"_array_data.data")[1]
    keep = lambda b: [l for l in b.split(b"_array_data.data")[0].split(b"\n") if not l.startswith(b"# Data")]
    assert keep(py) == keep(c)
    with pytest.raises(ValueError):
        sim.write_cbf(tmp_path / "bad.cbf", image)  # floats are not counts
    with pytest.raises(ValueError):
        sim.write_cbf(tmp_path / "bad.cbf", counts[:10])


def test_write_nexus_frames(sim, tmp_path):
    try:
        import h5py
    except ImportError:
        skip_loudly("h5py is not installed: the NeXus file is not read back")
    image = sim.render()
    counts = np.stack([sim.noise(image, seed=k).astype(np.int32) for k in range(3)])
    try:
        sim.write_nexus(tmp_path / "sweep.nxs", counts)
    except OSError as e:
        skip_loudly(f"no HDF5 library: {e}")
    sim.write_nexus(tmp_path / "one.nxs", counts[0])
    with h5py.File(tmp_path / "sweep.nxs") as h:
        assert np.array_equal(h["/entry/data/data"][()], counts)
        omega = h["/entry/sample/transformations/omega"][()] if "/entry/sample/transformations/omega" in h else None
    if omega is not None:
        assert np.allclose(omega, [5.0, 5.25, 5.5])
    with h5py.File(tmp_path / "one.nxs") as h:
        assert h["/entry/data/data"].shape == (1, 64, 64)


def test_noisify_equals_the_cli(sim, cli, tmp_path):
    image = sim.render()
    args = ["-readout_noise", "2", "-flicker", "0.01", "-seed", "9", "-detpixels", "64", "-pixel", "0.2"]
    noise = nanobragg.noisify(image, args)
    image.astype("<f4").tofile(tmp_path / "f.bin")
    subprocess.run([str(cli), "noisify", "-floatfile", "f.bin", *args, "-noisefile", "n.img", "-nopgm"], cwd=tmp_path,
                   check=True, capture_output=True)
    want = np.fromfile(tmp_path / "n.img", dtype="<u2", offset=512).reshape(64, 64)
    assert noise.dtype == np.uint16 and np.array_equal(noise, want)
    # keywords are flags too
    assert np.array_equal(nanobragg.noisify(image, ["-detpixels", "64", "-pixel", "0.2"], readout_noise=2, flicker=0.01, seed=9), want)
    with pytest.raises(ValueError):
        nanobragg.noisify(image, ["-psf", "gauss", "-bogus_flag"])


def test_nonbragg_equals_the_cli(cli, tmp_path):
    # a small water-like stol table of our own
    (tmp_path / "w.stol").write_text("".join(f"{s:.3f} {2.57 + 2 * np.exp(-((s - 0.16) / 0.05) ** 2):.4f}\n" for s in np.arange(0, 0.6, 0.01)))
    args = ["-stol", str(tmp_path / "w.stol"), "-lambda", "1", "-distance", "100", "-detpixels", "48", "-pixel", "0.2"]
    image = nanobragg.nonbragg(args)
    subprocess.run([str(cli), "nonbragg", *args, "-floatfile", "w.bin", "-nopgm"], cwd=tmp_path, check=True, capture_output=True)
    want = np.fromfile(tmp_path / "w.bin", dtype="<f4").reshape(48, 48)
    assert image.shape == (48, 48) and np.array_equal(image, want) and image.sum() > 0


def test_apply_psf_spreads_photons_without_making_any():
    image = np.zeros((64, 64), np.float32)
    image[32, 32] = 1000.0
    image[20, 40] = 10.0
    for psf in ("gauss", "fiber"):
        out = nanobragg.apply_psf(image, psf=psf, psf_fwhm=100, pixel=0.1, psf_radius=12)
        assert out.shape == image.shape
        assert out[32, 32] < 1000 and out[32, 33] > 0
        assert out.sum() == pytest.approx(image.sum(), rel=2e-3)
        # the automatic radius (noisify's) loses less than the brightest pixel's photon noise
        auto = nanobragg.apply_psf(image, psf=psf, psf_fwhm=100, pixel=0.1)
        assert image.sum() - auto.sum() < np.sqrt(image.max())
    for bad in (dict(psf="box"), dict(psf_fwhm=-1), dict(pixel=0)):
        with pytest.raises(ValueError):
            nanobragg.apply_psf(image, **bad)


@pytest.mark.parametrize("bad, msg", [
    (np.ones((8, 8), complex), "^image: must be a real number array"),
    (np.ones((8, 8), bool), "^image: must be a real number array"),
    (np.full((8, 8), np.nan, np.float32), "^image: pixel 0 .* is nan"),
    (np.full((8, 8), np.inf), "^image: pixel 0 .* is inf"),
    (np.zeros((0, 8), np.float32), "^image: "),
])
def test_noisify_names_the_image(bad, msg):
    """A complex image lost its imaginary part and a boolean one became 0/1 photons, in silence; a NaN,
    inf or empty image was refused naming noisify's scratch float.bin."""
    with pytest.raises(ValueError, match=msg) as e:
        nanobragg.noisify(bad, ["-seed", "1"])
    assert "float.bin" not in str(e.value)
