# Tests for using ringlm from applications (issue #8). Included from the top-level
# CMakeLists.txt when RINGLM_BUILD_TESTS. All carry the CTest label "apps"
# (ctest -L apps runs just these).
#   header_*           ringlm.h as C99/C11/C++17 and ringlm.hpp as C++17, -Wall -Wextra
#                      -pedantic -Werror (gcc, and clang when present); the module map (clang)
#   jni_*              the Java API through libringlm-jni (host builds with a JDK); the .so imports
#                      no allocator
#   consumer_*         cmake --install into a staging prefix, then examples/consumer configured
#                      and built against it (find_package + pkg-config), run on a converted model
#   embedded_*         examples/embedded: the model linked into the binary, no file I/O (strace)
set(_inc "${PROJECT_SOURCE_DIR}/runtime/include")
set(_hc "${PROJECT_SOURCE_DIR}/cmake/header_check")
set(_strict -Wall -Wextra -pedantic -Werror)

# ---- header hygiene ------------------------------------------------------------------------
string(TOLOWER "${CMAKE_C_COMPILER_ID}" _cid)
set(_compilers "${_cid}|${CMAKE_C_COMPILER}|${CMAKE_CXX_COMPILER}")
if(NOT CMAKE_CROSSCOMPILING)
  find_program(RINGLM_CLANG clang)
  find_program(RINGLM_CLANGXX clang++)
  if(RINGLM_CLANG AND RINGLM_CLANGXX AND NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    list(APPEND _compilers "clang|${RINGLM_CLANG}|${RINGLM_CLANGXX}")
  endif()
endif()
foreach(_entry IN LISTS _compilers)
  string(REPLACE "|" ";" _entry "${_entry}")
  list(GET _entry 0 _id)
  list(GET _entry 1 _cc)
  list(GET _entry 2 _cxx)
  foreach(_std c99 c11)
    add_test(NAME header_${_std}_${_id}
             COMMAND "${_cc}" -std=${_std} ${_strict} -fsyntax-only -I "${_inc}" -x c "${_hc}/check.c")
  endforeach()
  add_test(NAME header_cxx17_${_id}
           COMMAND "${_cxx}" -std=c++17 ${_strict} -fsyntax-only -I "${_inc}" -x c++ "${_hc}/check.cc")
  add_test(NAME header_cxx17_noexcept_${_id}
           COMMAND "${_cxx}" -std=c++17 ${_strict} -Wshadow -fno-exceptions -fno-rtti -fsyntax-only
                   -I "${_inc}" -x c++ "${_hc}/check.cc")
  # ringlm.h is also valid C++ on its own (extern "C").
  add_test(NAME header_c_as_cxx17_${_id}
           COMMAND "${_cxx}" -std=c++17 ${_strict} -fsyntax-only -I "${_inc}" -x c++ "${_hc}/check.c")
  set_tests_properties(header_c99_${_id} header_c11_${_id} header_cxx17_${_id}
                       header_cxx17_noexcept_${_id} header_c_as_cxx17_${_id}
                       PROPERTIES LABELS apps)
endforeach()
if(RINGLM_CLANG)
  # Objective-C @import through runtime/include/ringlm/module.modulemap (what Swift uses too).
  add_test(NAME header_modulemap
           COMMAND "${RINGLM_CLANG}" -x objective-c -fmodules -fsyntax-only ${_strict}
                   "-fmodules-cache-path=${PROJECT_BINARY_DIR}/modules-cache"
                   "-fmodule-map-file=${_inc}/ringlm/module.modulemap" -I "${_inc}"
                   "${_hc}/check_module.m")
  set_tests_properties(header_modulemap PROPERTIES LABELS apps)
endif()

# ---- Java / JNI ----------------------------------------------------------------------------
if(TARGET ringlm_jni)
  if(NOT RINGLM_SANITIZE)
    add_test(NAME jni_no_allocator_symbols
             COMMAND "${CMAKE_COMMAND}" "-DLIB=$<TARGET_FILE:ringlm_jni>"
                     -P "${PROJECT_SOURCE_DIR}/cmake/CheckNoAllocator.cmake")
    set_tests_properties(jni_no_allocator_symbols PROPERTIES LABELS apps)
  endif()
  if(RINGLM_JAVA_CLASSES AND NOT CMAKE_CROSSCOMPILING AND TARGET ringlm_cli)
    find_package(Java 1.8 COMPONENTS Runtime Development QUIET)
    set(_tc "${PROJECT_BINARY_DIR}/bindings/java/test-classes")
    set(_test_src "${PROJECT_SOURCE_DIR}/bindings/java/src/test/java/dev/ringlm/RingLmTest.java")
    add_custom_command(
      OUTPUT "${_tc}/dev/ringlm/RingLmTest.class"
      COMMAND "${Java_JAVAC_EXECUTABLE}" -encoding UTF-8 -Xlint:all -Werror
              -cp "${RINGLM_JAVA_CLASSES}" -d "${_tc}" "${_test_src}"
      DEPENDS "${_test_src}" "${RINGLM_JAVA_JAR}"
      COMMENT "javac RingLmTest")
    add_custom_target(ringlm_java_test ALL DEPENDS "${_tc}/dev/ringlm/RingLmTest.class")
    set(_jenv "RINGLM_SHARED_DIR=${RINGLM_SHARED_DIR}")
    if(RINGLM_SANITIZE)
      # An ASan-instrumented JNI library inside the JVM: the ASan runtime must be loaded first,
      # and the JVM's own SIGSEGV handling (implicit null checks) must stay the JVM's.
      execute_process(COMMAND "${CMAKE_C_COMPILER}" -print-file-name=libasan.so
                      OUTPUT_VARIABLE _asan OUTPUT_STRIP_TRAILING_WHITESPACE)
      list(APPEND _jenv "LD_PRELOAD=${_asan}"
           "ASAN_OPTIONS=detect_leaks=0:handle_segv=0:allow_user_segv_handler=1:use_sigaltstack=0")
    endif()
    add_test(NAME jni_java_test
             COMMAND "${Java_JAVA_EXECUTABLE}" -Xcheck:jni
                     "-Djava.library.path=$<TARGET_FILE_DIR:ringlm_jni>"
                     -cp "${RINGLM_JAVA_CLASSES}:${_tc}" dev.ringlm.RingLmTest
                     "${RINGLM_SHARED_DIR}" "$<TARGET_FILE:ringlm_cli>"
                     "${PROJECT_BINARY_DIR}/bindings/java/tmp")
    set_tests_properties(jni_java_test PROPERTIES SKIP_RETURN_CODE 77 LABELS apps
                         ENVIRONMENT "${_jenv}" TIMEOUT 300)
  endif()
endif()

# ---- consumer project against a staging install ------------------------------------------
if(TARGET ringlm_cli)
  set(_emu "")
  if(CMAKE_CROSSCOMPILING_EMULATOR)
    list(JOIN CMAKE_CROSSCOMPILING_EMULATOR "|" _emu)
  endif()
  set(_san_flags "")
  if(RINGLM_SANITIZE)
    set(_san_flags "-fsanitize=address,undefined")
  endif()
  add_test(NAME consumer_find_package
           COMMAND "${CMAKE_COMMAND}"
                   "-DBUILD_DIR=${PROJECT_BINARY_DIR}"
                   "-DSTAGE=${PROJECT_BINARY_DIR}/consumer-test/stage"
                   "-DWORK=${PROJECT_BINARY_DIR}/consumer-test/build"
                   "-DSOURCE=${PROJECT_SOURCE_DIR}/examples/consumer"
                   "-DGENERATOR=${CMAKE_GENERATOR}"
                   "-DTOOLCHAIN=${CMAKE_TOOLCHAIN_FILE}"
                   "-DSYSROOT=${RINGLM_SYSROOT}"
                   "-DEMULATOR=${_emu}"
                   "-DSAN_FLAGS=${_san_flags}"
                   "-DSHARED_DIR=${RINGLM_SHARED_DIR}"
                   -P "${PROJECT_SOURCE_DIR}/cmake/ConsumerTest.cmake")
  set_tests_properties(consumer_find_package PROPERTIES LABELS apps TIMEOUT 900
                       SKIP_REGULAR_EXPRESSION "SKIPPED:"
                       RESOURCE_LOCK ringlm_install_stage)
endif()

# ---- embedded model ------------------------------------------------------------------------
add_subdirectory("${PROJECT_SOURCE_DIR}/examples/embedded" "${PROJECT_BINARY_DIR}/examples/embedded")
