#!/usr/bin/env bash
# Time nearBragg.c (single-threaded, OMP_NUM_THREADS=1: its OpenMP loop is wrong with more threads)
# against `nanobragg-rs nearbragg` (all cores) on random atom lists (seeded), runs alternated.
# usage: scripts/bench_nearbragg.sh C_NEARBRAGG [OURS] [OUT.md]
#   REPS=3                 runs of each program per row (C, ours, C, ours, ...)
#   ROWS="1000-512 ..."    ATOMS-PIXELS[:REPS] rows (default: 1000-512 1000-1024 10000-512 10000-1024);
#                          a row's own :REPS overrides REPS (e.g. 10000-1024:1, the C needs ~700 s a run)
# Each row: -detpixels PIXELS -pixel 0.1 -distance 100 -lambda 1, atoms spread over ±50 Å, -oversample 1.
# The SMV files must be byte-identical (checked, reported). Wall-clock seconds of whole runs; the
# load average (1 min) before and after each row is reported, since the 2-core machine is shared.
set -euo pipefail
C=${1:?path to the C nearBragg binary}
OURS=${2:-target/release/nanobragg-rs}
OUT=${3:-/dev/stdout}
REPS=${REPS:-3}
ROWS=${ROWS:-"1000-512 1000-1024 10000-512 10000-1024"}
OURS=$(readlink -f "$OURS"); C=$(readlink -f "$C")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

now() { date +%s.%N; }
stats() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f / %.2f / %.2f", a[1], m, a[NR]}'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }

{
load() { cut -d' ' -f1 /proc/loadavg; }
echo "| atoms | pixels | runs | nearBragg.c, 1 thread (min / median / max s) | nanobragg-rs, $(nproc) threads | ratio of medians | SMV identical | load avg before / after |"
echo "|---|---|---|---|---|---|---|---|"
for row in $ROWS; do
  reps=$REPS
  if [[ $row == *:* ]]; then reps=${row#*:}; row=${row%:*}; fi
  atoms=${row%-*}; pix=${row#*-}
  l0=$(load)
  awk -v n="$atoms" 'BEGIN{srand(7); for(i=0;i<n;i++) printf "%.4f %.4f %.4f\n", 100*rand()-50, 100*rand()-50, 100*rand()-50}' > "$T/a$atoms.txt"
  flags=(-file "$T/a$atoms.txt" -detpixels "$pix" -pixel 0.1 -distance 100 -lambda 1 -oversample 1 -noprogress)
  : > "$T/c.t"; : > "$T/r.t"
  for ((k = 0; k < reps; k++)); do
    t0=$(now); (cd "$T" && OMP_NUM_THREADS=1 "$C" "${flags[@]}" -floatfile c.bin -intfile c.img > /dev/null); t1=$(now)
    echo "$t1 - $t0" | bc >> "$T/c.t"
    t0=$(now); (cd "$T" && "$OURS" nearbragg "${flags[@]}" -floatfile r.bin -intfile r.img > /dev/null); t1=$(now)
    echo "$t1 - $t0" | bc >> "$T/r.t"
  done
  same=$(cmp -s "$T/c.img" "$T/r.img" && echo yes || echo NO)
  ratio=$(echo "$(median < "$T/c.t") / $(median < "$T/r.t")" | bc -l)
  printf "| %s | %s² | %s | %s | %s | %.1f× | %s | %s / %s |\n" "$atoms" "$pix" "$reps" "$(stats < "$T/c.t")" "$(stats < "$T/r.t")" "$ratio" "$same" "$l0" "$(load)"
done
} > "$OUT"
