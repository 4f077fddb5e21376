// Shared by the runtime's GPU tests and benchmarks: a runtime over a few
// std.elementwise operators, float buffers, descriptors.
#pragma once

#include <cmath>
#include <memory>
#include <string>
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
