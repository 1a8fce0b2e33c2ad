#!/bin/bash
# alternate old/new series runs: 100 frames of 512^2 with noise; prints "label wall user sys"
OLD=$1; NEW=$2; R=${3:-9}
for i in $(seq 1 $R); do
  for v in old new; do
    bin=$OLD; [ $v = new ] && bin=$NEW
    rm -rf /tmp/nbench; mkdir /tmp/nbench
    /usr/bin/time -f "$v %e %U %S" $bin series -cell 100 100 100 90 90 90 -N 5 -default_F 100 -lambda 6.2 -detpixels 512 -osc 0.1 -phisteps 1 -phi 0 --frames 100 -seed 1 --quiet --out-dir /tmp/nbench 2>&1 | tail -1
  done
done
