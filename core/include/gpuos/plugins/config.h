// PluginConfig: the parsed configuration string a plugin factory receives.
//
// Format (docs/plugins.md, "Configuration"): `key=value` entries separated by
// ';' or newlines. Spaces around keys and values are dropped; empty entries and
// entries starting with '#' are ignored. Keys are [A-Za-z0-9_.-]+ and appear at
// most once; values are any text without ';' or a newline. Example:
//   "budget=2G; policy=belady"
//
// Header-only (plugins use it without linking gpuos). Values; thread-compatible.
#pragma once

#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuos/status.h"

namespace gpuos::plugins {

class PluginConfig {
 public:
  PluginConfig() = default;

  static Expected<PluginConfig> Parse(std::string_view text) {
    PluginConfig config;
    int entry_number = 0;
    while (!text.empty()) {
      std::size_t end = text.find_first_of(";\n");
      std::string_view entry = Trim(text.substr(0, end));
      text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
      ++entry_number;
      if (entry.empty() || entry.front() == '#') continue;
      std::size_t equals = entry.find('=');
      if (equals == std::string_view::npos) {
        return InvalidArgument("plugin config entry " + std::to_string(entry_number) + " ('" +
                               std::string(entry) + "') is not of the form key=value");
      }
      std::string_view key = Trim(entry.substr(0, equals));
      std::string_view value = Trim(entry.substr(equals + 1));
      if (!IsValidKey(key)) {
        return InvalidArgument("plugin config entry " + std::to_string(entry_number) + ": key '" +
                               std::string(key) +
                               "' must be non-empty and use only A-Z a-z 0-9 _ . -");
      }
      if (config.Find(key) != nullptr) {
        return InvalidArgument("plugin config key '" + std::string(key) +
                               "' is given twice; keep one");
      }
      config.entries_.emplace_back(std::string(key), std::string(value));
    }
    return config;
  }

  const std::vector<std::pair<std::string, std::string>>& entries() const { return entries_; }

  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // The value of `key`, or nullopt when absent.
  std::optional<std::string> Get(std::string_view key) const {
    const std::string* value = Find(key);
    if (value == nullptr) return std::nullopt;
    return *value;
  }

  std::string GetString(std::string_view key, std::string fallback) const {
    const std::string* value = Find(key);
    return value == nullptr ? std::move(fallback) : *value;
  }

  // Decimal integers; an error names the key when the value is not one.
  Expected<std::int64_t> GetInt64(std::string_view key, std::int64_t fallback) const {
    return GetNumber<std::int64_t>(key, fallback, "an integer");
  }
  Expected<std::uint64_t> GetUint64(std::string_view key, std::uint64_t fallback) const {
    return GetNumber<std::uint64_t>(key, fallback, "an unsigned integer");
  }
  Expected<double> GetDouble(std::string_view key, double fallback) const {
    return GetNumber<double>(key, fallback, "a number");
  }

  // true/false, 1/0, yes/no, on/off.
  Expected<bool> GetBool(std::string_view key, bool fallback) const {
    const std::string* value = Find(key);
    if (value == nullptr) return fallback;
    if (*value == "true" || *value == "1" || *value == "yes" || *value == "on") return true;
    if (*value == "false" || *value == "0" || *value == "no" || *value == "off") return false;
    return InvalidArgument("plugin config key '" + std::string(key) + "' = '" + *value +
                           "' is not a boolean; use true or false");
  }

  // A byte count: an unsigned integer with an optional binary suffix K, M, G
  // or T (1K = 1024), e.g. "512M".
  Expected<std::uint64_t> GetByteSize(std::string_view key, std::uint64_t fallback) const {
    const std::string* value = Find(key);
    if (value == nullptr) return fallback;
    std::string_view digits = *value;
    int shift = 0;
    if (!digits.empty()) {
      switch (digits.back()) {
        case 'K':
          shift = 10;
          break;
        case 'M':
          shift = 20;
          break;
        case 'G':
          shift = 30;
          break;
        case 'T':
          shift = 40;
          break;
        default:
          break;
      }
      if (shift != 0) digits.remove_suffix(1);
    }
    std::optional<std::uint64_t> number = ParseWhole<std::uint64_t>(digits);
    if (!number || *number > (std::numeric_limits<std::uint64_t>::max() >> shift)) {
      return InvalidArgument("plugin config key '" + std::string(key) + "' = '" + *value +
                             "' is not a byte size; write e.g. 1048576, 512M or 2G");
    }
    return *number << shift;
  }

  // OK when every key is in `known`; otherwise names the first stranger and
  // lists the accepted keys, so a typo does not pass silently.
  Status CheckKeys(std::initializer_list<std::string_view> known) const {
    for (const auto& entry : entries_) {
      bool found = false;
      for (std::string_view name : known) found = found || entry.first == name;
      if (found) continue;
      std::string list;
      for (std::string_view name : known) {
        list += list.empty() ? "" : ", ";
        list += name;
      }
      return InvalidArgument("plugin config key '" + entry.first + "' is not known; accepted: " +
                             (list.empty() ? std::string("(none)") : list));
    }
    return Status::Ok();
  }

 private:
  static std::string_view Trim(std::string_view text) {
    constexpr std::string_view kSpace = " \t\r";
    std::size_t first = text.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return {};
    std::size_t last = text.find_last_not_of(kSpace);
    return text.substr(first, last - first + 1);
  }

  static bool IsValidKey(std::string_view key) {
    if (key.empty()) return false;
    for (char c : key) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '-';
      if (!ok) return false;
    }
    return true;
  }

  template <typename T>
  static std::optional<T> ParseWhole(std::string_view text) {
    T number{};
    const char* end = text.data() + text.size();
    auto [ptr, error] = std::from_chars(text.data(), end, number);
    if (text.empty() || error != std::errc() || ptr != end) return std::nullopt;
    return number;
  }

  template <typename T>
  Expected<T> GetNumber(std::string_view key, T fallback, const char* what) const {
    const std::string* value = Find(key);
    if (value == nullptr) return fallback;
    std::optional<T> number = ParseWhole<T>(*value);
    if (!number) {
      return InvalidArgument("plugin config key '" + std::string(key) + "' = '" + *value +
                             "' is not " + what);
    }
    return *number;
  }

  const std::string* Find(std::string_view key) const {
    for (const auto& entry : entries_) {
      if (entry.first == key) return &entry.second;
    }
    return nullptr;
  }

  std::vector<std::pair<std::string, std::string>> entries_;
};

}  // namespace gpuos::plugins
