// The GPU half of `gpuos demo`: run the kernel image's operators through
// plain kernel launches and through the persistent runtime, check both
// against the CPU, and time them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../cli_support/output.h"
#include "gpuos/registry/kernel_image.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::cli {

// "NVIDIA H200 (sm_90, 132 SMs)"; Unavailable without a driver or device.
Expected<std::string> DescribeGpu();

// Runs the demo workloads (demo_workloads.h) on GPU 0 with `image` (built
// from `ops`; the runtime reuses `repository_path`'s build cache), prints a
// table, and returns what it measured. A result that differs from the CPU
// reference is an error after the table is printed.
Expected<nlohmann::json> RunDemoOnGpu(const registry::KernelImage& image,
                                      const std::vector<registry::OperatorSpec>& ops,
                                      const std::string& repository_path, const Output& out);

}  // namespace gpuos::cli
