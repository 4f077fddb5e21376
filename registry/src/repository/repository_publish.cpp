// Repository::Publish: one BEGIN IMMEDIATE transaction that stores a pack
// version, its new operator versions, moves aliases and writes history.
#include <fmt/format.h>

#include <exception>
#include <set>

#include "gpuos/content_hash.h"
#include "gpuos/registry/operator_spec_json.h"
#include "repository_state.h"

namespace gpuos::registry {
namespace {

using namespace repository_internal;

// An operator of the pack in the form it is stored.
struct PreparedOperator {
  const OperatorSpec* spec = nullptr;
  std::string version;
  std::string spec_json;  // canonical, with locations
  std::string content_hash;
};

bool IsPackName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] < 'a' || name[0] > 'z') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string SourceName(const OperatorPack& pack) {
  return pack.source_path.empty() ? "<memory>" : pack.source_path;
}

// "file:line:column" of the operator's entry, else the pack's source.
std::string Where(const OperatorPack& pack, const OperatorSpec& spec) {
  if (spec.location.file.empty() || spec.location.line == 0) return SourceName(pack);
  return spec.location.ToString();
}

Expected<std::vector<PreparedOperator>> PreparePack(const OperatorPack& pack) {
  const std::string source = SourceName(pack);
  if (!IsPackName(pack.name)) {
    return InvalidArgument(
        fmt::format("{}: pack name '{}' is invalid; use [a-z][a-z0-9_.-]*, at most 64 characters",
                    source, pack.name));
  }
  if (pack.operators.empty()) {
    return InvalidArgument(fmt::format("{}: pack '{}' has no operators", source, pack.name));
  }
  std::vector<PreparedOperator> prepared;
  std::set<std::string> names;
  for (const OperatorSpec& spec : pack.operators) {
    Status valid = ValidateOperator(spec);
    if (!valid.ok()) return valid.WithContext(fmt::format("{}: pack '{}'", source, pack.name));
    if (!names.insert(spec.name).second) {
      return InvalidArgument(
          fmt::format("{}: pack '{}' lists operator '{}' twice", source, pack.name, spec.name));
    }
    try {
      prepared.push_back({&spec, spec.version.ToString(), OperatorToJson(spec, true).dump(),
                          OperatorContentHash(spec)});
    } catch (const std::exception& e) {
      return InvalidArgument(fmt::format("{}: operator '{}' cannot be stored as JSON: {}", source,
                                         spec.name, e.what()));
    }
  }
  return prepared;
}

Expected<std::int64_t> PackId(sqlite::Connection& db, const std::string& name, std::int64_t now) {
  GPUOS_ASSIGN_OR_RETURN(sqlite::Statement select,
                         db.Prepare("SELECT id FROM packs WHERE name = ?"));
  select.Bind(name);
  GPUOS_ASSIGN_OR_RETURN(bool found, select.Step());
  if (found) return select.Int(0);
  GPUOS_ASSIGN_OR_RETURN(sqlite::Statement insert,
                         db.Prepare("INSERT INTO packs (name, created_at) VALUES (?, ?)"));
  insert.Bind(name, now);
  GPUOS_RETURN_IF_ERROR(insert.Run());
  return db.LastInsertRowId();
}

// The alias of an operator as stored.
struct StoredAlias {
  std::int64_t pack_id = 0;
  std::string pack;
  std::int64_t current_id = 0;
  std::string current_version;
};

Expected<std::optional<StoredAlias>> FindAlias(sqlite::Connection& db, const std::string& name) {
  GPUOS_ASSIGN_OR_RETURN(
      sqlite::Statement select,
      db.Prepare("SELECT o.pack_id, p.name, o.current_version_id, v.version FROM operators o "
                 "JOIN packs p ON p.id = o.pack_id "
                 "JOIN operator_versions v ON v.id = o.current_version_id WHERE o.name = ?"));
  select.Bind(name);
  GPUOS_ASSIGN_OR_RETURN(bool found, select.Step());
  if (!found) return std::optional<StoredAlias>();
  return std::optional<StoredAlias>(
      StoredAlias{select.Int(0), select.Text(1), select.Int(2), select.Text(3)});
}

class PublishTransaction {
 public:
  PublishTransaction(sqlite::Connection& db, const OperatorPack& pack,
                     const std::vector<PreparedOperator>& prepared, const PublishOptions& options,
                     std::string actor)
      : db_(db), pack_(pack), prepared_(prepared), options_(options), actor_(std::move(actor)) {}

  Status Run(PublishResult& result) {
    result = PublishResult{pack_.name, pack_.version};
    now_ = NowMs();
    const std::string version = pack_.version.ToString();
    const std::string source_hash = ContentHash(pack_.source_text);
    std::vector<PackMember> members;
    for (const PreparedOperator& op : prepared_) {
      members.push_back({op.spec->name, op.version, op.content_hash});
    }
    const std::string content_hash =
        PackContentHash(pack_.name, version, pack_.description, source_hash, members);

    GPUOS_ASSIGN_OR_RETURN(pack_id_, PackId(db_, pack_.name, now_));
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement existing,
        db_.Prepare("SELECT content_hash, published_at, actor FROM pack_versions "
                    "WHERE pack_id = ? AND version = ?"));
    existing.Bind(pack_id_, version);
    GPUOS_ASSIGN_OR_RETURN(bool exists, existing.Step());
    if (exists) {
      if (existing.Text(0) != content_hash) {
        return AlreadyExists(fmt::format(
            "{}: pack '{}' version {} is already published with different content (published "
            "{} by {}); published versions are immutable, so bump the pack version",
            SourceName(pack_), pack_.name, version, FormatTimestamp(existing.Int(1)),
            existing.Text(2)));
      }
      result.already_published = true;
      return ReportUnchanged(result);
    }

    std::vector<std::int64_t> version_ids;
    for (const PreparedOperator& op : prepared_) {
      GPUOS_ASSIGN_OR_RETURN(std::optional<std::int64_t> id, CheckOperator(op));
      version_ids.push_back(id.value_or(0));
    }
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement insert_pack,
        db_.Prepare("INSERT INTO pack_versions (pack_id, version, description, source_path, "
                    "source_text, source_hash, content_hash, published_at, actor, message) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    insert_pack.Bind(pack_id_, version, pack_.description, SourceName(pack_), pack_.source_text,
                     source_hash, content_hash, now_, actor_, options_.message);
    GPUOS_RETURN_IF_ERROR(insert_pack.Run());
    const std::int64_t pack_version_id = db_.LastInsertRowId();
    GPUOS_RETURN_IF_ERROR(AppendHistory(
        db_, {HistoryAction::kPublish, "", pack_.name, version, "", "", actor_, options_.message},
        now_));

    for (std::size_t i = 0; i < prepared_.size(); ++i) {
      const PreparedOperator& op = prepared_[i];
      PublishedOperator published{op.spec->name, op.spec->version};
      published.new_version = version_ids[i] == 0;
      if (published.new_version) {
        GPUOS_ASSIGN_OR_RETURN(version_ids[i], InsertOperatorVersion(op, pack_version_id));
      }
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement member,
          db_.Prepare("INSERT INTO pack_version_operators (pack_version_id, operator_version_id) "
                      "VALUES (?, ?)"));
      member.Bind(pack_version_id, version_ids[i]);
      GPUOS_RETURN_IF_ERROR(member.Run());
      GPUOS_RETURN_IF_ERROR(MoveAlias(op, version_ids[i], published));
      result.operators.push_back(std::move(published));
    }
    GPUOS_RETURN_IF_ERROR(ListOperatorsNotInPack(result));
    if (options_.before_commit) GPUOS_RETURN_IF_ERROR(options_.before_commit());
    return Status::Ok();
  }

 private:
  // Checks ownership and immutability; returns the id of an identical
  // stored version, or nullopt when the version is new.
  Expected<std::optional<std::int64_t>> CheckOperator(const PreparedOperator& op) {
    const OperatorSpec& spec = *op.spec;
    GPUOS_ASSIGN_OR_RETURN(std::optional<StoredAlias> alias, FindAlias(db_, spec.name));
    if (alias && alias->pack_id != pack_id_) {
      return AlreadyExists(fmt::format(
          "{}: operator '{}' belongs to pack '{}'; an operator name belongs to one pack, so "
          "rename the operator or publish it from pack '{}'",
          Where(pack_, spec), spec.name, alias->pack, alias->pack));
    }
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        db_.Prepare("SELECT v.id, v.content_hash, p.name, pv.version FROM operator_versions v "
                    "JOIN pack_versions pv ON pv.id = v.pack_version_id "
                    "JOIN packs p ON p.id = pv.pack_id WHERE v.name = ? AND v.version = ?"));
    select.Bind(spec.name, op.version);
    GPUOS_ASSIGN_OR_RETURN(bool found, select.Step());
    if (!found) return std::optional<std::int64_t>();
    if (select.Text(1) != op.content_hash) {
      return AlreadyExists(fmt::format(
          "{}: operator '{}' version {} is already published with different content (by pack "
          "'{}' {}); published versions are immutable, so bump the operator's version",
          Where(pack_, spec), spec.name, op.version, select.Text(2), select.Text(3)));
    }
    return std::optional<std::int64_t>(select.Int(0));
  }

  Expected<std::int64_t> InsertOperatorVersion(const PreparedOperator& op,
                                               std::int64_t pack_version_id) {
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement insert,
        db_.Prepare("INSERT INTO operator_versions (name, version, kind, spec_json, "
                    "content_hash, pack_version_id, published_at) VALUES (?, ?, ?, ?, ?, ?, ?)"));
    insert.Bind(op.spec->name, op.version, OperatorKindName(op.spec->kind), op.spec_json,
                op.content_hash, pack_version_id, now_);
    GPUOS_RETURN_IF_ERROR(insert.Run());
    return db_.LastInsertRowId();
  }

  Status MoveAlias(const PreparedOperator& op, std::int64_t version_id,
                   PublishedOperator& published) {
    GPUOS_ASSIGN_OR_RETURN(std::optional<StoredAlias> alias, FindAlias(db_, op.spec->name));
    if (!alias) {
      published.change = AliasChange::kAdded;
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement insert,
          db_.Prepare("INSERT INTO operators (name, pack_id, current_version_id, "
                      "previous_version_id, updated_at) VALUES (?, ?, ?, NULL, ?)"));
      insert.Bind(op.spec->name, pack_id_, version_id, now_);
      GPUOS_RETURN_IF_ERROR(insert.Run());
    } else {
      GPUOS_ASSIGN_OR_RETURN(published.old_current,
                             StoredVersion(alias->current_version, op.spec->name));
      if (alias->current_id == version_id) {
        published.change = AliasChange::kUnchanged;
        return Status::Ok();
      }
      published.change = AliasChange::kUpdated;
      GPUOS_ASSIGN_OR_RETURN(
          sqlite::Statement update,
          db_.Prepare("UPDATE operators SET previous_version_id = current_version_id, "
                      "current_version_id = ?, updated_at = ? WHERE name = ?"));
      update.Bind(version_id, now_, op.spec->name);
      GPUOS_RETURN_IF_ERROR(update.Run());
    }
    return AppendHistory(
        db_,
        {HistoryAction::kPublish, op.spec->name, pack_.name, pack_.version.ToString(),
         alias ? alias->current_version : "", op.version, actor_, options_.message},
        now_);
  }

  Status ReportUnchanged(PublishResult& result) {
    for (const PreparedOperator& op : prepared_) {
      PublishedOperator published{op.spec->name, op.spec->version, AliasChange::kUnchanged};
      GPUOS_ASSIGN_OR_RETURN(std::optional<StoredAlias> alias, FindAlias(db_, op.spec->name));
      if (alias) {
        GPUOS_ASSIGN_OR_RETURN(published.old_current,
                               StoredVersion(alias->current_version, op.spec->name));
      }
      result.operators.push_back(std::move(published));
    }
    return ListOperatorsNotInPack(result);
  }

  Status ListOperatorsNotInPack(PublishResult& result) {
    std::set<std::string> in_pack;
    for (const PreparedOperator& op : prepared_) in_pack.insert(op.spec->name);
    GPUOS_ASSIGN_OR_RETURN(
        sqlite::Statement select,
        db_.Prepare("SELECT name FROM operators WHERE pack_id = ? ORDER BY name"));
    select.Bind(pack_id_);
    for (;;) {
      GPUOS_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      std::string name = select.Text(0);
      if (!in_pack.count(name)) result.operators_not_in_pack.push_back(std::move(name));
    }
    return Status::Ok();
  }

  sqlite::Connection& db_;
  const OperatorPack& pack_;
  const std::vector<PreparedOperator>& prepared_;
  const PublishOptions& options_;
  const std::string actor_;
  std::int64_t now_ = 0;
  std::int64_t pack_id_ = 0;
};

}  // namespace

Expected<PublishResult> Repository::Publish(const OperatorPack& pack,
                                            const PublishOptions& options) {
  GPUOS_ASSIGN_OR_RETURN(std::vector<PreparedOperator> prepared, PreparePack(pack));
  std::lock_guard<std::mutex> lock(state_->mutex);
  PublishTransaction transaction(state_->db, pack, prepared, options,
                                 ActorOrDefault(options.actor));
  PublishResult result;
  GPUOS_RETURN_IF_ERROR(state_->Write(fmt::format("publish pack '{}'", pack.name),
                                      [&] { return transaction.Run(result); }));
  return result;
}

}  // namespace gpuos::registry
