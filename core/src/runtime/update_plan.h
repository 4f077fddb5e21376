// Deciding how a runtime takes on a new operator set (docs/live-update.md):
// by flipping aliases, when the active image already holds every wanted
// version, or by an epoch switch to a staged image otherwise. Pure logic.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpuos/registry/operator_spec.h"
#include "operator_table.h"

namespace gpuos::runtime {

enum class UpdateAction { kNone, kAliasFlip, kEpochSwitch };
const char* UpdateActionName(UpdateAction action);  // "none", "alias_flip", "epoch_switch"

struct UpdatePlan {
  UpdateAction action = UpdateAction::kNone;
  // Operators whose active version changes, with the version to activate.
  std::vector<std::pair<std::string, registry::SemVer>> activate;
  // Why an epoch switch is needed ("add 1.3.0 is not in the active image").
  std::vector<std::string> reasons;
};

// Operators of the active image that `wanted` does not name are kept as
// they are. An epoch switch is planned when a wanted current version is not
// in the image; alias flips when all are and some active version differs.
UpdatePlan PlanUpdate(const OperatorTable& table, const std::vector<LiveOperator>& wanted);

// The operator versions a staged image is built from: every wanted current
// and previous version, plus the versions of `kept` (the active image's
// specs) for operators `wanted` does not name. Duplicates are dropped.
std::vector<registry::OperatorSpec> StagedSpecs(const std::vector<LiveOperator>& wanted,
                                                const std::vector<registry::OperatorSpec>& kept);

}  // namespace gpuos::runtime
