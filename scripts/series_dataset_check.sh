#!/usr/bin/env bash
# The issue's two datasets, each with one command, once in one process and once as `mpirun -n 2`:
# a 900-frame rotation sweep and a 1000-still set. Checks that both ways give identical files (sha256)
# and that `series --verify` accepts each. Small detector (PIXELS, default 64) so it runs in minutes.
#
#   scripts/series_dataset_check.sh [PIXELS]
set -euo pipefail
cd "$(dirname "$0")/.."
PIX=${1:-64}
RS=$(realpath target/release/nanobragg-rs)
command -v mpirun >/dev/null || { echo "SKIPPED: series_dataset_check because mpirun is not on PATH (openmpi-bin)"; exit 0; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
XTAL="-cell 50 60 70 90 90 90 -default_F 100 -N 5 -lambda 1 -distance 80 -detpixels $PIX -pixel $(awk -v p="$PIX" 'BEGIN{print 25.6/p}') -oversample 1"
SWEEP="$XTAL -phi 0 -osc 0.1 -phisteps 5 --frames 900 -noisefile sweep_#####.img -seed 42"
STILLS="$XTAL --stills 1000 --orientation random -floatfile still_#####.bin -seed 1"
hashes() { (cd "$1" && find . -type f ! -name '*.json' ! -name 'Fdump.bin' -print0 | sort -z | xargs -0 sha256sum); }
for name in SWEEP STILLS; do
  args=${!name}
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$RS" series $args --out-dir "$tmp/$name-one" | tail -1
  t1=$(date +%s.%N)
  # shellcheck disable=SC2086
  mpirun -n 2 --oversubscribe "$RS" series $args --out-dir "$tmp/$name-mpi" --threads 1 | grep -E '^series: (shard|.*frames rendered)' || true
  t2=$(date +%s.%N)
  "$RS" series --verify --out-dir "$tmp/$name-one"
  "$RS" series --verify --out-dir "$tmp/$name-mpi"
  n1=$(hashes "$tmp/$name-one" | wc -l)
  if diff <(hashes "$tmp/$name-one") <(hashes "$tmp/$name-mpi") >/dev/null; then
    echo "$name: identical: $n1 files, one process $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s, mpirun -n 2 $(awk -v a="$t1" -v b="$t2" 'BEGIN{printf "%.1f", b-a}') s"
  else
    echo "$name: FILES DIFFER between one process and mpirun -n 2"; exit 1
  fi
done
