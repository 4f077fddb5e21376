// The example plugins of plugins/ and the test frontend, loaded from their
// libraries and used through their interfaces.
#include <gtest/gtest.h>

#include "gpuos/plugin_host.h"
#include "gpuos/plugins/checks.h"
#include "plugin_test_support.h"

namespace gpuos {
namespace {

using namespace gpuos::plugins;  // NOLINT: test brevity

template <typename Interface>
PluginObject<Interface> LoadAndCreate(PluginHost& host, const std::filesystem::path& library,
                                      std::string_view name, std::string_view config = {}) {
  Expected<PluginInfo> info = host.LoadLibrary(library);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  auto made = host.Create<Interface>(name, config);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::move(made).value() : PluginObject<Interface>();
}

std::vector<std::uint64_t> Ids(const std::vector<TaskPlacement>& placements) {
  std::vector<std::uint64_t> ids;
  for (const TaskPlacement& placement : placements) ids.push_back(placement.task_id);
  return ids;
}

TEST(PriorityPluginTest, RunsUrgentTasksFirstThenBySubmissionOrder) {
  PluginHost host;
  auto scheduler = LoadAndCreate<Scheduler>(host, plugin_test::kPriorityScheduler, "priority");
  ASSERT_TRUE(scheduler);
  std::vector<ReadyTask> ready = {
      {.task_id = 1, .sequence = 0, .priority = 0},  {.task_id = 2, .sequence = 1, .priority = 3},
      {.task_id = 3, .sequence = 2, .priority = 0},  {.task_id = 4, .sequence = 3, .priority = 3},
      {.task_id = 5, .sequence = 4, .priority = -1},
  };
  std::vector<DeviceLoad> devices = {{.device = 0}};
  auto order = scheduler->Schedule(ready, devices);
  ASSERT_TRUE(order.ok()) << order.status().ToString();
  ASSERT_TRUE(CheckSchedule(ready, devices, *order).ok());
  EXPECT_EQ(Ids(*order), (std::vector<std::uint64_t>{2, 4, 1, 3, 5}));
}

TEST(PriorityPluginTest, AgingLetsOldTasksOvertakeNewUrgentOnes) {
  PluginHost host;
  auto scheduler =
      LoadAndCreate<Scheduler>(host, plugin_test::kPriorityScheduler, "priority", "aging=2");
  ASSERT_TRUE(scheduler);
  // Newest sequence 10. Task 1 ages (10-0)/2 = 5 -> 5; task 2 is 4 + (10-6)/2 = 6;
  // task 3 is 3 + 0 = 3.
  std::vector<ReadyTask> ready = {{.task_id = 1, .sequence = 0, .priority = 0},
                                  {.task_id = 2, .sequence = 6, .priority = 4},
                                  {.task_id = 3, .sequence = 10, .priority = 3}};
  std::vector<DeviceLoad> devices = {{.device = 0}};
  auto order = scheduler->Schedule(ready, devices);
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(Ids(*order), (std::vector<std::uint64_t>{2, 1, 3}));
}

TEST(PriorityPluginTest, PlacesUnhintedTasksOnTheDeviceWithFewestQueuedBytes) {
  PluginHost host;
  auto scheduler = LoadAndCreate<Scheduler>(host, plugin_test::kPriorityScheduler, "priority");
  ASSERT_TRUE(scheduler);
  std::vector<ReadyTask> ready = {
      {.task_id = 1, .sequence = 0, .estimated_bytes = 500},
      {.task_id = 2, .sequence = 1, .estimated_bytes = 500},
      {.task_id = 3, .sequence = 2, .estimated_bytes = 10, .device_hint = 1},
  };
  std::vector<DeviceLoad> devices = {{.device = 0, .queued_bytes = 100},
                                     {.device = 1, .queued_bytes = 300}};
  auto order = scheduler->Schedule(ready, devices);
  ASSERT_TRUE(order.ok());
  // 1 -> device 0 (100 < 300; now 600), 2 -> device 1 (300 < 600), 3 hinted -> 1.
  std::vector<TaskPlacement> expected = {{1, 0}, {2, 1}, {3, 1}};
  EXPECT_EQ(*order, expected);
}

TEST(PriorityPluginTest, RejectsUnknownAndMalformedConfig) {
  PluginHost host;
  ASSERT_TRUE(host.LoadLibrary(plugin_test::kPriorityScheduler).ok());
  auto typo = host.Create<Scheduler>("priority", "ageing=2");
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(typo.status().message().find("accepted: aging"), std::string::npos);
  auto negative = host.Create<Scheduler>("priority", "aging=-1");
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
}

class BeladyPluginTest : public ::testing::Test {
 protected:
  // Tensors 1..4 resident (100 bytes each), 5 not resident (150 bytes).
  std::vector<TensorState> tensors_ = {
      {.tensor_id = 1, .bytes = 100, .resident = true},
      {.tensor_id = 2, .bytes = 100, .resident = true},
      {.tensor_id = 3, .bytes = 100, .resident = true, .in_use = true},
      {.tensor_id = 4, .bytes = 100, .resident = true},
      {.tensor_id = 5, .bytes = 150},
  };
  std::vector<std::uint64_t> required_ = {5, 4};
  // Tensor 1 is used at step 1, tensor 2 at step 3, tensor 4 at 2.
  std::vector<TensorUse> upcoming_ = {{1, 1}, {4, 2}, {2, 3}, {1, 4}};
};

TEST_F(BeladyPluginTest, EvictsTheTensorNeededFurthestAhead) {
  PluginHost host;
  auto manager =
      LoadAndCreate<MemoryManager>(host, plugin_test::kBeladyMemoryManager, "belady", "budget=500");
  ASSERT_TRUE(manager);
  MemoryRequest request{.tensors = tensors_, .required = required_, .upcoming = upcoming_};
  auto plan = manager->Plan(request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(CheckMemoryPlan(request, *plan).ok()) << CheckMemoryPlan(request, *plan).ToString();
  // 400 resident + 150 incoming > 500: one eviction. Tensor 3 is in use and
  // 4 required; of 1 (next at step 1) and 2 (step 3), 2 goes.
  EXPECT_EQ(plan->evict, std::vector<std::uint64_t>{2});
  EXPECT_EQ(plan->load, std::vector<std::uint64_t>{5});
  EXPECT_EQ(ResidentBytesAfter(request, *plan), 450u);
}

TEST_F(BeladyPluginTest, UsesTheRequestCapacityWithoutABudgetAndEvictsUnusedFirst) {
  PluginHost host;
  auto manager = LoadAndCreate<MemoryManager>(host, plugin_test::kBeladyMemoryManager, "belady");
  ASSERT_TRUE(manager);
  std::vector<TensorUse> upcoming = {{2, 1}};  // tensor 1 is never used again
  MemoryRequest request{
      .capacity_bytes = 400, .tensors = tensors_, .required = required_, .upcoming = upcoming};
  auto plan = manager->Plan(request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(CheckMemoryPlan(request, *plan).ok());
  // Needs 150 bytes freed: tensor 1 (never used) then tensor 2.
  EXPECT_EQ(plan->evict, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_LE(ResidentBytesAfter(request, *plan), 400u);
}

TEST_F(BeladyPluginTest, ReportsHowManyBytesAreMissingWhenNothingFits) {
  PluginHost host;
  auto manager =
      LoadAndCreate<MemoryManager>(host, plugin_test::kBeladyMemoryManager, "belady", "budget=300");
  ASSERT_TRUE(manager);
  MemoryRequest request{.tensors = tensors_, .required = required_, .upcoming = upcoming_};
  auto plan = manager->Plan(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUnavailable);
  // After evicting 1 and 2: 3 (in use) + 4 + 5 = 350 bytes, 50 over.
  EXPECT_NE(plan.status().message().find("needs 50 bytes more than the budget of 300"),
            std::string::npos)
      << plan.status().message();
}

TEST_F(BeladyPluginTest, AcceptsByteSuffixes) {
  PluginHost host;
  auto manager =
      LoadAndCreate<MemoryManager>(host, plugin_test::kBeladyMemoryManager, "belady", "budget=1K");
  ASSERT_TRUE(manager);
  MemoryRequest request{.tensors = tensors_, .required = required_, .upcoming = upcoming_};
  auto plan = manager->Plan(request);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->evict.empty()) << "550 bytes fit in 1024";
  auto bad = host.Create<MemoryManager>("belady", "budget=2X");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not a byte size"), std::string::npos);
}

// Records the graph a frontend describes.
class RecordingBuilder final : public GraphBuilder {
 public:
  Expected<std::uint32_t> AddTensor(std::string_view name, DType dtype,
                                    std::span<const std::int64_t> shape) noexcept override {
    std::string text = std::string(name) + ":" + DTypeName(dtype);
    for (std::int64_t dim : shape) text += " " + std::to_string(dim);
    tensors.push_back(text);
    return static_cast<std::uint32_t>(tensors.size() - 1);
  }
  Expected<std::uint32_t> AddOperation(
      std::string_view operator_name, std::span<const std::uint32_t> inputs,
      std::span<const std::uint32_t> outputs,
      std::span<const OperationAttribute> attributes) noexcept override {
    if (operator_name == "core.unknown")
      return NotFound("operator 'core.unknown' is not registered");
    std::string text(operator_name);
    for (std::uint32_t input : inputs) text += " " + std::to_string(input);
    text += " ->";
    for (std::uint32_t output : outputs) text += " " + std::to_string(output);
    for (const OperationAttribute& attribute : attributes) {
      text += " " + std::string(attribute.name) + "=" + std::string(attribute.value);
    }
    operations.push_back(text);
    return static_cast<std::uint32_t>(operations.size() - 1);
  }
  Status MarkOutput(std::uint32_t tensor) noexcept override {
    marked_outputs.push_back(tensor);
    return Status::Ok();
  }

  std::vector<std::string> tensors;
  std::vector<std::string> operations;
  std::vector<std::uint32_t> marked_outputs;
};

TEST(FrontendPluginTest, ImportsAModelThroughTheBuilder) {
  plugin_test::ScratchDirectory scratch;
  std::filesystem::path model = scratch.WriteFile("model.lines",
                                                  "# a tiny model\n"
                                                  "tensor x f32 2 3\n"
                                                  "tensor y bf16 3\n"
                                                  "tensor z f32 2 3\n"
                                                  "\n"
                                                  "op core.add x y -> z alpha=0.5\n"
                                                  "output z\n");
  PluginHost host;
  auto frontend = LoadAndCreate<Frontend>(host, plugin_test::kLineFrontend, "test_lines");
  ASSERT_TRUE(frontend);
  EXPECT_EQ(frontend->Format(), "gpuos-test-lines");
  RecordingBuilder builder;
  Status status = frontend->Import(model.string(), builder);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(builder.tensors, (std::vector<std::string>{"x:f32 2 3", "y:bf16 3", "z:f32 2 3"}));
  EXPECT_EQ(builder.operations, std::vector<std::string>{"core.add 0 1 -> 2 alpha=0.5"});
  EXPECT_EQ(builder.marked_outputs, std::vector<std::uint32_t>{2});
}

TEST(FrontendPluginTest, ErrorsNameTheFileAndLine) {
  plugin_test::ScratchDirectory scratch;
  std::filesystem::path model =
      scratch.WriteFile("bad.lines", "tensor x f32 4\nop core.unknown x -> x\n");
  PluginHost host;
  auto frontend = LoadAndCreate<Frontend>(host, plugin_test::kLineFrontend, "test_lines");
  ASSERT_TRUE(frontend);
  RecordingBuilder builder;
  Status status = frontend->Import(model.string(), builder);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), model.string() + ":2: operator 'core.unknown' is not registered");
}

}  // namespace
}  // namespace gpuos
