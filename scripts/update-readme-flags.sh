#!/usr/bin/env bash
# Regenerate the flag reference in README.md from the flag table (tests/readme.rs checks it).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
ref=$(./target/release/nanobragg-rs flags)
python3 - "$ref" <<'PY'
import sys
ref = sys.argv[1] + "\n"
s = open("README.md").read()
a = s.index("<!-- BEGIN FLAGS"); a = s.index("\n", a) + 1; b = s.index("<!-- END FLAGS")
open("README.md", "w").write(s[:a] + ref + s[b:])
PY
