# cmake -DROOT=<source dir> -P cmake/check_layers.cmake
#
# Enforces docs/architecture.md's include rule: a folder may include only its own headers and
# those of the layers below it. Every quoted #include of every source file in a layered folder is
# resolved the way the build resolves it (the including file's folder first, then the project
# root, runtime/, runtime/include/, kernels/ and tools/) and the layer of the file it lands on must be in
# the includer's allowed list. Angle-bracket includes are system / third-party headers and are
# not checked. Fails (non-zero exit, one line per offending include) otherwise; CTest runs it as
# the test `layers`.
#
# Layers, bottom to top:
#   platform   the OS: threads, CPU features                      (platform/)
#   kernels    the kernel contract, reference and ISA kernels       (kernels/)
#   public     the C ABI and its C++ wrapper                       (runtime/include/ringlm/)
#   schema     the FlatBuffers header generated from schema/model.fbs
#   runtime    libringlm: model, session, transformer, ...         (runtime/)
#   convert    the converter library                              (convert/)
#   tools      the ringlm command                                 (tools/)
#   bindings, examples: the public header only.
# tests/ and fuzz/ may include anything and are not checked.
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source dir> -P check_layers.cmake")
endif()

set(_allowed_platform platform)
set(_allowed_kernels kernels platform)
set(_allowed_public public)
set(_allowed_runtime runtime kernels platform public schema)
set(_allowed_convert convert runtime kernels platform public schema)
set(_allowed_tools tools convert runtime kernels platform public schema)
set(_allowed_bindings bindings public)
set(_allowed_examples examples public)

# The layer of a path relative to ROOT, or "" for one outside every layer.
function(layer_of rel out)
  if(rel MATCHES "^runtime/include/")
    set(${out} public PARENT_SCOPE)
  elseif(rel MATCHES "^(runtime|kernels|platform|convert|bindings|examples)/")
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  elseif(rel MATCHES "^tools/")
    set(${out} tools PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

file(GLOB_RECURSE _files RELATIVE "${ROOT}"
     "${ROOT}/runtime/*.cc" "${ROOT}/runtime/*.h" "${ROOT}/runtime/*.inc" "${ROOT}/runtime/*.hpp"
     "${ROOT}/kernels/*.cc" "${ROOT}/kernels/*.h" "${ROOT}/kernels/*.inc"
     "${ROOT}/platform/*.cc" "${ROOT}/platform/*.h" "${ROOT}/platform/*.inc"
     "${ROOT}/convert/*.cc" "${ROOT}/convert/*.h"
     "${ROOT}/tools/*.cc" "${ROOT}/tools/*.h"
     "${ROOT}/bindings/*.c" "${ROOT}/bindings/*.cc" "${ROOT}/bindings/*.h"
     "${ROOT}/examples/*.c" "${ROOT}/examples/*.cc" "${ROOT}/examples/*.h")
set(_bad "")
set(_checked 0)
foreach(_f IN LISTS _files)
  if(_f MATCHES "(^|/)build/")
    continue()
  endif()
  layer_of("${_f}" _from)
  if(_from STREQUAL "")
    continue()
  endif()
  get_filename_component(_dir "${_f}" DIRECTORY)
  file(STRINGS "${ROOT}/${_f}" _incs REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(_line IN LISTS _incs)
    if(NOT _line MATCHES "\"([^\"]+)\"")
      continue()
    endif()
    set(_inc "${CMAKE_MATCH_1}")
    math(EXPR _checked "${_checked} + 1")
    if(_inc STREQUAL "model_generated.h")
      set(_to schema)
    elseif(_inc STREQUAL "dev_ringlm_NativeBridge.h")  # javac -h output, in the build tree
      set(_to bindings)
    elseif(_inc STREQUAL "serve_chat_page.h")  # tools/serve/chat.html embedded, in the build tree
      set(_to tools)
    else()
      set(_to "")
      foreach(_base "${_dir}" "." "runtime" "runtime/include" "kernels" "tools")
        if(EXISTS "${ROOT}/${_base}/${_inc}")
          file(RELATIVE_PATH _rel "${ROOT}" "${ROOT}/${_base}/${_inc}")
          layer_of("${_rel}" _to)
          if(_to STREQUAL "")
            set(_to "<outside: ${_rel}>")
          endif()
          break()
        endif()
      endforeach()
      if(_to STREQUAL "")
        string(APPEND _bad "\n  ${_f}: #include \"${_inc}\" resolves to no file of the project")
        continue()
      endif()
    endif()
    if(NOT _to IN_LIST _allowed_${_from})
      string(APPEND _bad "\n  ${_f} (${_from}) includes \"${_inc}\" (${_to}); ${_from} may include: "
             "${_allowed_${_from}}")
    endif()
  endforeach()
endforeach()
if(_bad)
  message(FATAL_ERROR "layering violations (docs/architecture.md):${_bad}")
endif()
message(STATUS "layers: ${_checked} includes checked, no violation")
