# Unit tests of the daemon's modules, linked against gemmd_core.
gemm_test(validate_test SOURCES unit/validate_test.c LIBS gemmd_core)
gemm_test(registry_test SOURCES unit/registry_test.c LIBS gemmd_core)
gemm_test(config_test SOURCES unit/config_test.c LIBS gemmd_core)
gemm_test(dtype_test SOURCES unit/dtype_test.c LIBS gemmd_core m)
