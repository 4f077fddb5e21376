// State shared by the gpuos-registry subcommands: global options, output,
// and how to open the repository.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "../cli_support/output.h"
#include "gpuos/registry/repository.h"
#include "gpuos/status.h"

namespace gpuos::cli {

struct RegistryContext {
  std::string db;     // --db; empty = DefaultRegistryPath()
  bool json = false;  // --json
  int exit_code = 0;  // set by the subcommand that ran

  Output out() const { return Output("gpuos-registry", json); }
  std::string DbPath() const;

  // Opens the repository. `create`: make it if missing (publish, import);
  // otherwise a missing file is a kNotFound that tells how to create one.
  Expected<std::unique_ptr<registry::Repository>> Open(bool create, bool read_only = false) const;
};

// Each adds one subcommand whose callback sets ctx.exit_code.
void AddPublishCommand(CLI::App& app, RegistryContext& ctx);
void AddListCommand(CLI::App& app, RegistryContext& ctx);
void AddShowCommand(CLI::App& app, RegistryContext& ctx);
void AddVersionsCommand(CLI::App& app, RegistryContext& ctx);
void AddHistoryCommand(CLI::App& app, RegistryContext& ctx);
void AddRollbackCommand(CLI::App& app, RegistryContext& ctx);
void AddDiffCommand(CLI::App& app, RegistryContext& ctx);
void AddBuildCommand(CLI::App& app, RegistryContext& ctx);
void AddVerifyCommand(CLI::App& app, RegistryContext& ctx);
void AddGcCommand(CLI::App& app, RegistryContext& ctx);
void AddExportCommand(CLI::App& app, RegistryContext& ctx);
void AddImportCommand(CLI::App& app, RegistryContext& ctx);
void AddStatusCommand(CLI::App& app, RegistryContext& ctx);

// "add" or "add@1.2.3" -> name and optional version.
Status ParseOperatorRef(const std::string& ref, std::string* name,
                        std::optional<registry::SemVer>* version);

}  // namespace gpuos::cli
