#!/bin/sh
# CTest fixture of the node-based serve tests: installs tests/serve/package.json's pinned
# packages (package-lock.json, `npm ci`) into DIR (under the build tree, never the source tree).
# Does nothing when DIR already holds this lock file's install. Exit 77 (skip) without node/npm.
#   npm_install.sh SOURCE_DIR DIR
set -eu
src=$1 dir=$2
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node / npm not found: the OpenAI-client and chat-page tests are skipped (scripts/setup.sh installs nodejs and npm when node is absent)"
  exit 77
fi
mkdir -p "$dir"
if [ -d "$dir/node_modules" ] && cmp -s "$src/package-lock.json" "$dir/package-lock.json"; then
  echo "npm packages already installed in $dir"
  exit 0
fi
cp "$src/package.json" "$src/package-lock.json" "$dir/"
# --ignore-scripts: nothing runs at install (puppeteer-core downloads no browser anyway).
# Three tries: a registry hiccup on a CI machine should not fail the suite (npm's own retries
# cover single requests, not a dropped connection mid-install).
cd "$dir"
for try in 1 2 3; do
  if npm ci --ignore-scripts --no-audit --no-fund --loglevel=error; then
    echo "npm packages installed in $dir"
    exit 0
  fi
  echo "npm ci failed (try $try of 3)" >&2
  [ "$try" -lt 3 ] && sleep $((try * 10))
done
exit 1
