// Helpers shared by the JIT tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "gpuos/embedded_sets.h"
#include "gpuos/registry/jit_builder.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/registry/pack_loader.h"

namespace gpuos::registry::testing {

// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The pack in `yaml`, which must parse (the test fails otherwise).
inline OperatorPack ParsePackOrFail(const std::string& yaml, const std::string& file) {
  auto pack = ParsePack(yaml, file);
  EXPECT_TRUE(pack.ok()) << pack.status().ToString();
  return pack.ok() ? std::move(pack).value() : OperatorPack{};
}

// The operators of the pack in `yaml`.
inline std::vector<OperatorSpec> ParseOperators(const std::string& yaml,
                                                const std::string& file = "test.yaml") {
  return ParsePackOrFail(yaml, file).operators;
}

// Every operator of every built-in pack (operators/*.yaml, embedded).
inline std::vector<OperatorSpec> BuiltinOperators() {
  std::vector<OperatorSpec> ops;
  for (const EmbeddedFile& file : builtin_packs::EmbeddedFiles()) {
    OperatorPack pack =
        ParsePackOrFail(std::string(file.contents), "operators/" + std::string(file.name));
    for (OperatorSpec& op : pack.operators) ops.push_back(std::move(op));
  }
  return ops;
}

// The operator named `name` in `ops`, or nullptr after a test failure.
inline const OperatorSpec* FindOperatorOrFail(const std::vector<OperatorSpec>& ops,
                                              const std::string& name) {
  for (const OperatorSpec& op : ops) {
    if (op.name == name) return &op;
  }
  ADD_FAILURE() << "no operator " << name;
  return nullptr;
}

// Options for tests: a fixed arch and no output on stderr.
inline JitOptions TestOptions(const std::string& arch) {
  JitOptions options;
  options.arch = arch;
  options.progress = ProgressMode::kQuiet;
  return options;
}

// A small pack used by several tests: an elementwise and a reduction.
inline const char* kSmallPackYaml = R"(gpuos_pack: 1
name: test.small
version: 1.0.0
operators:
  - name: axpy
    version: 1.0.0
    kind: elementwise
    dtypes: [f32, f16]
    inputs: [{name: a}, {name: b}]
    outputs: [{name: out}]
    attributes: [{name: alpha, type: f32, default: 2}]
    body: |
      out = alpha * a + b;
  - name: total
    version: 1.0.0
    kind: reduction
    dtypes: [f32]
    inputs: [{name: a}]
    outputs: [{name: out}]
    reduce:
      init: acc = 0;
      step: acc += x;
      merge: acc += other;
)";

}  // namespace gpuos::registry::testing
