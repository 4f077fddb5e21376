// rollback and diff: moving an alias back, and comparing two versions.
#include <dtl/dtl.hpp>
#include <sstream>

#include "../cli_support/exit_codes.h"
#include "context.h"
#include "render.h"
#include "runtime_notify.h"

namespace gpuos::cli {
namespace {

int RunRollback(const std::string& op, const std::string& to, const std::string& message,
                const RegistryContext& ctx) {
  const Output out = ctx.out();
  registry::RollbackOptions options;
  options.message = message;
  if (!to.empty()) {
    auto v = registry::SemVer::Parse(to);
    if (!v.ok()) return out.Fail(v.status().WithContext("--to"));
    options.to = *v;
  }
  auto repo = ctx.Open(false);
  if (!repo.ok()) return out.Fail(repo.status());
  auto r = (*repo)->Rollback(op, options);
  if (!r.ok()) return out.Fail(r.status());
  out.Line("rolled back " + r->name + ": " + r->old_current.ToString() + " -> " +
           r->current.ToString() +
           (r->previous ? " (previous: " + r->previous->ToString() + ")" : ""));
  control::Request notice;
  notice.command = control::Command::kRolledBack;
  notice.repository = (*repo)->path();
  notice.operators.push_back({r->name, r->current.ToString()});
  nlohmann::json notified = NotifyRuntimes((*repo)->path(), notice, out);
  out.Json({{"name", r->name},
            {"old_current", r->old_current.ToString()},
            {"current", r->current.ToString()},
            {"previous", r->previous ? nlohmann::json(r->previous->ToString()) : nlohmann::json()},
            {"notified", notified}});
  return kExitOk;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int RunDiff(const std::string& op, const std::string& v1, const std::string& v2,
            const RegistryContext& ctx) {
  const Output out = ctx.out();
  auto a_version = registry::SemVer::Parse(v1);
  if (!a_version.ok()) return out.Fail(a_version.status().WithContext("first version"));
  auto b_version = registry::SemVer::Parse(v2);
  if (!b_version.ok()) return out.Fail(b_version.status().WithContext("second version"));
  auto repo = ctx.Open(false, true);
  if (!repo.ok()) return out.Fail(repo.status());
  auto a = (*repo)->GetOperator(op, *a_version);
  if (!a.ok()) return out.Fail(a.status());
  auto b = (*repo)->GetOperator(op, *b_version);
  if (!b.ok()) return out.Fail(b.status());

  std::vector<std::string> a_lines = Lines(RenderSpec(a->spec));
  std::vector<std::string> b_lines = Lines(RenderSpec(b->spec));
  dtl::Diff<std::string, std::vector<std::string>> diff(a_lines, b_lines);
  diff.compose();
  diff.composeUnifiedHunks();
  std::ostringstream text;
  const std::string a_name = op + "@" + a_version->ToString();
  const std::string b_name = op + "@" + b_version->ToString();
  text << "--- " << a_name << "\n+++ " << b_name << "\n";
  diff.printUnifiedFormat(text);
  const bool same = diff.getEditDistance() == 0;
  if (ctx.json) {
    out.Json({{"operator", op},
              {"from", a_version->ToString()},
              {"to", b_version->ToString()},
              {"identical", same},
              {"same_content_hash", a->info.content_hash == b->info.content_hash},
              {"unified_diff", same ? "" : text.str()}});
  } else if (same) {
    out.Line(a_name + " and " + b_name + " are identical");
  } else {
    std::string s = text.str();
    if (!s.empty() && s.back() == '\n') s.pop_back();
    out.Line(s);
  }
  return kExitOk;
}

}  // namespace

void AddRollbackCommand(CLI::App& app, RegistryContext& ctx) {
  struct Args {
    std::string op, to, message;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "rollback",
      "Make the previous version of an operator current again (current and previous swap),\n"
      "or, with --to, any stored version (the old current becomes previous).");
  cmd->add_option("operator", args->op, "operator name")->required();
  cmd->add_option("--to", args->to, "version to make current");
  cmd->add_option("-m,--message", args->message, "note kept in the history");
  cmd->callback(
      [args, &ctx] { ctx.exit_code = RunRollback(args->op, args->to, args->message, ctx); });
}

void AddDiffCommand(CLI::App& app, RegistryContext& ctx) {
  struct Args {
    std::string op, v1, v2;
  };
  auto args = std::make_shared<Args>();
  auto* cmd =
      app.add_subcommand("diff", "Unified diff between two stored versions of an operator.");
  cmd->add_option("operator", args->op, "operator name")->required();
  cmd->add_option("v1", args->v1, "first version")->required();
  cmd->add_option("v2", args->v2, "second version")->required();
  cmd->callback([args, &ctx] { ctx.exit_code = RunDiff(args->op, args->v1, args->v2, ctx); });
}

}  // namespace gpuos::cli
