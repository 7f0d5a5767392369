# Kernel tests: host-side descriptor/cache units (run everywhere) and GPU
# correctness tests (skip with a message when no CUDA device is present).
set(GEMMK_SRC ${CMAKE_CURRENT_LIST_DIR}/../kernels/src)

# CPU: plain C, no CUDA needed to build or run.
gemm_test(kernels_desc_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels/desc_test.c
  LABELS unit kernels TIMEOUT 30)
target_include_directories(kernels_desc_test PRIVATE ${GEMMK_SRC})
gemm_test(kernels_tmap_cache_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels/tmap_cache_test.c
          ${GEMMK_SRC}/tmap_cache.c
  LABELS unit kernels TIMEOUT 30)
target_include_directories(kernels_tmap_cache_test PRIVATE ${GEMMK_SRC})
gemm_test(kernels_tf32_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels/tf32_test.c
  LIBS m
  LABELS unit kernels TIMEOUT 30)
target_include_directories(kernels_tf32_test PRIVATE ${GEMMK_SRC})
# Ozaki-II arithmetic (moduli, CRT, scaling, residues) against exact
# 128-bit integers.
gemm_test(kernels_ozaki_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels/ozaki_test.c
  LIBS m
  LABELS unit kernels TIMEOUT 60)
target_include_directories(kernels_ozaki_test PRIVATE ${GEMMK_SRC})

# The catalog's listing and gemmk_check: host code of the kernels library
# (needs the CUDA toolkit to build, no GPU to run).
if(GEMM_HAVE_CUDA)
  gemm_test(kernels_catalog_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels/catalog_test.c
    LIBS gemm_kernels
    LABELS unit kernels TIMEOUT 30)
  set_target_properties(kernels_catalog_test PROPERTIES LINKER_LANGUAGE CUDA)
  # The 16-bit shape heuristic's choices at 132 SMs, on the host.
  gemm_test(kernels_plan_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels/plan_test.cpp
    LIBS gemm_kernels
    LABELS unit kernels TIMEOUT 30)
  target_include_directories(kernels_plan_test PRIVATE ${GEMMK_SRC})
  set_target_properties(kernels_plan_test PROPERTIES LINKER_LANGUAGE CUDA)
endif()

# GPU: plain programs (no Criterion, so they run on the bare device host);
# where there is no CUDA device (or not an sm_90 one) they print why and
# exit 77, which ctest reports as skipped.
if(GEMM_HAVE_CUDA)
  add_executable(kernels_gpu_test ${CMAKE_CURRENT_LIST_DIR}/kernels/gpu_test.cu)
  set_target_properties(kernels_gpu_test PROPERTIES
    CUDA_ARCHITECTURES "${GEMM_CUDA_ARCHS}" CUDA_STANDARD 17)
  target_link_libraries(kernels_gpu_test PRIVATE gemm_kernels CUDA::cublas)
  target_include_directories(kernels_gpu_test PRIVATE ${GEMMK_SRC}
    ${gemmd_SOURCE_DIR}/kernels/tools)
  gemm_add_test(NAME kernels_gpu_test COMMAND kernels_gpu_test
    LABELS kernels gpu TIMEOUT 600)
  add_executable(kernels_catalog_gpu_test
    ${CMAKE_CURRENT_LIST_DIR}/kernels/catalog_gpu_test.cu)
  set_target_properties(kernels_catalog_gpu_test PROPERTIES
    CUDA_ARCHITECTURES "${GEMM_CUDA_ARCHS}" CUDA_STANDARD 17)
  target_link_libraries(kernels_catalog_gpu_test PRIVATE gemm_kernels)
  target_include_directories(kernels_catalog_gpu_test PRIVATE
    ${gemmd_SOURCE_DIR}/kernels/tools)
  gemm_add_test(NAME kernels_catalog_gpu_test COMMAND kernels_catalog_gpu_test
    LABELS kernels gpu TIMEOUT 900)
  # gemmk_gemm_grouped against gemmk_gemm, bit for bit
  add_executable(kernels_grouped_gpu_test
    ${CMAKE_CURRENT_LIST_DIR}/kernels/grouped_gpu_test.cu)
  set_target_properties(kernels_grouped_gpu_test PROPERTIES
    CUDA_ARCHITECTURES "${GEMM_CUDA_ARCHS}" CUDA_STANDARD 17)
  target_link_libraries(kernels_grouped_gpu_test PRIVATE gemm_kernels)
  target_include_directories(kernels_grouped_gpu_test PRIVATE
    ${gemmd_SOURCE_DIR}/kernels/tools)
  gemm_add_test(NAME kernels_grouped_gpu_test
    COMMAND kernels_grouped_gpu_test LABELS kernels gpu TIMEOUT 300)
  # int8 GEMM and the Ozaki-II fp64 emulation
  add_executable(kernels_ozaki_gpu_test
    ${CMAKE_CURRENT_LIST_DIR}/kernels/ozaki_gpu_test.cu)
  set_target_properties(kernels_ozaki_gpu_test PROPERTIES
    CUDA_ARCHITECTURES "${GEMM_CUDA_ARCHS}" CUDA_STANDARD 17)
  target_link_libraries(kernels_ozaki_gpu_test PRIVATE gemm_kernels)
  target_include_directories(kernels_ozaki_gpu_test PRIVATE
    ${gemmd_SOURCE_DIR}/kernels/tools)
  gemm_add_test(NAME kernels_ozaki_gpu_test COMMAND kernels_ozaki_gpu_test
    LABELS kernels gpu TIMEOUT 900)
endif()

# The generated wgmma wrappers match their generator (no CUDA needed).
gemm_add_test(NAME kernels_wgmma_generated
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/kernels/wgmma_gen_check.sh
          ${PROJECT_SOURCE_DIR}
  LABELS unit kernels TIMEOUT 30)
