// libFuzzer target for the YAML pack loader. Besides crashes and sanitizer
// reports it checks two properties of every input the loader accepts: each
// operator passes ValidateOperator(), and its canonical JSON reads back to
// the same JSON and content hash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/registry/operator_spec_json.h"
#include "gpuos/registry/pack_loader.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "pack_loader_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

void CheckAcceptedPack(const gpuos::registry::OperatorPack& pack) {
  using namespace gpuos::registry;
  for (const OperatorSpec& op : pack.operators) {
    gpuos::Status valid = ValidateOperator(op);
    if (!valid.ok()) Fail("loader accepted an invalid operator", valid.ToString());
    for (bool with_locations : {false, true}) {
      nlohmann::json json = OperatorToJson(op, with_locations);
      auto back = OperatorFromJson(nlohmann::json::parse(json.dump()));
      if (!back.ok()) Fail("canonical JSON does not read back", back.status().ToString());
      if (OperatorToJson(*back, with_locations) != json) Fail("JSON round trip differs", op.name);
      if (OperatorContentHash(*back) != OperatorContentHash(op)) Fail("hash differs", op.name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto pack = gpuos::registry::ParsePack(text, "fuzz.yaml");
  if (pack.ok()) {
    CheckAcceptedPack(*pack);
  } else if (pack.status().message().rfind("fuzz.yaml:", 0) != 0) {
    Fail("error message does not start with the file name", pack.status().message());
  }
  return 0;
}
