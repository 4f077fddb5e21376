// The CUDA driver loader: a clear Unavailable error where there is no driver
// (CI, build hosts), real answers where there is one.
#include "gpuos/cuda_driver.h"

#include <gtest/gtest.h>

namespace gpuos {
namespace {

TEST(CudaDriverTest, MissingLibraryIsUnavailableNotACrash) {
  auto driver = OpenCudaDriver("libgpuos_no_such_driver.so.1");
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(
      driver.status().message().find("no CUDA driver: libgpuos_no_such_driver.so.1 not found"),
      std::string::npos)
      << driver.status().message();
}

TEST(CudaDriverTest, ProcessDriverIsConsistent) {
  auto driver = LoadCudaDriver();
  auto again = LoadCudaDriver();
  ASSERT_EQ(driver.ok(), again.ok());
  auto arch = DetectGpuArch(0);
  auto count = CudaDeviceCount();
  if (!driver.ok()) {
    // This is the CI case: every entry point says why, none crashes.
    EXPECT_EQ(driver.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(driver.status().message().rfind("no CUDA", 0), 0u) << driver.status().message();
    EXPECT_EQ(driver.status().message(), again.status().message());
    ASSERT_FALSE(arch.ok());
    EXPECT_EQ(arch.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(arch.status().message().rfind("no CUDA", 0), 0u) << arch.status().message();
    EXPECT_FALSE(count.ok());
    EXPECT_FALSE(QueryCudaDevice(0).ok());
    return;
  }
  EXPECT_EQ(*driver, *again);
  EXPECT_GE((*driver)->driver_version, 12000);
  if (!count.ok()) {
    EXPECT_EQ(count.status().code(), StatusCode::kUnavailable);
    return;
  }
  ASSERT_TRUE(arch.ok()) << arch.status().ToString();
  EXPECT_EQ(arch->rfind("sm_", 0), 0u);
  auto info = QueryCudaDevice(0);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->name.empty());
  EXPECT_GT(info->multiprocessors, 0);
  EXPECT_EQ(*arch,
            "sm_" + std::to_string(info->compute_major) + std::to_string(info->compute_minor));
  auto out_of_range = QueryCudaDevice(*count);
  EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuos
