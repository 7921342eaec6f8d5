#!/usr/bin/env bash
# README's first command: install packages, build, convert stories260K from ../shared, generate.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${RINGLM_SHARED_DIR:-../shared}
bash scripts/setup.sh
cmake --preset release >/dev/null
# Only the `ringlm` tool and the library it links: the test suite is scripts/test.sh's business.
cmake --build --preset release -j "$(nproc)" --target ringlm_cli
RINGLM=build/release/bin/ringlm
mkdir -p build/models
"$RINGLM" convert "$SHARED/models/stories260K/stories260K.bin" \
    --tokenizer "$SHARED/models/stories260K/tok512.bin" --quant q8 -o build/models/stories260K-q8.rlm
# sed, not head: head exits after 12 lines and inspect would die of SIGPIPE (pipefail).
"$RINGLM" inspect build/models/stories260K-q8.rlm | sed -n 1,12p
echo
echo "--- ringlm generate -m build/models/stories260K-q8.rlm -p \"Once upon a time\" --temp 0 -n 200"
printf 'Once upon a time'
"$RINGLM" generate -m build/models/stories260K-q8.rlm -p "Once upon a time" --temp 0 -n 200
