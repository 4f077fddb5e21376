// Fusion-strategy plugins: choose groups of task-graph nodes to compile and
// run as one fused operator.
//
// The runtime hands a read-only view of the graph (nodes in topological order
// and producer->consumer edges) and receives groups of node indices. The
// built-in "no_fusion" strategy returns no groups. How a group is turned into
// one kernel is the runtime's business, not the strategy's.
//
// Spans and string_views point into memory the caller owns, valid for the
// duration of the call.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gpuos/plugins/plugin_kind.h"
#include "gpuos/status.h"

namespace gpuos::plugins {

// The operator kinds of operator packs (docs/operator-packs.md), plus kOther
// for nodes that are not pack operators (copies, host callbacks).
enum class OperatorClass : std::uint32_t {
  kElementwise = 0,
  kReduction = 1,
  kCustom = 2,
  kOther = 3
};

struct FusionNode {
  std::string_view operator_name;  // e.g. "core.mul"
  OperatorClass operator_class = OperatorClass::kOther;
  std::uint64_t output_elements = 0;  // elements of its (first) output; 0 = unknown
};

// Node indices refer to FusionGraphView::nodes.
struct FusionEdge {
  std::uint32_t producer = 0;
  std::uint32_t consumer = 0;
};

struct FusionGraphView {
  std::span<const FusionNode> nodes;  // in a topological order
  std::span<const FusionEdge> edges;
};

// Indices of nodes fused into one operator, in execution order.
using FusionGroup = std::vector<std::uint32_t>;

class FusionStrategy {
 public:
  static constexpr PluginKind kKind = PluginKind::kFusionStrategy;

  virtual ~FusionStrategy() = default;

  // Returns disjoint groups of at least two nodes each; nodes in no group run
  // alone. Each group must be convex (no path leaves the group and re-enters
  // it), or fusing it would create a cycle. The host checks this with
  // CheckFusionGroups (gpuos/plugins/checks.h).
  // Called from one thread at a time per object.
  virtual Expected<std::vector<FusionGroup>> Plan(const FusionGraphView& graph) noexcept = 0;
};

}  // namespace gpuos::plugins
