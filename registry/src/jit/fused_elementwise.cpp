// FuseElementwise: checks a fused description, then writes the constituents'
// code into per-operator namespaces and a body that calls them step by step.
// The name is a hash of the generated code, computed with a fixed virtual file
// name in the `#line` directives, then the code is generated again with the
// real one ("fused:<name>").
#include "gpuos/registry/fused_elementwise.h"

#include <string>
#include <utility>
#include <vector>

#include "codegen_internal.h"
#include "fused_literals.h"
#include "gpuos/content_hash.h"
#include "gpuos/registry/codegen.h"
#include "source_writer.h"

namespace gpuos::registry {
namespace {

using jit::AttributeLiteral;
using jit::AttributeNumber;
using jit::Number;
using jit::OperandLiteral;
using jit::SourceWriter;

constexpr std::string_view kHashFormat = "gpuos fused elementwise 1";
constexpr std::string_view kVirtualFilePrefix = "fused:";

bool SameBlock(const CodeBlock& a, const CodeBlock& b) {
  return a.code == b.code && a.location.file == b.location.file &&
         a.location.line == b.location.line;
}

// Whether two specs with one (name, version) give the same fused code.
bool SameCode(const OperatorSpec& a, const OperatorSpec& b) {
  auto same_params = [](const std::vector<TensorParam>& x, const std::vector<TensorParam>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i].name != y[i].name) return false;
    }
    return true;
  };
  if (!same_params(a.inputs, b.inputs) || !same_params(a.outputs, b.outputs) ||
      a.attributes.size() != b.attributes.size() || a.location.file != b.location.file) {
    return false;
  }
  for (std::size_t i = 0; i < a.attributes.size(); ++i) {
    if (a.attributes[i].name != b.attributes[i].name ||
        a.attributes[i].type != b.attributes[i].type) {
      return false;
    }
  }
  return SameBlock(a.body, b.body) && SameBlock(a.device_code, b.device_code);
}

std::string ParamNames(const std::vector<TensorParam>& params) {
  std::string names;
  for (const TensorParam& p : params) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

// A distinct constituent and the namespace its code goes into.
struct Constituent {
  const OperatorSpec* op;
  std::string ns;
};

// What the checks produce: everything code generation needs.
struct Plan {
  std::vector<Constituent> constituents;  // in order of first use
  struct Call {
    int constituent = 0;
    std::vector<std::string> args;  // operands, then attributes (C++)
  };
  std::vector<Call> calls;
  std::string description;
};

class Planner {
 public:
  explicit Planner(const FusedElementwiseDesc& desc) : desc_(desc) {}

  Expected<Plan> Run() {
    const std::string what = "fused elementwise operator";
    if (desc_.steps.empty()) return InvalidArgument(what + ": no steps; give at least one");
    if (desc_.num_inputs < 1 || desc_.num_inputs + 1 > kMaxOperatorTensors) {
      return InvalidArgument(what + ": num_inputs = " + std::to_string(desc_.num_inputs) +
                             ": a fused operator reads 1 to " +
                             std::to_string(kMaxOperatorTensors - 1) + " inputs (a task carries " +
                             std::to_string(kMaxOperatorTensors) +
                             " tensors, one is the output); split the group");
    }
    read_.assign(desc_.num_inputs, false);
    plan_.description = "fused:";
    for (std::size_t i = 0; i < desc_.steps.size(); ++i) {
      GPUOS_RETURN_IF_ERROR(AddStep(static_cast<int>(i)));
    }
    for (int k = 0; k < desc_.num_inputs; ++k) {
      if (!read_[k]) {
        return InvalidArgument(what + ": input " + std::to_string(k) + " (in" + std::to_string(k) +
                               ") is read by no step; drop it or renumber the inputs");
      }
    }
    return std::move(plan_);
  }

 private:
  Status Fail(int i, const std::string& problem) const {
    const OperatorSpec* op = desc_.steps[i].op;
    std::string step = "fused elementwise operator: step " + std::to_string(i);
    if (op != nullptr) step += " (" + op->name + " " + op->version.ToString() + ")";
    return InvalidArgument(step + ": " + problem);
  }

  Status CheckOperator(int i) {
    const OperatorSpec& op = *desc_.steps[i].op;
    if (op.kind != OperatorKind::kElementwise) {
      return Fail(i, std::string("a ") + OperatorKindName(op.kind) +
                         " operator cannot be fused; only elementwise operators can");
    }
    if (!op.out_dtypes.empty()) {
      return Fail(i,
                  "the operator has a second type variable U (out_dtypes); only operators "
                  "whose tensors all follow T can be fused");
    }
    if (op.outputs.size() != 1) {
      return Fail(i, "the operator has " + std::to_string(op.outputs.size()) +
                         " outputs; a fused step has exactly one");
    }
    for (const auto* params : {&op.inputs, &op.outputs}) {
      for (const TensorParam& p : *params) {
        if (p.dtype) {
          return Fail(i, "tensor '" + p.name + "' has the fixed dtype " + DTypeName(*p.dtype) +
                             "; only operators whose tensors all follow T can be fused");
        }
        if (p.type_variable != TypeVariable::kT) {
          return Fail(i, "tensor '" + p.name +
                             "' follows U; only operators whose tensors all "
                             "follow T can be fused");
        }
      }
    }
    bool listed = false;
    std::string dtypes;
    for (DType d : op.dtypes) {
      listed = listed || d == desc_.dtype;
      dtypes += (dtypes.empty() ? "" : ", ") + std::string(DTypeName(d));
    }
    if (!listed) {
      return Fail(i, std::string("the operator is not instantiated for ") + DTypeName(desc_.dtype) +
                         " (its dtypes: " + dtypes + ")");
    }
    if (Status status = jit::CheckGeneratable(op); !status.ok()) return Fail(i, status.message());
    return Status::Ok();
  }

  // The constituent of step i: an earlier one with the same (name, version),
  // which must have the same code, or a new one.
  Expected<int> ConstituentOf(int i) {
    const OperatorSpec& op = *desc_.steps[i].op;
    for (std::size_t k = 0; k < plan_.constituents.size(); ++k) {
      const OperatorSpec& seen = *plan_.constituents[k].op;
      if (seen.name != op.name || seen.version != op.version) continue;
      if (&seen != &op && !SameCode(seen, op)) {
        return Fail(i,
                    "another step uses a different operator with the same name and version; "
                    "a fused operator holds one code per (name, version)");
      }
      return static_cast<int>(k);
    }
    const SemVer& v = op.version;
    plan_.constituents.push_back({&op, "fz_" + op.name + "_v" + std::to_string(v.major) + "_" +
                                           std::to_string(v.minor) + "_" +
                                           std::to_string(v.patch)});
    return static_cast<int>(plan_.constituents.size() - 1);
  }

  Status AddOperands(int i, Plan::Call& call, std::string& shown) {
    const FusedStep& step = desc_.steps[i];
    const OperatorSpec& op = *step.op;
    if (step.operands.size() != op.inputs.size()) {
      return Fail(i, std::to_string(step.operands.size()) + " operands given, the operator has " +
                         std::to_string(op.inputs.size()) + " inputs (" + ParamNames(op.inputs) +
                         "); give one operand per input");
    }
    for (std::size_t k = 0; k < step.operands.size(); ++k) {
      const FusedOperand& operand = step.operands[k];
      const std::string which = "operand " + std::to_string(k) + " (" + op.inputs[k].name + "): ";
      std::string arg;
      switch (operand.kind) {
        case FusedOperand::Kind::kInput:
          if (operand.index < 0 || operand.index >= desc_.num_inputs) {
            return Fail(i, which + "input " + std::to_string(operand.index) + " is outside [0, " +
                               std::to_string(desc_.num_inputs) + ") (num_inputs)");
          }
          read_[operand.index] = true;
          arg = "in" + std::to_string(operand.index);
          shown += arg;
          break;
        case FusedOperand::Kind::kStep:
          if (operand.index < 0 || operand.index >= i) {
            return Fail(i, which + "step " + std::to_string(operand.index) +
                               " is not an earlier step; a step reads only outputs of the steps "
                               "before it");
          }
          arg = "s" + std::to_string(operand.index);
          shown += arg;
          break;
        case FusedOperand::Kind::kLiteral: {
          Expected<Number> number = OperandLiteral(operand.literal, desc_.dtype);
          if (!number.ok()) {
            return Fail(i, which + "literal '" + operand.literal + "' is not a number of T = " +
                               DTypeName(desc_.dtype) + " (" + number.status().message() +
                               "); write a finite decimal number, an integer in range for an "
                               "integer T, 0 or 1 for bool");
          }
          arg = number->cpp;
          shown += number->text;
          break;
        }
        default:
          return Fail(i, which + "unknown operand kind");
      }
      call.args.push_back(std::move(arg));
      if (k + 1 < step.operands.size()) shown += ", ";
    }
    return Status::Ok();
  }

  Status AddAttributes(int i, Plan::Call& call, std::string& shown) {
    const FusedStep& step = desc_.steps[i];
    const OperatorSpec& op = *step.op;
    for (std::size_t k = 0; k < step.attributes.size(); ++k) {
      const std::string& name = step.attributes[k].first;
      bool declared = false;
      for (const AttributeParam& a : op.attributes) declared = declared || a.name == name;
      if (!declared) {
        std::string names;
        for (const AttributeParam& a : op.attributes) names += (names.empty() ? "" : ", ") + a.name;
        return Fail(i, "unknown attribute '" + name +
                           "' (declared: " + (names.empty() ? "none" : names) + ")");
      }
      for (std::size_t j = 0; j < k; ++j) {
        if (step.attributes[j].first == name) {
          return Fail(i, "attribute '" + name + "' is given twice");
        }
      }
    }
    for (const AttributeParam& attribute : op.attributes) {
      const std::string* text = nullptr;
      for (const auto& [name, value] : step.attributes) {
        if (name == attribute.name) text = &value;
      }
      const bool given = text != nullptr;
      if (!given && attribute.default_value) text = &*attribute.default_value;
      if (text == nullptr) {
        return Fail(i, "attribute '" + attribute.name + "' has no default and was not given");
      }
      Expected<Number> number = AttributeLiteral(attribute, *text);
      if (!number.ok()) {
        return Fail(i, "attribute '" + attribute.name + "' (" + AttributeTypeName(attribute.type) +
                           "): " + number.status().message());
      }
      call.args.push_back(number->cpp);
      // Only values that differ from the default: giving the default or
      // leaving it out is the same operator.
      bool is_default = false;
      if (given && attribute.default_value) {
        const Expected<Number> fallback = AttributeNumber(attribute, *attribute.default_value);
        is_default = fallback.ok() && fallback->text == number->text;
      }
      if (given && !is_default) shown += ", " + attribute.name + "=" + number->text;
    }
    return Status::Ok();
  }

  Status AddStep(int i) {
    const FusedStep& step = desc_.steps[i];
    if (step.op == nullptr) return Fail(i, "no operator (FusedStep::op is null)");
    GPUOS_RETURN_IF_ERROR(CheckOperator(i));
    Plan::Call call;
    GPUOS_ASSIGN_OR_RETURN(call.constituent, ConstituentOf(i));
    std::string shown = step.op->name + "(";
    GPUOS_RETURN_IF_ERROR(AddOperands(i, call, shown));
    GPUOS_RETURN_IF_ERROR(AddAttributes(i, call, shown));
    plan_.description += std::string(i == 0 ? " " : " -> ") + shown + ")";
    plan_.calls.push_back(std::move(call));
    return Status::Ok();
  }

  const FusedElementwiseDesc& desc_;
  Plan plan_;
  std::vector<bool> read_;
};

using FusedCode = jit::GeneratedCode;

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ", ") + part;
  return out;
}

// The code of `plan`; `virtual_file` names device_code in the directives
// that follow each copied block.
FusedCode Generate(const Plan& plan, DType dtype, const std::string& virtual_file) {
  const std::string suffix = std::string(jit::kInstantiationMarker) + DTypeName(dtype);
  SourceWriter w(virtual_file);
  for (const Constituent& c : plan.constituents) {
    const OperatorSpec& op = *c.op;
    const std::string fallback =
        op.location.file.empty() ? "<operator " + op.name + ">" : op.location.file;
    // The parameters GenerateOperatorSource gives an elementwise body.
    std::vector<std::string> params;
    for (const TensorParam& p : op.inputs) params.push_back("const compute_t " + p.name);
    for (const TensorParam& p : op.outputs) params.push_back("compute_t& " + p.name);
    for (const AttributeParam& a : op.attributes) {
      params.push_back("const " + jit::AttributeCppType(a.type) + " " + a.name);
    }
    w.Line("namespace " + c.ns + " {  // " + op.name + " " + op.version.ToString());
    if (!op.device_code.empty()) w.PackCode(op.device_code, fallback, suffix);
    w.Line("__device__ __forceinline__ void gpuos_body(" + Join(params) + ") {");
    w.PackCode(op.body, fallback, suffix);
    w.Line("}");
    w.Line("}  // namespace " + c.ns);
  }
  FusedCode code = jit::WithDeviceCode(w.Take());

  std::string body;
  for (std::size_t i = 0; i < plan.calls.size(); ++i) {
    const Plan::Call& call = plan.calls[i];
    const std::string result = "s" + std::to_string(i);
    std::vector<std::string> args = call.args;
    const std::size_t num_operands = plan.constituents[call.constituent].op->inputs.size();
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(num_operands), result);
    body += "compute_t " + result + "{};\n";
    body += plan.constituents[call.constituent].ns + "::gpuos_body(" + Join(args) + ");\n";
  }
  body += "out = s" + std::to_string(plan.calls.size() - 1) + ";\n";
  code.body = std::move(body);
  return code;
}

}  // namespace

Expected<OperatorSpec> FuseElementwise(const FusedElementwiseDesc& desc) {
  GPUOS_ASSIGN_OR_RETURN(const Plan plan, Planner(desc).Run());

  const FusedCode unnamed = Generate(plan, desc.dtype, std::string(kVirtualFilePrefix));
  ContentHasher hasher;
  hasher.Add(kHashFormat)
      .Add(DTypeName(desc.dtype))
      .Add(std::to_string(desc.num_inputs))
      .Add(plan.description)
      .Add(unnamed.device_code)
      .Add(unnamed.body);
  const std::string name = std::string(kFusedOperatorPrefix) + hasher.Finish().substr(0, 16);
  const std::string file = std::string(kVirtualFilePrefix) + name;
  FusedCode code = Generate(plan, desc.dtype, file);

  OperatorSpec spec;
  spec.name = name;
  spec.version = SemVer{1, 0, 0};
  spec.kind = OperatorKind::kElementwise;
  spec.description = plan.description;
  spec.dtypes = {desc.dtype};
  for (int k = 0; k < desc.num_inputs; ++k) {
    TensorParam input;
    input.name = "in" + std::to_string(k);
    input.description = "fused input " + std::to_string(k);
    spec.inputs.push_back(std::move(input));
  }
  TensorParam output;
  output.name = "out";
  output.description = "the output of step " + std::to_string(desc.steps.size() - 1);
  spec.outputs.push_back(std::move(output));
  jit::AttachGeneratedCode(std::move(code), file, &spec);
  return spec;
}

}  // namespace gpuos::registry
