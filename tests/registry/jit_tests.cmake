# Tests of gpuos::jit (code generation, the NVRTC/nvJitLink build service,
# the built-in packs) and of the CUDA driver loader it uses.
# include()d from tests/registry/CMakeLists.txt.

# The driver loader lives in core/; its test is registered here (it belongs to
# the JIT work) but its source mirrors the tree.
gpuos_add_test(core_cuda_driver_test
  SOURCES ${PROJECT_SOURCE_DIR}/tests/core/cuda_driver_test.cpp
  LIBS gpuos::cuda_driver)

gpuos_add_test(registry_jit_codegen_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/jit_codegen_test.cpp
  LIBS gpuos::jit gpuos_builtin_packs)

# Compiles with the real NVRTC and nvJitLink; sees the JIT's private headers
# (toolchain.h) to test the log rewriter.
gpuos_add_test(registry_jit_builder_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/jit_builder_test.cpp
  LIBS gpuos::jit gpuos::cuda_driver gpuos_builtin_packs)
target_include_directories(registry_jit_builder_test PRIVATE
  ${PROJECT_SOURCE_DIR}/registry/src/jit)

# FuseElementwise: fused specs compiled with the real NVRTC (no GPU).
gpuos_add_test(registry_fused_elementwise_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fused_elementwise_test.cpp
  LIBS gpuos::jit gpuos_builtin_packs)

# StitchProgram: stitched programs compiled with the real NVRTC (no GPU).
gpuos_add_test(registry_stitched_program_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/stitched_program_test.cpp
  LIBS gpuos::jit gpuos_builtin_packs)

# The built-in packs for CI's architectures: the slowest of these tests.
gpuos_add_test(registry_jit_builtin_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/jit_builtin_test.cpp
  LIBS gpuos::jit gpuos_builtin_packs)

gpuos_add_test(registry_jit_gpu_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/jit_gpu_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/jit_gpu_util.cpp
  LIBS gpuos::jit gpuos::cuda_driver gpuos::device_abi gpuos_builtin_packs
  LABELS gpu)

# Every built-in operator and dtype against float64 CPU references
# (op_reference.cpp: one function per operator).
gpuos_add_test(registry_op_reference_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/op_reference_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/op_reference.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/jit_gpu_util.cpp
  LIBS gpuos::jit gpuos::cuda_driver gpuos::device_abi gpuos_builtin_packs
  LABELS gpu)

# The linalg / normalization / reduction operators on the workloads' small
# and medium shapes, split into tasks several ways.
gpuos_add_test(registry_op_shapes_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/op_shapes_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/op_reference.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/jit_gpu_util.cpp
  LIBS gpuos::jit gpuos::cuda_driver gpuos::device_abi gpuos_builtin_packs
  LABELS gpu)
