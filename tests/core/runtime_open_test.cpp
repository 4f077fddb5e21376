// Runtime::Open without a GPU fails with a clear status; with one, a config
// without operators is rejected.
#include <gtest/gtest.h>

#include "gpuos/cuda_driver.h"
#include "gpuos/runtime/runtime.h"

namespace gpuos::runtime {
namespace {

TEST(RuntimeOpenTest, NoDeviceOrNoOperatorsIsAClearError) {
  RuntimeConfig config;  // neither repository nor operators
  auto runtime = Runtime::Open(config);
  ASSERT_FALSE(runtime.ok());
  if (!CudaDeviceCount().ok()) {
    EXPECT_EQ(runtime.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(runtime.status().message().rfind("no CUDA device: ", 0), 0u)
        << runtime.status().message();
  } else {
    EXPECT_EQ(runtime.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(runtime.status().message().find("repository_path"), std::string::npos);
  }
}

TEST(RuntimeOpenTest, BadDeviceOrdinal) {
  RuntimeConfig config;
  config.device = 1000;
  auto runtime = Runtime::Open(config);
  ASSERT_FALSE(runtime.ok());
  EXPECT_TRUE(runtime.status().code() == StatusCode::kUnavailable ||
              runtime.status().code() == StatusCode::kInvalidArgument)
      << runtime.status().ToString();
}

TEST(RuntimeOpenTest, NoPollersIsRejectedBeforeAnyDeviceWork) {
  RuntimeConfig config;
  config.pollers = 0;
  auto runtime = Runtime::Open(config);
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), StatusCode::kInvalidArgument) << runtime.status().ToString();
  EXPECT_NE(runtime.status().message().find("RuntimeConfig::pollers is 0"), std::string::npos)
      << runtime.status().message();
}

}  // namespace
}  // namespace gpuos::runtime
