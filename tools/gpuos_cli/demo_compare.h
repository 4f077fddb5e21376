// Runs a demo workload through plain kernel launches and through the
// persistent runtime, checks both against the CPU, and times both.
#pragma once

#include <string>
#include <vector>

#include "demo_workloads.h"
#include "gpuos/registry/kernel_image.h"
#include "gpuos/runtime/runtime.h"

namespace gpuos::cli {

struct VariantResult {
  std::string workload;
  std::string variant;  // "cuda_launch" or "gpuos"
  double median_us = 0, p10_us = 0, p90_us = 0;
  int iterations = 0;
  bool correct = false;
  double max_abs_error = 0;
};

// `rt` must have been opened on the same operator set as `image`. Timing:
// rounds of `per_round` launches-variant runs, then (worker warm) the same
// number of runtime runs; the runtime is parked between rounds so the
// baseline does not share the GPU with a polling worker. With the
// environment variable GPUOS_DEMO_SAMPLES set, every run's time is printed
// to stderr in run order (a diagnostic).
Expected<std::vector<VariantResult>> CompareWorkload(const Workload& workload,
                                                     const registry::KernelImage& image,
                                                     const std::vector<registry::OperatorSpec>& ops,
                                                     runtime::Runtime& rt, int rounds = 10,
                                                     int per_round = 10);

}  // namespace gpuos::cli
