#include "gpuos/status.h"

#include <gtest/gtest.h>

namespace gpuos {
namespace {

Expected<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("value " + std::to_string(v) + " is not positive");
  return v;
}

Status UsesAssign(int v, int* out) {
  GPUOS_ASSIGN_OR_RETURN(int parsed, ParsePositive(v));
  *out = parsed;
  return Status::Ok();
}

TEST(StatusTest, OkAndErrorCarryCodeAndMessage) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = NotFound("operator 'x' is not in the repository");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "not_found: operator 'x' is not in the repository");
  EXPECT_EQ(s.WithContext("rollback").message(), "rollback: operator 'x' is not in the repository");
}

TEST(StatusTest, ExpectedHoldsValueOrStatus) {
  auto good = ParsePositive(3);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  auto bad = ParsePositive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(StatusTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(UsesAssign(5, &out).ok());
  EXPECT_EQ(out, 5);
  Status s = UsesAssign(0, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 5);
}

}  // namespace
}  // namespace gpuos
