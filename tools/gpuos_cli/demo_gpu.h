// The GPU half of `gpuos demo`: load a kernel image with the driver, run a
// short elementwise chain through the worker, and check it against the CPU.
//
// This drives the image directly, one worker launch per operator. The
// persistent-kernel runtime (task queue, dependencies, parking) replaces it.
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

// Runs out = relu(a * b + 2 * a) on 2^20 random f32 elements with the
// image's mul, add and relu, compares with a CPU reference, and returns what
// it measured. Errors: Unavailable (no GPU), NotFound (an operator missing
// from the image), Internal (a driver call or the worker failed).
Expected<nlohmann::json> RunDemoOnGpu(const registry::KernelImage& image,
                                      const std::vector<registry::OperatorSpec>& ops,
                                      const Output& out);

}  // namespace gpuos::cli
