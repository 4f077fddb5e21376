#include <iostream>

#include "../cli_support/builtin_packs.h"
#include "../cli_support/exit_codes.h"
#include "context.h"
#include "gpuos/registry/jit_builder.h"
#include "gpuos/registry/pack_loader.h"
#include "runtime_notify.h"

namespace gpuos::cli {
namespace {

struct PublishArgs {
  std::vector<std::string> paths;
  bool builtin = false;
  bool no_compile_check = false;
  std::string arch;
  std::string message;
};

// The architecture the compile check uses: the requested or detected one,
// else sm_90 (a body that compiles for one architecture compiles for all
// that gpuos supports, barring arch-specific intrinsics).
std::string CheckArch(const std::string& requested, const Output& out) {
  auto arch = registry::ResolveTargetArch(requested);
  if (arch.ok()) return *arch;
  if (!requested.empty()) return requested;  // Build reports the bad name
  out.Warn(
      "no GPU to take the architecture from; checking that operators compile for sm_90 "
      "(--arch or GPUOS_ARCH choose another)");
  return "sm_90";
}

nlohmann::json ResultJson(const registry::PublishResult& r) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& op : r.operators) {
    nlohmann::json j = {{"name", op.name},
                        {"version", op.version.ToString()},
                        {"change", registry::AliasChangeName(op.change)},
                        {"new_version", op.new_version}};
    if (op.old_current) j["old_current"] = op.old_current->ToString();
    ops.push_back(j);
  }
  return {{"pack", r.pack},
          {"version", r.pack_version.ToString()},
          {"already_published", r.already_published},
          {"operators", ops},
          {"operators_not_in_pack", r.operators_not_in_pack}};
}

void PrintResult(const registry::PublishResult& r, const Output& out) {
  if (r.already_published) {
    out.Line(r.pack + " " + r.pack_version.ToString() + " is already published (no change)");
    return;
  }
  out.Line("published " + r.pack + " " + r.pack_version.ToString() + " (" +
           std::to_string(r.operators.size()) + " operators)");
  for (const auto& op : r.operators) {
    std::string line =
        "  " + op.name + " " + op.version.ToString() + "  " + registry::AliasChangeName(op.change);
    if (op.change == registry::AliasChange::kUpdated && op.old_current) {
      line += " (previous: " + op.old_current->ToString() + ")";
    }
    out.Line(line);
  }
  for (const auto& name : r.operators_not_in_pack) {
    out.Line("  " + name + "  not in this pack version; alias kept");
  }
}

int RunPublish(const PublishArgs& args, const RegistryContext& ctx) {
  const Output out = ctx.out();
  if (args.paths.empty() && !args.builtin) {
    return out.Fail(
        InvalidArgument("nothing to publish: name a pack file or directory, or --builtin"));
  }
  // Everything is read and checked before the repository changes.
  std::vector<registry::OperatorPack> packs;
  if (args.builtin) {
    auto builtin = LoadBuiltinPacks();
    if (!builtin.ok()) return out.Fail(builtin.status());
    packs = std::move(*builtin);
  }
  for (const auto& path : args.paths) {
    auto loaded = registry::LoadPackPath(path);
    if (!loaded.ok()) return out.Fail(loaded.status());
    for (auto& p : *loaded) packs.push_back(std::move(p));
  }
  // The compile check runs before the repository is created or changed; it
  // uses the repository's build cache when there already is one.
  auto existing = ctx.Open(/*create=*/false);
  if (!existing.ok() && existing.status().code() != StatusCode::kNotFound) {
    return out.Fail(existing.status());
  }
  if (existing.ok() && (*existing)->read_only()) {
    return out.Fail(FailedPrecondition("repository " + (*existing)->path() +
                                       " is read-only; nothing was published"));
  }
  nlohmann::json check_json = nullptr;
  if (!args.no_compile_check) {
    std::vector<registry::OperatorSpec> ops;
    for (const auto& p : packs) ops.insert(ops.end(), p.operators.begin(), p.operators.end());
    registry::InMemoryBuildCache scratch_cache;
    registry::BuildCache* cache = &scratch_cache;
    if (existing.ok() && !(*existing)->read_only()) cache = existing->get();
    registry::JitOptions jit_options;
    jit_options.arch = CheckArch(args.arch, out);
    jit_options.progress =
        ctx.json ? registry::ProgressMode::kQuiet : registry::ProgressMode::kAuto;
    registry::JitBuilder builder(cache, jit_options);
    registry::BuildStats stats;
    Status compiled = builder.Compile(ops, &stats);
    if (!compiled.ok()) {
      return out.Fail(compiled.WithContext("compile check failed; nothing was published"));
    }
    check_json = {{"arch", stats.arch},
                  {"compiled", stats.compiled},
                  {"cache_hits", stats.ltoir_cache_hits},
                  {"seconds", stats.total_seconds}};
    out.Line("compile check (" + stats.arch + "): " + std::to_string(ops.size()) +
             " operators ok, " + std::to_string(stats.compiled) + " compiled, " +
             std::to_string(stats.ltoir_cache_hits) + " from cache");
  }
  auto repo = existing.ok() ? std::move(existing) : ctx.Open(/*create=*/true);
  if (!repo.ok()) return out.Fail(repo.status());

  nlohmann::json results = nlohmann::json::array();
  registry::PublishOptions options;
  options.message = args.message;
  // Live runtimes hear about every operator whose current version moved,
  // also when a later pack of this command fails (earlier ones are committed).
  control::Request notice;
  notice.command = control::Command::kPublished;
  notice.repository = (*repo)->path();
  auto notify = [&]() -> nlohmann::json {
    if (notice.operators.empty()) return nlohmann::json::array();
    return NotifyRuntimes((*repo)->path(), notice, out);
  };
  for (const auto& pack : packs) {
    auto result = (*repo)->Publish(pack, options);
    if (!result.ok()) {
      if (!results.empty()) {
        out.Warn(std::to_string(results.size()) +
                 " pack(s) before this one were published; each pack is its own transaction");
      }
      notify();
      return out.Fail(result.status().WithContext("publishing " + pack.source_path));
    }
    PrintResult(*result, out);
    results.push_back(ResultJson(*result));
    for (const auto& op : result->operators) {
      if (op.change != registry::AliasChange::kUnchanged) {
        notice.operators.push_back({op.name, op.version.ToString()});
      }
    }
  }
  nlohmann::json notified = notify();
  out.Json({{"repository", (*repo)->path()},
            {"compile_check", check_json},
            {"packs", results},
            {"notified", notified}});
  return kExitOk;
}

}  // namespace

void AddPublishCommand(CLI::App& app, RegistryContext& ctx) {
  auto args = std::make_shared<PublishArgs>();
  auto* cmd = app.add_subcommand(
      "publish",
      "Validate, compile-check and publish operator packs (a .yaml file or a directory of\n"
      "them). Each pack is one transaction; an operator whose version changes becomes\n"
      "current and its old current version becomes previous.");
  cmd->add_option("paths", args->paths, "pack files or directories");
  cmd->add_flag("--builtin", args->builtin, "also publish the packs built into gpuos");
  cmd->add_option("--arch", args->arch,
                  "architecture for the compile check (default: the GPU's, else sm_90)");
  cmd->add_flag("--no-compile-check", args->no_compile_check,
                "publish without compiling the operators first");
  cmd->add_option("-m,--message", args->message, "note kept in the history");
  cmd->callback([args, &ctx] { ctx.exit_code = RunPublish(*args, ctx); });
}

}  // namespace gpuos::cli
