#include "gpuos/dtype.h"

#include <gtest/gtest.h>

namespace gpuos {
namespace {

TEST(DTypeTest, NamesRoundTrip) {
  for (DType d : AllDTypes()) {
    auto parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.has_value()) << DTypeName(d);
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_FALSE(ParseDType("float32").has_value());
  EXPECT_FALSE(ParseDType("").has_value());
}

TEST(DTypeTest, SizesMatchTheDeviceTypes) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_TRUE(IsFloatingPoint(DType::kF16));
  EXPECT_FALSE(IsFloatingPoint(DType::kI32));
}

}  // namespace
}  // namespace gpuos
