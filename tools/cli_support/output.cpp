#include "output.h"

#include <iostream>

#include "exit_codes.h"

namespace gpuos::cli {

void Output::Json(const nlohmann::json& doc) const {
  if (json_) std::cout << doc.dump(2) << "\n";
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
    std::cout << doc.dump(2) << "\n";
  }
  return ExitCodeFor(status);
}

}  // namespace gpuos::cli
