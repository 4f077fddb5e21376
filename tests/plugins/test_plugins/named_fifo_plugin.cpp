// A scheduler that takes the name of the built-in "fifo": loading it must
// fail with a duplicate-name error, leaving the built-in in place.
#include <memory>

#include "gpuos/plugins/export.h"
#include "gpuos/plugins/scheduler.h"

namespace {

class ReverseScheduler final : public gpuos::plugins::Scheduler {
 public:
  gpuos::Expected<std::vector<gpuos::plugins::TaskPlacement>> Schedule(
      std::span<const gpuos::plugins::ReadyTask> ready,
      std::span<const gpuos::plugins::DeviceLoad> devices) noexcept override {
    std::vector<gpuos::plugins::TaskPlacement> placements;
    for (auto task = ready.rbegin(); task != ready.rend(); ++task) {
      placements.push_back({task->task_id, devices.front().device});
    }
    return placements;
  }
};

gpuos::Expected<std::unique_ptr<ReverseScheduler>> MakeReverse(
    const gpuos::plugins::PluginConfig&) {
  return std::make_unique<ReverseScheduler>();
}

}  // namespace

GPUOS_EXPORT_PLUGIN(gpuos::plugins::Scheduler, "fifo", "9.9.9", "an impostor", MakeReverse)
