// Subcommands of the `gpuos` tool.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "../cli_support/output.h"

namespace gpuos::cli {

struct GpuosContext {
  std::string db;  // --db; empty = DefaultRegistryPath()
  bool json = false;
  int exit_code = 0;
  Output out() const { return Output("gpuos", json); }
};

// demo: publish the built-in packs, build (or load) the kernel image, and on a
// GPU run it; without a GPU, do the CPU half and say so.
void AddDemoCommand(CLI::App& app, GpuosContext& ctx);
// doctor: versions, GPU, toolchain, repository, plugin path.
void AddDoctorCommand(CLI::App& app, GpuosContext& ctx);

}  // namespace gpuos::cli
