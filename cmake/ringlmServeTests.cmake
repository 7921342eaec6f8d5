# Tests of `ringlm serve` and the Python package (issue #20), with real clients. Included from
# the top-level CMakeLists.txt when RINGLM_BUILD_TESTS. Host builds with the server only, and not
# the sanitizer builds (the Python package would load an ASan libringlm.so into an uninstrumented
# interpreter; the server's C++ is the same code the release suite runs). All carry the CTest
# label "serve".
#   serve_models        fixture: stories260K (f32) and a 2-layer random ChatML model, converted
#                       into build/<preset>/serve-test
#   python_bindings     pytest bindings/python/tests (RINGLM_LIBRARY = the built libringlm.so,
#                       the package from the source tree through PYTHONPATH: no pip install)
#   serve_clients       pytest tests/serve/test_serve_clients.py (urllib)
#   serve_hostile       pytest tests/serve/test_serve_hostile.py (bad requests, slowloris)
#   serve_load          pytest tests/serve/test_serve_load.py (200 requests, 16 clients, 2 slots)
#   serve_npm_install   fixture: tests/serve/package-lock.json's packages (npm ci) into
#                       build/<preset>/serve-test/node
#   serve_openai_node   the official OpenAI JavaScript client (tests/serve/openai_client.mjs)
#   serve_chat_page     the chat page in headless chromium via puppeteer-core (chat_page.mjs);
#                       writes build/<preset>/serve-test/chat-page.png
# Tests skip (exit 77, the reason printed) without python3-pytest, node / npm, chromium, or
# ../shared.
if(NOT RINGLM_HAVE_SERVE OR NOT TARGET ringlm_cli OR RINGLM_SANITIZE OR CMAKE_CROSSCOMPILING)
  return()
endif()

# The interpreter: the first of Debian's /usr/bin/python3 (where python3-pytest installs) and the
# PATH's python3 that has pytest; any python3 otherwise (the tests then skip, saying why).
set(RINGLM_TEST_PYTHON "" CACHE FILEPATH "python3 for the Python and serve tests (default: one with pytest)")
if(NOT RINGLM_TEST_PYTHON)
  find_program(_py_path python3)
  set(_first "")
  foreach(_cand /usr/bin/python3 ${_py_path})
    if(NOT EXISTS "${_cand}")
      continue()
    endif()
    if(NOT _first)
      set(_first "${_cand}")
    endif()
    execute_process(COMMAND "${_cand}" -c "import pytest" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      set(_first "${_cand}")
      break()
    endif()
  endforeach()
  set(RINGLM_TEST_PYTHON "${_first}")
endif()
message(STATUS "ringlm: serve / Python tests with ${RINGLM_TEST_PYTHON}")

set(_sd "${PROJECT_BINARY_DIR}/serve-test")
set(_src "${PROJECT_SOURCE_DIR}/tests/serve")
set(_env "RINGLM_CLI=$<TARGET_FILE:ringlm_cli>" "RINGLM_SHARED_DIR=${RINGLM_SHARED_DIR}"
         "RINGLM_TEST_DIR=${_sd}" "RINGLM_LIBRARY=$<TARGET_FILE:ringlm_shared>"
         "RINGLM_NODE_DIR=${_sd}/node" "PYTHONDONTWRITEBYTECODE=1"
         "PYTHONPATH=${PROJECT_SOURCE_DIR}/bindings/python:${_src}")

if(RINGLM_TEST_PYTHON)
  add_test(NAME serve_models
           COMMAND "${RINGLM_TEST_PYTHON}" -c "import serve_util; serve_util.stories_model(); serve_util.chat_model()")
  set_tests_properties(serve_models PROPERTIES FIXTURES_SETUP serve_models ENVIRONMENT "${_env}"
                       LABELS serve)
  set(_pytests python_bindings "${PROJECT_SOURCE_DIR}/bindings/python/tests"
               serve_clients "${_src}/test_serve_clients.py"
               serve_hostile "${_src}/test_serve_hostile.py"
               serve_load "${_src}/test_serve_load.py")
  while(_pytests)
    list(POP_FRONT _pytests _name _path)
    add_test(NAME ${_name} COMMAND "${RINGLM_TEST_PYTHON}" "${_src}/run_pytest.py" "${_path}")
    set_tests_properties(${_name} PROPERTIES FIXTURES_REQUIRED serve_models ENVIRONMENT "${_env}"
                         SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS serve)
  endwhile()
endif()

find_program(RINGLM_NODE node)
find_program(RINGLM_NPM npm)
if(RINGLM_NODE AND RINGLM_NPM)
  add_test(NAME serve_npm_install COMMAND sh "${_src}/npm_install.sh" "${_src}" "${_sd}/node")
  set_tests_properties(serve_npm_install PROPERTIES FIXTURES_SETUP serve_npm SKIP_RETURN_CODE 77
                       TIMEOUT 300 LABELS serve)
  foreach(_t openai_node:openai_client chat_page:chat_page)
    string(REPLACE ":" ";" _t "${_t}")
    list(GET _t 0 _name)
    list(GET _t 1 _script)
    add_test(NAME serve_${_name} COMMAND "${RINGLM_NODE}" "${_src}/${_script}.mjs")
    set_tests_properties(serve_${_name} PROPERTIES FIXTURES_REQUIRED "serve_models;serve_npm"
                         ENVIRONMENT "${_env}" SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS serve)
  endforeach()
else()
  foreach(_name openai_node chat_page)
    add_test(NAME serve_${_name}
             COMMAND sh -c "echo 'SKIP: node / npm not found (scripts/setup.sh installs them)'; exit 77")
    set_tests_properties(serve_${_name} PROPERTIES SKIP_RETURN_CODE 77 LABELS serve)
  endforeach()
endif()
