#!/usr/bin/env python3
"""Write a small synthetic example crystal for nanobragg-rs: a P1 HKL list and a MOSFLM A-matrix.

usage: make_example_inputs.py [OUTDIR]   (default: example/)

P1.hkl: every h, k, l in -20..20 with a deterministic pseudo-random |F| (no symmetry, as nanoBragg
expects). A.mat: the reciprocal cell of a 60 70 80 90 105 90 cell rotated by U = Rz(35)Ry(25)Rx(15),
scaled by the wavelength (1 Angstrom) as MOSFLM writes it: three lines of a*, b*, c* x/y/z components.
"""
import math
import os
import sys


def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)] for i in range(3)]


def rot(axis, deg):
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    if axis == "x":
        return [[1, 0, 0], [0, c, -s], [0, s, c]]
    if axis == "y":
        return [[c, 0, s], [0, 1, 0], [-s, 0, c]]
    return [[c, -s, 0], [s, c, 0], [0, 0, 1]]


def reciprocal(a, b, c, al, be, ga):
    al, be, ga = map(math.radians, (al, be, ga))
    # real-space vectors with a along x, b in the x-y plane
    av = [a, 0.0, 0.0]
    bv = [b * math.cos(ga), b * math.sin(ga), 0.0]
    cx = c * math.cos(be)
    cy = c * (math.cos(al) - math.cos(be) * math.cos(ga)) / math.sin(ga)
    cv = [cx, cy, math.sqrt(c * c - cx * cx - cy * cy)]

    def cross(u, v):
        return [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]]

    vol = sum(x * y for x, y in zip(av, cross(bv, cv)))
    return [[x / vol for x in cross(bv, cv)], [x / vol for x in cross(cv, av)], [x / vol for x in cross(av, bv)]]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "example"
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "P1.hkl"), "w") as f:
        for h in range(-20, 21):
            for k in range(-20, 21):
                for l in range(-20, 21):
                    amp = 5 + ((((h + 16) * 7919) ^ ((k + 16) * 104729) ^ ((l + 16) * 1299709)) % 10007) / 50
                    f.write(f"{h:4d} {k:4d} {l:4d} {amp:10.2f}\n")
    u = matmul(rot("z", 35), matmul(rot("y", 25), rot("x", 15)))
    astar, bstar, cstar = reciprocal(60, 70, 80, 90, 105, 90)
    wavelength = 1.0
    cols = [[sum(u[i][k] * v[k] for k in range(3)) * wavelength for i in range(3)] for v in (astar, bstar, cstar)]
    with open(os.path.join(out, "A.mat"), "w") as f:
        for i in range(3):
            f.write(" ".join(f"{cols[j][i]:12.8f}" for j in range(3)) + "\n")
    print(f"wrote {out}/P1.hkl and {out}/A.mat")


if __name__ == "__main__":
    main()
