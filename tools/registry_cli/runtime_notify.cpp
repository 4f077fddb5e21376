#include "runtime_notify.h"

#include <chrono>
#include <cstdio>

#include "gpuos/control/control_client.h"

namespace gpuos::cli {

nlohmann::json AnswerToJson(const control::RuntimeAnswer& answer, std::string* error) {
  nlohmann::json j = {{"socket", answer.socket_path.string()}};
  error->clear();
  if (!answer.status.ok()) {
    *error = "no answer: " + answer.status.message();
  } else if (!answer.response->ok) {
    *error = "refused: " + (answer.response->error ? answer.response->error->message
                                                   : std::string("unknown error"));
  } else {
    j["result"] = answer.response->result;
    return j;
  }
  j["error"] = *error;
  return j;
}

nlohmann::json NotifyRuntimes(const std::string& repository, const control::Request& request,
                              const Output& out) {
  nlohmann::json answers = nlohmann::json::array();
  // A runtime answers after it has switched, which may include building a
  // staged image (seconds when operator code must be compiled).
  auto report = control::NotifyAll(repository, request, std::chrono::seconds(120));
  if (!report.ok()) {
    out.Warn("could not notify live runtimes: " + report.status().message());
    return answers;
  }
  for (const auto& answer : report->answers) {
    std::string error;
    answers.push_back(AnswerToJson(answer, &error));
    if (error.empty()) {
      const nlohmann::json& result = answer.response->result;
      std::string what = result.value("action", std::string("?"));
      if (what == "epoch_switch") {
        char timing[96];
        std::snprintf(timing, sizeof(timing), " (staged in %.1f ms, service gap %.0f us)",
                      result.value("stage_ms", 0.0), result.value("gap_us", 0.0));
        what += timing;
      }
      out.Line("  runtime at " + answer.socket_path.string() + ": " + what);
    } else {
      out.Warn("runtime at " + answer.socket_path.string() + ": " + error);
    }
  }
  return answers;
}

}  // namespace gpuos::cli
