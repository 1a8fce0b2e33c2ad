#!/usr/bin/env bash
# Size and time of a rotation dataset in each format: `series` of FRAMES frames of N x N pixels (a
# crystal on a water background, Poisson noise), written as raw floats, noise SMV files, numbered CBF
# files, or one NXmx file (shuffle + deflate, chunked per frame); runs alternated.
# usage: scripts/bench_dataset_outputs.sh [OURS] [OUT.md]     REPS=3 FRAMES=90 N=1024
set -euo pipefail
OURS=$(readlink -f "${1:-target/release/nanobragg-rs}")
OUT=${2:-/dev/stdout}
REPS=${REPS:-3}; FRAMES=${FRAMES:-90}; N=${N:-1024}
FLAGS="-cell 61 73 87 90 90 90 -misset 10 20 30 -default_F 1000 -N 15 -round_xtal -lambda 1 -distance 150
 -detpixels $N -pixel 0.172 -oversample 1 -fluence 1e24 -water 300 -adc 0 --quiet --frames $FRAMES -osc 0.5"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
now() { date +%s.%N; }
stats() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f / %.2f / %.2f", a[1], m, a[NR]}'; }
# noise: the Poisson counts as SMV files, so the rows show what drawing the noise costs (CBF and NeXus
# hold noisy counts; the float images have none)
KINDS="float noise cbf nexus"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for k in $(seq 1 "$REPS"); do
  for kind in $KINDS; do
    rm -rf "$T/$kind"; mkdir "$T/$kind"
    extra=""; [ "$kind" = nexus ] && extra="-nexusfile sweep.nxs"
    t0=$(now)
    # shellcheck disable=SC2086
    (cd "$T/$kind" && "$OURS" series $FLAGS --outputs "$kind" $extra > /dev/null)
    echo "$(now) - $t0" | bc >> "$T/t_$kind"
    rm -f "$T/$kind"/series.shard-*.json
    du -sb "$T/$kind" | cut -f1 > "$T/size_$kind"
  done
done
raw=$((FRAMES * N * N * 4))
{
echo "| format | bytes on disk | vs. int32 counts ($((raw / 1048576)) MiB) | whole series, min / median / max (s) | frames/s (median) |"
echo "|---|---|---|---|---|"
for kind in $KINDS; do
  b=$(cat "$T/size_$kind"); med=$(stats < "$T/t_$kind" | awk -F' / ' '{print $2}')
  echo "| $kind | $b | $(echo "$raw $b" | awk '{printf "%.2f", $1 / $2}'):1 | $(stats < "$T/t_$kind") | $(echo "$FRAMES $med" | awk '{printf "%.1f", $1 / $2}') |"
done
echo
echo "$FRAMES frames of ${N}x${N}, $REPS runs of each alternated; load average before: $LOAD0, after:"
echo "$(cut -d' ' -f1-3 /proc/loadavg). CPU: $(lscpu | sed -n 's/^Model name: *//p')."
} > "$OUT"
