// The operator repository: one SQLite file holding published packs, immutable
// operator versions, per-operator aliases (current and previous version),
// an audit history and the JIT build cache. docs/repository.md describes the
// schema and the guarantees; this header states the contract of each call.
//
// Concurrency: any number of processes may open the same file. Every change
// (publish, rollback, import, gc, cache put) is one SQLite transaction
// started with BEGIN IMMEDIATE; a writer that finds the file locked waits and
// retries for up to `busy_timeout_ms`, then fails with kUnavailable. Readers
// see committed states only.
//
// Thread safety: a Repository may be used from several threads; calls on one
// object are serialized by an internal mutex. Do not share one across fork().
//
// Errors: every call returns Status/Expected. kNotFound for unknown operators
// or versions, kAlreadyExists for immutability conflicts, kFailedPrecondition
// for a read-only or too-new repository, kCorrupt for data failing its hash,
// kUnavailable when the file stayed locked, kIoError for file system errors.
// Messages name the repository path or the operator concerned.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuos/registry/build_cache.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/registry/repository_types.h"
#include "gpuos/status.h"

namespace gpuos::registry {

// PRAGMA application_id of a gpuos repository: "gpuo" in ASCII.
inline constexpr std::int32_t kRepositoryApplicationId = 0x6770756f;

// The built-in schema migrations, oldest first. The last entry's version is
// the schema this build reads and writes (RepositorySchemaVersion()).
const std::vector<SchemaMigration>& RepositorySchemaMigrations();
int RepositorySchemaVersion();

// Login name of the effective user, else "uid:<n>". Used as the actor of
// changes when none is given.
std::string DefaultActor();

struct RepositoryOptions {
  std::string path;  // e.g. gpuos::DefaultRegistryPath()
  // Open for reading only. Every change fails with kFailedPrecondition
  // naming the path. A file the process cannot write is opened this way too.
  bool read_only = false;
  // Create the file (and its parent directories) when it does not exist.
  bool create_if_missing = true;
  // How long a change waits for another process's transaction to finish.
  int busy_timeout_ms = 10000;
  // Test hook: replaces RepositorySchemaMigrations() (to simulate an older or
  // a newer build). Empty = the built-in list.
  std::vector<SchemaMigration> migrations_for_testing;
};

class Repository final : public BuildCache {
 public:
  // Opens (and creates, migrates) the repository at options.path. Fails when
  // the file is not SQLite or not a gpuos repository, when its schema is newer
  // than this build, or when an older schema cannot be migrated because the
  // file is read-only.
  static Expected<std::unique_ptr<Repository>> Open(const RepositoryOptions& options);

  ~Repository() override;
  Repository(const Repository&) = delete;
  Repository& operator=(const Repository&) = delete;

  const std::string& path() const;
  // True when opened read-only or when the file is not writable.
  bool read_only() const;
  int schema_version() const;

  // ---- Changes (each one transaction) ----

  // Stores `pack` and moves the alias of every operator whose version differs
  // from its current one (previous := current, current := published).
  // Idempotent for an identical pack version. Errors, with nothing changed:
  // kAlreadyExists when pack name@version or an operator name@version is
  // already published with other content (bump the version), or when an
  // operator name belongs to another pack; kInvalidArgument when the pack
  // fails validation. REQUIRES: writable.
  Expected<PublishResult> Publish(const OperatorPack& pack, const PublishOptions& options = {});

  // Without options.to: current and previous swap. With options.to: current
  // := to, previous := old current. Errors: kNotFound (unknown operator or
  // version), kFailedPrecondition (no previous version, or `to` already
  // current). REQUIRES: writable.
  Expected<RollbackResult> Rollback(const std::string& name, const RollbackOptions& options = {});

  // ---- Queries (each reads one consistent snapshot) ----

  Expected<std::vector<OperatorSummary>> ListOperators();  // by name
  // The given version, or the current one when `version` is nullopt.
  Expected<OperatorVersionRecord> GetOperator(const std::string& name,
                                              std::optional<SemVer> version = std::nullopt);
  // Every stored version of `name`, oldest (lowest SemVer) first.
  Expected<std::vector<OperatorVersionInfo>> ListVersions(const std::string& name);
  // Oldest first. An unknown operator name gives an empty list.
  Expected<std::vector<HistoryEntry>> History(const HistoryQuery& query = {});
  // What a kernel image links: for every operator its current and previous
  // version (dual slot), by name.
  Expected<std::vector<ImageOperator>> CurrentOperatorSet();
  // Published pack versions (of `pack`, or of every pack when empty), by
  // pack name then version.
  Expected<std::vector<PackVersionInfo>> ListPackVersions(const std::string& pack = "");
  // The YAML text of a published pack version.
  Expected<std::string> GetPackSource(const std::string& pack, const SemVer& version);

  // ---- BuildCache ----

  // A blob failing its hash is reported absent and deleted (when writable),
  // so the caller rebuilds and Puts again. A hit refreshes the entry's
  // last-used time when it is more than an hour old, best effort (skipped
  // when read-only or when the file is locked).
  Expected<std::optional<BuildArtifact>> Get(const std::string& key) override;
  // REQUIRES: writable; artifact.kind is "ltoir" or "cubin".
  Status Put(const std::string& key, const BuildArtifact& artifact) override;
  Expected<BuildCacheStats> CacheStats();

  // ---- Maintenance ----

  // Checks everything (see VerifyProblemKind); changes nothing unless
  // options.remove_corrupt_cache_entries.
  Expected<VerifyReport> Verify(const VerifyOptions& options = {});
  // Removes build-cache entries by the rules of GcOptions. REQUIRES: writable
  // (unless dry_run).
  Expected<GcResult> Gc(const GcOptions& options = {});
  // Writes a consistent, self-contained copy of the repository to `path`
  // (VACUUM INTO). Works on a read-only repository.
  Expected<ExportResult> Export(const std::string& path, const ExportOptions& options = {});
  // Merges the repository file at `path` into this one, in one transaction;
  // see docs/repository.md "Export and import". A conflicting version
  // (same name@version, other content) fails with kAlreadyExists and imports
  // nothing. REQUIRES: writable.
  Expected<ImportResult> Import(const std::string& path, const ImportOptions& options = {});

 private:
  struct State;
  explicit Repository(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace gpuos::registry
