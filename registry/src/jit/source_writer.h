// Builds generated CUDA C++ line by line, keeping track of physical line
// numbers so that pack code can be wrapped in `#line` directives that point
// at the pack file and directives that point back at the generated file.
#pragma once

#include <string>
#include <string_view>

#include "gpuos/registry/operator_spec.h"

namespace gpuos::registry::jit {

// Appended to the file name of every #line directive of one instantiation
// ("ops.yaml@T=f16"), so compiler messages can say which dtype failed. The
// log rewriter (nvrtc_log.h) strips it again.
inline constexpr std::string_view kInstantiationMarker = "@T=";

class SourceWriter {
 public:
  explicit SourceWriter(std::string program_name) : program_name_(std::move(program_name)) {}

  // Appends `text` and a newline. `text` may span several lines.
  void Line(std::string_view text);
  void Blank() { Line(""); }

  // Appends a pack code block between `#line <block line> "<file><suffix>"`
  // and a directive that maps the following lines back to the generated file
  // (with the same suffix). A block of unknown location (line 0) is copied
  // without directives.
  void PackCode(const CodeBlock& block, const std::string& fallback_file,
                const std::string& suffix);

  // A directive that maps the following lines back to the generated file.
  void RestoreLines(const std::string& suffix);

  const std::string& program_name() const { return program_name_; }
  std::string Take() { return std::move(text_); }

 private:
  std::string program_name_;
  std::string text_;
  int next_line_ = 1;  // physical number of the line written next
};

// `text` as the contents of a C string literal (quotes and backslashes
// escaped, control characters dropped).
std::string QuoteForLineDirective(std::string_view text);

}  // namespace gpuos::registry::jit
