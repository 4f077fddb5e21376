// Repository::Open: file checks, connection settings, schema migration.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <system_error>
#include <thread>

#include "repository_state.h"
#include "schema.h"

namespace gpuos::registry {
namespace {

namespace fs = std::filesystem;

Status PrepareDirectory(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return Status::Ok();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) {
    return IoError(fmt::format("cannot create the directory {} for the repository {}: {}",
                               parent.string(), path, ec.message()));
  }
  return Status::Ok();
}

Expected<std::string> JournalMode(sqlite::Connection& db, const char* sql) {
  GPUOS_ASSIGN_OR_RETURN(sqlite::Statement statement, db.Prepare(sql));
  GPUOS_ASSIGN_OR_RETURN(bool row, statement.Step());
  return row ? statement.Text(0) : std::string();
}

// Switches the file to WAL (a persistent setting). The switch needs an
// exclusive lock and SQLite does not wait for it through the busy handler,
// so a busy file is retried here until the busy timeout.
Status UseWal(sqlite::Connection& db, int busy_timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(busy_timeout_ms);
  for (;;) {
    auto mode = JournalMode(db, "PRAGMA journal_mode");
    if (mode.ok() && *mode == "wal") return Status::Ok();
    db.clear_busy_seen();
    if (mode.ok()) mode = JournalMode(db, "PRAGMA journal_mode = WAL");
    if (mode.ok() && *mode == "wal") return Status::Ok();
    if (mode.ok() || !db.busy_seen() || Clock::now() >= deadline) {
      return IoError(fmt::format(
          "{}: cannot switch the database to WAL journal mode ({}); check that its directory "
          "is writable",
          db.display_path(), mode.ok() ? "mode stays " + *mode : mode.status().message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

namespace repository_internal {

bool CannotInitWal(const sqlite::Connection& db) {
  int primary = sqlite3_extended_errcode(db.get()) & 0xff;
  return primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN;
}

Expected<sqlite::Connection> OpenImmutable(const std::string& path) {
  // An immutable open ignores the write-ahead log, so it is only correct
  // when the log holds nothing.
  std::error_code ec;
  auto wal_bytes = fs::file_size(path + "-wal", ec);
  if (!ec && wal_bytes > 0) {
    return FailedPrecondition(fmt::format(
        "{} cannot be read: its write-ahead log {}-wal holds changes not yet merged into the "
        "file, and its directory is not writable, so SQLite cannot open the log; open it once "
        "as a user who can write {}",
        path, path, fs::path(path).parent_path().string()));
  }
  return sqlite::Connection::Open(sqlite::FileUri(path, "immutable=1"),
                                  SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, path);
}

}  // namespace repository_internal

Repository::Repository(std::unique_ptr<State> state) : state_(std::move(state)) {}
Repository::~Repository() = default;

const std::string& Repository::path() const { return state_->options.path; }
bool Repository::read_only() const { return state_->read_only; }
int Repository::schema_version() const { return state_->schema_version; }

Expected<std::unique_ptr<Repository>> Repository::Open(const RepositoryOptions& options) {
  if (options.path.empty()) {
    return InvalidArgument("the repository path is empty; pass --db PATH or set GPUOS_REGISTRY");
  }
  if (options.busy_timeout_ms < 0) {
    return InvalidArgument(fmt::format("busy timeout {} ms is negative", options.busy_timeout_ms));
  }
  auto state = std::make_unique<State>();
  state->options = options;
  state->migrations = options.migrations_for_testing.empty() ? RepositorySchemaMigrations()
                                                             : options.migrations_for_testing;
  const std::string& path = options.path;

  std::error_code ec;
  fs::file_status file = fs::status(path, ec);
  if (fs::is_directory(file)) {
    return InvalidArgument(
        fmt::format("{} is a directory; pass the path of a repository file", path));
  }
  if (!fs::exists(file)) {
    if (options.read_only || !options.create_if_missing) {
      return NotFound(
          fmt::format("{}: no gpuos repository there (the file does not exist); "
                      "publish a pack to create it, or pass another --db",
                      path));
    }
    GPUOS_RETURN_IF_ERROR(PrepareDirectory(path));
  }

  int flags = options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  auto connection = sqlite::Connection::Open(path, flags, path);
  if (!connection.ok()) {
    return IoError(
        fmt::format("cannot open {} ({}); check that the file and its directory are "
                    "accessible",
                    path, connection.status().message()));
  }
  state->db = std::move(connection).value();
  state->db.SetBusyTimeout(options.busy_timeout_ms);
  state->read_only = options.read_only || state->db.ReadOnly();
  state->read_only_reason =
      options.read_only ? "opened read-only" : "the file is not writable by this user";

  auto header = schema::ReadHeader(state->db);
  if (!header.ok() && state->read_only && repository_internal::CannotInitWal(state->db)) {
    auto immutable = repository_internal::OpenImmutable(path);
    if (!immutable.ok()) return immutable.status();
    auto retried = schema::ReadHeader(*immutable);
    if (retried.ok()) {
      state->db = std::move(immutable).value();
      state->read_only_reason +=
          "; its directory is not writable either, so it is read as an immutable snapshot";
      header = retried;
    }
  }
  if (!header.ok()) return header.status();
  GPUOS_RETURN_IF_ERROR(schema::CheckHeader(*header, state->migrations, path));

  const int latest = schema::LatestVersion(state->migrations);
  if (state->read_only) {
    if (header->empty()) {
      return FailedPrecondition(fmt::format(
          "{} is not a gpuos repository: the database is empty, and it is read-only ({}) so it "
          "cannot be initialized",
          path, state->read_only_reason));
    }
    if (header->user_version < latest) {
      return FailedPrecondition(fmt::format(
          "{} has schema {}, older than schema {} of this build, and it is read-only ({}) so "
          "it cannot be migrated; open it once writable",
          path, header->user_version, latest, state->read_only_reason));
    }
    state->schema_version = static_cast<int>(header->user_version);
  } else {
    GPUOS_RETURN_IF_ERROR(UseWal(state->db, options.busy_timeout_ms));

    GPUOS_ASSIGN_OR_RETURN(state->schema_version,
                           schema::Migrate(state->db, state->migrations, options.busy_timeout_ms));
  }
  GPUOS_RETURN_IF_ERROR(state->db.Exec("PRAGMA foreign_keys = ON", "enable foreign keys"));
  return std::unique_ptr<Repository>(new Repository(std::move(state)));
}

}  // namespace gpuos::registry
