# Cross-compile for 32-bit ARM Linux, hard float (Raspberry Pi 2/3/4 with a 32-bit OS,
# Cortex-A7-class boards): ARMv7-A with NEON and VFPv4.
#   cmake --preset armhf              (or: cmake -B build/armhf -G Ninja
#                                       -DCMAKE_TOOLCHAIN_FILE=toolchains/arm-linux-gnueabihf.cmake)
# Tests run under qemu-arm -cpu $RINGLM_QEMU_CPU (default: cache variable RINGLM_QEMU_CPU,
# cortex-a7 = Pi 2).
set(CMAKE_SYSTEM_PROCESSOR armv7-a)
set(RINGLM_TRIPLE arm-linux-gnueabihf)
set(RINGLM_SYSROOT_ARCH armhf)
set(RINGLM_QEMU_ARCH arm)
set(_ringlm_default_cpu cortex-a7)
set(_ringlm_arch_flags "-march=armv7-a -mfpu=neon-vfpv4 -mfloat-abi=hard")
# GCC notes that passing some std:: types changed ABI in GCC 7.1: irrelevant, everything here is
# built by GCC 12, and the notes drown the build log.
set(_ringlm_cxx_flags "-Wno-psabi")
include("${CMAKE_CURRENT_LIST_DIR}/linux-arm-common.cmake")
