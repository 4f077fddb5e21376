#include "update_plan.h"

#include <algorithm>
#include <set>

namespace gpuos::runtime {

const char* UpdateActionName(UpdateAction action) {
  switch (action) {
    case UpdateAction::kNone:
      return "none";
    case UpdateAction::kAliasFlip:
      return "alias_flip";
    case UpdateAction::kEpochSwitch:
      return "epoch_switch";
  }
  return "unknown";
}

UpdatePlan PlanUpdate(const OperatorTable& table, const std::vector<LiveOperator>& wanted) {
  UpdatePlan plan;
  const auto active = table.ActiveVersions();
  for (const LiveOperator& op : wanted) {
    const std::string& name = op.current.name;
    const registry::SemVer& version = op.current.version;
    if (!table.HasVersion(name, version)) {
      plan.reasons.push_back(name + " " + version.ToString() + " is not in the active image");
      plan.activate.emplace_back(name, version);
      continue;
    }
    auto it = active.find(name);
    if (it == active.end() || it->second != version) plan.activate.emplace_back(name, version);
  }
  if (!plan.reasons.empty()) {
    plan.action = UpdateAction::kEpochSwitch;
  } else if (!plan.activate.empty()) {
    plan.action = UpdateAction::kAliasFlip;
  }
  return plan;
}

std::vector<registry::OperatorSpec> StagedSpecs(const std::vector<LiveOperator>& wanted,
                                                const std::vector<registry::OperatorSpec>& kept) {
  std::vector<registry::OperatorSpec> specs;
  std::set<std::pair<std::string, registry::SemVer>> seen;
  std::set<std::string> named;
  auto add = [&](const registry::OperatorSpec& spec) {
    if (seen.insert({spec.name, spec.version}).second) specs.push_back(spec);
  };
  for (const LiveOperator& op : wanted) {
    named.insert(op.current.name);
    add(op.current);
    if (op.previous) add(*op.previous);
  }
  for (const registry::OperatorSpec& spec : kept) {
    if (named.count(spec.name) == 0) add(spec);
  }
  return specs;
}

}  // namespace gpuos::runtime
