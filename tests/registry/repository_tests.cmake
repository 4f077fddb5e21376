# Tests of gpuos::repository (the SQLite operator repository).
# include()d from tests/registry/CMakeLists.txt.
gpuos_add_test(registry_repository_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/repository_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/repository_cache_test.cpp
  LIBS gpuos::repository gpuos_sqlite)
gpuos_add_test(registry_repository_failure_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/repository_failure_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/repository_transfer_test.cpp
  LIBS gpuos::repository gpuos_sqlite)
gpuos_add_test(registry_repository_concurrency_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/repository_concurrency_test.cpp
  LIBS gpuos::repository gpuos_sqlite)
