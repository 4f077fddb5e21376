// The demo's workloads, described once and run both through plain kernel
// launches and through the persistent runtime: a chain of 100 dependent
// elementwise operators on a 64x64 f32 tensor, and a small MLP.
#pragma once

#include <string>
#include <vector>

#include "one_shot_launcher.h"

namespace gpuos::cli {

struct WorkloadTensor {
  std::vector<long long> sizes;
  std::vector<long long> strides;  // empty: contiguous
  std::vector<float> values;       // empty: an output or intermediate (poisoned)
  std::size_t elements = 0;        // storage elements to allocate
};

struct Workload {
  std::string name;  // "chain100_64x64_f32"
  std::string description;
  std::vector<WorkloadTensor> tensors;
  std::vector<LaunchStep> steps;  // each depends on the one before it
  int output = 0;                 // tensor to check
  std::vector<double> reference;  // expected output, computed in double on the CPU
  double tolerance = 1e-4;        // |got - want| <= tol * (1 + |want|)
};

// Fresh random inputs each call.
Workload MakeChain100();
Workload MakeMlp(int batch, int hidden);

// Number of elements of `got` outside the tolerance (NaN counts), and the
// largest absolute error.
long long CountMismatches(const Workload& w, const std::vector<float>& got, double* max_error);

}  // namespace gpuos::cli
