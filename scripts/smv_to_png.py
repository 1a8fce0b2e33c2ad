#!/usr/bin/env python3
"""Write an 8-bit greyscale PNG of an SMV image (unsigned_short, little-endian) with a square-root
scale between the 1st and 99.9th percentile. Standard library only.

usage: smv_to_png.py image.img out.png [max_side]
"""
import re
import struct
import sys
import zlib


def main():
    src, dst = sys.argv[1], sys.argv[2]
    max_side = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    data = open(src, "rb").read()
    head = data[:512].decode("latin-1")
    hb = int(re.search(r"HEADER_BYTES=\s*(\d+)", head).group(1))
    w = int(re.search(r"SIZE1=\s*(\d+)", head).group(1))
    h = int(re.search(r"SIZE2=\s*(\d+)", head).group(1))
    px = struct.unpack("<%dH" % (w * h), data[hb:hb + 2 * w * h])
    step = 1
    if max_side and max(w, h) > max_side:
        step = -(-max(w, h) // max_side)
    s = sorted(px[:: max(1, len(px) // 100000)])
    lo, hi = s[len(s) // 100], s[min(len(s) - 1, len(s) * 999 // 1000)]
    span = max(hi - lo, 1) ** 0.5
    rows = []
    for y in range(0, h, step):
        row = bytearray([0])
        for x in range(0, w, step):
            v = px[y * w + x] - lo
            row.append(255 - min(255, int(255 * (max(v, 0) ** 0.5) / span)))
        rows.append(bytes(row))
    ow, oh = len(range(0, w, step)), len(range(0, h, step))

    def chunk(t, b):
        return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", ow, oh, 8, 0, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b"")
    open(dst, "wb").write(png)


if __name__ == "__main__":
    main()
