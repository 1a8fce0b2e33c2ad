#!/usr/bin/env bash
# Whole-process wall time of the C and of one or two builds of ours on the same case, runs alternated
# (C, A, B, C, A, B, ...) so that drift on a shared machine hits all of them alike; min / median / max
# per program and the C's median over each build's median. Files are written into a fresh folder and
# removed after every run (untimed), as `bench-detailed` does by default.
#
#   scripts/bench_whole_process.sh OURS_A [OURS_B]      (e.g. an older build, then this one)
#   C=../shared/cref/nanoBragg  REPS=7  N=2048  ARGS="-floatfile f.bin -intfile i.img -nonoise -nopgm"
#   CASE="-cell 100 100 100 90 90 90 -N 5 -default_F 100 -lambda 6.2"   (the benchmark crystal)
set -euo pipefail
A=$(readlink -f "$1")
B=${2:+$(readlink -f "$2")}
C=${C:-$(dirname "$0")/../../shared/cref/nanoBragg}
[ -x "$C" ] || { echo "SKIPPED: no C binary at $C (set C=...)"; exit 0; }
C=$(readlink -f "$C")
REPS=${REPS:-7}; N=${N:-2048}
CASE=${CASE:-"-cell 100 100 100 90 90 90 -N 5 -default_F 100 -lambda 6.2"}
ARGS=${ARGS:-"-floatfile f.bin -intfile i.img -nonoise -nopgm"}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

now() { date +%s.%N; }
stats() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.4f %.4f %.4f\n", a[1], m, a[NR]}'; }
one() { # program, subcommand (empty for the C), output file of times
  mkdir "$T/w"
  local t0 t1
  t0=$(now)
  # shellcheck disable=SC2086
  (cd "$T/w" && "$1" $2 $CASE -detpixels "$N" $ARGS >/dev/null 2>&1)
  t1=$(now)
  echo "$t1 - $t0" | bc -l >> "$3"
  rm -rf "$T/w"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
for _ in $(seq 1 "$REPS"); do
  one "$C" "" "$T/c"
  one "$A" simulate "$T/a"
  [ -n "$B" ] && one "$B" simulate "$T/b"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r cmin cmed cmax < <(stats < "$T/c")
echo "| program | runs | min s | median s | max s | C median / median |"
echo "|---|---:|---:|---:|---:|---:|"
echo "| C $(basename "$C") | $REPS | $cmin | $cmed | $cmax | 1.0× |"
for x in a b; do
  [ -f "$T/$x" ] || continue
  p=$A; [ $x = b ] && p=$B
  read -r mn md mx < <(stats < "$T/$x")
  echo "| $p | $REPS | $mn | $md | $mx | $(echo "$cmed / $md" | bc -l | xargs printf '%.2f')× |"
done
