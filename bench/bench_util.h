// Small helpers shared by the benchmark programs of bench/ (not a library:
// header-only, included by each program).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpuos/cuda_driver.h"
#include "gpuos/status.h"

namespace gpuos::bench {

using Clock = std::chrono::steady_clock;

inline double MicrosecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Timings of one case, in microseconds.
struct Samples {
  std::vector<double> us;
  // Nearest-rank percentile (p in [0, 1]); 0 when there are no samples.
  double Percentile(double p) const {
    std::vector<double> s = us;
    std::sort(s.begin(), s.end());
    return s.empty() ? 0 : s[static_cast<std::size_t>(p * static_cast<double>(s.size() - 1))];
  }
};

inline const Status& StatusOf(const Status& status) { return status; }
template <typename T>
Status StatusOf(const Expected<T>& value) {
  return value.status();
}

// The CUDA version gpuos was built against, "13.0".
inline std::string CudaHeadersVersion() {
  return std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10);
}

}  // namespace gpuos::bench

// A benchmark stops at the first failure: prints where and why, exits 1.
#define GPUOS_BENCH_CHECK(expr)                                                       \
  do {                                                                                \
    const ::gpuos::Status _s = ::gpuos::bench::StatusOf(expr);                        \
    if (!_s.ok()) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, _s.ToString().c_str()); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
