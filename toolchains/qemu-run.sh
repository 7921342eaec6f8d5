#!/bin/sh
# CMAKE_CROSSCOMPILING_EMULATOR of the ARM Linux toolchain files: runs a target program under
# qemu-user. Usage (the toolchain file passes the first three):
#   qemu-run.sh ARCH SYSROOT DEFAULT_CPU PROGRAM [ARGS...]
#     ARCH        aarch64 | arm
#     SYSROOT     make-sysroot.sh's directory (its usr/lib/<triple> goes on the guest's
#                 LD_LIBRARY_PATH, for libXNNPACK.so and friends)
#     DEFAULT_CPU qemu -cpu when $RINGLM_QEMU_CPU is unset or empty
# Environment: RINGLM_QEMU_CPU (e.g. cortex-a72, cortex-a76, max; cortex-a7, cortex-a15),
#              RINGLM_QEMU (another qemu binary).
# libc/libstdc++ and the dynamic loader come from the cross toolchain's sysroot /usr/<triple>.
set -eu
[ $# -ge 4 ] || { echo "usage: $0 aarch64|arm SYSROOT DEFAULT_CPU PROGRAM [ARGS...]" >&2; exit 2; }
arch=$1 sysroot=$2 cpu=${RINGLM_QEMU_CPU:-$3}
shift 3
case "$arch" in
  aarch64) qemu=qemu-aarch64 triple=aarch64-linux-gnu ;;
  arm)     qemu=qemu-arm     triple=arm-linux-gnueabihf ;;
  *) echo "$0: unknown arch $arch" >&2; exit 2 ;;
esac
exec "${RINGLM_QEMU:-$qemu}" -L "/usr/$triple" -cpu "$cpu" \
  -E "LD_LIBRARY_PATH=$sysroot/usr/lib/$triple" "$@"
