#!/usr/bin/python3
"""End to end with DIALS on a multi-panel detector: a 20-image sweep of a 2x2-module detector (four
256x256 modules of 0.172 mm pixels with 2 mm gaps, the beam in the middle gap) is described as a
DIALS experiment list built with dxtbx's own models, simulated with `series --expt` into one
multi-module NXmx file, and processed by dials.import, dials.find_spots and dials.index. The import
must give one sweep of 20 images with 4 panels; the indexed cell must match the simulated one within
0.1 % and each real-space axis's direction the experiment list's within 0.05 degrees.

Usage: check_dials_multipanel.py NANOBRAGG_RS WORKDIR
"""
import math
import os
import sys
import time

from dials_run import run

from dxtbx.model import Beam, Crystal, Detector, Experiment, ExperimentList, GoniometerFactory, ScanFactory
from scitbx import matrix

RS, WORK = sys.argv[1], sys.argv[2]
CELL = (61.0, 73.0, 87.0)
NFRAMES, OSC, PX, NPIX, GAP, DIST = 20, 0.5, 0.172, 256, 2.0, 120.0
FLAGS = ("-default_F 1000 -N 15 -round_xtal -phisteps 8 -oversample 1 "
         "-fluence 1e24 -adc 0 -seed 1 --quiet").split()


def truth():
    """The experiment list to simulate: beam along -z, the 2x2 modules facing it at DIST mm, the
    spindle along x, a rotated orthorhombic crystal."""
    beam = Beam((0.0, 0.0, 1.0), 1.0)
    det = Detector()
    side = NPIX * PX
    for i in range(2):
        for j in range(2):
            p = det.add_panel()
            # module (row i, column j): fast along +x, slow along -y; the beam (0, 0) sits in the gap
            origin = (-side - GAP / 2 + j * (side + GAP), side + GAP / 2 - i * (side + GAP), -DIST)
            p.set_frame((1.0, 0.0, 0.0), (0.0, -1.0, 0.0), origin)
            p.set_pixel_size((PX, PX))
            p.set_image_size((NPIX, NPIX))
            p.set_trusted_range((-1.0, 1e6))
            p.set_name(f"module{2 * i + j}")
    rot = (matrix.col((1, 0, 0)).axis_and_angle_as_r3_rotation_matrix(10, deg=True)
           * matrix.col((0, 1, 0)).axis_and_angle_as_r3_rotation_matrix(20, deg=True)
           * matrix.col((0, 0, 1)).axis_and_angle_as_r3_rotation_matrix(30, deg=True))
    a, b, c = (rot * matrix.col(v) for v in ((CELL[0], 0, 0), (0, CELL[1], 0), (0, 0, CELL[2])))
    crystal = Crystal(a, b, c, space_group_symbol="P 1")
    gonio = GoniometerFactory.known_axis((1.0, 0.0, 0.0))
    scan = ScanFactory.make_scan(image_range=(1, NFRAMES), exposure_times=[1.0] * NFRAMES,
                                 oscillation=(0.0, OSC), epochs={k: float(k) for k in range(1, NFRAMES + 1)}, deg=True)
    return Experiment(beam=beam, detector=det, crystal=crystal, goniometer=gonio, scan=scan)


def axis_errors(indexed, true):
    """Angle (deg) between each indexed real-space axis and the true axis of the same length (either sign)."""
    want = [matrix.col(v) for v in true.get_real_space_vectors()]
    errs = []
    for v in map(matrix.col, indexed.get_real_space_vectors()):
        w = min(want, key=lambda u: abs(u.length() - v.length()))
        cosang = min(1.0, abs(v.dot(w)) / (v.length() * w.length()))
        errs.append(math.degrees(math.acos(cosang)))
    return errs


def main():
    os.makedirs(WORK, exist_ok=True)
    exp = truth()
    ExperimentList([exp]).as_file(os.path.join(WORK, "truth.expt"))
    t0 = time.time()
    run([RS, "series", "--expt", "truth.expt"] + FLAGS + ["--outputs", "nexus", "-nexusfile", "sweep.nxs"], WORK)
    t_sim = time.time() - t0
    run(["dials.import", "sweep.nxs", "output.experiments=imported.expt"], WORK)
    run(["dials.find_spots", "imported.expt", "nproc=2"], WORK)
    run(["dials.index", "imported.expt", "strong.refl", "detector.fix=all", "beam.fix=all"], WORK)
    import dxtbx.model.experiment_list as el

    failures = []
    imported = el.ExperimentListFactory.from_json_file(os.path.join(WORK, "imported.expt"), check_format=False)
    if len(imported.imagesets()) != 1 or len(imported[0].imageset) != NFRAMES or len(imported[0].detector) != 4:
        failures.append(f"dials.import made {len(imported.imagesets())} image sets of {len(imported[0].imageset)} "
                        f"images and {len(imported[0].detector)} panels, not one sweep of {NFRAMES} with 4")
    indexed = el.ExperimentListFactory.from_json_file(os.path.join(WORK, "indexed.expt"), check_format=False)
    uc = indexed[0].crystal.get_unit_cell().parameters()
    cell_ok = all(abs(g - w) / w < 1e-3 for g, w in zip(sorted(uc[:3]), CELL)) and all(abs(x - 90) < 0.1 for x in uc[3:])
    errs = axis_errors(indexed[0].crystal, exp.crystal)
    print(f"multi-panel: cell {tuple(round(x, 3) for x in uc)} (simulated {CELL}); axis directions off by "
          f"{', '.join(f'{e:.4f}' for e in errs)} deg; simulated in {t_sim:.1f} s, DIALS in {time.time() - t0 - t_sim:.1f} s")
    if not cell_ok:
        failures.append(f"indexed cell {uc} is not {CELL} within 0.1 %")
    if max(errs) > 0.05:
        failures.append(f"indexed orientation is {max(errs):.4f} deg off the experiment list's (limit 0.05)")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


sys.exit(main())
