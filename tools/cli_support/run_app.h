// The end of every gpuos tool's main(): parse, run the chosen subcommand,
// and turn what escapes into an exit code (docs/gpuos-registry.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "exit_codes.h"
#include "output.h"

namespace gpuos::cli {

// Parses argv (running the subcommand's callback, which sets *exit_code) and
// returns: *exit_code after a run; 0 for --help/--version; kExitUsage for a
// bad command line; kExitFailure, reported through Output, for an exception
// (a bug: no gpuos API throws).
inline int ParseAndRun(CLI::App& app, int argc, char** argv, const std::string& tool,
                       const bool& json, const int& exit_code) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const std::exception& e) {
    return Output(tool, json).Fail(Internal(std::string("unexpected error: ") + e.what()));
  }
  return exit_code;
}

}  // namespace gpuos::cli
