// The in-memory model of an operator pack, as described in
// docs/operator-packs.md. The pack loader produces it from YAML; the
// repository stores it as canonical JSON (operator_spec_json.h); the JIT build
// service generates device code from it.
//
// Values; no invariants beyond those the loader validates (see
// pack_loader.h). Code built by hand (tests, tools) should run
// ValidateOperator() before handing a spec on.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuos/dtype.h"
#include "gpuos/status.h"

namespace gpuos::registry {

// Semantic version MAJOR.MINOR.PATCH (no pre-release or build suffixes).
struct SemVer {
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  std::uint32_t patch = 0;

  auto operator<=>(const SemVer&) const = default;
  std::string ToString() const;
  // Accepts exactly "N.N.N" with decimal numbers without leading zeros.
  static Expected<SemVer> Parse(const std::string& text);
};

// Where something came from in a pack file. line and column are 1-based;
// 0 means unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  std::string ToString() const;  // "file:line:column"
};

enum class OperatorKind { kElementwise, kReduction, kCustom };
const char* OperatorKindName(OperatorKind kind);  // "elementwise", ...
std::optional<OperatorKind> ParseOperatorKind(const std::string& name);

// Scalar attribute types.
enum class AttributeType { kF32, kF64, kI32, kI64, kBool };
const char* AttributeTypeName(AttributeType type);  // "f32", ...
std::optional<AttributeType> ParseAttributeType(const std::string& name);

// Which type variable a tensor without a fixed dtype follows: `T` (the
// instantiations of OperatorSpec::dtypes) or `U` (those of
// OperatorSpec::out_dtypes, for operators such as cast that instantiate over
// pairs of types).
enum class TypeVariable { kT, kU };

// An input or output tensor. `dtype` is either a type variable (nullopt,
// written `T` or `U` in YAML; `type_variable` says which) or a fixed dtype (a
// comparison's bool output).
struct TensorParam {
  std::string name;
  std::optional<DType> dtype;
  std::string description;
  TypeVariable type_variable = TypeVariable::kT;  // meaningful when !dtype
};

struct AttributeParam {
  std::string name;
  AttributeType type = AttributeType::kF64;
  // Canonical text of the default ("1", "0.5", "true"); nullopt = required.
  std::optional<std::string> default_value;
  std::string description;
};

// A block of CUDA C++ from the pack with the place its first line came from,
// so compile errors can point back at the YAML.
struct CodeBlock {
  std::string code;
  SourceLocation location;  // location of the first line of `code`

  bool empty() const { return code.empty(); }
};

// The four pieces of a reduction (docs/operator-packs.md, "Reductions").
struct ReductionCode {
  std::string accumulator;  // C++ type of `acc`; empty = compute_t
  CodeBlock init;           // sets acc to the identity
  CodeBlock step;           // folds element `x` (index `index`) into acc
  CodeBlock merge;          // folds partial `other` into acc
  CodeBlock finish;         // writes out from acc and `count`; empty = out = acc
};

// One optional test case: small literal inputs and expected outputs.
struct OperatorTest {
  std::string name;
  DType dtype = DType::kF32;  // instantiation of T
  // Instantiation of U; set exactly when the operator has out_dtypes.
  std::optional<DType> out_dtype;
  // Each tensor as a flat list of numbers with a shape (empty = 1-D).
  struct Tensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<double> values;
  };
  std::vector<Tensor> inputs;
  std::vector<Tensor> expected;
  // name -> canonical text, like AttributeParam::default_value.
  std::vector<std::pair<std::string, std::string>> attributes;
  double tolerance = 0.0;  // absolute+relative; 0 = exact
  SourceLocation location;
};

struct OperatorSpec {
  std::string name;  // [a-z][a-z0-9_]*, unique across the repository
  SemVer version;
  OperatorKind kind = OperatorKind::kElementwise;
  std::string description;
  std::vector<DType> dtypes;  // instantiations of the type variable T
  // Instantiations of the second type variable U; empty when the operator has
  // none. With U the operator is instantiated for every pair in
  // dtypes x out_dtypes.
  std::vector<DType> out_dtypes;
  std::vector<TensorParam> inputs;
  std::vector<TensorParam> outputs;
  std::vector<AttributeParam> attributes;
  CodeBlock device_code;    // optional helpers placed before the body
  CodeBlock body;           // elementwise and custom kinds
  ReductionCode reduction;  // reduction kind
  std::vector<OperatorTest> tests;
  SourceLocation location;  // the operator's entry in the pack
};

struct OperatorPack {
  int format = 1;    // `gpuos_pack:` format version
  std::string name;  // [a-z][a-z0-9_.-]*
  SemVer version;
  std::string description;
  std::vector<OperatorSpec> operators;
  std::string source_path;  // file it was loaded from ("<memory>" if none)
  std::string source_text;  // the YAML exactly as read
};

// Checks the rules the loader enforces that do not depend on YAML: names,
// non-empty dtypes, code present for the kind, unique parameter names,
// defaults parse as their type. Errors name the operator and the field.
Status ValidateOperator(const OperatorSpec& spec);

}  // namespace gpuos::registry
