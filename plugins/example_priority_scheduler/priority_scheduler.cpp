// Example scheduler plugin "priority": the most urgent ready task goes first.
//
// Order: by effective priority (larger first), then by submission order.
// With `aging=N`, a task gains one priority level for every N tasks submitted
// after it in the batch, so a stream of urgent work cannot starve old tasks.
// Placement: the task's hinted device when available, else the device with
// the fewest queued bytes, counting what this batch already put there.
//
// Config keys: aging (unsigned, default 0 = no aging).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpuos/plugins/export.h"
#include "gpuos/plugins/scheduler.h"

namespace {

using gpuos::Expected;
using gpuos::plugins::DeviceLoad;
using gpuos::plugins::ReadyTask;
using gpuos::plugins::TaskPlacement;

class PriorityScheduler final : public gpuos::plugins::Scheduler {
 public:
  explicit PriorityScheduler(std::uint64_t aging) : aging_(aging) {}

  Expected<std::vector<TaskPlacement>> Schedule(
      std::span<const ReadyTask> ready, std::span<const DeviceLoad> devices) noexcept override {
    if (devices.empty()) return gpuos::InvalidArgument("priority scheduler: no devices");
    std::uint64_t newest = 0;
    for (const ReadyTask& task : ready) newest = std::max(newest, task.sequence);

    struct Ranked {
      const ReadyTask* task;
      std::int64_t effective_priority;
    };
    std::vector<Ranked> ranked;
    ranked.reserve(ready.size());
    for (const ReadyTask& task : ready) {
      std::int64_t bonus =
          aging_ == 0 ? 0 : static_cast<std::int64_t>((newest - task.sequence) / aging_);
      ranked.push_back({&task, task.priority + bonus});
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
      if (a.effective_priority != b.effective_priority) {
        return a.effective_priority > b.effective_priority;
      }
      return a.task->sequence < b.task->sequence;
    });

    std::vector<DeviceLoad> load(devices.begin(), devices.end());
    std::vector<TaskPlacement> placements;
    placements.reserve(ranked.size());
    for (const Ranked& entry : ranked) {
      auto chosen = std::find_if(load.begin(), load.end(), [&](const DeviceLoad& device) {
        return device.device == entry.task->device_hint;
      });
      if (chosen == load.end()) {
        chosen = std::min_element(load.begin(), load.end(),
                                  [](const DeviceLoad& a, const DeviceLoad& b) {
                                    return a.queued_bytes < b.queued_bytes;
                                  });
      }
      chosen->queued_bytes += entry.task->estimated_bytes;
      ++chosen->queued_tasks;
      placements.push_back({entry.task->task_id, chosen->device});
    }
    return placements;
  }

 private:
  std::uint64_t aging_;
};

Expected<std::unique_ptr<PriorityScheduler>> MakePriorityScheduler(
    const gpuos::plugins::PluginConfig& config) {
  GPUOS_RETURN_IF_ERROR(config.CheckKeys({"aging"}));
  GPUOS_ASSIGN_OR_RETURN(std::uint64_t aging, config.GetUint64("aging", 0));
  return std::make_unique<PriorityScheduler>(aging);
}

}  // namespace

GPUOS_EXPORT_PLUGIN(gpuos::plugins::Scheduler, "priority", "1.0.0",
                    "Runs the most urgent ready task first, with optional aging",
                    MakePriorityScheduler)
