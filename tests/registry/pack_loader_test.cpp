#include "gpuos/registry/pack_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpuos/registry/operator_spec_json.h"

namespace gpuos::registry {
namespace {

namespace fs = std::filesystem;

const fs::path kPackData = fs::path(GPUOS_SOURCE_DIR) / "tests/data/packs";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// 1-based number of the first line of `text` that contains `needle`.
int LineOf(const std::string& text, const std::string& needle) {
  std::size_t pos = text.find(needle);
  EXPECT_NE(pos, std::string::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + pos, '\n'));
}

const OperatorSpec& FindOperator(const OperatorPack& pack, const std::string& name) {
  for (const auto& op : pack.operators) {
    if (op.name == name) return op;
  }
  ADD_FAILURE() << "no operator " << name;
  return pack.operators.front();
}

std::string BaseOperator() {
  return "gpuos_pack: 1\nname: mem.pack\nversion: 1.0.0\noperators:\n"
         "  - name: add\n    version: 1.0.0\n    kind: elementwise\n    dtypes: [f32]\n"
         "    inputs: [{name: a}, {name: b}]\n    outputs: [{name: out}]\n";
}

TEST(PackLoaderTest, ParsesElementwisePackCompletely) {
  const fs::path path = kPackData / "good/elementwise.yaml";
  const std::string text = ReadFile(path);
  auto pack = LoadPackFile(path.string());
  ASSERT_TRUE(pack.ok()) << pack.status().ToString();
  EXPECT_EQ(pack->format, 1);
  EXPECT_EQ(pack->name, "test.elementwise");
  EXPECT_EQ(pack->version, (SemVer{0, 3, 1}));
  EXPECT_EQ(pack->description, "Elementwise operators for the loader tests.");
  EXPECT_EQ(pack->source_path, path.string());
  EXPECT_EQ(pack->source_text, text);
  ASSERT_EQ(pack->operators.size(), 2u);

  const OperatorSpec& axpy = pack->operators[0];
  EXPECT_EQ(axpy.name, "axpy");
  EXPECT_EQ(axpy.version, (SemVer{1, 2, 0}));
  EXPECT_EQ(axpy.kind, OperatorKind::kElementwise);
  EXPECT_EQ(axpy.description, "a + alpha * b");
  EXPECT_EQ(axpy.dtypes, (std::vector<DType>{DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                                             DType::kI32, DType::kI64}));
  ASSERT_EQ(axpy.inputs.size(), 2u);
  EXPECT_EQ(axpy.inputs[0].name, "a");
  EXPECT_EQ(axpy.inputs[0].description, "left operand");
  EXPECT_FALSE(axpy.inputs[0].dtype);
  EXPECT_EQ(axpy.inputs[1].name, "b");
  EXPECT_FALSE(axpy.inputs[1].dtype);  // `dtype: T`
  ASSERT_EQ(axpy.outputs.size(), 1u);
  EXPECT_EQ(axpy.outputs[0].description, "the sum");
  ASSERT_EQ(axpy.attributes.size(), 2u);
  EXPECT_EQ(axpy.attributes[0].name, "alpha");
  EXPECT_EQ(axpy.attributes[0].type, AttributeType::kF64);
  EXPECT_EQ(axpy.attributes[0].default_value, "1");  // canonical text of 1.0
  EXPECT_EQ(axpy.attributes[0].description, "scale of b");
  EXPECT_EQ(axpy.attributes[1].type, AttributeType::kI32);
  EXPECT_EQ(axpy.attributes[1].default_value, "-3");
  EXPECT_EQ(axpy.location.ToString(),
            path.string() + ":" + std::to_string(LineOf(text, "- name: axpy")) + ":5");

  // Block scalars start on the line after `|`, at the content's indentation;
  // the body's first content line is blank.
  EXPECT_EQ(axpy.device_code.code, "__device__ inline float twice(float x) { return 2 * x; }\n");
  EXPECT_EQ(axpy.device_code.location.file, path.string());
  EXPECT_EQ(axpy.device_code.location.line, LineOf(text, "device_code: |") + 1);
  EXPECT_EQ(axpy.device_code.location.column, 7);
  EXPECT_EQ(axpy.body.code,
            "\nout = a + static_cast<compute_t>(alpha) * b\n      + "
            "static_cast<compute_t>(bias);\n");
  EXPECT_EQ(axpy.body.location.line, LineOf(text, "body: |") + 1);
  EXPECT_EQ(axpy.body.location.column, 7);
  EXPECT_TRUE(axpy.reduction.init.empty());

  ASSERT_EQ(axpy.tests.size(), 2u);
  const OperatorTest& small = axpy.tests[0];
  EXPECT_EQ(small.name, "small");
  EXPECT_EQ(small.dtype, DType::kF32);
  ASSERT_EQ(small.inputs.size(), 2u);
  EXPECT_EQ(small.inputs[0].name, "a");
  EXPECT_TRUE(small.inputs[0].shape.empty());
  EXPECT_EQ(small.inputs[0].values, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(small.inputs[1].shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(small.inputs[1].values, (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(small.attributes,
            (std::vector<std::pair<std::string, std::string>>{{"alpha", "2"}, {"bias", "0"}}));
  ASSERT_EQ(small.expected.size(), 1u);
  EXPECT_EQ(small.expected[0].values, (std::vector<double>{9, 12, 15}));
  EXPECT_DOUBLE_EQ(small.tolerance, 1e-6);
  EXPECT_EQ(small.location.line, LineOf(text, "- name: small"));
  const OperatorTest& matrix = axpy.tests[1];
  EXPECT_EQ(matrix.dtype, DType::kI32);
  EXPECT_EQ(matrix.inputs[1].shape, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(matrix.expected[0].shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(matrix.tolerance, 0.0);

  const OperatorSpec& greater = pack->operators[1];
  EXPECT_EQ(greater.outputs[0].dtype, DType::kBool);
  EXPECT_EQ(greater.body.code, "out = a > b;");
  // A quoted scalar's code starts after the quote.
  EXPECT_EQ(greater.body.location.line, LineOf(text, "body: \"out = a > b;\""));
  EXPECT_EQ(greater.body.location.column, 12);
  const auto& mixed = greater.tests[0];
  EXPECT_EQ(mixed.inputs[0].values[1], std::numeric_limits<double>::infinity());
  EXPECT_EQ(mixed.inputs[0].values[2], -25.0);
  EXPECT_EQ(mixed.inputs[1].values[2], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(mixed.expected[0].values, (std::vector<double>{1, 0, 1}));
}

TEST(PackLoaderTest, ParsesReductionsAndCustom) {
  const fs::path path = kPackData / "good/reduction.yaml";
  const std::string text = ReadFile(path);
  auto pack = LoadPackFile(path.string());
  ASSERT_TRUE(pack.ok()) << pack.status().ToString();
  const OperatorSpec sum = FindOperator(*pack, "sum");
  EXPECT_EQ(sum.kind, OperatorKind::kReduction);
  EXPECT_TRUE(sum.body.empty());
  EXPECT_EQ(sum.reduction.accumulator, "");
  EXPECT_EQ(sum.reduction.init.code, "acc = 0;");
  EXPECT_EQ(sum.reduction.init.location.line, LineOf(text, "init: acc = 0;"));
  EXPECT_EQ(sum.reduction.init.location.column, 13);
  EXPECT_TRUE(sum.reduction.finish.empty());
  const OperatorSpec mean = FindOperator(*pack, "mean");
  EXPECT_EQ(mean.reduction.accumulator, "double");
  EXPECT_EQ(mean.reduction.step.code, "acc += static_cast<double>(x);\n");
  EXPECT_EQ(mean.reduction.step.location.line, LineOf(text, "step: |") + 1);
  EXPECT_EQ(mean.reduction.step.location.column, 9);
  EXPECT_EQ(mean.reduction.finish.code, "out = static_cast<compute_t>(acc / count);");
  EXPECT_EQ(mean.reduction.finish.location.line, LineOf(text, "finish: >-") + 1);

  auto custom = LoadPackFile((kPackData / "good/custom.yaml").string());
  ASSERT_TRUE(custom.ok()) << custom.status().ToString();
  const OperatorSpec& iota = custom->operators.at(0);
  EXPECT_EQ(iota.kind, OperatorKind::kCustom);
  EXPECT_TRUE(iota.inputs.empty());
  EXPECT_FALSE(iota.attributes.at(0).default_value);
}

TEST(PackLoaderTest, ThirdPartyPackIsValidAndRoundTripsThroughJson) {
  auto pack = LoadPackFile((kPackData / "good/third_party.yaml").string());
  ASSERT_TRUE(pack.ok()) << pack.status().ToString();
  EXPECT_EQ(pack->name, "acme.activations");
  ASSERT_GE(pack->operators.size(), 3u);
  for (const OperatorSpec& op : pack->operators) {
    EXPECT_TRUE(ValidateOperator(op).ok()) << ValidateOperator(op).ToString();
    auto back = OperatorFromJson(OperatorToJson(op, true));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(OperatorToJson(*back, true), OperatorToJson(op, true));
    EXPECT_EQ(OperatorContentHash(*back), OperatorContentHash(op));
    EXPECT_FALSE(op.tests.empty()) << op.name;
  }
  EXPECT_EQ(FindOperator(*pack, "leaky_relu").attributes.at(0).default_value, "0.01");
}

TEST(PackLoaderTest, MovingAnOperatorKeepsItsHash) {
  std::string text = BaseOperator() + "    body: out = a + b;\n";
  auto first = ParsePack(text, "a.yaml");
  auto moved = ParsePack("# a comment\n\n" + text, "b.yaml");
  ASSERT_TRUE(first.ok() && moved.ok());
  EXPECT_NE(first->operators[0].body.location.line, moved->operators[0].body.location.line);
  EXPECT_EQ(OperatorContentHash(first->operators[0]), OperatorContentHash(moved->operators[0]));
}

TEST(PackLoaderTest, MemoryPackKeepsNameAndText) {
  std::string text = BaseOperator() + "    body: out = a + b;\n";
  auto pack = ParsePack(text, "<memory>");
  ASSERT_TRUE(pack.ok()) << pack.status().ToString();
  EXPECT_EQ(pack->source_path, "<memory>");
  EXPECT_EQ(pack->source_text, text);
  EXPECT_EQ(pack->operators[0].body.location.ToString(), "<memory>:11:11");
}

TEST(PackLoaderTest, AcceptsWindowsLineEndings) {
  std::string text = BaseOperator() + "    body: |\n      out = a + b;\n";
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  auto pack = ParsePack(crlf, "crlf.yaml");
  ASSERT_TRUE(pack.ok()) << pack.status().ToString();
  EXPECT_EQ(pack->operators[0].body.code, "out = a + b;\n");
  EXPECT_EQ(pack->operators[0].body.location.line, 12);
}

TEST(PackLoaderTest, EmptyOptionalValueMeansAbsent) {
  auto pack = ParsePack(
      BaseOperator() + "    description:\n    attributes: ~\n    body: out = a;\n", "m.yaml");
  ASSERT_TRUE(pack.ok()) << pack.status().ToString();
  EXPECT_EQ(pack->operators[0].description, "");
  EXPECT_TRUE(pack->operators[0].attributes.empty());
}

// Each file in bad/ starts with "# expect: LINE:COLUMN <message after 'error: '>".
class BadPackTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BadPackTest, IsRejectedAtTheRightPlace) {
  const fs::path path = kPackData / "bad" / (GetParam() + ".yaml");
  std::string text = ReadFile(path);
  const std::string marker = "# expect: ";
  ASSERT_EQ(text.rfind(marker, 0), 0u) << path << " has no expectation line";
  std::string expectation = text.substr(marker.size(), text.find('\n') - marker.size());
  std::size_t space = expectation.find(' ');
  std::string expected_prefix = path.string() + ":" + expectation.substr(0, space) +
                                ": error: " + expectation.substr(space + 1);
  auto pack = LoadPackFile(path.string());
  ASSERT_FALSE(pack.ok()) << path << " was accepted";
  EXPECT_EQ(pack.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pack.status().message().substr(0, expected_prefix.size()), expected_prefix)
      << "full message: " << pack.status().message();
  // The same text in memory fails the same way.
  auto in_memory = ParsePack(text, path.string());
  ASSERT_FALSE(in_memory.ok());
  EXPECT_EQ(in_memory.status().message(), pack.status().message());
}

std::vector<std::string> BadPackNames() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kPackData / "bad")) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Files, BadPackTest, ::testing::ValuesIn(BadPackNames()),
                         [](const auto& param_info) { return param_info.param; });

TEST(PackLoaderTest, BadPackCorpusIsPresent) { EXPECT_GE(BadPackNames().size(), 50u); }

}  // namespace
}  // namespace gpuos::registry
