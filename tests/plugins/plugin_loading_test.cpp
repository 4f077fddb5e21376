// Loading plugin libraries: success, every refusal, and directory scans.
#include <gtest/gtest.h>

#include "gpuos/plugin_host.h"
#include "plugin_test_support.h"

namespace gpuos {
namespace {

using plugin_test::ScratchDirectory;
namespace fs = std::filesystem;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PluginLoadingTest, LoadsExamplePluginAndDescribesIt) {
  PluginHost host;
  Expected<PluginInfo> info = host.LoadLibrary(plugin_test::kPriorityScheduler);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->name, "priority");
  EXPECT_EQ(info->kind, PluginKind::kScheduler);
  EXPECT_EQ(info->version, "1.0.0");
  EXPECT_FALSE(info->builtin);
  EXPECT_EQ(info->path, fs::canonical(plugin_test::kPriorityScheduler));
  EXPECT_EQ(info->abi_version, GPUOS_PLUGIN_ABI_VERSION);
  ASSERT_TRUE(host.Find("priority").has_value());
  EXPECT_EQ(host.Find("priority")->path, info->path);
}

TEST(PluginLoadingTest, LoadingTheSameFileTwiceIsHarmless) {
  PluginHost host;
  ASSERT_TRUE(host.LoadLibrary(plugin_test::kPriorityScheduler).ok());
  Expected<PluginInfo> again = host.LoadLibrary(plugin_test::kPriorityScheduler);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->name, "priority");
  size_t count = 0;
  for (const PluginInfo& plugin : host.List()) count += plugin.name == "priority";
  EXPECT_EQ(count, 1u);
}

TEST(PluginLoadingTest, WrongAbiVersionIsAnAbiMismatchNamingTheFile) {
  PluginHost host;
  Expected<PluginInfo> info = host.LoadLibrary(plugin_test::kWrongAbi);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kAbiMismatch);
  const std::string expected =
      fs::canonical(plugin_test::kWrongAbi).string() + " was built for plugin ABI " +
      std::to_string(GPUOS_PLUGIN_ABI_VERSION + 41) + "; this gpuos uses " +
      std::to_string(GPUOS_PLUGIN_ABI_VERSION) + "; rebuild the plugin against this gpuos";
  EXPECT_EQ(info.status().message(), expected);
  EXPECT_EQ(host.List().size(), 4u) << "nothing but the built-ins is registered";
}

TEST(PluginLoadingTest, OtherCxxStringAbiIsAnAbiMismatch) {
  PluginHost host;
  Expected<PluginInfo> info = host.LoadLibrary(plugin_test::kOldStringAbi);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kAbiMismatch);
  EXPECT_TRUE(Contains(info.status().message(), fs::canonical(plugin_test::kOldStringAbi).string() +
                                                    " was built with another C++ standard library"))
      << info.status().message();
  EXPECT_FALSE(host.Find("priority").has_value());
}

TEST(PluginLoadingTest, LibraryWithoutEntryPointIsRefused) {
  PluginHost host;
  Expected<PluginInfo> info = host.LoadLibrary(plugin_test::kNoEntryPoint);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      Contains(info.status().message(), fs::canonical(plugin_test::kNoEntryPoint).string()));
  EXPECT_TRUE(Contains(info.status().message(), "has no entry point 'gpuos_plugin_descriptor'"))
      << info.status().message();
}

TEST(PluginLoadingTest, TextFileNamedLikeALibraryIsRefusedWithLoaderMessage) {
  ScratchDirectory scratch;
  fs::path fake = scratch.WriteFile("libx.so", "this is not an ELF file\n");
  PluginHost host;
  Expected<PluginInfo> info = host.LoadLibrary(fake);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(info.status().message(), fs::canonical(fake).string()));
  EXPECT_TRUE(Contains(info.status().message(), "cannot be loaded as a shared library"));
  // dlerror() names the file and why: glibc says "invalid ELF header" or
  // "file too short".
  EXPECT_TRUE(Contains(info.status().message(), "libx.so:")) << info.status().message();
}

TEST(PluginLoadingTest, MissingFileIsNotFound) {
  PluginHost host;
  Expected<PluginInfo> info = host.LoadLibrary("/nonexistent/gpuos/libnothing.so");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(info.status().message(), "/nonexistent/gpuos/libnothing.so"));
}

TEST(PluginLoadingTest, UnknownKindIsRefused) {
  PluginHost host;
  Expected<PluginInfo> info = host.LoadLibrary(plugin_test::kUnknownKind);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(info.status().message(), "unknown plugin kind 99"));
  EXPECT_TRUE(Contains(info.status().message(), "scheduler (4)")) << info.status().message();
  EXPECT_FALSE(host.Find("test_unknown_kind").has_value());
}

TEST(PluginLoadingTest, NameOfABuiltinIsADuplicate) {
  PluginHost host;
  Expected<PluginInfo> info = host.LoadLibrary(plugin_test::kNamedFifo);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(Contains(info.status().message(), fs::canonical(plugin_test::kNamedFifo).string()));
  EXPECT_TRUE(Contains(info.status().message(), "'fifo' is already built in"));
  EXPECT_TRUE(host.Find("fifo")->builtin);
}

TEST(PluginLoadingTest, SameNameFromTwoFilesIsADuplicate) {
  ScratchDirectory scratch;
  fs::path copy = scratch.CopyIn(plugin_test::kPriorityScheduler, "libpriority_copy.so");
  PluginHost host;
  ASSERT_TRUE(host.LoadLibrary(plugin_test::kPriorityScheduler).ok());
  Expected<PluginInfo> info = host.LoadLibrary(copy);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(Contains(info.status().message(), fs::canonical(copy).string()));
  EXPECT_TRUE(Contains(info.status().message(),
                       "loaded from " + fs::canonical(plugin_test::kPriorityScheduler).string()))
      << info.status().message();
}

TEST(PluginLoadingTest, DirectoryScanLoadsLibrariesAndSkipsOtherFiles) {
  ScratchDirectory scratch;
  scratch.CopyIn(plugin_test::kPriorityScheduler, "libpriority.so");
  scratch.CopyIn(plugin_test::kBeladyMemoryManager, "libbelady.so");
  scratch.CopyIn(plugin_test::kLineFrontend, "liblines.so.1");  // versioned: skipped
  scratch.WriteFile("README.txt", "not a plugin");
  fs::create_directory(scratch.path() / "nested.so");  // a directory: skipped

  PluginHost host;
  Expected<PluginLoadReport> report = host.LoadDirectory(scratch.path());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << report->ToStatus().ToString();
  ASSERT_EQ(report->loaded.size(), 2u);
  EXPECT_EQ(report->loaded[0].name, "belady");  // name order of the files
  EXPECT_EQ(report->loaded[1].name, "priority");
  ASSERT_EQ(report->skipped.size(), 3u);
  EXPECT_EQ(report->skipped[0].filename(), "README.txt");
  EXPECT_EQ(report->skipped[1].filename(), "liblines.so.1");
  EXPECT_EQ(report->skipped[2].filename(), "nested.so");
  EXPECT_TRUE(host.Find("belady").has_value());
  EXPECT_FALSE(host.Find("test_lines").has_value());
}

TEST(PluginLoadingTest, DirectoryScanReportsBadLibrariesAndLoadsTheRest) {
  ScratchDirectory scratch;
  fs::path wrong = scratch.CopyIn(plugin_test::kWrongAbi, "libwrong.so");
  scratch.CopyIn(plugin_test::kPriorityScheduler, "libpriority.so");
  scratch.WriteFile("libtext.so", "plain text");

  PluginHost host;
  Expected<PluginLoadReport> report = host.LoadDirectory(scratch.path());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->loaded.size(), 1u);
  EXPECT_EQ(report->loaded[0].name, "priority");
  ASSERT_EQ(report->failures.size(), 2u);
  EXPECT_EQ(report->failures[0].code(), StatusCode::kInvalidArgument);  // libtext.so
  EXPECT_EQ(report->failures[1].code(), StatusCode::kAbiMismatch);      // libwrong.so
  Status combined = report->ToStatus();
  EXPECT_FALSE(combined.ok());
  EXPECT_TRUE(Contains(combined.message(), fs::canonical(wrong).string()));
  EXPECT_TRUE(Contains(combined.message(), "libtext.so"));
}

TEST(PluginLoadingTest, MissingDirectoryIsNotFound) {
  PluginHost host;
  Expected<PluginLoadReport> report = host.LoadDirectory("/nonexistent/gpuos-plugins");
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(report.status().message(), "/nonexistent/gpuos-plugins"));
}

TEST(PluginLoadingTest, SearchPathCombinesConfiguredDirectoriesAndEnvironment) {
  ScratchDirectory configured;
  ScratchDirectory from_environment;
  configured.CopyIn(plugin_test::kPriorityScheduler, "libpriority.so");
  from_environment.CopyIn(plugin_test::kBeladyMemoryManager, "libbelady.so");
  const std::string variable =
      ":" + from_environment.path().string() + "::/nonexistent/gpuos-env-dir:" +
      configured.path().string();  // the configured one again: scanned once
  ASSERT_EQ(setenv("GPUOS_PLUGIN_PATH", variable.c_str(), 1), 0);

  std::vector<fs::path> expected_env = {from_environment.path(), "/nonexistent/gpuos-env-dir",
                                        configured.path()};
  EXPECT_EQ(PluginPathFromEnvironment(), expected_env);

  PluginHost host;
  std::vector<fs::path> directories = {configured.path()};
  PluginLoadReport report = host.LoadSearchPath(directories);
  unsetenv("GPUOS_PLUGIN_PATH");

  ASSERT_EQ(report.loaded.size(), 2u);
  EXPECT_EQ(report.loaded[0].name, "priority");
  EXPECT_EQ(report.loaded[1].name, "belady");
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_EQ(report.failures[0].code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(report.failures[0].message(), "/nonexistent/gpuos-env-dir"));
}

TEST(PluginLoadingTest, UnsetPluginPathMeansNoDirectories) {
  unsetenv("GPUOS_PLUGIN_PATH");
  EXPECT_TRUE(PluginPathFromEnvironment().empty());
}

}  // namespace
}  // namespace gpuos
