#include "runtime_notify.h"

#include <chrono>

#include "gpuos/control/control_client.h"

namespace gpuos::cli {

nlohmann::json NotifyRuntimes(const std::string& repository, const control::Request& request,
                              const Output& out) {
  nlohmann::json answers = nlohmann::json::array();
  auto report = control::NotifyAll(repository, request, std::chrono::milliseconds(2000));
  if (!report.ok()) {
    out.Warn("could not notify live runtimes: " + report.status().message());
    return answers;
  }
  for (const auto& answer : report->answers) {
    nlohmann::json j = {{"socket", answer.socket_path.string()}};
    if (!answer.status.ok()) {
      out.Warn("runtime at " + answer.socket_path.string() +
               " did not answer: " + answer.status.message());
      j["error"] = answer.status.message();
    } else if (!answer.response->ok) {
      const std::string message =
          answer.response->error ? answer.response->error->message : "unknown error";
      out.Warn("runtime at " + answer.socket_path.string() + " refused: " + message);
      j["error"] = message;
    } else {
      out.Line("  notified the runtime at " + answer.socket_path.string());
      j["result"] = answer.response->result;
    }
    answers.push_back(j);
  }
  return answers;
}

}  // namespace gpuos::cli
