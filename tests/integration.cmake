# Integration tests: start gemmd on a private socket, drive it through
# libgemmclient.
#
# Each test program starts a real gemmd (the CPU backend) per test in a
# private mkdtemp directory and talks to it through the public client API;
# raw-protocol cases (undecodable bytes, bad versions, RegisterBuffer
# abuse) use an nng req0 socket and the generated gemm.pb-c code directly.
# The fixtures live in tests/util/.
if(NOT TARGET gemmd OR NOT TARGET gemmclient OR NOT TARGET gemm_proto)
  message(STATUS "integration tests: gemmd, gemmclient or gemm_proto missing; skipped")
  return()
endif()


# gemmd_test: gemmd with the test hooks compiled in (GEMMD_TEST_HOOKS: the
# CPU backend's "test-hold" kernel, which blocks its worker until the test
# releases it, tests/util/hold.h; its test pin; a stall of the loop after
# each metrics accept, GEMMD_TEST_METRICS_STALL_MS). The integration and
# Python suites run it; it behaves as gemmd unless the test hands it a
# hold descriptor or sets a hook's variable, and it is never installed. Its backend_cpu.c object comes before gemmd_core
# on the link line, so the library's own backend_cpu.o (which defines
# nothing else) is not linked; so with scheduler.c and metrics.c.
add_library(gemmd_test_hooks OBJECT ${PROJECT_SOURCE_DIR}/daemon/backend_cpu.c
  ${PROJECT_SOURCE_DIR}/daemon/scheduler.c ${PROJECT_SOURCE_DIR}/daemon/metrics.c)
target_compile_definitions(gemmd_test_hooks PRIVATE GEMMD_TEST_HOOKS)
target_link_libraries(gemmd_test_hooks PRIVATE gemmd_core)
add_executable(gemmd_test ${PROJECT_SOURCE_DIR}/daemon/main.c
  $<TARGET_OBJECTS:gemmd_test_hooks>)
target_link_libraries(gemmd_test PRIVATE gemmd_core)

pkg_check_modules(CRITERION REQUIRED IMPORTED_TARGET GLOBAL criterion)
add_library(gemm_itest_util STATIC
  util/daemon.c util/data.c util/cases.c util/raw.c util/fdpass.c
  util/hold.c util/need.c)
target_include_directories(gemm_itest_util PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(gemm_itest_util PUBLIC
  GEMMD_PATH="$<TARGET_FILE:gemmd_test>")
target_link_libraries(gemm_itest_util PUBLIC
  gemmclient gemm_proto gemm_wire nng::nng PkgConfig::CRITERION
  Threads::Threads m)
add_dependencies(gemm_itest_util gemmd_test)

# gemm_itest(NAME TIMEOUT [labels...]): integration/NAME_test.c as
# integration_NAME, labelled integration (and any labels given)
function(gemm_itest name timeout)
  gemm_test(integration_${name}
    SOURCES integration/${name}_test.c
    LIBS gemm_itest_util
    LABELS integration ${ARGN}
    TIMEOUT ${timeout})
endfunction()

gemm_itest(gemm 150)        # shapes x transposes x dtypes x alpha/beta x ld
gemm_itest(gemm64 150)      # fp64, complex64, complex128: ops N/T/C, scalars
gemm_itest(moduli 120)      # fp64 Ozaki-II moduli: results, reply, refusals
gemm_itest(int8 150)        # int8 -> int32: exact, wraps, refusals
gemm_itest(blas3 150)       # symm .. trsm: every flag, triangles, errors
gemm_itest(fill 150)        # GEMMs filled by parts: order, stalls, rules
gemm_itest(errors 90)       # every bad input gets its code; daemon goes on
gemm_itest(protocol 90)     # raw bytes: undecodable, version, size limits
gemm_itest(ownership 60)    # buffers belong to their connection
gemm_itest(import 60)       # gemm_buffer_import: a caller's memfd, sealing
gemm_itest(concurrency 150) # 8 threads x 200 requests, async, backpressure
gemm_itest(shutdown 120)    # SIGTERM with requests in flight
gemm_itest(status 60)       # counters in gemm_get_status
gemm_itest(tensor 60)       # resident tensors: use, refusals, ownership
gemm_itest(cuda 300 gpu)    # CUDA backend only (skips elsewhere)
gemm_itest(access 60)       # another uid: socket group, buffers, tickets
gemm_itest(connect 60)      # timeouts against a stopped gemmd, URL mistakes
# static: it runs as another user, who may not reach the build tree
add_executable(access_probe integration/access_probe.c util/raw.c
  util/fdpass.c)
target_include_directories(access_probe PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(access_probe PRIVATE gemmclient_static gemm_proto
  gemm_wire nng::nng m)
target_compile_definitions(integration_access PRIVATE
  ACCESS_PROBE="$<TARGET_FILE:access_probe>")
add_dependencies(integration_access access_probe)
gemm_itest(selection 300)   # kernels by name, precisions, their errors
gemm_itest(gemmctl 120)     # gemmctl kernels, mm --kernel, bench
target_compile_definitions(integration_gemmctl PRIVATE
  GEMMCTL_PATH="$<TARGET_FILE:gemmctl>")
add_dependencies(integration_gemmctl gemmctl)
gemm_itest(limits 60)       # per-client caps, deadlines, fairness
gemm_itest(tenancy 240)     # a hostile local user: lockouts, floods, memory
gemm_itest(metrics 60)      # Prometheus endpoint and textfile, promtool
gemm_itest(devices 400)     # --devices: placement, migration, split, faults
gemm_itest(faults 60)       # dying clients, shm truncation, daemon restart
gemm_itest(isolation 120)   # one uid cannot block, hold or blind another
gemm_itest(startup 30)      # refusals at start name the way out
gemm_itest(batch 180)       # batched and grouped GEMM, refusals, cancel
gemm_itest(pinning 120)     # background pins: loop free, release, limits
gemm_itest(spares 120)      # memfds made and pinned ahead, lent whole
add_executable(fault_probe integration/fault_probe.c)
target_link_libraries(fault_probe PRIVATE gemm_itest_util)
target_compile_definitions(integration_faults PRIVATE
  FAULT_PROBE="$<TARGET_FILE:fault_probe>")
add_dependencies(integration_faults fault_probe)
target_compile_definitions(integration_batch PRIVATE
  FAULT_PROBE="$<TARGET_FILE:fault_probe>")
add_dependencies(integration_batch fault_probe)
