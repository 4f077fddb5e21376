// PluginHost: loads plugin libraries, lists what is available and creates
// plugin objects by name.
//
// A host starts with the built-in defaults registered as plugins of their own
// ("fifo" scheduler, "unlimited" memory manager, "no_fusion" fusion strategy,
// "persistent" executor), made by the same kind of descriptor a library
// exports, so selecting another plugin of the same kind by name replaces the
// default. Libraries come from LoadLibrary, LoadDirectory and LoadSearchPath
// (configured directories, then GPUOS_PLUGIN_PATH).
//
// Lifetime: a loaded library is never unloaded, for the rest of the process
// (as LLVM does with plugins): descriptors, objects and code stay valid
// whatever the order in which hosts and objects are destroyed. A failed load
// leaves nothing loaded.
//
// Thread safety: all methods may be called concurrently; loads are serialized.
// Objects made by Create are not thread-safe unless their interface says so.
//
// Errors name the library file. docs/plugins.md lists every message.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuos/plugin_abi.h"
#include "gpuos/plugins/executor.h"
#include "gpuos/plugins/frontend.h"
#include "gpuos/plugins/fusion_strategy.h"
#include "gpuos/plugins/memory_manager.h"
#include "gpuos/plugins/plugin_kind.h"
#include "gpuos/plugins/scheduler.h"
#include "gpuos/status.h"

namespace gpuos {

struct PluginInfo {
  std::string name;
  PluginKind kind = PluginKind::kScheduler;
  std::string version;         // the plugin's own version text
  std::string description;     // one line; may be empty
  std::filesystem::path path;  // canonical library path; empty when built in
  bool builtin = false;
  std::uint32_t abi_version = GPUOS_PLUGIN_ABI_VERSION;
};

// Outcome of loading several libraries: one bad library does not stop the
// others, and each failure is kept with a message naming its file.
struct PluginLoadReport {
  std::vector<PluginInfo> loaded;  // loaded now, or already loaded from that path
  std::vector<Status> failures;
  std::vector<std::filesystem::path> skipped;  // entries without the ".so" suffix

  bool ok() const { return failures.empty(); }
  // OK, or the first failure's code with every failure message, one a line.
  Status ToStatus() const;
};

// Unique ownership of one plugin object; destroys it through the descriptor
// that made it (never `delete` across the library boundary). Move-only.
template <typename Interface>
class PluginObject {
 public:
  PluginObject() = default;
  PluginObject(PluginObject&& other) noexcept { *this = std::move(other); }
  PluginObject& operator=(PluginObject&& other) noexcept {
    if (this != &other) {
      reset();
      object_ = std::exchange(other.object_, nullptr);
      destroy_ = std::exchange(other.destroy_, nullptr);
      plugin_name_ = std::move(other.plugin_name_);
    }
    return *this;
  }
  PluginObject(const PluginObject&) = delete;
  PluginObject& operator=(const PluginObject&) = delete;
  ~PluginObject() { reset(); }

  Interface* get() const { return object_; }
  Interface* operator->() const { return object_; }
  Interface& operator*() const { return *object_; }
  explicit operator bool() const { return object_ != nullptr; }

  // Name of the plugin that made the object, for messages.
  const std::string& plugin_name() const { return plugin_name_; }

  void reset() {
    if (object_ != nullptr) destroy_(static_cast<void*>(object_));
    object_ = nullptr;
    destroy_ = nullptr;
  }

 private:
  friend class PluginHost;
  PluginObject(Interface* object, void (*destroy)(void*), std::string plugin_name)
      : object_(object), destroy_(destroy), plugin_name_(std::move(plugin_name)) {}

  Interface* object_ = nullptr;
  void (*destroy_)(void*) = nullptr;
  std::string plugin_name_;
};

// Names of the built-in defaults.
inline constexpr std::string_view kDefaultSchedulerName = "fifo";
inline constexpr std::string_view kDefaultMemoryManagerName = "unlimited";
inline constexpr std::string_view kDefaultFusionStrategyName = "no_fusion";
inline constexpr std::string_view kDefaultExecutorName = "persistent";

// The built-in default of `kind`; empty for kFrontend, which has none.
std::string_view DefaultPluginName(PluginKind kind);

// A plugin chosen by name, with the config string for its factory
// (docs/plugins.md, "Configuration").
struct PluginChoice {
  std::string name;
  std::string config;
};

// Which plugin serves each kind that the runtime uses one of at a time. The
// defaults are the built-ins; a configuration replaces a name to select a
// loaded plugin instead. Frontends are created on demand with Create.
struct PluginSelection {
  PluginChoice scheduler{std::string(kDefaultSchedulerName), ""};
  PluginChoice memory_manager{std::string(kDefaultMemoryManagerName), ""};
  PluginChoice fusion_strategy{std::string(kDefaultFusionStrategyName), ""};
  PluginChoice executor{std::string(kDefaultExecutorName), ""};
};

struct PluginSet {
  PluginObject<plugins::Scheduler> scheduler;
  PluginObject<plugins::MemoryManager> memory_manager;
  PluginObject<plugins::FusionStrategy> fusion_strategy;
  PluginObject<plugins::Executor> executor;
};

// Directories listed in GPUOS_PLUGIN_PATH (':'-separated, empty entries
// ignored), in order; empty when unset.
std::vector<std::filesystem::path> PluginPathFromEnvironment();

class PluginHost {
 public:
  // Registers the built-in plugins.
  PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // Loads one plugin library and registers its plugin. Loading a path that
  // is already loaded returns its info again. Errors: NotFound (no such
  // file), InvalidArgument (not a loadable shared library, with the dynamic
  // loader's message; no entry point; bad descriptor; unknown kind),
  // AbiMismatch (built for another plugin ABI or C++ library),
  // AlreadyExists (another plugin has the name).
  Expected<PluginInfo> LoadLibrary(const std::filesystem::path& path);

  // Loads every regular file ending in ".so" directly inside `directory`, in
  // name order; other entries are skipped (and listed in the report).
  // Errors: NotFound / InvalidArgument when `directory` is missing or not a
  // directory; failures of single libraries are in the report.
  Expected<PluginLoadReport> LoadDirectory(const std::filesystem::path& directory);

  // LoadDirectory for each of `configured_directories`, then each directory
  // of GPUOS_PLUGIN_PATH, each directory once. A missing directory is a
  // failure in the report.
  PluginLoadReport LoadSearchPath(std::span<const std::filesystem::path> configured_directories);

  // Every registered plugin, built-ins included, sorted by kind then name.
  std::vector<PluginInfo> List() const;

  std::optional<PluginInfo> Find(std::string_view name) const;

  // Creates an object of the plugin `name` from `config`. Errors: NotFound
  // (no such plugin; the message lists those of the kind), InvalidArgument
  // (the plugin is of another kind, or its factory rejected the config),
  // Unavailable (the factory lacks a resource), FailedPrecondition (any other
  // factory failure). Messages name the plugin and its library.
  template <typename Interface>
  Expected<PluginObject<Interface>> Create(std::string_view name,
                                           std::string_view config = {}) const {
    GPUOS_ASSIGN_OR_RETURN(RawObject raw, CreateRaw(name, Interface::kKind, config));
    return PluginObject<Interface>(static_cast<Interface*>(raw.object), raw.destroy,
                                   std::move(raw.plugin_name));
  }

  // Creates one object per kind as `selection` says. Errors as Create, with
  // the kind as context.
  Expected<PluginSet> CreateSelected(const PluginSelection& selection) const;

 private:
  struct Registered {
    PluginInfo info;
    const GpuosPluginDescriptor* descriptor = nullptr;
  };
  struct RawObject {
    void* object = nullptr;
    void (*destroy)(void*) = nullptr;
    std::string plugin_name;
  };

  Expected<RawObject> CreateRaw(std::string_view name, PluginKind kind,
                                std::string_view config) const;
  // REQUIRES: mutex_ held.
  Status RegisterLocked(Registered plugin);
  const Registered* FindLocked(std::string_view name) const;

  mutable std::mutex mutex_;
  std::vector<Registered> plugins_;
};

}  // namespace gpuos
