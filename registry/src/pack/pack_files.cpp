// Reading pack files and directories of packs.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gpuos/registry/pack_loader.h"
#include "pack_parser.h"
#include "yaml_input_guard.h"

namespace gpuos::registry {
namespace {

namespace fs = std::filesystem;

Expected<std::string> ReadPackText(const std::string& path) {
  std::error_code error;
  fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) {
    return NotFound(path +
                    ": error: no such file or directory; give the path of a pack file "
                    "(.yaml) or of a directory of them");
  }
  if (fs::is_directory(status)) {
    return InvalidArgument(path + ": error: is a directory; give the path of a pack file");
  }
  std::uintmax_t size = fs::file_size(path, error);
  if (!error && size > kMaxPackBytes) {
    return InvalidArgument(path + ":1:1: error: the file is " + std::to_string(size) +
                           " bytes; a pack may be at most 4 MiB; split it into several packs");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path + ": error: cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(path + ": error: cannot read: " + std::strerror(errno));
  return text.str();
}

Expected<ParsedPack> LoadParsedPack(const std::string& path) {
  GPUOS_ASSIGN_OR_RETURN(std::string text, ReadPackText(path));
  return ParsePackWithLocations(text, path);
}

bool IsPackFileName(const fs::path& path) {
  std::string extension = path.extension().string();
  return extension == ".yaml" || extension == ".yml";
}

Expected<std::vector<std::string>> ListPackFiles(const std::string& directory) {
  std::error_code error;
  std::vector<std::string> files;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    std::error_code type_error;
    if (IsPackFileName(it->path()) && it->is_regular_file(type_error)) {
      files.push_back(it->path().filename().string());
    }
  }
  if (error) return IoError(directory + ": error: cannot list the directory: " + error.message());
  if (files.empty()) {
    return NotFound(directory + ": error: no pack files (*.yaml, *.yml) in this directory");
  }
  std::sort(files.begin(), files.end());
  for (std::string& file : files) file = (fs::path(directory) / file).string();
  return files;
}

// Pack names are unique, and so are operator names across packs: an
// operator name is global in a repository.
Status CheckUnique(const std::vector<ParsedPack>& packs) {
  std::map<std::string, const ParsedPack*> pack_by_name;
  std::map<std::string, std::pair<const ParsedPack*, SourceLocation>> operator_by_name;
  for (const ParsedPack& parsed : packs) {
    const OperatorPack& pack = parsed.pack;
    auto [other, inserted] = pack_by_name.emplace(pack.name, &parsed);
    if (!inserted) {
      return InvalidArgument(parsed.name_location.ToString() + ": error: name: pack '" + pack.name +
                             "' is also defined in " + other->second->name_location.ToString() +
                             "; pack names must be unique, rename one of them");
    }
    for (std::size_t i = 0; i < pack.operators.size(); ++i) {
      const std::string& name = pack.operators[i].name;
      const SourceLocation& where = parsed.operator_name_locations[i];
      auto [first, fresh] = operator_by_name.emplace(name, std::make_pair(&parsed, where));
      if (!fresh) {
        return InvalidArgument(
            where.ToString() + ": error: operators[" + std::to_string(i) + "].name: operator '" +
            name + "' is also defined in pack '" + first->second.first->pack.name + "' (" +
            first->second.second.ToString() + "); operator names are global, rename one of them");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<OperatorPack> LoadPackFile(const std::string& path) {
  try {
    GPUOS_ASSIGN_OR_RETURN(ParsedPack parsed, LoadParsedPack(path));
    return std::move(parsed.pack);
  } catch (const std::exception& e) {
    return Internal(path + ": error: unexpected failure while loading: " + e.what());
  }
}

Expected<std::vector<OperatorPack>> LoadPackPath(const std::string& path) {
  try {
    std::error_code error;
    std::vector<std::string> files = {path};
    if (fs::is_directory(path, error)) {
      GPUOS_ASSIGN_OR_RETURN(files, ListPackFiles(path));
    }
    std::vector<ParsedPack> parsed;
    for (const std::string& file : files) {
      GPUOS_ASSIGN_OR_RETURN(ParsedPack pack, LoadParsedPack(file));
      parsed.push_back(std::move(pack));
    }
    GPUOS_RETURN_IF_ERROR(CheckUnique(parsed));
    std::vector<OperatorPack> packs;
    for (ParsedPack& pack : parsed) packs.push_back(std::move(pack.pack));
    return packs;
  } catch (const std::exception& e) {
    return Internal(path + ": error: unexpected failure while loading: " + e.what());
  }
}

}  // namespace gpuos::registry
