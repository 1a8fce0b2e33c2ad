#!/usr/bin/env python3
"""Open nanobragg-rs SMV images with fabio (an independent reader used by crystallographers) and check
shape, dtype and header values against what the simulation was asked for.

usage: check_fabio.py NANOBRAGG_RS_BINARY WORKDIR
"""
import os
import subprocess
import sys

import fabio
import numpy as np


def main() -> int:
    exe, work = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.makedirs(work, exist_ok=True)
    args = [exe, "simulate", "-cell", "70", "80", "90", "85", "95", "105", "-misset", "10", "20", "30",
            "-default_F", "100", "-N", "5", "-lambda", "1.2", "-distance", "120", "-pixel", "0.1",
            "-detpixels_f", "160", "-detpixels_s", "120", "-Xbeam", "7", "-Ybeam", "6.5",
            "-phi", "10", "-osc", "0.5", "-seed", "7", "-noprogress",
            "-floatfile", "float.bin", "-intfile", "intimage.img", "-noisefile", "noiseimage.img", "-nopgm"]
    subprocess.run(args, cwd=work, check=True, stdout=subprocess.DEVNULL)
    floats = np.fromfile(os.path.join(work, "float.bin"), dtype="<f4").reshape(120, 160)
    problems = []
    for name in ["intimage.img", "noiseimage.img"]:
        img = fabio.open(os.path.join(work, name))
        h = img.header
        checks = {
            "shape": (img.data.shape, (120, 160)),
            "dtype": (str(img.data.dtype), "uint16"),
            "SIZE1": (int(h["SIZE1"]), 160),
            "SIZE2": (int(h["SIZE2"]), 120),
            "PIXEL_SIZE": (float(h["PIXEL_SIZE"]), 0.1),
            "DISTANCE": (float(h["DISTANCE"]), 120.0),
            "WAVELENGTH": (float(h["WAVELENGTH"]), 1.2),
            "BEAM_CENTER_X": (float(h["BEAM_CENTER_X"]), 7.0),
            "BEAM_CENTER_Y": (float(h["BEAM_CENTER_Y"]), 6.5),
            "PHI": (float(h["PHI"]), 10.0),
            "OSC_RANGE": (float(h["OSC_RANGE"]), 0.5),
            "BYTE_ORDER": (h["BYTE_ORDER"], "little_endian"),
        }
        for key, (got, want) in checks.items():
            if got != want:
                problems.append(f"{name}: {key} = {got!r}, expected {want!r}")
        if name == "intimage.img":
            scale = 55000.0 / float(floats.max())
            expect = np.clip(np.floor((floats.astype(np.float64) * scale + 40.0 + 0.5).astype(np.float32)), 0, 65535)
            if not np.array_equal(img.data.astype(np.float64), expect):
                problems.append(f"{name}: pixel values differ from the float image scaled by {scale}")
        print(f"fabio read {name}: {img.data.shape} {img.data.dtype}, max {img.data.max()}")
    for p in problems:
        print("FAIL:", p)
    print(f"{0 if problems else 1} passed, {1 if problems else 0} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
