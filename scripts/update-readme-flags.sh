#!/usr/bin/env bash
# Regenerate the flag reference in docs/flags.md from the flag table (tests/readme.rs checks it).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
ref=$(./target/release/nanobragg-rs flags)
python3 - "$ref" <<'PY'
import sys
ref = sys.argv[1] + "\n"
s = open("docs/flags.md").read()
a = s.index("<!-- BEGIN FLAGS"); a = s.index("\n", a) + 1; b = s.index("<!-- END FLAGS")
open("docs/flags.md", "w").write(s[:a] + ref + s[b:])
PY
