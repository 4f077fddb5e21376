// Pieces shared by the operator and image code generators.
#pragma once

#include <optional>
#include <string>

#include "gpuos/dtype.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry::jit {

// C++ spelling of an element type in device code ("float", "__half", ...).
std::string CudaElementType(DType dtype);

// "::gpuos::device::kDTypeF32" and so on.
std::string DeviceDTypeCode(DType dtype);

// The element type of `param` in generated code ("T" or "U" when it follows
// a type variable, the concrete type otherwise).
std::string ParamElementType(const TensorParam& param);

// The concrete dtype of `param` in the instantiation for `dtype` (T) and
// `out_dtype` (U; nullopt when the operator has no U).
DType ParamDType(const TensorParam& param, DType dtype, std::optional<DType> out_dtype);

// C++ type of an attribute in device code ("float", "long long", ...).
std::string AttributeCppType(AttributeType type);

// Expression reading attribute slot `slot` of `task_expr` (a TaskDesc
// lvalue) as the attribute's type.
std::string AttributeSlotRead(const AttributeParam& attribute, int slot,
                              const std::string& task_expr);

// Checks the limits and names that generated code needs (see
// GenerateOperatorSource). Errors name the operator and the field.
Status CheckGeneratable(const OperatorSpec& spec);

// "operator 'add' 1.0.0 (ops.yaml:12)".
std::string DescribeOperator(const OperatorSpec& spec);

}  // namespace gpuos::registry::jit
