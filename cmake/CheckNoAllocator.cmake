# cmake -DLIB=path/to/lib.so -P CheckNoAllocator.cmake
# Fails when the shared library imports an allocator (the same list as tests/test_alloc.cc).
find_program(NM NAMES nm REQUIRED)
execute_process(COMMAND "${NM}" -D --undefined-only "${LIB}" OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
set(re "(^|[ \t\n])(malloc|calloc|realloc|free|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|strdup|strndup|_Znwm|_Znam|_Znwj|_Znaj|_ZdlPv[A-Za-z0-9_]*|_ZdaPv[A-Za-z0-9_]*|__cxa_allocate_exception|__cxa_throw)(@|[ \t\n]|$)")
string(REGEX MATCHALL "${re}" hits "${out}")
if(hits)
  message(FATAL_ERROR "${LIB} imports allocator symbols: ${hits}\n${out}")
endif()
message(STATUS "${LIB}: no allocator among its imports:\n${out}")
