// Scheduler plugins: decide in which order ready tasks are submitted and on
// which device each one runs.
//
// The runtime calls Schedule() with a batch of tasks whose dependencies are
// satisfied (or already submitted ahead of them) and the current load of each
// device; it submits the tasks in the order returned. The built-in scheduler
// "fifo" keeps submission order (docs/plugins.md).
//
// Records are plain values; string_views and spans point into memory the
// caller owns and are valid only for the duration of the call.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gpuos/plugins/plugin_kind.h"
#include "gpuos/status.h"

namespace gpuos::plugins {

inline constexpr std::uint32_t kAnyDevice = 0xffffffffu;

// One task ready to be submitted.
struct ReadyTask {
  std::uint64_t task_id = 0;               // unique within the batch
  std::uint64_t sequence = 0;              // submission order; smaller came first
  std::string_view operator_name;          // e.g. "core.add"
  std::uint64_t estimated_bytes = 0;       // bytes read plus written; 0 = unknown
  std::uint64_t estimated_flops = 0;       // 0 = unknown
  std::int32_t priority = 0;               // set by the user; larger is more urgent
  std::uint32_t device_hint = kAnyDevice;  // device holding its inputs, if any
};

// What a device already has to do.
struct DeviceLoad {
  std::uint32_t device = 0;        // device index, as used in TaskPlacement
  std::uint32_t queued_tasks = 0;  // submitted and not yet complete
  std::uint64_t queued_bytes = 0;  // sum of their estimated_bytes
};

struct TaskPlacement {
  std::uint64_t task_id = 0;
  std::uint32_t device = 0;

  bool operator==(const TaskPlacement&) const = default;
};

class Scheduler {
 public:
  static constexpr PluginKind kKind = PluginKind::kScheduler;

  virtual ~Scheduler() = default;

  // Returns every task of `ready` exactly once, in submission order, each with
  // a device taken from `devices`. The host checks this contract
  // (CheckSchedule in gpuos/plugins/checks.h) before using the result.
  // REQUIRES: `devices` is non-empty; task ids in `ready` are distinct.
  // Called from one thread at a time per object.
  virtual Expected<std::vector<TaskPlacement>> Schedule(
      std::span<const ReadyTask> ready, std::span<const DeviceLoad> devices) noexcept = 0;
};

}  // namespace gpuos::plugins
