// Runs operators of a kernel image the plain way: one cuLaunchKernel of the
// image's one-shot worker per operator, on its own module and stream. The
// demo uses it as the "plain kernel launches" baseline and as a second
// opinion next to the persistent runtime.
//
// REQUIRES: no persistent worker runs while Load() or the destructor runs
// (module loads and frees wait for every kernel; device-facts.md).
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpuos/cuda_driver.h"
#include "gpuos/device/abi.h"
#include "gpuos/registry/kernel_image.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::cli {

using Attributes = std::vector<std::pair<std::string, std::string>>;

// One operator application: tensors index the plan's descriptor table
// (inputs, then outputs, as the operator declares them).
struct LaunchStep {
  std::string op;
  DType dtype = DType::kF32;
  std::vector<int> tensors;
  Attributes attributes;
};

class OneShotLauncher {
 public:
  static Expected<std::unique_ptr<OneShotLauncher>> Load(
      const registry::KernelImage& image, const std::vector<registry::OperatorSpec>& ops);
  ~OneShotLauncher();
  OneShotLauncher(const OneShotLauncher&) = delete;
  OneShotLauncher& operator=(const OneShotLauncher&) = delete;

  // Device memory owned by the launcher (freed by the destructor).
  Expected<CUdeviceptr> Allocate(std::size_t bytes);
  Status Upload(CUdeviceptr to, const void* from, std::size_t bytes);
  Status Download(void* to, CUdeviceptr from, std::size_t bytes);
  Status Poison(CUdeviceptr at, std::size_t bytes);  // 0xff bytes: NaN for floats

  // Uploads the tensor table and every step's tasks (work split into tiles
  // of `items_per_task` output elements) so Run() only launches.
  Status Prepare(const std::vector<device::TensorDesc>& tensors,
                 const std::vector<LaunchStep>& steps, long long items_per_task = 8192);
  // One launch per prepared step, in order, then waits. Errors: a driver
  // failure, or a worker error (the step's operator named).
  Status Run();
  unsigned int tasks_per_run() const { return tasks_per_run_; }

 private:
  explicit OneShotLauncher(const CudaDriverApi* driver) : d_(driver) {}
  struct PreparedStep {
    std::string op;
    CUdeviceptr tasks = 0;
    unsigned int num_tasks = 0;
  };

  const CudaDriverApi* d_;
  const registry::KernelImage* image_ = nullptr;
  const std::vector<registry::OperatorSpec>* ops_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction worker_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr tensor_table_ = 0;
  unsigned int num_tensors_ = 0;
  CUdeviceptr status_ = 0;
  std::vector<PreparedStep> steps_;
  std::vector<CUdeviceptr> allocations_;
  unsigned int tasks_per_run_ = 0;
};

}  // namespace gpuos::cli
