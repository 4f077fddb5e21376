// Loads operator packs from YAML (format reference: docs/operator-packs.md).
//
// The loader checks everything the format defines (types, unknown and
// duplicate keys, names, versions, dtypes, kind rules, tests) and returns the
// first problem as an error whose message reads
//   FILE:LINE:COLUMN: error: <field path>: <what is wrong>[; <what to do>]
// e.g. "packs/mine.yaml:14:15: error: operators[1].inputs[0].dtype: unknown
// dtype 'float32' (known: ...)". Line and column are 1-based.
//
// Inputs larger than 4 MiB, and inputs that nest collections deeper than 64
// levels, are rejected before parsing. No function here throws.
//
// Thread safety: the functions are reentrant; they share no state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry {

// Parses one pack from YAML text. `source_name` is used as FILE in error
// messages and in every SourceLocation, and is stored as
// OperatorPack::source_path; the pack's source_text is `yaml_text`.
// Errors: kInvalidArgument for anything wrong with the text (kInternal only
// if yaml-cpp or the allocator throws something unexpected).
Expected<OperatorPack> ParsePack(std::string_view yaml_text, const std::string& source_name);

// Reads and parses the pack file at `path` (source_path = `path`).
// Errors: kNotFound if it does not exist, kIoError if it cannot be read,
// kInvalidArgument for a directory or bad content; each names the path.
Expected<OperatorPack> LoadPackFile(const std::string& path);

// `path` is a pack file (one pack) or a directory: every regular file named
// *.yaml or *.yml directly in it (not in subdirectories), in byte order of
// the file names. Errors as LoadPackFile, and: kNotFound if the directory
// holds no pack file; kInvalidArgument if two packs share a name or an
// operator name appears in two packs (operator names are global).
Expected<std::vector<OperatorPack>> LoadPackPath(const std::string& path);

}  // namespace gpuos::registry
