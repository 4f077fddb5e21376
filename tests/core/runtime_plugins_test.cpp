// The runtime's plugins without a GPU (docs/runtime.md, "Plugins"): loading
// and selection at Open (RuntimePlugins, and Runtime::Open failing on a bad
// plugin configuration before it looks for a GPU), and the host side of the
// scheduler's root order (RootTasks, StagingOrder, ScheduleRoots).
#include "runtime_plugins.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpuos/cuda_driver.h"
#include "gpuos/runtime/runtime.h"

namespace gpuos::runtime {
namespace {

namespace fs = std::filesystem;

// Where the build writes the in-tree plugins (lib/gpuos/plugins).
const std::string kPluginDir = GPUOS_TEST_PLUGIN_DIR;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A directory of its own under the system's temporary directory, removed
// at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() /
              (name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// Unsets GPUOS_PLUGIN_PATH for the test (the environment must not add
// directories), restoring it afterwards.
class PluginPathGuard {
 public:
  PluginPathGuard() {
    if (const char* value = ::getenv("GPUOS_PLUGIN_PATH")) saved_ = value;
    ::unsetenv("GPUOS_PLUGIN_PATH");
  }
  ~PluginPathGuard() {
    if (saved_) {
      ::setenv("GPUOS_PLUGIN_PATH", saved_->c_str(), 1);
    } else {
      ::unsetenv("GPUOS_PLUGIN_PATH");
    }
  }

 private:
  std::optional<std::string> saved_;
};

const PluginInfo* FindInfo(const std::vector<PluginInfo>& infos, const std::string& name) {
  auto found = std::find_if(infos.begin(), infos.end(),
                            [&](const PluginInfo& info) { return info.name == name; });
  return found == infos.end() ? nullptr : &*found;
}

// ---- Loading and selection ----

TEST(RuntimePluginsTest, DefaultsAreBuiltInAndFifoIsNotConsulted) {
  PluginPathGuard guard;
  auto plugins = RuntimePlugins::Open({}, PluginSelection{});
  ASSERT_TRUE(plugins.ok()) << plugins.status().ToString();
  const RuntimePluginReport& report = (*plugins)->report();
  EXPECT_EQ((*plugins)->consulted_scheduler(), nullptr);
  EXPECT_EQ(report.scheduler.info.name, "fifo");
  EXPECT_TRUE(report.scheduler.info.builtin);
  EXPECT_FALSE(report.scheduler.consulted);
  EXPECT_EQ(report.memory_manager.info.name, "unlimited");
  EXPECT_EQ(report.fusion_strategy.info.name, "no_fusion");
  EXPECT_EQ(report.executor.info.name, "persistent");
  EXPECT_EQ(report.executor.info.kind, PluginKind::kExecutor);
  EXPECT_TRUE(report.loaded.empty());
  EXPECT_TRUE(report.search_path.empty());
  EXPECT_NE(FindInfo(report.available, "fifo"), nullptr);
}

TEST(RuntimePluginsTest, PluginDirsLoadTheExampleScheduler) {
  PluginPathGuard guard;
  PluginSelection selection;
  selection.scheduler = {"priority", "aging=4"};
  selection.memory_manager = {"belady", "budget=1G"};
  auto plugins = RuntimePlugins::Open({kPluginDir}, selection);
  ASSERT_TRUE(plugins.ok()) << plugins.status().ToString();
  const RuntimePluginReport& report = (*plugins)->report();
  ASSERT_NE((*plugins)->consulted_scheduler(), nullptr);
  EXPECT_EQ(report.scheduler.info.name, "priority");
  EXPECT_EQ(report.scheduler.info.version, "1.0.0");
  EXPECT_FALSE(report.scheduler.info.builtin);
  EXPECT_EQ(report.scheduler.info.path.filename(), "libgpuos_priority_scheduler.so");
  EXPECT_EQ(report.scheduler.config, "aging=4");
  EXPECT_TRUE(report.scheduler.consulted);
  EXPECT_TRUE(Contains((*plugins)->scheduler_label(), "scheduler plugin 'priority' ("));
  EXPECT_TRUE(Contains((*plugins)->scheduler_label(), "libgpuos_priority_scheduler.so"));
  // Created (its config was checked) but not consulted.
  EXPECT_EQ(report.memory_manager.info.name, "belady");
  EXPECT_EQ(report.memory_manager.config, "budget=1G");
  EXPECT_FALSE(report.memory_manager.consulted);
  EXPECT_EQ(report.search_path, std::vector<std::string>{kPluginDir});
  EXPECT_NE(FindInfo(report.loaded, "priority"), nullptr);
  EXPECT_NE(FindInfo(report.loaded, "belady"), nullptr);
  EXPECT_EQ(FindInfo(report.loaded, "fifo"), nullptr);  // built in, not loaded
  EXPECT_NE(FindInfo(report.available, "fifo"), nullptr);
  EXPECT_NE(FindInfo(report.available, "priority"), nullptr);
}

TEST(RuntimePluginsTest, GpuosPluginPathComesAfterTheConfiguredDirectories) {
  PluginPathGuard guard;
  TempDir empty("gpuos-plugins-empty");
  ASSERT_EQ(::setenv("GPUOS_PLUGIN_PATH", kPluginDir.c_str(), 1), 0);
  PluginSelection selection;
  selection.scheduler = {"priority", ""};
  auto plugins = RuntimePlugins::Open({empty.path().string()}, selection);
  ASSERT_TRUE(plugins.ok()) << plugins.status().ToString();
  EXPECT_EQ((*plugins)->report().search_path,
            (std::vector<std::string>{empty.path().string(), kPluginDir}));
  EXPECT_EQ((*plugins)->report().scheduler.info.name, "priority");
}

TEST(RuntimePluginsTest, AMissingDirectoryFailsNamingIt) {
  PluginPathGuard guard;
  const std::string missing = (fs::temp_directory_path() / "gpuos-no-such-plugin-dir").string();
  auto plugins = RuntimePlugins::Open({missing}, PluginSelection{});
  ASSERT_FALSE(plugins.ok());
  EXPECT_EQ(plugins.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(plugins.status().message(), missing)) << plugins.status().message();
  EXPECT_TRUE(Contains(plugins.status().message(), "RuntimeConfig::plugin_dirs"));
}

TEST(RuntimePluginsTest, ALibraryThatDoesNotLoadFailsNamingTheFile) {
  PluginPathGuard guard;
  TempDir dir("gpuos-plugins-bad");
  const fs::path bad = dir.path() / "libnot_a_library.so";
  std::ofstream(bad) << "this is not an ELF file\n";
  auto plugins = RuntimePlugins::Open({dir.path().string()}, PluginSelection{});
  ASSERT_FALSE(plugins.ok());
  EXPECT_EQ(plugins.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(plugins.status().message(), bad.string())) << plugins.status().message();
  EXPECT_TRUE(Contains(plugins.status().message(), "cannot be loaded as a shared library"));
}

TEST(RuntimePluginsTest, AnUnknownNameListsTheAvailablePlugins) {
  PluginPathGuard guard;
  PluginSelection selection;
  selection.scheduler = {"priorty", ""};
  auto plugins = RuntimePlugins::Open({kPluginDir}, selection);
  ASSERT_FALSE(plugins.ok());
  EXPECT_EQ(plugins.status().code(), StatusCode::kNotFound);
  const std::string message = plugins.status().message();
  EXPECT_TRUE(Contains(message, "selected scheduler")) << message;
  EXPECT_TRUE(Contains(message, "'priorty'")) << message;
  EXPECT_TRUE(Contains(message, "available: fifo, priority")) << message;
}

TEST(RuntimePluginsTest, ABadPluginConfigNamesThePluginAndTheKey) {
  PluginPathGuard guard;
  PluginSelection selection;
  selection.scheduler = {"priority", "agin=3"};
  auto plugins = RuntimePlugins::Open({kPluginDir}, selection);
  ASSERT_FALSE(plugins.ok());
  EXPECT_EQ(plugins.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(plugins.status().message(), "'agin'")) << plugins.status().message();
  EXPECT_TRUE(Contains(plugins.status().message(), "plugin 'priority'"));
}

TEST(RuntimePluginsTest, AnotherExecutorIsRefused) {
  PluginPathGuard guard;
  PluginSelection selection;
  selection.executor = {"batched", ""};
  auto plugins = RuntimePlugins::Open({}, selection);
  ASSERT_FALSE(plugins.ok());
  EXPECT_EQ(plugins.status().code(), StatusCode::kInvalidArgument);
  const std::string message = plugins.status().message();
  EXPECT_TRUE(Contains(message, "'batched'")) << message;
  EXPECT_TRUE(Contains(message, "not implemented")) << message;
  EXPECT_TRUE(Contains(message, "'persistent'")) << message;
  // The default executor's config is still checked.
  selection.executor = {"persistent", "batch=x"};
  auto bad_config = RuntimePlugins::Open({}, selection);
  ASSERT_FALSE(bad_config.ok());
  EXPECT_TRUE(Contains(bad_config.status().message(), "selected executor"))
      << bad_config.status().message();
}

// Runtime::Open gives the plugin error, not "no CUDA device", for a bad
// plugin configuration; a good one gets past the plugins.
TEST(RuntimePluginsTest, OpenReportsPluginErrorsBeforeLookingForADevice) {
  PluginPathGuard guard;
  RuntimeConfig config;
  config.plugin_dirs = {(fs::temp_directory_path() / "gpuos-no-such-plugin-dir").string()};
  auto missing = Runtime::Open(config);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();

  config.plugin_dirs = {kPluginDir};
  config.plugins.scheduler = {"nope", ""};
  auto unknown = Runtime::Open(config);
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(Contains(unknown.status().message(), "no scheduler plugin named 'nope'"))
      << unknown.status().ToString();

  config.plugins.scheduler = {"priority", ""};
  auto good = Runtime::Open(config);  // no operators: fails after the plugins
  ASSERT_FALSE(good.ok());
  if (!CudaDeviceCount().ok()) {
    EXPECT_EQ(good.status().message().rfind("no CUDA device", 0), 0u) << good.status().ToString();
  } else {
    EXPECT_TRUE(Contains(good.status().message(), "repository_path")) << good.status().ToString();
  }
}

// ---- The root order ----

device::TaskDesc Task(unsigned int dependencies) {
  device::TaskDesc task = {};
  task.dependency_counter = dependencies;
  return task;
}

TEST(RootOrderTest, RootsAreTasksWithoutDependencies) {
  const std::vector<device::TaskDesc> tasks = {Task(0), Task(1), Task(0),
                                               Task(device::kNoDependencyCounter), Task(2)};
  EXPECT_EQ(RootTasks(tasks), (std::vector<std::uint32_t>{0, 2, 3}));
  EXPECT_TRUE(RootTasks({}).empty());
}

TEST(RootOrderTest, StagingOrderMovesOnlyRootsOverTheRootPositions) {
  const std::vector<std::uint32_t> roots = {0, 2, 3, 6};
  EXPECT_TRUE(StagingOrder(7, roots, roots).empty());  // the graph's own order
  const std::vector<std::uint32_t> scheduled = {6, 0, 3, 2};
  const std::vector<std::uint32_t> order = StagingOrder(7, roots, scheduled);
  EXPECT_EQ(order, (std::vector<std::uint32_t>{6, 1, 0, 3, 4, 5, 2}));
}

TEST(RootOrderTest, EstimatedBytesCountEveryOperand) {
  std::vector<device::TensorDesc> tensors(2);
  tensors[0].dtype = device::kDTypeF32;
  tensors[0].numel = 10;
  tensors[1].dtype = device::kDTypeF16;
  tensors[1].numel = 3;
  device::TaskDesc task = {};
  task.num_tensors = 3;
  task.tensors[0] = 0;
  task.tensors[1] = 1;
  task.tensors[2] = 0;  // in place: read and written
  EXPECT_EQ(EstimatedTaskBytes(task, tensors), 10u * 4 + 3u * 2 + 10u * 4);
  task.tensors[2] = 7;  // out of range: counts 0
  EXPECT_EQ(EstimatedTaskBytes(task, tensors), 10u * 4 + 3u * 2);
}

// A scheduler answering from a script.
class ScriptedScheduler final : public plugins::Scheduler {
 public:
  enum class Mode { kReverse, kDropLast, kFail };
  explicit ScriptedScheduler(Mode mode) : mode_(mode) {}
  Expected<std::vector<plugins::TaskPlacement>> Schedule(
      std::span<const plugins::ReadyTask> ready,
      std::span<const plugins::DeviceLoad> devices) noexcept override {
    seen.assign(ready.begin(), ready.end());
    loads.assign(devices.begin(), devices.end());
    if (mode_ == Mode::kFail) return Unavailable("the scheduler's queue is closed");
    std::vector<plugins::TaskPlacement> placements;
    for (auto it = ready.rbegin(); it != ready.rend(); ++it) {
      placements.push_back({it->task_id, devices.front().device});
    }
    if (mode_ == Mode::kDropLast && !placements.empty()) placements.pop_back();
    return placements;
  }
  std::vector<plugins::ReadyTask> seen;
  std::vector<plugins::DeviceLoad> loads;

 private:
  Mode mode_;
};

RootScheduleInput Input(const std::vector<device::TaskDesc>& tasks,
                        const std::vector<device::TensorDesc>& tensors,
                        const std::vector<std::int32_t>& priorities) {
  RootScheduleInput input;
  input.tasks = tasks;
  input.tensors = tensors;
  input.priorities = priorities;
  input.operator_name = [](std::uint32_t task) -> std::string_view {
    return task % 2 == 0 ? "add" : "noop";
  };
  input.device = 3;
  input.queued_tasks = 17;
  return input;
}

TEST(RootOrderTest, TheSchedulerSeesTheRootsAndItsOrderIsStaged) {
  std::vector<device::TensorDesc> tensors(1);
  tensors[0].dtype = device::kDTypeF32;
  tensors[0].numel = 8;
  std::vector<device::TaskDesc> tasks = {Task(0), Task(1), Task(0), Task(0)};
  tasks[2].num_tensors = 1;
  tasks[2].tensors[0] = 0;
  const std::vector<std::int32_t> priorities = {5, 0, -2, 9};
  ScriptedScheduler scheduler(ScriptedScheduler::Mode::kReverse);
  auto order =
      ScheduleRoots(scheduler, "scheduler plugin 'scripted'", Input(tasks, tensors, priorities));
  ASSERT_TRUE(order.ok()) << order.status().ToString();
  EXPECT_EQ(*order, (std::vector<std::uint32_t>{3, 1, 2, 0}));
  ASSERT_EQ(scheduler.seen.size(), 3u);
  EXPECT_EQ(scheduler.seen[0].task_id, 0u);
  EXPECT_EQ(scheduler.seen[1].task_id, 2u);
  EXPECT_EQ(scheduler.seen[1].sequence, 2u);
  EXPECT_EQ(scheduler.seen[1].operator_name, "add");
  EXPECT_EQ(scheduler.seen[1].estimated_bytes, 32u);
  EXPECT_EQ(scheduler.seen[1].priority, -2);
  EXPECT_EQ(scheduler.seen[1].device_hint, 3u);
  EXPECT_EQ(scheduler.seen[2].priority, 9);
  ASSERT_EQ(scheduler.loads.size(), 1u);
  EXPECT_EQ(scheduler.loads[0].device, 3u);
  EXPECT_EQ(scheduler.loads[0].queued_tasks, 17u);
}

TEST(RootOrderTest, ABrokenContractOrAnErrorNamesThePlugin) {
  const std::vector<device::TaskDesc> tasks = {Task(0), Task(0), Task(1)};
  ScriptedScheduler dropping(ScriptedScheduler::Mode::kDropLast);
  auto dropped = ScheduleRoots(dropping, "scheduler plugin 'scripted'", Input(tasks, {}, {}));
  ASSERT_FALSE(dropped.ok());
  EXPECT_EQ(dropped.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(dropped.status().message(), "scheduler plugin 'scripted' broke"))
      << dropped.status().message();
  EXPECT_TRUE(Contains(dropped.status().message(), "leaves out task 0"))
      << dropped.status().message();

  ScriptedScheduler failing(ScriptedScheduler::Mode::kFail);
  auto failed = ScheduleRoots(failing, "scheduler plugin 'scripted'", Input(tasks, {}, {}));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().message(),
            "scheduler plugin 'scripted': the scheduler's queue is closed");
}

// With the example "priority" plugin on random graphs: the roots, read in
// staging position order as the worker pushes them, come out by priority
// (ties by task index), and nothing but roots moved.
TEST(RootOrderTest, PrioritySchedulerOrderIsTheStagedRootOrder) {
  PluginPathGuard guard;
  PluginSelection selection;
  selection.scheduler = {"priority", ""};
  auto plugins = RuntimePlugins::Open({kPluginDir}, selection);
  ASSERT_TRUE(plugins.ok()) << plugins.status().ToString();
  plugins::Scheduler& scheduler = *(*plugins)->consulted_scheduler();
  std::mt19937 random(7);
  for (int round = 0; round < 50; ++round) {
    const std::uint32_t count = 1 + random() % 60;
    std::vector<device::TaskDesc> tasks;
    std::vector<std::int32_t> priorities;
    for (std::uint32_t i = 0; i < count; ++i) {
      tasks.push_back(Task(i == 0 || random() % 3 == 0 ? 0 : 1 + random() % 2));
      priorities.push_back(static_cast<std::int32_t>(random() % 5) - 2);
    }
    auto order =
        ScheduleRoots(scheduler, (*plugins)->scheduler_label(), Input(tasks, {}, priorities));
    ASSERT_TRUE(order.ok()) << order.status().ToString();
    std::vector<std::uint32_t> staged(count);
    std::iota(staged.begin(), staged.end(), 0u);
    if (!order->empty()) staged = *order;
    std::set<std::uint32_t> distinct(staged.begin(), staged.end());
    ASSERT_EQ(distinct.size(), count);   // a permutation
    std::vector<std::uint32_t> started;  // roots in position order
    for (std::uint32_t position = 0; position < count; ++position) {
      const std::uint32_t task = staged[position];
      if (tasks[task].dependency_counter == 0) {
        started.push_back(task);
      } else {
        EXPECT_EQ(task, position) << "a task with dependencies moved";
      }
    }
    std::vector<std::uint32_t> expected = RootTasks(tasks);
    std::stable_sort(expected.begin(), expected.end(), [&](std::uint32_t a, std::uint32_t b) {
      return priorities[a] > priorities[b];
    });
    EXPECT_EQ(started, expected) << "round " << round;
  }
}

}  // namespace
}  // namespace gpuos::runtime
