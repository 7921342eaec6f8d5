#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the ARM cross builds need. Idempotent:
# packages already present are not downloaded again. Needs root (or sudo).
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config
      flatbuffers-compiler libflatbuffers-dev nlohmann-json3-dev googletest libgtest-dev
      libxnnpack-dev libpthreadpool-dev
      g++-aarch64-linux-gnu g++-arm-linux-gnueabihf qemu-user
      clang libclang-rt-14-dev libtsan2 binutils file
      openjdk-17-jdk-headless strace   # Java API + JNI test; the embedded example's strace test
      libcpp-httplib-dev               # ringlm serve (HTTP server)
      python3-pytest python3-numpy     # the Python package's tests (numpy: the zero-copy logits)
      python3-venv python3-setuptools  # README's pip install of the package (offline build)
      chromium)                        # the chat page test (headless, driven by puppeteer-core)
# The OpenAI-client and chat-page tests run on node (20 or later) and install their npm packages
# themselves (tests/serve/package-lock.json, into the build tree). Debian's nodejs + npm only
# when the machine has no node of its own (a newer one, e.g. NodeSource's, is kept).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PKGS+=(nodejs npm)
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  # An index that fails to download (a mirror mid-sync) makes apt-get update exit non-zero though
  # everything we need may be there: let the install decide.
  $SUDO apt-get update -qq || echo "setup: apt-get update reported errors; installing anyway" >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "setup: all packages present" >&2
