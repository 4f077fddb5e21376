#include "schema.h"

#include <fmt/format.h>

#include "gpuos/registry/repository.h"

namespace gpuos::registry {
namespace {

// Schema 1. Versions (pack_versions, operator_versions) are immutable: rows
// are only ever inserted, and triggers refuse UPDATE and DELETE. Timestamps
// are Unix milliseconds (UTC). docs/repository.md explains every table.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE packs (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  created_at  INTEGER NOT NULL
);

CREATE TABLE pack_versions (
  id            INTEGER PRIMARY KEY,
  pack_id       INTEGER NOT NULL REFERENCES packs(id),
  version       TEXT NOT NULL,
  description   TEXT NOT NULL,
  source_path   TEXT NOT NULL,
  source_text   TEXT NOT NULL,
  source_hash   TEXT NOT NULL,
  content_hash  TEXT NOT NULL,
  published_at  INTEGER NOT NULL,
  actor         TEXT NOT NULL,
  message       TEXT NOT NULL,
  UNIQUE (pack_id, version)
);

CREATE TABLE operator_versions (
  id               INTEGER PRIMARY KEY,
  name             TEXT NOT NULL,
  version          TEXT NOT NULL,
  kind             TEXT NOT NULL CHECK (kind IN ('elementwise', 'reduction', 'custom')),
  spec_json        TEXT NOT NULL,
  content_hash     TEXT NOT NULL,
  pack_version_id  INTEGER NOT NULL REFERENCES pack_versions(id),
  published_at     INTEGER NOT NULL,
  UNIQUE (name, version)
);

CREATE TABLE pack_version_operators (
  pack_version_id      INTEGER NOT NULL REFERENCES pack_versions(id),
  operator_version_id  INTEGER NOT NULL REFERENCES operator_versions(id),
  PRIMARY KEY (pack_version_id, operator_version_id)
) WITHOUT ROWID;
CREATE INDEX pack_version_operators_by_operator
  ON pack_version_operators(operator_version_id);

CREATE TABLE operators (
  name                 TEXT PRIMARY KEY,
  pack_id              INTEGER NOT NULL REFERENCES packs(id),
  current_version_id   INTEGER NOT NULL REFERENCES operator_versions(id),
  previous_version_id  INTEGER REFERENCES operator_versions(id),
  updated_at           INTEGER NOT NULL,
  CHECK (previous_version_id IS NULL OR previous_version_id <> current_version_id)
);

CREATE TABLE build_cache (
  key           TEXT PRIMARY KEY,
  kind          TEXT NOT NULL CHECK (kind IN ('ltoir', 'cubin')),
  arch          TEXT NOT NULL,
  blob          BLOB NOT NULL,
  blob_hash     TEXT NOT NULL,
  size          INTEGER NOT NULL,
  created_at    INTEGER NOT NULL,
  last_used_at  INTEGER NOT NULL
);
CREATE INDEX build_cache_by_last_used ON build_cache(last_used_at);

CREATE TABLE history (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  at             INTEGER NOT NULL,
  action         TEXT NOT NULL CHECK (action IN ('publish', 'rollback', 'import', 'gc')),
  operator_name  TEXT,
  pack           TEXT,
  pack_version   TEXT,
  from_version   TEXT,
  to_version     TEXT,
  actor          TEXT NOT NULL,
  detail         TEXT NOT NULL
);
CREATE INDEX history_by_operator ON history(operator_name, id);

CREATE TRIGGER pack_versions_no_update BEFORE UPDATE ON pack_versions
BEGIN SELECT RAISE(ABORT, 'pack versions are immutable'); END;
CREATE TRIGGER pack_versions_no_delete BEFORE DELETE ON pack_versions
BEGIN SELECT RAISE(ABORT, 'pack versions are immutable'); END;
CREATE TRIGGER operator_versions_no_update BEFORE UPDATE ON operator_versions
BEGIN SELECT RAISE(ABORT, 'operator versions are immutable'); END;
CREATE TRIGGER operator_versions_no_delete BEFORE DELETE ON operator_versions
BEGIN SELECT RAISE(ABORT, 'operator versions are immutable'); END;
)sql";

}  // namespace

const std::vector<SchemaMigration>& RepositorySchemaMigrations() {
  static const std::vector<SchemaMigration> migrations = {
      {1, "packs, pack and operator versions, aliases, build cache, history", kSchemaV1},
  };
  return migrations;
}

int RepositorySchemaVersion() { return schema::LatestVersion(RepositorySchemaMigrations()); }

namespace schema {

int LatestVersion(const std::vector<SchemaMigration>& migrations) {
  return migrations.empty() ? 0 : migrations.back().version;
}

Expected<HeaderInfo> ReadHeader(sqlite::Connection& db) {
  // One statement, so the three values come from one snapshot even while
  // another process is creating the schema.
  auto select = db.Prepare(
      "SELECT (SELECT application_id FROM pragma_application_id), "
      "(SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema)");
  Expected<bool> row = select.ok() ? select->Step() : Expected<bool>(select.status());
  if (!row.ok()) {
    int rc = sqlite3_extended_errcode(db.get());
    if ((rc & 0xff) == SQLITE_NOTADB) {
      return FailedPrecondition(fmt::format(
          "{} is not a gpuos repository: the file is not an SQLite database; pass the path of a "
          "repository (or of a file to create)",
          db.display_path()));
    }
    return row.status();
  }
  if (!*row)
    return Internal(fmt::format("{}: reading the header returned no row", db.display_path()));
  return HeaderInfo{select->Int(0), select->Int(1), select->Int(2)};
}

Status CheckHeader(const HeaderInfo& header, const std::vector<SchemaMigration>& migrations,
                   const std::string& path) {
  if (header.empty()) return Status::Ok();
  if (header.application_id != kRepositoryApplicationId) {
    if (header.application_id == 0) {
      return FailedPrecondition(fmt::format(
          "{} is not a gpuos repository: it is an SQLite database of another program (it has "
          "{} schema objects and no gpuos application id); use another --db",
          path, header.object_count));
    }
    return FailedPrecondition(
        fmt::format("{} is not a gpuos repository: its SQLite application id is 0x{:08x}, a gpuos "
                    "repository has 0x{:08x}; use another --db",
                    path, static_cast<std::uint32_t>(header.application_id),
                    static_cast<std::uint32_t>(kRepositoryApplicationId)));
  }
  int latest = LatestVersion(migrations);
  if (header.user_version > latest) {
    return FailedPrecondition(fmt::format(
        "{} was created by a newer gpuos (schema {}, this build knows up to {}); upgrade gpuos "
        "or use another --db",
        path, header.user_version, latest));
  }
  if (header.user_version < 1) {
    return FailedPrecondition(fmt::format(
        "{} is not a gpuos repository: it carries the gpuos application id but schema version "
        "{}; it was not written by gpuos, use another --db",
        path, header.user_version));
  }
  return Status::Ok();
}

Expected<int> Migrate(sqlite::Connection& db, const std::vector<SchemaMigration>& migrations,
                      int busy_timeout_ms) {
  int expected = 1;
  for (const SchemaMigration& migration : migrations) {
    if (migration.version != expected++) {
      return Internal(fmt::format("schema migrations must be numbered 1, 2, ... in order; found {}",
                                  migration.version));
    }
  }
  GPUOS_ASSIGN_OR_RETURN(HeaderInfo header, ReadHeader(db));
  GPUOS_RETURN_IF_ERROR(CheckHeader(header, migrations, db.display_path()));
  const int latest = LatestVersion(migrations);
  if (header.user_version == latest) return latest;
  // Another process may be migrating too: the version is read again under
  // the write lock and only the missing steps are applied.
  Status status =
      sqlite::RunTransaction(db, sqlite::TransactionMode::kWrite, busy_timeout_ms, [&]() -> Status {
        GPUOS_ASSIGN_OR_RETURN(HeaderInfo locked, ReadHeader(db));
        GPUOS_RETURN_IF_ERROR(CheckHeader(locked, migrations, db.display_path()));
        if (locked.user_version == latest) return Status::Ok();
        GPUOS_RETURN_IF_ERROR(db.Exec("PRAGMA defer_foreign_keys = ON", "defer foreign keys"));
        for (const SchemaMigration& migration : migrations) {
          if (migration.version <= locked.user_version) continue;
          GPUOS_RETURN_IF_ERROR(db.Exec(
              migration.sql,
              fmt::format("migrate to schema {} ({})", migration.version, migration.description)));
        }
        return db.Exec(fmt::format("PRAGMA application_id = {}; PRAGMA user_version = {}",
                                   kRepositoryApplicationId, latest),
                       "stamp the schema version");
      });
  if (!status.ok()) return status;
  return latest;
}

}  // namespace schema
}  // namespace gpuos::registry
