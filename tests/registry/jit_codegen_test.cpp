// Code generation: symbol names, per-dtype instantiation, #line directives,
// the operator table, attribute slots. No compiler runs here.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "gpuos/registry/codegen.h"
#include "jit_test_util.h"

namespace gpuos::registry {
namespace {

using testing::ParseOperators;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

int CountOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

constexpr const char* kPack = R"(gpuos_pack: 1
name: test.codegen
version: 1.0.0
operators:
  - name: scale_add
    version: 1.2.3
    kind: elementwise
    dtypes: [f32, f16, i32]
    inputs:
      - name: a
      - {name: keep, dtype: bool}
    outputs:
      - name: out
    attributes:
      - {name: alpha, type: f32, default: 1.5}
      - {name: shift, type: i64, default: 3}
    device_code: |
      __device__ inline compute_t twice(compute_t v) { return v + v; }
    body: |
      out = keep ? twice(a) * static_cast<compute_t>(alpha) : static_cast<compute_t>(shift);
  - name: total
    version: 2.0.0
    kind: reduction
    dtypes: [f64]
    inputs: [{name: a}]
    outputs: [{name: result}]
    reduce:
      accumulator: double
      init: acc = 0;
      step: acc += x;
      merge: acc += other;
  - name: copy_rows
    version: 1.0.0
    kind: custom
    dtypes: [f32]
    inputs: [{name: src}]
    outputs: [{name: dst}]
    body: |
      ctx.for_each([&](long long i) { dst[i] = src[i]; });
)";

TEST(JitCodegenTest, SymbolIsDeterministicAndLengthPrefixed) {
  EXPECT_EQ(OperatorSymbol("add", SemVer{1, 2, 3}, DType::kF16), "gpuos_op_3add_v1_2_3_f16");
  EXPECT_EQ(OperatorProgramName("add", SemVer{1, 2, 3}), "gpuos_op_3add_v1_2_3.cu");
  // Without the length prefix these two would collide.
  EXPECT_NE(OperatorSymbol("a_v1_0_0_f32", SemVer{1, 0, 0}, DType::kF32),
            OperatorSymbol("a", SemVer{1, 0, 0}, DType::kF32) + "_v1_0_0_f32");
  EXPECT_NE(OperatorSymbol("add", SemVer{1, 0, 0}, DType::kF32),
            OperatorSymbol("add", SemVer{1, 0, 1}, DType::kF32));
}

TEST(JitCodegenTest, ElementwiseHasOneEntryPointPerDtype) {
  auto ops = ParseOperators(kPack, "packs/codegen.yaml");
  ASSERT_EQ(ops.size(), 3u);
  auto source = GenerateOperatorSource(ops[0]);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->program_name, "gpuos_op_9scale_add_v1_2_3.cu");
  const std::string& s = source->source;
  EXPECT_NE(s.find("#include \"gpuos/device/gpuos.cuh\""), std::string::npos);
  for (const char* dtype : {"f32", "f16", "i32"}) {
    const std::string symbol = std::string("gpuos_op_9scale_add_v1_2_3_") + dtype;
    EXPECT_EQ(CountOf(s, "extern \"C\" __device__ void " + symbol + "("), 1) << symbol;
    // Defined under the operators' calling convention (op_call.cuh), as the
    // table declares them and the workers call them.
    EXPECT_EQ(CountOf(s, "GPUOS_OPERATOR_ABI\nextern \"C\" __device__ void " + symbol + "("), 1)
        << symbol;
  }
  EXPECT_EQ(CountOf(s, "extern \"C\" __device__ void "), 3);
  EXPECT_NE(s.find("using T = float;"), std::string::npos);
  EXPECT_NE(s.find("using T = __half;"), std::string::npos);
  EXPECT_NE(s.find("using T = int;"), std::string::npos);
  // Inputs are const compute-type values, outputs references, attributes typed.
  EXPECT_NE(s.find("gpuos_body(const compute_t a, const ::gpuos::device::compute_type_t<bool> "
                   "keep, compute_t& out, const float alpha, const long long shift)"),
            std::string::npos)
      << s;
  // The fixed-dtype input is checked as bool, the others as the instantiation.
  EXPECT_NE(s.find("{::gpuos::device::kDTypeF16, ::gpuos::device::kDTypeBool, "
                   "::gpuos::device::kDTypeF16}"),
            std::string::npos);
  EXPECT_NE(s.find("static_cast<float>(task.scalars[0].f64)"), std::string::npos);
  EXPECT_NE(s.find("task.scalars[1].i64"), std::string::npos);
  EXPECT_NE(s.find("tile.dense()"), std::string::npos);
  EXPECT_NE(s.find("tile.offsets(i, at);"), std::string::npos);
}

TEST(JitCodegenTest, LineDirectivesPointAtThePackAndBack) {
  auto ops = ParseOperators(kPack, "packs/codegen.yaml");
  ASSERT_EQ(ops.size(), 3u);
  const OperatorSpec& op = ops[0];
  ASSERT_GT(op.body.location.line, 0);
  auto source = GenerateOperatorSource(op);
  ASSERT_TRUE(source.ok());
  const std::vector<std::string> lines = Lines(source->source);
  int pack_directives = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.rfind("#line ", 0) != 0) continue;
    const int number = std::stoi(line.substr(6));
    if (line.find("\"packs/codegen.yaml@T=") != std::string::npos) {
      ++pack_directives;
      ASSERT_LT(i + 1, lines.size());
      if (number == op.body.location.line) {
        EXPECT_EQ(lines[i + 1], op.body.code.substr(0, op.body.code.find('\n')));
      } else {
        EXPECT_EQ(number, op.device_code.location.line) << line;
        EXPECT_EQ(lines[i + 1], op.device_code.code.substr(0, op.device_code.code.find('\n')));
      }
    } else {
      // A directive back to the generated file names its own next line.
      EXPECT_NE(line.find("\"" + source->program_name + "@T="), std::string::npos) << line;
      EXPECT_EQ(number, static_cast<int>(i) + 2) << line;
    }
  }
  EXPECT_EQ(pack_directives, 6);  // (device_code + body) x 3 dtypes
}

TEST(JitCodegenTest, ReductionAndCustomShapes) {
  auto ops = ParseOperators(kPack, "packs/codegen.yaml");
  ASSERT_EQ(ops.size(), 3u);
  auto reduction = GenerateOperatorSource(ops[1]);
  ASSERT_TRUE(reduction.ok()) << reduction.status().ToString();
  const std::string& r = reduction->source;
  EXPECT_NE(r.find("using acc_t = double;"), std::string::npos);
  EXPECT_NE(r.find("struct Reducer {"), std::string::npos);
  EXPECT_NE(r.find("step(acc_t& acc, const compute_t x, const long long index)"),
            std::string::npos);
  // No finish block: the output (named result) takes the accumulator.
  EXPECT_NE(r.find("finish(out_compute& result, acc_t acc, const long long count)"),
            std::string::npos);
  EXPECT_NE(r.find("    result = acc;"), std::string::npos);
  EXPECT_NE(r.find("::gpuos::device::RunReduction<T, T>(call, reducer);"), std::string::npos);

  auto custom = GenerateOperatorSource(ops[2]);
  ASSERT_TRUE(custom.ok()) << custom.status().ToString();
  EXPECT_NE(custom->source.find("gpuos_run(const ::gpuos::OpContext& ctx, const "
                                "::gpuos::TensorAccessor<const T> src, const "
                                "::gpuos::TensorAccessor<T> dst)"),
            std::string::npos)
      << custom->source;
  EXPECT_NE(custom->source.find("ctx.input<T>(0), ctx.output<T>(0)"), std::string::npos);
}

TEST(JitCodegenTest, OutputIsByteIdenticalForEqualInput) {
  auto ops = ParseOperators(kPack, "packs/codegen.yaml");
  ASSERT_EQ(ops.size(), 3u);
  auto first = GenerateOperatorSource(ops[0]);
  auto second = GenerateOperatorSource(ops[0]);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->source, second->source);
}

TEST(JitCodegenTest, RefusesWhatTheAbiCannotCarry) {
  auto ops = ParseOperators(kPack, "packs/codegen.yaml");
  ASSERT_EQ(ops.size(), 3u);
  OperatorSpec reserved = ops[0];
  reserved.inputs[0].name = "compute_t";
  auto status = GenerateOperatorSource(reserved).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'compute_t' is reserved"), std::string::npos);
  EXPECT_NE(status.message().find("scale_add"), std::string::npos);

  // `x` is the element of a reduction: an output or attribute may not take
  // the name, the (never named) input may, and so may any elementwise input.
  OperatorSpec reduction = ops[1];
  reduction.outputs[0].name = "x";
  EXPECT_EQ(GenerateOperatorSource(reduction).status().code(), StatusCode::kInvalidArgument);
  reduction = ops[1];
  reduction.attributes.push_back({"count", AttributeType::kI32, std::string("1")});
  EXPECT_EQ(GenerateOperatorSource(reduction).status().code(), StatusCode::kInvalidArgument);
  reduction = ops[1];
  reduction.inputs[0].name = "x";
  EXPECT_TRUE(GenerateOperatorSource(reduction).ok());
  OperatorSpec elementwise = ops[0];
  elementwise.inputs[0].name = "x";
  EXPECT_TRUE(GenerateOperatorSource(elementwise).ok());

  OperatorSpec many = ops[0];
  for (int i = 0; i < 5; ++i) many.attributes.push_back({"extra" + std::to_string(i)});
  status = GenerateOperatorSource(many).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("at most 6"), std::string::npos);

  OperatorSpec wide = ops[0];
  for (int i = 0; i < 7; ++i) wide.inputs.push_back({"in" + std::to_string(i)});
  EXPECT_NE(GenerateOperatorSource(wide).status().message().find("at most 8"), std::string::npos);
}

TEST(JitCodegenTest, BlocksWithoutLocationGetNoDirectives) {
  OperatorSpec spec;
  spec.name = "plain";
  spec.version = SemVer{1, 0, 0};
  spec.dtypes = {DType::kF32};
  spec.inputs = {{"a"}};
  spec.outputs = {{"out"}};
  spec.body.code = "out = a;\n";
  auto source = GenerateOperatorSource(spec);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->source.find("#line"), std::string::npos);
  EXPECT_NE(source->source.find("out = a;"), std::string::npos);
}

TEST(JitCodegenTest, SlotsAreIndependentOfInputOrderAndKeepTwoVersions) {
  auto ops = ParseOperators(kPack, "packs/codegen.yaml");
  ASSERT_EQ(ops.size(), 3u);
  OperatorSpec older = ops[1];
  older.version = SemVer{1, 0, 0};
  const std::vector<const OperatorSpec*> forward = {&ops[0], &ops[1], &ops[2], &older};
  const std::vector<const OperatorSpec*> backward = {&older, &ops[2], &ops[1], &ops[0]};
  const std::vector<ImageEntry> entries = AssignImageSlots(forward);
  EXPECT_EQ(entries, AssignImageSlots(backward));
  ASSERT_EQ(entries.size(), 3u + 1u + 1u + 1u);
  for (std::size_t i = 0; i < entries.size(); ++i) EXPECT_EQ(entries[i].slot, i + 1);
  // Sorted by name, then version: copy_rows, scale_add x3, total 1.0.0, total 2.0.0.
  EXPECT_EQ(entries[0].op_name, "copy_rows");
  EXPECT_EQ(entries[1].symbol, "gpuos_op_9scale_add_v1_2_3_f32");
  EXPECT_EQ(entries[3].dtype, DType::kI32);
  EXPECT_EQ(entries[4].op_name, "total");
  EXPECT_EQ(entries[4].version, (SemVer{1, 0, 0}));
  EXPECT_EQ(entries[5].version, (SemVer{2, 0, 0}));
  EXPECT_EQ(entries[5].kind, OperatorKind::kReduction);

  KernelImage image;
  image.entries = entries;
  ASSERT_NE(image.Find("total", SemVer{1, 0, 0}, DType::kF64), nullptr);
  EXPECT_EQ(image.Find("total", SemVer{1, 0, 0}, DType::kF64)->slot, 5u);
  EXPECT_EQ(image.FindLatest("total", DType::kF64)->slot, 6u);
  EXPECT_EQ(image.Find("total", SemVer{3, 0, 0}, DType::kF64), nullptr);
  EXPECT_EQ(image.FindLatest("scale_add", DType::kF64), nullptr);

  const GeneratedSource table = GenerateOpTableSource(entries);
  EXPECT_NE(table.source.find("gpuos_op_table[] = {\n    nullptr,"), std::string::npos);
  EXPECT_NE(table.source.find("gpuos_op_table_size = 7;"), std::string::npos);
  for (const ImageEntry& entry : entries) {
    EXPECT_EQ(CountOf(table.source, "GPUOS_OPERATOR_ABI\nextern \"C\" __device__ void " +
                                        entry.symbol + "(const ::gpuos::device::OpCall&);"),
              1)
        << entry.symbol;
    EXPECT_EQ(CountOf(table.source,
                      "    " + entry.symbol + ",  // slot " + std::to_string(entry.slot) + ":"),
              1)
        << entry.symbol;
  }
}

double AsDouble(std::uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}
long long AsInt(std::uint64_t bits) {
  long long value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

TEST(JitCodegenTest, AttributeSlotsUseDefaultsAndDeclaredTypes) {
  auto ops = ParseOperators(kPack, "packs/codegen.yaml");
  ASSERT_EQ(ops.size(), 3u);
  OperatorSpec spec = ops[0];
  spec.attributes.push_back({"flag", AttributeType::kBool, std::nullopt});
  spec.attributes.push_back({"count", AttributeType::kI32, std::string("-7")});

  auto slots = EncodeAttributeSlots(spec, {{"flag", "true"}, {"alpha", "0.25"}});
  ASSERT_TRUE(slots.ok()) << slots.status().ToString();
  ASSERT_EQ(slots->size(), 4u);
  EXPECT_EQ(AsDouble((*slots)[0]), 0.25);
  EXPECT_EQ(AsInt((*slots)[1]), 3);
  EXPECT_EQ(AsInt((*slots)[2]), 1);
  EXPECT_EQ(AsInt((*slots)[3]), -7);

  auto missing = EncodeAttributeSlots(spec, {});
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("'flag' has no default"), std::string::npos);
  auto unknown = EncodeAttributeSlots(spec, {{"flag", "false"}, {"beta", "1"}});
  EXPECT_NE(unknown.status().message().find("unknown attribute 'beta'"), std::string::npos);
  auto range = EncodeAttributeSlots(spec, {{"flag", "false"}, {"count", "4294967296"}});
  EXPECT_NE(range.status().message().find("out of range for i32"), std::string::npos);
  auto not_bool = EncodeAttributeSlots(spec, {{"flag", "1"}});
  EXPECT_NE(not_bool.status().message().find("not a bool"), std::string::npos);
  auto fraction = EncodeAttributeSlots(spec, {{"flag", "true"}, {"shift", "1.5"}});
  EXPECT_NE(fraction.status().message().find("not an integer"), std::string::npos);
}

}  // namespace
}  // namespace gpuos::registry

namespace gpuos::registry {
namespace {

constexpr const char* kCastPack = R"(gpuos_pack: 1
name: test.cast
version: 1.0.0
operators:
  - name: to
    version: 2.0.0
    kind: elementwise
    dtypes: [f32, i64]
    out_dtypes: [f16, bool, i32]
    inputs: [{name: a}]
    outputs: [{name: out, dtype: U}]
    body: |
      out = ::gpuos::device::convert<compute_u>(a);
)";

// out_dtypes: one entry point per (T, U) pair, U and compute_u defined, the
// dtype check uses U's code for the output, slots cover every pair.
TEST(JitCodegenTest, SecondTypeVariableInstantiatesEveryPair) {
  const std::vector<OperatorSpec> ops = ParseOperators(kCastPack, "cast.yaml");
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(OperatorSymbol("to", SemVer{2, 0, 0}, DType::kI64, DType::kBool),
            "gpuos_op_2to_v2_0_0_i64_bool");
  EXPECT_EQ(OperatorSymbol("to", SemVer{2, 0, 0}, DType::kI64, std::nullopt),
            OperatorSymbol("to", SemVer{2, 0, 0}, DType::kI64));
  auto source = GenerateOperatorSource(ops[0]);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const std::string& text = source->source;
  for (const char* t : {"f32", "i64"}) {
    for (const char* u : {"f16", "bool", "i32"}) {
      const std::string symbol = std::string("gpuos_op_2to_v2_0_0_") + t + "_" + u;
      EXPECT_NE(text.find("extern \"C\" __device__ void " + symbol + "("), std::string::npos)
          << symbol;
    }
  }
  EXPECT_NE(text.find("using U = __half;"), std::string::npos);
  EXPECT_NE(text.find("using compute_u = ::gpuos::device::compute_type_t<U>;"), std::string::npos);
  EXPECT_NE(text.find("{::gpuos::device::kDTypeI64, ::gpuos::device::kDTypeBool}"),
            std::string::npos);
  EXPECT_NE(text.find("::gpuos::device::Operand<U> t1"), std::string::npos);
  EXPECT_NE(text.find("@T=f32/U=i32"), std::string::npos);

  const std::vector<ImageEntry> entries = AssignImageSlots({&ops[0]});
  ASSERT_EQ(entries.size(), 6u);
  EXPECT_EQ(entries[0].dtype, DType::kF32);
  EXPECT_EQ(entries[0].out_dtype, DType::kF16);
  EXPECT_EQ(entries[5].dtype, DType::kI64);
  EXPECT_EQ(entries[5].out_dtype, DType::kI32);
  KernelImage image;
  image.entries = entries;
  ASSERT_NE(image.Find("to", SemVer{2, 0, 0}, DType::kI64, DType::kBool), nullptr);
  EXPECT_EQ(image.Find("to", SemVer{2, 0, 0}, DType::kI64, DType::kBool)->slot, 5u);
  EXPECT_EQ(image.Find("to", SemVer{2, 0, 0}, DType::kI64), nullptr);  // U is required
  EXPECT_NE(image.FindLatest("to", DType::kF32, DType::kI32), nullptr);
  const GeneratedSource table = GenerateOpTableSource(entries);
  EXPECT_NE(table.source.find("to 2.0.0 f32 -> bool"), std::string::npos);

  OperatorSpec broken = ops[0];
  broken.out_dtypes.clear();
  EXPECT_FALSE(GenerateOperatorSource(broken).ok());
}

}  // namespace
}  // namespace gpuos::registry
