// End-to-end tests of the gpuos binary (demo and doctor) on this machine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "command_runner.h"

namespace gpuos {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

const std::string kTool = std::string(GPUOS_BINARY_DIR) + "/bin/gpuos";

TEST(GpuosCliTest, DoctorReportsToolchainAndGpuState) {
  TempDir dir;
  CommandResult r = RunCommand(kTool + " --db " + dir.path() + "/r.db --json doctor 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.output;
  EXPECT_FALSE(doc["toolchain"]["nvrtc"].get<std::string>().empty());
  EXPECT_TRUE(doc["gpus"].is_array());
  if (doc["gpus"].empty()) {
    EXPECT_FALSE(doc["gpu_error"].get<std::string>().empty());
  }
}

// The main job: publish the built-in packs, build the image, and either run
// it on the GPU or say clearly that there is none. Run twice: the second run
// finds everything published and the image in the cache.
TEST(GpuosCliTest, DemoRunsOnTheEmbeddedDefaults) {
  TempDir dir;
  const std::string cmd = "XDG_DATA_HOME=" + dir.path() + " GPUOS_REGISTRY= GPUOS_ARCH= " + kTool;
  CommandResult first = RunCommand(cmd + " --json demo 2>/dev/null");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto doc = nlohmann::json::parse(first.output, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << first.output;
  EXPECT_EQ(doc["repository"]["path"], dir.path() + "/gpuos/registry.db");
  EXPECT_GE(doc["repository"]["packs"].size(), 2u);
  EXPECT_GT(doc["image"]["entries"].get<int>(), 0);
  EXPECT_TRUE(doc["image"]["warm_build_cache_hit"].get<bool>());
  if (!doc["gpu"]["ran"].get<bool>()) {
    EXPECT_NE(doc["gpu"]["reason"].get<std::string>().find("no CUDA"), std::string::npos);
    EXPECT_EQ(doc["image"]["arch"], "sm_90");
  } else {
    EXPECT_TRUE(doc["gpu"]["correct"].get<bool>());
  }

  CommandResult second = RunCommand(cmd + " demo");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("already published"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("image from the repository's cache"), std::string::npos)
      << second.output;
}

}  // namespace
}  // namespace gpuos
