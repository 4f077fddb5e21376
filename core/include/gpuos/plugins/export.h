// Exporting a C++ plugin: GPUOS_EXPORT_PLUGIN builds the descriptor of
// gpuos/plugin_abi.h from a factory function and defines the entry point.
//
//   #include "gpuos/plugins/export.h"
//   #include "gpuos/plugins/scheduler.h"
//
//   class ShortestFirst final : public gpuos::plugins::Scheduler { ... };
//
//   gpuos::Expected<std::unique_ptr<ShortestFirst>> MakeShortestFirst(
//       const gpuos::plugins::PluginConfig& config) { ... }
//
//   GPUOS_EXPORT_PLUGIN(gpuos::plugins::Scheduler, "shortest_first", "1.0.0",
//                       "Runs the smallest tasks first", MakeShortestFirst)
//
// The factory receives the parsed config string and returns the object or a
// Status; an InvalidArgument status is reported to the host as a config error,
// Unavailable as a missing resource, anything else as a failure. Exceptions
// thrown by the factory are caught and reported as failures; methods of the
// interfaces are noexcept, so an exception escaping one terminates the
// process: catch inside and return a Status.
//
// Header-only; one GPUOS_EXPORT_PLUGIN per shared library.
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include "gpuos/plugin_abi.h"
#include "gpuos/plugins/config.h"
#include "gpuos/status.h"

namespace gpuos::plugins {
namespace export_detail {

// Writes prefix + message, truncated to the buffer, always NUL-terminated.
inline void WriteMessage(std::string_view prefix, std::string_view message, char* buffer,
                         std::size_t capacity) noexcept {
  if (buffer == nullptr || capacity == 0) return;
  std::size_t used = 0;
  for (std::string_view part : {prefix, message}) {
    std::size_t length = part.size() < capacity - 1 - used ? part.size() : capacity - 1 - used;
    std::memcpy(buffer + used, part.data(), length);
    used += length;
  }
  buffer[used] = '\0';
}

inline std::int32_t CreateResultFor(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk:
      return GPUOS_PLUGIN_CREATE_OK;
    case StatusCode::kInvalidArgument:
      return GPUOS_PLUGIN_CREATE_INVALID_CONFIG;
    case StatusCode::kUnavailable:
      return GPUOS_PLUGIN_CREATE_UNAVAILABLE;
    default:
      return GPUOS_PLUGIN_CREATE_FAILED;
  }
}

template <typename Interface, auto Factory>
std::int32_t Create(const char* config_text, void** object, char* error,
                    std::size_t error_capacity) noexcept {
  if (object == nullptr) return GPUOS_PLUGIN_CREATE_FAILED;
  *object = nullptr;
  try {
    Expected<PluginConfig> config = PluginConfig::Parse(config_text == nullptr ? "" : config_text);
    if (!config.ok()) {
      WriteMessage("", config.status().message(), error, error_capacity);
      return GPUOS_PLUGIN_CREATE_INVALID_CONFIG;
    }
    auto made = Factory(*config);
    if (!made.ok()) {
      Status status = made.status();
      WriteMessage("", status.message(), error, error_capacity);
      return CreateResultFor(status.code());
    }
    std::unique_ptr<Interface> instance = std::move(made).value();
    if (instance == nullptr) {
      WriteMessage("", "the plugin's factory returned no object and no error", error,
                   error_capacity);
      return GPUOS_PLUGIN_CREATE_FAILED;
    }
    *object = static_cast<void*>(instance.release());
    return GPUOS_PLUGIN_CREATE_OK;
  } catch (const std::exception& exception) {
    WriteMessage("the plugin's factory threw: ", exception.what(), error, error_capacity);
    return GPUOS_PLUGIN_CREATE_FAILED;
  } catch (...) {
    WriteMessage("", "the plugin's factory threw a non-standard exception", error, error_capacity);
    return GPUOS_PLUGIN_CREATE_FAILED;
  }
}

template <typename Interface>
void Destroy(void* object) noexcept {
  delete static_cast<Interface*>(object);
}

}  // namespace export_detail

// The descriptor for a plugin of `Interface`'s kind whose objects `Factory`
// makes. `Factory` is callable as Factory(const PluginConfig&) and returns an
// Expected<std::unique_ptr<T>> with T derived from Interface. The strings must
// have static storage duration.
template <typename Interface, auto Factory>
constexpr GpuosPluginDescriptor MakePluginDescriptor(const char* name, const char* version,
                                                     const char* description) {
  using Result = std::invoke_result_t<decltype(Factory), const PluginConfig&>;
  static_assert(
      std::is_convertible_v<decltype(std::declval<Result>().value()), std::unique_ptr<Interface>>,
      "the factory must return Expected<std::unique_ptr<T>> with T derived from the "
      "plugin's interface");
  static_assert(std::has_virtual_destructor_v<Interface>);
  return GpuosPluginDescriptor{
      GPUOS_PLUGIN_ABI_VERSION,
      static_cast<std::uint32_t>(sizeof(GpuosPluginDescriptor)),
      static_cast<std::uint32_t>(Interface::kKind),
      GPUOS_PLUGIN_CXX_ABI_TAG,
      name,
      version,
      description,
      &export_detail::Create<Interface, Factory>,
      &export_detail::Destroy<Interface>,
  };
}

}  // namespace gpuos::plugins

// Defines the library's entry point returning the descriptor built by
// MakePluginDescriptor. Use at namespace scope, once per library.
#define GPUOS_EXPORT_PLUGIN(Interface, name, version, description, factory)                     \
  GPUOS_PLUGIN_ENTRY_POINT {                                                                    \
    static constexpr GpuosPluginDescriptor gpuos_plugin_descriptor_value =                      \
        ::gpuos::plugins::MakePluginDescriptor<Interface, factory>(name, version, description); \
    return &gpuos_plugin_descriptor_value;                                                      \
  }
