// Repository::Import: merge another repository file in one transaction.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <system_error>

#include "gpuos/content_hash.h"
#include "gpuos/registry/operator_spec_json.h"
#include "repository_state.h"
#include "schema.h"

namespace gpuos::registry {

using namespace repository_internal;

namespace {

namespace fs = std::filesystem;

// The file being imported, opened for reading; an older schema is migrated
// in a temporary copy (the source itself is never written).
struct ImportSource {
  sqlite::Connection db;
  int schema_version = 0;
  bool migrated = false;
  std::string temporary_copy;

  ~ImportSource() {
    if (!temporary_copy.empty()) {
      db = sqlite::Connection();
      std::error_code ignored;
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        fs::remove(temporary_copy + suffix, ignored);
      }
    }
  }
};

std::string TemporaryCopyPath() {
  static std::atomic<int> counter{0};
  std::error_code ec;
  fs::path directory = fs::temp_directory_path(ec);
  if (ec) directory = ".";
  auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  return (directory / fmt::format("gpuos-import-{}-{}-{}.db", getpid(), stamp, counter++)).string();
}

Status OpenSource(const std::string& path, const std::vector<SchemaMigration>& migrations,
                  int busy_timeout_ms, ImportSource& source) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return NotFound(fmt::format("{}: no repository file to import there", path));
  }
  GPUOS_ASSIGN_OR_RETURN(source.db, sqlite::Connection::Open(path, SQLITE_OPEN_READONLY, path));
  source.db.SetBusyTimeout(busy_timeout_ms);
  auto header = schema::ReadHeader(source.db);
  if (!header.ok() && CannotInitWal(source.db)) {
    auto immutable = OpenImmutable(path);
    if (!immutable.ok()) return immutable.status();
    auto retried = schema::ReadHeader(*immutable);
    if (retried.ok()) {
      source.db = std::move(immutable).value();
      header = retried;
    }
  }
  if (!header.ok()) return header.status();
  if (header->empty()) {
    return FailedPrecondition(
        fmt::format("{} is not a gpuos repository: the database is empty", path));
  }
  GPUOS_RETURN_IF_ERROR(schema::CheckHeader(*header, migrations, path));
  source.schema_version = static_cast<int>(header->user_version);
  if (source.schema_version == schema::LatestVersion(migrations)) return Status::Ok();

  source.temporary_copy = TemporaryCopyPath();
  GPUOS_ASSIGN_OR_RETURN(sqlite::Statement vacuum, source.db.Prepare("VACUUM INTO ?"));
  GPUOS_RETURN_IF_ERROR(vacuum.Bind(source.temporary_copy).Run());
  GPUOS_ASSIGN_OR_RETURN(source.db,
                         sqlite::Connection::Open(source.temporary_copy, SQLITE_OPEN_READWRITE,
                                                  path + " (migrated copy)"));
  GPUOS_ASSIGN_OR_RETURN(int migrated_to, schema::Migrate(source.db, migrations, busy_timeout_ms));
  (void)migrated_to;
  source.migrated = true;
  return Status::Ok();
}

// Copies rows from the source connection into the target connection,
// translating row ids through natural keys (names and versions).
class Merge {
 public:
  Merge(sqlite::Connection& source, sqlite::Connection& target, const std::string& source_path,
        const std::string& target_path, const ImportOptions& options, std::string actor)
      : source_(source),
        target_(target),
        source_path_(source_path),
        target_path_(target_path),
        options_(options),
        actor_(std::move(actor)) {}

  Status Run(ImportResult& result) {
    const ImportResult header{result.source_schema_version, result.source_migrated};
    result = header;
    packs_.clear();
    pack_versions_.clear();
    operator_versions_.clear();
    now_ = NowMs();
    GPUOS_RETURN_IF_ERROR(Packs());
    GPUOS_RETURN_IF_ERROR(PackVersions(result));
    GPUOS_RETURN_IF_ERROR(OperatorVersions(result));
    GPUOS_RETURN_IF_ERROR(Members());
    GPUOS_RETURN_IF_ERROR(Aliases(result));
    if (options_.include_build_cache) GPUOS_RETURN_IF_ERROR(Cache(result));
    return AppendHistory(
        target_,
        {HistoryAction::kImport, "", "", "", "", "", actor_,
         fmt::format("imported {}: {} pack versions, {} operator versions, {} operators, {} "
                     "build-cache entries added",
                     source_path_, result.pack_versions_added, result.operator_versions_added,
                     result.operators_added.size(), result.cache_entries_added)},
        now_);
  }

 private:
  Status Conflict(const std::string& what) {
    return AlreadyExists(fmt::format(
        "cannot import {}: {} in {}; nothing was imported (versions are immutable: bump the "
        "version in one of them)",
        source_path_, what, target_path_));
  }

  Expected<std::optional<std::int64_t>> FindId(const std::string& sql, const std::string& a,
                                               const std::optional<std::string>& b) {
    GPUOS_ASSIGN_OR_RETURN(sqlite::Statement select, target_.Prepare(sql));
    if (b) {
      select.Bind(a, *b);
    } else {
      select.Bind(a);
    }
    GPUOS_ASSIGN_OR_RETURN(bool found, select.Step());
    if (!found) return std::optional<std::int64_t>();
    return std::optional<std::int64_t>(select.Int(0));
  }

  Status Packs() {
    GPUOS_ASSIGN_OR_RETURN(sqlite::Statement select,
                           source_.Prepare("SELECT id, name, created_at FROM packs"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      GPUOS_ASSIGN_OR_RETURN(std::optional<std::int64_t> id,
                             FindId("SELECT id FROM packs WHERE name = ?", select.Text(1), {}));
      if (!id) {
        GPUOS_ASSIGN_OR_RETURN(
            sqlite::Statement insert,
            target_.Prepare("INSERT INTO packs (name, created_at) VALUES (?, ?)"));
        GPUOS_RETURN_IF_ERROR(insert.Bind(select.Text(1), select.Int(2)).Run());
        id = target_.LastInsertRowId();
      }
      packs_[select.Int(0)] = *id;
    }
  }

  Status PackVersions(ImportResult& result) {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        source_.Prepare("SELECT pv.id, pv.pack_id, p.name, pv.version, pv.description, "
                        "pv.source_path, pv.source_text, pv.source_hash, pv.content_hash, "
                        "pv.published_at, pv.actor, pv.message "
                        "FROM pack_versions pv JOIN packs p ON p.id = pv.pack_id"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      const std::string subject =
          fmt::format("pack '{}' version {}", select.Text(2), select.Text(3));
      if (ContentHash(select.Text(6)) != select.Text(7)) {
        return Corrupt(
            fmt::format("cannot import {}: the YAML of {} fails its hash; run "
                        "`gpuos-registry verify` on it; nothing was imported",
                        source_path_, subject));
      }
      GPUOS_ASSIGN_OR_RETURN(const std::int64_t pack_id, Mapped(packs_, select.Int(1), "packs"));
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement existing,
          target_.Prepare(
              "SELECT id, content_hash FROM pack_versions WHERE pack_id = ? AND version = ?"));
      existing.Bind(pack_id, select.Text(3));
      GPUOS_ASSIGN_OR_RETURN(bool exists, existing.Step());
      if (exists) {
        if (existing.Text(1) != select.Text(8)) return Conflict(subject + " differs from the one");
        pack_versions_[select.Int(0)] = existing.Int(0);
        ++result.pack_versions_skipped;
        continue;
      }
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement insert,
          target_.Prepare("INSERT INTO pack_versions (pack_id, version, description, "
                          "source_path, source_text, source_hash, content_hash, published_at, "
                          "actor, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
      insert.Bind(pack_id, select.Text(3), select.Text(4), select.Text(5), select.Text(6),
                  select.Text(7), select.Text(8), select.Int(9), select.Text(10), select.Text(11));
      GPUOS_RETURN_IF_ERROR(insert.Run());
      pack_versions_[select.Int(0)] = target_.LastInsertRowId();
      ++result.pack_versions_added;
    }
  }

  Status OperatorVersions(ImportResult& result) {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        source_.Prepare("SELECT v.id, v.name, v.version, v.kind, v.spec_json, v.content_hash, "
                        "v.pack_version_id, v.published_at, p.name FROM operator_versions v "
                        "JOIN pack_versions pv ON pv.id = v.pack_version_id "
                        "JOIN packs p ON p.id = pv.pack_id"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      const std::string name = select.Text(1);
      const std::string subject = fmt::format("operator '{}' version {}", name, select.Text(2));
      auto spec = SpecFromStoredJson(select.Text(4), name + "@" + select.Text(2));
      if (!spec.ok() || OperatorContentHash(*spec) != select.Text(5)) {
        return Corrupt(
            fmt::format("cannot import {}: {} fails its content hash; run "
                        "`gpuos-registry verify` on it; nothing was imported",
                        source_path_, subject));
      }
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement owner,
          target_.Prepare("SELECT p.name FROM operators o JOIN packs p ON p.id = o.pack_id "
                          "WHERE o.name = ?"));
      owner.Bind(name);
      GPUOS_ASSIGN_OR_RETURN(bool owned, owner.Step());
      if (owned && owner.Text(0) != select.Text(8)) {
        return Conflict(
            fmt::format("operator '{}' belongs to pack '{}' in the source but to pack "
                        "'{}'",
                        name, select.Text(8), owner.Text(0)));
      }
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement existing,
          target_.Prepare(
              "SELECT id, content_hash FROM operator_versions WHERE name = ? AND version = ?"));
      existing.Bind(name, select.Text(2));
      GPUOS_ASSIGN_OR_RETURN(bool exists, existing.Step());
      if (exists) {
        if (existing.Text(1) != select.Text(5)) return Conflict(subject + " differs from the one");
        operator_versions_[select.Int(0)] = existing.Int(0);
        ++result.operator_versions_skipped;
        continue;
      }
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement insert,
          target_.Prepare("INSERT INTO operator_versions (name, version, kind, spec_json, "
                          "content_hash, pack_version_id, published_at) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?)"));
      GPUOS_ASSIGN_OR_RETURN(const std::int64_t pack_version,
                             Mapped(pack_versions_, select.Int(6), "pack_versions"));
      insert.Bind(name, select.Text(2), select.Text(3), select.Text(4), select.Text(5),
                  pack_version, select.Int(7));
      GPUOS_RETURN_IF_ERROR(insert.Run());
      operator_versions_[select.Int(0)] = target_.LastInsertRowId();
      ++result.operator_versions_added;
    }
  }

  Status Members() {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        source_.Prepare("SELECT pack_version_id, operator_version_id FROM pack_version_operators"));
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement insert,
        target_.Prepare("INSERT OR IGNORE INTO pack_version_operators (pack_version_id, "
                        "operator_version_id) VALUES (?, ?)"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      insert.Reset();
      GPUOS_ASSIGN_OR_RETURN(const std::int64_t pack_version,
                             Mapped(pack_versions_, select.Int(0), "pack_versions"));
      GPUOS_ASSIGN_OR_RETURN(const std::int64_t operator_version,
                             Mapped(operator_versions_, select.Int(1), "operator_versions"));
      insert.Bind(pack_version, operator_version);
      GPUOS_RETURN_IF_ERROR(insert.Run());
    }
  }

  Status Aliases(ImportResult& result) {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        source_.Prepare("SELECT o.name, o.pack_id, o.current_version_id, o.previous_version_id, "
                        "c.version, pv.version FROM operators o "
                        "JOIN operator_versions c ON c.id = o.current_version_id "
                        "LEFT JOIN operator_versions pv ON pv.id = o.previous_version_id "
                        "ORDER BY o.name"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      const std::string name = select.Text(0);
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement existing,
          target_.Prepare("SELECT c.version FROM operators o "
                          "JOIN operator_versions c ON c.id = o.current_version_id "
                          "WHERE o.name = ?"));
      existing.Bind(name);
      GPUOS_ASSIGN_OR_RETURN(bool exists, existing.Step());
      if (exists) {
        if (existing.Text(0) != select.Text(4)) {
          AliasKept kept{name};
          GPUOS_ASSIGN_OR_RETURN(kept.target_current, StoredVersion(existing.Text(0), name));
          GPUOS_ASSIGN_OR_RETURN(kept.source_current, StoredVersion(select.Text(4), name));
          result.aliases_kept.push_back(std::move(kept));
        }
        continue;
      }
      std::optional<std::int64_t> previous;
      if (!select.IsNull(3)) {
        GPUOS_ASSIGN_OR_RETURN(previous,
                               Mapped(operator_versions_, select.Int(3), "operator_versions"));
      }
      GPUOS_ASSIGN_OR_RETURN(const std::int64_t pack_id, Mapped(packs_, select.Int(1), "packs"));
      GPUOS_ASSIGN_OR_RETURN(const std::int64_t current,
                             Mapped(operator_versions_, select.Int(2), "operator_versions"));
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement insert,
          target_.Prepare("INSERT INTO operators (name, pack_id, current_version_id, "
                          "previous_version_id, updated_at) VALUES (?, ?, ?, ?, ?)"));
      insert.Bind(name, pack_id, current, previous, now_);
      GPUOS_RETURN_IF_ERROR(insert.Run());
      GPUOS_RETURN_IF_ERROR(
          AppendHistory(target_,
                        {HistoryAction::kImport, name, "", "", "", select.Text(4), actor_,
                         fmt::format("alias imported from {} (previous {})", source_path_,
                                     select.IsNull(5) ? "none" : select.Text(5))},
                        now_));
      result.operators_added.push_back(name);
    }
  }

  Status Cache(ImportResult& result) {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        source_.Prepare("SELECT key, kind, arch, blob, blob_hash, size, created_at, "
                        "last_used_at FROM build_cache"));
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement insert,
        target_.Prepare("INSERT OR IGNORE INTO build_cache (key, kind, arch, blob, blob_hash, "
                        "size, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      const std::string blob = select.BlobBytes(3);
      if (ContentHash(blob) != select.Text(4)) {
        ++result.cache_entries_corrupt;
        continue;
      }
      insert.Reset();
      insert.Bind(select.Text(0), select.Text(1), select.Text(2), sqlite::Blob{blob},
                  select.Text(4), static_cast<std::int64_t>(blob.size()), select.Int(6),
                  select.Int(7));
      GPUOS_RETURN_IF_ERROR(insert.Run());
      if (target_.Changes() > 0) {
        ++result.cache_entries_added;
      } else {
        ++result.cache_entries_skipped;
      }
    }
  }

  sqlite::Connection& source_;
  sqlite::Connection& target_;
  const std::string& source_path_;
  const std::string& target_path_;
  const ImportOptions& options_;
  const std::string actor_;
  std::int64_t now_ = 0;
  // The target id of a source row another source row refers to. A dangling
  // reference (a damaged or hand-edited file) is a Corrupt status, never a
  // throw: the transaction must roll back cleanly.
  Expected<std::int64_t> Mapped(const std::map<std::int64_t, std::int64_t>& ids,
                                std::int64_t source_id, const char* table) const {
    auto it = ids.find(source_id);
    if (it == ids.end()) {
      return Corrupt(fmt::format(
          "cannot import {}: a row refers to {} id {}, which the file does not have; run "
          "`gpuos-registry --db {} verify`; nothing was imported",
          source_path_, table, source_id, source_path_));
    }
    return it->second;
  }

  std::map<std::int64_t, std::int64_t> packs_;  // source id -> target id
  std::map<std::int64_t, std::int64_t> pack_versions_;
  std::map<std::int64_t, std::int64_t> operator_versions_;
};

}  // namespace

Expected<ImportResult> Repository::Import(const std::string& path, const ImportOptions& options) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  GPUOS_RETURN_IF_ERROR(state_->RequireWritable(fmt::format("import {}", path)));
  std::error_code ec;
  if (fs::equivalent(path, state_->options.path, ec)) {
    return InvalidArgument(
        fmt::format("cannot import the repository {} into itself", state_->options.path));
  }
  ImportSource source;
  GPUOS_RETURN_IF_ERROR(
      OpenSource(path, state_->migrations, state_->options.busy_timeout_ms, source));
  ImportResult result;
  result.source_schema_version = source.schema_version;
  result.source_migrated = source.migrated;
  Merge merge(source.db, state_->db, path, state_->options.path, options,
              ActorOrDefault(options.actor));
  // The source is read inside one read transaction, so it is one snapshot
  // even when another process writes to it meanwhile.
  GPUOS_RETURN_IF_ERROR(sqlite::RunTransaction(
      source.db, sqlite::TransactionMode::kRead, state_->options.busy_timeout_ms, [&] {
        return state_->Write(fmt::format("import {}", path), [&] { return merge.Run(result); });
      }));
  return result;
}

}  // namespace gpuos::registry
