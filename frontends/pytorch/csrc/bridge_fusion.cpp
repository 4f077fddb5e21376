#include "bridge_fusion.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpuos/registry/fused_elementwise.h"

namespace gpuos::torch_bridge {
namespace {

registry::FusedOperand ToOperand(const FusedOperandSpec& spec) {
  registry::FusedOperand operand;
  operand.index = spec.index;
  operand.literal = spec.literal;
  switch (spec.kind) {
    case FusedOperandSpec::Kind::kInput:
      operand.kind = registry::FusedOperand::Kind::kInput;
      break;
    case FusedOperandSpec::Kind::kStep:
      operand.kind = registry::FusedOperand::Kind::kStep;
      break;
    case FusedOperandSpec::Kind::kLiteral:
      operand.kind = registry::FusedOperand::Kind::kLiteral;
      break;
  }
  return operand;
}

}  // namespace

Expected<registry::OperatorSpec> FusedOperator(const runtime::Runtime& runtime,
                                               const TaskSpec& task) {
  registry::FusedElementwiseDesc desc;
  desc.dtype = task.dtype;
  desc.num_inputs = task.fused->num_inputs;
  for (std::size_t j = 0; j < task.fused->steps.size(); ++j) {
    const FusedStepSpec& step = task.fused->steps[j];
    auto resolved = runtime.Resolve(step.op, task.dtype);
    if (!resolved.ok()) {
      return resolved.status().WithContext("fused step " + std::to_string(j));
    }
    registry::FusedStep fused_step;
    fused_step.op = resolved->spec;
    fused_step.attributes = step.attributes;
    for (const FusedOperandSpec& operand : step.operands) {
      fused_step.operands.push_back(ToOperand(operand));
    }
    desc.steps.push_back(std::move(fused_step));
  }
  return registry::FuseElementwise(desc);
}

Status ResolveFusedTasks(runtime::Runtime& runtime, ProgramSpec* spec) {
  std::vector<runtime::LiveOperator> missing;
  std::set<std::string> named;
  for (std::size_t i = 0; i < spec->tasks.size(); ++i) {
    TaskSpec& task = spec->tasks[i];
    if (!task.fused) continue;
    auto op = FusedOperator(runtime, task);
    if (!op.ok()) return op.status().WithContext("program task " + std::to_string(i));
    task.op = op->name;
    if (!named.insert(op->name).second || runtime.Resolve(op->name, task.dtype).ok()) continue;
    runtime::LiveOperator live;
    live.current = std::move(*op);
    missing.push_back(std::move(live));
  }
  if (missing.empty()) return Status::Ok();
  return runtime.Update(missing).status().WithContext("serving " + std::to_string(missing.size()) +
                                                      " fused operator(s)");
}

}  // namespace gpuos::torch_bridge
