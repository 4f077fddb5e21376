// The repository's on-disk identity and schema: the file header checks and
// the migration runner. Private to gpuos::repository.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpuos/registry/repository_types.h"
#include "gpuos/status.h"
#include "sqlite_connection.h"

namespace gpuos::registry::schema {

// What the file header says.
struct HeaderInfo {
  std::int64_t application_id = 0;
  std::int64_t user_version = 0;
  std::int64_t object_count = 0;  // rows of sqlite_schema

  bool empty() const { return application_id == 0 && user_version == 0 && object_count == 0; }
};

// Reads the header. A file that is not SQLite fails with kFailedPrecondition
// "<path> is not a gpuos repository: ...".
Expected<HeaderInfo> ReadHeader(sqlite::Connection& db);

// Checks that `header` belongs to a gpuos repository this build can use with
// `migrations`: an empty database, or our application id with a schema
// version not newer than the last migration.
Status CheckHeader(const HeaderInfo& header, const std::vector<SchemaMigration>& migrations,
                   const std::string& path);

// Applies the migrations newer than the file's user_version in one
// BEGIN IMMEDIATE transaction and stamps application_id and user_version.
// Re-reads the version inside the transaction, so concurrent openers migrate
// once. Returns the schema version afterwards.
Expected<int> Migrate(sqlite::Connection& db, const std::vector<SchemaMigration>& migrations,
                      int busy_timeout_ms);

// Number of the newest migration (0 for an empty list).
int LatestVersion(const std::vector<SchemaMigration>& migrations);

}  // namespace gpuos::registry::schema
