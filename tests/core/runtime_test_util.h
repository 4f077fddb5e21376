// Shared by the runtime's GPU tests and benchmarks: a runtime over a few
// std.elementwise operators, float buffers, descriptors.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpuos/registry/pack_loader.h"
#include "gpuos/runtime/runtime.h"

namespace gpuos::runtime::testing {

// The std.elementwise operators named in `names`, from the source tree.
inline std::vector<registry::OperatorSpec> ElementwiseOps(const std::vector<std::string>& names) {
  std::vector<registry::OperatorSpec> ops;
  auto pack =
      registry::LoadPackFile(std::string(GPUOS_SOURCE_DIR) + "/operators/std_elementwise.yaml");
  if (!pack.ok()) return ops;
  for (const registry::OperatorSpec& spec : pack->operators) {
    for (const std::string& name : names) {
      if (spec.name == name) ops.push_back(spec);
    }
  }
  return ops;
}

// A test-only custom operator `name` (f32, no inputs, one output `out`): it
// spins on %globaltimer for spin_ns, then writes `value` (default 1) to
// every element of out; with fail_code != 0 it calls ctx.fail(fail_code)
// instead. `origin` names the test file in messages and build-cache keys.
inline Expected<std::vector<registry::OperatorSpec>> SpinOps(const std::string& name,
                                                             const std::string& version,
                                                             const std::string& origin) {
  const std::string pack = R"(gpuos_pack: 1
name: test.spin
version: 0.1.0
description: Test-only operators of )" +
                           origin + R"(.
operators:
  - name: )" + name + R"(
    version: )" + version + R"(
    kind: custom
    description: Spins for spin_ns nanoseconds, then fills out with value; fails with fail_code if not 0.
    dtypes: [f32]
    inputs: []
    outputs:
      - name: out
    attributes:
      - {name: spin_ns, type: i64, default: 0}
      - {name: fail_code, type: i64, default: 0}
      - {name: value, type: f64, default: 1.0}
    body: |
      if (fail_code != 0) {
        if (ctx.thread_index() == 0) ctx.fail(static_cast<unsigned int>(fail_code));
        return;
      }
      unsigned long long start = 0, now = 0;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
      do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
      } while (now - start < static_cast<unsigned long long>(spin_ns));
      ctx.for_each([&](long long i) { out.store(i, static_cast<compute_t>(value)); });
)";
  GPUOS_ASSIGN_OR_RETURN(auto parsed, registry::ParsePack(pack, origin));
  return std::move(parsed.operators);
}

// Opens `config`; sets *skip to the reason when there is no GPU, *error to
// any other failure.
inline std::unique_ptr<Runtime> OpenOrSkip(const RuntimeConfig& config, std::string* skip,
                                           std::string* error) {
  auto runtime = Runtime::Open(config);
  if (!runtime.ok()) {
    if (runtime.status().code() == StatusCode::kUnavailable &&
        runtime.status().message().rfind("no CUDA", 0) == 0) {
      *skip = runtime.status().message();
    } else {
      *error = runtime.status().ToString();
    }
    return nullptr;
  }
  return std::move(runtime).value();
}

// Opens a runtime over add/mul (cache in the build tree); sets *skip to the
// reason when there is no GPU.
inline std::unique_ptr<Runtime> OpenTestRuntime(RuntimeConfig config, std::string* skip,
                                                std::string* error) {
  config.operators = ElementwiseOps({"add", "mul"});
  if (config.operators.size() != 2) {
    *error = "std_elementwise.yaml lacks add or mul";
    return nullptr;
  }
  config.repository_path = std::string(GPUOS_BINARY_DIR) + "/runtime_test_cache.db";
  return OpenOrSkip(config, skip, error);
}

// A float tensor in device memory.
struct DeviceTensor {
  DeviceBuffer buffer;
  device::TensorDesc desc;
};

inline std::vector<float> Filled(std::size_t n, float value) {
  return std::vector<float>(n, value);
}

inline Expected<DeviceTensor> Upload(Runtime& runtime, const std::vector<float>& values) {
  GPUOS_ASSIGN_OR_RETURN(DeviceBuffer buffer, runtime.Allocate(values.size() * sizeof(float)));
  GPUOS_RETURN_IF_ERROR(
      runtime.CopyToDevice(buffer.address, values.data(), values.size() * sizeof(float)));
  const long long size = static_cast<long long>(values.size());
  return DeviceTensor{
      buffer, device::MakeContiguousTensorDesc(buffer.address, device::kDTypeF32, 1, &size)};
}

inline Expected<std::vector<float>> Download(Runtime& runtime, const DeviceTensor& tensor) {
  std::vector<float> values(static_cast<std::size_t>(tensor.desc.numel));
  GPUOS_RETURN_IF_ERROR(
      runtime.CopyToHost(values.data(), tensor.buffer.address, values.size() * sizeof(float)));
  return values;
}

}  // namespace gpuos::runtime::testing
