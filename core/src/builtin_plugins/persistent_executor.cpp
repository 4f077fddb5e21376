// "persistent": streams every task into the persistent worker's queue in
// order, in batches as large as the queue (or `batch=`) allows, and waits once
// at the end; dependencies are resolved on the device.

#include <algorithm>
#include <memory>
#include <unordered_set>
#include <vector>

#include "builtin_plugins/builtin_plugins.h"
#include "gpuos/plugins/executor.h"
#include "gpuos/plugins/export.h"

namespace gpuos::builtin_plugins {
namespace {

class PersistentExecutor final : public plugins::Executor {
 public:
  explicit PersistentExecutor(std::uint64_t max_batch) : max_batch_(max_batch) {}

  Status Execute(std::span<const plugins::ExecutionTask> tasks,
                 plugins::SubmissionQueue& queue) noexcept override {
    GPUOS_RETURN_IF_ERROR(CheckTopologicalOrder(tasks));
    std::uint64_t batch = std::max<std::uint64_t>(queue.Capacity(), 1);
    if (max_batch_ != 0) batch = std::min(batch, max_batch_);
    std::vector<std::uint64_t> ids;
    ids.reserve(std::min<std::uint64_t>(batch, tasks.size()));
    for (std::size_t start = 0; start < tasks.size(); start += batch) {
      ids.clear();
      std::size_t end = std::min<std::size_t>(tasks.size(), start + batch);
      for (std::size_t i = start; i < end; ++i) ids.push_back(tasks[i].task_id);
      GPUOS_RETURN_IF_ERROR(queue.Submit(ids));
    }
    return queue.WaitForCompletion();
  }

 private:
  static Status CheckTopologicalOrder(std::span<const plugins::ExecutionTask> tasks) {
    std::unordered_set<std::uint64_t> all;
    for (const plugins::ExecutionTask& task : tasks) all.insert(task.task_id);
    std::unordered_set<std::uint64_t> seen;
    for (const plugins::ExecutionTask& task : tasks) {
      for (std::uint64_t dependency : task.dependencies) {
        if (all.contains(dependency) && !seen.contains(dependency)) {
          return InvalidArgument("persistent executor: task " + std::to_string(task.task_id) +
                                 " comes before its dependency, task " +
                                 std::to_string(dependency) + "; pass tasks in topological order");
        }
      }
      seen.insert(task.task_id);
    }
    return Status::Ok();
  }

  std::uint64_t max_batch_;
};

Expected<std::unique_ptr<PersistentExecutor>> MakePersistentExecutor(
    const plugins::PluginConfig& config) {
  GPUOS_RETURN_IF_ERROR(config.CheckKeys({"batch"}));
  GPUOS_ASSIGN_OR_RETURN(std::uint64_t batch, config.GetUint64("batch", 0));
  return std::make_unique<PersistentExecutor>(batch);
}

}  // namespace

const GpuosPluginDescriptor& PersistentExecutorDescriptor() {
  static constexpr GpuosPluginDescriptor descriptor =
      plugins::MakePluginDescriptor<plugins::Executor, MakePersistentExecutor>(
          "persistent", "1.0.0",
          "Streams tasks into the persistent worker's queue, waits once (default)");
  return descriptor;
}

}  // namespace gpuos::builtin_plugins
