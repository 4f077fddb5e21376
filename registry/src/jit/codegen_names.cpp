#include <algorithm>
#include <array>
#include <set>

#include "codegen_internal.h"
#include "gpuos/device/abi.h"
#include "gpuos/registry/codegen.h"

namespace gpuos::registry {
namespace {

static_assert(static_cast<int>(DType::kF32) == device::kDTypeF32);
static_assert(static_cast<int>(DType::kF16) == device::kDTypeF16);
static_assert(static_cast<int>(DType::kBF16) == device::kDTypeBF16);
static_assert(static_cast<int>(DType::kF64) == device::kDTypeF64);
static_assert(static_cast<int>(DType::kI8) == device::kDTypeI8);
static_assert(static_cast<int>(DType::kU8) == device::kDTypeU8);
static_assert(static_cast<int>(DType::kI32) == device::kDTypeI32);
static_assert(static_cast<int>(DType::kI64) == device::kDTypeI64);
static_assert(static_cast<int>(DType::kBool) == device::kDTypeBool);
static_assert(kMaxOperatorTensors == device::kMaxTaskTensors);
static_assert(kMaxOperatorAttributes == device::kMaxTaskScalars);

// Names the generated code defines next to pack code, and C++ keywords: a
// parameter named like one of them would not compile, with a confusing
// message, so it is refused up front.
const std::set<std::string>& ReservedNames() {
  static const std::set<std::string> names = {
      // Defined by generated code for every kind.
      "T", "compute_t", "U", "compute_u", "gpuos", "gpuos_ops",
      // C++ keywords and CUDA names a parameter cannot take.
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
      "case", "catch", "char", "char16_t", "char32_t", "class", "compl", "const", "const_cast",
      "constexpr", "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast",
      "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
      "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "return", "short", "signed", "sizeof", "static", "static_assert",
      "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true", "try",
      "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
      "wchar_t", "while", "xor", "xor_eq", "threadIdx", "blockIdx", "blockDim", "gridDim",
      "warpSize"};
  return names;
}

// Names a kind's code blocks see besides the parameters.
const std::set<std::string>& KindNames(OperatorKind kind) {
  static const std::set<std::string> none;
  static const std::set<std::string> reduction = {"acc",   "x",     "index",    "other",
                                                  "count", "acc_t", "acc_type", "out_compute"};
  static const std::set<std::string> custom = {"ctx"};
  switch (kind) {
    case OperatorKind::kReduction:
      return reduction;
    case OperatorKind::kCustom:
      return custom;
    case OperatorKind::kElementwise:
      break;
  }
  return none;
}

}  // namespace

std::string OperatorProgramName(const std::string& name, const SemVer& version) {
  return "gpuos_op_" + std::to_string(name.size()) + name + "_v" + std::to_string(version.major) +
         "_" + std::to_string(version.minor) + "_" + std::to_string(version.patch) + ".cu";
}

std::string OperatorSymbol(const std::string& name, const SemVer& version, DType dtype) {
  std::string program = OperatorProgramName(name, version);
  program.resize(program.size() - 3);  // drop ".cu"
  return program + "_" + DTypeName(dtype);
}

std::string OperatorSymbol(const std::string& name, const SemVer& version, DType dtype,
                           std::optional<DType> out_dtype) {
  std::string symbol = OperatorSymbol(name, version, dtype);
  if (out_dtype) symbol += std::string("_") + DTypeName(*out_dtype);
  return symbol;
}

namespace jit {

std::string CudaElementType(DType dtype) { return DTypeCudaType(dtype); }

std::string DeviceDTypeCode(DType dtype) {
  static constexpr std::array<const char*, kNumDTypes> kCodes = {
      "kDTypeF32", "kDTypeF16", "kDTypeBF16", "kDTypeF64", "kDTypeI8",
      "kDTypeU8",  "kDTypeI32", "kDTypeI64",  "kDTypeBool"};
  return std::string("::gpuos::device::") + kCodes[static_cast<int>(dtype)];
}

std::string ParamElementType(const TensorParam& param) {
  if (param.dtype) return CudaElementType(*param.dtype);
  return param.type_variable == TypeVariable::kU ? "U" : "T";
}

DType ParamDType(const TensorParam& param, DType dtype, std::optional<DType> out_dtype) {
  if (param.dtype) return *param.dtype;
  return param.type_variable == TypeVariable::kU ? out_dtype.value_or(dtype) : dtype;
}

std::string AttributeCppType(AttributeType type) {
  switch (type) {
    case AttributeType::kF32:
      return "float";
    case AttributeType::kF64:
      return "double";
    case AttributeType::kI32:
      return "int";
    case AttributeType::kI64:
      return "long long";
    case AttributeType::kBool:
      return "bool";
  }
  return "double";
}

std::string AttributeSlotRead(const AttributeParam& attribute, int slot,
                              const std::string& task_expr) {
  const std::string slot_expr = task_expr + ".scalars[" + std::to_string(slot) + "]";
  switch (attribute.type) {
    case AttributeType::kF32:
      return "static_cast<float>(" + slot_expr + ".f64)";
    case AttributeType::kF64:
      return slot_expr + ".f64";
    case AttributeType::kI32:
      return "static_cast<int>(" + slot_expr + ".i64)";
    case AttributeType::kI64:
      return slot_expr + ".i64";
    case AttributeType::kBool:
      return "(" + slot_expr + ".i64 != 0)";
  }
  return slot_expr + ".f64";
}

std::string DescribeOperator(const OperatorSpec& spec) {
  std::string text = "operator '" + spec.name + "' " + spec.version.ToString();
  if (!spec.location.file.empty()) {
    text += " (" + spec.location.file;
    if (spec.location.line > 0) text += ":" + std::to_string(spec.location.line);
    text += ")";
  }
  return text;
}

Status CheckGeneratable(const OperatorSpec& spec) {
  const std::string what = DescribeOperator(spec);
  if (spec.dtypes.empty()) {
    return InvalidArgument(what + ": dtypes: empty; list the element types to instantiate");
  }
  auto follows_u = [](const TensorParam& p) {
    return !p.dtype && p.type_variable == TypeVariable::kU;
  };
  if (spec.out_dtypes.empty() &&
      (std::any_of(spec.inputs.begin(), spec.inputs.end(), follows_u) ||
       std::any_of(spec.outputs.begin(), spec.outputs.end(), follows_u))) {
    return InvalidArgument(what +
                           ": a tensor has dtype U but out_dtypes is empty; list the "
                           "instantiations of U in out_dtypes");
  }
  const std::size_t tensors = spec.inputs.size() + spec.outputs.size();
  if (tensors > static_cast<std::size_t>(kMaxOperatorTensors)) {
    return InvalidArgument(
        what + ": " + std::to_string(tensors) + " inputs and outputs, but a task carries at most " +
        std::to_string(kMaxOperatorTensors) + "; split the operator or use fewer tensors");
  }
  if (spec.outputs.empty()) return InvalidArgument(what + ": outputs: at least one is required");
  if (spec.attributes.size() > static_cast<std::size_t>(kMaxOperatorAttributes)) {
    return InvalidArgument(what + ": " + std::to_string(spec.attributes.size()) +
                           " attributes, but a task carries at most " +
                           std::to_string(kMaxOperatorAttributes));
  }
  // A reduction's input is only ever seen as `x`, so its name may be
  // anything; every other parameter becomes a C++ name.
  auto check_name = [&](const std::string& field, const std::string& name,
                        bool kind_names_apply) -> Status {
    if (ReservedNames().count(name) != 0 ||
        (kind_names_apply && KindNames(spec.kind).count(name) != 0)) {
      return InvalidArgument(what + ": " + field + ": the name '" + name +
                             "' is reserved in device code (a C++ keyword or a name the "
                             "generated code defines); rename it");
    }
    return Status::Ok();
  };
  const bool reduction = spec.kind == OperatorKind::kReduction;
  for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
    GPUOS_RETURN_IF_ERROR(
        check_name("inputs[" + std::to_string(i) + "].name", spec.inputs[i].name, !reduction));
  }
  for (std::size_t i = 0; i < spec.outputs.size(); ++i) {
    GPUOS_RETURN_IF_ERROR(
        check_name("outputs[" + std::to_string(i) + "].name", spec.outputs[i].name, true));
  }
  for (std::size_t i = 0; i < spec.attributes.size(); ++i) {
    GPUOS_RETURN_IF_ERROR(
        check_name("attributes[" + std::to_string(i) + "].name", spec.attributes[i].name, true));
  }
  switch (spec.kind) {
    case OperatorKind::kElementwise:
    case OperatorKind::kCustom:
      if (spec.body.empty()) {
        return InvalidArgument(what + ": body: required for an " + OperatorKindName(spec.kind) +
                               " operator");
      }
      if (spec.kind == OperatorKind::kElementwise && spec.inputs.empty()) {
        return InvalidArgument(what + ": inputs: an elementwise operator needs at least one");
      }
      break;
    case OperatorKind::kReduction:
      if (spec.inputs.size() != 1 || spec.outputs.size() != 1) {
        return InvalidArgument(what + ": a reduction has exactly one input and one output");
      }
      if (spec.reduction.init.empty() || spec.reduction.step.empty() ||
          spec.reduction.merge.empty()) {
        return InvalidArgument(what + ": reduce: init, step and merge are required");
      }
      break;
  }
  return Status::Ok();
}

}  // namespace jit
}  // namespace gpuos::registry
