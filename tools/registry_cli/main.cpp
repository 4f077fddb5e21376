// gpuos-registry: publish, inspect, roll back and build operators in a gpuos
// repository. docs/gpuos-registry.md is the manual.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "../cli_support/run_app.h"
#include "context.h"
#include "gpuos/environment.h"

namespace gpuos::cli {

std::string RegistryContext::DbPath() const { return db.empty() ? DefaultRegistryPath() : db; }

Expected<std::unique_ptr<registry::Repository>> RegistryContext::Open(bool create,
                                                                      bool read_only) const {
  const std::string path = DbPath();
  std::error_code ec;
  if (!create && !std::filesystem::exists(path, ec)) {
    return NotFound("no repository at " + path +
                    "; publish a pack to create one, or pass --db / set GPUOS_REGISTRY");
  }
  registry::RepositoryOptions options;
  options.path = path;
  options.create_if_missing = create;
  options.read_only = read_only;
  return registry::Repository::Open(options);
}

Status ParseOperatorRef(const std::string& ref, std::string* name,
                        std::optional<registry::SemVer>* version) {
  auto at = ref.find('@');
  *name = ref.substr(0, at);
  version->reset();
  if (name->empty()) return InvalidArgument("operator reference '" + ref + "' has no name");
  if (at != std::string::npos) {
    auto parsed = registry::SemVer::Parse(ref.substr(at + 1));
    if (!parsed.ok()) {
      return InvalidArgument("operator reference '" + ref + "': " + parsed.status().message());
    }
    *version = *parsed;
  }
  return Status::Ok();
}

}  // namespace gpuos::cli

int main(int argc, char** argv) {
  using namespace gpuos::cli;
  RegistryContext ctx;
  CLI::App app{
      "gpuos-registry: publish, inspect, roll back and build gpuos operators.\n"
      "The repository is one SQLite file: --db, else $GPUOS_REGISTRY, else\n"
      "$XDG_DATA_HOME/gpuos/registry.db. Manual: docs/gpuos-registry.md.",
      "gpuos-registry"};
  app.set_version_flag("--version", std::string("gpuos-registry ") + GPUOS_VERSION);
  app.add_option("--db", ctx.db, "repository file (default: $GPUOS_REGISTRY or the data dir)");
  app.add_flag("--json", ctx.json, "print one JSON document instead of text");
  app.require_subcommand(1);
  app.fallthrough();
  app.footer(
      "Exit codes: 0 ok, 1 failure, 2 usage, 3 not found, 4 conflict, 5 invalid input,\n"
      "6 compile error, 7 repository unusable, 8 unavailable, 9 verify found problems.");

  AddPublishCommand(app, ctx);
  AddListCommand(app, ctx);
  AddShowCommand(app, ctx);
  AddVersionsCommand(app, ctx);
  AddHistoryCommand(app, ctx);
  AddRollbackCommand(app, ctx);
  AddDiffCommand(app, ctx);
  AddBuildCommand(app, ctx);
  AddVerifyCommand(app, ctx);
  AddGcCommand(app, ctx);
  AddExportCommand(app, ctx);
  AddImportCommand(app, ctx);
  AddStatusCommand(app, ctx);

  return ParseAndRun(app, argc, argv, "gpuos-registry", ctx.json, ctx.exit_code);
}
