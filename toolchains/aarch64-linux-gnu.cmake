# Cross-compile for 64-bit ARM Linux (Raspberry Pi 3/4/5 with a 64-bit OS, other ARMv8-A boards).
#   cmake --preset aarch64            (or: cmake -B build/aarch64 -G Ninja
#                                       -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-linux-gnu.cmake)
# Baseline ARMv8-A (GCC's default for this triple: NEON always there); newer extensions (dotprod,
# fp16, i8mm) are the runtime's business to detect. Tests run under qemu-aarch64 -cpu
# $RINGLM_QEMU_CPU (default: cache variable RINGLM_QEMU_CPU, cortex-a72 = Pi 4).
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(RINGLM_TRIPLE aarch64-linux-gnu)
set(RINGLM_SYSROOT_ARCH aarch64)
set(RINGLM_QEMU_ARCH aarch64)
set(_ringlm_default_cpu cortex-a72)
set(_ringlm_arch_flags "")
include("${CMAKE_CURRENT_LIST_DIR}/linux-arm-common.cmake")
