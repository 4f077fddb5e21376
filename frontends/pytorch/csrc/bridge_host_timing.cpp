#include "bridge_host_timing.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "gpuos/environment.h"

namespace gpuos::torch_bridge {

HostTiming& HostTiming::Get() {
  static HostTiming timing;
  return timing;
}

HostTiming::HostTiming() : on_(EnvFlagOn("GPUOS_TORCH_HOST_TIMING")) {}

void HostTiming::Add(LaunchStep step, std::chrono::steady_clock::duration elapsed) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count();
  const auto clamped = static_cast<std::uint32_t>(
      std::clamp<long long>(ns, 0, std::numeric_limits<std::uint32_t>::max()));
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::uint32_t>& samples = samples_[static_cast<int>(step)];
  if (samples.size() < kMaxSamples) samples.push_back(clamped);
}

HostTiming::~HostTiming() {
  if (!on_) return;
  static const char* const kNames[] = {"reclaim",     "bind",     "stream_query", "submit",
                                       "stream_wait", "allocate", "run",          "host_wait"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<int>(LaunchStep::kCount));
  std::fprintf(stderr, "gpuos host timing (us per step: count, mean, median):");
  for (int i = 0; i < static_cast<int>(LaunchStep::kCount); ++i) {
    std::vector<std::uint32_t>& samples = samples_[i];
    if (samples.empty()) continue;
    double total = 0;
    for (std::uint32_t ns : samples) total += ns;
    const std::size_t middle = samples.size() / 2;
    std::nth_element(samples.begin(), samples.begin() + middle, samples.end());
    std::fprintf(stderr, " %s %zu %.2f %.2f;", kNames[i], samples.size(),
                 total / 1e3 / samples.size(), samples[middle] / 1e3);
  }
  std::fprintf(stderr, "\n");
}

}  // namespace gpuos::torch_bridge
