// gpuos: the main job (demo) and diagnostics (doctor). docs/gpuos.md is the manual.
#include <CLI/CLI.hpp>
#include <iostream>

#include "../cli_support/run_app.h"
#include "commands.h"

int main(int argc, char** argv) {
  using namespace gpuos::cli;
  CLI::App app{
      "gpuos: a GPU runtime in which one persistent kernel per GPU drains a task queue.\n"
      "Operators come from YAML packs kept in a repository (see gpuos-registry).",
      "gpuos"};
  app.set_version_flag("--version", std::string("gpuos ") + GPUOS_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  GpuosContext ctx;
  app.add_option("--db", ctx.db, "repository file (default: $GPUOS_REGISTRY or the data dir)");
  app.add_flag("--json", ctx.json, "print one JSON document instead of text");
  AddDemoCommand(app, ctx);
  AddDoctorCommand(app, ctx);
  return ParseAndRun(app, argc, argv, "gpuos", ctx.json, ctx.exit_code);
}
