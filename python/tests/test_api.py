"""The Python layer: keywords, numpy inputs, writers, errors, threads, pickling."""
import pickle
import threading
import time

import numpy as np
import pytest

import nanobragg

SMALL = nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "64", "-seed", "7"]


@pytest.fixture(scope="module")
def sim():
    return nanobragg.from_args(SMALL)


@pytest.fixture(scope="module")
def image(sim):
    return sim.render()


def test_render_shape_dtype_and_determinism(sim, image):
    assert image.shape == (64, 64) and image.dtype == np.float32
    assert image.sum() > 0
    assert sim.render(threads=1).tobytes() == image.tobytes()
    assert sim.render(threads=2).tobytes() == image.tobytes()


def test_keywords_equal_flags(image):
    kw = nanobragg.Simulation(cell=(100, 100, 100, 90, 90, 90), N=5, default_F=100, wavelength=6.2,
                              distance=100, pixel=0.1, detpixels=64, seed=7)
    assert kw.args == SMALL
    assert kw.render().tobytes() == image.tobytes()
    assert nanobragg.keywords_to_args(nopolar=True, nonoise=False, misset=None, beam_center=(3, 4)) == \
        ["-nopolar", "-Xbeam", "3", "-Ybeam", "4"]


def test_hkl_arrays_equal_hkl_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    h, k, l = np.meshgrid(np.arange(-3, 4), np.arange(-3, 4), np.arange(-3, 4), indexing="ij")
    h, k, l = h.ravel(), k.ravel(), l.ravel()
    F = rng.uniform(1, 1000, h.size)
    # float(): under numpy >= 2 the repr of a numpy float is "np.float64(...)"
    (tmp_path / "P1.hkl").write_text("".join(f"{a} {b} {c} {float(f)!r}\n" for a, b, c, f in zip(h, k, l, F)))
    base = ["-cell", "50", "60", "70", "90", "90", "90", "-lambda", "1", "-N", "3", "-distance", "80",
            "-detpixels", "48", "-pixel", "0.2", "-misset", "10", "20", "30"]
    want = nanobragg.from_args(base + ["-hkl", "P1.hkl"]).render()
    got_cols = nanobragg.Simulation(base, hkl=(h, k, l, F)).render()
    got_table = nanobragg.Simulation(base, hkl=np.stack([h, k, l, F], axis=1)).render()
    assert want.sum() > 0
    assert got_cols.tobytes() == want.tobytes()
    assert got_table.tobytes() == want.tobytes()
    assert not (tmp_path / "Fdump.bin").exists() or (tmp_path / "Fdump.bin").stat().st_size > 0


def test_amatrix_equals_mat_file(tmp_path):
    a = np.array([[-0.0123, 0.0051, 0.0007], [0.0023, 0.0087, -0.0069], [-0.0041, 0.0062, 0.0098]])
    (tmp_path / "A.mat").write_text("\n".join(" ".join(repr(x) for x in row) for row in a.tolist()) + "\n")
    base = ["-default_F", "100", "-lambda", "1", "-N", "4", "-distance", "100", "-detpixels", "48"]
    want = nanobragg.from_args(base + ["-mat", str(tmp_path / "A.mat")]).render()
    got = nanobragg.Simulation(base, amatrix=a).render()
    assert got.tobytes() == want.tobytes()
    c = nanobragg.Simulation(base, amatrix=a).crystal()
    assert len(c["a_star_per_A"]) == 3


def test_noise_seed(sim, image):
    a = sim.noise(image)
    assert a.dtype == np.uint16 and a.shape == image.shape
    assert (sim.noise(image) == a).all()
    assert (sim.noise(image, seed=7) == a).all()  # the flags' -seed 7
    assert (sim.noise(image, seed=8) != a).any()
    flat = sim.noise(np.zeros_like(image), adc=0)
    assert (flat == 0).all()


def test_noise_seed_is_negated_as_an_int(image):
    # the flags' -seed -2147483648 is negated in C int (to itself); seed= must give the same noise
    m = "-2147483648"
    s = nanobragg.from_args(SMALL[:SMALL.index("-seed")] + ["-seed", m])
    assert (s.noise(image, seed=int(m)) == s.noise(image)).all()


def test_noise_without_a_seed_is_new_each_call(image):
    # no -seed in the flags and no seed=: every call draws new noise; seed= still reproduces
    s = nanobragg.from_args(nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "64"])
    a, b = s.noise(image), s.noise(image)
    assert (a != b).any()
    assert (s.noise(image, seed=3) == s.noise(image, seed=3)).all()


def test_render_adds_add_float(tmp_path, image):
    extra = np.full(image.shape, 1000.0, dtype=np.float32)
    extra.tofile(tmp_path / "add.bin")
    s = nanobragg.from_args(SMALL + ["-add_float", str(tmp_path / "add.bin")])
    assert s.render().tobytes() == (image.astype(np.float64) + 1000.0).astype(np.float32).tobytes()


def test_complex_f_means_its_amplitude():
    h, k, l = np.array([1, 0, 2]), np.array([0, 1, 1]), np.array([0, 0, 3])
    f = np.array([3 + 4j, -5j, 2.0 + 0j])
    a = nanobragg.Simulation(SMALL, hkl=(h, k, l, f)).render()
    b = nanobragg.Simulation(SMALL, hkl=(h, k, l, np.abs(f))).render()
    assert a.tobytes() == b.tobytes() and a.sum() > 0


def test_noise_refuses_non_finite_pixels(sim, image):
    # the C's Poisson sampler never returns on a NaN mean: the image is refused, naming the pixel
    for bad in (np.nan, np.inf):
        img = image.copy()
        img[1, 8] = bad
        with pytest.raises(ValueError, match=r"pixel 72 \(fast 8, slow 1\)"):
            sim.noise(img)


def test_writers(sim, image, tmp_path):
    sim.write_float(tmp_path / "f.bin", image)
    assert (tmp_path / "f.bin").read_bytes() == image.astype("<f4").tobytes()
    scale = sim.write_smv(tmp_path / "i.img", image)
    assert scale == pytest.approx(55000 / image.max())
    raw = (tmp_path / "i.img").read_bytes()
    assert raw.startswith(b"{\nHEADER_BYTES=")
    sim.write_smv(tmp_path / "n.img", sim.noise(image))
    assert sim.write_pgm(tmp_path / "i.pgm", image) > 0
    assert (tmp_path / "i.pgm").read_bytes().startswith(b"P5")
    sim.write_png(tmp_path / "i.png", image)
    png = (tmp_path / "i.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and b"nanobragg:floor" in png and b"nanobragg:ceiling" in png
    sim.write_png(tmp_path / "legend.png", image, legend=True)
    # IHDR height: the image's rows plus the scale strip
    height = int.from_bytes((tmp_path / "legend.png").read_bytes()[20:24], "big")
    assert height > image.shape[0]


def test_geometry(sim):
    g = sim.geometry()
    assert g["shape"] == (64, 64)
    assert np.allclose(sim.fdet_vector, [0, 0, 1]) and np.allclose(sim.sdet_vector, [0, -1, 0])
    assert np.allclose(sim.odet_vector, [1, 0, 0])
    assert np.allclose(sim.pix0_vector, [0.1, 0.0033, -0.0033])  # MOSFLM: beam centre + half a pixel
    assert sim.beam_center_mm == pytest.approx((3.25, 3.25))
    # the direct beam hits the detector at the beam centre: lowest scattering angle there
    d = sim.resolution()
    assert d.shape == (64, 64) and np.isfinite(d).all()
    s, f = np.unravel_index(np.argmax(d), d.shape)
    assert abs(s - 32) <= 1 and abs(f - 32) <= 1
    q = sim.scattering_vectors()
    assert q.shape == (64, 64, 3)


def test_stats(sim, image):
    st = sim.stats(image)
    assert st["max_I"] == pytest.approx(float(image.max()), rel=1e-6)
    assert st["sum"] == pytest.approx(float(image.sum(dtype=np.float64)), rel=1e-9)


def test_progress_callback(sim):
    calls = []
    sim.render(progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (64, 64)

    def boom(done, total):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        sim.render(progress=boom)


def test_gil_released_while_rendering():
    heavy = nanobragg.from_args(nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "256", "-oversample", "12"])
    ticks = 0
    done = threading.Event()

    def work():
        heavy.render(threads=1)
        done.set()

    t = threading.Thread(target=work)
    t0 = time.perf_counter()
    t.start()
    while not done.is_set():
        ticks += 1
    t.join()
    elapsed = time.perf_counter() - t0
    # with the GIL held for the whole render this loop could not run at all
    assert elapsed > 0.05 and ticks > 1000


def test_pickle_and_json(sim, image, tmp_path):
    again = pickle.loads(pickle.dumps(sim))
    assert again.render().tobytes() == image.tobytes()
    sim.save_json(tmp_path / "p.json")
    assert nanobragg.from_json(tmp_path / "p.json").render().tobytes() == image.tobytes()
    arr = nanobragg.Simulation(["-cell", "50", "50", "50", "90", "90", "90", "-detpixels", "16", "-N", "3"],
                               hkl=([1, 2], [0, 0], [0, 1], [10.0, 20.0]))
    assert pickle.loads(pickle.dumps(arr)).render().tobytes() == arr.render().tobytes()
    with pytest.raises(ValueError):
        arr.save_json(tmp_path / "q.json")


# ---------------------------------------------------------------------------------------------- errors
BASE = ["-cell", "50", "50", "50", "90", "90", "90", "-detpixels", "16", "-N", "3"]


@pytest.mark.parametrize("args, exc, msg", [
    (["-cell", "abc"], ValueError, "-cell"),
    (["-nosuchflag"], ValueError, "-nosuchflag"),
    (["-detpixels", "16"], ValueError, "structure factors"),
    (BASE + ["-hkl", "/nonexistent/P1.hkl"], OSError, "/nonexistent/P1.hkl"),
    ("-cell 100", ValueError, "list"),
    ([1, 2, 3], ValueError, "string"),
    (BASE + ["-default_F", "10", "--backend", "gpu"], ValueError, "--backend gpu"),
])
def test_bad_flags(args, exc, msg):
    with pytest.raises(exc, match=msg):
        nanobragg.from_args(args)


def test_bad_hkl_file_names_the_line(tmp_path):
    (tmp_path / "bad.hkl").write_text("1 2 3 4\n1 2 x 4\n")
    with pytest.raises(ValueError, match="bad.hkl line 2"):
        nanobragg.Simulation(BASE, hkl=tmp_path / "bad.hkl")


@pytest.mark.parametrize("hkl, msg", [
    (([], [], [], []), "no reflections"),
    (([1], [2], [3]), "four"),
    (([1, 2], [2], [3], [4]), "same length"),
    (([1.5], [2], [3], [4]), "integers"),
    (([1], [2], [3], [np.nan]), "not finite"),
    (([1], [2], [3], [np.inf]), "not finite"),
    ((["a"], [2], [3], [4]), "numeric"),
    (np.zeros((3, 5)), r"\(n, 4\)"),
    ((np.zeros((2, 2)), [1], [1], [1]), "one-dimensional"),
    (42, "hkl"),
    (([1 + 1j], [2], [3], [4]), "complex"),
])
def test_bad_hkl_arrays(hkl, msg):
    with pytest.raises(ValueError, match=msg):
        nanobragg.Simulation(BASE, hkl=hkl)


@pytest.mark.parametrize("a, msg", [
    (np.zeros((2, 3)), "shape"),
    (np.full((3, 3), np.nan), "NaN"),
    ([["a"] * 3] * 3, "numeric"),
    (np.zeros((3, 3)), ""),  # singular: the library's own message
])
def test_bad_amatrix(a, msg):
    with pytest.raises(ValueError, match=msg):
        nanobragg.Simulation(["-default_F", "1", "-detpixels", "16", "-N", "3"], amatrix=a)


@pytest.mark.parametrize("bad", [
    np.zeros((3, 3), np.float32),
    np.zeros((64, 64, 1), np.float32),
    np.full((64, 64), np.nan, np.float32),
    np.array([]),
    np.zeros((64, 64), dtype=object),
    np.zeros((64, 64), dtype=complex),
    "not an image",
])
def test_bad_images(sim, bad, tmp_path):
    for call in (lambda: sim.noise(bad), lambda: sim.write_float(tmp_path / "x.bin", bad),
                 lambda: sim.write_smv(tmp_path / "x.img", bad), lambda: sim.stats(bad)):
        with pytest.raises(ValueError):
            call()
    assert not (tmp_path / "x.bin").exists()


def test_images_of_other_dtypes_and_layouts(sim, image):
    assert (sim.noise(image.astype(np.float64)) == sim.noise(image)).all()
    assert (sim.noise(np.asfortranarray(image)) == sim.noise(image)).all()


@pytest.mark.parametrize("kw", [dict(threads=0), dict(threads=-1), dict(threads=1.5), dict(progress=3)])
def test_bad_render_arguments(sim, kw):
    with pytest.raises(ValueError):
        sim.render(**kw)


def test_bad_keywords():
    with pytest.raises(ValueError, match="-distance"):
        nanobragg.Simulation(BASE, distance=float("nan"))
    with pytest.raises(ValueError, match="-distance"):
        nanobragg.Simulation(BASE, distance={"a": 1})
    with pytest.raises(ValueError, match="-nosuch"):
        nanobragg.Simulation(BASE, nosuch=1)


def test_unwritable_output_is_oserror(sim, image, tmp_path):
    with pytest.raises(OSError, match="cannot write"):
        sim.write_float(tmp_path / "missing" / "dir" / "f.bin", image)


CTRL_C_SCRIPT = r"""
import os, signal, sys, threading, time
import nanobragg
# the scalar reference kernel on one thread: a render of several seconds, rows of a few ms
sim = nanobragg.from_args(["-cell", "60", "60", "60", "90", "90", "90", "-N", "5", "-default_F", "100",
                           "-lambda", "1", "-distance", "100", "-detpixels", "384", "-oversample", "4",
                           "-mosaic", "0.5", "-mosaic_dom", "30", "-seed", "1"])
fired = []
def fire():
    time.sleep(float(sys.argv[1]))
    fired.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)
for progress in (None, lambda done, total: None):
    fired.clear()
    threading.Thread(target=fire).start()
    try:
        sim.render(threads=1, progress=progress)
        print("FINISHED")
    except KeyboardInterrupt:
        print("INTERRUPTED %.3f" % (time.monotonic() - fired[0]))
# still usable: a small render of the same Simulation's detector rows runs to the end
image = sim.render(threads=2)
print("AFTER", image.shape, float(image.sum()) > 0)
"""


def test_ctrl_c_stops_render_within_half_a_second(tmp_path):
    """SIGINT during render(): KeyboardInterrupt within 0.5 s (never PanicException), with and without a
    progress callback, and the Simulation renders again afterwards."""
    import os
    import subprocess
    import sys

    script = tmp_path / "ctrl_c.py"
    script.write_text(CTRL_C_SCRIPT)
    env = dict(os.environ, NANOBRAGG_SIMD="scalar")
    r = subprocess.run([sys.executable, str(script), "0.5"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    interrupted = [float(l.split()[1]) for l in lines if l.startswith("INTERRUPTED")]
    assert len(interrupted) == 2, r.stdout + r.stderr
    assert all(t < 0.5 for t in interrupted), interrupted
    assert "PanicException" not in r.stderr
    assert "AFTER (384, 384) True" in r.stdout, r.stdout


def test_singular_amatrix_names_the_argument():
    """A singular amatrix= was refused naming the deleted scratch file A.mat."""
    with pytest.raises(ValueError, match="^amatrix: ") as e:
        nanobragg.Simulation(["-lambda", "1", "-detpixels", "32", "-default_F", "1"], amatrix=np.zeros((3, 3)))
    assert "A.mat" not in str(e.value) and "singular" in str(e.value)


@pytest.mark.parametrize("kw, msg", [
    (dict(N=-5), "^N: "), (dict(N=0), "^N: "), (dict(Na=0.5), "^Na: "), (dict(Nc=float("-inf")), "-Nc"),
    (dict(cell=(1, 2)), "^cell: "), (dict(cell=(60, 70, 80, 90, 90)), "^cell: "),
    (dict(cell=(60, -70, 80, 90, 90, 90)), "^cell: "), (dict(cell=(60, 70, 80, 90, 180, 90)), "^cell: "),
    (dict(cell=(60, 70, 80, 0, 90, 90)), "^cell: "), (dict(cell=100), "^cell: "),
])
def test_keywords_refuse_what_no_crystal_has(kw, msg):
    """N=-5 rendered as N = 1 and cell=(1, 2) built a 1 x 2 x 1 A cell, in silence; the flags keep the C's
    leniency (values <= 1 act as 1, 1 to 6 cell numbers)."""
    with pytest.raises(ValueError, match=msg):
        nanobragg.Simulation(BASE + ["-default_F", "1"], **kw)
    nanobragg.Simulation(BASE + ["-default_F", "1", "-N", "-5"])
    nanobragg.Simulation(["-cell", "60", "70", "-default_F", "1", "-detpixels", "16"])
    nanobragg.Simulation(BASE + ["-default_F", "1"], N=1, Na=2.5, cell=(60, 70, 80, 90, 100, 90))
