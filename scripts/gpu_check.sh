#!/usr/bin/env bash
# The GPU backend's proof on a device machine, in one call (issue 38): the machine's facts, the
# device the backend opens, parity with the CPU backend on every golden case (double and single),
# then the benchmarks against the PyTorch port on the same GPU (scripts/gpu_bench.py), or with
# GPU_CHECK_LADDER=1 where the GPU pays for its start-up (scripts/gpu_auto_ladder.py). Everything
# it needs travels in CARRY (made here by scripts/gpu_carry.sh: the release binary, the golden
# cases' arguments and inputs, the PyTorch port's source); reports go to OUT ($OUT on the device).
#
# usage: scripts/gpu_check.sh [CARRY] [OUT]      (defaults: target/gpu-carry, $OUT)
# Dry run without a GPU: NANOBRAGG_GPU_HOST_EMULATION=<host build of the kernel> (tests/gpu.rs).
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY="$(realpath "${1:-target/gpu-carry}")"
OUT="${2:-${OUT:?give OUT}}"
mkdir -p "$OUT"
OUT="$(realpath "$OUT")"
exec > >(tee "$OUT/console.txt") 2>&1
BIN="$CARRY/nanobragg-rs"
WORK="$(mktemp -d)"
START=$(date +%s)
BUDGET_S="${GPU_CHECK_BUDGET_S:-420}"
left() { echo $((BUDGET_S - ($(date +%s) - START))); }

echo "== machine ($(date -u +%FT%TZ))"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | head -3
(nvcc --version 2>/dev/null | tail -2) || echo "nvcc: not found"
ldd --version 2>&1 | head -1
echo "CPU: $(nproc) cores, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)" 2>&1 | tail -1

# NVRTC: the CUDA toolkit's, else the one PyTorch's wheels bring, else any on the loader's path
NVRTC_DIR=""
WHEEL_DIRS="$(python3 scripts/gpu_nvrtc_dirs.py 2>/dev/null || true)"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 $WHEEL_DIRS; do
  if ls "$d"/libnvrtc.so* >/dev/null 2>&1; then NVRTC_DIR="$d"; break; fi
done
echo "NVRTC: ${NVRTC_DIR:-not found in the usual places, the loader path is tried}"
if [ -n "$NVRTC_DIR" ]; then
  # cudarc asks for libnvrtc.so.13 or libnvrtc.so; a toolkit of another major version gets a link
  if [ ! -e "$NVRTC_DIR/libnvrtc.so.13" ] && [ ! -e "$NVRTC_DIR/libnvrtc.so" ]; then
    mkdir -p "$WORK/lib" && ln -s "$(ls "$NVRTC_DIR"/libnvrtc.so.* | head -1)" "$WORK/lib/libnvrtc.so" && NVRTC_DIR="$WORK/lib:$NVRTC_DIR"
  fi
  export LD_LIBRARY_PATH="$NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

echo "== device"
"$BIN" --version
"$BIN" gpu || { echo "FAILED: the GPU backend found no usable device"; }

echo "== parity on the golden cases (left: $(left) s)"
timeout $(( $(left) > 300 ? 240 : $(left) / 2 )) python3 scripts/gpu_parity.py "$BIN" "$CARRY/golden" "$WORK/parity" "$OUT/parity.json" --jobs 8 \
  | tee "$OUT/parity.txt" | grep -v '^ok' || true
tail -1 "$OUT/parity.txt"

if [ "${GPU_CHECK_LADDER:-0}" = 1 ]; then
  # where the GPU pays for its start-up (--backend auto's rule), instead of the PyTorch comparison
  echo "== auto ladder (left: $(left) s)"
  python3 scripts/gpu_auto_ladder.py "$BIN" "$WORK/ladder" "$OUT" --deadline-s "$(( $(left) - 30 ))"
else
  echo "== benchmarks (left: $(left) s)"
  python3 scripts/gpu_bench.py "$BIN" "$CARRY/torch" "$WORK/bench" "$OUT" --deadline-s "$(( $(left) - 15 ))" ${GPU_CHECK_SIZES:+--sizes "$GPU_CHECK_SIZES"}
fi
echo "== done in $(( $(date +%s) - START )) s"
rm -rf "$WORK"
