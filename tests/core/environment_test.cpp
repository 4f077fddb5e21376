// GetEnv and EnvFlagOn (gpuos/environment.h): unset, empty, "0" and other values.
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

}  // namespace
