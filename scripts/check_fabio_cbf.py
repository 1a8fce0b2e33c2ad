#!/usr/bin/env python3
"""Open nanobragg-rs CBF files with fabio (an independent CBF reader) and check that the pixels are our
photon counts: without -adc, the noise SMV image's draws less its ADC offset 40 where it is not capped at
65535, above the cap where it is; with -adc 40, the noise image itself; the rounded noiseless photons (+ an
explicit -adc) with -nonoise; header values as simulated.

usage: check_fabio_cbf.py NANOBRAGG_RS_BINARY WORKDIR
"""
import os
import subprocess
import sys

import fabio
import numpy as np

exe, work = os.path.abspath(sys.argv[1]), sys.argv[2]
os.makedirs(work, exist_ok=True)
F, S = 160, 120
base = [exe, "simulate", "-mosflm", "-cell", "70", "80", "90", "85", "95", "105", "-misset", "10", "20", "30",
        "-default_F", "3000", "-N", "8", "-lambda", "1.2", "-distance", "120", "-pixel", "0.1",
        "-detpixels_f", str(F), "-detpixels_s", str(S), "-Xbeam", "7", "-Ybeam", "6.5",
        "-phi", "10", "-osc", "0.5", "-seed", "7", "--quiet", "-nopgm", "-floatfile", "float.bin"]
problems = []

subprocess.run(base + ["-noisefile", "noise.img", "-cbffile", "img_0001.cbf"], cwd=work, check=True)
img = fabio.open(os.path.join(work, "img_0001.cbf"))
noise = np.fromfile(os.path.join(work, "noise.img"), dtype="<u2", offset=512).reshape(S, F).astype(np.int64)
floats = np.fromfile(os.path.join(work, "float.bin"), dtype="<f4").reshape(S, F)
d = img.data.astype(np.int64)
capped = noise == 65535
if img.data.shape != (S, F):
    problems.append(f"shape {img.data.shape}")
# without -adc the CBF holds plain photon counts: the noise image's draws less its ADC offset of 40
if not np.array_equal(d[~capped], noise[~capped] - 40):
    problems.append("CBF pixels differ from the noise image less its ADC offset 40")
if not capped.any():
    problems.append("test setup: no pixel above 65535 (raise -default_F)")
elif not (d[capped] >= 65535 - 40).all() or abs(d[capped].sum() / floats[capped].sum() - 1) > 0.01:
    problems.append("CBF pixels above 65535 are not the uncapped counts")
h = img.header
text = open(os.path.join(work, "img_0001.cbf"), "rb").read(4096).decode("ascii", "replace")
for key, want in [("Wavelength 1.2", True), ("Detector_distance 0.12", True), ("Start_angle 10.0", True),
                  ("Angle_increment 0.5", True), ("Pixel_size 1.000000e-4 m", True), ("Poisson photon counts", True)]:
    if (key in text) != want:
        problems.append(f"header lacks {key!r}")

subprocess.run(base + ["-adc", "40", "-noisefile", "noise40.img", "-cbffile", "img_0003.cbf"], cwd=work, check=True)
d40 = fabio.open(os.path.join(work, "img_0003.cbf")).data.astype(np.int64)
if not np.array_equal(d40[~capped], noise[~capped]):
    problems.append("with -adc 40 the CBF pixels differ from the noise image")
if "+ 40 ADC offset" not in open(os.path.join(work, "img_0003.cbf"), "rb").read(4096).decode("ascii", "replace"):
    problems.append("with -adc 40 the CBF header does not name the offset")

subprocess.run(base + ["-nonoise", "-cbffile", "img_0002.cbf"], cwd=work, check=True)
img = fabio.open(os.path.join(work, "img_0002.cbf"))
if not np.array_equal(img.data.astype(np.int64), np.floor(floats.astype(np.float64) + 0.5).astype(np.int64)):
    problems.append("-nonoise CBF is not the rounded float image")
if "noiseless expected photons" not in open(os.path.join(work, "img_0002.cbf"), "rb").read(4096).decode("ascii", "replace"):
    problems.append("-nonoise CBF header does not say what it holds")

for p in problems:
    print("FAIL: fabio CBF:", p)
print("fabio CBF check:", "FAILED" if problems else f"ok ({int(capped.sum())} pixels above the SMV cap)")
sys.exit(1 if problems else 0)
