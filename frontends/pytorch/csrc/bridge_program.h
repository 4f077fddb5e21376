// Program descriptions of the PyTorch frontend (docs/pytorch.md, "Program
// format"): parsing the JSON made by gpuos/_lowering.py, and the placeholder
// addresses that let a task graph be built once and rebound per run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuos/device/abi.h"
#include "gpuos/dtype.h"
#include "gpuos/registry/stitched_program.h"
#include "gpuos/runtime/task_graph.h"
#include "gpuos/status.h"

namespace gpuos::torch_bridge {

// A strided view of one buffer: element `offset` of the buffer is the view's
// element (0, ..., 0). Sizes and strides in elements. The registry's
// stitcher takes the same views, so it is one type.
using ViewSpec = registry::StitchView;

// A fused elementwise task (gpuos/_fusion.py): steps of standard operators,
// each operand a tensor the task reads, an earlier step or a literal. The
// bridge turns it into an operator with registry::FuseElementwise.
struct FusedOperandSpec {
  enum class Kind { kInput, kStep, kLiteral };
  Kind kind = Kind::kInput;
  int index = 0;        // kInput, kStep
  std::string literal;  // kLiteral: a number as text
};
struct FusedStepSpec {
  std::string op;
  runtime::Attributes attributes;
  std::vector<FusedOperandSpec> operands;
};
struct FusedTaskSpec {
  int num_inputs = 0;
  std::vector<FusedStepSpec> steps;
};

struct TaskSpec {
  std::string op;  // "fused" for a fused task until the bridge names its operator
  DType dtype = DType::kF32;
  std::optional<DType> out_dtype;
  std::vector<ViewSpec> tensors;  // inputs, then outputs
  runtime::Attributes attributes;
  std::vector<std::uint32_t> deps;  // earlier tasks
  std::optional<FusedTaskSpec> fused;
};

struct ProgramSpec {
  std::uint32_t num_buffers = 0;
  std::vector<TaskSpec> tasks;
  // Buffers only the tasks read (the workspace): "internal_buffers",
  // optional, each below num_buffers.
  std::vector<std::uint32_t> internal_buffers;
};

// Parses and checks a program: buffer indices below num_buffers, ranks up to
// device::kMaxRank, sizes >= 0, dependencies on earlier tasks only, known
// dtype names; a fused task's steps: operand kinds, inputs below num_inputs
// (which must be the task's tensors but one), steps referring to earlier
// steps. Errors: InvalidArgument naming the task, tensor and field.
Expected<ProgramSpec> ParseProgramSpec(std::string_view json);

// Addresses written into a task graph before the buffers are known. Each
// encodes (buffer, byte offset); the graph interns equal descriptors, so
// distinct views stay distinct and identical ones share one entry.
// REQUIRES: buffer < kMaxPlaceholderBuffers, |byte_offset| < 2^39.
inline constexpr std::uint32_t kMaxPlaceholderBuffers = 1u << 23;
unsigned long long PlaceholderAddress(std::uint32_t buffer, long long byte_offset);
struct Binding {
  std::uint32_t tensor_index = 0;  // in TaskGraph::tensors()
  std::uint32_t word = 0;          // TaskGraph::SetAddressWord's (0: the descriptor's address)
  std::uint32_t buffer = 0;
  long long byte_offset = 0;
};
// Decodes what PlaceholderAddress wrote. InvalidArgument for other values.
Expected<Binding> DecodePlaceholder(std::uint32_t tensor_index, unsigned long long address);

// The descriptor of `view` at its placeholder address. InvalidArgument when
// the view does not fit the descriptor (rank, element count overflow).
Expected<device::TensorDesc> PlaceholderDesc(const ViewSpec& view);

}  // namespace gpuos::torch_bridge
