// status: the live runtimes that use this repository, and what they report.
#include <chrono>

#include "../cli_support/exit_codes.h"
#include "context.h"
#include "gpuos/control/control_client.h"
#include "runtime_notify.h"

namespace gpuos::cli {
namespace {

int RunStatus(const RegistryContext& ctx) {
  const Output out = ctx.out();
  const std::string repository = ctx.DbPath();
  auto report = control::ListRuntimes(repository, std::chrono::milliseconds(2000));
  if (!report.ok()) return out.Fail(report.status());
  nlohmann::json runtimes = nlohmann::json::array();
  for (const auto& answer : report->answers) {
    std::string error;
    runtimes.push_back(AnswerToJson(answer, &error));
    out.Line(answer.socket_path.string() + ": " +
             (error.empty() ? answer.response->result.dump() : error));
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
