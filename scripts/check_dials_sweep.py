#!/usr/bin/python3
"""End to end with DIALS: a short off-centre sweep, written as numbered CBF files (one `simulate` per
frame) and as one multi-frame NeXus/NXmx file (`series -nexusfile`), goes through dials.import,
dials.find_spots and dials.index; the import must be one sweep of all frames, the indexed cell must
match the simulated one within 0.1 % and the imported beam centre the simulated one within 0.1 pixel.

Usage: check_dials_sweep.py NANOBRAGG_RS WORKDIR [FORMAT ...]   (formats: cbf nexus; default both)
"""
import json
import os
import re
import sys
import time

from dials_run import run

RS, WORK = sys.argv[1], sys.argv[2]
FORMATS = sys.argv[3:] or ["cbf", "nexus"]
CELL = (61.0, 73.0, 87.0, 90.0, 90.0, 90.0)
NFRAMES, OSC, PX, NPIX = 10, 0.5, 0.172, 512
XBEAM, YBEAM = 38.3, 47.9  # MOSFLM convention, mm: well off the 44 mm centre
FLAGS = (
    f"-mosflm -cell {' '.join(map(str, CELL))} -misset 10 20 30 -default_F 1000 -N 15 -round_xtal "
    f"-lambda 1.0 -distance 150 -detpixels {NPIX} -pixel {PX} -Xbeam {XBEAM} -Ybeam {YBEAM} "
    f"-mosaic 0.1 -mosaic_dom 4 -phisteps 4 -oversample 2 -fluence 1e24 -adc 0 -nopgm --quiet"
).split()
failures = []


for fmt in FORMATS:
    d = os.path.join(WORK, fmt)
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    if fmt == "cbf":
        # one `simulate` per frame: numbered CBF files, which dxtbx joins into one sweep
        files = []
        for i in range(NFRAMES):
            name = f"sweep_{i + 1:04d}.cbf"
            run([RS, "simulate"] + FLAGS + ["-phi", str(i * OSC), "-osc", str(OSC), "-seed", str(i + 1), "-cbffile", name,
                 "-floatfile", f"f_{i}.bin", "-intfile", f"i_{i}.img", "-noisefile", f"n_{i}.img"], d)
            files.append(name)
    else:
        # one `series` command: every frame in one multi-frame NXmx file (frame k: -phi (k-1)*OSC,
        # -seed k, the same frames as the CBF loop above)
        run([RS, "series"] + FLAGS + ["--frames", str(NFRAMES), "-phi", "0", "-osc", str(OSC), "-seed", "1",
             "-nexusfile", "sweep.nxs", "-floatfile", "f_#####.bin", "-intfile", "i_#####.img", "-noisefile", "n_#####.img"], d)
        files = ["sweep.nxs"]
    t_sim = time.time() - t0
    run(["dials.import"] + files + ["output.experiments=imported.expt"], d)
    run(["dials.find_spots", "imported.expt", "nproc=2"], d)
    # the geometry is known exactly (a simulation): refine the crystal only, so the cell is tested
    run(["dials.index", "imported.expt", "strong.refl", "detector.fix=all", "beam.fix=all"], d)
    expt = json.load(open(os.path.join(d, "indexed.expt")))
    # the beam centre of the imported (unrefined) model, in pixels from the first pixel's corner
    import dxtbx.model.experiment_list as el

    imported = el.ExperimentListFactory.from_json_file(os.path.join(d, "imported.expt"), check_format=False)
    if len(imported.imagesets()) != 1 or len(imported[0].imageset) != NFRAMES:
        failures.append(f"{fmt}: dials.import made {len(imported.imagesets())} image sets, not one sweep of {NFRAMES}")
    p = imported[0].detector[0]
    bc = p.get_beam_centre_px(imported[0].beam.get_s0())
    want = ((YBEAM + PX / 2) / PX, (XBEAM + PX / 2) / PX)  # MOSFLM: X is along slow, first pixel centre at 0.5 px
    if abs(bc[0] - want[0]) > 0.1 or abs(bc[1] - want[1]) > 0.1:
        failures.append(f"{fmt}: imported beam centre {bc} px, simulated {want}")
    indexed = el.ExperimentListFactory.from_json_file(os.path.join(d, "indexed.expt"), check_format=False)
    uc = indexed[0].crystal.get_unit_cell().parameters()
    lengths = sorted(uc[:3])
    ok = all(abs(g - w) / w < 1e-3 for g, w in zip(lengths, CELL[:3])) and all(abs(a - 90) < 0.1 for a in uc[3:])
    log = open(os.path.join(d, "dials.index.log")).read()
    # the last table row "| imageset | # indexed | # unindexed | N% |" of the log
    rows = re.findall(r"^\|\s*\d+\s*\|\s*\d+\s*\|\s*\d+\s*\|\s*([\d.]+%)", log, re.M)
    frac = (rows[-1] if rows else "?") + " of the spots indexed"
    print(f"{fmt}: cell {tuple(round(x, 3) for x in uc)} (simulated {CELL}); beam centre {bc}; {frac}; "
          f"simulated in {t_sim:.1f} s, DIALS in {time.time() - t0 - t_sim:.1f} s")
    if not ok:
        failures.append(f"{fmt}: indexed cell {uc} is not {CELL} within 0.1 %")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
