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
# apt runs with a private state (CACHE/apt, see below: its own package lists for ARCH only,
# fetched from the machine's configured Debian sources) instead of `dpkg --add-architecture` + a
# system-wide `apt-get update`: the host's apt is left exactly as it was. (A foreign architecture
# added to the host makes every later `apt-get update` on it fetch that architecture's indices too,
# and exit non-zero whenever one of them is momentarily inconsistent on the mirror -- which breaks
# `apt-get update && apt-get install` in scripts that have nothing to do with ARM.)
# So no root is needed either; only Debian's archive has to be reachable.
#
# Idempotent: a package already unpacked (DIR/.stamps/<pkg>) is skipped, and when every package is
# there the script returns at once without calling apt at all. The package lists are fetched only
# when apt does not know a wanted package yet (or a download 404s because they went stale).
# The private apt state and the downloaded .deb files are kept in a cache shared by all build
# directories and checkouts of this user: $RINGLM_SYSROOT_CACHE, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/ringlm/sysroot-<arch>, else DIR/.cache when that is not writable.
set -euo pipefail

usage() { echo "usage: $0 aarch64|armhf DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
case "$1" in
  aarch64|arm64) DEB_ARCH=arm64; TRIPLE=aarch64-linux-gnu ;;
  armhf|arm)     DEB_ARCH=armhf; TRIPLE=arm-linux-gnueabihf ;;
  *) usage ;;
esac
mkdir -p "$2"
DIR=$(cd "$2" && pwd)

# What the runtime, tools and tests link or include on the target.
PKGS=(libxnnpack-dev libxnnpack0 libpthreadpool-dev libpthreadpool0 libcpuinfo-dev libcpuinfo0
      libgtest-dev libflatbuffers-dev libflatbuffers2 nlohmann-json3-dev)
# Bump when the package list changes so existing sysroots get the new ones.
SYSROOT_VERSION=2

log() { echo "make-sysroot[$DEB_ARCH]: $*" >&2; }
done_stamp="$DIR/.ringlm-sysroot"
is_done() { [ -f "$done_stamp" ] && [ "$(cat "$done_stamp")" = "$SYSROOT_VERSION $TRIPLE" ]; }
is_done && exit 0

CACHE=${RINGLM_SYSROOT_CACHE:-}
if [ -z "$CACHE" ] && [ -n "${XDG_CACHE_HOME:-${HOME:-}}" ]; then
  CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/ringlm/sysroot-$DEB_ARCH"
fi
if [ -z "$CACHE" ] || ! mkdir -p "$CACHE" 2>/dev/null || [ ! -w "$CACHE" ]; then
  CACHE="$DIR/.cache"
fi
mkdir -p "$DIR/.stamps" "$CACHE/debs"
# One writer at a time (two configures of the same build dir, two checkouts sharing the cache).
exec 8>"$DIR/.lock"
flock 8
is_done && exit 0
exec 9>"$CACHE/.lock"
flock 9

missing=()
for p in "${PKGS[@]}"; do [ -f "$DIR/.stamps/$p" ] || missing+=("$p"); done

if [ ${#missing[@]} -gt 0 ]; then
  # ---- a private apt for DEB_ARCH -------------------------------------------------------------
  A="$CACHE/apt"
  mkdir -p "$A/lists/partial" "$A/cache/archives/partial"
  : >>"$A/status"  # an empty dpkg status: nothing is "installed" for this apt
  cat >"$A/apt.conf" <<EOF
APT::Architecture "$DEB_ARCH";
APT::Architectures { "$DEB_ARCH"; };
Dir::State::Lists "$A/lists";
Dir::State::status "$A/status";
Dir::Cache "$A/cache";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
  if [ "$(id -u)" -eq 0 ]; then
    # root: apt's download sandbox user (_apt) could not write into a build tree.
    echo 'APT::Sandbox::User "root";' >>"$A/apt.conf"
  fi
  export APT_CONFIG="$A/apt.conf"

  # One apt-cache call for all packages (each call rebuilds apt's cache: seconds, not millis).
  # Fills DEB[pkg] with the .deb file name of apt's candidate; returns 1 if any is unknown.
  declare -A DEB=()
  known() {
    local name="" ver="" arch="" line p k ok=0
    DEB=()
    while IFS= read -r line; do
      case "$line" in
        "Package: "*) name=${line#Package: } ;;
        "Version: "*) ver=${line#Version: } ;;
        "Architecture: "*) arch=${line#Architecture: } ;;
        "")
          # apt-get download writes an epoch's colon as %3a.
          if [ -n "$name" ]; then DEB[$name]="${name}_${ver/:/%3a}_${arch}.deb"; fi
          name="" ver="" arch="" ;;
      esac
    done < <(apt-cache show --no-all-versions "${missing[@]}" 2>/dev/null; echo)
    for p in "${missing[@]}"; do
      [ -n "${DEB[$p]:-}" ] && continue
      ok=1
      if [ "${1:-}" = -v ]; then log "apt does not know $p"; fi
    done
    return $ok
  }
  apt_update() {
    log "fetching the $DEB_ARCH package lists (apt-get update with a private state in $A)"
    # An index that fails (a mirror mid-sync, an unreachable third-party source) only makes apt
    # exit non-zero: what matters is whether our packages became known, checked right after.
    apt-get update -qq >"$A/update.log" 2>&1 ||
      log "apt-get update reported errors (see $A/update.log); continuing"
  }
  if ! known; then apt_update; fi
  if ! known -v; then
    log "cannot fetch the target libraries (is Debian's archive reachable? see $A/update.log)"
    exit 1
  fi

  # ---- download (into CACHE/debs) and unpack -------------------------------------------------
  download() { (cd "$CACHE/debs" && apt-get download -qq "$@") >&2; }
  to_get=()
  for p in "${missing[@]}"; do [ -f "$CACHE/debs/${DEB[$p]}" ] || to_get+=("$p"); done
  if [ ${#to_get[@]} -gt 0 ]; then
    log "downloading ${to_get[*]}"
    if ! download "${to_get[@]}"; then
      apt_update  # stale lists: the archive moved on
      known -v || exit 1
      download "${to_get[@]}"
    fi
  fi
  for p in "${missing[@]}"; do
    deb=$CACHE/debs/${DEB[$p]}
    [ -f "$deb" ] || { log "missing $deb after download"; exit 1; }
    dpkg -x "$deb" "$DIR"
    basename "$deb" >"$DIR/.stamps/$p"
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
