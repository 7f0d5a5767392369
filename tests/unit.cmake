# Unit tests of the daemon's modules, linked against gemmd_core.
gemm_test(validate_test SOURCES unit/validate_test.c LIBS gemmd_core
  LABELS unit)
gemm_test(validate_blas3_test SOURCES unit/validate_blas3_test.c
  LIBS gemmd_core LABELS unit)
gemm_test(fill_test SOURCES unit/fill_test.c LIBS gemmd_core LABELS unit)
gemm_test(validate_batch_test SOURCES unit/validate_batch_test.c
  LIBS gemmd_core LABELS unit)
gemm_test(batch_ranges_test SOURCES unit/batch_ranges_test.c
  LIBS gemmd_core LABELS unit)
gemm_test(registry_test SOURCES unit/registry_test.c LIBS gemmd_core
  LABELS unit)
gemm_test(pinner_test SOURCES unit/pinner_test.c LIBS gemmd_core
  LABELS unit)
gemm_test(config_test SOURCES unit/config_test.c LIBS gemmd_core
  LABELS unit)
gemm_test(dtype_test SOURCES unit/dtype_test.c LIBS gemmd_core m
  LABELS unit)
gemm_test(wire_test SOURCES unit/wire_test.c LIBS gemm_wire LABELS unit)
gemm_test(slice_test SOURCES unit/slice_test.c LIBS gemmd_core LABELS unit)
gemm_test(pipe_plan_test SOURCES unit/pipe_plan_test.c LIBS gemmd_core m
  LABELS unit)
gemm_test(conn_test SOURCES unit/conn_test.c LIBS gemmd_core LABELS unit)
gemm_test(scheduler_test SOURCES unit/scheduler_test.c LIBS gemmd_core
  LABELS unit)
gemm_test(rnd_test SOURCES unit/rnd_test.c LIBS gemm_host Threads::Threads
  LABELS unit)

# The service unit (as configured into the build tree) passes
# systemd-analyze verify and keeps its hardening.
gemm_add_test(NAME systemd_verify
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/systemd/verify.sh
          ${PROJECT_BINARY_DIR}/systemd/gemmd.service $<TARGET_FILE:gemmd>
  LABELS system TIMEOUT 60)
# `cmake --install --prefix P`: the unit, README and the Python package's
# _libpath.txt follow P.
set(_install_env "")
if(GEMM_ASAN)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE _asan_rt OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(_install_env GEMM_ASAN_RUNTIME=${_asan_rt})
endif()
gemm_add_test(NAME systemd_install_prefix
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/systemd/install_prefix.sh
          ${PROJECT_BINARY_DIR}
  LABELS system TIMEOUT 120 ENVIRONMENT ${_install_env})
