// Generation of device code from operator specs (docs/device-code.md says
// what operator code sees; docs/jit.md how the pieces are compiled).
//
// Every operator becomes one CUDA C++ translation unit holding one
// `extern "C" __device__ void <symbol>(const gpuos::device::OpCall&)` per
// dtype in spec.dtypes. Every pack code block is preceded by a `#line`
// directive naming the pack file and the block's first line, so compiler
// messages point at the YAML. A kernel image adds one more generated unit:
// the operator table (slot -> function).
//
// All functions are pure and deterministic: equal inputs give byte-equal
// sources (the build cache depends on it). Thread safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuos/dtype.h"
#include "gpuos/registry/kernel_image.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry {

// What one task descriptor can carry (device/include/gpuos/device/abi.h).
inline constexpr int kMaxOperatorTensors = 8;     // inputs + outputs
inline constexpr int kMaxOperatorAttributes = 6;  // scalar slots

// The device symbol of `name` at `version` instantiated for `dtype`:
// "gpuos_op_" + <length of name> + name + "_v" + M_m_p + "_" + dtype, e.g.
// gpuos_op_3add_v1_0_0_f32. The length prefix keeps names unique even when
// operator names contain underscores and digits.
std::string OperatorSymbol(const std::string& name, const SemVer& version, DType dtype);
// The same for an operator with a second type variable U (out_dtypes):
// "_" + the dtype of U is appended, e.g. gpuos_op_4cast_v1_0_0_f32_i64.
// Without out_dtype it equals the form above.
std::string OperatorSymbol(const std::string& name, const SemVer& version, DType dtype,
                           std::optional<DType> out_dtype);

// The file name NVRTC sees for an operator's generated source (used in
// messages about generated lines): "gpuos_op_3add_v1_0_0.cu".
std::string OperatorProgramName(const std::string& name, const SemVer& version);

struct GeneratedSource {
  std::string program_name;  // file name for NVRTC
  std::string source;        // CUDA C++; includes "gpuos/device/gpuos.cuh"
};

// The translation unit of `spec`. Errors (InvalidArgument, naming the
// operator and the field): more than kMaxOperatorTensors tensors or
// kMaxOperatorAttributes attributes, code missing for the kind, a reduction
// without exactly one input and one output, a parameter named like something
// the generated code defines (T, compute_t, acc, x, ... or a C++ keyword).
Expected<GeneratedSource> GenerateOperatorSource(const OperatorSpec& spec);

// The table entries of an image holding `ops`: operators ordered by (name,
// version) whatever the input order, each operator's dtypes in spec order
// (with out_dtypes: every pair, T outer and U inner, in spec order), slots
// numbered from 1. REQUIRES: no (name, version) appears twice.
std::vector<ImageEntry> AssignImageSlots(const std::vector<const OperatorSpec*>& ops);

// The translation unit that defines gpuos_op_table and gpuos_op_table_size
// for `entries` (as returned by AssignImageSlots).
GeneratedSource GenerateOpTableSource(const std::vector<ImageEntry>& entries);

// The 8-byte attribute slots of a task running `spec` (TaskDesc::scalars,
// in declaration order), from attribute values given as canonical text
// (name -> "1.5", "true"; the form of AttributeParam::default_value and
// OperatorTest::attributes). Missing attributes take their default. Each
// slot holds the bit pattern of a double (f32, f64) or a long long (i32, i64,
// bool as 0/1). Errors (InvalidArgument): an unknown attribute name, a
// missing required one, a value that does not parse as its type or is out of
// range for i32.
Expected<std::vector<std::uint64_t>> EncodeAttributeSlots(
    const OperatorSpec& spec, const std::vector<std::pair<std::string, std::string>>& values);

}  // namespace gpuos::registry
