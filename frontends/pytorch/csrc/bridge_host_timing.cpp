#include "bridge_host_timing.h"

#include <cstdio>

#include "gpuos/environment.h"

namespace gpuos::torch_bridge {

HostTiming& HostTiming::Get() {
  static HostTiming timing;
  return timing;
}

HostTiming::HostTiming() : on_(EnvFlagOn("GPUOS_TORCH_HOST_TIMING")) {}

void HostTiming::Add(LaunchStep step, std::chrono::steady_clock::duration elapsed) {
  ns_[static_cast<int>(step)] += static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
  ++counts_[static_cast<int>(step)];
}

HostTiming::~HostTiming() {
  const std::uint64_t launches = counts_[static_cast<int>(LaunchStep::kReclaim)].load();
  if (!on_ || launches == 0) return;
  static const char* const kNames[] = {"reclaim", "bind", "stream_query", "submit", "stream_wait"};
  std::fprintf(stderr, "gpuos host timing: %llu launches, mean us per step:",
               static_cast<unsigned long long>(launches));
  for (int i = 0; i < static_cast<int>(LaunchStep::kCount); ++i) {
    const std::uint64_t count = counts_[i].load();
    std::fprintf(stderr, " %s %.2f", kNames[i], count == 0 ? 0.0 : ns_[i].load() / 1e3 / count);
  }
  std::fprintf(stderr, "\n");
}

}  // namespace gpuos::torch_bridge
