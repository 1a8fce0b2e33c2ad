#!/usr/bin/env bash
# Time noisify with a point-spread function, the C's noisify against ours, at 2048² and 4096².
# usage: scripts/bench_psf.sh C_NOISIFY [OURS] [OUT.md]
#   REPS=3            runs of each program per row (C and ours alternate: C, ours, C, ours, ...)
#   ROWS="..."        which rows, from: N-none N-gauss N-fiber N-fiberauto (N = 2048, 4096, ...)
#                     (default: 2048-none 2048-gauss 2048-fiber 4096-none 4096-gauss 4096-fiber)
#   C_REPS_SLOW=REPS  runs of the C in the 4096-fiber and fiberauto rows
# Input: a synthetic photons/pixel image (water-like ring + air + Bragg-like spots). Both programs get
# the same flags; every noise image must be byte-identical to the C's (checked, reported). The times are
# wall-clock seconds of the whole program (read, photon noise, PSF, read-out noise, write); the
# "none" rows are the same runs without -psf, so the PSF's share is the difference.
set -euo pipefail
C=${1:?path to the C noisify binary}
OURS=${2:-target/release/nanobragg-rs}
OUT=${3:-/dev/stdout}
REPS=${REPS:-3}
ROWS=${ROWS:-"2048-none 2048-gauss 2048-fiber 4096-none 4096-gauss 4096-fiber"}
C_REPS_SLOW=${C_REPS_SLOW:-$REPS}
OURS=$(readlink -f "$OURS"); C=$(readlink -f "$C")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

now() { date +%s.%N; }
# min / median / max of the numbers on stdin
stats() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f / %.2f / %.2f", a[1], m, a[NR]}'; }

make_input() {
  "${PYTHON:-/usr/bin/python3}" - "$1" "$2" <<'PY'
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
}

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
{
echo "| size | PSF | C noisify: min / median / max (s) | nanobragg-rs noisify: min / median / max (s) | runs (C, ours) | noise images identical to the C's |"
echo "|---|---|---|---|---|---|"
for row in $ROWS; do
  N=${row%-*}; kind=${row#*-}
  [ -f "$T/in_$N.bin" ] || make_input "$T/in_$N.bin" "$N"
  case $kind in
    none)  psf=""; label="none" ;;
    gauss) psf="-psf gauss -psf_fwhm 100"; label="gauss, -psf_fwhm 100 (1 pixel), automatic radius" ;;
    fiber) psf="-psf fiber -psf_fwhm 100 -psf_radius 10"; label="fiber, -psf_fwhm 100 (1 pixel), -psf_radius 10" ;;
    fiberauto) psf="-psf fiber -psf_fwhm 100"; label="fiber, -psf_fwhm 100 (1 pixel), automatic radius" ;;
  esac
  A="-floatfile $T/in_$N.bin -pixel 0.1 -distance 100 -readout_noise 2 $psf -seed 1 -nopgm"
  nc=$REPS; case $row in 4096-fiber|*-fiberauto) nc=$C_REPS_SLOW ;; esac
  : > "$T/tc"; : > "$T/tr"; same=yes
  for k in $(seq 1 "$REPS"); do
    if [ "$k" -le "$nc" ]; then
      rm -rf "$T/c"; mkdir -p "$T/c"
      s=$(now); (cd "$T/c" && "$C" $A -intfile i.img -noisefile n.img >/dev/null); e=$(now)
      echo "$e - $s" | bc >> "$T/tc"
    fi
    rm -rf "$T/r"; mkdir -p "$T/r"
    s=$(now); (cd "$T/r" && "$OURS" noisify $A -intfile i.img -noisefile n.img >/dev/null); e=$(now)
    echo "$e - $s" | bc >> "$T/tr"
    cmp -s "$T/c/n.img" "$T/r/n.img" || same=no
    cmp -s "$T/c/i.img" "$T/r/i.img" || same=no
  done
  echo "| ${N}² | $label | $(stats < "$T/tc") | $(stats < "$T/tr") | $nc, $REPS | $same |"
done
echo
echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); load average at the start: $LOAD0, at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')."
} > "$OUT"
