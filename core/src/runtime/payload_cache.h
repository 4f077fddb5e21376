// The host's half of the payload cache (docs/runtime.md, "Direct tiles",
// "Cached payloads"; device half: device/include/gpuos/device/
// queue_direct.cuh): which lone tiled submissions fill an entry of the
// device's cache and which may run from one without the worker reading
// their ring slot. Pure bookkeeping, no device access: the caller says
// which submissions have completed and which fills the device confirmed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuos/device/abi.h"

namespace gpuos::runtime {

// The key of a lone tiled task's payload (`task`, bound to its slot, and
// the graph's `tensor_count` tensors) in *key: the task and tensors as a
// direct area holds them, less the task's id and successor offset, which
// differ between calls of one program. False (nothing to cache) where the
// worker would not open the task as direct tiles (queue_direct.cuh,
// DirectTaskFits): tiles other than `tiles` or more than a claim word
// holds, no tensor or more than kMaxTaskTensors, an index outside the graph.
bool CachedPayloadKey(const device::TaskDesc& task, const device::TensorDesc* tensors,
                      std::uint32_t tensor_count, std::uint32_t tiles, std::string* key);

class PayloadCache {
 public:
  // `entries`: the device's cache entries (0: the cache is off).
  explicit PayloadCache(unsigned int entries = 0);

  enum class Kind {
    kNone,  // publish as before
    kFill,  // the submission fills `entry` (SubmissionSlot::cache_fill)
    kUse,   // the submission runs from `entry`, filled by `fill` (cached hint)
  };
  struct Decision {
    Kind kind = Kind::kNone;
    unsigned int entry = 0;
    std::uint64_t fill = 0;  // the filling submission's sequence (kUse)
    // kUse: the filling submission's task id, which the entry's task holds
    // and the device reports (the use's task takes it: a failure is still
    // found by its submission's sequence, but a watchdog message or trace
    // that names a task by id finds the latest use holding it, which may be
    // a later call than the one that hung).
    std::uint32_t first_task_id = 0;
  };
  // Whether submission `sequence` has completed (its done word).
  using CompletedFn = std::function<bool(std::uint64_t sequence)>;
  // Whether the device confirmed that `fill` wrote entry `entry`.
  using FilledFn = std::function<bool(unsigned int entry, std::uint64_t fill)>;

  // For submission `sequence` (its task id `first_task_id`), whose payload
  // less what differs between two calls of one program (the task's id and
  // successor offset: the caller's key) is `key`: a use where an entry holds
  // `key`, its fill completed and the device confirmed it; else a fill of
  // an entry that is free or idle (every submission that filled or used it
  // completed), free ones first, then the least recently used, an entry of
  // `key` whose fill never confirmed (the device did not open it as direct
  // tiles, or it was dropped) included; else none (every entry busy, or
  // `key`'s fill still running). Marks the entry used by `sequence`.
  Decision Choose(std::string_view key, std::uint64_t sequence, std::uint32_t first_task_id,
                  const CompletedFn& completed, const FilledFn& filled);

  unsigned int entries() const { return static_cast<unsigned int>(entries_.size()); }
  std::uint64_t uses() const { return uses_; }
  std::uint64_t fills() const { return fills_; }

 private:
  struct Entry {
    bool valid = false;
    std::string key;
    std::uint64_t hash = 0;
    std::uint64_t fill = 0;  // the submission that fills it
    // Its fill and uses not seen completed yet: uses of one entry may be in
    // flight together and complete in any order, so the newest one's
    // completion does not make the entry idle.
    std::vector<std::uint64_t> in_flight;
    std::uint64_t touched = 0;        // Choose's clock at its last use (LRU)
    std::uint32_t first_task_id = 0;  // the fill's
  };
  // Whether every submission that fills or uses `entry` completed (drops
  // those that did from its in_flight).
  static bool Idle(Entry& entry, const CompletedFn& completed);

  std::vector<Entry> entries_;
  std::uint64_t clock_ = 0;
  std::uint64_t uses_ = 0;
  std::uint64_t fills_ = 0;
};

}  // namespace gpuos::runtime
