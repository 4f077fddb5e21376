// Fused elementwise tasks of PyTorch programs (docs/pytorch.md, "Elementwise
// fusion"): the operator each fused task runs is generated from the
// constituent operators the runtime serves (registry::FuseElementwise) and
// served by the runtime before the program is built.
#pragma once

#include "bridge_program.h"
#include "gpuos/runtime/runtime.h"
#include "gpuos/status.h"

namespace gpuos::torch_bridge {

// For every task of `spec` with a fused description: generates its operator
// from the versions of the constituents `runtime` serves now, sets the task's
// `op` to the generated name, and serves the operators the runtime lacks with
// one Runtime::Update (an epoch switch: the kernel image is rebuilt with them
// in the background and swapped in while the worker keeps serving; operators
// already built come from the build cache). Errors: a constituent the runtime
// does not serve for the task's dtype (NotFound), a description the fusion
// refuses (InvalidArgument, naming task and step), the update's error (the
// active image keeps serving). Thread safety: as Runtime::Update.
Status ResolveFusedTasks(runtime::Runtime& runtime, ProgramSpec* spec);

// The operator of fused task `task` (task.fused set), generated from the
// constituents `runtime` serves now; not served. Errors as ResolveFusedTasks.
Expected<registry::OperatorSpec> FusedOperator(const runtime::Runtime& runtime,
                                               const TaskSpec& task);

}  // namespace gpuos::torch_bridge
