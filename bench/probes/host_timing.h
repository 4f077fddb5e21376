// What the host-timed probes (stream_wait_latency.cu, stream_publish_latency.cu,
// mapped_roundtrip.cu, stream_query_cost.cu) share: exiting with the message of
// a failed CUDA runtime or driver call, zeroed mapped host memory, a host clock
// in microseconds, the median of a sample, the --reps option of the probes that
// take no other, and the commit their JSON names.
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

// A zeroed T in mapped pinned host memory, portable (every context maps it);
// *device is its device address.
template <typename T>
T* MappedZeroed(T** device) {
  T* host = nullptr;
  CHECK_CUDA(cudaHostAlloc(&host, sizeof(T), cudaHostAllocMapped | cudaHostAllocPortable));
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

// The count of `--reps N` for a probe whose only option it is: `reps` when
// absent; exits 0 after the usage for --help, 2 for anything else or N < 1.
inline int RepsOption(int argc, char** argv, int reps) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
      continue;
    }
    std::fprintf(stderr, "usage: %s [--reps N]   (N >= 1, default %d)\n", argv[0], reps);
    std::exit(std::strcmp(argv[i], "--help") == 0 ? 0 : 2);
  }
  if (reps < 1) {
    std::fprintf(stderr, "--reps wants a positive count\n");
    std::exit(2);
  }
  return reps;
}

// GPUOS_COMMIT, the tree the probe was built from, or "unknown".
inline const char* CommitOrUnknown() {
  const char* commit = std::getenv("GPUOS_COMMIT");
  return commit != nullptr ? commit : "unknown";
}

}  // namespace probe
