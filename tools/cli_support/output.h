// How command-line tools report: human text on stdout, or one JSON document
// with --json; errors always on stderr as "<tool>: error: <message>" (and, with
// --json, also as {"error": {"code": ..., "message": ...}} on stdout).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gpuos/status.h"

namespace gpuos::cli {

// Pretty JSON; invalid UTF-8 in strings is replaced, never thrown on.
std::string Dump(const nlohmann::json& doc);

class Output {
 public:
  Output(std::string tool, bool json) : tool_(std::move(tool)), json_(json) {}

  bool json() const { return json_; }

  // Prints `doc` when in JSON mode; does nothing otherwise.
  void Json(const nlohmann::json& doc) const;
  // Prints a line when in text mode; does nothing in JSON mode.
  void Line(const std::string& text) const;
  // Prints a warning on stderr (both modes).
  void Warn(const std::string& text) const;
  // Reports a failure and returns its exit code.
  int Fail(const Status& status) const;

 private:
  std::string tool_;
  bool json_;
};

}  // namespace gpuos::cli
