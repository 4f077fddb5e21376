#include "gpuos/plugin_host.h"

#include <algorithm>
#include <array>

#include "builtin_plugins/builtin_plugins.h"
#include "gpuos/environment.h"
#include "plugin_host_internal.h"

namespace gpuos {
namespace {

std::string DescribeOrigin(const PluginInfo& info) {
  return info.builtin ? "built in" : info.path.string();
}

Status StatusForCreateResult(std::int32_t result, std::string message) {
  switch (result) {
    case GPUOS_PLUGIN_CREATE_INVALID_CONFIG:
      return InvalidArgument(std::move(message));
    case GPUOS_PLUGIN_CREATE_UNAVAILABLE:
      return Unavailable(std::move(message));
    default:
      return FailedPrecondition(std::move(message));
  }
}

}  // namespace

std::string_view DefaultPluginName(PluginKind kind) {
  switch (kind) {
    case PluginKind::kScheduler:
      return kDefaultSchedulerName;
    case PluginKind::kMemoryManager:
      return kDefaultMemoryManagerName;
    case PluginKind::kFusionStrategy:
      return kDefaultFusionStrategyName;
    case PluginKind::kExecutor:
      return kDefaultExecutorName;
    case PluginKind::kFrontend:
      return {};
  }
  return {};
}

Status PluginLoadReport::ToStatus() const {
  if (failures.empty()) return Status::Ok();
  std::string message;
  for (const Status& failure : failures) {
    if (!message.empty()) message += "\n";
    message += failure.message();
  }
  return Status(failures.front().code(), message);
}

std::vector<std::filesystem::path> PluginPathFromEnvironment() {
  std::vector<std::filesystem::path> directories;
  std::optional<std::string> value = GetEnv("GPUOS_PLUGIN_PATH");
  if (!value) return directories;
  std::string_view rest = *value;
  while (!rest.empty()) {
    std::size_t colon = rest.find(':');
    std::string_view entry = rest.substr(0, colon);
    if (!entry.empty()) directories.emplace_back(entry);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  return directories;
}

PluginHost::PluginHost() {
  std::lock_guard lock(mutex_);
  for (const GpuosPluginDescriptor* descriptor : builtin_plugins::Descriptors()) {
    Expected<PluginInfo> info = plugin_host_internal::DescribePlugin(descriptor, "built-in plugin");
    // A built-in that fails its own checks is a bug in gpuos, caught by the
    // unit tests; registering the others keeps the host usable meanwhile.
    if (!info.ok()) continue;
    info->builtin = true;
    (void)RegisterLocked(Registered{std::move(*info), descriptor});
  }
}

Status PluginHost::RegisterLocked(Registered plugin) {
  if (const Registered* existing = FindLocked(plugin.info.name)) {
    std::string origin = plugin.info.builtin ? "built-in plugin" : plugin.info.path.string();
    return AlreadyExists(origin + ": a plugin named '" + plugin.info.name + "' is already " +
                         (existing->info.builtin ? std::string("built in")
                                                 : "loaded from " + existing->info.path.string()) +
                         "; rename one of them or load only one");
  }
  plugins_.push_back(std::move(plugin));
  return Status::Ok();
}

const PluginHost::Registered* PluginHost::FindLocked(std::string_view name) const {
  for (const Registered& plugin : plugins_) {
    if (plugin.info.name == name) return &plugin;
  }
  return nullptr;
}

std::vector<PluginInfo> PluginHost::List() const {
  std::vector<PluginInfo> infos;
  {
    std::lock_guard lock(mutex_);
    for (const Registered& plugin : plugins_) infos.push_back(plugin.info);
  }
  std::sort(infos.begin(), infos.end(), [](const PluginInfo& a, const PluginInfo& b) {
    return std::pair(a.kind, a.name) < std::pair(b.kind, b.name);
  });
  return infos;
}

std::optional<PluginInfo> PluginHost::Find(std::string_view name) const {
  std::lock_guard lock(mutex_);
  const Registered* plugin = FindLocked(name);
  if (plugin == nullptr) return std::nullopt;
  return plugin->info;
}

Expected<PluginHost::RawObject> PluginHost::CreateRaw(std::string_view name, PluginKind kind,
                                                      std::string_view config) const {
  Registered plugin;
  {
    std::lock_guard lock(mutex_);
    const Registered* found = FindLocked(name);
    if (found == nullptr) {
      std::string available;
      for (const Registered& candidate : plugins_) {
        if (candidate.info.kind != kind) continue;
        available += available.empty() ? "" : ", ";
        available += candidate.info.name;
      }
      return NotFound(
          "no " + std::string(PluginKindName(kind)) + " plugin named '" + std::string(name) +
          "' is loaded; available: " + (available.empty() ? std::string("(none)") : available) +
          "; add its directory to GPUOS_PLUGIN_PATH or the plugin directories");
    }
    plugin = *found;
  }
  const std::string label =
      "plugin '" + plugin.info.name + "' (" + DescribeOrigin(plugin.info) + ")";
  if (plugin.info.kind != kind) {
    return InvalidArgument(label + " is a " + PluginKindName(plugin.info.kind) + ", not a " +
                           PluginKindName(kind) + "; choose a " + PluginKindName(kind) + " plugin");
  }
  std::array<char, GPUOS_PLUGIN_ERROR_CAPACITY> error{};
  void* object = nullptr;
  const std::string config_text(config);
  std::int32_t result =
      plugin.descriptor->create(config_text.c_str(), &object, error.data(), error.size());
  error.back() = '\0';
  if (result != GPUOS_PLUGIN_CREATE_OK) {
    if (object != nullptr) plugin.descriptor->destroy(object);
    std::string reason = error.front() == '\0' ? "(no message)" : std::string(error.data());
    return StatusForCreateResult(
        result, label + " could not create a " + PluginKindName(kind) + ": " + reason);
  }
  if (object == nullptr) {
    return FailedPrecondition(label +
                              " reported success but returned no object; "
                              "this is a bug in the plugin");
  }
  return RawObject{object, plugin.descriptor->destroy, plugin.info.name};
}

Expected<PluginSet> PluginHost::CreateSelected(const PluginSelection& selection) const {
  PluginSet set;
  auto create = [this](const PluginChoice& choice, auto& slot) -> Status {
    using Interface = std::remove_pointer_t<decltype(slot.get())>;
    Expected<PluginObject<Interface>> made = Create<Interface>(choice.name, choice.config);
    if (!made.ok()) {
      return made.status().WithContext(std::string("selected ") + PluginKindName(Interface::kKind));
    }
    slot = std::move(made).value();
    return Status::Ok();
  };
  GPUOS_RETURN_IF_ERROR(create(selection.scheduler, set.scheduler));
  GPUOS_RETURN_IF_ERROR(create(selection.memory_manager, set.memory_manager));
  GPUOS_RETURN_IF_ERROR(create(selection.fusion_strategy, set.fusion_strategy));
  GPUOS_RETURN_IF_ERROR(create(selection.executor, set.executor));
  return set;
}

}  // namespace gpuos
