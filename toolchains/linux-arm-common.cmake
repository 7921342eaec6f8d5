# Shared part of the ARM Linux toolchain files (aarch64-linux-gnu.cmake, arm-linux-gnueabihf.cmake).
# The including file sets RINGLM_TRIPLE, RINGLM_QEMU_ARCH, RINGLM_SYSROOT_ARCH, _ringlm_default_cpu
# and, optionally, _ringlm_arch_flags (C, C++, ASM) and _ringlm_cxx_flags (C++ only).
#
# Compilers: Debian's g++-<triple> (libc/libstdc++ live in its own sysroot /usr/<triple>).
# Extra target libraries (XNNPACK, pthreadpool, cpuinfo, GoogleTest, flatbuffers and nlohmann-json
# headers) come from RINGLM_SYSROOT, filled by make-sysroot.sh (run automatically on first configure).
# Tests run through CMAKE_CROSSCOMPILING_EMULATOR = qemu-run.sh (qemu-user, CPU = $RINGLM_QEMU_CPU
# from the environment, else the cache variable RINGLM_QEMU_CPU).

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${RINGLM_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${RINGLM_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${RINGLM_TRIPLE})

set(CMAKE_C_FLAGS_INIT "${_ringlm_arch_flags}")
set(CMAKE_CXX_FLAGS_INIT "${_ringlm_arch_flags} ${_ringlm_cxx_flags}")
set(CMAKE_ASM_FLAGS_INIT "${_ringlm_arch_flags}")

# Where make-sysroot.sh puts the target libraries. Default: <build dir>/sysroot. The value is
# handed on to try_compile projects (whose CMAKE_BINARY_DIR is elsewhere).
if(NOT RINGLM_SYSROOT)
  set(RINGLM_SYSROOT "${CMAKE_BINARY_DIR}/sysroot")
endif()
set(RINGLM_SYSROOT "${RINGLM_SYSROOT}" CACHE PATH "Target libraries fetched by make-sysroot.sh")
set(RINGLM_QEMU_CPU "${_ringlm_default_cpu}" CACHE STRING
    "qemu -cpu for tests; $RINGLM_QEMU_CPU in the environment overrides it at run time")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES RINGLM_SYSROOT RINGLM_QEMU_CPU)

if(NOT EXISTS "${RINGLM_SYSROOT}/.ringlm-sysroot")
  message(STATUS "Fetching ${RINGLM_SYSROOT_ARCH} target libraries into ${RINGLM_SYSROOT}")
  execute_process(
    COMMAND bash "${CMAKE_CURRENT_LIST_DIR}/make-sysroot.sh" ${RINGLM_SYSROOT_ARCH} "${RINGLM_SYSROOT}"
    RESULT_VARIABLE _ringlm_rc)
  if(NOT _ringlm_rc EQUAL 0)
    message(FATAL_ERROR "make-sysroot.sh ${RINGLM_SYSROOT_ARCH} ${RINGLM_SYSROOT} failed "
                        "(exit ${_ringlm_rc}); see its messages above")
  endif()
endif()

# Look for target headers/libraries/packages only in the fetched sysroot and the toolchain's own;
# programs (flatc) on the host.
set(CMAKE_FIND_ROOT_PATH "${RINGLM_SYSROOT}" "/usr/${RINGLM_TRIPLE}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# The cross compiler does not search /usr/include: headers used without find_package
# (flatbuffers/flatbuffers.h from the generated schema code) come from the sysroot.
set(CMAKE_C_STANDARD_INCLUDE_DIRECTORIES "${RINGLM_SYSROOT}/usr/include")
set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES "${RINGLM_SYSROOT}/usr/include")
# Shared libraries from the sysroot (libXNNPACK.so) pull in others (libcpuinfo, libpthreadpool).
foreach(_t EXE SHARED MODULE)
  set(CMAKE_${_t}_LINKER_FLAGS_INIT "-Wl,-rpath-link,${RINGLM_SYSROOT}/usr/lib/${RINGLM_TRIPLE}")
endforeach()

set(CMAKE_CROSSCOMPILING_EMULATOR "${CMAKE_CURRENT_LIST_DIR}/qemu-run.sh;${RINGLM_QEMU_ARCH};${RINGLM_SYSROOT};${RINGLM_QEMU_CPU}")
