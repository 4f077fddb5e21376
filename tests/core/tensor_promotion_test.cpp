// Type promotion against tables written from PyTorch's documented behaviour
// (torch.promote_types, torch.result_type, torch.can_cast; the "Type
// promotion" section of torch's Tensor Attributes page).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpuos/type_promotion.h"

namespace gpuos {
namespace {

DType D(const char* name) {
  auto parsed = ParseDType(name);
  EXPECT_TRUE(parsed.has_value()) << name;
  return parsed.value_or(DType::kF32);
}

// torch.promote_types over the nine gpuos dtypes, rows and columns in this
// order. "i16" is PyTorch's answer for u8 with i8; gpuos has no int16 and
// gives i32 (checked separately below).
const char* const kOrder[] = {"bool", "u8", "i8", "i32", "i64", "f16", "bf16", "f32", "f64"};
const char* const kPromoteTable[9][9] = {
    //  bool    u8      i8      i32     i64     f16     bf16    f32    f64
    {"bool", "u8", "i8", "i32", "i64", "f16", "bf16", "f32", "f64"},        // bool
    {"u8", "u8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"},         // u8
    {"i8", "i16", "i8", "i32", "i64", "f16", "bf16", "f32", "f64"},         // i8
    {"i32", "i32", "i32", "i32", "i64", "f16", "bf16", "f32", "f64"},       // i32
    {"i64", "i64", "i64", "i64", "i64", "f16", "bf16", "f32", "f64"},       // i64
    {"f16", "f16", "f16", "f16", "f16", "f16", "f32", "f32", "f64"},        // f16
    {"bf16", "bf16", "bf16", "bf16", "bf16", "f32", "bf16", "f32", "f64"},  // bf16
    {"f32", "f32", "f32", "f32", "f32", "f32", "f32", "f32", "f64"},        // f32
    {"f64", "f64", "f64", "f64", "f64", "f64", "f64", "f64", "f64"},        // f64
};

TEST(PromoteTypesTest, MatchesPyTorchTable) {
  for (int i = 0; i < 9; ++i) {
    for (int j = 0; j < 9; ++j) {
      std::string expected = kPromoteTable[i][j];
      if (expected == "i16") expected = "i32";  // gpuos's documented departure
      EXPECT_EQ(DTypeName(PromoteTypes(D(kOrder[i]), D(kOrder[j]))), expected)
          << kOrder[i] << " with " << kOrder[j];
    }
  }
}

TEST(PromoteTypesTest, U8WithI8IsI32NotPyTorchsInt16) {
  EXPECT_EQ(PromoteTypes(DType::kU8, DType::kI8), DType::kI32);
  EXPECT_EQ(PromoteTypes(DType::kI8, DType::kU8), DType::kI32);
}

TEST(PromoteTypesTest, Categories) {
  EXPECT_EQ(CategoryOf(DType::kBool), DTypeCategory::kBool);
  for (DType d : {DType::kU8, DType::kI8, DType::kI32, DType::kI64}) {
    EXPECT_EQ(CategoryOf(d), DTypeCategory::kInteger) << DTypeName(d);
  }
  for (DType d : {DType::kF16, DType::kBF16, DType::kF32, DType::kF64}) {
    EXPECT_EQ(CategoryOf(d), DTypeCategory::kFloating) << DTypeName(d);
  }
}

// One operand of a result_type case: "t:i32" a tensor with dimensions,
// "z:i32" a zero-dim tensor, "s:int" / "s:float" / "s:bool" a Python scalar.
PromotionOperand Operand(const std::string& spec) {
  const std::string kind = spec.substr(0, 1);
  const std::string rest = spec.substr(2);
  if (kind == "s") {
    if (rest == "bool") return PromotionOperand::Scalar(ScalarKind::kBool);
    if (rest == "int") return PromotionOperand::Scalar(ScalarKind::kInt);
    EXPECT_EQ(rest, "float");
    return PromotionOperand::Scalar(ScalarKind::kFloat);
  }
  return PromotionOperand::Tensor(D(rest.c_str()), kind == "t" ? 2 : 0);
}

struct ResultTypeCase {
  std::vector<std::string> operands;
  const char* expected;
  const char* source;  // where the expectation comes from
};

TEST(ResultTypeTest, MatchesPyTorch) {
  const std::vector<ResultTypeCase> cases = {
      // The examples of PyTorch's type promotion documentation.
      {{"s:int", "s:int"}, "i64", "torch.add(5, 5)"},
      {{"t:i32", "s:int"}, "i32", "int_tensor + 5"},
      {{"t:i32", "z:i64"}, "i32", "int_tensor + long_zerodim"},
      {{"t:i64", "t:i32"}, "i64", "long_tensor + int_tensor"},
      {{"t:bool", "t:i64"}, "i64", "bool_tensor + long_tensor"},
      {{"t:bool", "t:u8"}, "u8", "bool_tensor + uint_tensor"},
      {{"t:f32", "t:f64"}, "f64", "float_tensor + double_tensor"},
      {{"t:bool", "t:i32"}, "i32", "bool_tensor + int_tensor"},
      {{"t:i64", "t:f32"}, "f32", "torch.add(long_tensor, float_tensor)"},
      {{"t:i32", "s:float"}, "f32", "torch.result_type(int tensor, 1.0)"},
      {{"t:u8", "z:i64"}, "u8", "torch.result_type(uint8 tensor, torch.tensor(1))"},
      // Category rules applied (no value-based promotion).
      {{"t:u8", "s:int"}, "u8", "uint8 tensor + 1000 stays uint8"},
      {{"t:bool", "s:int"}, "i64", "bool tensor + int: int category wins, scalar is int64"},
      {{"t:bool", "s:float"}, "f32", "bool tensor + float"},
      {{"t:bool", "s:bool"}, "bool", "bool tensor + True"},
      {{"t:u8", "s:bool"}, "u8", "uint8 tensor + True"},
      {{"t:i64", "s:float"}, "f32", "long tensor + 2.5: default dtype"},
      {{"t:f16", "s:float"}, "f16", "half tensor + 2.5 stays half"},
      {{"t:bf16", "s:float"}, "bf16", "bfloat16 tensor + 2.5 stays bfloat16"},
      {{"t:f16", "s:int"}, "f16", "half tensor + 2"},
      {{"t:f16", "z:f64"}, "f16", "zero-dim double does not promote a half tensor"},
      {{"t:i32", "z:f64"}, "f64", "zero-dim double promotes an int tensor (higher category)"},
      {{"t:i8", "z:u8"}, "i8", "zero-dim uint8 does not change int8"},
      {{"t:f16", "t:bf16"}, "f32", "half + bfloat16"},
      {{"z:f16", "z:f32"}, "f32", "zero-dim tensors among themselves"},
      {{"z:i32", "s:float"}, "f32", "zero-dim int + float scalar"},
      {{"z:f64", "s:float"}, "f64", "zero-dim double + float scalar"},
      {{"z:i8", "s:int"}, "i8", "zero-dim int8 + int scalar"},
      {{"z:bool", "s:int"}, "i64", "zero-dim bool + int scalar"},
      {{"s:bool", "s:bool"}, "bool", "True + True"},
      {{"s:bool", "s:int"}, "i64", "True + 5"},
      {{"s:int", "s:float"}, "f32", "5 + 2.5 in a tensor op: default dtype"},
      {{"t:i32", "z:f16", "s:float"}, "f16", "three operands: zero-dim half wins its level"},
      {{"t:u8", "t:i8"}, "i32", "gpuos: PyTorch gives int16"},
      {{"t:i32"}, "i32", "one operand"},
  };
  for (const ResultTypeCase& c : cases) {
    std::vector<PromotionOperand> operands;
    for (const std::string& spec : c.operands) operands.push_back(Operand(spec));
    auto result = ResultType(operands);
    ASSERT_TRUE(result.ok()) << c.source;
    EXPECT_EQ(DTypeName(*result), std::string(c.expected)) << c.source;
  }
}

TEST(ResultTypeTest, DefaultFloatDtype) {
  const PromotionOperand int_and_float[] = {PromotionOperand::Tensor(DType::kI32, 1),
                                            PromotionOperand::Scalar(ScalarKind::kFloat)};
  EXPECT_EQ(*ResultType(int_and_float, DType::kF64), DType::kF64);
  const PromotionOperand half_and_float[] = {PromotionOperand::Tensor(DType::kF16, 1),
                                             PromotionOperand::Scalar(ScalarKind::kFloat)};
  EXPECT_EQ(*ResultType(half_and_float, DType::kF64), DType::kF16);

  auto not_float = ResultType(int_and_float, DType::kI32);
  ASSERT_FALSE(not_float.ok());
  EXPECT_NE(not_float.status().message().find("must be floating, got i32"), std::string::npos);
  auto none = ResultType(std::span<const PromotionOperand>());
  EXPECT_FALSE(none.ok());
}

TEST(ResultTypeTest, ConvenienceForms) {
  EXPECT_EQ(ResultType(DType::kI32, 1, DType::kF64, 0), DType::kF64);
  EXPECT_EQ(ResultType(DType::kF16, 1, DType::kF64, 0), DType::kF16);
  EXPECT_EQ(ResultType(DType::kF16, 1, DType::kF64, 3), DType::kF64);
  EXPECT_EQ(ResultType(DType::kU8, 2, ScalarKind::kInt), DType::kU8);
  EXPECT_EQ(ResultType(DType::kU8, 2, ScalarKind::kFloat), DType::kF32);
}

TEST(CanCastTest, MatchesTorchCanCast) {
  struct Case {
    const char* from;
    const char* to;
    bool allowed;
  };
  const std::vector<Case> cases = {
      {"f64", "f32", true},   {"f32", "i32", false},  {"f16", "u8", false},  {"i64", "u8", true},
      {"i32", "bool", false}, {"bool", "i32", true},  {"bool", "f16", true}, {"u8", "f32", true},
      {"f32", "bool", false}, {"bool", "bool", true}, {"bf16", "f16", true}, {"i8", "i64", true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CanCast(D(c.from), D(c.to)), c.allowed) << c.from << " -> " << c.to;
  }
}

TEST(PromoteIntegralToFloatTest, FloatsStayIntegersBecomeDefault) {
  EXPECT_EQ(PromoteIntegralToFloat(DType::kI64), DType::kF32);
  EXPECT_EQ(PromoteIntegralToFloat(DType::kBool), DType::kF32);
  EXPECT_EQ(PromoteIntegralToFloat(DType::kBF16), DType::kBF16);
  EXPECT_EQ(PromoteIntegralToFloat(DType::kU8, DType::kF64), DType::kF64);
}

}  // namespace
}  // namespace gpuos
