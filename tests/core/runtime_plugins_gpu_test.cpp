// The scheduler plugin on a GPU (docs/runtime.md, "Plugins"): with one
// worker block, a submission's roots start in the order the scheduler chose
// (the example "priority" plugin, from the build's plugin directory), or in
// task order with the default fifo; reordered roots keep their dependencies
// and their names in errors. Skips where there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "gpuos/registry/pack_loader.h"
#include "runtime_gpu_fixture.h"
#include "runtime_test_util.h"

namespace gpuos::runtime {
namespace {

using testing::DeviceTensor;
using testing::Download;
using testing::Upload;

class RuntimePluginsGpuTest : public testing::GpuRuntimeTest {
 protected:
  // A runtime over add, mul and `stamp` with `scheduler` ("" = the default)
  // loaded from the build's plugin directory.
  std::unique_ptr<Runtime> Open(const std::string& scheduler, unsigned int blocks,
                                unsigned int trace_capacity) {
    RuntimeConfig config;
    config.plugin_dirs = {GPUOS_TEST_PLUGIN_DIR};
    if (!scheduler.empty()) config.plugins.scheduler = {scheduler, ""};
    config.blocks = blocks;
    config.trace_capacity = trace_capacity;
    return OpenWithSpin(config, "stamp", "1.0.0", "runtime_plugins_gpu_test.cpp",
                        "runtime_plugins_test_cache.db");
  }
};

// Tasks of `sequence` in the order they started (one worker block).
std::vector<std::uint32_t> StartOrder(const std::vector<TraceEvent>& events,
                                      std::uint64_t sequence) {
  std::vector<TraceEvent> mine;
  for (const TraceEvent& e : events) {
    if (e.sequence == sequence && e.category == "task") mine.push_back(e);
  }
  std::sort(mine.begin(), mine.end(),
            [](const TraceEvent& a, const TraceEvent& b) { return a.start_ns < b.start_ns; });
  std::vector<std::uint32_t> order;
  for (const TraceEvent& e : mine) order.push_back(e.task_index.value_or(~0u));
  return order;
}

// Independent `stamp` tasks, task i writing i + 1 into its own element of
// `out`, with `priorities`; checks the values and returns the start order.
void RunIndependentRoots(Runtime& runtime, const std::vector<std::int32_t>& priorities,
                         std::vector<std::uint32_t>* started) {
  const std::size_t n = priorities.size();
  auto out = Upload(runtime, std::vector<float>(n, NAN));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  TaskGraph graph(runtime);
  for (std::size_t i = 0; i < n; ++i) {
    device::TensorDesc element = out->desc;
    element.data += i * sizeof(float);
    element.sizes[0] = 1;
    element.numel = 1;
    TaskOptions options;
    options.priority = priorities[i];
    ASSERT_TRUE(graph
                    .Add("stamp", DType::kF32, {element},
                         {{"spin_ns", "3000"}, {"value", std::to_string(i + 1)}}, {}, options)
                    .ok());
  }
  auto done = runtime.Submit(graph);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  ASSERT_TRUE(done->Wait(std::chrono::seconds(10)).ok());
  auto values = Download(runtime, *out);
  ASSERT_TRUE(values.ok());
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ((*values)[i], static_cast<float>(i + 1));
  auto events = runtime.TraceEvents();
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  *started = StartOrder(*events, done->sequence());
}

const std::vector<std::int32_t> kPriorities = {0, 3, -1, 7, 3, 0, 12, -5, 7, 1, 0, 2, 9, -1, 4, 3};

TEST_F(RuntimePluginsGpuTest, RootsStartInPriorityOrder) {
  OPEN_OR_SKIP(runtime, Open("priority", 1, 4096));
  EXPECT_EQ(runtime->plugins().scheduler.info.name, "priority");
  EXPECT_TRUE(runtime->plugins().scheduler.consulted);
  ASSERT_EQ(runtime->worker_blocks(), 1u);
  std::vector<std::uint32_t> expected(kPriorities.size());
  std::iota(expected.begin(), expected.end(), 0u);
  std::stable_sort(expected.begin(), expected.end(), [](std::uint32_t a, std::uint32_t b) {
    return kPriorities[a] > kPriorities[b];
  });
  for (int round = 0; round < 3; ++round) {  // the same graph again, ring positions moved on
    std::vector<std::uint32_t> started;
    RunIndependentRoots(*runtime, kPriorities, &started);
    if (HasFatalFailure()) return;
    EXPECT_EQ(started, expected) << "round " << round;
  }
}

TEST_F(RuntimePluginsGpuTest, FifoRootsStartInTaskOrder) {
  OPEN_OR_SKIP(runtime, Open("", 1, 4096));
  EXPECT_EQ(runtime->plugins().scheduler.info.name, "fifo");
  EXPECT_FALSE(runtime->plugins().scheduler.consulted);
  std::vector<std::uint32_t> expected(kPriorities.size());
  std::iota(expected.begin(), expected.end(), 0u);
  std::vector<std::uint32_t> started;
  RunIndependentRoots(*runtime, kPriorities, &started);
  if (HasFatalFailure()) return;
  EXPECT_EQ(started, expected);
}

// Roots moved by the scheduler keep their successors: four chains
// (root stamp -> add -> mul) joined by adds, on every worker block.
TEST_F(RuntimePluginsGpuTest, ReorderedRootsKeepTheirDependencies) {
  OPEN_OR_SKIP(runtime, Open("priority", 0, 0));
  constexpr std::size_t kN = 256;
  constexpr int kChains = 4;
  const std::int32_t priorities[kChains] = {0, 5, 1, 9};
  std::vector<DeviceTensor> cells;
  for (int c = 0; c < kChains; ++c) {
    auto cell = Upload(*runtime, std::vector<float>(kN, NAN));
    ASSERT_TRUE(cell.ok());
    cells.push_back(*cell);
  }
  auto ones = Upload(*runtime, std::vector<float>(kN, 1.0f));
  auto total = Upload(*runtime, std::vector<float>(kN, NAN));
  ASSERT_TRUE(ones.ok() && total.ok());
  for (int round = 0; round < 20; ++round) {
    TaskGraph graph(*runtime);
    std::vector<TaskId> ends;
    for (int c = 0; c < kChains; ++c) {
      TaskOptions options;
      options.priority = priorities[c];
      auto root = graph.Add("stamp", DType::kF32, {cells[c].desc},
                            {{"value", std::to_string(c + round)}}, {}, options);
      ASSERT_TRUE(root.ok());
      auto plus =
          graph.Add("add", DType::kF32, {cells[c].desc, ones->desc, cells[c].desc}, {}, {*root});
      ASSERT_TRUE(plus.ok());
      auto twice =
          graph.Add("mul", DType::kF32, {cells[c].desc, cells[c].desc, cells[c].desc}, {}, {*plus});
      ASSERT_TRUE(twice.ok());
      ends.push_back(*twice);
    }
    // total = cell0 + cell1, then += cell2, += cell3.
    auto sum = graph.Add("add", DType::kF32, {cells[0].desc, cells[1].desc, total->desc}, {},
                         {ends[0], ends[1]});
    ASSERT_TRUE(sum.ok());
    for (int c = 2; c < kChains; ++c) {
      sum = graph.Add("add", DType::kF32, {total->desc, cells[c].desc, total->desc}, {},
                      {*sum, ends[c]});
      ASSERT_TRUE(sum.ok());
    }
    auto done = runtime->Submit(graph);
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    ASSERT_TRUE(done->Wait(std::chrono::seconds(10)).ok()) << "round " << round;
    auto got = Download(*runtime, *total);
    ASSERT_TRUE(got.ok());
    float expected = 0;
    for (int c = 0; c < kChains; ++c) {
      const float v = static_cast<float>(c + round) + 1.0f;
      expected += v * v;
    }
    for (std::size_t i = 0; i < kN; ++i) ASSERT_EQ((*got)[i], expected) << "round " << round;
  }
}

// A failing root that the scheduler moved to the front is still named by
// its index in the graph.
TEST_F(RuntimePluginsGpuTest, AMovedRootIsNamedByItsGraphIndex) {
  OPEN_OR_SKIP(runtime, Open("priority", 1, 0));
  auto out = Upload(*runtime, std::vector<float>(4, NAN));
  ASSERT_TRUE(out.ok());
  TaskGraph graph(*runtime);
  for (int i = 0; i < 4; ++i) {
    TaskOptions options;
    options.priority = i == 2 ? 10 : 0;  // task 2 starts first, at position 0
    ASSERT_TRUE(graph
                    .Add("stamp", DType::kF32, {out->desc}, {{"fail_code", i == 2 ? "9" : "0"}}, {},
                         options)
                    .ok());
  }
  auto done = runtime->Submit(graph);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  const Status status = done->Wait(std::chrono::seconds(10));
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition) << status.ToString();
  EXPECT_NE(status.message().find("task 2 "), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("stamp f32 version 1.0.0"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("code 9"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace gpuos::runtime
