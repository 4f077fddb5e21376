#include "bridge_program.h"

#include <limits>
#include <nlohmann/json.hpp>

namespace gpuos::torch_bridge {
namespace {

using nlohmann::json;

constexpr int kBufferShift = 40;
constexpr long long kOffsetBias = 1ll << 39;

// Reads `object[key]` as `T`, naming `where` and the key when it is missing
// or of another type.
template <typename T>
Expected<T> Field(const json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return InvalidArgument(where + ": missing field '" + key + "'");
  try {
    return it->get<T>();
  } catch (const json::exception& e) {
    return InvalidArgument(where + ": field '" + key + "' has the wrong type (" + e.what() + ")");
  }
}

Expected<DType> DTypeField(const json& object, const char* key, const std::string& where) {
  GPUOS_ASSIGN_OR_RETURN(const std::string name, Field<std::string>(object, key, where));
  auto dtype = ParseDType(name);
  if (!dtype) {
    return InvalidArgument(where + ": unknown dtype '" + name +
                           "' (use f32, f16, bf16, f64, i8, u8, i32, i64 or bool)");
  }
  return *dtype;
}

Expected<ViewSpec> ParseView(const json& object, std::uint32_t num_buffers,
                             const std::string& where) {
  if (!object.is_object()) return InvalidArgument(where + ": expected an object");
  ViewSpec view;
  GPUOS_ASSIGN_OR_RETURN(const long long buffer, Field<long long>(object, "buffer", where));
  if (buffer < 0 || buffer >= num_buffers) {
    return InvalidArgument(where + ": buffer " + std::to_string(buffer) + " is not below " +
                           "num_buffers (" + std::to_string(num_buffers) + ")");
  }
  view.buffer = static_cast<std::uint32_t>(buffer);
  GPUOS_ASSIGN_OR_RETURN(view.offset, Field<long long>(object, "offset", where));
  GPUOS_ASSIGN_OR_RETURN(view.dtype, DTypeField(object, "dtype", where));
  GPUOS_ASSIGN_OR_RETURN(view.sizes, Field<std::vector<long long>>(object, "sizes", where));
  GPUOS_ASSIGN_OR_RETURN(view.strides, Field<std::vector<long long>>(object, "strides", where));
  if (view.sizes.size() != view.strides.size()) {
    return InvalidArgument(where + ": " + std::to_string(view.sizes.size()) + " sizes but " +
                           std::to_string(view.strides.size()) + " strides");
  }
  if (view.sizes.size() > static_cast<std::size_t>(device::kMaxRank)) {
    return InvalidArgument(where + ": rank " + std::to_string(view.sizes.size()) +
                           " is above the runtime's limit of " + std::to_string(device::kMaxRank));
  }
  for (long long size : view.sizes) {
    if (size < 0) return InvalidArgument(where + ": negative size " + std::to_string(size));
  }
  return view;
}

Expected<runtime::Attributes> ParseAttributes(const json& object, const std::string& where) {
  runtime::Attributes attributes;
  auto it = object.find("attributes");
  if (it == object.end()) return attributes;
  if (!it->is_object()) return InvalidArgument(where + ": 'attributes' must be an object");
  for (const auto& [name, value] : it->items()) {
    if (!value.is_string()) {
      return InvalidArgument(where + ": attribute '" + name +
                             "' must be given as text (\"1.5\", \"true\")");
    }
    attributes.emplace_back(name, value.get<std::string>());
  }
  return attributes;
}

Expected<FusedOperandSpec> ParseOperand(const json& operand, int step, int num_inputs,
                                        const std::string& where) {
  if (!operand.is_array() || operand.size() != 2 || !operand[0].is_string()) {
    return InvalidArgument(where +
                           ": an operand is [\"input\", k], [\"step\", j] or "
                           "[\"literal\", \"text\"]");
  }
  const std::string kind = operand[0].get<std::string>();
  FusedOperandSpec spec;
  if (kind == "literal") {
    if (!operand[1].is_string()) return InvalidArgument(where + ": a literal is given as text");
    spec.kind = FusedOperandSpec::Kind::kLiteral;
    spec.literal = operand[1].get<std::string>();
    return spec;
  }
  if (!operand[1].is_number_integer()) {
    return InvalidArgument(where + ": the " + kind + " operand's index must be an integer");
  }
  spec.index = operand[1].get<int>();
  if (kind == "input") {
    spec.kind = FusedOperandSpec::Kind::kInput;
    if (spec.index < 0 || spec.index >= num_inputs) {
      return InvalidArgument(where + ": input " + std::to_string(spec.index) +
                             " is not below num_inputs (" + std::to_string(num_inputs) + ")");
    }
  } else if (kind == "step") {
    spec.kind = FusedOperandSpec::Kind::kStep;
    if (spec.index < 0 || spec.index >= step) {
      return InvalidArgument(where + ": step " + std::to_string(spec.index) +
                             " is not an earlier step");
    }
  } else {
    return InvalidArgument(where + ": unknown operand kind '" + kind +
                           "' (use input, step or literal)");
  }
  return spec;
}

Expected<FusedTaskSpec> ParseFused(const json& object, std::size_t num_tensors,
                                   const std::string& where) {
  if (!object.is_object()) return InvalidArgument(where + ": 'fused' must be an object");
  FusedTaskSpec fused;
  GPUOS_ASSIGN_OR_RETURN(fused.num_inputs, Field<int>(object, "num_inputs", where + ", fused"));
  if (fused.num_inputs < 0 || static_cast<std::size_t>(fused.num_inputs) + 1 != num_tensors) {
    return InvalidArgument(
        where + ": a fused task has num_inputs (" + std::to_string(fused.num_inputs) +
        ") input tensors and one output; it has " + std::to_string(num_tensors) + " tensors");
  }
  auto steps = object.find("steps");
  if (steps == object.end() || !steps->is_array() || steps->empty()) {
    return InvalidArgument(where + ": 'fused.steps' must be a non-empty list");
  }
  for (std::size_t j = 0; j < steps->size(); ++j) {
    const std::string at = where + ", fused step " + std::to_string(j);
    const json& step_json = (*steps)[j];
    if (!step_json.is_object()) return InvalidArgument(at + ": expected an object");
    FusedStepSpec step;
    GPUOS_ASSIGN_OR_RETURN(step.op, Field<std::string>(step_json, "op", at));
    GPUOS_ASSIGN_OR_RETURN(step.attributes, ParseAttributes(step_json, at));
    auto operands = step_json.find("operands");
    if (operands == step_json.end() || !operands->is_array()) {
      return InvalidArgument(at + ": 'operands' must be a list");
    }
    for (const json& operand : *operands) {
      GPUOS_ASSIGN_OR_RETURN(auto parsed,
                             ParseOperand(operand, static_cast<int>(j), fused.num_inputs, at));
      step.operands.push_back(std::move(parsed));
    }
    fused.steps.push_back(std::move(step));
  }
  return fused;
}

Expected<TaskSpec> ParseTask(const json& object, std::size_t index, std::uint32_t num_buffers) {
  std::string where = "task " + std::to_string(index);
  if (!object.is_object()) return InvalidArgument(where + ": expected an object");
  TaskSpec task;
  GPUOS_ASSIGN_OR_RETURN(task.op, Field<std::string>(object, "op", where));
  where += " (" + task.op + ")";
  GPUOS_ASSIGN_OR_RETURN(task.dtype, DTypeField(object, "dtype", where));
  if (auto it = object.find("out_dtype"); it != object.end() && !it->is_null()) {
    GPUOS_ASSIGN_OR_RETURN(task.out_dtype, DTypeField(object, "out_dtype", where));
  }
  auto tensors = object.find("tensors");
  if (tensors == object.end() || !tensors->is_array()) {
    return InvalidArgument(where + ": 'tensors' must be a list of views");
  }
  if (tensors->size() > static_cast<std::size_t>(device::kMaxTaskTensors)) {
    return InvalidArgument(where + ": " + std::to_string(tensors->size()) +
                           " tensors; a task takes at most " +
                           std::to_string(device::kMaxTaskTensors));
  }
  for (std::size_t k = 0; k < tensors->size(); ++k) {
    GPUOS_ASSIGN_OR_RETURN(
        auto view, ParseView((*tensors)[k], num_buffers, where + ", tensor " + std::to_string(k)));
    task.tensors.push_back(std::move(view));
  }
  GPUOS_ASSIGN_OR_RETURN(task.attributes, ParseAttributes(object, where));
  if (auto it = object.find("fused"); it != object.end() && !it->is_null()) {
    GPUOS_ASSIGN_OR_RETURN(task.fused, ParseFused(*it, task.tensors.size(), where));
  }
  if (object.contains("deps")) {
    GPUOS_ASSIGN_OR_RETURN(task.deps, Field<std::vector<std::uint32_t>>(object, "deps", where));
  }
  for (std::uint32_t dep : task.deps) {
    if (dep >= index) {
      return InvalidArgument(where + ": depends on task " + std::to_string(dep) +
                             ", which is not an earlier task");
    }
  }
  return task;
}

}  // namespace

Expected<ProgramSpec> ParseProgramSpec(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("program description: not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) return InvalidArgument("program description: expected a JSON object");
  ProgramSpec program;
  GPUOS_ASSIGN_OR_RETURN(const long long version, Field<long long>(doc, "version", "program"));
  if (version != 1) {
    return InvalidArgument("program: format version " + std::to_string(version) +
                           " is not supported (this library reads version 1; reinstall the "
                           "gpuos package so Python and C++ parts match)");
  }
  GPUOS_ASSIGN_OR_RETURN(const long long buffers, Field<long long>(doc, "num_buffers", "program"));
  if (buffers < 0 || buffers >= kMaxPlaceholderBuffers) {
    return InvalidArgument("program: num_buffers " + std::to_string(buffers) + " out of range");
  }
  program.num_buffers = static_cast<std::uint32_t>(buffers);
  auto tasks = doc.find("tasks");
  if (tasks == doc.end() || !tasks->is_array()) {
    return InvalidArgument("program: 'tasks' must be a list");
  }
  for (std::size_t i = 0; i < tasks->size(); ++i) {
    GPUOS_ASSIGN_OR_RETURN(auto task, ParseTask((*tasks)[i], i, program.num_buffers));
    for (const ViewSpec& view : task.tensors) {
      GPUOS_RETURN_IF_ERROR(
          PlaceholderDesc(view).status().WithContext("task " + std::to_string(i)));
    }
    program.tasks.push_back(std::move(task));
  }
  auto internal = doc.find("internal_buffers");
  if (internal != doc.end()) {
    if (!internal->is_array()) return InvalidArgument("program: 'internal_buffers' must be a list");
    for (const json& b : *internal) {
      if (!b.is_number_integer() || b.get<long long>() < 0 ||
          b.get<long long>() >= static_cast<long long>(program.num_buffers)) {
        return InvalidArgument("program: 'internal_buffers' holds " + b.dump() +
                               ", not a buffer below num_buffers (" +
                               std::to_string(program.num_buffers) + ")");
      }
      program.internal_buffers.push_back(b.get<std::uint32_t>());
    }
  }
  return program;
}

unsigned long long PlaceholderAddress(std::uint32_t buffer, long long byte_offset) {
  return (static_cast<unsigned long long>(buffer + 1) << kBufferShift) +
         static_cast<unsigned long long>(byte_offset + kOffsetBias);
}

Expected<Binding> DecodePlaceholder(std::uint32_t tensor_index, unsigned long long address) {
  const unsigned long long buffer_plus_one = address >> kBufferShift;
  if (buffer_plus_one == 0 || buffer_plus_one > kMaxPlaceholderBuffers) {
    return InvalidArgument("tensor " + std::to_string(tensor_index) +
                           " of the task graph has no placeholder address");
  }
  Binding binding;
  binding.tensor_index = tensor_index;
  binding.buffer = static_cast<std::uint32_t>(buffer_plus_one - 1);
  binding.byte_offset =
      static_cast<long long>(address & ((1ull << kBufferShift) - 1)) - kOffsetBias;
  return binding;
}

Expected<device::TensorDesc> PlaceholderDesc(const ViewSpec& view) {
  const long long item = static_cast<long long>(DTypeSize(view.dtype));
  const long long limit = kOffsetBias / item;
  if (view.offset <= -limit || view.offset >= limit) {
    return InvalidArgument("view offset " + std::to_string(view.offset) + " is out of range");
  }
  device::TensorDesc desc = {};
  desc.data = PlaceholderAddress(view.buffer, view.offset * item);
  desc.dtype = static_cast<int>(view.dtype);
  desc.rank = static_cast<int>(view.sizes.size());
  long long numel = 1;
  for (std::size_t d = 0; d < view.sizes.size(); ++d) {
    if (view.sizes[d] != 0 && numel > std::numeric_limits<long long>::max() / view.sizes[d]) {
      return InvalidArgument("view of " + std::to_string(view.sizes.size()) +
                             " dimensions has too many elements");
    }
    numel *= view.sizes[d];
    desc.sizes[d] = view.sizes[d];
    desc.strides[d] = view.strides[d];
  }
  desc.numel = numel;
  return desc;
}

}  // namespace gpuos::torch_bridge
