// Repository::Export: a self-contained snapshot written with VACUUM INTO.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "repository_state.h"

namespace gpuos::registry {

namespace {

namespace fs = std::filesystem;

void RemoveDatabaseFiles(const std::string& path) {
  std::error_code ignored;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix, ignored);
}

Status CountExported(const std::string& path, ExportResult& result) {
  GPUOS_ASSIGN_OR_RETURN(sqlite::Connection copy,
                         sqlite::Connection::Open(path, SQLITE_OPEN_READONLY, path));
  GPUOS_ASSIGN_OR_RETURN(result.pack_versions, copy.QueryInt("SELECT count(*) FROM pack_versions"));
  GPUOS_ASSIGN_OR_RETURN(result.operator_versions,
                         copy.QueryInt("SELECT count(*) FROM operator_versions"));
  GPUOS_ASSIGN_OR_RETURN(result.cache_entries, copy.QueryInt("SELECT count(*) FROM build_cache"));
  return Status::Ok();
}

}  // namespace

Expected<ExportResult> Repository::Export(const std::string& path, const ExportOptions& options) {
  if (path.empty()) return InvalidArgument("export destination path is empty");
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (!options.overwrite) {
      return AlreadyExists(
          fmt::format("{} already exists; choose another file or allow overwriting it", path));
    }
    if (fs::equivalent(path, state_->options.path, ec)) {
      return InvalidArgument(
          fmt::format("cannot export the repository {} onto itself", state_->options.path));
    }
  }
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) {
      return IoError(fmt::format("cannot create the directory {} for the export: {}",
                                 parent.string(), ec.message()));
    }
  }

  // The copy is written beside the destination and renamed over it only when
  // complete, so a failed export never destroys an earlier one.
  const std::string partial = fmt::format("{}.partial-{}", path, ::getpid());
  RemoveDatabaseFiles(partial);
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto write_copy = [&]() -> Status {
    // VACUUM INTO reads one snapshot, so the copy is consistent even while
    // other processes publish; it keeps application_id and user_version.
    GPUOS_ASSIGN_OR_RETURN(sqlite::Statement vacuum, state_->db.Prepare("VACUUM INTO ?"));
    GPUOS_RETURN_IF_ERROR(vacuum.Bind(partial).Run().WithContext("writing " + partial));
    if (!options.include_build_cache) {
      GPUOS_ASSIGN_OR_RETURN(sqlite::Connection copy,
                             sqlite::Connection::Open(partial, SQLITE_OPEN_READWRITE, partial));
      GPUOS_RETURN_IF_ERROR(copy.Exec("DELETE FROM build_cache; VACUUM", "drop the build cache"));
    }
    return Status::Ok();
  };
  Status status = write_copy();
  ExportResult result;
  result.path = path;
  if (status.ok()) status = CountExported(partial, result);
  if (status.ok()) {
    fs::rename(partial, path, ec);
    if (ec) status = IoError(fmt::format("cannot move {} to {}: {}", partial, path, ec.message()));
  }
  if (!status.ok()) {
    RemoveDatabaseFiles(partial);
    return status.WithContext(fmt::format("export of {} to {}", state_->options.path, path));
  }
  result.file_bytes = static_cast<std::int64_t>(fs::file_size(path, ec));
  return result;
}

}  // namespace gpuos::registry
