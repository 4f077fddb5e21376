// The runtime's plugins (docs/runtime.md, "Plugins"): loading and selection
// at Open, and the scheduler's say in the order a submission's root tasks
// start.
//
// How a schedule reaches the device: the worker pushes a submission's roots
// into the ready ring in ascending task-arena position (queue_worker.cu,
// Admit) and runs the lowest itself, so roots start in position order (exactly
// so with one worker block; with more, blocks take them from the ring in that
// order). Submit therefore stages the roots, and only the roots, in scheduled
// order over the positions the roots occupy anyway (StagingOrder). Nothing
// else moves: no edge points at a root (a root has no predecessor), a moved
// root keeps its own successor range, and TaskDesc::task_id keeps naming the
// graph's task index, which errors, the watchdog and the trace report.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuos/device/abi.h"
#include "gpuos/plugin_host.h"
#include "gpuos/plugins/scheduler.h"
#include "gpuos/runtime/runtime.h"
#include "gpuos/status.h"

namespace gpuos::runtime {

// The plugins of one runtime. Immutable after Open, except the scheduler
// object, which its caller must call one thread at a time (Submit does so
// with the runtime's lock held).
class RuntimePlugins {
 public:
  // Loads the libraries of `plugin_dirs`, then of GPUOS_PLUGIN_PATH, and
  // creates the plugins `selection` names. Needs no GPU. Errors: every load
  // failure (a missing directory, a library that does not load: each naming
  // its file), with the first failure's code; InvalidArgument for an
  // executor other than "persistent" (not implemented by the runtime);
  // PluginHost::CreateSelected's (an unknown name lists the available ones,
  // a rejected config names the plugin).
  static Expected<std::unique_ptr<RuntimePlugins>> Open(const std::vector<std::string>& plugin_dirs,
                                                        const PluginSelection& selection);

  RuntimePlugins(const RuntimePlugins&) = delete;
  RuntimePlugins& operator=(const RuntimePlugins&) = delete;

  const RuntimePluginReport& report() const { return report_; }
  // The scheduler when Submit consults it (any but the built-in "fifo"),
  // else null: fifo keeps the graph's order, which costs nothing.
  plugins::Scheduler* consulted_scheduler() const { return consulted_scheduler_; }
  // "scheduler plugin 'priority' (/path/lib.so)", for messages.
  const std::string& scheduler_label() const { return scheduler_label_; }

 private:
  RuntimePlugins() = default;

  PluginHost host_;
  PluginSet set_;  // made by host_
  plugins::Scheduler* consulted_scheduler_ = nullptr;
  std::string scheduler_label_;
  RuntimePluginReport report_;
};

// Indices of the tasks without dependencies (dependency_counter 0 or
// kNoDependencyCounter, as the worker reads it), ascending.
std::vector<std::uint32_t> RootTasks(std::span<const device::TaskDesc> tasks);

// The order in which Submit stages a graph's tasks: entry p is the index of
// the task staged at position p. Non-roots keep their positions; the roots'
// positions, ascending, receive the roots in scheduled order. Empty when
// that is the graph's own order (nothing to permute).
// REQUIRES: `roots` ascending, each < task_count; `scheduled_roots` a
// permutation of `roots`.
std::vector<std::uint32_t> StagingOrder(std::uint32_t task_count,
                                        std::span<const std::uint32_t> roots,
                                        std::span<const std::uint32_t> scheduled_roots);

// What the scheduler is told about one submission's roots.
struct RootScheduleInput {
  std::span<const device::TaskDesc> tasks;      // the graph's (tensor indices into `tensors`)
  std::span<const device::TensorDesc> tensors;  // the graph's
  std::span<const std::int32_t> priorities;     // per task; missing entries count as 0
  // The operator name of task i ("add"; "noop" for no-ops). Its views must
  // stay valid until ScheduleRoots returns.
  std::function<std::string_view(std::uint32_t task)> operator_name;
  std::uint32_t device = 0;        // the runtime's device ordinal
  std::uint32_t queued_tasks = 0;  // tasks of earlier submissions still in flight
};

// Bytes a task reads and writes, from its tensors' element counts (a tensor
// named twice counts twice; indices outside `tensors` count 0).
std::uint64_t EstimatedTaskBytes(const device::TaskDesc& task,
                                 std::span<const device::TensorDesc> tensors);

// Gives `scheduler` the graph's roots as plugins::ReadyTask (task_id and
// sequence = the task index, device_hint = input.device) with one
// DeviceLoad, checks its answer (CheckSchedule) and returns StagingOrder of
// it. Errors name `plugin` (e.g. "scheduler plugin 'priority' (/lib/x.so)"):
// the plugin's own error with its code; FailedPrecondition for an answer
// that breaks the contract.
Expected<std::vector<std::uint32_t>> ScheduleRoots(plugins::Scheduler& scheduler,
                                                   const std::string& plugin,
                                                   const RootScheduleInput& input);

// "scheduler plugin 'priority' (/path/libx.so)" or "(built in)".
std::string DescribeSelectedPlugin(const SelectedPlugin& plugin);

}  // namespace gpuos::runtime
