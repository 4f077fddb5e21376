// Fusion of elementwise operators: one new elementwise OperatorSpec from a
// chain or tree of elementwise steps (docs/jit.md, "Fused elementwise
// operators").
//
// The fused operator's code composes the constituent operators' own code
// (their `device_code` and `body`, copied with `#line` directives that point
// at their packs): no operator is written twice. The result is an ordinary
// operator spec: build it with JitBuilder, serve it with Runtime::Update.
//
// Pure and deterministic: equal descriptions (including the constituents'
// code and its locations) give byte-equal specs with equal names. Thread safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuos/dtype.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry {

// Names of fused operators start with this, followed by 16 hex digits.
inline constexpr std::string_view kFusedOperatorPrefix = "fused_";

// One argument of a step.
struct FusedOperand {
  enum class Kind { kInput, kStep, kLiteral };
  Kind kind = Kind::kInput;
  // kInput: the fused operator's input number (in0, in1, ...); kStep: the
  // number of an EARLIER step, whose output this is.
  int index = 0;
  // kLiteral: a number as text. Floating T: a finite decimal number ("0.999",
  // "1e-05", "-3"); integer T: a decimal integer in T's range ("-3"); bool:
  // "1" or "0". A leading '+' is accepted. The value is converted to T, then
  // to compute_t, like a scalar held as a T tensor.
  std::string literal;

  static FusedOperand Input(int input) { return {Kind::kInput, input, {}}; }
  static FusedOperand Step(int step) { return {Kind::kStep, step, {}}; }
  static FusedOperand Literal(std::string text) { return {Kind::kLiteral, 0, std::move(text)}; }
};

struct FusedStep {
  // An elementwise operator whose tensors all follow T, with one output. Not
  // owned; must outlive the FuseElementwise call (not the result).
  const OperatorSpec* op = nullptr;
  std::vector<FusedOperand> operands;  // one per op->inputs, in that order
  // Attribute name -> value as canonical text, the form of
  // AttributeParam::default_value ("2", "0.5", "true"); a missing attribute
  // takes its default.
  std::vector<std::pair<std::string, std::string>> attributes;
};

struct FusedElementwiseDesc {
  DType dtype = DType::kF32;     // T of every step
  int num_inputs = 0;            // tensors the fused operator reads: in0..in{n-1}
  std::vector<FusedStep> steps;  // the last step's output is the output `out`
};

// The fused operator of `desc`:
//  - name kFusedOperatorPrefix + 16 hex digits of a content hash of
//    everything that determines its code (each constituent's name, version,
//    code and code location, the operands, literals and attributes, dtype),
//    so a new version or body of a constituent gives a new name;
//  - version 1.0.0, kind elementwise, dtypes {desc.dtype}, inputs in0..,
//    output `out`, no attributes, no tests;
//  - description "fused: mul(in0, 0.999) -> add(s0, 0.001, alpha=2) -> ..."
//    (sN is step N's output);
//  - location, device_code and body in the virtual file "fused:<name>",
//    whose lines are device_code's from 1, then body's;
//  - device_code: per distinct constituent (name, version) a namespace
//    `fz_<name>_v<M>_<m>_<p>` holding its device_code and its body as
//    `gpuos_body(...)` with the parameters GenerateOperatorSource gives it;
//  - body: one `compute_t sN` per step, then `out = s<last>;`.
// The result passes ValidateOperator and GenerateOperatorSource.
//
// Errors (InvalidArgument naming the step, its operator and the problem): no
// steps; num_inputs < 1 or num_inputs + 1 > kMaxOperatorTensors; a null op;
// an op that is not elementwise, has out_dtypes, a tensor of fixed dtype or
// of type variable U, not exactly one output, or does not list desc.dtype;
// an op that GenerateOperatorSource would refuse; two different specs with
// one (name, version); an operand count that differs from the op's inputs;
// an input index outside [0, num_inputs); a step operand that is not an
// earlier step; a literal that is not a number of T (not finite, not an
// integer for an integer T, out of T's range); an attribute that is unknown,
// given twice, missing without a default, or not of its type; an input that
// no step reads.
Expected<OperatorSpec> FuseElementwise(const FusedElementwiseDesc& desc);

}  // namespace gpuos::registry
