// Repository::Verify: integrity, foreign keys, and every stored hash.
#include <fmt/format.h>

#include "gpuos/content_hash.h"
#include "gpuos/registry/operator_spec_json.h"
#include "repository_state.h"

namespace gpuos::registry {

using namespace repository_internal;

namespace {

class Verifier {
 public:
  Verifier(sqlite::Connection& db, VerifyReport& report) : db_(db), report_(report) {}

  // Runs every check; a check that cannot even run (a damaged table) is
  // itself reported as an integrity problem and the others still run.
  void Run(std::vector<std::pair<std::string, std::string>>& corrupt_blobs) {
    Check("integrity_check", [&] { return Integrity(); });
    Check("foreign_key_check", [&] { return ForeignKeys(); });
    Check("pack_versions", [&] { return PackVersions(); });
    Check("operator_versions", [&] { return OperatorVersions(); });
    Check("operators", [&] { return Aliases(); });
    Check("build_cache", [&] { return CacheBlobs(corrupt_blobs); });
  }

 private:
  template <typename F>
  void Check(const char* subject, F check) {
    Status status = check();
    if (!status.ok()) Add(VerifyProblemKind::kIntegrity, subject, status.message());
  }

  void Add(VerifyProblemKind kind, std::string subject, std::string message) {
    report_.problems.push_back({kind, std::move(subject), std::move(message)});
  }

  Status Integrity() {
    GPUOS_ASSIGN_OR_RETURN(sqlite::Statement select, db_.Prepare("PRAGMA integrity_check"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      if (select.Text(0) != "ok") Add(VerifyProblemKind::kIntegrity, "database", select.Text(0));
    }
  }

  Status ForeignKeys() {
    GPUOS_ASSIGN_OR_RETURN(sqlite::Statement select, db_.Prepare("PRAGMA foreign_key_check"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      Add(VerifyProblemKind::kForeignKey, select.Text(0),
          fmt::format("row {} refers to a missing row of {}", select.Text(1), select.Text(2)));
    }
  }

  Status PackVersions() {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        db_.Prepare("SELECT pv.id, p.name, pv.version, pv.description, pv.source_text, "
                    "pv.source_hash, pv.content_hash FROM pack_versions pv "
                    "JOIN packs p ON p.id = pv.pack_id"));
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement members,
        db_.Prepare("SELECT v.name, v.version, v.content_hash FROM pack_version_operators m "
                    "JOIN operator_versions v ON v.id = m.operator_version_id "
                    "WHERE m.pack_version_id = ?"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      ++report_.pack_versions_checked;
      const std::string subject = select.Text(1) + "@" + select.Text(2);
      const std::string source_hash = ContentHash(select.Text(4));
      if (source_hash != select.Text(5)) {
        Add(VerifyProblemKind::kPackVersion, subject,
            fmt::format("YAML text hashes to {}, stored hash is {}", source_hash, select.Text(5)));
      }
      std::vector<PackMember> list;
      members.Reset();
      members.Bind(select.Int(0));
      for (;;) {
        GPUOS_ASSIGN_OR_RETURN(bool member, members.Step());
        if (!member) break;
        list.push_back({members.Text(0), members.Text(1), members.Text(2)});
      }
      const std::string content_hash =
          PackContentHash(select.Text(1), select.Text(2), select.Text(3), select.Text(5), list);
      if (content_hash != select.Text(6)) {
        Add(VerifyProblemKind::kPackVersion, subject,
            fmt::format("pack identity hashes to {}, stored hash is {} (its operator list or "
                        "description changed)",
                        content_hash, select.Text(6)));
      }
    }
  }

  Status OperatorVersions() {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        db_.Prepare("SELECT name, version, kind, spec_json, content_hash FROM operator_versions"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      ++report_.operator_versions_checked;
      const std::string subject = select.Text(0) + "@" + select.Text(1);
      auto spec = SpecFromStoredJson(select.Text(3), subject);
      if (!spec.ok()) {
        Add(VerifyProblemKind::kOperatorVersion, subject, spec.status().message());
        continue;
      }
      const std::string hash = OperatorContentHash(*spec);
      if (hash != select.Text(4)) {
        Add(VerifyProblemKind::kOperatorVersion, subject,
            fmt::format("spec hashes to {}, stored content hash is {}", hash, select.Text(4)));
      }
      if (spec->name != select.Text(0) || spec->version.ToString() != select.Text(1) ||
          OperatorKindName(spec->kind) != select.Text(2)) {
        Add(VerifyProblemKind::kOperatorVersion, subject,
            fmt::format("spec says {}@{} ({}), the row says {}@{} ({})", spec->name,
                        spec->version.ToString(), OperatorKindName(spec->kind), select.Text(0),
                        select.Text(1), select.Text(2)));
      }
    }
  }

  Status Aliases() {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        db_.Prepare(
            "SELECT o.name, p.name, c.name, c.version, cp.name, pv.name, pv.version, pp.name "
            "FROM operators o JOIN packs p ON p.id = o.pack_id "
            "LEFT JOIN operator_versions c ON c.id = o.current_version_id "
            "LEFT JOIN pack_versions cpv ON cpv.id = c.pack_version_id "
            "LEFT JOIN packs cp ON cp.id = cpv.pack_id "
            "LEFT JOIN operator_versions pv ON pv.id = o.previous_version_id "
            "LEFT JOIN pack_versions ppv ON ppv.id = pv.pack_version_id "
            "LEFT JOIN packs pp ON pp.id = ppv.pack_id"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      ++report_.aliases_checked;
      const std::string name = select.Text(0);
      const std::string owner = select.Text(1);
      for (int slot : {2, 5}) {
        if (select.IsNull(slot)) continue;  // no previous; a missing current is a foreign key
        const char* slot_name = slot == 2 ? "current" : "previous";
        if (select.Text(slot) != name) {
          Add(VerifyProblemKind::kAlias, name,
              fmt::format("{} points at a version of operator '{}' ({})", slot_name,
                          select.Text(slot), select.Text(slot + 1)));
        } else if (select.Text(slot + 2) != owner) {
          Add(VerifyProblemKind::kAlias, name,
              fmt::format("{} version {} was published by pack '{}', but the operator belongs "
                          "to pack '{}'",
                          slot_name, select.Text(slot + 1), select.Text(slot + 2), owner));
        }
      }
    }
  }

  Status CacheBlobs(std::vector<std::pair<std::string, std::string>>& corrupt) {
    GPUOS_ASSIGN_OR_RETURN(sqlite::Statement select,
                           db_.Prepare("SELECT key, blob, blob_hash, size, kind FROM build_cache"));
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return Status::Ok();
      ++report_.cache_entries_checked;
      const std::string bytes = select.BlobBytes(1);
      const std::string hash = ContentHash(bytes);
      if (hash != select.Text(2) || static_cast<std::int64_t>(bytes.size()) != select.Int(3)) {
        Add(VerifyProblemKind::kCacheBlob, select.Text(0),
            fmt::format("{} blob of {} bytes hashes to {}, stored hash is {} ({} bytes); it "
                        "will be rebuilt on next use",
                        select.Text(4), bytes.size(), hash, select.Text(2), select.Int(3)));
        corrupt.emplace_back(select.Text(0), select.Text(2));
      }
    }
  }

  sqlite::Connection& db_;
  VerifyReport& report_;
};

}  // namespace

Expected<VerifyReport> Repository::Verify(const VerifyOptions& options) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (options.remove_corrupt_cache_entries) {
    GPUOS_RETURN_IF_ERROR(state_->RequireWritable("remove corrupt build-cache entries"));
  }
  VerifyReport report;
  std::vector<std::pair<std::string, std::string>> corrupt_blobs;  // key, stored hash
  GPUOS_RETURN_IF_ERROR(state_->Read([&]() -> Status {
    report = VerifyReport{};
    corrupt_blobs.clear();
    Verifier(state_->db, report).Run(corrupt_blobs);
    return Status::Ok();
  }));
  if (options.remove_corrupt_cache_entries && !corrupt_blobs.empty()) {
    Status status = state_->Write("remove corrupt build-cache entries", [&]() -> Status {
      report.cache_entries_removed = 0;
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement remove,
          state_->db.Prepare("DELETE FROM build_cache WHERE key = ? AND blob_hash = ?"));
      for (const auto& [key, hash] : corrupt_blobs) {
        remove.Reset();
        GPUOS_RETURN_IF_ERROR(remove.Bind(key, hash).Run());
        report.cache_entries_removed += state_->db.Changes();
      }
      return Status::Ok();
    });
    if (!status.ok()) return status;
  }
  return report;
}

}  // namespace gpuos::registry
