# Unit tests of the daemon's modules, linked against gemmd_core.
gemm_test(validate_test SOURCES unit/validate_test.c LIBS gemmd_core)
gemm_test(registry_test SOURCES unit/registry_test.c LIBS gemmd_core)
gemm_test(config_test SOURCES unit/config_test.c LIBS gemmd_core)
gemm_test(dtype_test SOURCES unit/dtype_test.c LIBS gemmd_core m)
gemm_test(wire_test SOURCES unit/wire_test.c LIBS gemm_wire)

# The service unit (as configured into the build tree) passes
# systemd-analyze verify and keeps its hardening.
add_test(NAME systemd_verify
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/systemd/verify.sh
          ${PROJECT_BINARY_DIR}/systemd/gemmd.service $<TARGET_FILE:gemmd>)
set_tests_properties(systemd_verify PROPERTIES TIMEOUT 60)
# `cmake --install --prefix P`: the unit, README and the Python package's
# _libpath.txt follow P.
add_test(NAME systemd_install_prefix
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/systemd/install_prefix.sh
          ${PROJECT_BINARY_DIR})
set_tests_properties(systemd_install_prefix PROPERTIES TIMEOUT 120)
