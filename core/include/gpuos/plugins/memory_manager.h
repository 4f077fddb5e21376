// Memory-manager plugins: decide which tensors are resident in device memory
// when the next task runs, i.e. what to load and what to evict.
//
// The runtime calls Plan() before it submits a task whose operands are not all
// resident, passing every tensor it tracks, the operands that must be
// resident, and the tensor uses of the tasks queued after it. The built-in
// "unlimited" manager loads what is required and never evicts.
//
// Spans point into memory the caller owns, valid for the duration of the call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gpuos/plugins/plugin_kind.h"
#include "gpuos/status.h"

namespace gpuos::plugins {

struct TensorState {
  std::uint64_t tensor_id = 0;  // unique among `tensors`
  std::uint64_t bytes = 0;
  bool resident = false;  // currently in device memory
  bool in_use = false;    // read or written by a running task: must not be evicted
};

// A use of a tensor by a queued task; `step` 0 is the task being prepared,
// 1 the one after it, and so on.
struct TensorUse {
  std::uint64_t tensor_id = 0;
  std::uint64_t step = 0;
};

struct MemoryRequest {
  // Device memory available for tensors; 0 when unknown (no limit known).
  std::uint64_t capacity_bytes = 0;
  std::span<const TensorState> tensors;
  // Tensors that must be resident after the plan (the next task's operands).
  std::span<const std::uint64_t> required;
  // Later uses, sorted by step; a tensor may appear many times.
  std::span<const TensorUse> upcoming;
};

struct MemoryPlan {
  std::vector<std::uint64_t> evict;  // resident, not in_use, not required
  std::vector<std::uint64_t> load;   // not resident; includes every missing required one
};

class MemoryManager {
 public:
  static constexpr PluginKind kKind = PluginKind::kMemoryManager;

  virtual ~MemoryManager() = default;

  // Returns the evictions and loads that make every required tensor resident,
  // keeping resident bytes within the manager's budget. When no plan fits the
  // budget, returns an Unavailable status saying how many bytes are missing.
  // The host checks consistency with CheckMemoryPlan (gpuos/plugins/checks.h).
  // Called from one thread at a time per object.
  virtual Expected<MemoryPlan> Plan(const MemoryRequest& request) noexcept = 0;
};

}  // namespace gpuos::plugins
