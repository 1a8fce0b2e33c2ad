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

# --- Independent readers -----------------------------------------------------------------------------
# fabio (what DIALS/dxtbx users open SMV with) must read our images.
if python3 -m pip install --quiet --disable-pip-version-check fabio >/dev/null 2>&1; then
  python3 scripts/check_fabio.py target/release/nanobragg-rs "$(mktemp -d)"
else
  echo "SKIPPED: fabio check (could not install fabio from PyPI)"
fi
