#include "render.h"

#include <sstream>

namespace gpuos::cli {
namespace {

std::string ParamType(const registry::TensorParam& p) {
  return p.dtype ? DTypeName(*p.dtype) : "T";
}

void Code(std::ostringstream& os, const std::string& title, const registry::CodeBlock& block) {
  if (block.empty()) return;
  os << title << ":\n";
  std::istringstream lines(block.code);
  for (std::string line; std::getline(lines, line);) os << "    " << line << "\n";
}

}  // namespace

std::string RenderSpec(const registry::OperatorSpec& spec) {
  std::ostringstream os;
  os << "name: " << spec.name << "\n";
  os << "version: " << spec.version.ToString() << "\n";
  os << "kind: " << registry::OperatorKindName(spec.kind) << "\n";
  if (!spec.description.empty()) os << "description: " << spec.description << "\n";
  os << "dtypes:";
  for (DType d : spec.dtypes) os << " " << DTypeName(d);
  os << "\n";
  for (const auto& p : spec.inputs) os << "input: " << p.name << ": " << ParamType(p) << "\n";
  for (const auto& p : spec.outputs) os << "output: " << p.name << ": " << ParamType(p) << "\n";
  for (const auto& a : spec.attributes) {
    os << "attribute: " << a.name << ": " << registry::AttributeTypeName(a.type);
    if (a.default_value) os << " = " << *a.default_value;
    os << "\n";
  }
  Code(os, "device_code", spec.device_code);
  Code(os, "body", spec.body);
  if (spec.kind == registry::OperatorKind::kReduction) {
    if (!spec.reduction.accumulator.empty()) {
      os << "accumulator: " << spec.reduction.accumulator << "\n";
    }
    Code(os, "init", spec.reduction.init);
    Code(os, "step", spec.reduction.step);
    Code(os, "merge", spec.reduction.merge);
    Code(os, "finish", spec.reduction.finish);
  }
  for (const auto& t : spec.tests) os << "test: " << t.name << " (" << DTypeName(t.dtype) << ")\n";
  return os.str();
}

std::string ShortTime(std::int64_t unix_ms) {
  std::string iso = registry::FormatTimestamp(unix_ms);  // 2024-05-01T12:34:56.789Z
  if (iso.size() >= 19) {
    iso = iso.substr(0, 19);
    iso[10] = ' ';
  }
  return iso;
}

}  // namespace gpuos::cli
