// Frontend plugins: turn a model from another system (an ONNX file, a
// captured PyTorch program) into gpuos tensors and operations.
//
// PRELIMINARY in plugin ABI 1. The frontend reads its source and describes the
// graph through a GraphBuilder the host implements, so it never sees the
// runtime's task-graph types; the builder will gain calls (views, constants,
// device placement) with the runtime's task graph, in a later ABI version
// (docs/plugins.md, "ABI versions"). gpuos has no built-in frontend plugin:
// its own C++ and Python APIs build graphs directly.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "gpuos/dtype.h"
#include "gpuos/plugins/plugin_kind.h"
#include "gpuos/status.h"

namespace gpuos::plugins {

// A scalar attribute in the canonical text of operator packs ("1", "0.5",
// "true").
struct OperationAttribute {
  std::string_view name;
  std::string_view value;
};

// Collects the graph. Implemented by the host. Ids are dense, from 0, per call
// kind. Arguments are copied; the frontend keeps ownership of its memory.
class GraphBuilder {
 public:
  virtual ~GraphBuilder() = default;

  // Declares a graph input (or any tensor the frontend creates). Returns its id.
  virtual Expected<std::uint32_t> AddTensor(std::string_view name, DType dtype,
                                            std::span<const std::int64_t> shape) noexcept = 0;

  // Adds one operation of a registered operator. Outputs are tensors already
  // declared with AddTensor. Returns the operation's id; fails (with a message
  // naming the operator) for an unknown operator or a bad signature.
  virtual Expected<std::uint32_t> AddOperation(
      std::string_view operator_name, std::span<const std::uint32_t> inputs,
      std::span<const std::uint32_t> outputs,
      std::span<const OperationAttribute> attributes) noexcept = 0;

  // Marks a tensor as a graph output.
  virtual Status MarkOutput(std::uint32_t tensor) noexcept = 0;
};

class Frontend {
 public:
  static constexpr PluginKind kKind = PluginKind::kFrontend;

  virtual ~Frontend() = default;

  // The source format it reads, e.g. "onnx". Static storage.
  virtual std::string_view Format() const noexcept = 0;

  // Reads `source` (a file path, unless Format() documents otherwise) and
  // describes it through `builder`. Errors name the source and the place in it.
  // Called from one thread at a time per object.
  virtual Status Import(std::string_view source, GraphBuilder& builder) noexcept = 0;
};

}  // namespace gpuos::plugins
