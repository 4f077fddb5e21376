// What the host-timed probes (stream_wait_latency.cu, stream_publish_latency.cu,
// mapped_roundtrip.cu) share: exiting with the message of a failed CUDA runtime
// or driver call, zeroed mapped host memory, a host clock in microseconds, and
// the median of a sample.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK_CUDA(call)                                              \
  do {                                                                \
    cudaError_t e = (call);                                           \
    if (e != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)
#define CHECK_CU(call)                                      \
  do {                                                      \
    CUresult e = (call);                                    \
    if (e != CUDA_SUCCESS) {                                \
      const char* s = nullptr;                              \
      cuGetErrorString(e, &s);                              \
      std::fprintf(stderr, "%s: %s\n", #call, s ? s : "?"); \
      std::exit(1);                                         \
    }                                                       \
  } while (0)

namespace probe {

// A zeroed T in mapped pinned host memory; *device is its device address.
template <typename T>
T* MappedZeroed(T** device) {
  T* host = nullptr;
  CHECK_CUDA(cudaHostAlloc(&host, sizeof(T), cudaHostAllocMapped));
  std::memset(host, 0, sizeof(T));
  CHECK_CUDA(cudaHostGetDevicePointer(device, host, 0));
  return host;
}

// steady_clock, in us.
inline double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The median of `v` (0 for an empty sample).
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace probe
