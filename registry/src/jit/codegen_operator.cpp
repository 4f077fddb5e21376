// GenerateOperatorSource: one translation unit per operator, one namespace
// and one extern "C" entry point per dtype. Layout of an instantiation:
//
//   namespace gpuos_ops { namespace op_3add_v1_0_0_f32 {
//   using T = float;  using compute_t = ...;
//   [using U = ...;  using compute_u = ...;   operators with out_dtypes]
//   <device_code>
//   <the body as a function of the operator's named parameters>
//   } }
//   extern "C" __device__ void gpuos_op_3add_v1_0_0_f32(const OpCall& call) {
//     <checks, accessors, attribute reads, the loop of the kind>
//   }
#include <optional>
#include <string>
#include <vector>

#include "codegen_internal.h"
#include "gpuos/registry/codegen.h"
#include "source_writer.h"

namespace gpuos::registry {
namespace {

using jit::AttributeCppType;
using jit::AttributeSlotRead;
using jit::CudaElementType;
using jit::DeviceDTypeCode;
using jit::ParamDType;
using jit::ParamElementType;
using jit::SourceWriter;

struct Instantiation {
  const OperatorSpec& spec;
  DType dtype;
  std::optional<DType> out_dtype;  // U, for operators with out_dtypes
  std::string symbol;              // extern "C" entry point
  std::string namespace_;          // inside gpuos_ops
  std::string suffix;              // #line file suffix naming the dtype
  std::string fallback_file;
};

std::string ComputeTypeOf(const TensorParam& param) {
  if (!param.dtype) return param.type_variable == TypeVariable::kU ? "compute_u" : "compute_t";
  return "::gpuos::device::compute_type_t<" + CudaElementType(*param.dtype) + ">";
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) {
    if (!out.empty()) out += ", ";
    out += part;
  }
  return out;
}

// Parameter declarations of the attributes (body function) and the reads
// that produce their values (entry point).
std::vector<std::string> AttributeParams(const OperatorSpec& spec) {
  std::vector<std::string> params;
  for (const AttributeParam& attribute : spec.attributes) {
    params.push_back("const " + AttributeCppType(attribute.type) + " " + attribute.name);
  }
  return params;
}
std::vector<std::string> AttributeReads(const OperatorSpec& spec) {
  std::vector<std::string> reads;
  for (std::size_t k = 0; k < spec.attributes.size(); ++k) {
    reads.push_back(AttributeSlotRead(spec.attributes[k], static_cast<int>(k), "task"));
  }
  return reads;
}

void OpenInstantiation(SourceWriter& w, const Instantiation& in) {
  w.Line("namespace gpuos_ops {");
  w.Line("namespace " + in.namespace_ + " {");
  w.Line("using T = " + CudaElementType(in.dtype) + ";");
  w.Line("using compute_t = ::gpuos::device::compute_type_t<T>;");
  if (in.out_dtype) {
    w.Line("using U = " + CudaElementType(*in.out_dtype) + ";");
    w.Line("using compute_u = ::gpuos::device::compute_type_t<U>;");
  }
  if (!in.spec.device_code.empty()) {
    w.PackCode(in.spec.device_code, in.fallback_file, in.suffix);
  }
  // After device_code, which may define the accumulator type.
  if (in.spec.kind == OperatorKind::kReduction) {
    const std::string& accumulator = in.spec.reduction.accumulator;
    w.Line("using acc_t = " + (accumulator.empty() ? std::string("compute_t") : accumulator) + ";");
  }
}

void CloseInstantiation(SourceWriter& w, const Instantiation& in) {
  w.Line("}  // namespace " + in.namespace_);
  w.Line("}  // namespace gpuos_ops");
  w.Blank();
}

// Start of the entry point: T, the arity and dtype check, `task`.
void OpenEntry(SourceWriter& w, const Instantiation& in) {
  const OperatorSpec& spec = in.spec;
  std::vector<std::string> codes;
  for (const TensorParam& p : spec.inputs) {
    codes.push_back(DeviceDTypeCode(ParamDType(p, in.dtype, in.out_dtype)));
  }
  for (const TensorParam& p : spec.outputs) {
    codes.push_back(DeviceDTypeCode(ParamDType(p, in.dtype, in.out_dtype)));
  }
  w.Line("GPUOS_OPERATOR_ABI");
  w.Line("extern \"C\" __device__ void " + in.symbol + "(const ::gpuos::device::OpCall& call) {");
  w.Line("  GPUOS_PHASE_BEGIN(gpuos_phase);");
  w.Line("  using T = " + CudaElementType(in.dtype) + ";");
  if (in.out_dtype) w.Line("  using U = " + CudaElementType(*in.out_dtype) + ";");
  w.Line("  const int dtypes[] = {" + Join(codes) + "};");
  w.Line("  if (!::gpuos::device::CheckTensors(call, " + std::to_string(codes.size()) +
         ", dtypes)) return;");
  w.Line("  const ::gpuos::device::TaskDesc& task = *call.task;");
  w.Line("  (void)task;");
}

void GenerateElementwise(SourceWriter& w, const Instantiation& in) {
  const OperatorSpec& spec = in.spec;
  OpenInstantiation(w, in);
  std::vector<std::string> params;
  for (const TensorParam& p : spec.inputs)
    params.push_back("const " + ComputeTypeOf(p) + " " + p.name);
  for (const TensorParam& p : spec.outputs) params.push_back(ComputeTypeOf(p) + "& " + p.name);
  for (std::string& p : AttributeParams(spec)) params.push_back(std::move(p));
  w.Line("__device__ __forceinline__ void gpuos_body(" + Join(params) + ") {");
  w.PackCode(spec.body, in.fallback_file, in.suffix);
  w.Line("}");
  CloseInstantiation(w, in);

  const int num_inputs = static_cast<int>(spec.inputs.size());
  const int num_tensors = num_inputs + static_cast<int>(spec.outputs.size());
  OpenEntry(w, in);
  w.Line("  GPUOS_PHASE_MARK(gpuos_phase, 8);");
  w.Line("  const ::gpuos::device::ElementwiseTile tile(call, " + std::to_string(num_inputs) +
         ", " + std::to_string(spec.outputs.size()) + ");");
  w.Line("  if (!tile.ok()) return;");
  w.Line("  GPUOS_PHASE_MARK(gpuos_phase, 9);");
  for (int k = 0; k < num_tensors; ++k) {
    const bool is_input = k < num_inputs;
    const TensorParam& p = is_input ? spec.inputs[k] : spec.outputs[k - num_inputs];
    w.Line("  const ::gpuos::device::Operand<" + std::string(is_input ? "const " : "") +
           ParamElementType(p) + "> t" + std::to_string(k) + "(call.tensor(" + std::to_string(k) +
           "));");
  }
  std::vector<std::string> reads = AttributeReads(spec);
  for (std::size_t k = 0; k < reads.size(); ++k) {
    w.Line("  const " + AttributeCppType(spec.attributes[k].type) + " attr" + std::to_string(k) +
           " = " + reads[k] + ";");
  }
  // The element step of the general path, with per-tensor offsets from
  // tile.offsets (broadcast or strided).
  auto element = [&](const std::string& indent) {
    std::vector<std::string> args;
    auto offset = [&](int k) { return "at[" + std::to_string(k) + "]"; };
    for (int k = 0; k < num_inputs; ++k) {
      args.push_back("t" + std::to_string(k) + ".load(" + offset(k) + ")");
    }
    for (int k = num_inputs; k < num_tensors; ++k) {
      const std::string result = "r" + std::to_string(k - num_inputs);
      w.Line(indent + "::gpuos::device::compute_type_t<" +
             ParamElementType(spec.outputs[k - num_inputs]) + "> " + result + "{};");
      args.push_back(result);
    }
    for (std::size_t k = 0; k < reads.size(); ++k) args.push_back("attr" + std::to_string(k));
    w.Line(indent + "::gpuos_ops::" + in.namespace_ + "::gpuos_body(" + Join(args) + ");");
    for (int k = num_inputs; k < num_tensors; ++k) {
      w.Line(indent + "t" + std::to_string(k) + ".store(" + offset(k) + ", r" +
             std::to_string(k - num_inputs) + ");");
    }
  };
  // Dense: rounds of kDenseElementsPerThread elements per thread, loads
  // first, then bodies, then stores (elementwise.cuh).
  std::vector<std::string> elements;
  for (int k = 0; k < num_tensors; ++k) {
    const TensorParam& p = k < num_inputs ? spec.inputs[k] : spec.outputs[k - num_inputs];
    elements.push_back(ParamElementType(p));
  }
  w.Line("  if (tile.dense()) {");
  w.Line("    constexpr int kVec = ::gpuos::device::DenseVectorWidth<" + Join(elements) + ">();");
  w.Line("    constexpr int kUnroll = ::gpuos::device::DenseUnroll(kVec);");
  std::string aligned;
  for (int k = 0; k < num_tensors; ++k) {
    aligned += (k == 0 ? "t" : " && t") + std::to_string(k) + ".aligned(task.begin, kVec)";
  }
  w.Line("    const bool vector = " + aligned + ";");
  w.Line("    GPUOS_PHASE_MARK(gpuos_phase, 10);");
  w.Line("    long long base = task.begin;");
  // Whole rounds with the worker's block size: every access a vector at a
  // constant distance from the thread's first element, no bounds checks.
  w.Line("    if (vector && blockDim.x == ::gpuos::device::kWorkerThreads) {");
  w.Line("      constexpr int kStride = kVec * static_cast<int>(::gpuos::device::kWorkerThreads);");
  w.Line("      constexpr long long kRound = static_cast<long long>(kStride) * kUnroll;");
  w.Line("      for (; base + kRound <= task.end; base += kRound) {");
  w.Line("        const long long first = base + static_cast<long long>(threadIdx.x) * kVec;");
  auto round_body = [&](const std::string& indent, const std::string& load,
                        const std::string& store, const std::string& position) {
    for (int k = 0; k < num_tensors; ++k) {
      w.Line(indent + "::gpuos::device::compute_type_t<" + elements[k] + "> v" + std::to_string(k) +
             "[kVec * kUnroll];");
    }
    w.Line("#pragma unroll");
    w.Line(indent + "for (int u = 0; u < kUnroll; ++u) {");
    w.Line(indent + "  const long long at = " + position + ";");
    for (int k = 0; k < num_inputs; ++k) {
      const std::string n = std::to_string(k);
      w.Line(indent + "  t" + n + "." + load + "v" + n + " + u * kVec);");
    }
    w.Line(indent + "}");
    w.Line("#pragma unroll");
    w.Line(indent + "for (int e = 0; e < kVec * kUnroll; ++e) {");
    std::vector<std::string> args;
    for (int k = 0; k < num_tensors; ++k) {
      if (k >= num_inputs) w.Line(indent + "  v" + std::to_string(k) + "[e] = {};");
      args.push_back("v" + std::to_string(k) + "[e]");
    }
    for (std::size_t k = 0; k < reads.size(); ++k) args.push_back("attr" + std::to_string(k));
    w.Line(indent + "  ::gpuos_ops::" + in.namespace_ + "::gpuos_body(" + Join(args) + ");");
    w.Line(indent + "}");
    w.Line("#pragma unroll");
    w.Line(indent + "for (int u = 0; u < kUnroll; ++u) {");
    w.Line(indent + "  const long long at = " + position + ";");
    for (int k = num_inputs; k < num_tensors; ++k) {
      const std::string n = std::to_string(k);
      w.Line(indent + "  t" + n + "." + store + "v" + n + " + u * kVec);");
    }
    w.Line(indent + "}");
  };
  round_body("        ", "load_full<kVec>(at, ", "store_full<kVec>(at, ",
             "first + static_cast<long long>(u) * kStride");
  w.Line("      }");
  w.Line("    }");
  w.Line("    const long long round = static_cast<long long>(kVec) * kUnroll * blockDim.x;");
  w.Line("    for (; base < task.end; base += round) {");
  round_body("      ", "load_vector<kVec>(at, task.end, vector, ",
             "store_vector<kVec>(at, task.end, vector, ",
             "::gpuos::device::DensePosition(base, u, kVec)");
  w.Line("    }");
  w.Line("    GPUOS_PHASE_MARK(gpuos_phase, 11);");
  w.Line("  } else {");
  w.Line("    for (long long i = tile.first(); i < tile.end(); i += tile.step()) {");
  w.Line("      long long at[" + std::to_string(num_tensors) + "];");
  w.Line("      tile.offsets(i, at);");
  element("      ");
  w.Line("    }");
  w.Line("  }");
  w.Line("}");
}

void GenerateReduction(SourceWriter& w, const Instantiation& in) {
  const OperatorSpec& spec = in.spec;
  const ReductionCode& code = spec.reduction;
  const TensorParam& input = spec.inputs[0];
  const TensorParam& output = spec.outputs[0];
  OpenInstantiation(w, in);
  w.Line("struct Reducer {");
  w.Line("  using acc_type = acc_t;");
  w.Line("  using out_compute = " + ComputeTypeOf(output) + ";");
  for (const std::string& p : AttributeParams(spec)) w.Line("  " + p + ";");
  auto member = [&](const std::string& signature, const CodeBlock& block,
                    const std::string& fallback) {
    w.Line("  __device__ void " + signature + " const {");
    if (block.empty()) {
      w.Line(fallback);
    } else {
      w.PackCode(block, in.fallback_file, in.suffix);
    }
    w.Line("  }");
  };
  member("init(acc_t& acc)", code.init, "");
  member("step(acc_t& acc, const " + ComputeTypeOf(input) + " x, const long long index)", code.step,
         "");
  member("merge(acc_t& acc, const acc_t& other)", code.merge, "");
  member("finish(out_compute& " + output.name + ", acc_t acc, const long long count)", code.finish,
         "    " + output.name + " = acc;");
  w.Line("};");
  CloseInstantiation(w, in);

  OpenEntry(w, in);
  w.Line("  const ::gpuos_ops::" + in.namespace_ + "::Reducer reducer{" +
         Join(AttributeReads(spec)) + "};");
  w.Line("  ::gpuos::device::RunReduction<" + ParamElementType(input) + ", " +
         ParamElementType(output) + ">(call, reducer);");
  w.Line("}");
}

void GenerateCustom(SourceWriter& w, const Instantiation& in) {
  const OperatorSpec& spec = in.spec;
  OpenInstantiation(w, in);
  std::vector<std::string> params = {"const ::gpuos::OpContext& ctx"};
  std::vector<std::string> args = {"ctx"};
  for (std::size_t k = 0; k < spec.inputs.size(); ++k) {
    const std::string element = ParamElementType(spec.inputs[k]);
    params.push_back("const ::gpuos::TensorAccessor<const " + element + "> " + spec.inputs[k].name);
    args.push_back("ctx.input<" + element + ">(" + std::to_string(k) + ")");
  }
  for (std::size_t k = 0; k < spec.outputs.size(); ++k) {
    const std::string element = ParamElementType(spec.outputs[k]);
    params.push_back("const ::gpuos::TensorAccessor<" + element + "> " + spec.outputs[k].name);
    args.push_back("ctx.output<" + element + ">(" + std::to_string(k) + ")");
  }
  for (std::string& p : AttributeParams(spec)) params.push_back(std::move(p));
  for (std::string& read : AttributeReads(spec)) args.push_back(std::move(read));
  w.Line("__device__ void gpuos_run(" + Join(params) + ") {");
  w.PackCode(spec.body, in.fallback_file, in.suffix);
  w.Line("}");
  CloseInstantiation(w, in);

  OpenEntry(w, in);
  w.Line("  const ::gpuos::OpContext ctx(call, " + std::to_string(spec.inputs.size()) + ");");
  w.Line("  ::gpuos_ops::" + in.namespace_ + "::gpuos_run(" + Join(args) + ");");
  w.Line("}");
}

}  // namespace

Expected<GeneratedSource> GenerateOperatorSource(const OperatorSpec& spec) {
  GPUOS_RETURN_IF_ERROR(jit::CheckGeneratable(spec));
  SourceWriter w(OperatorProgramName(spec.name, spec.version));
  w.Line("// Generated by gpuos from " + jit::DescribeOperator(spec) + ". Do not edit.");
  w.Line("#include \"gpuos/device/gpuos.cuh\"");
  w.Blank();
  const std::string fallback_file =
      spec.location.file.empty() ? "<operator " + spec.name + ">" : spec.location.file;
  std::vector<std::optional<DType>> out_dtypes(spec.out_dtypes.begin(), spec.out_dtypes.end());
  if (out_dtypes.empty()) out_dtypes.push_back(std::nullopt);
  for (DType dtype : spec.dtypes) {
    for (const std::optional<DType>& out_dtype : out_dtypes) {
      const std::string symbol = OperatorSymbol(spec.name, spec.version, dtype, out_dtype);
      std::string types = DTypeName(dtype);
      if (out_dtype) types += std::string("/U=") + DTypeName(*out_dtype);
      const Instantiation in{spec,
                             dtype,
                             out_dtype,
                             symbol,
                             "op_" + symbol.substr(std::string("gpuos_op_").size()),
                             std::string(jit::kInstantiationMarker) + types,
                             fallback_file};
      w.Line("// ---- " + spec.name + " " + spec.version.ToString() + ", T = " + types);
      switch (spec.kind) {
        case OperatorKind::kElementwise:
          GenerateElementwise(w, in);
          break;
        case OperatorKind::kReduction:
          GenerateReduction(w, in);
          break;
        case OperatorKind::kCustom:
          GenerateCustom(w, in);
          break;
      }
      w.Blank();
    }
  }
  GeneratedSource out;
  out.program_name = w.program_name();
  out.source = w.Take();
  return out;
}

}  // namespace gpuos::registry
