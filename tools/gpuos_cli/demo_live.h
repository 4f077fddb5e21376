// The live-update part of `gpuos demo` (docs/live-update.md): while a
// workload runs on a runtime opened on the repository, publish a new version
// of one operator (the runtime hears it on its control socket and switches
// images), then roll it back (an alias flip), and show the results change
// and change back, with tasks run, lost and re-run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "../cli_support/output.h"
#include "gpuos/status.h"

namespace gpuos::cli {

// REQUIRES: a GPU. Publishes pack `demo.live` (operator `demo_offset`, a new
// version per run) into `repository_path`. A wrong, lost or re-run result is
// an error after the table is printed.
Expected<nlohmann::json> RunLiveUpdateDemo(const std::string& repository_path, const Output& out);

}  // namespace gpuos::cli
