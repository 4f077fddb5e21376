// Behaviour of the built-in defaults, created through the host like plugins.
#include <gtest/gtest.h>

#include "gpuos/plugin_host.h"
#include "gpuos/plugins/checks.h"

namespace gpuos {
namespace {

using namespace gpuos::plugins;  // NOLINT: test brevity

template <typename Interface>
PluginObject<Interface> MustCreate(const PluginHost& host, std::string_view name,
                                   std::string_view config = {}) {
  auto made = host.Create<Interface>(name, config);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::move(made).value() : PluginObject<Interface>();
}

TEST(FifoSchedulerTest, KeepsSubmissionOrderWhateverTheInputOrder) {
  PluginHost host;
  auto fifo = MustCreate<Scheduler>(host, "fifo");
  ASSERT_TRUE(fifo);
  std::vector<ReadyTask> ready = {
      {.task_id = 30, .sequence = 12, .priority = 9},
      {.task_id = 10, .sequence = 4, .priority = -3},
      {.task_id = 20, .sequence = 7, .priority = 100},
  };
  std::vector<DeviceLoad> devices = {{.device = 0}};
  auto order = fifo->Schedule(ready, devices);
  ASSERT_TRUE(order.ok()) << order.status().ToString();
  EXPECT_TRUE(CheckSchedule(ready, devices, *order).ok());
  ASSERT_EQ(order->size(), 3u);
  EXPECT_EQ((*order)[0].task_id, 10u);
  EXPECT_EQ((*order)[1].task_id, 20u);
  EXPECT_EQ((*order)[2].task_id, 30u);
}

TEST(FifoSchedulerTest, HonoursHintsAndBalancesTheRestByQueuedTasks) {
  PluginHost host;
  auto fifo = MustCreate<Scheduler>(host, "fifo");
  std::vector<ReadyTask> ready = {
      {.task_id = 1, .sequence = 0},
      {.task_id = 2, .sequence = 1, .device_hint = 5},
      {.task_id = 3, .sequence = 2},
      {.task_id = 4, .sequence = 3},
      {.task_id = 5, .sequence = 4, .device_hint = 42},  // not available: balanced
  };
  std::vector<DeviceLoad> devices = {{.device = 5, .queued_tasks = 2}, {.device = 6}};
  auto order = fifo->Schedule(ready, devices);
  ASSERT_TRUE(order.ok()) << order.status().ToString();
  ASSERT_TRUE(CheckSchedule(ready, devices, *order).ok());
  // Queued tasks (device 5, device 6): (2,0) -> task 1 to 6 (2,1) -> task 2 hinted
  // to 5 (3,1) -> task 3 to 6 (3,2) -> task 4 to 6 (3,3) -> task 5 ties, first wins: 5.
  std::vector<TaskPlacement> expected = {{1, 6}, {2, 5}, {3, 6}, {4, 6}, {5, 5}};
  EXPECT_EQ(*order, expected);
}

TEST(FifoSchedulerTest, NoDevicesIsAnError) {
  PluginHost host;
  auto fifo = MustCreate<Scheduler>(host, "fifo");
  std::vector<ReadyTask> ready = {{.task_id = 1}};
  auto order = fifo->Schedule(ready, {});
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.status().code(), StatusCode::kInvalidArgument);
}

TEST(UnlimitedMemoryManagerTest, LoadsMissingRequiredTensorsAndNeverEvicts) {
  PluginHost host;
  auto manager = MustCreate<MemoryManager>(host, "unlimited");
  std::vector<TensorState> tensors = {
      {.tensor_id = 1, .bytes = 100, .resident = true},
      {.tensor_id = 2, .bytes = 200},
      {.tensor_id = 3, .bytes = 300},
  };
  std::vector<std::uint64_t> required = {2, 1, 2};
  MemoryRequest request{.capacity_bytes = 150, .tensors = tensors, .required = required};
  auto plan = manager->Plan(request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(CheckMemoryPlan(request, *plan).ok()) << CheckMemoryPlan(request, *plan).ToString();
  EXPECT_EQ(plan->load, std::vector<std::uint64_t>{2});
  EXPECT_TRUE(plan->evict.empty());
  EXPECT_EQ(ResidentBytesAfter(request, *plan), 300u) << "over capacity: unlimited ignores it";
}

TEST(UnlimitedMemoryManagerTest, UnknownRequiredTensorIsAnError) {
  PluginHost host;
  auto manager = MustCreate<MemoryManager>(host, "unlimited");
  std::vector<std::uint64_t> required = {9};
  auto plan = manager->Plan(MemoryRequest{.required = required});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("tensor 9"), std::string::npos);
}

TEST(NoFusionStrategyTest, FusesNothing) {
  PluginHost host;
  auto strategy = MustCreate<FusionStrategy>(host, "no_fusion");
  std::vector<FusionNode> nodes = {{"core.mul", OperatorClass::kElementwise, 16},
                                   {"core.add", OperatorClass::kElementwise, 16}};
  std::vector<FusionEdge> edges = {{0, 1}};
  auto groups = strategy->Plan(FusionGraphView{nodes, edges});
  ASSERT_TRUE(groups.ok());
  EXPECT_TRUE(groups->empty());
}

// Records what an executor submits, for checking batching and order.
class RecordingQueue final : public SubmissionQueue {
 public:
  explicit RecordingQueue(std::uint32_t capacity) : capacity_(capacity) {}
  std::uint32_t Capacity() const noexcept override { return capacity_; }
  Status Submit(std::span<const std::uint64_t> task_ids) noexcept override {
    if (task_ids.empty() || task_ids.size() > capacity_) return Internal("bad batch size");
    batches.emplace_back(task_ids.begin(), task_ids.end());
    return fail_submit_ ? Unavailable("device lost") : Status::Ok();
  }
  Status WaitForCompletion() noexcept override {
    ++waits;
    return Status::Ok();
  }
  void FailSubmissions() { fail_submit_ = true; }

  std::vector<std::vector<std::uint64_t>> batches;
  int waits = 0;

 private:
  std::uint32_t capacity_;
  bool fail_submit_ = false;
};

std::vector<ExecutionTask> Chain(std::span<const std::uint64_t> ids,
                                 std::vector<std::uint64_t>& storage) {
  storage.assign(ids.begin(), ids.end());
  std::vector<ExecutionTask> tasks;
  for (std::size_t i = 0; i < storage.size(); ++i) {
    std::span<const std::uint64_t> dependencies;
    if (i > 0) dependencies = std::span<const std::uint64_t>(&storage[i - 1], 1);
    tasks.push_back({storage[i], "core.add", dependencies, 0});
  }
  return tasks;
}

TEST(PersistentExecutorTest, SubmitsInOrderInBatchesOfTheQueueCapacityAndWaitsOnce) {
  PluginHost host;
  auto executor = MustCreate<Executor>(host, "persistent");
  std::vector<std::uint64_t> ids = {1, 2, 3, 4, 5}, storage;
  RecordingQueue queue(2);
  ASSERT_TRUE(executor->Execute(Chain(ids, storage), queue).ok());
  std::vector<std::vector<std::uint64_t>> expected = {{1, 2}, {3, 4}, {5}};
  EXPECT_EQ(queue.batches, expected);
  EXPECT_EQ(queue.waits, 1);
}

TEST(PersistentExecutorTest, BatchConfigCapsTheBatchSize) {
  PluginHost host;
  auto executor = MustCreate<Executor>(host, "persistent", "batch=3");
  std::vector<std::uint64_t> ids = {1, 2, 3, 4, 5, 6, 7}, storage;
  RecordingQueue queue(100);
  ASSERT_TRUE(executor->Execute(Chain(ids, storage), queue).ok());
  std::vector<std::vector<std::uint64_t>> expected = {{1, 2, 3}, {4, 5, 6}, {7}};
  EXPECT_EQ(queue.batches, expected);
}

TEST(PersistentExecutorTest, RefusesTasksOutOfTopologicalOrder) {
  PluginHost host;
  auto executor = MustCreate<Executor>(host, "persistent");
  std::uint64_t first = 1;
  std::vector<ExecutionTask> tasks = {{2, "core.add", std::span(&first, 1), 0},
                                      {1, "core.mul", {}, 0}};
  RecordingQueue queue(8);
  Status status = executor->Execute(tasks, queue);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("task 2 comes before its dependency, task 1"), std::string::npos)
      << status.message();
  EXPECT_TRUE(queue.batches.empty()) << "nothing is submitted from a bad order";
}

TEST(PersistentExecutorTest, StopsAtTheFirstSubmissionError) {
  PluginHost host;
  auto executor = MustCreate<Executor>(host, "persistent");
  std::vector<std::uint64_t> ids = {1, 2, 3}, storage;
  RecordingQueue queue(1);
  queue.FailSubmissions();
  Status status = executor->Execute(Chain(ids, storage), queue);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(queue.batches.size(), 1u);
  EXPECT_EQ(queue.waits, 0);
}

}  // namespace
}  // namespace gpuos
