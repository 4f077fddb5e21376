// Example memory-manager plugin "belady": keeps resident bytes within a
// budget by evicting the tensor whose next use lies furthest ahead in the
// queue (Belady's rule; a tensor never used again goes first). Ties go to the
// larger tensor, then the smaller id, so plans are deterministic.
//
// Config keys: budget (byte size such as 512M or 2G; default 0 = the
// request's capacity_bytes; when both are 0 nothing is evicted).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpuos/plugins/export.h"
#include "gpuos/plugins/memory_manager.h"

namespace {

using gpuos::Expected;
using gpuos::plugins::MemoryPlan;
using gpuos::plugins::MemoryRequest;
using gpuos::plugins::TensorState;

class BeladyMemoryManager final : public gpuos::plugins::MemoryManager {
 public:
  explicit BeladyMemoryManager(std::uint64_t budget) : budget_(budget) {}

  Expected<MemoryPlan> Plan(const MemoryRequest& request) noexcept override {
    std::unordered_map<std::uint64_t, const TensorState*> tensors;
    std::uint64_t resident_bytes = 0;
    for (const TensorState& tensor : request.tensors) {
      tensors[tensor.tensor_id] = &tensor;
      if (tensor.resident) resident_bytes += tensor.bytes;
    }
    MemoryPlan plan;
    std::unordered_set<std::uint64_t> required;
    std::uint64_t incoming_bytes = 0;
    for (std::uint64_t id : request.required) {
      auto found = tensors.find(id);
      if (found == tensors.end()) {
        return gpuos::InvalidArgument("belady memory manager: required tensor " +
                                      std::to_string(id) + " is not tracked");
      }
      if (!required.insert(id).second || found->second->resident) continue;
      plan.load.push_back(id);
      incoming_bytes += found->second->bytes;
    }
    const std::uint64_t budget = budget_ != 0 ? budget_ : request.capacity_bytes;
    if (budget == 0 || resident_bytes + incoming_bytes <= budget) return plan;

    std::unordered_map<std::uint64_t, std::uint64_t> next_use;
    for (const gpuos::plugins::TensorUse& use : request.upcoming) {
      next_use.emplace(use.tensor_id, use.step);  // first (earliest) use wins
    }
    std::vector<const TensorState*> candidates;
    for (const TensorState& tensor : request.tensors) {
      if (tensor.resident && !tensor.in_use && !required.contains(tensor.tensor_id)) {
        candidates.push_back(&tensor);
      }
    }
    auto distance = [&](const TensorState* tensor) {
      auto found = next_use.find(tensor->tensor_id);
      return found == next_use.end() ? std::numeric_limits<std::uint64_t>::max() : found->second;
    };
    std::sort(candidates.begin(), candidates.end(),
              [&](const TensorState* a, const TensorState* b) {
                if (distance(a) != distance(b)) return distance(a) > distance(b);
                if (a->bytes != b->bytes) return a->bytes > b->bytes;
                return a->tensor_id < b->tensor_id;
              });
    for (const TensorState* victim : candidates) {
      if (resident_bytes + incoming_bytes <= budget) break;
      plan.evict.push_back(victim->tensor_id);
      resident_bytes -= victim->bytes;
    }
    if (resident_bytes + incoming_bytes > budget) {
      return gpuos::Unavailable(
          "belady memory manager: the next task needs " +
          std::to_string(resident_bytes + incoming_bytes - budget) +
          " bytes more than the budget of " + std::to_string(budget) +
          " bytes allows after evicting every evictable tensor; raise the budget");
    }
    return plan;
  }

 private:
  std::uint64_t budget_;
};

Expected<std::unique_ptr<BeladyMemoryManager>> MakeBeladyMemoryManager(
    const gpuos::plugins::PluginConfig& config) {
  GPUOS_RETURN_IF_ERROR(config.CheckKeys({"budget"}));
  GPUOS_ASSIGN_OR_RETURN(std::uint64_t budget, config.GetByteSize("budget", 0));
  return std::make_unique<BeladyMemoryManager>(budget);
}

}  // namespace

GPUOS_EXPORT_PLUGIN(gpuos::plugins::MemoryManager, "belady", "1.0.0",
                    "Evicts the tensor needed furthest ahead to stay within a byte budget",
                    MakeBeladyMemoryManager)
