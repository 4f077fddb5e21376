// The build cache: BuildCache::Get/Put with hash checks, stats and gc.
#include <fmt/format.h>

#include <chrono>

#include "gpuos/content_hash.h"
#include "repository_state.h"

namespace gpuos::registry {

using namespace repository_internal;

namespace {

// A hit refreshes last_used_at only when it is older than this, so that
// reads rarely write; gc ages are days, so an hour of slack is harmless.
constexpr std::int64_t kTouchIntervalMs = 60 * 60 * 1000;

bool IsArtifactKind(const std::string& kind) { return kind == "ltoir" || kind == "cubin"; }

}  // namespace

Expected<std::optional<BuildArtifact>> Repository::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::optional<BuildArtifact> artifact;
  std::string stored_hash;
  std::int64_t last_used = 0;
  Status status = state_->Read([&]() -> Status {
    artifact.reset();
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        state_->db.Prepare(
            "SELECT kind, arch, blob, blob_hash, last_used_at FROM build_cache WHERE key = ?"));
    select.Bind(key);
    GPUOS_ASSIGN_OR_RETURN(bool found, select.Step());
    if (!found) return Status::Ok();
    artifact = BuildArtifact{select.Text(0), select.Text(1), select.BlobBytes(2)};
    stored_hash = select.Text(3);
    last_used = select.Int(4);
    return Status::Ok();
  });
  if (!status.ok()) return status;
  if (!artifact) return artifact;

  const bool intact = ContentHash(artifact->bytes) == stored_hash && IsArtifactKind(artifact->kind);
  if (state_->read_only) return intact ? artifact : std::nullopt;
  if (!intact) {
    // Dropped so that the caller's rebuild and Put start from a clean slate;
    // a failure here is harmless because Put replaces the row anyway.
    (void)state_->Write("remove a corrupt build-cache entry", [&]() -> Status {
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement remove,
          state_->db.Prepare("DELETE FROM build_cache WHERE key = ? AND blob_hash = ?"));
      remove.Bind(key, stored_hash);
      return remove.Run();
    });
    return std::optional<BuildArtifact>();
  }
  const std::int64_t now = NowMs();
  if (now - last_used > kTouchIntervalMs) {
    // Best effort and without waiting: a busy file just skips the refresh.
    state_->db.SetBusyTimeout(0);
    auto touch = state_->db.Prepare("UPDATE build_cache SET last_used_at = ? WHERE key = ?");
    if (touch.ok()) (void)touch->Bind(now, key).Run();
    state_->db.SetBusyTimeout(state_->options.busy_timeout_ms);
  }
  return artifact;
}

Status Repository::Put(const std::string& key, const BuildArtifact& artifact) {
  if (key.empty()) return InvalidArgument("build-cache key is empty");
  if (!IsArtifactKind(artifact.kind)) {
    return InvalidArgument(
        fmt::format("build-cache entry '{}': kind '{}' is unknown; use \"ltoir\" or \"cubin\"", key,
                    artifact.kind));
  }
  const std::string hash = ContentHash(artifact.bytes);
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->Write("store a build-cache entry", [&]() -> Status {
    const std::int64_t now = NowMs();
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement insert,
        state_->db.Prepare("INSERT OR REPLACE INTO build_cache (key, kind, arch, blob, blob_hash, "
                           "size, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
    insert.Bind(key, artifact.kind, artifact.arch, sqlite::Blob{artifact.bytes}, hash,
                static_cast<std::int64_t>(artifact.bytes.size()), now, now);
    return insert.Run();
  });
}

Expected<BuildCacheStats> Repository::CacheStats() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  BuildCacheStats stats;
  Status status = state_->Read([&]() -> Status {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        state_->db.Prepare("SELECT count(*), coalesce(sum(size), 0) FROM build_cache"));
    GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
    if (row) stats = BuildCacheStats{select.Int(0), select.Int(1)};
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return stats;
}

namespace {

struct CacheEntry {
  std::string key;
  std::int64_t size = 0;
  bool live = false;  // listed in GcOptions::live_keys
};

// Decides which entries gc removes; see GcOptions. Entries arrive least
// recently used first.
Status SelectGarbage(sqlite::Connection& db, const GcOptions& options, std::int64_t now,
                     std::vector<CacheEntry>& removed, GcResult& result) {
  GPUOS_ASSIGN_OR_RETURN(
      sqlite::Statement select,
      db.Prepare(options.remove_corrupt
                     ? "SELECT key, size, last_used_at, blob_hash, blob FROM build_cache "
                       "ORDER BY last_used_at, key"
                     : "SELECT key, size, last_used_at, blob_hash, NULL FROM build_cache "
                       "ORDER BY last_used_at, key"));
  std::vector<CacheEntry> kept;
  std::int64_t kept_bytes = 0;
  for (;;) {
    GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
    if (!row) break;
    CacheEntry entry{select.Text(0), select.Int(1)};
    entry.live = options.live_keys && options.live_keys->count(entry.key) > 0;
    const bool corrupt =
        options.remove_corrupt && ContentHash(select.BlobBytes(4)) != select.Text(3);
    const bool unlisted = options.live_keys && !entry.live;
    const bool stale =
        !entry.live && options.max_unused &&
        now - select.Int(2) >
            std::chrono::duration_cast<std::chrono::milliseconds>(*options.max_unused).count();
    if (corrupt) ++result.corrupt_removed;
    if (corrupt || unlisted || stale) {
      removed.push_back(std::move(entry));
    } else {
      kept_bytes += entry.size;
      kept.push_back(std::move(entry));
    }
  }
  std::vector<CacheEntry> still_kept;
  for (CacheEntry& entry : kept) {
    if (options.max_total_bytes && kept_bytes > *options.max_total_bytes && !entry.live) {
      kept_bytes -= entry.size;
      removed.push_back(std::move(entry));
    } else {
      still_kept.push_back(std::move(entry));
    }
  }
  for (const CacheEntry& entry : removed) {
    ++result.entries_removed;
    result.bytes_removed += entry.size;
  }
  result.entries_kept = static_cast<std::int64_t>(still_kept.size());
  result.bytes_kept = kept_bytes;
  return Status::Ok();
}

Expected<std::int64_t> DatabaseBytes(sqlite::Connection& db) {
  return db.QueryInt("SELECT page_count * page_size FROM pragma_page_count, pragma_page_size");
}

}  // namespace

Expected<GcResult> Repository::Gc(const GcOptions& options) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const std::string actor = ActorOrDefault(options.actor);
  GcResult result;
  auto collect = [&]() -> Status {
    result = GcResult{};
    const std::int64_t now = NowMs();
    std::vector<CacheEntry> removed;
    GPUOS_RETURN_IF_ERROR(SelectGarbage(state_->db, options, now, removed, result));
    if (options.dry_run || removed.empty()) return Status::Ok();
    GPUOS_ASSIGN_OR_RETURN(sqlite::Statement remove,
                           state_->db.Prepare("DELETE FROM build_cache WHERE key = ?"));
    for (const CacheEntry& entry : removed) {
      remove.Reset();
      GPUOS_RETURN_IF_ERROR(remove.Bind(entry.key).Run());
    }
    return AppendHistory(
        state_->db,
        {HistoryAction::kGc, "", "", "", "", "", actor,
         fmt::format("removed {} build-cache entries ({} bytes, {} corrupt), kept {} ({} bytes)",
                     result.entries_removed, result.bytes_removed, result.corrupt_removed,
                     result.entries_kept, result.bytes_kept)},
        now);
  };
  if (options.dry_run) {
    GPUOS_RETURN_IF_ERROR(state_->Read(collect));
    return result;
  }
  GPUOS_RETURN_IF_ERROR(state_->Write("collect build-cache garbage", collect));
  if (options.vacuum) {
    GPUOS_ASSIGN_OR_RETURN(result.file_bytes_before, DatabaseBytes(state_->db));
    GPUOS_RETURN_IF_ERROR(state_->db.Exec("VACUUM", "vacuum"));
    GPUOS_RETURN_IF_ERROR(
        state_->db.Exec("PRAGMA wal_checkpoint(TRUNCATE)", "checkpoint after vacuum"));
    GPUOS_ASSIGN_OR_RETURN(result.file_bytes_after, DatabaseBytes(state_->db));
  }
  return result;
}

}  // namespace gpuos::registry
