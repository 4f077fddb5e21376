#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpuos/plugins/checks.h"

namespace gpuos::plugins {

Status CheckSchedule(std::span<const ReadyTask> ready, std::span<const DeviceLoad> devices,
                     std::span<const TaskPlacement> placements) {
  std::unordered_set<std::uint64_t> pending;
  for (const ReadyTask& task : ready) pending.insert(task.task_id);
  std::unordered_set<std::uint32_t> device_ids;
  for (const DeviceLoad& device : devices) device_ids.insert(device.device);
  std::unordered_set<std::uint64_t> placed;
  for (const TaskPlacement& placement : placements) {
    const std::string task = "task " + std::to_string(placement.task_id);
    if (!pending.contains(placement.task_id)) {
      return Internal("the schedule names " + task + ", which is not in the ready batch");
    }
    if (!placed.insert(placement.task_id).second) {
      return Internal("the schedule places " + task + " twice");
    }
    if (!device_ids.contains(placement.device)) {
      return Internal("the schedule puts " + task + " on device " +
                      std::to_string(placement.device) + ", which is not available");
    }
  }
  for (const ReadyTask& task : ready) {
    if (!placed.contains(task.task_id)) {
      return Internal("the schedule leaves out task " + std::to_string(task.task_id));
    }
  }
  return Status::Ok();
}

Status CheckMemoryPlan(const MemoryRequest& request, const MemoryPlan& plan) {
  std::unordered_map<std::uint64_t, const TensorState*> tensors;
  for (const TensorState& tensor : request.tensors) tensors[tensor.tensor_id] = &tensor;
  std::unordered_set<std::uint64_t> required(request.required.begin(), request.required.end());
  std::unordered_set<std::uint64_t> named;

  for (std::uint64_t id : plan.evict) {
    const std::string tensor = "tensor " + std::to_string(id);
    auto found = tensors.find(id);
    if (found == tensors.end()) return Internal("the memory plan evicts unknown " + tensor);
    if (!named.insert(id).second) return Internal("the memory plan names " + tensor + " twice");
    if (!found->second->resident) {
      return Internal("the memory plan evicts " + tensor + ", which is not resident");
    }
    if (found->second->in_use) {
      return Internal("the memory plan evicts " + tensor + ", which a running task uses");
    }
    if (required.contains(id)) {
      return Internal("the memory plan evicts " + tensor + ", which the next task requires");
    }
  }
  for (std::uint64_t id : plan.load) {
    const std::string tensor = "tensor " + std::to_string(id);
    auto found = tensors.find(id);
    if (found == tensors.end()) return Internal("the memory plan loads unknown " + tensor);
    if (!named.insert(id).second) return Internal("the memory plan names " + tensor + " twice");
    if (found->second->resident) {
      return Internal("the memory plan loads " + tensor + ", which is already resident");
    }
  }
  for (std::uint64_t id : request.required) {
    auto found = tensors.find(id);
    if (found == tensors.end()) {
      return Internal("the memory request requires unknown tensor " + std::to_string(id));
    }
    bool loaded = std::find(plan.load.begin(), plan.load.end(), id) != plan.load.end();
    if (!found->second->resident && !loaded) {
      return Internal("the memory plan leaves required tensor " + std::to_string(id) +
                      " off the device");
    }
  }
  return Status::Ok();
}

std::uint64_t ResidentBytesAfter(const MemoryRequest& request, const MemoryPlan& plan) {
  std::unordered_set<std::uint64_t> evicted(plan.evict.begin(), plan.evict.end());
  std::unordered_set<std::uint64_t> loaded(plan.load.begin(), plan.load.end());
  std::uint64_t bytes = 0;
  for (const TensorState& tensor : request.tensors) {
    bool resident =
        tensor.resident ? !evicted.contains(tensor.tensor_id) : loaded.contains(tensor.tensor_id);
    if (resident) bytes += tensor.bytes;
  }
  return bytes;
}

Status CheckFusionGroups(const FusionGraphView& graph, std::span<const FusionGroup> groups) {
  const std::size_t node_count = graph.nodes.size();
  std::vector<std::vector<std::uint32_t>> consumers(node_count);
  for (const FusionEdge& edge : graph.edges) {
    if (edge.producer >= node_count || edge.consumer >= node_count) {
      return InvalidArgument("the fusion graph has an edge " + std::to_string(edge.producer) +
                             " -> " + std::to_string(edge.consumer) + " outside its " +
                             std::to_string(node_count) + " nodes");
    }
    consumers[edge.producer].push_back(edge.consumer);
  }
  constexpr int kNoGroup = -1;
  std::vector<int> group_of(node_count, kNoGroup);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string group = "fusion group " + std::to_string(g);
    if (groups[g].size() < 2) return Internal(group + " has fewer than two nodes");
    for (std::uint32_t node : groups[g]) {
      if (node >= node_count) {
        return Internal(group + " names node " + std::to_string(node) + ", which does not exist");
      }
      if (group_of[node] != kNoGroup) {
        return Internal(group + " takes node " + std::to_string(node) + ", already in group " +
                        std::to_string(group_of[node]));
      }
      group_of[node] = static_cast<int>(g);
    }
  }
  // Convexity: walk forward from every edge that leaves a group; reaching the
  // group again means an outside node sits between two of its members.
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<bool> visited(node_count, false);
    std::vector<std::uint32_t> frontier;
    for (std::uint32_t node : groups[g]) {
      for (std::uint32_t next : consumers[node]) {
        if (group_of[next] != static_cast<int>(g) && !visited[next]) {
          visited[next] = true;
          frontier.push_back(next);
        }
      }
    }
    while (!frontier.empty()) {
      std::uint32_t node = frontier.back();
      frontier.pop_back();
      for (std::uint32_t next : consumers[node]) {
        if (group_of[next] == static_cast<int>(g)) {
          return Internal("fusion group " + std::to_string(g) + " is not convex: node " +
                          std::to_string(node) +
                          " outside it is reachable from a member and "
                          "feeds member " +
                          std::to_string(next));
        }
        if (!visited[next]) {
          visited[next] = true;
          frontier.push_back(next);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace gpuos::plugins
