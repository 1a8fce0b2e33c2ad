#!/usr/bin/env bash
# Frames per second of `nanobragg-rs series` against the C program run once per frame, as users' shell
# loops do (setup and all default outputs every frame: float, int, PGM, noise). Both use every core
# (the C with OpenMP, the port with rayon) unless THREADS is set (then OMP_NUM_THREADS and --threads).
#
#   scripts/series_vs_c_loop.sh [FRAMES] [PIXELS] [C_BINARY]   (defaults: 20 1024 ../shared/cref/nanoBragg)
#   RS=path/to/nanobragg-rs   another build of ours (default: target/release/nanobragg-rs)
#   EXTRA="-water 0.05"       flags added to both (a realistic background: a bright noise image)
#
# Prints one Markdown table row per program. A brief measurement on whatever machine runs it: on a
# shared machine other work shows up in the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20}
PIX=${2:-1024}
C=${3:-../shared/cref/nanoBragg}
RS=${RS:-target/release/nanobragg-rs}
[ -x "$C" ] || { echo "SKIPPED: no C binary at $C"; exit 0; }
[ -x "$RS" ] || cargo build --release --quiet
C=$(realpath "$C")
RS=$(realpath "$RS")
XTAL="-cell 100 100 100 90 90 90 -N 5 -default_F 100 -lambda 6.2 -detpixels $PIX -osc 0.1 -phisteps 1 ${EXTRA:-}"
THREAD_ARGS=()
if [ -n "${THREADS:-}" ]; then export OMP_NUM_THREADS=$THREADS; THREAD_ARGS=(--threads "$THREADS"); fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/c" "$tmp/rs"
now() { date +%s.%N; }

# each timed phase starts with no dirty pages (the other program's files written back by `sync`, not by
# the kernel's flusher during the next program's time)
sync
t0=$(now)
for k in $(seq 1 "$N"); do
  phi=$(awk -v k="$k" 'BEGIN { printf "%.10g", (k - 1) * 0.1 }')
  # shellcheck disable=SC2086
  (cd "$tmp/c" && "$C" $XTAL -phi "$phi" -seed "$k" -floatfile "f_$k.bin" -intfile "i_$k.img" -pgmfile "p_$k.pgm" \
     -noisefile "n_$k.img" >/dev/null 2>&1)
done
t1=$(now)
sync
t1s=$(now)
# shellcheck disable=SC2086
"$RS" series $XTAL -phi 0 --frames "$N" -seed 1 --out-dir "$tmp/rs" --quiet "${THREAD_ARGS[@]}"
t2=$(now)

nc=$(ls "$tmp/c" | wc -l)
nr=$(ls "$tmp/rs" | grep -vc '\.json$')
awk -v n="$N" -v pix="$PIX" -v t0="$t0" -v t1="$t1" -v t1s="$t1s" -v t2="$t2" -v nc="$nc" -v nr="$nr" -v cores="$(nproc)" \
    -v threads="${THREADS:-all}" 'BEGIN {
  c = t1 - t0; r = t2 - t1s
  printf "| program | frames | detector | files | seconds | frames/s | speed-up |\n|---|---|---|---|---|---|---|\n"
  printf "| C nanoBragg, once per frame (threads: %s of %d cores) | %d | %d² | %d | %.3f | %.3f | 1.0× |\n", threads, cores, n, pix, nc, c, n / c
  printf "| nanobragg-rs series (threads: %s of %d cores) | %d | %d² | %d | %.3f | %.3f | %.2f× |\n", threads, cores, n, pix, nr, r, n / r, c / r
}'
