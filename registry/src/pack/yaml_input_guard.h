// Checks run on pack text before yaml-cpp sees it. yaml-cpp parses by
// recursion, so deeply nested input could exhaust the stack; a size cap
// bounds the work per file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gpuos/status.h"

namespace gpuos::registry {

inline constexpr std::size_t kMaxPackBytes = 4u << 20;
inline constexpr int kMaxYamlNesting = 64;

// OK when `text` is at most kMaxPackBytes, is well-formed UTF-8 without
// control characters other than tab, CR and LF, and no part of it nests block or
// flow collections deeper than kMaxYamlNesting. The nesting scan is
// conservative (it may over-count odd but valid YAML, never under-count the
// nesting yaml-cpp would recurse through by more than a factor of two).
// Errors read "FILE:LINE:COLUMN: error: <what>; <what to do>".
Status CheckYamlInput(std::string_view text, const std::string& file);

// The 0-based line where a second YAML document starts (a `---` marker after
// content or after an earlier marker, or content after a `...` marker), or
// -1. The loader parses only the first document with YAML::Load because
// YAML::LoadAll can loop forever on some malformed input (yaml-cpp 0.7, e.g.
// a lone ","), so it finds further documents this way.
int FindSecondDocument(std::string_view text);

}  // namespace gpuos::registry
