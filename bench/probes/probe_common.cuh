// What the device probes (bench/probes/*.cu) share: the device clock, an
// f32 tensor descriptor of any rank, and the host side of a timed launch.
// Each probe runs its code kReps times in one block, thread 0 writing each
// call's nanoseconds to `ns`; TimeLaunch reports the median after a warm-up.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <vector>

#include "gpuos/device/abi.h"

namespace probe {

// %globaltimer, in ns.
__device__ inline unsigned long long NowNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// An f32 tensor over `data` with these sizes and strides (elements).
__device__ inline void DescribeF32(gpuos::device::TensorDesc* d, const float* data,
                                   std::initializer_list<long long> sizes,
                                   std::initializer_list<long long> strides) {
  *d = gpuos::device::TensorDesc{};
  d->data = reinterpret_cast<unsigned long long>(data);
  d->dtype = gpuos::device::kDTypeF32;
  d->rank = static_cast<int>(sizes.size());
  d->numel = 1;
  int k = 0;
  for (long long size : sizes) {
    d->sizes[k++] = size;
    d->numel *= size;
  }
  k = 0;
  for (long long stride : strides) d->strides[k++] = stride;
}

// Runs call() `reps` times with every thread of the block, thread 0 writing
// each call's nanoseconds to ns[r] (barriers around each call, inside the
// timing: an operator's own closing barrier is part of its cost).
template <typename F>
__device__ void TimeCalls(unsigned long long* ns, int reps, F&& call) {
  for (int r = 0; r < reps; ++r) {
    __syncthreads();
    const unsigned long long start = NowNs();
    call();
    __syncthreads();
    if (threadIdx.x == 0) ns[r] = NowNs() - start;
  }
}

// Waits for the launch just made and returns the median of `ns[warmup,
// reps)` in *median and ns[0] (the cold call) in *first; false (and a line
// saying why) when the launch failed.
inline bool CollectTimes(const unsigned long long* ns, int reps, int warmup,
                         unsigned long long* median, unsigned long long* first) {
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("FAILED: %s\n", cudaGetErrorString(cudaGetLastError()));
    return false;
  }
  std::vector<unsigned long long> t(reps);
  cudaMemcpy(t.data(), ns, reps * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
  std::vector<unsigned long long> steady(t.begin() + warmup, t.end());
  std::sort(steady.begin(), steady.end());
  *median = steady[steady.size() / 2];
  *first = t[0];
  return true;
}

}  // namespace probe
