# GemmHelpers.cmake: how every test of the project is registered (as nng's
# NNGHelpers.cmake does for nng). Included from the root CMakeLists.txt, so
# tests/, blas/tests and python/ use the same two functions:
#
#   gemm_add_test(NAME name COMMAND cmd [args...] LABELS label...
#                 [TIMEOUT s] [ENVIRONMENT VAR=value...]
#                 [WORKING_DIRECTORY dir])
#     Any command (a shell script, a plain program, pytest).
#
#   gemm_test(name SOURCES src... [LIBS lib...] LABELS label...
#             [TIMEOUT s] [ENVIRONMENT VAR=value...] [ARGS criterion args...])
#     A Criterion program built from SOURCES with tests/util/criterion_main.c
#     as its main(), run with one worker (-j1) and --verbose=0.
#
# Every test gets a timeout (default 60 s), at least one label from
# GEMM_TEST_LABELS, and SKIP_RETURN_CODE 77: a test that cannot run here
# (no CUDA device, a missing tool, not root) exits 77 after saying why, and
# ctest reports it as skipped, never as passed. A tool that a test needs
# and CI installs is named in $GEMM_REQUIRE by .ci/run; the tests then fail
# instead of skipping when it is missing (tests/util/need.h,
# blas/tests/lib.sh, tests/systemd/verify.sh, python/tests/conftest.py).
#
# The labels: unit (no daemon, no tools: `ctest -L unit` runs in seconds),
# integration (a real gemmd through the client), kernels (the kernels
# library), gpu (needs a CUDA device; skipped elsewhere), blas
# (libgemmblas), python (the Python package), system (the host's own
# programs: systemd, R, Octave, numpy).
set(GEMM_TEST_LABELS unit integration kernels gpu blas python system)
set(GEMM_TEST_SKIP_CODE 77)

# Sets the properties every test gets; fails the configure on a missing or
# unknown label.
function(_gemm_test_properties name timeout labels env workdir)
  if(NOT labels)
    message(FATAL_ERROR "test ${name}: LABELS missing (one or more of "
                        "${GEMM_TEST_LABELS})")
  endif()
  foreach(l IN LISTS labels)
    if(NOT l IN_LIST GEMM_TEST_LABELS)
      message(FATAL_ERROR "test ${name}: unknown label '${l}' (known: "
                          "${GEMM_TEST_LABELS})")
    endif()
  endforeach()
  if(NOT timeout)
    set(timeout 60)
  endif()
  set_tests_properties(${name} PROPERTIES
    TIMEOUT ${timeout}
    LABELS "${labels}"
    SKIP_RETURN_CODE ${GEMM_TEST_SKIP_CODE})
  if(env)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${env}")
  endif()
  if(workdir)
    set_tests_properties(${name} PROPERTIES WORKING_DIRECTORY "${workdir}")
  endif()
endfunction()

function(gemm_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;WORKING_DIRECTORY"
                        "COMMAND;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT T_NAME OR NOT T_COMMAND)
    message(FATAL_ERROR "gemm_add_test: NAME and COMMAND are required")
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  _gemm_test_properties(${T_NAME} "${T_TIMEOUT}" "${T_LABELS}"
                        "${T_ENVIRONMENT}" "${T_WORKING_DIRECTORY}")
endfunction()

function(gemm_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ENVIRONMENT;ARGS"
                        ${ARGN})
  if(NOT TARGET PkgConfig::CRITERION)
    pkg_check_modules(CRITERION REQUIRED IMPORTED_TARGET GLOBAL criterion)
  endif()
  if(NOT TARGET gemm_criterion_main)
    add_library(gemm_criterion_main OBJECT
      ${PROJECT_SOURCE_DIR}/tests/util/criterion_main.c)
    target_link_libraries(gemm_criterion_main PRIVATE PkgConfig::CRITERION)
  endif()
  add_executable(${name} ${T_SOURCES} $<TARGET_OBJECTS:gemm_criterion_main>)
  target_link_libraries(${name} PRIVATE PkgConfig::CRITERION ${T_LIBS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests
    ${CMAKE_CURRENT_SOURCE_DIR})
  gemm_add_test(NAME ${name} COMMAND ${name} --verbose=0 -j1 ${T_ARGS}
    LABELS ${T_LABELS} TIMEOUT "${T_TIMEOUT}" ENVIRONMENT ${T_ENVIRONMENT})
endfunction()
