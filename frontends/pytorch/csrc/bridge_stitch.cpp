#include "bridge_stitch.h"

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bridge_fusion.h"
#include "gpuos/embedded_sets.h"
#include "gpuos/environment.h"
#include "gpuos/registry/pack_loader.h"

namespace gpuos::torch_bridge {
namespace {

// The built-in packs' operators by name (parsed once).
const std::map<std::string, registry::OperatorSpec>& BuiltinOperators() {
  static const auto* const ops = [] {
    auto* map = new std::map<std::string, registry::OperatorSpec>();
    for (const auto& file : builtin_packs::EmbeddedFiles()) {
      auto pack = registry::ParsePack(file.contents, "builtin:" + std::string(file.name));
      if (!pack.ok()) continue;  // the runtime refuses such a build anyway
      for (auto& op : pack->operators) map->emplace(op.name, std::move(op));
    }
    return map;
  }();
  return *ops;
}

// Whether `served` is the built-in operator of its name (version and code).
bool IsBuiltin(const registry::OperatorSpec& served) {
  const auto& builtins = BuiltinOperators();
  auto it = builtins.find(served.name);
  return it != builtins.end() && it->second.version == served.version &&
         it->second.body.code == served.body.code &&
         it->second.device_code.code == served.device_code.code;
}

}  // namespace

Expected<bool> StitchingEnabled() {
  GPUOS_ASSIGN_OR_RETURN(const auto value, GetEnvInteger("GPUOS_STITCH", 0, 1, "0 or 1"));
  return value.value_or(1) != 0;
}

Expected<StitchAttempt> StitchSpec(runtime::Runtime& runtime, const ProgramSpec& spec) {
  StitchAttempt attempt;
  registry::StitchDesc desc;
  desc.num_buffers = spec.num_buffers;
  desc.worker_blocks = runtime.worker_blocks();
  // A diagnostic: the block count the tiles per stage are chosen for.
  GPUOS_ASSIGN_OR_RETURN(const auto blocks,
                         GetEnvInteger("GPUOS_STITCH_BLOCKS", 1, 4096, "a block count"));
  if (blocks) desc.worker_blocks = static_cast<unsigned int>(*blocks);
  // A diagnostic: GPUOS_STITCH_ATTENTION=0 keeps attention's three stages.
  GPUOS_ASSIGN_OR_RETURN(const auto fuse_attention,
                         GetEnvInteger("GPUOS_STITCH_ATTENTION", 0, 1, "0 or 1"));
  desc.fuse_attention = fuse_attention.value_or(1) != 0;
  // A diagnostic: GPUOS_STITCH_ATTENTION_MMA=0 keeps the attention stage's
  // products on the CUDA cores (and its tiles at their sizes).
  GPUOS_ASSIGN_OR_RETURN(const auto attention_mma,
                         GetEnvInteger("GPUOS_STITCH_ATTENTION_MMA", 0, 1, "0 or 1"));
  desc.attention_mma = attention_mma.value_or(1) != 0;
  // A diagnostic: GPUOS_STITCH_FLAGS=0 keeps every intermediate in the
  // workspace, its readers waiting for its stage's count.
  GPUOS_ASSIGN_OR_RETURN(const auto flags, GetEnvInteger("GPUOS_STITCH_FLAGS", 0, 1, "0 or 1"));
  desc.flag_intermediates = flags.value_or(1) != 0;
  desc.internal_buffers = spec.internal_buffers;
  std::deque<registry::OperatorSpec> fused;  // stable addresses for desc's pointers
  for (std::size_t i = 0; i < spec.tasks.size(); ++i) {
    const TaskSpec& task = spec.tasks[i];
    const std::string where = "task " + std::to_string(i) + " (" + task.op + ")";
    registry::StitchTask stitched;
    stitched.dtype = task.dtype;
    if (task.fused) {
      auto op = FusedOperator(runtime, task);
      if (!op.ok()) {
        attempt.reason = where + ": " + op.status().message();
        return attempt;
      }
      fused.push_back(std::move(*op));
      stitched.op = &fused.back();
    } else {
      auto ref = runtime.Resolve(task.op, task.dtype, task.out_dtype);
      if (!ref.ok() || ref->spec == nullptr) {
        attempt.reason = where + ": not served (" + ref.status().message() + ")";
        return attempt;
      }
      if (registry::HasOwnStageCode(task.op) && !IsBuiltin(*ref->spec)) {
        attempt.reason = where + ": the runtime serves version " + ref->spec->version.ToString() +
                         ", not the built-in one whose stage code stitching has";
        return attempt;
      }
      stitched.op = ref->spec;
      stitched.attributes = task.attributes;
    }
    stitched.tensors = task.tensors;
    desc.tasks.push_back(std::move(stitched));
  }
  auto program = registry::StitchProgram(desc);
  if (!program.ok()) {
    attempt.reason = program.status().message();
    return attempt;
  }
  if (!runtime.Resolve(program->op.name, DType::kU8).ok()) {
    runtime::LiveOperator live;
    live.current = program->op;
    auto served = runtime.Update({live});
    if (!served.ok()) {  // the active image keeps serving: run unstitched
      attempt.reason = "serving the stitched operator failed: " + served.status().message();
      return attempt;
    }
  }
  attempt.program = std::move(*program);
  return attempt;
}

}  // namespace gpuos::torch_bridge
