// Contract checks for the answers of plugins. The runtime runs them on every
// answer before acting on it, so a faulty plugin yields an error naming the
// broken rule instead of a lost or duplicated task. Plugin authors can run
// them in their own tests.
//
// Defined in gpuos::plugin_host (not header-only). Pure functions; thread-safe.
#pragma once

#include <span>

#include "gpuos/plugins/fusion_strategy.h"
#include "gpuos/plugins/memory_manager.h"
#include "gpuos/plugins/scheduler.h"
#include "gpuos/status.h"

namespace gpuos::plugins {

// OK when `placements` holds each task of `ready` exactly once and nothing
// else, each on a device listed in `devices`.
Status CheckSchedule(std::span<const ReadyTask> ready, std::span<const DeviceLoad> devices,
                     std::span<const TaskPlacement> placements);

// OK when `plan` only evicts resident tensors that are neither in use nor
// required, only loads known non-resident tensors, names no tensor twice, and
// leaves every required tensor resident. Does not judge the budget, which is
// the manager's own; see ResidentBytesAfter.
Status CheckMemoryPlan(const MemoryRequest& request, const MemoryPlan& plan);

// Bytes resident after applying `plan`.
// REQUIRES: CheckMemoryPlan(request, plan).ok().
std::uint64_t ResidentBytesAfter(const MemoryRequest& request, const MemoryPlan& plan);

// OK when the groups are disjoint, name existing nodes, hold at least two
// nodes each, and are convex: no path leaves a group and re-enters it.
// Also rejects edges that name a node outside the graph.
Status CheckFusionGroups(const FusionGraphView& graph, std::span<const FusionGroup> groups);

}  // namespace gpuos::plugins
