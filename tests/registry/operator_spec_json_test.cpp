#include "gpuos/registry/operator_spec_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gpuos/registry/operator_spec.h"

namespace gpuos::registry {
namespace {

CodeBlock Code(std::string code, int line) {
  return CodeBlock{std::move(code), SourceLocation{"pack.yaml", line, 7}};
}

OperatorSpec MakeAxpy() {
  OperatorSpec spec;
  spec.name = "axpy";
  spec.version = SemVer{1, 2, 3};
  spec.kind = OperatorKind::kElementwise;
  spec.description = "a + alpha * b";
  spec.dtypes = {DType::kF32, DType::kF16};
  spec.inputs = {{"a", std::nullopt, "left"}, {"b", std::nullopt, ""}};
  spec.outputs = {{"out", std::nullopt, "sum"}, {"is_big", DType::kBool, ""}};
  spec.attributes = {{"alpha", AttributeType::kF64, "1", "scale"},
                     {"limit", AttributeType::kI32, std::nullopt, ""}};
  spec.device_code = Code("__device__ inline float twice(float x) { return 2 * x; }\n", 10);
  spec.body = Code("out = a + static_cast<compute_t>(alpha) * b;\nis_big = out > limit;\n", 12);
  OperatorTest test;
  test.name = "small";
  test.dtype = DType::kF32;
  test.inputs = {{"a", {}, {1, 2, 3}}, {"b", {3}, {4, 5, 6}}};
  test.expected = {{"out", {}, {9, 12, std::numeric_limits<double>::infinity()}},
                   {"is_big", {1, 3}, {0, 0, 1}}};
  test.attributes = {{"alpha", "2"}, {"limit", "10"}};
  test.tolerance = 1e-6;
  test.location = {"pack.yaml", 20, 9};
  spec.tests = {test};
  spec.location = {"pack.yaml", 3, 5};
  return spec;
}

OperatorSpec MakeSum() {
  OperatorSpec spec;
  spec.name = "sum";
  spec.version = SemVer{0, 1, 0};
  spec.kind = OperatorKind::kReduction;
  spec.dtypes = {DType::kF32, DType::kF64};
  spec.inputs = {{"x", std::nullopt, ""}};
  spec.outputs = {{"out", std::nullopt, ""}};
  spec.reduction.accumulator = "double";
  spec.reduction.init = Code("acc = 0;", 30);
  spec.reduction.step = Code("acc += x;", 31);
  spec.reduction.merge = Code("acc += other;", 32);
  return spec;
}

void ExpectSameCode(const CodeBlock& a, const CodeBlock& b, bool locations) {
  EXPECT_EQ(a.code, b.code);
  if (locations) {
    EXPECT_EQ(a.location.ToString(), b.location.ToString());
  }
}

void ExpectSameSpec(const OperatorSpec& a, const OperatorSpec& b, bool locations) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.dtypes, b.dtypes);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].name, b.inputs[i].name);
    EXPECT_EQ(a.inputs[i].dtype, b.inputs[i].dtype);
    EXPECT_EQ(a.inputs[i].description, b.inputs[i].description);
  }
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (std::size_t i = 0; i < a.outputs.size(); ++i) {
    EXPECT_EQ(a.outputs[i].name, b.outputs[i].name);
    EXPECT_EQ(a.outputs[i].dtype, b.outputs[i].dtype);
  }
  ASSERT_EQ(a.attributes.size(), b.attributes.size());
  for (std::size_t i = 0; i < a.attributes.size(); ++i) {
    EXPECT_EQ(a.attributes[i].name, b.attributes[i].name);
    EXPECT_EQ(a.attributes[i].type, b.attributes[i].type);
    EXPECT_EQ(a.attributes[i].default_value, b.attributes[i].default_value);
    EXPECT_EQ(a.attributes[i].description, b.attributes[i].description);
  }
  ExpectSameCode(a.device_code, b.device_code, locations);
  ExpectSameCode(a.body, b.body, locations);
  EXPECT_EQ(a.reduction.accumulator, b.reduction.accumulator);
  ExpectSameCode(a.reduction.init, b.reduction.init, locations);
  ExpectSameCode(a.reduction.step, b.reduction.step, locations);
  ExpectSameCode(a.reduction.merge, b.reduction.merge, locations);
  ExpectSameCode(a.reduction.finish, b.reduction.finish, locations);
  ASSERT_EQ(a.tests.size(), b.tests.size());
  for (std::size_t i = 0; i < a.tests.size(); ++i) {
    const auto &ta = a.tests[i], &tb = b.tests[i];
    EXPECT_EQ(ta.name, tb.name);
    EXPECT_EQ(ta.dtype, tb.dtype);
    ASSERT_EQ(ta.inputs.size(), tb.inputs.size());
    for (std::size_t j = 0; j < ta.inputs.size(); ++j) {
      EXPECT_EQ(ta.inputs[j].name, tb.inputs[j].name);
      EXPECT_EQ(ta.inputs[j].shape, tb.inputs[j].shape);
      EXPECT_EQ(ta.inputs[j].values, tb.inputs[j].values);
    }
    ASSERT_EQ(ta.expected.size(), tb.expected.size());
    for (std::size_t j = 0; j < ta.expected.size(); ++j) {
      EXPECT_EQ(ta.expected[j].name, tb.expected[j].name);
      EXPECT_EQ(ta.expected[j].shape, tb.expected[j].shape);
      EXPECT_EQ(ta.expected[j].values, tb.expected[j].values);
    }
    EXPECT_EQ(ta.attributes, tb.attributes);
    EXPECT_EQ(ta.tolerance, tb.tolerance);
    if (locations) {
      EXPECT_EQ(ta.location.ToString(), tb.location.ToString());
    }
  }
  if (locations) {
    EXPECT_EQ(a.location.ToString(), b.location.ToString());
  }
}

TEST(SemVerTest, ParsesAndPrints) {
  auto v = SemVer::Parse("10.0.3");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, (SemVer{10, 0, 3}));
  EXPECT_EQ(v->ToString(), "10.0.3");
  EXPECT_LT(SemVer::Parse("1.2.3").value(), SemVer::Parse("1.10.0").value());
}

TEST(SemVerTest, RejectsOtherForms) {
  for (const char* bad : {"1.0", "01.0.0", "1.0.0-rc1", "1.0.0+build", "1.0.0.0", "", "v1.0.0",
                          "1..0", "1.0.", "-1.0.0", "1.0.00", "4294967296.0.0", " 1.0.0"}) {
    auto v = SemVer::Parse(bad);
    EXPECT_FALSE(v.ok()) << bad;
    if (!v.ok()) {
      EXPECT_NE(v.status().message().find("MAJOR.MINOR.PATCH"), std::string::npos);
    }
  }
}

TEST(NamesTest, KindsAndAttributeTypesRoundTrip) {
  for (auto kind : {OperatorKind::kElementwise, OperatorKind::kReduction, OperatorKind::kCustom}) {
    EXPECT_EQ(ParseOperatorKind(OperatorKindName(kind)), kind);
  }
  for (auto type : {AttributeType::kF32, AttributeType::kF64, AttributeType::kI32,
                    AttributeType::kI64, AttributeType::kBool}) {
    EXPECT_EQ(ParseAttributeType(AttributeTypeName(type)), type);
  }
  EXPECT_FALSE(ParseOperatorKind("Elementwise"));
  EXPECT_FALSE(ParseAttributeType("f16"));
  EXPECT_EQ((SourceLocation{"a.yaml", 3, 4}.ToString()), "a.yaml:3:4");
}

TEST(ValidateOperatorTest, AcceptsGoodSpecs) {
  EXPECT_TRUE(ValidateOperator(MakeAxpy()).ok()) << ValidateOperator(MakeAxpy()).ToString();
  EXPECT_TRUE(ValidateOperator(MakeSum()).ok()) << ValidateOperator(MakeSum()).ToString();
}

TEST(ValidateOperatorTest, NamesOperatorAndField) {
  struct Case {
    const char* field;
    void (*mutate)(OperatorSpec&);
  };
  const Case cases[] = {
      {"name", [](OperatorSpec& s) { s.name = "Axpy"; }},
      {"dtypes", [](OperatorSpec& s) { s.dtypes.clear(); }},
      {"dtypes[1]",
       [](OperatorSpec& s) {
         s.dtypes = {DType::kF32, DType::kF32};
       }},
      {"outputs[0].name", [](OperatorSpec& s) { s.outputs[0].name = "a"; }},
      {"attributes[0].default", [](OperatorSpec& s) { s.attributes[0].default_value = "x"; }},
      {"attributes[1].default", [](OperatorSpec& s) { s.attributes[1].default_value = "1.5"; }},
      {"body", [](OperatorSpec& s) { s.body = {}; }},
      {"reduce", [](OperatorSpec& s) { s.reduction.init = Code("acc = 0;", 1); }},
      {"tests[0].dtype", [](OperatorSpec& s) { s.tests[0].dtype = DType::kI8; }},
      {"tests[0].inputs.b.values", [](OperatorSpec& s) { s.tests[0].inputs[1].shape = {2}; }},
      {"tests[0].inputs", [](OperatorSpec& s) { s.tests[0].inputs.pop_back(); }},
      {"tests[0].attributes.beta",
       [](OperatorSpec& s) {
         s.tests[0].attributes.push_back({"beta", "1"});
       }},
      {"tests[0].tolerance", [](OperatorSpec& s) { s.tests[0].tolerance = -1; }},
  };
  for (const Case& c : cases) {
    OperatorSpec spec = MakeAxpy();
    c.mutate(spec);
    Status status = ValidateOperator(spec);
    ASSERT_FALSE(status.ok()) << c.field;
    EXPECT_EQ(status.message().find(std::string("operator '") + spec.name + "': " + c.field + ": "),
              0u)
        << status.message();
  }
}

TEST(ValidateOperatorTest, ReductionShape) {
  OperatorSpec spec = MakeSum();
  spec.inputs.push_back({"y", std::nullopt, ""});
  EXPECT_NE(ValidateOperator(spec).message().find("inputs: a reduction has exactly one input"),
            std::string::npos);
  spec = MakeSum();
  spec.body = Code("out = x;", 3);
  EXPECT_NE(ValidateOperator(spec).message().find("body: a reduction has no body"),
            std::string::npos);
  spec = MakeSum();
  spec.reduction.merge = {};
  EXPECT_NE(ValidateOperator(spec).message().find("reduce.merge: required"), std::string::npos);
}

TEST(OperatorJsonTest, RoundTripsWithAndWithoutLocations) {
  for (const OperatorSpec& spec : {MakeAxpy(), MakeSum()}) {
    for (bool locations : {false, true}) {
      nlohmann::json json = OperatorToJson(spec, locations);
      auto back = OperatorFromJson(nlohmann::json::parse(json.dump()));
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      ExpectSameSpec(spec, *back, locations);
      EXPECT_EQ(OperatorToJson(*back, locations), json);
    }
  }
}

TEST(OperatorJsonTest, CanonicalFormIsReadable) {
  nlohmann::json json = OperatorToJson(MakeAxpy());
  EXPECT_EQ(json["version"], "1.2.3");
  EXPECT_EQ(json["dtypes"], nlohmann::json({"f32", "f16"}));
  EXPECT_EQ(json["inputs"][0]["dtype"], "T");
  EXPECT_EQ(json["outputs"][1]["dtype"], "bool");
  EXPECT_TRUE(json["reduce"].is_null());
  EXPECT_TRUE(json["attributes"][1]["default"].is_null());
  EXPECT_EQ(json["tests"][0]["expected"][0]["values"][2], "inf");
  EXPECT_FALSE(json.contains("location"));
  EXPECT_FALSE(json["body"].contains("location"));
  nlohmann::json located = OperatorToJson(MakeAxpy(), true);
  EXPECT_EQ(located["body"]["location"]["line"], 12);
  EXPECT_EQ(located["location"]["file"], "pack.yaml");
}

TEST(OperatorJsonTest, HashIgnoresLocations) {
  OperatorSpec a = MakeAxpy();
  OperatorSpec b = MakeAxpy();
  b.location = {"other.yaml", 99, 1};
  b.body.location = {"other.yaml", 101, 3};
  b.tests[0].location = {"other.yaml", 120, 1};
  EXPECT_EQ(OperatorContentHash(a), OperatorContentHash(b));
  EXPECT_EQ(OperatorContentHash(a).size(), 32u);
}

TEST(OperatorJsonTest, HashChangesWithBehaviour) {
  const std::string base = OperatorContentHash(MakeAxpy());
  std::vector<void (*)(OperatorSpec&)> changes = {
      [](OperatorSpec& s) { s.body.code += " "; },
      [](OperatorSpec& s) { s.dtypes.push_back(DType::kBF16); },
      [](OperatorSpec& s) {
        s.dtypes = {DType::kF16, DType::kF32};
      },
      [](OperatorSpec& s) { s.attributes[0].default_value = "2"; },
      [](OperatorSpec& s) { s.attributes[1].default_value = "0"; },
      [](OperatorSpec& s) { s.inputs[1].dtype = DType::kF32; },
      [](OperatorSpec& s) { s.version.patch++; },
      [](OperatorSpec& s) { s.device_code = {}; },
      [](OperatorSpec& s) { s.tests[0].tolerance = 0; },
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    OperatorSpec spec = MakeAxpy();
    changes[i](spec);
    EXPECT_NE(OperatorContentHash(spec), base) << "change " << i;
  }
}

TEST(OperatorJsonTest, HashOfInvalidUtf8DoesNotThrow) {
  OperatorSpec spec = MakeAxpy();
  spec.body.code = "out = a; // \x8c";
  EXPECT_FALSE(ValidateOperator(spec).ok());
  EXPECT_EQ(OperatorContentHash(spec).size(), 32u);
  spec.body.code = std::string("out = a;\0", 9);
  EXPECT_NE(ValidateOperator(spec).message().find("body: contains a NUL"), std::string::npos);
}

TEST(OperatorJsonTest, RejectsBadFieldsByName) {
  struct Case {
    const char* field;
    void (*mutate)(nlohmann::json&);
  };
  const Case cases[] = {
      {"version", [](nlohmann::json& j) { j["version"] = "1.0"; }},
      {"version", [](nlohmann::json& j) { j["version"] = 1; }},
      {"kind", [](nlohmann::json& j) { j["kind"] = "map"; }},
      {"dtypes[1]", [](nlohmann::json& j) { j["dtypes"][1] = "float16"; }},
      {"inputs[0].dtype", [](nlohmann::json& j) { j["inputs"][0]["dtype"] = "x"; }},
      {"inputs[0].name", [](nlohmann::json& j) { j["inputs"][0].erase("name"); }},
      {"attributes[0].type", [](nlohmann::json& j) { j["attributes"][0]["type"] = "f16"; }},
      {"attributes[0].default", [](nlohmann::json& j) { j["attributes"][0]["default"] = 1.0; }},
      {"attributes[0].default", [](nlohmann::json& j) { j["attributes"][0]["default"] = "one"; }},
      {"body.code", [](nlohmann::json& j) { j["body"]["code"] = 3; }},
      {"body", [](nlohmann::json& j) { j["body"] = nullptr; }},
      {"extra", [](nlohmann::json& j) { j["extra"] = 1; }},
      {"tests[0].expected[0].values[0]",
       [](nlohmann::json& j) { j["tests"][0]["expected"][0]["values"][0] = "x"; }},
      {"tests[0].inputs[1].shape[0]",
       [](nlohmann::json& j) { j["tests"][0]["inputs"][1]["shape"][0] = -3; }},
      {"location.line", [](nlohmann::json& j) { j["location"]["line"] = "3"; }},
      {"(top level)", [](nlohmann::json& j) { j = nlohmann::json::array(); }},
  };
  for (const Case& c : cases) {
    nlohmann::json json = OperatorToJson(MakeAxpy(), true);
    c.mutate(json);
    auto spec = OperatorFromJson(json);
    ASSERT_FALSE(spec.ok()) << c.field;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(spec.status().message().find(std::string("operator JSON: ") + c.field + ": "), 0u)
        << spec.status().message();
  }
}

}  // namespace
}  // namespace gpuos::registry

namespace gpuos::registry {
namespace {

// An operator with a second type variable U keeps it through JSON; an
// operator without one has no trace of it (its JSON and hash are unchanged by
// the extension).
TEST(OperatorJsonTest, SecondTypeVariableRoundTrips) {
  OperatorSpec spec;
  spec.name = "cast";
  spec.version = SemVer{1, 0, 0};
  spec.kind = OperatorKind::kElementwise;
  spec.dtypes = {DType::kF32, DType::kI32};
  spec.out_dtypes = {DType::kF16, DType::kBool};
  spec.inputs = {TensorParam{"a", std::nullopt, "", TypeVariable::kT}};
  spec.outputs = {TensorParam{"out", std::nullopt, "", TypeVariable::kU}};
  spec.body.code = "out = a;";
  OperatorTest test;
  test.name = "one";
  test.dtype = DType::kI32;
  test.out_dtype = DType::kBool;
  test.inputs = {{"a", {}, {2}}};
  test.expected = {{"out", {}, {1}}};
  spec.tests = {test};
  ASSERT_TRUE(ValidateOperator(spec).ok()) << ValidateOperator(spec).ToString();
  const nlohmann::json json = OperatorToJson(spec);
  EXPECT_EQ(json["outputs"][0]["dtype"], "U");
  EXPECT_EQ(json["out_dtypes"], nlohmann::json::array({"f16", "bool"}));
  EXPECT_EQ(json["tests"][0]["out_dtype"], "bool");
  auto back = OperatorFromJson(nlohmann::json::parse(json.dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->out_dtypes, spec.out_dtypes);
  EXPECT_EQ(back->outputs[0].type_variable, TypeVariable::kU);
  EXPECT_EQ(back->inputs[0].type_variable, TypeVariable::kT);
  EXPECT_EQ(back->tests[0].out_dtype, DType::kBool);
  EXPECT_EQ(OperatorToJson(*back), json);

  OperatorSpec plain = spec;
  plain.out_dtypes.clear();
  plain.outputs[0].type_variable = TypeVariable::kT;
  plain.tests[0].out_dtype.reset();
  const nlohmann::json plain_json = OperatorToJson(plain);
  EXPECT_FALSE(plain_json.contains("out_dtypes"));
  EXPECT_FALSE(plain_json["tests"][0].contains("out_dtype"));
  EXPECT_NE(OperatorContentHash(plain), OperatorContentHash(spec));

  OperatorSpec unused_u = spec;
  unused_u.outputs[0].type_variable = TypeVariable::kT;
  EXPECT_FALSE(ValidateOperator(unused_u).ok());
  OperatorSpec missing_test_u = spec;
  missing_test_u.tests[0].out_dtype.reset();
  EXPECT_FALSE(ValidateOperator(missing_test_u).ok());
}

}  // namespace
}  // namespace gpuos::registry
