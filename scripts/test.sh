#!/usr/bin/env bash
# The whole test suite, from a clean checkout: installs what it needs, builds, runs every preset.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)
run_preset() {
  local p=$1
  echo "=== preset $p" >&2
  cmake --preset "$p" >/dev/null
  cmake --build --preset "$p" -j "$jobs"
  ctest --preset "$p"
}
run_preset release
run_preset asan
