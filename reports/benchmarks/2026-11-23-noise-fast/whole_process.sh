#!/bin/sh
# Whole process at 4096² with the float, SMV and noise images (no PGM), alternated: the C, ours with
# --noise c (bit-identical to the C), ours with --noise fast. Prints wall seconds and peak RSS (KiB).
# usage: whole_process.sh C_BINARY RUST_BINARY RUNS OUTDIR
C=$1; R=$2; N=${3:-5}; D=${4:-/tmp}
A="-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 -distance 100 -pixel 0.1 -detpixels 4096 -nopgm -noprogress"
for i in $(seq "$N"); do
  for who in c rust-c rust-fast; do
    case $who in
      c) cmd="$C $A -floatfile $D/c.bin -intfile $D/c.img -noisefile $D/c.noise.img" ;;
      rust-c) cmd="$R simulate $A --noise c -floatfile $D/r.bin -intfile $D/r.img -noisefile $D/r.noise.img" ;;
      rust-fast) cmd="$R simulate $A --noise fast -floatfile $D/f.bin -intfile $D/f.img -noisefile $D/f.noise.img" ;;
    esac
    /usr/bin/time -f "$who %e s %M KiB" $cmd >/dev/null 2>$D/time.txt; tail -n 1 $D/time.txt
  done
done
