#include "source_writer.h"

#include <algorithm>

namespace gpuos::registry::jit {

std::string QuoteForLineDirective(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) >= 0x20) {
      out += c;
    }
  }
  out += '"';
  return out;
}

void SourceWriter::Line(std::string_view text) {
  text_.append(text);
  text_ += '\n';
  next_line_ += 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

void SourceWriter::RestoreLines(const std::string& suffix) {
  // The directive sits on line next_line_; it names the line after it.
  Line("#line " + std::to_string(next_line_ + 1) + " " +
       QuoteForLineDirective(program_name_ + suffix));
}

void SourceWriter::PackCode(const CodeBlock& block, const std::string& fallback_file,
                            const std::string& suffix) {
  std::string_view code = block.code;
  while (!code.empty() && code.back() == '\n') code.remove_suffix(1);
  if (block.location.line <= 0) {
    Line(code);
    return;
  }
  const std::string& file = block.location.file.empty() ? fallback_file : block.location.file;
  Line("#line " + std::to_string(block.location.line) + " " + QuoteForLineDirective(file + suffix));
  Line(code);
  RestoreLines(suffix);
}

}  // namespace gpuos::registry::jit
