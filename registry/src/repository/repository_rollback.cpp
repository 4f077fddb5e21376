// Repository::Rollback and the pack-version queries.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "repository_state.h"

namespace gpuos::registry {

using namespace repository_internal;

Expected<RollbackResult> Repository::Rollback(const std::string& name,
                                              const RollbackOptions& options) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const std::string actor = ActorOrDefault(options.actor);
  RollbackResult result;
  Status status = state_->Write(fmt::format("roll back '{}'", name), [&]() -> Status {
    sqlite::Connection& db = state_->db;
    result = RollbackResult{name};
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement alias,
        db.Prepare("SELECT o.current_version_id, c.version, o.previous_version_id, p.version "
                   "FROM operators o JOIN operator_versions c ON c.id = o.current_version_id "
                   "LEFT JOIN operator_versions p ON p.id = o.previous_version_id "
                   "WHERE o.name = ?"));
    alias.Bind(name);
    GPUOS_ASSIGN_OR_RETURN(bool found, alias.Step());
    if (!found) return UnknownOperator(name, state_->options.path);
    const std::int64_t current_id = alias.Int(0);
    GPUOS_ASSIGN_OR_RETURN(result.old_current, StoredVersion(alias.Text(1), name));

    std::int64_t target_id = 0;
    if (!options.to) {
      if (alias.IsNull(2)) {
        return FailedPrecondition(fmt::format(
            "operator '{}' has no previous version to roll back to (current is {}); pass a "
            "version to roll back to (see `gpuos-registry versions {}`)",
            name, result.old_current.ToString(), name));
      }
      target_id = alias.Int(2);
      GPUOS_ASSIGN_OR_RETURN(result.current, StoredVersion(alias.Text(3), name));
    } else {
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement version,
          db.Prepare("SELECT id FROM operator_versions WHERE name = ? AND version = ?"));
      version.Bind(name, options.to->ToString());
      GPUOS_ASSIGN_OR_RETURN(bool exists, version.Step());
      if (!exists) return UnknownVersion(db, name, *options.to);
      target_id = version.Int(0);
      result.current = *options.to;
      if (target_id == current_id) {
        return FailedPrecondition(
            fmt::format("operator '{}' is already at version {}; nothing to roll back", name,
                        options.to->ToString()));
      }
    }
    result.previous = result.old_current;
    const std::int64_t now = NowMs();
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement update,
        db.Prepare("UPDATE operators SET current_version_id = ?, previous_version_id = ?, "
                   "updated_at = ? WHERE name = ?"));
    update.Bind(target_id, current_id, now, name);
    GPUOS_RETURN_IF_ERROR(update.Run());
    std::string detail = options.message;
    if (detail.empty()) detail = options.to ? "rollback to a chosen version" : "swap to previous";
    return AppendHistory(db,
                         {HistoryAction::kRollback, name, "", "", result.old_current.ToString(),
                          result.current.ToString(), actor, detail},
                         now);
  });
  if (!status.ok()) return status;
  return result;
}

Expected<std::vector<PackVersionInfo>> Repository::ListPackVersions(const std::string& pack) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<PackVersionInfo> packs;
  Status status = state_->Read([&]() -> Status {
    packs.clear();
    sqlite::Connection& db = state_->db;
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        db.Prepare("SELECT pv.id, p.name, pv.version, pv.description, pv.source_path, "
                   "pv.source_hash, pv.content_hash, pv.published_at, pv.actor, pv.message "
                   "FROM pack_versions pv JOIN packs p ON p.id = pv.pack_id "
                   "WHERE ?1 = '' OR p.name = ?1"));
    select.Bind(pack);
    GPUOS_ASSIGN_OR_RETURN(sqlite::Statement members,
                           db.Prepare("SELECT v.name, v.version FROM pack_version_operators m "
                                      "JOIN operator_versions v ON v.id = m.operator_version_id "
                                      "WHERE m.pack_version_id = ? ORDER BY v.name"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      PackVersionInfo info;
      info.pack = select.Text(1);
      GPUOS_ASSIGN_OR_RETURN(info.version, StoredVersion(select.Text(2), info.pack));
      info.description = select.Text(3);
      info.source_path = select.Text(4);
      info.source_hash = select.Text(5);
      info.content_hash = select.Text(6);
      info.published_at_ms = select.Int(7);
      info.actor = select.Text(8);
      info.message = select.Text(9);
      members.Reset();
      members.Bind(select.Int(0));
      for (;;) {
        GPUOS_ASSIGN_OR_RETURN(bool member, members.Step());
        if (!member) break;
        GPUOS_ASSIGN_OR_RETURN(SemVer version, StoredVersion(members.Text(1), members.Text(0)));
        info.operators.emplace_back(members.Text(0), version);
      }
      packs.push_back(std::move(info));
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  std::sort(packs.begin(), packs.end(), [](const auto& a, const auto& b) {
    return std::tie(a.pack, a.version) < std::tie(b.pack, b.version);
  });
  if (packs.empty() && !pack.empty()) {
    return NotFound(
        fmt::format("pack '{}' is not in the repository {}", pack, state_->options.path));
  }
  return packs;
}

Expected<std::string> Repository::GetPackSource(const std::string& pack, const SemVer& version) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::string source;
  Status status = state_->Read([&]() -> Status {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        state_->db.Prepare(
            "SELECT pv.source_text FROM pack_versions pv "
            "JOIN packs p ON p.id = pv.pack_id WHERE p.name = ? AND pv.version = ?"));
    select.Bind(pack, version.ToString());
    GPUOS_ASSIGN_OR_RETURN(bool found, select.Step());
    if (!found) {
      return NotFound(fmt::format("pack '{}' version {} is not in the repository {}", pack,
                                  version.ToString(), state_->options.path));
    }
    source = select.Text(0);
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return source;
}

}  // namespace gpuos::registry
