# Finds every third-party dependency. All come from the system's package
# manager; on air-gapped machines tools/offline-deps.sh unpacks the missing
# Debian packages into GPUOS_DEPS_PREFIX (default: <source>/.deps/prefix),
# which is searched first.

set(GPUOS_DEPS_PREFIX "${PROJECT_SOURCE_DIR}/.deps/prefix" CACHE PATH
    "Local prefix of unpacked offline packages (tools/offline-deps.sh)")
if(EXISTS "${GPUOS_DEPS_PREFIX}/usr")
  message(STATUS "gpuos: using offline packages in ${GPUOS_DEPS_PREFIX}")
  list(PREPEND CMAKE_PREFIX_PATH "${GPUOS_DEPS_PREFIX}/usr")
  set(GPUOS_DEPS_INCLUDE "${GPUOS_DEPS_PREFIX}/usr/include")
endif()

find_package(Threads REQUIRED)

# CUDA toolkit: NVRTC and nvJitLink are linked; only cuda.h of the driver.
find_package(CUDAToolkit REQUIRED)
find_library(GPUOS_NVJITLINK_LIBRARY nvJitLink
  HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
add_library(gpuos_nvjitlink INTERFACE)
target_link_libraries(gpuos_nvjitlink INTERFACE ${GPUOS_NVJITLINK_LIBRARY})
target_include_directories(gpuos_nvjitlink SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
add_library(gpuos_cuda_headers INTERFACE)
target_include_directories(gpuos_cuda_headers SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})

# yaml-cpp: 0.7 exports `yaml-cpp`, 0.8 exports `yaml-cpp::yaml-cpp`.
find_package(yaml-cpp REQUIRED)
add_library(gpuos_yaml INTERFACE)
if(TARGET yaml-cpp::yaml-cpp)
  target_link_libraries(gpuos_yaml INTERFACE yaml-cpp::yaml-cpp)
else()
  target_link_libraries(gpuos_yaml INTERFACE yaml-cpp)
endif()

# SQLite: the GPU machine has the runtime (libsqlite3.so.0) but no header or
# unversioned link name, hence the second library name.
find_path(GPUOS_SQLITE_INCLUDE_DIR sqlite3.h HINTS ${GPUOS_DEPS_INCLUDE} REQUIRED)
find_library(GPUOS_SQLITE_LIBRARY NAMES sqlite3 libsqlite3.so.0 REQUIRED)
add_library(gpuos_sqlite INTERFACE)
target_include_directories(gpuos_sqlite SYSTEM INTERFACE ${GPUOS_SQLITE_INCLUDE_DIR})
target_link_libraries(gpuos_sqlite INTERFACE ${GPUOS_SQLITE_LIBRARY})

# xxHash, header-only (XXH_INLINE_ALL).
find_path(GPUOS_XXHASH_INCLUDE_DIR xxhash.h HINTS ${GPUOS_DEPS_INCLUDE} REQUIRED)
add_library(gpuos_xxhash INTERFACE)
target_include_directories(gpuos_xxhash SYSTEM INTERFACE ${GPUOS_XXHASH_INCLUDE_DIR})

find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)

# Boost: header-only parts (DLL on std::filesystem, Asio).
find_package(Boost 1.74 REQUIRED)
add_library(gpuos_boost INTERFACE)
target_link_libraries(gpuos_boost INTERFACE Boost::boost ${CMAKE_DL_LIBS} Threads::Threads)
target_compile_definitions(gpuos_boost INTERFACE BOOST_DLL_USE_STD_FS)

if(GPUOS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# dtl (header-only diff template library) for `gpuos-registry diff`.
find_path(GPUOS_DTL_INCLUDE_DIR dtl/dtl.hpp HINTS ${GPUOS_DEPS_INCLUDE} REQUIRED)
add_library(gpuos_dtl INTERFACE)
target_include_directories(gpuos_dtl SYSTEM INTERFACE ${GPUOS_DTL_INCLUDE_DIR})
