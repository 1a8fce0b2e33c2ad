#!/usr/bin/env bash
# Does a multi-panel detector cost more per pixel than one panel? The same N x N pixels simulated as one
# panel and as P panels of N x N/P rows (stacked, so every pixel is where it was: the images must be
# equal), both from a DIALS experiment list (`simulate --expt`), runs alternated.
# usage: scripts/bench_panels.sh [OURS] [OUT.md]
#   REPS=5  runs of each layout     N=1024  pixels a side     P=4  panels     EXTRA="..."  more flags
set -euo pipefail
OURS=$(readlink -f "${1:-target/release/nanobragg-rs}")
OUT=${2:-/dev/stdout}
REPS=${REPS:-5}; N=${N:-1024}; P=${P:-4}
EXTRA=${EXTRA:-"-default_F 100 -N 10 -oversample 2 -mosaic 0.2 -mosaic_dom 50"}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

now() { date +%s.%N; }
stats() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f / %.3f / %.3f", a[1], m, a[NR]}'; }

# the experiment lists: 0.1 mm pixels, 100 mm away, beam through the middle; panel k starts k*N/P rows down
python3 - "$T" "$N" "$P" <<'PY'
import json, sys
d, n, p = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def expt(npanels):
    rows = n // npanels
    panels = [{"name": f"p{k}", "fast_axis": [1.0, 0.0, 0.0], "slow_axis": [0.0, -1.0, 0.0],
               "origin": [-n * 0.05, n * 0.05 - k * rows * 0.1, -100.0], "image_size": [n, rows],
               "pixel_size": [0.1, 0.1], "thickness": 0.0, "mu": 0.0} for k in range(npanels)]
    return {"experiment": [{"beam": 0, "detector": 0, "goniometer": 0, "scan": 0, "crystal": 0}],
            "beam": [{"direction": [0.0, 0.0, 1.0], "wavelength": 1.0, "polarization_normal": [0.0, 1.0, 0.0],
                      "polarization_fraction": 0.99}],
            "detector": [{"panels": panels}],
            "goniometer": [{"rotation_axis": [1.0, 0.0, 0.0], "fixed_rotation": [1, 0, 0, 0, 1, 0, 0, 0, 1],
                            "setting_rotation": [1, 0, 0, 0, 1, 0, 0, 0, 1]}],
            "scan": [{"image_range": [1, 1], "oscillation": [0.0, 0.1]}],
            "crystal": [{"real_space_a": [60.0, 3.0, 1.0], "real_space_b": [-2.0, 70.0, 4.0], "real_space_c": [1.0, -3.0, 80.0]}]}
for k, name in ((1, "one"), (p, "many")):
    json.dump(expt(k), open(f"{d}/{name}.expt", "w"))
PY

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$T/t_one"; : > "$T/t_many"
for k in $(seq 1 "$REPS"); do
  for layout in one many; do
    t0=$(now)
    # shellcheck disable=SC2086
    (cd "$T" && "$OURS" simulate --expt "$layout.expt" $EXTRA -floatfile "$layout.bin" -nonoise -nopgm --quiet > /dev/null)
    echo "$(now) - $t0" | bc >> "$T/t_$layout"
  done
done
# the same pixels: equal to rounding (a panel's origin is added up differently from a row of one panel)
same=$(python3 -c "
import numpy as np, sys
a, b = (np.fromfile(f, dtype='<f4') for f in sys.argv[1:])
print('max relative difference %.1e' % (abs(a - b).max() / abs(a).max()))" "$T/one.bin" "$T/many.bin")
{
echo "| layout | pixels | whole process, min / median / max (s) | runs |"
echo "|---|---|---|---|"
echo "| one panel of ${N}x${N} | $((N * N)) | $(stats < "$T/t_one") | $REPS |"
echo "| $P panels of ${N}x$((N / P)) | $((N * N)) | $(stats < "$T/t_many") | $REPS |"
echo
echo "Flags: \`$EXTRA\`; float images of the two layouts: $same. Runs alternated (one, $P panels, one, ...);"
echo "the one-panel run also writes its default SMV (intimage.img, 2 bytes a pixel), which a multi-panel run skips."
echo "load average before: $LOAD0, after: $(cut -d' ' -f1-3 /proc/loadavg). CPU: $(lscpu | sed -n 's/^Model name: *//p')."
} > "$OUT"
