// Literal operands and attribute values of fused elementwise operators
// (fused_elementwise.h): checked, then spelled as C++ expressions that have
// exactly their value. Pure functions.
#pragma once

#include <string>
#include <string_view>

#include "gpuos/dtype.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry::jit {

// A number in two spellings: canonical text (for descriptions, e.g. "0.999",
// "-3", "true") and a C++ expression.
struct Number {
  std::string text;
  std::string cpp;
};

// A literal operand of a step of type `dtype`: floating T takes a finite
// decimal number, integer T a decimal integer in its range, bool "0" or "1"
// (a leading '+' is accepted). `cpp` converts it to T, then to compute_t, as
// the element of a scalar T tensor would be. Errors: InvalidArgument saying
// why the text is not such a number.
Expected<Number> OperandLiteral(std::string_view text, DType dtype);

// An attribute value, by the rules of EncodeAttributeSlots (f32 also within
// float's range, as the pack loader checks defaults); `cpp` is the plain
// literal.
Expected<Number> AttributeNumber(const AttributeParam& attribute, std::string_view text);

// The same with `cpp` an expression of the attribute's C++ type, the value
// the runtime would read from the task's slot ("static_cast<float>(2.0)").
Expected<Number> AttributeLiteral(const AttributeParam& attribute, std::string_view text);

}  // namespace gpuos::registry::jit
