#include "yaml_input_guard.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "operator_rules.h"

namespace gpuos::registry {
namespace {

// A line-by-line approximation of the YAML lexer, just enough to count how
// deep collections nest: it skips comments, quoted scalars and the content
// of block scalars (`|`, `>`), counts flow brackets, and tracks block
// indentation levels and `- ` sequence entries.
class NestingScanner {
 public:
  // Returns the 0-based line and column where nesting first exceeds the
  // limit, or line -1 when it never does.
  std::pair<int, int> Scan(std::string_view text) {
    int line_number = 0;
    std::size_t start = 0;
    while (start <= text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      int column = ScanLine(line);
      if (column >= 0) return {line_number, column};
      ++line_number;
      start = end + 1;
    }
    return {-1, -1};
  }

 private:
  static int IndentOf(std::string_view line) {
    std::size_t i = line.find_first_not_of(' ');
    return i == std::string_view::npos ? -1 : static_cast<int>(i);
  }

  // Returns the column where the limit is exceeded, or -1.
  int ScanLine(std::string_view line) {
    int indent = IndentOf(line);
    if (block_scalar_parent_ != kNoBlockScalar) {
      if (indent < 0) return -1;
      if (block_content_indent_ < 0 && indent > block_scalar_parent_) {
        block_content_indent_ = indent;
      }
      if (block_content_indent_ >= 0 && indent >= block_content_indent_) return -1;
      block_scalar_parent_ = kNoBlockScalar;
    }
    if (indent < 0) return -1;
    std::size_t i = 0;
    int dashes = 0;
    if (quote_ == 0 && flow_depth_ == 0) {
      if (line[indent] == '#') return -1;
      while (!block_indents_.empty() && block_indents_.back() > indent) block_indents_.pop_back();
      if (block_indents_.empty() || block_indents_.back() < indent)
        block_indents_.push_back(indent);
      i = static_cast<std::size_t>(indent);
      // `- - - x` opens one sequence per dash on a single line.
      while (i < line.size() && line[i] == '-' && (i + 1 == line.size() || line[i + 1] == ' ')) {
        ++dashes;
        last_dash_column_ = static_cast<int>(i);
        i = line.find_first_not_of(' ', i + 1);
        if (i == std::string_view::npos) i = line.size();
      }
      at_token_start_ = true;
    }
    int block_depth = static_cast<int>(block_indents_.size()) + dashes;
    if (block_depth > kMaxYamlNesting) return indent;
    int token_column = static_cast<int>(i);
    for (; i < line.size(); ++i) {
      char c = line[i];
      if (quote_ != 0) {
        if (quote_ == '"' && c == '\\') {
          ++i;
        } else if (c == quote_) {
          if (quote_ == '\'' && i + 1 < line.size() && line[i + 1] == '\'') {
            ++i;
          } else {
            quote_ = 0;
            at_token_start_ = false;
          }
        }
        continue;
      }
      if (c == ' ' || c == '\t') continue;
      if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) return -1;
      bool in_flow = flow_depth_ > 0;
      bool next_is_blank = i + 1 == line.size() || line[i + 1] == ' ' || line[i + 1] == '\t';
      if (at_token_start_ || in_flow) {
        if (c == '[' || c == '{') {
          ++flow_depth_;
          if (block_depth + flow_depth_ > kMaxYamlNesting) return static_cast<int>(i);
          at_token_start_ = true;
          continue;
        }
      }
      if (at_token_start_) {
        if (c == '\'' || c == '"') {
          quote_ = c;
          continue;
        }
        if (c == '&' || c == '!') {
          // An anchor or tag precedes the node it names.
          while (i + 1 < line.size() && line[i + 1] != ' ') ++i;
          continue;
        }
        if (!in_flow && (c == '|' || c == '>')) {
          // A block scalar: its content is indented deeper than the node that
          // owns it (the key on this line, or the `- ` entry, or else the
          // key on an earlier line, which is less indented than this one).
          if (token_column < static_cast<int>(i)) {
            block_scalar_parent_ = token_column;
          } else if (dashes > 0) {
            block_scalar_parent_ = last_dash_column_;
          } else {
            block_scalar_parent_ = indent - 1;
          }
          block_content_indent_ = -1;
          return -1;
        }
      }
      if (in_flow) {
        if (c == ']' || c == '}') flow_depth_ = std::max(0, flow_depth_ - 1);
        at_token_start_ =
            c == ',' || c == ']' || c == '}' || ((c == ':' || c == '?') && next_is_blank);
        continue;
      }
      // Block context: a value starts after `: ` or `? `.
      at_token_start_ = (c == ':' || c == '?') && next_is_blank;
    }
    return -1;
  }

  static constexpr int kNoBlockScalar = -2;
  std::vector<int> block_indents_;
  int flow_depth_ = 0;
  char quote_ = 0;
  int block_scalar_parent_ = kNoBlockScalar;
  int block_content_indent_ = -1;
  bool at_token_start_ = true;
  int last_dash_column_ = -1;
};

bool IsMarker(std::string_view line, std::string_view marker) {
  return line.substr(0, 3) == marker && (line.size() == 3 || line[3] == ' ' || line[3] == '\t');
}

}  // namespace

int FindSecondDocument(std::string_view text) {
  bool seen_marker = false;
  bool seen_content = false;
  bool ended = false;
  int line_number = 0;
  for (std::size_t start = 0; start <= text.size(); ++line_number) {
    std::size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (IsMarker(line, "---")) {
      if (seen_marker || seen_content) return line_number;
      seen_marker = true;
      if (line.find_first_not_of(" \t", 3) != std::string_view::npos) seen_content = true;
      continue;
    }
    if (IsMarker(line, "...")) {
      ended = true;
      continue;
    }
    std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    if (line[0] == '%' && !seen_marker && !seen_content) continue;  // a directive
    if (ended) return line_number;
    seen_content = true;
  }
  return -1;
}

Status CheckYamlInput(std::string_view text, const std::string& file) {
  if (text.size() > kMaxPackBytes) {
    return InvalidArgument(file + ":1:1: error: the file is " + std::to_string(text.size()) +
                           " bytes; a pack may be at most 4 MiB; split it into several packs");
  }
  std::size_t bad = rules::FindBadTextByte(text, /*allow_control=*/false);
  if (bad != std::string_view::npos) {
    std::string_view before = text.substr(0, bad);
    std::size_t line_start = before.rfind('\n');
    line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(text[bad]));
    return InvalidArgument(file + ":" +
                           std::to_string(1 + std::count(before.begin(), before.end(), '\n')) +
                           ":" + std::to_string(bad - line_start + 1) + ": error: byte " + hex +
                           " is not valid here; a pack is UTF-8 text without control "
                           "characters (save the file as UTF-8)");
  }
  auto [line, column] = NestingScanner().Scan(text);
  if (line >= 0) {
    return InvalidArgument(file + ":" + std::to_string(line + 1) + ":" +
                           std::to_string(column + 1) + ": error: collections nest deeper than " +
                           std::to_string(kMaxYamlNesting) +
                           " levels; a pack needs only a few, so the file is rejected before "
                           "parsing; check for unbalanced brackets");
  }
  return Status::Ok();
}

}  // namespace gpuos::registry
