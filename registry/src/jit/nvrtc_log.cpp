#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "source_writer.h"
#include "toolchain.h"

namespace gpuos::registry::jit {
namespace {

struct Diagnostic {
  std::string file;  // without the instantiation marker
  std::string line;
  std::string message;
  std::vector<std::string> body;
  std::vector<std::string> dtypes;
};

bool IsSummary(const std::string& line) {
  static const std::regex summary(R"(^\d+ (errors?|catastrophic errors?) detected in .*)");
  return std::regex_match(line, summary) || line == "Compilation terminated.";
}

}  // namespace

std::string RewriteNvrtcLog(const std::string& log) {
  static const std::regex header(R"(^(.+)\((\d+)\): (.+)$)");
  std::vector<std::string> preamble;
  std::vector<Diagnostic> diagnostics;
  std::istringstream in(log);
  std::string text;
  while (std::getline(in, text)) {
    std::smatch match;
    if (std::regex_match(text, match, header)) {
      Diagnostic d;
      d.file = match[1];
      d.line = match[2];
      d.message = match[3];
      const std::size_t marker = d.file.rfind(kInstantiationMarker);
      if (marker != std::string::npos) {
        d.dtypes.push_back(d.file.substr(marker + kInstantiationMarker.size()));
        d.file.resize(marker);
      }
      diagnostics.push_back(std::move(d));
    } else if (IsSummary(text)) {
      continue;
    } else if (diagnostics.empty()) {
      if (!text.empty()) preamble.push_back(text);
    } else {
      diagnostics.back().body.push_back(text);
    }
  }
  // Merge messages that differ only in the instantiation.
  std::vector<Diagnostic> merged;
  for (Diagnostic& d : diagnostics) {
    while (!d.body.empty() && d.body.back().empty()) d.body.pop_back();
    bool found = false;
    for (Diagnostic& m : merged) {
      if (m.file == d.file && m.line == d.line && m.message == d.message && m.body == d.body) {
        m.dtypes.insert(m.dtypes.end(), d.dtypes.begin(), d.dtypes.end());
        found = true;
        break;
      }
    }
    if (!found) merged.push_back(std::move(d));
  }
  std::string out;
  for (const std::string& line : preamble) out += line + "\n";
  for (const Diagnostic& d : merged) {
    out += d.file + ":" + d.line + ": " + d.message;
    if (!d.dtypes.empty()) {
      out += " [T = ";
      for (std::size_t i = 0; i < d.dtypes.size(); ++i) out += (i ? ", " : "") + d.dtypes[i];
      out += "]";
    }
    out += "\n";
    for (const std::string& line : d.body) out += line + "\n";
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace gpuos::registry::jit
