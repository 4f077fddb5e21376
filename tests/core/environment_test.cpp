// GetEnv, EnvFlagOn and GetEnvInteger (gpuos/environment.h): unset, empty, "0",
// other values, integers in and out of range.
#include "gpuos/environment.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace {

constexpr const char* kName = "GPUOS_ENVIRONMENT_TEST_FLAG";

class EnvironmentTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kName); }
};

TEST_F(EnvironmentTest, UnsetAndEmptyAreAbsentAndOff) {
  unsetenv(kName);
  EXPECT_FALSE(gpuos::GetEnv(kName).has_value());
  EXPECT_FALSE(gpuos::EnvFlagOn(kName));
  setenv(kName, "", 1);
  EXPECT_FALSE(gpuos::GetEnv(kName).has_value());
  EXPECT_FALSE(gpuos::EnvFlagOn(kName));
}

TEST_F(EnvironmentTest, ZeroIsOffAnythingElseIsOn) {
  setenv(kName, "0", 1);
  EXPECT_EQ(gpuos::GetEnv(kName), "0");
  EXPECT_FALSE(gpuos::EnvFlagOn(kName));
  setenv(kName, "1", 1);
  EXPECT_TRUE(gpuos::EnvFlagOn(kName));
  setenv(kName, "yes", 1);
  EXPECT_TRUE(gpuos::EnvFlagOn(kName));
}

TEST_F(EnvironmentTest, IntegersInRangeOrRefusedByName) {
  unsetenv(kName);
  auto unset = gpuos::GetEnvInteger(kName, 1, 10, "a count");
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset->has_value());
  setenv(kName, "7", 1);
  auto seven = gpuos::GetEnvInteger(kName, 1, 10, "a count");
  ASSERT_TRUE(seven.ok());
  EXPECT_EQ(**seven, 7);
  setenv(kName, "-3", 1);
  EXPECT_EQ(**gpuos::GetEnvInteger(kName, -5, 5, "a shift"), -3);
  for (const char* bad : {"0", "11", "abc", "5x", " 5", "+5", "99999999999999999999"}) {
    setenv(kName, bad, 1);
    auto refused = gpuos::GetEnvInteger(kName, 1, 10, "a count");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), gpuos::StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message(),
              std::string(kName) + " must be a count from 1 to 10; got '" + bad + "'");
  }
}

}  // namespace
