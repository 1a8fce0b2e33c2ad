#!/usr/bin/env bash
# Time noisify with a Gaussian PSF, the C's noisify against ours, at 2048² and 4096².
# usage: scripts/bench_psf.sh C_NOISIFY [OURS] [OUT.md]
# Input: a synthetic photons/pixel image (water-like ramp + Bragg-like spots). Both programs get the
# same flags; the noise images must be byte-identical (checked), and the wall times are reported.
set -euo pipefail
C=${1:?path to the C noisify binary}
OURS=${2:-target/release/nanobragg-rs}
OUT=${3:-/dev/stdout}
OURS=$(readlink -f "$OURS"); C=$(readlink -f "$C")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
{
echo "| size | PSF | C noisify (s) | nanobragg-rs noisify, all cores (s) | 1 thread (s) | noise images identical |"
echo "|---|---|---|---|---|---|"
for N in 2048 4096; do
  "${PYTHON:-/usr/bin/python3}" - "$T/in_$N.bin" "$N" <<'PY'
import sys, numpy as np
path, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(1)
y, x = np.mgrid[0:n, 0:n]
r = np.hypot(x - n / 2, y - n / 2) / n
img = 20.0 * np.exp(-((r - 0.25) / 0.15) ** 2) + 2.0        # water ring + air
for _ in range(n * n // 4000):                                  # spots
    cx, cy = rng.uniform(0, n, 2)
    x0, y0 = int(cx), int(cy)
    sl = np.s_[max(y0 - 3, 0):y0 + 4, max(x0 - 3, 0):x0 + 4]
    img[sl] += rng.uniform(50, 2000) * np.exp(-((x[sl] - cx) ** 2 + (y[sl] - cy) ** 2) / 1.5)
img.astype('<f4').tofile(path)
PY
  for psf in "gauss -psf_fwhm 100" "fiber -psf_fwhm 100 -psf_radius 10"; do
    A="-floatfile $T/in_$N.bin -pixel 0.1 -distance 100 -readout_noise 2 -psf $psf -seed 1 -nopgm"
    mkdir -p "$T/c" "$T/r" "$T/r1"
    s=$(date +%s.%N); (cd "$T/c" && "$C" $A -intfile i.img -noisefile n.img >/dev/null); e=$(date +%s.%N); tc=$(echo "$e - $s" | bc)
    s=$(date +%s.%N); (cd "$T/r" && "$OURS" noisify $A -intfile i.img -noisefile n.img >/dev/null); e=$(date +%s.%N); tr=$(echo "$e - $s" | bc)
    s=$(date +%s.%N); (cd "$T/r1" && RAYON_NUM_THREADS=1 "$OURS" noisify $A -intfile i.img -noisefile n.img >/dev/null); e=$(date +%s.%N); t1=$(echo "$e - $s" | bc)
    same=no; cmp -s "$T/c/n.img" "$T/r/n.img" && cmp -s "$T/c/n.img" "$T/r1/n.img" && same=yes
    echo "| ${N}² | ${psf%% *} (${psf#* }) | $tc | $tr | $t1 | $same |"
  done
done
echo
echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); $(date -u +%Y-%m-%d)."
} > "$OUT"
