#include "runtime_plugins.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "gpuos/dtype.h"
#include "gpuos/plugins/checks.h"
#include "runtime_impl.h"

namespace gpuos::runtime {
namespace {

SelectedPlugin Describe(const PluginHost& host, const PluginChoice& choice, bool consulted) {
  SelectedPlugin selected;
  // CreateSelected found every name, and nothing unregisters a plugin.
  if (std::optional<PluginInfo> info = host.Find(choice.name)) selected.info = std::move(*info);
  selected.config = choice.config;
  selected.consulted = consulted;
  return selected;
}

}  // namespace

Expected<std::unique_ptr<RuntimePlugins>> RuntimePlugins::Open(
    const std::vector<std::string>& plugin_dirs, const PluginSelection& selection) {
  std::unique_ptr<RuntimePlugins> plugins(new RuntimePlugins());
  const std::vector<std::filesystem::path> configured(plugin_dirs.begin(), plugin_dirs.end());
  PluginLoadReport loaded = plugins->host_.LoadSearchPath(configured);
  if (!loaded.ok()) {
    return loaded.ToStatus().WithContext(
        "loading plugins (RuntimeConfig::plugin_dirs, then GPUOS_PLUGIN_PATH)");
  }
  if (selection.executor.name != kDefaultExecutorName) {
    return InvalidArgument("RuntimeConfig::plugins.executor is '" + selection.executor.name +
                           "': not implemented; a Runtime is itself the persistent executor and "
                           "serves only '" +
                           std::string(kDefaultExecutorName) +
                           "' (leave the executor at its default)");
  }
  Expected<PluginSet> created = plugins->host_.CreateSelected(selection);
  if (!created.ok()) return created.status().WithContext("RuntimeConfig::plugins");
  plugins->set_ = std::move(created).value();

  const bool consult = selection.scheduler.name != kDefaultSchedulerName;
  plugins->consulted_scheduler_ = consult ? plugins->set_.scheduler.get() : nullptr;
  RuntimePluginReport& report = plugins->report_;
  report.scheduler = Describe(plugins->host_, selection.scheduler, consult);
  // Not consulted yet (docs/runtime.md, "Plugins"): tensors stay resident,
  // frontends fuse, and the runtime is the executor itself.
  report.memory_manager = Describe(plugins->host_, selection.memory_manager, false);
  report.fusion_strategy = Describe(plugins->host_, selection.fusion_strategy, false);
  report.executor = Describe(plugins->host_, selection.executor, false);
  report.search_path = plugin_dirs;
  for (const std::filesystem::path& directory : PluginPathFromEnvironment()) {
    report.search_path.push_back(directory.string());
  }
  plugins->scheduler_label_ = DescribeSelectedPlugin(report.scheduler);
  report.loaded = std::move(loaded.loaded);
  report.available = plugins->host_.List();
  return plugins;
}

std::vector<std::uint32_t> RootTasks(std::span<const device::TaskDesc> tasks) {
  std::vector<std::uint32_t> roots;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const unsigned int deps = tasks[i].dependency_counter;
    if (deps == 0 || deps == device::kNoDependencyCounter) {
      roots.push_back(static_cast<std::uint32_t>(i));
    }
  }
  return roots;
}

std::vector<std::uint32_t> StagingOrder(std::uint32_t task_count,
                                        std::span<const std::uint32_t> roots,
                                        std::span<const std::uint32_t> scheduled_roots) {
  if (std::equal(roots.begin(), roots.end(), scheduled_roots.begin(), scheduled_roots.end())) {
    return {};
  }
  std::vector<std::uint32_t> order(task_count);
  std::iota(order.begin(), order.end(), 0u);
  for (std::size_t k = 0; k < roots.size() && k < scheduled_roots.size(); ++k) {
    order[roots[k]] = scheduled_roots[k];
  }
  return order;
}

std::uint64_t EstimatedTaskBytes(const device::TaskDesc& task,
                                 std::span<const device::TensorDesc> tensors) {
  std::uint64_t bytes = 0;
  const unsigned int count = std::min<unsigned int>(task.num_tensors, device::kMaxTaskTensors);
  for (unsigned int k = 0; k < count; ++k) {
    const int index = task.tensors[k];
    if (index < 0 || static_cast<std::size_t>(index) >= tensors.size()) continue;
    const device::TensorDesc& desc = tensors[static_cast<std::size_t>(index)];
    if (desc.dtype < 0 || desc.dtype >= kNumDTypes || desc.numel <= 0) continue;
    bytes += static_cast<std::uint64_t>(desc.numel) * DTypeSize(static_cast<DType>(desc.dtype));
  }
  return bytes;
}

Expected<std::vector<std::uint32_t>> ScheduleRoots(plugins::Scheduler& scheduler,
                                                   const std::string& plugin,
                                                   const RootScheduleInput& input) {
  const std::vector<std::uint32_t> roots = RootTasks(input.tasks);
  std::vector<plugins::ReadyTask> ready(roots.size());
  for (std::size_t k = 0; k < roots.size(); ++k) {
    const std::uint32_t task = roots[k];
    plugins::ReadyTask& entry = ready[k];
    entry.task_id = task;
    entry.sequence = task;
    entry.operator_name = input.operator_name ? input.operator_name(task) : std::string_view();
    entry.estimated_bytes = EstimatedTaskBytes(input.tasks[task], input.tensors);
    entry.priority = task < input.priorities.size() ? input.priorities[task] : 0;
    entry.device_hint = input.device;
  }
  plugins::DeviceLoad load;
  load.device = input.device;
  load.queued_tasks = input.queued_tasks;
  const std::span<const plugins::DeviceLoad> devices(&load, 1);
  Expected<std::vector<plugins::TaskPlacement>> placements = scheduler.Schedule(ready, devices);
  if (!placements.ok()) return placements.status().WithContext(plugin);
  const Status contract = plugins::CheckSchedule(ready, devices, *placements);
  if (!contract.ok()) {
    return FailedPrecondition(plugin + " broke the scheduler contract: " + contract.message() +
                              "; fix the plugin or select another scheduler "
                              "(RuntimeConfig::plugins.scheduler)");
  }
  std::vector<std::uint32_t> scheduled;
  scheduled.reserve(placements->size());
  for (const plugins::TaskPlacement& placement : *placements) {
    scheduled.push_back(static_cast<std::uint32_t>(placement.task_id));
  }
  return StagingOrder(static_cast<std::uint32_t>(input.tasks.size()), roots, scheduled);
}

std::string DescribeSelectedPlugin(const SelectedPlugin& plugin) {
  return std::string(PluginKindName(plugin.info.kind)) + " plugin '" + plugin.info.name + "' (" +
         (plugin.info.builtin ? std::string("built in") : plugin.info.path.string()) + ")";
}

// RuntimeImpl's side (runtime_impl.h).

Expected<std::vector<std::uint32_t>> RuntimeImpl::StagingOrderOf(const TaskGraph& graph) {
  Reclaim();  // a fresher count of what is still queued
  std::uint64_t queued = 0;
  for (const InFlight& submission : in_flight_) queued += submission.tasks;
  const std::vector<std::uint32_t>& logical_ops = graph.logical_ops();
  RootScheduleInput input;
  input.tasks = graph.tasks();
  input.tensors = graph.tensors();
  input.priorities = graph.priorities();
  input.operator_name = [&](std::uint32_t task) -> std::string_view {
    const OperatorRef* ref = task < logical_ops.size() ? ByLogical(logical_ops[task]) : nullptr;
    return ref == nullptr ? std::string_view("noop") : std::string_view(ref->name);
  };
  input.device = static_cast<std::uint32_t>(diagnostics_.device_ordinal);
  input.queued_tasks = static_cast<std::uint32_t>(std::min<std::uint64_t>(queued, UINT32_MAX));
  return ScheduleRoots(*plugins_->consulted_scheduler(), plugins_->scheduler_label(), input);
}

}  // namespace gpuos::runtime
