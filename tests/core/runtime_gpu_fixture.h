// The fixture of the runtime's GPU tests: opens runtimes and skips a test,
// with the reason, where there is no GPU. One copy for every GPU test file.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "runtime_test_util.h"

namespace gpuos::runtime::testing {

class GpuRuntimeTest : public ::testing::Test {
 protected:
  // A runtime over add/mul (OpenTestRuntime).
  std::unique_ptr<Runtime> Open(RuntimeConfig config = {}) {
    std::string skip, error;
    auto runtime = OpenTestRuntime(config, &skip, &error);
    Note(skip, error);
    return runtime;
  }
  // A runtime over `config` as given.
  std::unique_ptr<Runtime> OpenConfig(const RuntimeConfig& config) {
    std::string skip, error;
    auto runtime = OpenOrSkip(config, &skip, &error);
    Note(skip, error);
    return runtime;
  }
  // A runtime over add, mul and the test operator `spin_name` (SpinOps,
  // `version`, `origin` naming the test file), cached in the build tree's
  // `cache_file`; the rest of `config` as given.
  std::unique_ptr<Runtime> OpenWithSpin(RuntimeConfig config, const std::string& spin_name,
                                        const std::string& version, const std::string& origin,
                                        const std::string& cache_file) {
    config.operators = ElementwiseOps({"add", "mul"});
    auto spin = SpinOps(spin_name, version, origin);
    if (!spin.ok()) {
      ADD_FAILURE() << spin.status().ToString();
      return nullptr;
    }
    for (const auto& spec : *spin) config.operators.push_back(spec);
    config.repository_path = std::string(GPUOS_BINARY_DIR) + "/" + cache_file;
    return OpenConfig(config);
  }
  std::string skip_;  // why the GPU part cannot run here; empty on a GPU

 private:
  void Note(const std::string& skip, const std::string& error) {
    if (!skip.empty()) skip_ = skip;
    if (!error.empty()) ADD_FAILURE() << error;
  }
};

// Whether the image was built with direct tiles (GPUOS_JIT_DEFINES may turn
// them off for A/B runs, GPUOS_DIRECT_TILES=0 or 2, or announce every one
// from its record, =3; queue_sync.cuh).
inline bool DirectTilesOn() {
  const char* defines = std::getenv("GPUOS_JIT_DEFINES");
  const std::string key = "GPUOS_DIRECT_TILES=";
  const std::size_t at = defines == nullptr ? std::string::npos : std::string(defines).find(key);
  if (at == std::string::npos) return true;
  const char value = defines[at + key.size()];
  return value == '1' || value == '3';
}

// RuntimeStats::direct_submissions once it reaches `expected`, or after a
// second (the device mirrors it just after each completion).
inline std::uint64_t DirectRunsSettled(Runtime& runtime, std::uint64_t expected) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  std::uint64_t seen = runtime.stats().direct_submissions;
  while (seen < expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    seen = runtime.stats().direct_submissions;
  }
  return seen;
}

}  // namespace gpuos::runtime::testing

// Opens a runtime with `open_expression` (a fixture call) into `var`, or
// skips the test where there is no GPU.
#define OPEN_OR_SKIP(var, open_expression)   \
  auto var = open_expression;                \
  if (!skip_.empty()) GTEST_SKIP() << skip_; \
  ASSERT_NE(var, nullptr)

#define ASSERT_OK(expression)                        \
  do {                                               \
    const ::gpuos::Status status_ = (expression);    \
    ASSERT_TRUE(status_.ok()) << status_.ToString(); \
  } while (0)
