// Loading plugin libraries with Boost.DLL.

#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <deque>
#include <set>
#include <system_error>

#include "gpuos/plugin_host.h"
#include "plugin_host_internal.h"

namespace gpuos {
namespace {

namespace fs = std::filesystem;

// Libraries are kept for the rest of the process, like LLVM's permanent
// libraries: descriptors and objects point into them, and unloading code whose
// static objects or threads are still referenced is a classic crash at exit.
// Deliberately never destroyed.
void KeepLoadedForever(boost::dll::shared_library library) {
  static std::mutex* const mutex = new std::mutex;
  static auto* const libraries = new std::deque<boost::dll::shared_library>;
  std::lock_guard lock(*mutex);
  libraries->push_back(std::move(library));
}

// Boost.DLL clears dlerror() before reporting a failed load, so the loader's
// own explanation (wrong ELF class, missing dependency, not an ELF file) is
// fetched by repeating the dlopen once.
std::string LoaderMessage(const fs::path& path, const std::error_code& boost_error) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    dlclose(handle);
    return boost_error.message();
  }
  const char* message = dlerror();
  return message == nullptr ? boost_error.message() : std::string(message);
}

bool HasPluginSuffix(const fs::path& path) {
  return path.extension() == boost::dll::shared_library::suffix();
}

}  // namespace

Expected<PluginInfo> PluginHost::LoadLibrary(const fs::path& path) {
  std::error_code error;
  fs::file_status status = fs::status(path, error);
  if (error || !fs::exists(status)) {
    return NotFound(path.string() + ": no such plugin library; check the path");
  }
  if (fs::is_directory(status)) {
    return InvalidArgument(path.string() + ": is a directory; load directories with LoadDirectory");
  }
  fs::path canonical = fs::canonical(path, error);
  if (error) return IoError(path.string() + ": cannot resolve the path: " + error.message());
  const std::string origin = canonical.string();

  std::lock_guard lock(mutex_);
  for (const Registered& plugin : plugins_) {
    if (!plugin.info.builtin && plugin.info.path == canonical) return plugin.info;
  }

  boost::dll::shared_library library;
  try {
    library.load(canonical, error,
                 boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& exception) {
    return InvalidArgument(origin + ": cannot be loaded as a shared library: " + exception.what());
  }
  if (error || !library.is_loaded()) {
    return InvalidArgument(
        origin + ": cannot be loaded as a shared library: " + LoaderMessage(canonical, error) +
        "; a plugin must be a shared library built for this platform with its "
        "dependencies on the loader's path");
  }
  if (!library.has(GPUOS_PLUGIN_ENTRY_POINT_NAME)) {
    return InvalidArgument(origin + ": has no entry point '" GPUOS_PLUGIN_ENTRY_POINT_NAME
                                    "', so it is not a gpuos plugin; plugins define it with "
                                    "GPUOS_EXPORT_PLUGIN (gpuos/plugins/export.h)");
  }
  const GpuosPluginDescriptor* descriptor = nullptr;
  try {
    descriptor = library.get<const GpuosPluginDescriptor*()>(GPUOS_PLUGIN_ENTRY_POINT_NAME)();
  } catch (const std::exception& exception) {
    return InvalidArgument(origin + ": its entry point failed: " + exception.what());
  }
  GPUOS_ASSIGN_OR_RETURN(PluginInfo info, plugin_host_internal::DescribePlugin(descriptor, origin));
  info.path = canonical;
  GPUOS_RETURN_IF_ERROR(RegisterLocked(Registered{info, descriptor}));
  KeepLoadedForever(std::move(library));
  return info;
}

Expected<PluginLoadReport> PluginHost::LoadDirectory(const fs::path& directory) {
  std::error_code error;
  fs::file_status status = fs::status(directory, error);
  if (error || !fs::exists(status)) {
    return NotFound(directory.string() +
                    ": plugin directory does not exist; create it or fix "
                    "the plugin path");
  }
  if (!fs::is_directory(status)) {
    return InvalidArgument(directory.string() +
                           ": is not a directory; plugin paths name "
                           "directories that hold plugin libraries");
  }
  std::vector<fs::path> libraries;
  PluginLoadReport report;
  fs::directory_iterator entries(directory, error);
  for (; !error && entries != fs::directory_iterator(); entries.increment(error)) {
    const fs::directory_entry& entry = *entries;
    std::error_code type_error;
    if (entry.is_regular_file(type_error) && HasPluginSuffix(entry.path())) {
      libraries.push_back(entry.path());
    } else {
      report.skipped.push_back(entry.path());
    }
  }
  if (error) {
    return IoError(directory.string() + ": cannot list the plugin directory: " + error.message());
  }
  std::sort(libraries.begin(), libraries.end());
  std::sort(report.skipped.begin(), report.skipped.end());
  for (const fs::path& library : libraries) {
    Expected<PluginInfo> info = LoadLibrary(library);
    if (info.ok()) {
      report.loaded.push_back(std::move(*info));
    } else {
      report.failures.push_back(info.status());
    }
  }
  return report;
}

PluginLoadReport PluginHost::LoadSearchPath(std::span<const fs::path> configured_directories) {
  std::vector<fs::path> directories(configured_directories.begin(), configured_directories.end());
  for (fs::path& directory : PluginPathFromEnvironment())
    directories.push_back(std::move(directory));

  PluginLoadReport report;
  std::set<fs::path> seen;
  for (const fs::path& directory : directories) {
    std::error_code error;
    fs::path key = fs::weakly_canonical(directory, error);
    if (!seen.insert(error ? directory : key).second) continue;
    Expected<PluginLoadReport> one = LoadDirectory(directory);
    if (!one.ok()) {
      report.failures.push_back(one.status());
      continue;
    }
    auto append = [](auto& to, auto& from) {
      std::move(from.begin(), from.end(), std::back_inserter(to));
    };
    append(report.loaded, one->loaded);
    append(report.failures, one->failures);
    append(report.skipped, one->skipped);
  }
  return report;
}

}  // namespace gpuos
