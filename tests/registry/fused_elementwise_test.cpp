// FuseElementwise: fused specs that validate, generate and compile with the
// real NVRTC (no GPU), deterministic names, and every refusal.
#include "gpuos/registry/fused_elementwise.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gpuos/registry/codegen.h"
#include "jit_test_util.h"

namespace gpuos::registry {
namespace {

using testing::BuiltinOperators;
using testing::ParseOperators;
using testing::TestOptions;
using Operand = FusedOperand;

// Operators with device_code (both define `helper`), attributes of every
// type, two outputs, and a body that does not compile.
const char* kTestPackYaml = R"(gpuos_pack: 1
name: test.fusion
version: 1.0.0
operators:
  - name: twice
    version: 1.0.0
    kind: elementwise
    dtypes: [f32, f16, bf16, f64]
    inputs: [{name: a}]
    outputs: [{name: out}]
    device_code: |
      __device__ inline compute_t helper(compute_t v) { return v * compute_t(2); }
    body: |
      out = helper(a);
  - name: plus_one
    version: 1.0.0
    kind: elementwise
    dtypes: [f32, f16, bf16, f64]
    inputs: [{name: a}]
    outputs: [{name: out}]
    device_code: |
      struct Offset { compute_t value; };
      __device__ inline compute_t helper(compute_t v) { return v + Offset{compute_t(1)}.value; }
    body: |
      out = helper(a);
  - name: tuned
    version: 1.0.0
    kind: elementwise
    dtypes: [f32, f64, i32]
    inputs: [{name: a}]
    outputs: [{name: out}]
    attributes:
      - {name: k, type: i32}
      - {name: big, type: i64, default: 3}
      - {name: flag, type: bool, default: false}
      - {name: scale, type: f32, default: 0.5}
    body: |
      out = flag ? a * static_cast<compute_t>(k + big) : a * static_cast<compute_t>(scale);
  - name: split
    version: 1.0.0
    kind: elementwise
    dtypes: [f32]
    inputs: [{name: a}]
    outputs: [{name: lo}, {name: hi}]
    body: |
      lo = a; hi = a;
  - name: either
    version: 1.0.0
    kind: elementwise
    dtypes: [bool, i8, u8]
    inputs: [{name: a}, {name: b}]
    outputs: [{name: out}]
    body: |
      out = a || b;
  - name: broken
    version: 1.0.0
    kind: elementwise
    dtypes: [f32]
    inputs: [{name: a}]
    outputs: [{name: out}]
    body: |
      out = a +;
)";
constexpr int kBrokenBodyLine = 62;  // the line of `out = a +;` above

class FusedElementwiseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ops_ = new std::vector<OperatorSpec>(BuiltinOperators());
    for (OperatorSpec& op : ParseOperators(kTestPackYaml, "test_fusion.yaml")) {
      ops_->push_back(std::move(op));
    }
  }
  static void TearDownTestSuite() {
    delete ops_;
    ops_ = nullptr;
  }

  static const OperatorSpec* Op(const std::string& name) {
    return testing::FindOperatorOrFail(*ops_, name);
  }

  static FusedStep Step(const std::string& name, std::vector<Operand> operands,
                        std::vector<std::pair<std::string, std::string>> attributes = {}) {
    return FusedStep{Op(name), std::move(operands), std::move(attributes)};
  }

  // x*0.999+0.001 ... : `n` steps alternating mul and add.
  static FusedElementwiseDesc Chain(int n, DType dtype = DType::kF32) {
    FusedElementwiseDesc desc{dtype, 1, {}};
    for (int i = 0; i < n; ++i) {
      const Operand x = i == 0 ? Operand::Input(0) : Operand::Step(i - 1);
      desc.steps.push_back(i % 2 == 0 ? Step("mul", {x, Operand::Literal("0.999")})
                                      : Step("add", {x, Operand::Literal("0.001")}));
    }
    return desc;
  }

  // gelu(in0 + alpha * in1) * in2.
  static FusedElementwiseDesc Tree(DType dtype, const std::string& alpha = "1") {
    return FusedElementwiseDesc{
        dtype,
        3,
        {Step("add", {Operand::Input(0), Operand::Input(1)}, {{"alpha", alpha}}),
         Step("gelu", {Operand::Step(0)}), Step("mul", {Operand::Step(1), Operand::Input(2)})}};
  }

  static OperatorSpec FuseOrFail(const FusedElementwiseDesc& desc) {
    auto spec = FuseElementwise(desc);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    return spec.ok() ? std::move(spec).value() : OperatorSpec{};
  }

  // The spec validates, generates, and (with `compile`) compiles for sm_90.
  static void ExpectBuilds(const std::vector<OperatorSpec>& specs) {
    for (const OperatorSpec& spec : specs) {
      EXPECT_TRUE(ValidateOperator(spec).ok()) << ValidateOperator(spec).ToString();
      auto source = GenerateOperatorSource(spec);
      EXPECT_TRUE(source.ok()) << source.status().ToString();
    }
    const Status compiled = JitBuilder(nullptr, TestOptions("sm_90")).Compile(specs);
    EXPECT_TRUE(compiled.ok()) << compiled.ToString();
  }

  // The message of the refusal of `desc`, which must be InvalidArgument.
  static std::string Refusal(const FusedElementwiseDesc& desc) {
    auto spec = FuseElementwise(desc);
    EXPECT_FALSE(spec.ok()) << "fused into " << (spec.ok() ? spec->name : "");
    if (spec.ok()) return "";
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << spec.status().ToString();
    return spec.status().message();
  }

  static int Count(const std::string& text, const std::string& part) {
    int n = 0;
    for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  }

  static std::vector<OperatorSpec>* ops_;
};
std::vector<OperatorSpec>* FusedElementwiseTest::ops_ = nullptr;

// `text` (evaluated once) contains `part`.
#define EXPECT_HAS(text, part)                                           \
  do {                                                                   \
    const std::string gpuos_text_ = (text);                              \
    EXPECT_NE(gpuos_text_.find(part), std::string::npos) << gpuos_text_; \
  } while (0)

TEST_F(FusedElementwiseTest, HundredStepChainIsOneOperatorThatCompiles) {
  const OperatorSpec spec = FuseOrFail(Chain(100));
  ASSERT_EQ(spec.name.size(), kFusedOperatorPrefix.size() + 16);
  EXPECT_EQ(spec.name.rfind(kFusedOperatorPrefix, 0), 0u);
  EXPECT_EQ(spec.name.find_first_not_of("0123456789abcdef", kFusedOperatorPrefix.size()),
            std::string::npos)
      << spec.name;
  EXPECT_EQ(spec.version.ToString(), "1.0.0");
  EXPECT_EQ(spec.kind, OperatorKind::kElementwise);
  EXPECT_EQ(spec.dtypes, std::vector<DType>{DType::kF32});
  ASSERT_EQ(spec.inputs.size(), 1u);
  EXPECT_EQ(spec.inputs[0].name, "in0");
  ASSERT_EQ(spec.outputs.size(), 1u);
  EXPECT_EQ(spec.outputs[0].name, "out");
  EXPECT_TRUE(spec.attributes.empty());
  EXPECT_EQ(spec.location.file, "fused:" + spec.name);
  EXPECT_EQ(spec.description.rfind("fused: mul(in0, 0.999) -> add(s0, 0.001) -> mul(s1, 0.999)", 0),
            0u)
      << spec.description;
  EXPECT_HAS(spec.description, "-> add(s98, 0.001)");
  // Each distinct operator's code once, one call per step.
  EXPECT_EQ(Count(spec.device_code.code, "namespace fz_mul_v1_0_0 {"), 1);
  EXPECT_EQ(Count(spec.device_code.code, "namespace fz_add_v1_0_0 {"), 1);
  EXPECT_EQ(Count(spec.device_code.code, "out = a * b;"), 1);
  EXPECT_EQ(Count(spec.body.code, "fz_mul_v1_0_0::gpuos_body("), 50);
  EXPECT_EQ(Count(spec.body.code, "fz_add_v1_0_0::gpuos_body("), 50);
  EXPECT_HAS(spec.body.code,
             "fz_mul_v1_0_0::gpuos_body(in0, ::gpuos::device::convert<compute_t>("
             "::gpuos::device::convert<T>(0.999)), s0);");
  EXPECT_HAS(spec.body.code,
             "fz_add_v1_0_0::gpuos_body(s98, ::gpuos::device::convert<compute_t>("
             "::gpuos::device::convert<T>(0.001)), s99, static_cast<double>(1.0));");
  EXPECT_HAS(spec.body.code, "\nout = s99;\n");
  ExpectBuilds({spec});
}

TEST_F(FusedElementwiseTest, LineDirectivesPointAtThePacksAndTheVirtualFile) {
  const OperatorSpec spec = FuseOrFail(Tree(DType::kF16));
  const OperatorSpec* add = Op("add");
  ASSERT_NE(add, nullptr);
  EXPECT_HAS(spec.device_code.code, "#line " + std::to_string(add->body.location.line) +
                                        " \"operators/std_elementwise.yaml@T=f16\"\n" +
                                        add->body.code);
  // Every directive back to the virtual file names the line after it, so
  // device_code lines are lines of "fused:<name>" from 1, then the body's.
  std::istringstream lines(spec.device_code.code);
  std::string line;
  int number = 0;
  int restores = 0;
  const std::string restore = "\"fused:" + spec.name + "@T=f16\"";
  while (std::getline(lines, line)) {
    ++number;
    if (line.rfind("#line ", 0) == 0 && line.find(restore) != std::string::npos) {
      EXPECT_EQ(line, "#line " + std::to_string(number + 1) + " " + restore);
      ++restores;
    }
  }
  EXPECT_EQ(restores, 3);  // after the bodies of add, gelu, mul
  EXPECT_EQ(spec.device_code.location.line, 1);
  EXPECT_EQ(spec.body.location.line, number + 1);
  EXPECT_EQ(spec.body.location.file, spec.location.file);

  // A compile error points at the constituent's pack line.
  FusedElementwiseDesc desc{DType::kF32, 1, {Step("broken", {Operand::Input(0)})}};
  const OperatorSpec broken = FuseOrFail(desc);
  const Status compiled = JitBuilder(nullptr, TestOptions("sm_90")).Compile({broken});
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.code(), StatusCode::kCompileError);
  EXPECT_HAS(compiled.message(), "test_fusion.yaml:" + std::to_string(kBrokenBodyLine) + ":");
}

TEST_F(FusedElementwiseTest, TreesOfThreeInputsCompileInEveryFloatType) {
  std::vector<OperatorSpec> specs;
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kF32}) {
    specs.push_back(FuseOrFail(Tree(dtype, dtype == DType::kF32 ? "1" : "2")));
  }
  for (const OperatorSpec& spec : specs) {
    ASSERT_EQ(spec.inputs.size(), 3u);
    EXPECT_HAS(spec.body.code, "fz_add_v1_0_0::gpuos_body(in0, in1, s0, ");
    EXPECT_HAS(spec.body.code, "fz_gelu_v1_0_0::gpuos_body(s0, s1);");
    EXPECT_HAS(spec.body.code, "fz_mul_v1_0_0::gpuos_body(s1, in2, s2);");
  }
  EXPECT_HAS(specs[0].body.code, "static_cast<double>(2.0));");
  EXPECT_HAS(specs[0].description, "add(in0, in1, alpha=2) -> gelu(s0) -> mul(s1, in2)");
  EXPECT_EQ(specs[2].description, "fused: add(in0, in1) -> gelu(s0) -> mul(s1, in2)");
  EXPECT_NE(specs[0].name, specs[1].name);
  ExpectBuilds(specs);
}

TEST_F(FusedElementwiseTest, DeviceCodeHelpersAndAttributesOfEveryType) {
  FusedElementwiseDesc desc{
      DType::kF64,
      2,
      {Step("twice", {Operand::Input(0)}), Step("plus_one", {Operand::Step(0)}),
       Step("tuned", {Operand::Step(1)}, {{"k", "-4"}, {"flag", "true"}, {"scale", "+0.25"}}),
       Step("gelu_tanh", {Operand::Step(2)}),
       Step("clamp", {Operand::Step(3)}, {{"lo", "-1"}, {"hi", "1e3"}}),
       Step("twice", {Operand::Step(4)}), Step("pow", {Operand::Step(5), Operand::Input(1)})}};
  const OperatorSpec spec = FuseOrFail(desc);
  EXPECT_EQ(Count(spec.device_code.code, "namespace fz_twice_v1_0_0 {"), 1);
  EXPECT_EQ(Count(spec.device_code.code, "__device__ inline compute_t helper("), 2);
  EXPECT_HAS(spec.body.code,
             "fz_tuned_v1_0_0::gpuos_body(s1, s2, static_cast<int>(-4LL), "
             "static_cast<long long>(3LL), true, static_cast<float>(0.25));");
  EXPECT_HAS(spec.body.code, "s4, static_cast<double>(-1.0), static_cast<double>(1000.0));");
  EXPECT_HAS(spec.description, "tuned(s1, k=-4, flag=true, scale=0.25)");
  ExpectBuilds({spec});
}

TEST_F(FusedElementwiseTest, EveryStandardElementwiseOperatorOfTypeTFusesIntoOneSpec) {
  FusedElementwiseDesc desc{DType::kF32, 2, {}};
  std::set<std::string> names;
  for (const OperatorSpec& op : *ops_) {
    bool all_t = op.kind == OperatorKind::kElementwise && op.out_dtypes.empty() &&
                 op.outputs.size() == 1 && op.location.file.rfind("operators/", 0) == 0;
    for (const auto* params : {&op.inputs, &op.outputs}) {
      for (const TensorParam& p : *params) all_t = all_t && !p.dtype;
    }
    bool f32 = false;
    for (DType d : op.dtypes) f32 = f32 || d == DType::kF32;
    if (!all_t || !f32) continue;
    FusedStep step{&op, {}, {}};
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      const int n = static_cast<int>(desc.steps.size());
      step.operands.push_back(k == 0   ? (n == 0 ? Operand::Input(0) : Operand::Step(n - 1))
                              : k == 1 ? Operand::Input(1)
                                       : Operand::Literal("2"));
    }
    for (const AttributeParam& a : op.attributes) {
      if (!a.default_value) step.attributes.emplace_back(a.name, "1");
    }
    desc.steps.push_back(std::move(step));
    names.insert(op.name);
  }
  for (const char* name : {"add", "mul", "gelu", "gelu_tanh", "clamp", "copy", "erf", "sign"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
  EXPECT_EQ(names.count("eq"), 0u);    // bool output
  EXPECT_EQ(names.count("cast"), 0u);  // U
  ASSERT_GE(desc.steps.size(), 25u);
  const OperatorSpec spec = FuseOrFail(desc);
  for (const std::string& name : names) {
    EXPECT_EQ(Count(spec.device_code.code, "namespace fz_" + name + "_v1_0_0 {"), 1) << name;
  }
  ExpectBuilds({spec});
}

TEST_F(FusedElementwiseTest, LiteralsAreSpelledExactlyForEveryType) {
  // The literal's C++ spelling inside convert<T>(...).
  auto literal_of = [&](DType dtype, const std::string& text) {
    const bool small = dtype == DType::kBool || dtype == DType::kI8 || dtype == DType::kU8;
    const FusedElementwiseDesc desc{
        dtype, 1, {Step(small ? "either" : "mul", {Operand::Input(0), Operand::Literal(text)})}};
    const OperatorSpec spec = FuseOrFail(desc);
    const std::string open = "convert<T>(";
    const auto at = spec.body.code.find(open);
    if (at == std::string::npos) return std::string("<none>");
    return spec.body.code.substr(at + open.size(), spec.body.code.find(')', at) - at - open.size());
  };
  EXPECT_EQ(literal_of(DType::kF32, "1"), "1.0");
  EXPECT_EQ(literal_of(DType::kF32, "-3"), "-3.0");
  EXPECT_EQ(literal_of(DType::kF64, "0.1"), "0.1");
  EXPECT_EQ(literal_of(DType::kF64, "1e-05"), "1e-05");
  EXPECT_EQ(literal_of(DType::kF16, "+2.5"), "2.5");
  EXPECT_EQ(literal_of(DType::kBF16, "-0.0"), "-0.0");  // the sign of zero matters
  EXPECT_EQ(literal_of(DType::kI32, "-3"), "-3LL");
  EXPECT_EQ(literal_of(DType::kI64, "-9223372036854775808"), "(-9223372036854775807LL - 1");
  EXPECT_EQ(literal_of(DType::kI64, "007"), "7LL");  // never an octal literal
  EXPECT_EQ(literal_of(DType::kI8, "-128"), "-128LL");
  EXPECT_EQ(literal_of(DType::kU8, "255"), "255LL");
  EXPECT_EQ(literal_of(DType::kBool, "1"), "true");
  EXPECT_EQ(literal_of(DType::kBool, "0"), "false");
}

TEST_F(FusedElementwiseTest, NameIsDeterministicAndFollowsEveryInput) {
  const OperatorSpec base = FuseOrFail(Tree(DType::kF32));
  const OperatorSpec again = FuseOrFail(Tree(DType::kF32));
  EXPECT_EQ(base.name, again.name);
  EXPECT_EQ(base.description, again.description);
  EXPECT_EQ(base.device_code.code, again.device_code.code);
  EXPECT_EQ(base.body.code, again.body.code);
  EXPECT_EQ(base.body.location.line, again.body.location.line);
  EXPECT_EQ(GenerateOperatorSource(base)->source, GenerateOperatorSource(again)->source);
  // Giving the default is leaving it out.
  FusedElementwiseDesc defaulted = Tree(DType::kF32);
  defaulted.steps[0].attributes.clear();
  EXPECT_EQ(FuseOrFail(defaulted).name, base.name);

  std::vector<std::string> names = {base.name};
  names.push_back(FuseOrFail(Tree(DType::kF32, "3")).name);  // attribute
  names.push_back(FuseOrFail(Tree(DType::kF64)).name);       // dtype
  FusedElementwiseDesc literal = Tree(DType::kF32);
  literal.steps[2].operands[1] = Operand::Literal("0.5");  // literal instead of an input
  literal.num_inputs = 2;
  names.push_back(FuseOrFail(literal).name);
  FusedElementwiseDesc other_literal = literal;
  other_literal.steps[2].operands[1] = Operand::Literal("0.25");  // another literal
  names.push_back(FuseOrFail(other_literal).name);
  FusedElementwiseDesc swapped = Tree(DType::kF32);
  std::swap(swapped.steps[0].operands[0], swapped.steps[0].operands[1]);  // operand order
  names.push_back(FuseOrFail(swapped).name);
  FusedElementwiseDesc order = Chain(2);
  names.push_back(FuseOrFail(order).name);
  std::swap(order.steps[0].op, order.steps[1].op);  // op order: add then mul
  names.push_back(FuseOrFail(order).name);

  OperatorSpec new_version = *Op("gelu");
  new_version.version = SemVer{1, 0, 1};
  FusedElementwiseDesc versioned = Tree(DType::kF32);
  versioned.steps[1].op = &new_version;
  const OperatorSpec versioned_spec = FuseOrFail(versioned);
  EXPECT_HAS(versioned_spec.device_code.code, "namespace fz_gelu_v1_0_1 {");
  names.push_back(versioned_spec.name);

  OperatorSpec new_body = *Op("gelu");
  new_body.body.code = "out = a;\n";
  FusedElementwiseDesc rebodied = Tree(DType::kF32);
  rebodied.steps[1].op = &new_body;
  names.push_back(FuseOrFail(rebodied).name);

  const std::set<std::string> distinct(names.begin(), names.end());
  EXPECT_EQ(distinct.size(), names.size()) << ::testing::PrintToString(names);
}

TEST_F(FusedElementwiseTest, RefusesDescriptionsItCannotFuse) {
  using D = FusedElementwiseDesc;
  const Operand in0 = Operand::Input(0);
  EXPECT_HAS(Refusal(D{DType::kF32, 1, {}}), "no steps");
  for (int n : {0, 8}) {
    const std::string m = Refusal(D{DType::kF32, n, {Step("neg", {in0})}});
    EXPECT_HAS(m, "num_inputs = " + std::to_string(n));
    EXPECT_HAS(m, "1 to 7 inputs");
  }
  EXPECT_HAS(Refusal(D{DType::kF32, 1, {Step("neg", {in0}), FusedStep{}}}), "step 1: no operator");
  std::string m = Refusal(D{DType::kF32, 1, {Step("neg", {in0}), Step("sum", {Operand::Step(0)})}});
  EXPECT_HAS(m, "step 1 (sum 1.0.0)");
  EXPECT_HAS(m, "a reduction operator cannot be fused");
  EXPECT_HAS(Refusal(D{DType::kF32, 1, {Step("cast", {in0})}}),
             "step 0 (cast 1.0.0): the operator "
             "has a second type variable U");
  m = Refusal(D{DType::kF32, 2, {Step("eq", {in0, Operand::Input(1)})}});
  EXPECT_HAS(m, "step 0 (eq 1.0.0): tensor 'out' has the fixed dtype bool");
  m = Refusal(D{DType::kF32, 2, {Step("where", {Operand::Literal("1"), in0, Operand::Input(1)})}});
  EXPECT_HAS(m, "tensor 'cond' has the fixed dtype bool");
  OperatorSpec follows_u = *Op("neg");
  follows_u.outputs[0].type_variable = TypeVariable::kU;
  EXPECT_HAS(Refusal(D{DType::kF32, 1, {FusedStep{&follows_u, {in0}, {}}}}),
             "step 0 (neg 1.0.0): tensor 'out' follows U");
  m = Refusal(D{DType::kI32, 2, {Step("div", {in0, Operand::Input(1)})}});
  EXPECT_HAS(m, "step 0 (div 1.0.0): the operator is not instantiated for i32");
  EXPECT_HAS(m, "(its dtypes: f32, f16, bf16, f64)");
  EXPECT_HAS(Refusal(D{DType::kF32, 1, {Step("split", {in0})}}),
             "step 0 (split 1.0.0): the operator has 2 outputs; a fused step has exactly one");
  OperatorSpec reserved = *Op("neg");
  reserved.inputs[0].name = "compute_t";
  EXPECT_HAS(Refusal(D{DType::kF32, 1, {FusedStep{&reserved, {in0}, {}}}}),
             "step 0 (neg 1.0.0): operator 'neg' 1.0.0 (operators/std_elementwise.yaml");
  OperatorSpec other_mul = *Op("mul");
  other_mul.body.code = "out = b * a;\n";
  m = Refusal(D{DType::kF32,
                1,
                {Step("mul", {in0, in0}), FusedStep{&other_mul, {Operand::Step(0), in0}, {}}}});
  EXPECT_HAS(m, "step 1 (mul 1.0.0): another step uses a different operator with the same name");

  // Operands.
  m = Refusal(D{DType::kF32, 1, {Step("mul", {in0})}});
  EXPECT_HAS(m, "step 0 (mul 1.0.0): 1 operands given, the operator has 2 inputs (a, b)");
  for (int index : {-1, 2}) {
    m = Refusal(D{DType::kF32, 2, {Step("mul", {in0, Operand::Input(index)})}});
    EXPECT_HAS(m, "step 0 (mul 1.0.0): operand 1 (b): input " + std::to_string(index) +
                      " is outside [0, 2)");
  }
  for (int index : {1, 2, -1}) {
    m = Refusal(D{DType::kF32, 1, {Step("neg", {in0}), Step("neg", {Operand::Step(index)})}});
    EXPECT_HAS(m, "step 1 (neg 1.0.0): operand 0 (a): step " + std::to_string(index) +
                      " is not an earlier step");
  }
  EXPECT_HAS(Refusal(D{DType::kF32, 3, {Step("mul", {in0, Operand::Input(2)})}}),
             "input 1 (in1) is read by no step");
  struct Bad {
    DType dtype;
    const char* text;
  };
  for (const Bad& bad : {Bad{DType::kF32, "abc"}, Bad{DType::kF32, "nan"}, Bad{DType::kF32, "inf"},
                         Bad{DType::kF64, "1e400"}, Bad{DType::kF32, ""}, Bad{DType::kF32, "0x10"},
                         Bad{DType::kF32, "1 "}, Bad{DType::kF32, "1;x"}, Bad{DType::kI32, "0.5"},
                         Bad{DType::kI32, "2147483648"}, Bad{DType::kI8, "128"},
                         Bad{DType::kU8, "-1"}, Bad{DType::kBool, "2"}}) {
    const bool small =
        bad.dtype == DType::kBool || bad.dtype == DType::kI8 || bad.dtype == DType::kU8;
    const std::string op = small ? "either" : "mul";
    m = Refusal(D{bad.dtype, 1, {Step(op, {in0, Operand::Literal(bad.text)})}});
    EXPECT_HAS(m, "step 0 (" + op + " 1.0.0): operand 1 (b): literal '" + bad.text +
                      "' is not a number of T = " + DTypeName(bad.dtype));
  }

  // Attributes.
  const Operand in1 = Operand::Input(1);
  m = Refusal(D{DType::kF32, 2, {Step("add", {in0, in1}, {{"beta", "1"}})}});
  EXPECT_HAS(m, "step 0 (add 1.0.0): unknown attribute 'beta' (declared: alpha)");
  EXPECT_HAS(Refusal(D{DType::kF32, 2, {Step("mul", {in0, in1}, {{"alpha", "1"}})}}),
             "unknown attribute 'alpha' (declared: none)");
  EXPECT_HAS(
      Refusal(D{DType::kF32, 2, {Step("add", {in0, in1}, {{"alpha", "1"}, {"alpha", "2"}})}}),
      "step 0 (add 1.0.0): attribute 'alpha' is given twice");
  EXPECT_HAS(Refusal(D{DType::kF32, 1, {Step("clamp", {in0}, {{"lo", "0"}})}}),
             "step 0 (clamp 1.0.0): attribute 'hi' has no default and was not given");
  EXPECT_HAS(Refusal(D{DType::kF32, 2, {Step("add", {in0, in1}, {{"alpha", "two"}})}}),
             "step 0 (add 1.0.0): attribute 'alpha' (f64): 'two' is not a finite number");
  EXPECT_HAS(Refusal(D{DType::kF32, 1, {Step("tuned", {in0}, {{"k", "1"}, {"flag", "1"}})}}),
             "attribute 'flag' (bool): '1' is not a bool; write true or false");
  EXPECT_HAS(Refusal(D{DType::kF32, 1, {Step("tuned", {in0}, {{"k", "3000000000"}})}}),
             "attribute 'k' (i32): '3000000000' is not a decimal integer in");
  EXPECT_HAS(Refusal(D{DType::kF32, 1, {Step("tuned", {in0}, {{"k", "1"}, {"scale", "1e39"}})}}),
             "attribute 'scale' (f32): '1e39' is not a finite number in range");
}

}  // namespace
}  // namespace gpuos::registry
