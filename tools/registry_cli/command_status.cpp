// status: the live runtimes that use this repository, and what they report.
#include <chrono>

#include "../cli_support/exit_codes.h"
#include "context.h"
#include "gpuos/control/control_client.h"

namespace gpuos::cli {
namespace {

int RunStatus(const RegistryContext& ctx) {
  const Output out = ctx.out();
  const std::string repository = ctx.DbPath();
  auto report = control::ListRuntimes(repository, std::chrono::milliseconds(2000));
  if (!report.ok()) return out.Fail(report.status());
  nlohmann::json runtimes = nlohmann::json::array();
  for (const auto& answer : report->answers) {
    nlohmann::json j = {{"socket", answer.socket_path.string()}};
    if (!answer.status.ok()) {
      out.Line(answer.socket_path.string() + ": no answer (" + answer.status.message() + ")");
      j["error"] = answer.status.message();
    } else if (!answer.response->ok) {
      const std::string message =
          answer.response->error ? answer.response->error->message : "unknown error";
      out.Line(answer.socket_path.string() + ": error: " + message);
      j["error"] = message;
    } else {
      out.Line(answer.socket_path.string() + ": " + answer.response->result.dump());
      j["status"] = answer.response->result;
    }
    runtimes.push_back(j);
  }
  for (const auto& stale : report->stale_removed) {
    out.Line(stale.string() + ": stale (nothing listening), removed");
  }
  if (report->answers.empty()) {
    out.Line("no live runtime uses " + repository + " (looked in " +
             control::RuntimeDirectory(repository).string() + ")");
  }
  nlohmann::json stale = nlohmann::json::array();
  for (const auto& p : report->stale_removed) stale.push_back(p.string());
  out.Json({{"repository", repository}, {"runtimes", runtimes}, {"stale_removed", stale}});
  return kExitOk;
}

}  // namespace

void AddStatusCommand(CLI::App& app, RegistryContext& ctx) {
  auto* cmd = app.add_subcommand(
      "status",
      "List the live runtimes that use this repository (over their control sockets) and what\n"
      "each reports: its active image and operator versions.");
  cmd->callback([&ctx] { ctx.exit_code = RunStatus(ctx); });
}

}  // namespace gpuos::cli
