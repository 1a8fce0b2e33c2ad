#!/usr/bin/env bash
# The project's whole test command (README "Quick start", called by .ci/run). It installs what the tests
# need by the project's own files, then runs every test. A test whose tool is absent says SKIPPED loudly.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

# --- system packages (Debian, as root): real readers and launchers the tests compare against ----------
# dials/python3-dials (dxtbx), python3-cctbx (structure factors), openmpi-bin (mpirun), hdf5-tools.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  PKGS="dials python3-dials python3-cctbx openmpi-bin hdf5-tools libhdf5-dev python3-venv python3-pip"
  # shellcheck disable=SC2086
  if ! dpkg -s $PKGS >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $PKGS >/dev/null \
      || echo "SKIPPED: could not install some of: $PKGS (tests needing them will skip)"
  fi
else
  echo "NOTE: not root or no apt-get: system packages (dials, cctbx, openmpi) not installed by this script"
fi

# --- Rust: library, CLI, golden parity, outputs, hostile input ---------------------------------------
cargo test --release
# the check-kernels debug feature (every SIMD row re-rendered by the reference and compared), on a few
# golden cases; rebuilds only this crate with the feature
cargo test --release -p nanobragg-rs --features check-kernels --test check_kernels
# Tests run their programs in temporary folders: an Fdump.bin left in the repository root (nanoBragg
# writes one beside every -hkl run) would be read by any later run here without -hkl (the Python
# tests' among them) and change its F silently.
if [ -e Fdump.bin ]; then
  echo "FAIL: a test left Fdump.bin in the repository root (run it in a temporary folder)" >&2
  exit 1
fi
# That build replaced target/release/nanobragg-rs with a check-kernels binary (every row rendered twice):
# rebuild the normal binaries before anything else (fabio/DIALS scripts, Python, the speed gate) runs them.
cargo build --release --bins

# --- The library alone: no harness, no progress bars; the examples/ program (typed parameters, an
# in-memory reflection list, render, SMV) must build that way and write a readable image.
cargo build --release -p nanobragg-rs --lib --no-default-features
EX_DIR="$(mktemp -d)"
cargo run --release --quiet -p nanobragg-rs --example in_memory -- "$EX_DIR/in_memory.img"
head -c 512 "$EX_DIR/in_memory.img" | grep -q "SIZE1=256" || { echo "FAILED: examples/in_memory.rs wrote no 256-pixel SMV image"; exit 1; }
# every example runs without arguments (usage or a default run) and exits 0
cargo build --release --quiet -p nanobragg-rs --examples
ROOT="$PWD"
for ex in examples/*.rs; do
  name="$(basename "$ex" .rs)"
  (cd "$EX_DIR" && "$ROOT/target/release/examples/$name" >/dev/null 2>&1) \
    || { echo "FAILED: examples/$name.rs without arguments did not exit 0"; exit 1; }
done

# --- One virtual environment for every Python package the tests install ------------------------------
# Nothing is pip-installed into the system's Python: fabio, pytest, numpy, dask and maturin go into
# target/pyenv. The venv sees the system's packages (DIALS/dxtbx on Debian).
PYBASE=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import venv, ensurepip" >/dev/null 2>&1; then PYBASE=/usr/bin/python3; fi
VENV="$PWD/target/pyenv"
PIPQ=(--quiet --disable-pip-version-check)
VENV_OK=0
if { [ -x "$VENV/bin/python" ] || "$PYBASE" -m venv --system-site-packages "$VENV"; } \
   && "$VENV/bin/python" -m pip install "${PIPQ[@]}" maturin pytest numpy "dask[distributed]"; then
  VENV_OK=1
else
  echo "SKIPPED: a virtual environment with pytest, numpy and dask could not be made (Python tests below skip)"
fi

# --- GPU backend: the CUDA kernel compiled by NVRTC (no GPU needed) ---------------------------------------
# tests/gpu.rs ran above with the kernel's host build (g++); its NVRTC test needs libnvrtc, which PyPI's
# nvidia-cuda-nvrtc wheel brings. The device itself is checked by scripts/gpu_check.sh (reports/gpu/).
if [ "$VENV_OK" = 1 ] && "$VENV/bin/python" -m pip install "${PIPQ[@]}" nvidia-cuda-nvrtc >/dev/null 2>&1 \
   && NVRTC_DIR="$("$VENV/bin/python" scripts/gpu_nvrtc_dirs.py | head -1)" && [ -n "$NVRTC_DIR" ]; then
  NANOBRAGG_NVRTC_DIR="$NVRTC_DIR" cargo test --release --test gpu nvrtc
else
  echo "SKIPPED: the NVRTC compile of the GPU kernel, because nvidia-cuda-nvrtc could not be installed from PyPI into $VENV"
fi

# --- Independent readers -----------------------------------------------------------------------------
# fabio (what DIALS/dxtbx users open SMV with) must read our images.
FABIO_PY=""
if [ "$VENV_OK" = 1 ] && "$VENV/bin/python" -m pip install "${PIPQ[@]}" fabio >/dev/null 2>&1; then
  FABIO_PY="$VENV/bin/python"
  "$FABIO_PY" scripts/check_fabio.py target/release/nanobragg-rs "$(mktemp -d)"
else
  echo "SKIPPED: fabio check (could not install fabio from PyPI into $VENV)"
fi

# --- CBF and NeXus/NXmx read back by real readers ------------------------------------------------------
# fabio: CBF pixels are our photon counts. dxtbx (DIALS): every convention's geometry, checked against
# what the C program prints for the same flags; then a 10-frame sweep, as CBF files and as one NeXus
# file, through dials.import/find_spots/index.
if [ -n "$FABIO_PY" ]; then
  "$FABIO_PY" scripts/check_fabio_cbf.py target/release/nanobragg-rs "$(mktemp -d)"
else
  echo "SKIPPED: fabio CBF check because fabio is not installed"
fi
DIALS_PY=/usr/bin/python3
C_NB="${NANOBRAGG_C_BIN:-../shared/cref/nanoBragg}"
if [ -x "$DIALS_PY" ] && "$DIALS_PY" -c "import dxtbx, h5py" >/dev/null 2>&1; then
  if [ -x "$C_NB" ]; then
    "$DIALS_PY" scripts/check_dxtbx_geometry.py "$PWD/target/release/nanobragg-rs" "$(realpath "$C_NB")" "$(mktemp -d)"
  else
    echo "SKIPPED: dxtbx geometry round trip because the C reference binary $C_NB is absent"
  fi
  if command -v dials.index >/dev/null 2>&1; then
    # numbered CBF files from `simulate`, and one multi-frame NXmx file from `series -nexusfile`
    "$DIALS_PY" scripts/check_dials_sweep.py "$PWD/target/release/nanobragg-rs" "$(mktemp -d)" cbf nexus
    # a 2x2-module detector from a DIALS experiment list, `series --expt` into one multi-module NXmx file
    "$DIALS_PY" scripts/check_dials_multipanel.py "$PWD/target/release/nanobragg-rs" "$(mktemp -d)"
  else
    echo "SKIPPED: DIALS sweep (dials.import/find_spots/index) because DIALS is not installed"
  fi
else
  echo "SKIPPED: dxtbx geometry and DIALS sweep checks because DIALS's Python (dxtbx, h5py) is not installed"
fi

# --- Python module (python/): build it into the virtual environment, run its tests ---------------------
# Parity with the CLI on the golden cases, API and bad-input tests, Dask LocalCluster with 2 workers.
# The module is built with `pip install ./python` into the same target/ as above, so the library's
# dependencies are reused.
if [ "$VENV_OK" = 1 ]; then
  # from here on a failure is a failure: the module must build and its tests pass
  CARGO_TARGET_DIR="$PWD/target" "$VENV/bin/python" -m pip install "${PIPQ[@]}" --force-reinstall --no-deps ./python
  NANOBRAGG_CLI="$PWD/target/release/nanobragg-rs" "$VENV/bin/python" -m pytest -q -rs python/tests
else
  echo "SKIPPED: Python module tests because a virtual environment with pytest, numpy and dask could not be made"
fi
