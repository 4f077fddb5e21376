// Builds generated CUDA C++ line by line, keeping track of physical line
// numbers so that pack code can be wrapped in `#line` directives that point
// at the pack file and directives that point back at the generated file.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "gpuos/registry/operator_spec.h"

namespace gpuos::registry::jit {

// Appended to the file name of every #line directive of one instantiation
// ("ops.yaml@T=f16"), so compiler messages can say which dtype failed. The
// log rewriter (nvrtc_log.h) strips it again.
inline constexpr std::string_view kInstantiationMarker = "@T=";

// A generated operator's code (fused elementwise, stitched programs):
// `device_code` at namespace scope and the operator's `body`, reported under
// one virtual file in which the body's lines follow the device code's.
struct GeneratedCode {
  std::string device_code;
  int device_code_lines = 0;  // newlines in device_code
  std::string body;
};

// `device_code` with its lines counted (the body is set by the caller).
inline GeneratedCode WithDeviceCode(std::string device_code) {
  GeneratedCode code;
  code.device_code = std::move(device_code);
  for (char ch : code.device_code) code.device_code_lines += ch == '\n' ? 1 : 0;
  return code;
}

// Sets spec's device_code, body and location to `code` in `virtual_file`.
inline void AttachGeneratedCode(GeneratedCode code, const std::string& virtual_file,
                                OperatorSpec* spec) {
  spec->device_code = CodeBlock{std::move(code.device_code), SourceLocation{virtual_file, 1, 1}};
  spec->body =
      CodeBlock{std::move(code.body), SourceLocation{virtual_file, code.device_code_lines + 1, 1}};
  spec->location = SourceLocation{virtual_file, 1, 1};
}

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
