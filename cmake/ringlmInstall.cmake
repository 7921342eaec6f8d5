# Install rules and package files (issue #8):
#   lib/libringlm.a, lib/libringlm.so              (targets ringlm, ringlm_shared)
#   include/ringlm/{ringlm.h,ringlm.hpp,module.modulemap}
#   bin/ringlm                                     (when RINGLM_BUILD_TOOLS)
#   lib/cmake/ringlm/ringlm{Config,ConfigVersion,Targets*}.cmake   find_package(ringlm)
#   lib/pkgconfig/ringlm.pc                                         pkg-config ringlm
#   lib/libringlm-jni.so, share/java/ringlm.jar    (bindings/, when a JDK was found)
# Try it: cmake --install build/release --prefix /tmp/ringlm-stage
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RINGLM_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/ringlm" CACHE STRING
    "Where ringlmConfig.cmake is installed (relative to the prefix)")

install(TARGETS ringlm ringlm_shared EXPORT ringlmTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(FILES "${PROJECT_SOURCE_DIR}/runtime/include/ringlm/ringlm.h"
              "${PROJECT_SOURCE_DIR}/runtime/include/ringlm/ringlm.hpp"
              "${PROJECT_SOURCE_DIR}/runtime/include/ringlm/module.modulemap"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/ringlm")
if(TARGET ringlm_cli)
  set_target_properties(ringlm_cli PROPERTIES EXPORT_NAME cli)
  install(TARGETS ringlm_cli EXPORT ringlmTargets RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
endif()

install(EXPORT ringlmTargets NAMESPACE ringlm:: DESTINATION "${RINGLM_INSTALL_CMAKEDIR}")
configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/ringlmConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cmake/ringlmConfig.cmake"
  INSTALL_DESTINATION "${RINGLM_INSTALL_CMAKEDIR}"
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/cmake/ringlmConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/cmake/ringlmConfig.cmake"
              "${PROJECT_BINARY_DIR}/cmake/ringlmConfigVersion.cmake"
        DESTINATION "${RINGLM_INSTALL_CMAKEDIR}")

# pkg-config: prefix relative to the .pc file, so a staged/relocated install works as is.
set(_pcdir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
file(RELATIVE_PATH RINGLM_PC_RELATIVE_PREFIX "/prefix/${_pcdir}" "/prefix")
string(REGEX REPLACE "/$" "" RINGLM_PC_RELATIVE_PREFIX "${RINGLM_PC_RELATIVE_PREFIX}")
# The static library's private dependencies: XNNPACK when the backend is built in.
set(RINGLM_PC_LIBS_PRIVATE "-lpthread -lm")
if(RINGLM_HAVE_XNNPACK)
  set(RINGLM_PC_LIBS_PRIVATE "${RINGLM_PC_LIBS_PRIVATE} -lXNNPACK")
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/ringlm.pc.in" "${PROJECT_BINARY_DIR}/cmake/ringlm.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/cmake/ringlm.pc" DESTINATION "${_pcdir}")
