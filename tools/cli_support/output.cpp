#include "output.h"

#include <iostream>

#include "exit_codes.h"

namespace gpuos::cli {

std::string Dump(const nlohmann::json& doc) {
  // Text from users (messages, paths) may not be UTF-8; never throw on it.
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Output::Json(const nlohmann::json& doc) const {
  if (json_) std::cout << Dump(doc) << "\n";
}

void Output::Line(const std::string& text) const {
  if (!json_) std::cout << text << "\n";
}

void Output::Warn(const std::string& text) const {
  std::cerr << tool_ << ": warning: " << text << "\n";
}

int Output::Fail(const Status& status) const {
  std::cerr << tool_ << ": error: " << status.message() << "\n";
  if (json_) {
    nlohmann::json doc;
    doc["error"] = {{"code", StatusCodeName(status.code())}, {"message", status.message()}};
    std::cout << Dump(doc) << "\n";
  }
  return ExitCodeFor(status);
}

}  // namespace gpuos::cli
