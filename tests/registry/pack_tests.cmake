# Tests of gpuos::packs (operator model, canonical JSON, YAML pack loader).
# include()d from tests/registry/CMakeLists.txt.
gpuos_add_test(registry_pack_test
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/operator_spec_json_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/pack_loader_test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/pack_loader_limits_test.cpp
  LIBS gpuos::packs)
