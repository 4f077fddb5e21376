// The plugin registry: built-ins, creation by name, selection, factory errors.
#include "gpuos/plugin_host.h"

#include <gtest/gtest.h>

#include "plugin_test_support.h"

namespace gpuos {
namespace {

using plugins::DeviceLoad;
using plugins::ReadyTask;
using plugins::TaskPlacement;
namespace fs = std::filesystem;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PluginHostTest, ListsTheBuiltinDefaultsByKind) {
  PluginHost host;
  std::vector<PluginInfo> plugins = host.List();
  ASSERT_EQ(plugins.size(), 4u);
  // Sorted by kind: fusion_strategy(2), executor(3), scheduler(4), memory_manager(5).
  EXPECT_EQ(plugins[0].name, "no_fusion");
  EXPECT_EQ(plugins[1].name, "persistent");
  EXPECT_EQ(plugins[2].name, "fifo");
  EXPECT_EQ(plugins[3].name, "unlimited");
  for (const PluginInfo& plugin : plugins) {
    EXPECT_TRUE(plugin.builtin) << plugin.name;
    EXPECT_TRUE(plugin.path.empty()) << plugin.name;
    EXPECT_EQ(DefaultPluginName(plugin.kind), plugin.name);
  }
  EXPECT_EQ(DefaultPluginName(PluginKind::kFrontend), "");
}

TEST(PluginHostTest, PluginKindNamesRoundTrip) {
  for (PluginKind kind : kAllPluginKinds) {
    EXPECT_EQ(ParsePluginKind(PluginKindName(kind)), kind);
    EXPECT_EQ(PluginKindFromValue(static_cast<std::uint32_t>(kind)), kind);
  }
  EXPECT_FALSE(ParsePluginKind("schedulers").has_value());
  EXPECT_FALSE(PluginKindFromValue(0).has_value());
}

TEST(PluginHostTest, UnknownNameIsNotFoundAndListsTheAlternatives) {
  PluginHost host;
  Expected<PluginObject<plugins::Scheduler>> made = host.Create<plugins::Scheduler>("lifo");
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(made.status().message(), "no scheduler plugin named 'lifo'"));
  EXPECT_TRUE(Contains(made.status().message(), "available: fifo")) << made.status().message();
}

TEST(PluginHostTest, PluginOfAnotherKindIsRefused) {
  PluginHost host;
  Expected<PluginObject<plugins::Scheduler>> made = host.Create<plugins::Scheduler>("unlimited");
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(made.status().message(), "is a memory_manager, not a scheduler"))
      << made.status().message();
}

TEST(PluginHostTest, FactoryFailureIsReportedWithPluginAndFile) {
  PluginHost host;
  ASSERT_TRUE(host.LoadLibrary(plugin_test::kFailingFactory).ok());
  const std::string file = fs::canonical(plugin_test::kFailingFactory).string();

  auto made = host.Create<plugins::Scheduler>("test_failing_factory");
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(made.status().message(),
            "plugin 'test_failing_factory' (" + file +
                ") could not create a scheduler: cannot open /dev/gpuos-test-accelerator: no such "
                "device");

  made = host.Create<plugins::Scheduler>("test_failing_factory", "fail=throw");
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(
      Contains(made.status().message(), "the plugin's factory threw: simulated driver crash"))
      << made.status().message();

  made = host.Create<plugins::Scheduler>("test_failing_factory", "fail=internal");
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(made.status().message(), "simulated internal failure"));

  made = host.Create<plugins::Scheduler>("test_failing_factory", "fail=null");
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(made.status().message(), "returned no object"));
}

TEST(PluginHostTest, BadConfigIsInvalidArgumentNamingTheKey) {
  PluginHost host;
  auto made = host.Create<plugins::Scheduler>("fifo", "agin=3");
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(made.status().message(), "plugin 'fifo' (built in)"));
  EXPECT_TRUE(Contains(made.status().message(), "key 'agin' is not known"));

  auto executor = host.Create<plugins::Executor>("persistent", "batch=lots");
  ASSERT_FALSE(executor.ok());
  EXPECT_TRUE(Contains(executor.status().message(), "'batch' = 'lots' is not an unsigned integer"))
      << executor.status().message();

  auto malformed = host.Create<plugins::Executor>("persistent", "batch");
  ASSERT_FALSE(malformed.ok());
  EXPECT_TRUE(Contains(malformed.status().message(), "is not of the form key=value"));
}

TEST(PluginHostTest, DefaultSelectionCreatesTheBuiltins) {
  PluginHost host;
  Expected<PluginSet> set = host.CreateSelected(PluginSelection{});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->scheduler.plugin_name(), "fifo");
  EXPECT_EQ(set->memory_manager.plugin_name(), "unlimited");
  EXPECT_EQ(set->fusion_strategy.plugin_name(), "no_fusion");
  EXPECT_EQ(set->executor.plugin_name(), "persistent");
  EXPECT_TRUE(set->scheduler && set->memory_manager && set->fusion_strategy && set->executor);
}

TEST(PluginHostTest, SelectingALoadedPluginByNameReplacesTheDefault) {
  PluginHost host;
  ASSERT_TRUE(host.LoadLibrary(plugin_test::kPriorityScheduler).ok());
  PluginSelection selection;
  selection.scheduler = {"priority", ""};
  Expected<PluginSet> set = host.CreateSelected(selection);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->scheduler.plugin_name(), "priority");

  // The selected scheduler, not FIFO, decides: the urgent late task goes first.
  std::vector<ReadyTask> ready = {{.task_id = 1, .sequence = 0, .priority = 0},
                                  {.task_id = 2, .sequence = 1, .priority = 5}};
  std::vector<DeviceLoad> devices = {{.device = 0}};
  auto order = set->scheduler->Schedule(ready, devices);
  ASSERT_TRUE(order.ok()) << order.status().ToString();
  std::vector<TaskPlacement> expected = {{2, 0}, {1, 0}};
  EXPECT_EQ(*order, expected);
}

TEST(PluginHostTest, SelectionErrorsNameTheKind) {
  PluginHost host;
  PluginSelection selection;
  selection.memory_manager = {"belady", "budget=1G"};
  Expected<PluginSet> set = host.CreateSelected(selection);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(set.status().message(),
                       "selected memory_manager: no memory_manager plugin "
                       "named 'belady'"))
      << set.status().message();
}

TEST(PluginHostTest, ObjectsOutliveTheirHost) {
  Expected<PluginObject<plugins::Scheduler>> made = [] {
    PluginHost host;
    EXPECT_TRUE(host.LoadLibrary(plugin_test::kPriorityScheduler).ok());
    return host.Create<plugins::Scheduler>("priority", "aging=1");
  }();
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::vector<ReadyTask> ready = {{.task_id = 7, .sequence = 3}};
  std::vector<DeviceLoad> devices = {{.device = 1}};
  auto order = (*made)->Schedule(ready, devices);
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(order->at(0), (TaskPlacement{7, 1}));
}

TEST(PluginHostTest, PluginObjectMovesAndResets) {
  PluginHost host;
  auto made = host.Create<plugins::FusionStrategy>("no_fusion");
  ASSERT_TRUE(made.ok());
  PluginObject<plugins::FusionStrategy> moved = std::move(*made);
  EXPECT_FALSE(*made);
  EXPECT_TRUE(moved);
  moved.reset();
  EXPECT_FALSE(moved);
  EXPECT_EQ(moved.get(), nullptr);
}

}  // namespace
}  // namespace gpuos
