// Helpers shared by the plugin tests: library paths and a scratch directory.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

namespace gpuos::plugin_test {

// Paths of the plugin libraries, set by tests/plugins/CMakeLists.txt.
inline const std::filesystem::path kPriorityScheduler = GPUOS_PRIORITY_SCHEDULER_PATH;
inline const std::filesystem::path kBeladyMemoryManager = GPUOS_BELADY_MEMORY_MANAGER_PATH;
inline const std::filesystem::path kWrongAbi = GPUOS_TEST_WRONG_ABI_PATH;
inline const std::filesystem::path kNoEntryPoint = GPUOS_TEST_NO_ENTRY_POINT_PATH;
inline const std::filesystem::path kFailingFactory = GPUOS_TEST_FAILING_FACTORY_PATH;
inline const std::filesystem::path kUnknownKind = GPUOS_TEST_UNKNOWN_KIND_PATH;
inline const std::filesystem::path kNamedFifo = GPUOS_TEST_NAMED_FIFO_PATH;
inline const std::filesystem::path kLineFrontend = GPUOS_TEST_LINE_FRONTEND_PATH;
inline const std::filesystem::path kOldStringAbi = GPUOS_TEST_OLD_STRING_ABI_PATH;

// A fresh directory under the system temp directory, removed on destruction.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("gpuos-plugin-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }

  std::filesystem::path WriteFile(const std::string& name, const std::string& content) const {
    std::filesystem::path file = path_ / name;
    std::ofstream(file) << content;
    return file;
  }

  std::filesystem::path CopyIn(const std::filesystem::path& from, const std::string& name) const {
    std::filesystem::path to = path_ / name;
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
    return to;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace gpuos::plugin_test
