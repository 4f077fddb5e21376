// Read-only queries: operators, versions, packs, history, the image set.
#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "gpuos/registry/operator_spec_json.h"
#include "repository_state.h"

namespace gpuos::registry {

using namespace repository_internal;

namespace repository_internal {

Expected<OperatorSpec> SpecFromStoredJson(const std::string& text, std::string_view what) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return Corrupt(fmt::format("{}: stored spec JSON does not parse: {}", what, e.what()));
  }
  auto spec = OperatorFromJson(json);
  if (!spec.ok()) {
    return Corrupt(
        fmt::format("{}: stored spec JSON is not an operator: {}", what, spec.status().message()));
  }
  return std::move(spec).value();
}

Expected<std::string> PublishedVersionList(sqlite::Connection& db, const std::string& name) {
  GPUOS_ASSIGN_OR_RETURN(sqlite::Statement select,
                         db.Prepare("SELECT version FROM operator_versions WHERE name = ?"));
  select.Bind(name);
  std::vector<SemVer> versions;
  for (;;) {
    GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
    if (!row) break;
    GPUOS_ASSIGN_OR_RETURN(SemVer version, StoredVersion(select.Text(0), name));
    versions.push_back(version);
  }
  std::sort(versions.begin(), versions.end());
  std::string list;
  for (const SemVer& version : versions) {
    if (!list.empty()) list += ", ";
    list += version.ToString();
  }
  return list;
}

Status UnknownOperator(const std::string& name, const std::string& path) {
  return NotFound(fmt::format(
      "operator '{}' is not in the repository {}; `gpuos-registry list` shows the operators", name,
      path));
}

Status UnknownVersion(sqlite::Connection& db, const std::string& name, const SemVer& version) {
  GPUOS_ASSIGN_OR_RETURN(std::string published, PublishedVersionList(db, name));
  return NotFound(fmt::format("operator '{}' has no version {} (published: {})", name,
                              version.ToString(), published));
}

}  // namespace repository_internal

namespace {

// Columns 0..8 of an operator version row, and the spec JSON as column 9.
constexpr const char* kVersionSelect =
    "SELECT v.name, v.version, v.kind, v.content_hash, p.name, pv.version, v.published_at, "
    "pv.actor, CASE WHEN o.current_version_id = v.id THEN 1 "
    "WHEN o.previous_version_id = v.id THEN 2 ELSE 0 END, v.spec_json "
    "FROM operator_versions v JOIN pack_versions pv ON pv.id = v.pack_version_id "
    "JOIN packs p ON p.id = pv.pack_id LEFT JOIN operators o ON o.name = v.name ";

Expected<OperatorVersionInfo> ReadVersionInfo(const sqlite::Statement& row) {
  OperatorVersionInfo info;
  info.name = row.Text(0);
  GPUOS_ASSIGN_OR_RETURN(info.version, StoredVersion(row.Text(1), info.name));
  GPUOS_ASSIGN_OR_RETURN(info.kind, StoredKind(row.Text(2), info.name));
  info.content_hash = row.Text(3);
  info.pack = row.Text(4);
  GPUOS_ASSIGN_OR_RETURN(info.pack_version, StoredVersion(row.Text(5), info.pack));
  info.published_at_ms = row.Int(6);
  info.actor = row.Text(7);
  std::int64_t slot = row.Int(8);
  info.slot = slot == 1 ? AliasSlot::kCurrent : slot == 2 ? AliasSlot::kPrevious : AliasSlot::kNone;
  return info;
}

}  // namespace

Expected<std::vector<OperatorSummary>> Repository::ListOperators() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<OperatorSummary> operators;
  Status status = state_->Read([&]() -> Status {
    operators.clear();
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        state_->db.Prepare(
            "SELECT o.name, p.name, c.kind, c.version, pv.version, o.updated_at "
            "FROM operators o JOIN packs p ON p.id = o.pack_id "
            "JOIN operator_versions c ON c.id = o.current_version_id "
            "LEFT JOIN operator_versions pv ON pv.id = o.previous_version_id ORDER BY o.name"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      OperatorSummary summary;
      summary.name = select.Text(0);
      summary.pack = select.Text(1);
      GPUOS_ASSIGN_OR_RETURN(summary.kind, StoredKind(select.Text(2), summary.name));
      GPUOS_ASSIGN_OR_RETURN(summary.current, StoredVersion(select.Text(3), summary.name));
      if (auto previous = select.OptionalText(4)) {
        GPUOS_ASSIGN_OR_RETURN(summary.previous, StoredVersion(*previous, summary.name));
      }
      summary.updated_at_ms = select.Int(5);
      operators.push_back(std::move(summary));
    }
  });
  if (!status.ok()) return status;
  return operators;
}

Expected<OperatorVersionRecord> Repository::GetOperator(const std::string& name,
                                                        std::optional<SemVer> version) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  OperatorVersionRecord record;
  Status status = state_->Read([&]() -> Status {
    std::string sql = kVersionSelect;
    sql += version ? "WHERE v.name = ? AND v.version = ?"
                   : "WHERE v.id = (SELECT current_version_id FROM operators WHERE name = ?)";
    GPUOS_ASSIGN_OR_RETURN(sqlite::Statement select, state_->db.Prepare(sql));
    if (version) {
      select.Bind(name, version->ToString());
    } else {
      select.Bind(name);
    }
    GPUOS_ASSIGN_OR_RETURN(bool found, select.Step());
    if (!found) {
      GPUOS_ASSIGN_OR_RETURN(std::string published, PublishedVersionList(state_->db, name));
      if (published.empty() || !version) return UnknownOperator(name, state_->options.path);
      return UnknownVersion(state_->db, name, *version);
    }
    GPUOS_ASSIGN_OR_RETURN(record.info, ReadVersionInfo(select));
    record.spec_json = select.Text(9);
    GPUOS_ASSIGN_OR_RETURN(
        record.spec,
        SpecFromStoredJson(record.spec_json, name + "@" + record.info.version.ToString()));
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return record;
}

Expected<std::vector<OperatorVersionInfo>> Repository::ListVersions(const std::string& name) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<OperatorVersionInfo> versions;
  Status status = state_->Read([&]() -> Status {
    versions.clear();
    GPUOS_ASSIGN_OR_RETURN(sqlite::Statement select,
                           state_->db.Prepare(std::string(kVersionSelect) + "WHERE v.name = ?"));
    select.Bind(name);
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      GPUOS_ASSIGN_OR_RETURN(OperatorVersionInfo info, ReadVersionInfo(select));
      versions.push_back(std::move(info));
    }
    if (versions.empty()) return UnknownOperator(name, state_->options.path);
    return Status::Ok();
  });
  if (!status.ok()) return status;
  std::sort(versions.begin(), versions.end(),
            [](const auto& a, const auto& b) { return a.version < b.version; });
  return versions;
}

Expected<std::vector<HistoryEntry>> Repository::History(const HistoryQuery& query) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<HistoryEntry> entries;
  Status status = state_->Read([&]() -> Status {
    entries.clear();
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        state_->db.Prepare(
            "SELECT * FROM (SELECT id, at, action, operator_name, pack, pack_version, "
            "from_version, to_version, actor, detail FROM history "
            "WHERE ?1 = '' OR operator_name = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id"));
    select.Bind(query.operator_name,
                query.limit == 0 ? std::int64_t{-1} : static_cast<std::int64_t>(query.limit));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      HistoryEntry entry;
      entry.id = select.Int(0);
      entry.at_ms = select.Int(1);
      const std::string action = select.Text(2);
      bool known = false;
      for (HistoryAction candidate : {HistoryAction::kPublish, HistoryAction::kRollback,
                                      HistoryAction::kImport, HistoryAction::kGc}) {
        if (action == HistoryActionName(candidate)) {
          entry.action = candidate;
          known = true;
        }
      }
      if (!known) {
        return Corrupt(fmt::format("{}: history row {} has unknown action '{}'",
                                   state_->options.path, entry.id, action));
      }
      entry.operator_name = select.Text(3);
      entry.pack = select.Text(4);
      entry.pack_version = select.Text(5);
      entry.from_version = select.Text(6);
      entry.to_version = select.Text(7);
      entry.actor = select.Text(8);
      entry.detail = select.Text(9);
      entries.push_back(std::move(entry));
    }
  });
  if (!status.ok()) return status;
  return entries;
}

Expected<std::vector<ImageOperator>> Repository::CurrentOperatorSet() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<ImageOperator> image;
  Status status = state_->Read([&]() -> Status {
    image.clear();
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        state_->db.Prepare(
            "SELECT o.name, p.name, c.version, c.spec_json, c.content_hash, pv.version, "
            "pv.spec_json, pv.content_hash FROM operators o JOIN packs p ON p.id = o.pack_id "
            "JOIN operator_versions c ON c.id = o.current_version_id "
            "LEFT JOIN operator_versions pv ON pv.id = o.previous_version_id ORDER BY o.name"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      ImageOperator op;
      op.name = select.Text(0);
      op.pack = select.Text(1);
      GPUOS_ASSIGN_OR_RETURN(op.current,
                             SpecFromStoredJson(select.Text(3), op.name + "@" + select.Text(2)));
      op.current_hash = select.Text(4);
      if (!select.IsNull(5)) {
        GPUOS_ASSIGN_OR_RETURN(op.previous,
                               SpecFromStoredJson(select.Text(6), op.name + "@" + select.Text(5)));
        op.previous_hash = select.Text(7);
      }
      image.push_back(std::move(op));
    }
  });
  if (!status.ok()) return status;
  return image;
}

}  // namespace gpuos::registry
