# cmake -DNM=<nm> -DSTAMP=<file> -DOBJECTS=<a.o;b.o> -P check_isa_objects.cmake
# Fails when a per-ISA kernel object defines a weak symbol (W/w/V/v: inline functions, template
# instantiations or variables with vague linkage, which the linker may merge with another file's
# copy built for a different ISA) or a static constructor (_GLOBAL__sub_I_*). Sanitizer
# instrumentation symbols are allowed. See kernels/isa.h.
set(_bad "")
foreach(_o IN LISTS OBJECTS)
  execute_process(COMMAND "${NM}" --defined-only "${_o}" OUTPUT_VARIABLE _syms RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${_o} failed (${_rc})")
  endif()
  string(REPLACE "\n" ";" _lines "${_syms}")
  foreach(_l IN LISTS _lines)
    if(_l MATCHES "^[0-9a-fA-F]* *([A-Za-z]) (.*)$")
      set(_type "${CMAKE_MATCH_1}")
      set(_name "${CMAKE_MATCH_2}")
      if(_name MATCHES "^_*(asan|odr_asan|sancov|ubsan|tsan|msan|lsan)")
        continue()
      endif()
      # Type information (_ZTI: typeinfo, _ZTS: its name) is data, the same bytes in every
      # file: clang's -fsanitize=function (UBSan, preset fuzz) emits it for function types.
      if(_name MATCHES "^_ZT[IS]")
        continue()
      endif()
      if(_type MATCHES "^[WwVv]$" OR _name MATCHES "^_GLOBAL__sub_I_")
        string(APPEND _bad "\n  ${_o}: ${_type} ${_name}")
      endif()
    endif()
  endforeach()
endforeach()
if(_bad)
  message(FATAL_ERROR "per-ISA kernel objects define shared (weak) symbols or static "
                      "constructors (kernels/isa.h):${_bad}")
endif()
file(TOUCH "${STAMP}")
