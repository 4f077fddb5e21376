#include "runtime_notify.h"

#include <chrono>

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
  auto report = control::NotifyAll(repository, request, std::chrono::milliseconds(2000));
  if (!report.ok()) {
    out.Warn("could not notify live runtimes: " + report.status().message());
    return answers;
  }
  for (const auto& answer : report->answers) {
    std::string error;
    answers.push_back(AnswerToJson(answer, &error));
    if (error.empty()) {
      out.Line("  notified the runtime at " + answer.socket_path.string());
    } else {
      out.Warn("runtime at " + answer.socket_path.string() + ": " + error);
    }
  }
  return answers;
}

}  // namespace gpuos::cli
