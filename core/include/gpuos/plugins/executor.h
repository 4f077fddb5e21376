// Executor plugins: hand scheduled tasks to a device.
//
// PRELIMINARY in plugin ABI 1. The executor sees task ids, dependencies and
// the device each task was placed on, and drives a SubmissionQueue the host
// implements. It decides batching and synchronization, not how a task reaches
// the GPU: device handles (streams, CUDA graphs, the persistent worker's ring)
// join this interface with the runtime's task graph, in a later ABI version
// (docs/plugins.md, "ABI versions").
//
// The built-in "persistent" executor submits every task to the persistent
// worker's queue in order, in batches no larger than the queue accepts, and
// waits once at the end; the device resolves dependencies itself.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "gpuos/plugins/plugin_kind.h"
#include "gpuos/status.h"

namespace gpuos::plugins {

// One scheduled task. Spans and string_views are valid during Execute().
struct ExecutionTask {
  std::uint64_t task_id = 0;
  std::string_view operator_name;
  std::span<const std::uint64_t> dependencies;  // task ids that must finish first
  std::uint32_t device = 0;                     // chosen by the scheduler
};

// The host's side of execution. Implemented by the runtime (and by tests).
class SubmissionQueue {
 public:
  virtual ~SubmissionQueue() = default;

  // Most task ids one Submit() call accepts; at least 1.
  virtual std::uint32_t Capacity() const noexcept = 0;

  // Enqueues tasks on their devices, in order. A task may depend on tasks of
  // the same call or earlier calls, never on later ones. Blocks while the
  // queue is full (backpressure), never drops a task.
  // REQUIRES: 1 <= task_ids.size() <= Capacity(); each task submitted once.
  virtual Status Submit(std::span<const std::uint64_t> task_ids) noexcept = 0;

  // Returns when every submitted task has completed, or the first task error.
  virtual Status WaitForCompletion() noexcept = 0;
};

class Executor {
 public:
  static constexpr PluginKind kKind = PluginKind::kExecutor;

  virtual ~Executor() = default;

  // Submits every task of `tasks` exactly once through `queue` and returns
  // when they have completed (or failed).
  // REQUIRES: `tasks` is in a topological order (a dependency comes before
  // its dependents), as produced by the scheduler.
  // Called from one thread at a time per object.
  virtual Status Execute(std::span<const ExecutionTask> tasks, SubmissionQueue& queue) noexcept = 0;
};

}  // namespace gpuos::plugins
