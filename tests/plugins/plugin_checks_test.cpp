// The contract checks the runtime applies to plugin answers.
#include <gtest/gtest.h>

#include "gpuos/plugins/checks.h"

namespace gpuos::plugins {
namespace {

bool MessageHas(const Status& status, const std::string& part) {
  return status.message().find(part) != std::string::npos;
}

TEST(CheckScheduleTest, AcceptsAPermutationAndRejectsEveryViolation) {
  std::vector<ReadyTask> ready = {{.task_id = 1}, {.task_id = 2}};
  std::vector<DeviceLoad> devices = {{.device = 0}, {.device = 3}};
  std::vector<TaskPlacement> good = {{2, 3}, {1, 0}};
  EXPECT_TRUE(CheckSchedule(ready, devices, good).ok());

  std::vector<TaskPlacement> missing = {{2, 3}};
  EXPECT_TRUE(MessageHas(CheckSchedule(ready, devices, missing), "leaves out task 1"));
  std::vector<TaskPlacement> twice = {{1, 0}, {1, 0}, {2, 0}};
  EXPECT_TRUE(MessageHas(CheckSchedule(ready, devices, twice), "places task 1 twice"));
  std::vector<TaskPlacement> stranger = {{1, 0}, {2, 0}, {9, 0}};
  EXPECT_TRUE(MessageHas(CheckSchedule(ready, devices, stranger), "task 9, which is not in"));
  std::vector<TaskPlacement> bad_device = {{1, 0}, {2, 1}};
  EXPECT_TRUE(MessageHas(CheckSchedule(ready, devices, bad_device), "on device 1"));
}

TEST(CheckMemoryPlanTest, AcceptsAConsistentPlanAndRejectsEveryViolation) {
  std::vector<TensorState> tensors = {
      {.tensor_id = 1, .bytes = 10, .resident = true},
      {.tensor_id = 2, .bytes = 20, .resident = true, .in_use = true},
      {.tensor_id = 3, .bytes = 30},
      {.tensor_id = 4, .bytes = 40, .resident = true},
  };
  std::vector<std::uint64_t> required = {3, 4};
  MemoryRequest request{.tensors = tensors, .required = required};

  MemoryPlan good{.evict = {1}, .load = {3}};
  EXPECT_TRUE(CheckMemoryPlan(request, good).ok()) << CheckMemoryPlan(request, good).ToString();
  EXPECT_EQ(ResidentBytesAfter(request, good), 20u + 30u + 40u);

  auto rejects = [&](MemoryPlan plan, const std::string& part) {
    Status status = CheckMemoryPlan(request, plan);
    EXPECT_FALSE(status.ok());
    EXPECT_TRUE(MessageHas(status, part)) << status.message();
  };
  rejects({.evict = {2}, .load = {3}}, "which a running task uses");
  rejects({.evict = {4}, .load = {3}}, "which the next task requires");
  rejects({.evict = {3}, .load = {3}}, "which is not resident");
  rejects({.evict = {}, .load = {1, 3}}, "already resident");
  rejects({.evict = {7}, .load = {3}}, "evicts unknown tensor 7");
  rejects({.evict = {}, .load = {3, 3}}, "names tensor 3 twice");
  rejects({.evict = {}, .load = {}}, "leaves required tensor 3 off the device");
}

// 0 -> 1 -> 2, and 0 -> 3 -> 2: fusing {0, 2} without 1 and 3 is not convex.
TEST(CheckFusionGroupsTest, AcceptsConvexDisjointGroupsAndRejectsTheRest) {
  std::vector<FusionNode> nodes(5, FusionNode{"core.add", OperatorClass::kElementwise, 8});
  std::vector<FusionEdge> edges = {{0, 1}, {1, 2}, {0, 3}, {3, 2}, {2, 4}};
  FusionGraphView graph{nodes, edges};

  std::vector<FusionGroup> good = {{0, 1, 3, 2}};
  EXPECT_TRUE(CheckFusionGroups(graph, good).ok());
  std::vector<FusionGroup> two = {{0, 1}, {2, 4}};
  EXPECT_TRUE(CheckFusionGroups(graph, two).ok());

  auto rejects = [&](std::vector<FusionGroup> groups, const std::string& part) {
    Status status = CheckFusionGroups(graph, groups);
    EXPECT_FALSE(status.ok());
    EXPECT_TRUE(MessageHas(status, part)) << status.message();
  };
  rejects({{0, 2}}, "is not convex");
  rejects({{0, 1, 2}}, "is not convex");  // 3 sits between 0 and 2
  rejects({{1}}, "fewer than two nodes");
  rejects({{0, 1}, {1, 2}}, "already in group 0");
  rejects({{0, 9}}, "node 9, which does not exist");

  std::vector<FusionEdge> bad_edges = {{0, 7}};
  Status status = CheckFusionGroups(FusionGraphView{nodes, bad_edges}, {});
  EXPECT_TRUE(MessageHas(status, "edge 0 -> 7 outside its 5 nodes")) << status.message();
}

}  // namespace
}  // namespace gpuos::plugins
