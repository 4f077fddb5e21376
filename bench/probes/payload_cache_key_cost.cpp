// Probe (host only, no GPU): what the payload cache's per-call host work
// costs (docs/runtime.md, "Direct tiles", cached payloads): a lone tiled
// task's key (CachedPayloadKey: the task and its graph's tensor descriptors
// copied into a string) and PayloadCache::Choose (a hash of the key, the
// entries compared, the entry's unfinished submissions pruned), for a
// replayed call that uses its entry every time, as a compiled attention call
// would with the cache on. Session 42's A/B saw the host part of a call
// (wall less device) grow by 0.8-5.1 us with the cache on and put it down to
// this work without timing it alone; this times it alone.
//
//   g++ -O2 -std=c++20 -Icore/src/runtime -Icore/include -Idevice/include
//       bench/probes/payload_cache_key_cost.cpp core/src/runtime/payload_cache.cpp
//       -o /tmp/payload_cache_key_cost && /tmp/payload_cache_key_cost [--tensors N]
//   (one command line)
//
// Prints the key's size and the median, p90 and p99 of one call's key and
// Choose, in ns, over 200,000 calls after 1,000 warm-up calls, as JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpuos/device/queue.h"
#include "payload_cache.h"

int main(int argc, char** argv) {
  using gpuos::device::TaskDesc;
  using gpuos::device::TensorDesc;
  unsigned int tensor_count = 8;  // attention's stitched program: its table's records
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--tensors") == 0) tensor_count = std::atoi(argv[i + 1]);
  }
  if (tensor_count < 1 || tensor_count > 1024) {
    std::fprintf(stderr, "--tensors: 1 to 1024\n");
    return 2;
  }
  TaskDesc task{};
  task.opcode = 3;
  task.num_tiles = 16;
  task.num_tensors = 1;  // a stitched program's one table tensor
  task.tensors[0] = 0;
  task.end = 16;
  std::vector<TensorDesc> tensors(tensor_count);
  for (unsigned int i = 0; i < tensor_count; ++i) {
    std::memset(&tensors[i], 0, sizeof(TensorDesc));
    reinterpret_cast<unsigned char*>(&tensors[i])[0] = static_cast<unsigned char>(i + 1);
  }
  gpuos::runtime::PayloadCache cache(32);
  std::string key;
  std::vector<double> ns;
  std::uint64_t completed_below = 1;  // each call completes before the next
  constexpr std::uint64_t kWarmUp = 1000, kCalls = 200000;
  for (std::uint64_t sequence = 1; sequence <= kWarmUp + kCalls; ++sequence) {
    const auto start = std::chrono::steady_clock::now();
    const bool keyed =
        gpuos::runtime::CachedPayloadKey(task, tensors.data(), tensor_count, 16, &key);
    const auto decision = cache.Choose(
        key, sequence, 100, [&](std::uint64_t s) { return s < completed_below; },
        [](unsigned int, std::uint64_t) { return true; });
    const auto end = std::chrono::steady_clock::now();
    if (!keyed || (sequence > 2 && decision.kind != gpuos::runtime::PayloadCache::Kind::kUse)) {
      std::fprintf(stderr, "call %llu was not a use of the cache\n",
                   static_cast<unsigned long long>(sequence));
      return 1;
    }
    completed_below = sequence + 1;
    if (sequence > kWarmUp)
      ns.push_back(std::chrono::duration<double, std::nano>(end - start).count());
  }
  std::sort(ns.begin(), ns.end());
  std::printf(
      "{\"probe\": \"payload_cache_key_cost\", \"tensors\": %u, \"key_bytes\": %zu, "
      "\"calls\": %zu, \"median_ns\": %.0f, \"p90_ns\": %.0f, \"p99_ns\": %.0f}\n",
      tensor_count, key.size(), ns.size(), ns[ns.size() / 2], ns[ns.size() * 9 / 10],
      ns[ns.size() * 99 / 100]);
  return 0;
}
