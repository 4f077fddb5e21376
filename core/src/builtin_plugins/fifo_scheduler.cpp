// "fifo": submission order, each task on its hinted device or else on the
// device with the fewest queued tasks.

#include <algorithm>
#include <memory>

#include "builtin_plugins/builtin_plugins.h"
#include "gpuos/plugins/export.h"
#include "gpuos/plugins/scheduler.h"

namespace gpuos::builtin_plugins {
namespace {

using plugins::DeviceLoad;
using plugins::ReadyTask;
using plugins::TaskPlacement;

class FifoScheduler final : public plugins::Scheduler {
 public:
  Expected<std::vector<TaskPlacement>> Schedule(
      std::span<const ReadyTask> ready, std::span<const DeviceLoad> devices) noexcept override {
    if (devices.empty()) return InvalidArgument("fifo scheduler: no devices to place tasks on");
    std::vector<const ReadyTask*> order;
    order.reserve(ready.size());
    for (const ReadyTask& task : ready) order.push_back(&task);
    std::stable_sort(order.begin(), order.end(), [](const ReadyTask* a, const ReadyTask* b) {
      return a->sequence < b->sequence;
    });

    std::vector<DeviceLoad> load(devices.begin(), devices.end());
    std::vector<TaskPlacement> placements;
    placements.reserve(order.size());
    for (const ReadyTask* task : order) {
      auto hinted = std::find_if(load.begin(), load.end(), [&](const DeviceLoad& device) {
        return device.device == task->device_hint;
      });
      auto chosen = hinted != load.end()
                        ? hinted
                        : std::min_element(load.begin(), load.end(),
                                           [](const DeviceLoad& a, const DeviceLoad& b) {
                                             return a.queued_tasks < b.queued_tasks;
                                           });
      ++chosen->queued_tasks;
      placements.push_back({task->task_id, chosen->device});
    }
    return placements;
  }
};

Expected<std::unique_ptr<FifoScheduler>> MakeFifoScheduler(const plugins::PluginConfig& config) {
  GPUOS_RETURN_IF_ERROR(config.CheckKeys({}));
  return std::make_unique<FifoScheduler>();
}

}  // namespace

const GpuosPluginDescriptor& FifoSchedulerDescriptor() {
  static constexpr GpuosPluginDescriptor descriptor =
      plugins::MakePluginDescriptor<plugins::Scheduler, MakeFifoScheduler>(
          "fifo", "1.0.0", "Submits ready tasks in submission order (default)");
  return descriptor;
}

}  // namespace gpuos::builtin_plugins
