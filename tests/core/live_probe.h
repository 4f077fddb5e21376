// A one-operator pack for live-update tests and benchmarks: probe@1.N.0
// computes out = x + (N + 1), so a result tells which version ran.
#pragma once

#include <cstdint>
#include <string>

#include "gpuos/registry/pack_loader.h"

namespace gpuos::runtime::testing {

// `body` replaces the operator code (e.g. one that does not compile);
// `pack_version` defaults to the operator's (a pack version is immutable:
// publishing an older operator version again takes a new pack version).
inline std::string ProbeYaml(std::uint32_t minor, const std::string& body = "",
                             const std::string& pack_version = "") {
  const std::string version = "1." + std::to_string(minor) + ".0";
  return "gpuos_pack: 1\nname: test.live\nversion: " +
         (pack_version.empty() ? version : pack_version) +
         "\noperators:\n  - name: probe\n    version: " + version +
         "\n    kind: elementwise\n    dtypes: [f32]\n    inputs: [{name: x}]\n"
         "    outputs: [{name: out}]\n    body: \"" +
         (body.empty() ? "out = x + compute_t(" + std::to_string(minor + 1) + ");" : body) + "\"\n";
}

inline Expected<registry::OperatorPack> ProbePack(std::uint32_t minor,
                                                  const std::string& body = "") {
  return registry::ParsePack(ProbeYaml(minor, body), "live_probe.yaml");
}

// What probe@1.`minor`.0 adds.
inline float ProbeIncrement(std::uint32_t minor) { return static_cast<float>(minor + 1); }

}  // namespace gpuos::runtime::testing
