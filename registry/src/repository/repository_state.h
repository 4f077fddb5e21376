// Repository internals shared by the repository_*.cpp files. Private.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gpuos/registry/repository.h"
#include "sqlite_connection.h"

namespace gpuos::registry {

struct Repository::State {
  RepositoryOptions options;
  std::vector<SchemaMigration> migrations;  // the effective list
  sqlite::Connection db;
  bool read_only = false;
  std::string read_only_reason;  // why, for messages
  int schema_version = 0;
  std::mutex mutex;  // serializes every call on the connection

  // kFailedPrecondition "cannot <action>: <path> is read-only (<reason>)".
  Status RequireWritable(std::string_view action) const;
  // One BEGIN IMMEDIATE transaction around `body`, retried while busy.
  // REQUIRES: mutex held.
  Status Write(std::string_view action, const std::function<Status()>& body);
  // One read transaction (a consistent snapshot). REQUIRES: mutex held.
  Status Read(const std::function<Status()>& body);
};

namespace repository_internal {

std::int64_t NowMs();

// A read-only connection for a file whose header cannot be read normally: in
// WAL mode SQLite must create the -shm file next to the database before it
// can read, and when the directory is not writable the only way to read is
// to open the file as immutable (no locking; see docs/repository.md).
// True when the last failure on `db` is the one OpenImmutable works around.
bool CannotInitWal(const sqlite::Connection& db);
Expected<sqlite::Connection> OpenImmutable(const std::string& path);
std::string ActorOrDefault(const std::string& actor);

// Parses a version stored in the database; a bad one is kCorrupt naming `what`.
Expected<SemVer> StoredVersion(const std::string& text, std::string_view what);
Expected<OperatorKind> StoredKind(const std::string& text, std::string_view what);

// The spec stored as JSON; unreadable JSON is kCorrupt naming `what`.
Expected<OperatorSpec> SpecFromStoredJson(const std::string& text, std::string_view what);
// "1.0.0, 1.1.0": the stored versions of `name`, ascending ("" when none).
Expected<std::string> PublishedVersionList(sqlite::Connection& db, const std::string& name);
// kNotFound messages for an unknown operator or version.
Status UnknownOperator(const std::string& name, const std::string& path);
Status UnknownVersion(sqlite::Connection& db, const std::string& name, const SemVer& version);

// Appends one history row. REQUIRES: inside a write transaction.
struct HistoryRow {
  HistoryAction action = HistoryAction::kPublish;
  std::string operator_name;
  std::string pack;
  std::string pack_version;
  std::string from_version;
  std::string to_version;
  std::string actor;
  std::string detail;
};
Status AppendHistory(sqlite::Connection& db, const HistoryRow& row, std::int64_t at_ms);

// Identity of a pack version: the hash of its YAML plus its member operator
// versions (name, version, content hash), independent of member order.
struct PackMember {
  std::string name;
  std::string version;
  std::string content_hash;
};
std::string PackContentHash(const std::string& pack, const std::string& version,
                            const std::string& description, const std::string& source_hash,
                            std::vector<PackMember> members);

}  // namespace repository_internal
}  // namespace gpuos::registry
