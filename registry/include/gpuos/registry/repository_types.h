// Value types of the operator repository API (repository.h): options and
// results of each operation. Plain values; copy freely.
//
// Timestamps are milliseconds since the Unix epoch, UTC
// (FormatTimestamp renders them as ISO 8601).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry {

// "2024-05-01T12:34:56.789Z".
std::string FormatTimestamp(std::int64_t unix_ms);

// One step of the schema. `version` is the PRAGMA user_version the file has
// after the step; steps are applied in order, all pending steps in one
// transaction. Adding schema v2 means appending one entry to the built-in
// list (schema.cpp). Steps that rebuild tables run with
// PRAGMA defer_foreign_keys=ON (foreign keys are checked at COMMIT).
struct SchemaMigration {
  int version = 0;
  std::string description;
  std::string sql;  // one or more statements
};

// ---- Publish ---------------------------------------------------------------

enum class AliasChange {
  kAdded,      // the operator was not in the repository
  kUpdated,    // current moved to the published version (old current -> previous)
  kUnchanged,  // current already was the published version
};
const char* AliasChangeName(AliasChange change);  // "added", "updated", "unchanged"

struct PublishOptions {
  std::string actor;    // who publishes; empty = DefaultActor()
  std::string message;  // free text kept in the history
  // Test hook: called inside the publish transaction after every write and
  // before COMMIT. A non-OK status rolls the transaction back and is returned.
  std::function<Status()> before_commit;
};

struct PublishedOperator {
  std::string name;
  SemVer version;  // the version in the pack
  AliasChange change = AliasChange::kAdded;
  std::optional<SemVer> old_current;  // current before the publish (not for kAdded)
  bool new_version = false;           // this publish stored the operator version
};

struct PublishResult {
  std::string pack;
  SemVer pack_version;
  // The identical pack version was already published: nothing was changed
  // (not even aliases that were rolled back since) and no history written.
  bool already_published = false;
  std::vector<PublishedOperator> operators;  // in pack order
  // Operators owned by this pack that this pack version does not contain.
  // Their aliases are kept as they are.
  std::vector<std::string> operators_not_in_pack;
};

// ---- Rollback --------------------------------------------------------------

struct RollbackOptions {
  // Version to make current. nullopt = swap current and previous.
  std::optional<SemVer> to;
  std::string actor;  // empty = DefaultActor()
  std::string message;
};

struct RollbackResult {
  std::string name;
  SemVer old_current;
  SemVer current;                  // after the rollback
  std::optional<SemVer> previous;  // after the rollback (= old_current)
};

// ---- Queries ---------------------------------------------------------------

enum class AliasSlot { kNone, kCurrent, kPrevious };
const char* AliasSlotName(AliasSlot slot);  // "", "current", "previous"

struct OperatorSummary {
  std::string name;
  std::string pack;                                // the pack that owns the name
  OperatorKind kind = OperatorKind::kElementwise;  // of the current version
  SemVer current;
  std::optional<SemVer> previous;
  std::int64_t updated_at_ms = 0;  // last alias change
};

struct OperatorVersionInfo {
  std::string name;
  SemVer version;
  OperatorKind kind = OperatorKind::kElementwise;
  std::string content_hash;  // OperatorContentHash of the spec
  std::string pack;          // pack version that first published it
  SemVer pack_version;
  std::int64_t published_at_ms = 0;
  std::string actor;
  AliasSlot slot = AliasSlot::kNone;  // where the alias points at it now
};

struct OperatorVersionRecord {
  OperatorVersionInfo info;
  OperatorSpec spec;      // with source locations as published
  std::string spec_json;  // the stored canonical JSON (with locations)
};

// One operator of the image set: both slots of the dual-slot alias.
struct ImageOperator {
  std::string name;
  std::string pack;
  OperatorSpec current;
  std::string current_hash;
  std::optional<OperatorSpec> previous;
  std::string previous_hash;  // empty when no previous
};

struct PackVersionInfo {
  std::string pack;
  SemVer version;
  std::string description;
  std::string source_path;   // where it was published from
  std::string source_hash;   // ContentHash of the YAML text
  std::string content_hash;  // identity: YAML hash + member operator versions
  std::int64_t published_at_ms = 0;
  std::string actor;
  std::string message;
  std::vector<std::pair<std::string, SemVer>> operators;  // members, by name
};

enum class HistoryAction { kPublish, kRollback, kImport, kGc };
const char* HistoryActionName(HistoryAction action);  // "publish", ...

struct HistoryEntry {
  std::int64_t id = 0;  // increasing in commit order
  std::int64_t at_ms = 0;
  HistoryAction action = HistoryAction::kPublish;
  std::string operator_name;  // empty for pack- or repository-level rows
  std::string pack;           // publish rows
  std::string pack_version;
  std::string from_version;  // alias before (empty = none)
  std::string to_version;    // alias after
  std::string actor;
  std::string detail;  // message, or what was done
};

struct HistoryQuery {
  std::string operator_name;  // empty = every row
  std::size_t limit = 0;      // 0 = all; else only the newest `limit` rows
};

// ---- Build cache, maintenance ----------------------------------------------

struct BuildCacheStats {
  std::int64_t entries = 0;
  std::int64_t bytes = 0;  // sum of blob sizes
};

struct VerifyOptions {
  // Delete cache entries whose bytes fail their hash (they are rebuilt on
  // demand). Nothing else is ever changed by Verify.
  bool remove_corrupt_cache_entries = false;
};

enum class VerifyProblemKind {
  kIntegrity,        // PRAGMA integrity_check
  kForeignKey,       // PRAGMA foreign_key_check
  kPackVersion,      // stored YAML or pack identity hash mismatch
  kOperatorVersion,  // JSON unreadable or content hash mismatch
  kAlias,            // alias pointing at another operator's version
  kCacheBlob,        // blob fails its hash
};
const char* VerifyProblemKindName(VerifyProblemKind kind);  // "integrity", ...

struct VerifyProblem {
  VerifyProblemKind kind = VerifyProblemKind::kIntegrity;
  std::string subject;  // "add@1.0.0", "std.math@0.1.0", cache key, table
  std::string message;
};

struct VerifyReport {
  std::vector<VerifyProblem> problems;
  std::int64_t pack_versions_checked = 0;
  std::int64_t operator_versions_checked = 0;
  std::int64_t aliases_checked = 0;
  std::int64_t cache_entries_checked = 0;
  std::int64_t cache_entries_removed = 0;
  bool ok() const { return problems.empty(); }
};

// Build-cache garbage collection; see docs/repository.md "Garbage collection".
struct GcOptions {
  // Entries not used (Get or Put) for longer than this are removed.
  // nullopt = no age rule.
  std::optional<std::chrono::seconds> max_unused = std::chrono::days(30);
  // After the other rules, least recently used entries are removed until the
  // blobs total at most this many bytes. nullopt = no size rule.
  std::optional<std::int64_t> max_total_bytes;
  // When set: the keys the caller still needs (e.g. the builds of the current
  // and previous operator versions). Every entry not listed is removed; listed
  // entries are never removed by the age or size rules.
  std::optional<std::unordered_set<std::string>> live_keys;
  bool remove_corrupt = true;  // also remove entries failing their hash (reads every blob)
  bool vacuum = false;         // VACUUM afterwards to return space to the file system
  bool dry_run = false;        // count only; change nothing
  std::string actor;           // for the history row; empty = DefaultActor()
};

struct GcResult {
  std::int64_t entries_removed = 0;
  std::int64_t bytes_removed = 0;
  std::int64_t corrupt_removed = 0;  // included in entries_removed
  std::int64_t entries_kept = 0;
  std::int64_t bytes_kept = 0;
  std::int64_t file_bytes_before = 0;  // database file size (vacuum only)
  std::int64_t file_bytes_after = 0;
};

struct ExportOptions {
  bool include_build_cache = true;
  bool overwrite = false;  // replace an existing file at the destination
};

struct ExportResult {
  std::string path;
  std::int64_t file_bytes = 0;
  std::int64_t pack_versions = 0;
  std::int64_t operator_versions = 0;
  std::int64_t cache_entries = 0;
};

struct ImportOptions {
  bool include_build_cache = true;
  std::string actor;  // empty = DefaultActor()
};

// An operator both repositories have, whose aliases differ: the target's are kept.
struct AliasKept {
  std::string name;
  SemVer target_current;
  SemVer source_current;
};

struct ImportResult {
  int source_schema_version = 0;
  bool source_migrated = false;  // the source was older; a migrated copy was read
  std::int64_t pack_versions_added = 0;
  std::int64_t pack_versions_skipped = 0;  // identical ones already present
  std::int64_t operator_versions_added = 0;
  std::int64_t operator_versions_skipped = 0;
  std::vector<std::string> operators_added;  // aliases adopted from the source
  std::vector<AliasKept> aliases_kept;
  std::int64_t cache_entries_added = 0;
  std::int64_t cache_entries_skipped = 0;  // key already present in the target
  std::int64_t cache_entries_corrupt = 0;  // failed their hash in the source; not copied
};

}  // namespace gpuos::registry
