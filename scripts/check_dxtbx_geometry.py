#!/usr/bin/python3
"""Geometry round trip through real readers: every convention's CBF and NeXus/NXmx file, read back by
dxtbx (DIALS's image library), h5py and fabio, checked against the geometry the C program nanoBragg
prints for the same flags (an independent program, not our own output).

Usage: check_dxtbx_geometry.py NANOBRAGG_RS C_NANOBRAGG WORKDIR
Run with DIALS's Python (/usr/bin/python3 on Debian with python3-dials). Exits non-zero on failure.
"""
import math
import os
import re
import subprocess
import sys

import dxtbx
import h5py
import numpy as np

RS, CBIN, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)

FP, SP, PX = 96, 64, 0.2  # off-centre, non-square
LAMBDA, PHI, OSC = 1.1, 5.0, 0.5
BASE = (
    f"-cell 50 60 70 90 90 90 -default_F 100 -N 2 -lambda {LAMBDA} -distance 120 "
    f"-detpixels_f {FP} -detpixels_s {SP} -pixel {PX} -phi {PHI} -osc {OSC} -seed 7 -nopgm"
).split()

# (name, extra flags, CBF expected to be writable)
CASES = []
for conv in ["mosflm", "denzo", "xds", "adxv", "dials"]:
    ok_cbf = conv in ("mosflm", "denzo", "xds")
    CASES.append((conv, [f"-{conv}", "-Xbeam", "4.3", "-Ybeam", "7.9"], ok_cbf))
    CASES.append((conv + "-twotheta", [f"-{conv}", "-Xbeam", "4.3", "-Ybeam", "7.9", "-twotheta", "12"], False))
    CASES.append((conv + "-rot", [f"-{conv}", "-Xbeam", "4.3", "-Ybeam", "7.9",
                                  "-detector_rotx", "1.5", "-detector_roty", "-2", "-detector_rotz", "3"], False))
CASES.append(("mosflm-pivot-sample", ["-mosflm", "-Xbeam", "4.3", "-Ybeam", "7.9", "-pivot", "sample", "-twotheta", "8"], False))
CASES.append(("xds-orgxy", ["-xds", "-ORGX", "20.5", "-ORGY", "50.25", "-detector_rotz", "2"], False))
CASES.append(("custom", ["-fdet_vector", "0", "0", "1", "-sdet_vector", "0", "-1", "0", "-odet_vector", "1", "0", "0",
                         "-beam_vector", "1", "0", "0", "-spindle_axis", "0", "0", "1", "-polar_vector", "0", "0", "1",
                         "-Xbeam", "4.3", "-Ybeam", "7.9", "-detector_rotx", "1"], False))
CASES.append(("custom-spindle", ["-fdet_vector", "1", "0", "0", "-sdet_vector", "0", "1", "0", "-odet_vector", "0", "0", "1",
                                 "-beam_vector", "0", "0", "1", "-spindle_axis", "0.6", "0.8", "0", "-polar_vector", "1", "0", "0",
                                 "-Xbeam", "4.3", "-Ybeam", "7.9"], False))

failures = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def vec(line):
    return np.array([float(x) for x in line.split("=")[1].split()])


def c_geometry(flags):
    """What the C prints about its detector: axes, beam, spindle, beam spot and near point."""
    out = subprocess.run([CBIN] + BASE + flags + ["-nonoise", "-floatfile", f"{WORK}/c.bin", "-intfile", f"{WORK}/c.img"],
                         capture_output=True, text=True, cwd=WORK).stdout
    g = {}
    for line in out.splitlines():
        line = line.strip()
        for key, name in [("DIRECTION_OF_DETECTOR_X-AXIS=", "f"), ("DIRECTION_OF_DETECTOR_Y-AXIS=", "s"),
                          ("DIRECTION_OF_DETECTOR_Z-AXIS=", "o"), ("INCIDENT_BEAM_DIRECTION=", "b"),
                          ("spindle ROTATION_AXIS=", "axis")]:
            if line.startswith(key):
                g[name] = vec(line)
        m = re.match(r"Fbeam=(\S+) Sbeam=(\S+)", line)
        if m:
            g["fbeam"], g["sbeam"] = float(m.group(1)), float(m.group(2))
        m = re.match(r"Fclose=(\S+) Sclose=(\S+)", line)
        if m:
            g["fclose"], g["sclose"] = float(m.group(1)), float(m.group(2))
        if line.startswith("dials origin="):
            o = vec(line.replace("dials origin=", "x=")) / 1000.0
            # the C prints 1000·(pix0·z, pix0·y, −pix0·x)
            g["pix0"] = np.array([-o[2], o[1], o[0]])
    for k in ["f", "s", "o", "b", "axis"]:
        g[k] = g[k] / np.linalg.norm(g[k])
    # where the beam meets the detector plane, from the C's pix0 and axes (its printed Fbeam/Sbeam
    # leave two-theta out of the beam-to-normal ratio, so they are not the beam spot with -twotheta)
    pix0 = g["pix0"]
    g["close"] = pix0 @ g["o"]
    spot = (g["close"] / (g["b"] @ g["o"])) * g["b"] - pix0
    g["fbeam"], g["sbeam"] = spot @ g["f"], spot @ g["s"]
    return g


def check_model(tag, img, c):
    det = img.get_detector()
    p = det[0]
    beam = img.get_beam()
    b = np.array(beam.get_s0())
    b /= np.linalg.norm(b)
    f, s = np.array(p.get_fast_axis()), np.array(p.get_slow_axis())
    axis = np.array(img.get_goniometer().get_rotation_axis())
    if p.get_image_size() != (FP, SP):
        fail(f"{tag}: image size {p.get_image_size()}")
    if abs(p.get_pixel_size()[0] - PX) > 1e-9 or abs(p.get_pixel_size()[1] - PX) > 1e-9:
        fail(f"{tag}: pixel size {p.get_pixel_size()}")
    if abs(beam.get_wavelength() - LAMBDA) > 1e-9:
        fail(f"{tag}: wavelength {beam.get_wavelength()}")
    bc = p.get_beam_centre_px(tuple(beam.get_s0()))
    want = (c["fbeam"] / PX * 1000, c["sbeam"] / PX * 1000)
    if abs(bc[0] - want[0]) > 0.1 or abs(bc[1] - want[1]) > 0.1:
        fail(f"{tag}: beam centre {bc} px, C says {want}")
    if abs(p.get_distance() - c["close"] * 1000) > 2e-3:
        fail(f"{tag}: distance {p.get_distance()} mm, C says {c['close'] * 1000}")
    pairs = {"fast.beam": (f @ b, c["f"] @ c["b"]), "slow.beam": (s @ b, c["s"] @ c["b"]),
             "axis.beam": (axis @ b, c["axis"] @ c["b"]), "axis.fast": (axis @ f, c["axis"] @ c["f"]),
             "axis.slow": (axis @ s, c["axis"] @ c["s"]), "fast x slow . beam": (np.cross(f, s) @ b, np.cross(c["f"], c["s"]) @ c["b"])}
    for k, (got, exp) in pairs.items():
        if abs(got - exp) > 1e-5:
            fail(f"{tag}: {k} = {got:.6f}, C says {exp:.6f}")
    scan = img.get_scan()
    if scan is None or abs(scan.get_oscillation()[0] - PHI) > 1e-6 or abs(scan.get_oscillation()[1] - OSC) > 1e-6:
        fail(f"{tag}: oscillation {scan and scan.get_oscillation()}")


def raw(img):
    try:
        r = img.get_raw_data()
    except TypeError:  # multi-image formats (NXmx) take the frame index
        r = img.get_raw_data(0)
    r = r[0] if isinstance(r, tuple) else r
    return r.as_numpy_array()


nchecked = 0
for name, flags, ok_cbf in CASES:
    c = c_geometry(flags)
    d = f"{WORK}/{name}"
    os.makedirs(d, exist_ok=True)
    args = [RS, "simulate"] + BASE + flags + ["-nexusfile", "img_0001.nxs", "--quiet"]
    if ok_cbf:
        args += ["-cbffile", "img_0001.cbf"]
    r = subprocess.run(args, cwd=d, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{name}: nanobragg-rs failed: {r.stderr.strip()}")
        continue
    # CBF and NeXus hold plain photon counts: the noise image's draws less its default ADC offset (40)
    noise = np.fromfile(f"{d}/noiseimage.img", dtype="<u2", offset=512).reshape(SP, FP).astype(np.int64) - 40
    # NeXus through dxtbx and h5py
    img = dxtbx.load(f"{d}/img_0001.nxs")
    check_model(f"{name} NeXus", img, c)
    if not np.array_equal(raw(img), noise):
        fail(f"{name} NeXus: pixels differ from the noise image")
    with h5py.File(f"{d}/img_0001.nxs") as h:
        data = h["/entry/data/data"]
        if data.shape != (1, SP, FP) or data.compression != "gzip":
            fail(f"{name}: h5py sees {data.shape} {data.compression}")
        mo = h["/entry/instrument/detector/module/module_offset"]
        pix0 = mo[()] * np.array(mo.attrs["vector"])
        fa = np.array(h["/entry/instrument/detector/module/fast_pixel_direction"].attrs["vector"])
        sa = np.array(h["/entry/instrument/detector/module/slow_pixel_direction"].attrs["vector"])
        # the chain's pix0 seen from the McStas beam (+z): beam spot offsets along fast/slow
        t = (pix0 @ np.cross(fa, sa)) / (np.array([0, 0, 1.0]) @ np.cross(fa, sa))
        spot = t * np.array([0, 0, 1.0]) - pix0
        if abs(spot @ fa - c["fbeam"] * 1000) > 2e-3 or abs(spot @ sa - c["sbeam"] * 1000) > 2e-3:
            fail(f"{name}: h5py chain beam spot {spot @ fa, spot @ sa} mm, C says {c['fbeam'] * 1000, c['sbeam'] * 1000}")
    nchecked += 1
    if ok_cbf:
        img = dxtbx.load(f"{d}/img_0001.cbf")
        check_model(f"{name} CBF", img, c)
        if not np.array_equal(raw(img), noise):
            fail(f"{name} CBF: pixels differ from the noise image")
        nchecked += 1
        # the opt-in SMV header that dxtbx reads right (the default header stays the C's)
        r = subprocess.run(args + ["-dxtbx_smv", "-noisefile", "smv_0001.img"], cwd=d, capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"{name}: -dxtbx_smv failed: {r.stderr.strip()}")
        else:
            check_model(f"{name} SMV -dxtbx_smv", dxtbx.load(f"{d}/smv_0001.img"), c)
            nchecked += 1
    else:
        # the CBF is refused with a one-line error naming the flag, and no file appears
        r = subprocess.run(args + ["-cbffile", "refused_0001.cbf"], cwd=d, capture_output=True, text=True)
        if name in ("mosflm", "denzo", "xds"):
            pass
        elif r.returncode != 9 or "-cbffile" not in r.stderr or "-nexusfile" not in r.stderr or os.path.exists(f"{d}/refused_0001.cbf"):
            fail(f"{name}: CBF not refused cleanly (rc {r.returncode}): {r.stderr.strip()}")
    print(f"ok {name}")

print(f"{nchecked} files checked with dxtbx in {len(CASES)} geometries; {len(failures)} failures")
sys.exit(1 if failures else 0)
