#!/usr/bin/env bash
# What scripts/gpu_check.sh needs on the device machine (no Rust, no ../shared there), copied into
# target/gpu-carry (ignored; named in the device run's `carry`): the release binary (stripped), the
# golden cases' arguments and inputs (not their outputs: parity is against our CPU backend there),
# and the PyTorch port's package source.
#
# usage: scripts/gpu_carry.sh [GOLDEN_DIR] [TORCH_PORT_CHECKOUT]
#   defaults: ../shared/golden, $NANOBRAGG_TORCH_PORT (a checkout of hoidn/nanoBragg)
set -euo pipefail
cd "$(dirname "$0")/.."
GOLDEN="${1:-${NANOBRAGG_GOLDEN:-../shared/golden}}"
TORCH="${2:-${NANOBRAGG_TORCH_PORT:?give the PyTorch port checkout (hoidn/nanoBragg)}}"
C=target/gpu-carry
rm -rf "$C" && mkdir -p "$C/golden/cases" "$C/torch"
cargo build --release --bin nanobragg-rs
strip -o "$C/nanobragg-rs" target/release/nanobragg-rs
cp -r "$GOLDEN/inputs" "$C/golden/inputs"
for d in "$GOLDEN"/cases/*/; do
  id="$(basename "$d")"
  mkdir -p "$C/golden/cases/$id"
  cp "$d/args.txt" "$C/golden/cases/$id/"
  [ -e "$d/Fdump.bin" ] && cp "$d/Fdump.bin" "$C/golden/cases/$id/"
done
cp -r "$TORCH/src/nanobrag_torch" "$C/torch/nanobrag_torch"
find "$C/torch" -name '__pycache__' -prune -exec rm -rf {} +
du -sh "$C"
