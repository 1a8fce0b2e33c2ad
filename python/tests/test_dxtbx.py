"""dxtbx (DIALS) models of the simulated geometry agree with our beam centre and DIALS origin.

dxtbx's libtbx environment refuses to load inside a virtual environment, so the check runs in the system
Python that DIALS is installed for (Debian python3-dials: /usr/bin/python3), with this nanobragg appended
to its path. Skipped loudly where that Python has no dxtbx."""
import json
import os
import pathlib
import subprocess

import pytest

import nanobragg

SYSTEM_PY = os.environ.get("NANOBRAGG_DXTBX_PYTHON", "/usr/bin/python3")


def system_site(module, what):
    """The folder holding this nanobragg, for the system Python that can import ``module`` (skipped
    loudly where it cannot)."""
    have = subprocess.run([SYSTEM_PY, "-c", f"import {module}"], capture_output=True)
    if have.returncode != 0:
        print(f"SKIPPED: {what} because {SYSTEM_PY} cannot import {module} (install python3-dials / python3-cctbx)")
        pytest.skip(f"{module} not importable")
    return str(pathlib.Path(nanobragg.__file__).resolve().parents[1])


@pytest.fixture
def dxtbx_site(request):
    return system_site("dxtbx.model", request.node.name)

CHECK = r"""
import json, sys
sys.path.append(sys.argv[1])
import nanobragg
out = []
for flags in json.loads(sys.argv[2]):
    sim = nanobragg.from_args(flags)
    beam, det = sim.dxtbx_models()
    g = sim.geometry()
    panel = det[0]
    out.append(dict(
        centre=list(panel.get_beam_centre(beam.get_s0())),
        ours=[g["fbeam_m"] * 1000, g["sbeam_m"] * 1000],
        origin=list(panel.get_origin()),
        dials_origin=g["dials_origin_mm"],
        wavelength=beam.get_wavelength(),
        distance=panel.get_directed_distance(),
        ours_distance=g["close_distance_m"] * 1000,
        fraction=beam.get_polarization_fraction(),
        normal=list(beam.get_polarization_normal()),
        direction=list(beam.get_sample_to_source_direction()),
        kahn=g["polarization"],
    ))
print(json.dumps(out))
"""

CASES = [
    nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "64"],
    nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "64", "-Xbeam", "2.5", "-Ybeam", "4"],
    nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "64", "-dials", "-Xbeam", "2.5", "-Ybeam", "4"],
    nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "64", "-xds", "-ORGX", "20", "-ORGY", "30",
                                   "-detector_rotx", "5", "-detector_roty", "3"],
    nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "64", "-polar", "0.9"],
]


def test_dxtbx_agrees_with_our_beam_centre(dxtbx_site):
    site = dxtbx_site
    r = subprocess.run([SYSTEM_PY, "-c", CHECK, site, json.dumps(CASES)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    for case, res in zip(CASES, json.loads(r.stdout.strip().splitlines()[-1])):
        assert res["centre"] == pytest.approx(res["ours"], abs=1e-9), case
        assert res["origin"] == pytest.approx(res["dials_origin"], abs=1e-9), case
        assert res["wavelength"] == pytest.approx(6.2)
        assert res["distance"] == pytest.approx(res["ours_distance"], abs=1e-9), case
        # K = 2·fraction − 1 (unpolarized K = 0: fraction 0.5, not dxtbx's default 0.999); the normal
        # is perpendicular to the beam
        assert res["fraction"] == pytest.approx((1 + res["kahn"]) / 2), case
        assert abs(sum(a * b for a, b in zip(res["normal"], res["direction"]))) < 1e-12, case
        assert sum(a * a for a in res["normal"]) == pytest.approx(1.0), case
    assert json.loads(r.stdout.strip().splitlines()[-1])[-1]["fraction"] == pytest.approx(0.95)


EXPERIMENT = r"""
import json, sys
sys.path.append(sys.argv[1])
import nanobragg
sim = nanobragg.from_args(json.loads(sys.argv[2]))
expt = sim.dxtbx_experiment()
c = sim.crystal()
g = sim.geometry()
out = dict(
    real=[list(v) for v in expt.crystal.get_real_space_vectors()],
    ours=[[1e10 * c[k][2], 1e10 * c[k][1], -1e10 * c[k][0]] for k in ("a_m", "b_m", "c_m")],
    axis=list(expt.goniometer.get_rotation_axis()),
    spindle=[g["spindle_vector"][2], g["spindle_vector"][1], -g["spindle_vector"][0]],
    oscillation=list(expt.scan.get_oscillation()),
    cell=list(expt.crystal.get_unit_cell().parameters()),
)
print(json.dumps(out))
"""


def test_dxtbx_experiment_carries_crystal_goniometer_and_scan(dxtbx_site):
    site = dxtbx_site
    flags = ["-cell", "70", "80", "90", "90", "95", "90", "-misset", "10", "20", "30", "-N", "5", "-default_F", "100",
             "-lambda", "1", "-detpixels", "64", "-phi", "12", "-osc", "0.5"]
    r = subprocess.run([SYSTEM_PY, "-c", EXPERIMENT, site, json.dumps(flags)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    for got, want in zip(res["real"], res["ours"]):
        assert got == pytest.approx(want, abs=1e-9)
    assert res["axis"] == pytest.approx(res["spindle"], abs=1e-12)
    assert res["oscillation"] == pytest.approx([12.0, 0.5])
    assert res["cell"] == pytest.approx([70, 80, 90, 90, 95, 90], abs=1e-3)


ROUND_TRIP = r"""
import json, sys
import numpy as np
sys.path.append(sys.argv[1])
import nanobragg
flags = json.loads(sys.argv[2])
sim = nanobragg.from_args(flags)
expt = sim.dxtbx_experiment()
again = nanobragg.Simulation.from_dxtbx(expt.beam, expt.detector, expt.crystal, expt.goniometer, expt.scan,
                                        args=["-N", "5", "-default_F", "100", "-nopolar"])
a, b = sim.render(), again.render()
print(json.dumps(dict(shape=list(b.shape), peak=float(a.max()), diff=float(np.abs(a - b).max()))))
"""


def test_from_dxtbx_renders_the_same_image(dxtbx_site):
    site = dxtbx_site
    flags = ["-cell", "70", "80", "90", "90", "90", "90", "-misset", "10", "20", "30", "-N", "5", "-default_F", "100",
             "-lambda", "1", "-distance", "80", "-detpixels", "64", "-pixel", "0.4", "-nopolar"]
    r = subprocess.run([SYSTEM_PY, "-c", ROUND_TRIP, site, json.dumps(flags)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["shape"] == [64, 64] and res["peak"] > 0
    assert res["diff"] <= 1e-5 * res["peak"], res


MILLER = r"""
import json, sys
import numpy as np
sys.path.append(sys.argv[1])
import nanobragg
from cctbx import crystal, miller
from cctbx.array_family import flex
sym = crystal.symmetry(unit_cell=(40, 50, 60, 90, 90, 90), space_group_symbol="P 21 21 21")
ms = miller.build_set(sym, anomalous_flag=False, d_min=4)
rng = np.random.default_rng(1)
f = flex.double(list(rng.uniform(10, 100, ms.size())))
ma = miller.array(ms, data=f)
p1 = ma.expand_to_p1().generate_bijvoet_mates()
idx = np.array(list(p1.indices()))
arrays = (idx[:, 0], idx[:, 1], idx[:, 2], np.array(list(p1.data())))
flags = ["-cell", "40", "50", "60", "90", "90", "90", "-misset", "10", "20", "30", "-N", "5", "-lambda", "1",
         "-distance", "80", "-detpixels", "64", "-pixel", "0.4"]
a = nanobragg.Simulation(flags, hkl=ma).render()
b = nanobragg.Simulation(flags, hkl=arrays).render()
c = nanobragg.Simulation(flags, hkl=miller.array(ms, data=flex.complex_double([complex(v, 0) for v in f]))).render()
print(json.dumps(dict(n=int(p1.size()), same=bool(np.array_equal(a, b)), complex_same=bool(np.array_equal(a, c)), peak=float(a.max()))))
"""


def test_hkl_accepts_a_cctbx_miller_array():
    site = system_site("cctbx.miller", "miller.array check")
    r = subprocess.run([SYSTEM_PY, "-c", MILLER, site], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["n"] > 100 and res["peak"] > 0
    assert res["same"] and res["complex_same"], res


WHOLE_DETECTOR = r"""
import json, sys
sys.path.append(sys.argv[1])
import nanobragg
from dxtbx.model.experiment_list import ExperimentListFactory
sim = nanobragg.Simulation.from_expt(sys.argv[2], flags=["-N", "5", "-default_F", "100"])
beam, det = sim.dxtbx_models()
want = ExperimentListFactory.from_json_file(sys.argv[2], check_format=False)[0]
err = 0.0
for p, q in zip(det, want.detector):
    for a, b in ((p.get_origin(), q.get_origin()), (p.get_fast_axis(), q.get_fast_axis()),
                 (p.get_slow_axis(), q.get_slow_axis())):
        err = max(err, max(abs(x - y) for x, y in zip(a, b)))
    assert p.get_image_size() == q.get_image_size() and p.get_pixel_size() == q.get_pixel_size()
err = max(err, max(abs(x - y) for x, y in zip(beam.get_s0(), want.beam.get_s0())))
print(json.dumps(dict(n=len(det), want=len(want.detector), err=err,
                      fraction=beam.get_polarization_fraction(), want_fraction=want.beam.get_polarization_fraction())))
"""


def test_dxtbx_models_give_every_panel_of_an_experiment_list(dxtbx_site, tmp_path):
    from test_expt import write_expt

    expt = write_expt(tmp_path / "three.expt", [20, 30, 10])
    r = subprocess.run([SYSTEM_PY, "-c", WHOLE_DETECTOR, dxtbx_site, str(expt)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["n"] == res["want"] == 3
    assert res["err"] < 1e-9, res
    assert abs(res["fraction"] - res["want_fraction"]) < 1e-12, res
