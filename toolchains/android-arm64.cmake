# Android arm64-v8a: a thin wrapper over the NDK's own toolchain file.
#   cmake --preset android-arm64      (library only: RINGLM_BUILD_TOOLS/TESTS OFF)
#   cmake -B build/android-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchains/android-arm64.cmake \
#         [-DANDROID_NDK=/path/to/ndk] [-DANDROID_PLATFORM=android-24]
# The NDK is found from (first that exists): -DANDROID_NDK, $ANDROID_NDK, $ANDROID_NDK_ROOT,
# $ANDROID_NDK_HOME, the newest $ANDROID_HOME/ndk/* or $ANDROID_SDK_ROOT/ndk/*.
# Defaults: ANDROID_ABI=arm64-v8a, ANDROID_PLATFORM=android-24, ANDROID_STL=c++_static.

set(_ringlm_ndk_candidates "")
foreach(_c "${ANDROID_NDK}" "$ENV{ANDROID_NDK}" "$ENV{ANDROID_NDK_ROOT}" "$ENV{ANDROID_NDK_HOME}")
  if(_c)
    list(APPEND _ringlm_ndk_candidates "${_c}")
  endif()
endforeach()
foreach(_sdk "$ENV{ANDROID_HOME}" "$ENV{ANDROID_SDK_ROOT}")
  if(_sdk AND IS_DIRECTORY "${_sdk}/ndk")
    file(GLOB _ndks LIST_DIRECTORIES true "${_sdk}/ndk/*")
    list(SORT _ndks COMPARE NATURAL ORDER DESCENDING)
    list(APPEND _ringlm_ndk_candidates ${_ndks})
  endif()
  if(_sdk AND IS_DIRECTORY "${_sdk}/ndk-bundle")
    list(APPEND _ringlm_ndk_candidates "${_sdk}/ndk-bundle")
  endif()
endforeach()

set(_ringlm_ndk "")
foreach(_c IN LISTS _ringlm_ndk_candidates)
  if(_c AND EXISTS "${_c}/build/cmake/android.toolchain.cmake")
    set(_ringlm_ndk "${_c}")
    break()
  endif()
endforeach()
if(NOT _ringlm_ndk)
  message(FATAL_ERROR
    "toolchains/android-arm64.cmake: no Android NDK found.\n"
    "Install one (Android Studio > SDK Manager > NDK, or unpack android-ndk-r26 or newer) and "
    "point to it with -DANDROID_NDK=/path/to/ndk or the environment variable ANDROID_NDK "
    "(ANDROID_NDK_ROOT, ANDROID_NDK_HOME and ANDROID_HOME/ndk/<version> are tried too). "
    "Looked for <ndk>/build/cmake/android.toolchain.cmake in: [${_ringlm_ndk_candidates}]")
endif()
set(ANDROID_NDK "${_ringlm_ndk}" CACHE PATH "Android NDK used by toolchains/android-arm64.cmake")

set(ANDROID_ABI arm64-v8a)
if(NOT ANDROID_PLATFORM)
  set(ANDROID_PLATFORM android-24)
endif()
if(NOT ANDROID_STL)
  set(ANDROID_STL c++_static)
endif()
# try_compile projects re-read this file: hand them the NDK we found.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ANDROID_NDK)

include("${ANDROID_NDK}/build/cmake/android.toolchain.cmake")
