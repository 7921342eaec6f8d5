#!/usr/bin/env bash
# make-sysroot.sh ARCH DIR -- the target-side libraries and headers of an ARM cross build.
#
#   ARCH: aarch64 (or arm64) | armhf (or arm)
#   DIR:  where to extract them, e.g. build/aarch64/sysroot
#
# Debian's multi-arch -dev packages conflict with the host's, so nothing is installed: the
# arm64/armhf .deb files are fetched with `apt-get download` and unpacked with `dpkg -x` into DIR
# (DIR/usr/include, DIR/usr/lib/<triple>). libc/libstdc++ come from the cross toolchain's own
# sysroot (/usr/<triple>), so only what it lacks is fetched here.
#
# Idempotent: a package already unpacked (DIR/.stamps/<pkg>) is skipped, and when every package is
# there the script returns at once without calling apt at all. The foreign architecture is added
# (dpkg --add-architecture) and `apt-get update` run only when apt does not know the packages yet,
# which needs root; everything else works as any user. Only Debian's archive needs to be reachable.
set -euo pipefail

usage() { echo "usage: $0 aarch64|armhf DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
case "$1" in
  aarch64|arm64) DEB_ARCH=arm64; TRIPLE=aarch64-linux-gnu ;;
  armhf|arm)     DEB_ARCH=armhf; TRIPLE=arm-linux-gnueabihf ;;
  *) usage ;;
esac
ARG_ARCH=$1
mkdir -p "$2"
DIR=$(cd "$2" && pwd)

# Architecture-specific packages (fetched as <pkg>:$DEB_ARCH) and architecture-independent ones.
ARCH_PKGS=(libxnnpack-dev libxnnpack0 libpthreadpool-dev libpthreadpool0 libcpuinfo-dev libcpuinfo0
           libgtest-dev libflatbuffers-dev libflatbuffers2)
ALL_PKGS=(nlohmann-json3-dev)
# Bump when the package list changes so existing sysroots get the new ones.
SYSROOT_VERSION=1

log() { echo "make-sysroot[$DEB_ARCH]: $*" >&2; }

done_stamp="$DIR/.ringlm-sysroot"
if [ -f "$done_stamp" ] && [ "$(cat "$done_stamp")" = "$SYSROOT_VERSION $TRIPLE" ]; then
  exit 0
fi

mkdir -p "$DIR/.stamps" "$DIR/debs"
# One writer at a time (two configures of the same build dir).
exec 9>"$DIR/.lock"
flock 9
if [ -f "$done_stamp" ] && [ "$(cat "$done_stamp")" = "$SYSROOT_VERSION $TRIPLE" ]; then
  exit 0
fi

wanted=()
for p in "${ARCH_PKGS[@]}"; do wanted+=("$p:$DEB_ARCH"); done
wanted+=("${ALL_PKGS[@]}")
missing=()
for p in "${wanted[@]}"; do
  [ -f "$DIR/.stamps/${p%%:*}" ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO="sudo"; fi
  fi
  need_root() {
    if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
      log "needs root for: $*"
      log "run once as root: $0 $ARG_ARCH $DIR   (or: sudo dpkg --add-architecture $DEB_ARCH && sudo apt-get update)"
      exit 1
    fi
  }
  # One apt-cache call for all packages (each call rebuilds apt's cache: seconds, not millis).
  # Fills DEB[pkg] with the .deb file name of apt's candidate; returns 1 if any is unknown.
  declare -A DEB=()
  known() {
    local name="" ver="" arch="" line p ok=0
    DEB=()
    while IFS= read -r line; do
      case "$line" in
        "Package: "*) name=${line#Package: } ;;
        "Version: "*) ver=${line#Version: } ;;
        "Architecture: "*) arch=${line#Architecture: } ;;
        "")
          if [ -n "$name" ]; then
            # apt-get download writes an epoch's colon as %3a.
            if [ "$arch" = all ]; then k=$name; else k=$name:$arch; fi
            DEB[$k]="${name}_${ver/:/%3a}_${arch}.deb"
          fi
          name="" ver="" arch="" ;;
      esac
    done < <(apt-cache show --no-all-versions "${missing[@]}" 2>/dev/null; echo)
    for p in "${missing[@]}"; do [ -n "${DEB[$p]:-}" ] || { ok=1; [ "${1:-}" = -v ] && log "apt does not know $p"; }; done
    return $ok
  }
  apt_update() {
    need_root "apt-get update"
    log "apt-get update"
    # Some index (another architecture, a third-party source, a mirror mid-sync) may fail to
    # download; apt then exits non-zero but keeps what it got. What matters is whether our packages
    # became known, which is checked right after.
    $SUDO apt-get update -qq >"$DIR/apt-update.log" 2>&1 ||
      log "apt-get update reported errors (see $DIR/apt-update.log); continuing"
  }
  if ! dpkg --print-foreign-architectures | grep -qx "$DEB_ARCH" &&
     [ "$(dpkg --print-architecture)" != "$DEB_ARCH" ]; then
    need_root "dpkg --add-architecture $DEB_ARCH"
    log "dpkg --add-architecture $DEB_ARCH"
    $SUDO dpkg --add-architecture "$DEB_ARCH"
    apt_update
  elif ! known; then
    apt_update
  fi
  if ! known -v; then
    log "cannot fetch the target libraries (is Debian's archive reachable? see $DIR/apt-update.log)"
    exit 1
  fi

  # Download (into DIR/debs, a cache) and unpack. A stale package index gives 404s: update, retry.
  sandbox=()
  [ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)
  download() { (cd "$DIR/debs" && apt-get download -qq "${sandbox[@]}" "$@") >&2; }
  to_get=()
  for p in "${missing[@]}"; do [ -f "$DIR/debs/${DEB[$p]}" ] || to_get+=("$p"); done
  if [ ${#to_get[@]} -gt 0 ]; then
    log "downloading ${to_get[*]}"
    if ! download "${to_get[@]}"; then
      apt_update
      download "${to_get[@]}"
    fi
  fi
  for p in "${missing[@]}"; do
    deb=$DIR/debs/${DEB[$p]}
    [ -f "$deb" ] || { log "missing $deb after download"; exit 1; }
    dpkg -x "$deb" "$DIR"
    basename "$deb" >"$DIR/.stamps/${p%%:*}"
  done
  log "unpacked ${missing[*]} into $DIR"
fi

# Debian ships some links as absolute paths (/usr/lib/...): point them into the sysroot instead.
find "$DIR/usr" -type l -lname '/*' 2>/dev/null | while read -r l; do
  t=$(readlink "$l")
  case "$t" in "$DIR"/*) continue ;; esac
  ln -sfn "$DIR$t" "$l"
done

[ -f "$DIR/usr/lib/$TRIPLE/libgtest.a" ] || { log "no libgtest.a in $DIR/usr/lib/$TRIPLE"; exit 1; }
echo "$SYSROOT_VERSION $TRIPLE" >"$done_stamp"
