// Stitched programs of the PyTorch frontend (docs/pytorch.md, "Stitched
// programs"): a program whose every task has stage code becomes one
// operator (registry::StitchProgram) served by the runtime, and each call
// is one task of it.
#pragma once

#include <optional>
#include <string>

#include "bridge_program.h"
#include "gpuos/registry/stitched_program.h"
#include "gpuos/runtime/runtime.h"
#include "gpuos/status.h"

namespace gpuos::torch_bridge {

// Whether programs are stitched: GPUOS_STITCH unset (or empty) or "1"; "0"
// turns it off. InvalidArgument naming the variable for anything else (a
// misspelt "off" must not leave it on silently).
Expected<bool> StitchingEnabled();

// Programs with fewer tasks are not stitched: a stitched operator costs an
// image rebuild (an epoch switch) at the first call, and one task gains
// nothing from it.
inline constexpr std::size_t kMinStitchedTasks = 2;

struct StitchAttempt {
  std::optional<registry::StitchedProgram> program;  // set when stitched
  std::string reason;                                // why not, otherwise
};

// Stitches `spec` when it can: every task's operator is served by `runtime`,
// the matrix-product and row operators are the built-in packs' versions
// (their stage code computes what those compute), and StitchProgram takes
// the program. The stitched operator is served (one Runtime::Update, an
// epoch switch) unless `runtime` serves it already. A program that cannot
// be stitched, or whose operator fails to build or to be served (the
// active image keeps serving), is not an error: `reason` says why. Errors:
// a bad GPUOS_STITCH_BLOCKS.
Expected<StitchAttempt> StitchSpec(runtime::Runtime& runtime, const ProgramSpec& spec);

}  // namespace gpuos::torch_bridge
