#!/bin/bash
# usage: cmp.sh OLD NEW  -- noise images (and every output) of simulate and series, old vs new
OLD=$1; NEW=$2; H=${HKL:-/work/shared/golden/inputs/P1.hkl}
B="-cell 100 100 100 90 90 90 -N 5 -default_F 100 -lambda 6.2 -detpixels 512"
fail=0; n=0
run_sim() { # name, flags
  for v in old new; do
    d=/tmp/ncmp/$1/$v; rm -rf $d; mkdir -p $d; cd $d
    bin=$OLD; [ $v = new ] && bin=$NEW
    $bin simulate $2 -noisefile n.img -intfile i.img -floatfile f.bin > log.txt 2>&1
  done
  for f in n.img i.img f.bin; do
    n=$((n+1))
    if ! cmp -s /tmp/ncmp/$1/old/$f /tmp/ncmp/$1/new/$f; then echo "DIFF $1 $f"; fail=1; fi
  done
  if ! diff -q <(grep -v -i "seconds\|time\|ms\|^done:" /tmp/ncmp/$1/old/log.txt) <(grep -v -i "seconds\|time\|ms\|^done:" /tmp/ncmp/$1/new/log.txt) >/dev/null; then echo "LOGDIFF $1"; diff <(grep -i photons /tmp/ncmp/$1/old/log.txt) <(grep -i photons /tmp/ncmp/$1/new/log.txt); fi
  echo "$1: $(grep -i 'photons on noise' /tmp/ncmp/$1/new/log.txt) sha $(sha256sum < /tmp/ncmp/$1/new/n.img | cut -c1-16)"
}
run_sim base "$B -seed 7"
run_sim water "$B -seed 7 -water 100"
run_sim roi "$B -seed 7 -roi 10 400 20 300"
run_sim adc10 "$B -seed 7 -adc 10"
run_sim adcm5 "$B -seed 7 -adc -5"
run_sim mosaic "$B -seed 7 -mosaic 0.5 -mosaic_dom 5"
run_sim interp "-hkl $H -cell 100 100 100 90 90 90 -N 5 -lambda 6.2 -detpixels 512 -seed 7 -interpolate"
run_sim threads1 "$B -seed 7 --threads 1"
run_sim seed0 "$B -seed 0"
run_sim seedneg "$B -seed -5"
run_sim seedmax "$B -seed 2147483647"
run_sim seedmin "$B -seed -2147483647"
run_sim bright "-cell 100 100 100 90 90 90 -N 20 -default_F 1000 -lambda 6.2 -detpixels 512 -seed 3 -fluence 1e26"
run_sim misset "$B -seed 11 -misset random -mosaic 0.3 -mosaic_dom 3 -water 50 -adc 40"
for fl in "" "-water 100" "-adc -5 -roi 10 400 20 300" "-mosaic 0.5 -mosaic_dom 5"; do
  for v in old new; do
    d=/tmp/ncmp/series$n/$v; rm -rf $d /tmp/ncmp/sD; mkdir -p /tmp/ncmp/sD
    bin=$OLD; [ $v = new ] && bin=$NEW
    $bin series $B $fl -osc 0.1 -phisteps 1 -phi 0 --frames 5 -seed 1 --out-dir /tmp/ncmp/sD --quiet > /dev/null 2>&1 || echo "series failed $v $fl"
    mv /tmp/ncmp/sD $d
  done
  o=/tmp/ncmp/series$n
  for f in $(ls $o/old); do
    if ! cmp -s $o/old/$f $o/new/$f; then echo "DIFF series[$fl] $f"; fail=1; fi
  done
  echo "series[$fl]: $(ls $o/old | wc -l) files old, $(ls $o/new | wc -l) new, manifests: $(cat $o/old/*.json | sha256sum | cut -c1-16) $(cat $o/new/*.json | sha256sum | cut -c1-16)"
  n=$((n+1))
done
echo "fail=$fail"
