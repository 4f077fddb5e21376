// Names, timestamps, the actor, transactions and history rows: the small
// pieces every repository operation uses.
#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "gpuos/content_hash.h"
#include "repository_state.h"

namespace gpuos::registry {

std::string FormatTimestamp(std::int64_t unix_ms) {
  std::int64_t seconds = unix_ms / 1000;
  std::int64_t millis = unix_ms % 1000;
  if (millis < 0) {
    millis += 1000;
    seconds -= 1;
  }
  std::time_t time = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&time, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
}

const char* AliasChangeName(AliasChange change) {
  switch (change) {
    case AliasChange::kAdded:
      return "added";
    case AliasChange::kUpdated:
      return "updated";
    case AliasChange::kUnchanged:
      return "unchanged";
  }
  return "unknown";
}

const char* AliasSlotName(AliasSlot slot) {
  switch (slot) {
    case AliasSlot::kNone:
      return "";
    case AliasSlot::kCurrent:
      return "current";
    case AliasSlot::kPrevious:
      return "previous";
  }
  return "unknown";
}

const char* HistoryActionName(HistoryAction action) {
  switch (action) {
    case HistoryAction::kPublish:
      return "publish";
    case HistoryAction::kRollback:
      return "rollback";
    case HistoryAction::kImport:
      return "import";
    case HistoryAction::kGc:
      return "gc";
  }
  return "unknown";
}

const char* VerifyProblemKindName(VerifyProblemKind kind) {
  switch (kind) {
    case VerifyProblemKind::kIntegrity:
      return "integrity";
    case VerifyProblemKind::kForeignKey:
      return "foreign_key";
    case VerifyProblemKind::kPackVersion:
      return "pack_version";
    case VerifyProblemKind::kOperatorVersion:
      return "operator_version";
    case VerifyProblemKind::kAlias:
      return "alias";
    case VerifyProblemKind::kCacheBlob:
      return "cache_blob";
  }
  return "unknown";
}

std::string DefaultActor() {
  uid_t uid = geteuid();
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[4096];
  if (getpwuid_r(uid, &entry, buffer, sizeof(buffer), &found) == 0 && found != nullptr &&
      found->pw_name != nullptr && *found->pw_name != '\0') {
    return found->pw_name;
  }
  return fmt::format("uid:{}", uid);
}

Status Repository::State::RequireWritable(std::string_view action) const {
  if (!read_only) return Status::Ok();
  return FailedPrecondition(
      fmt::format("cannot {}: {} is read-only ({})", action, options.path, read_only_reason));
}

Status Repository::State::Write(std::string_view action, const std::function<Status()>& body) {
  GPUOS_RETURN_IF_ERROR(RequireWritable(action));
  return sqlite::RunTransaction(db, sqlite::TransactionMode::kWrite, options.busy_timeout_ms, body);
}

Status Repository::State::Read(const std::function<Status()>& body) {
  return sqlite::RunTransaction(db, sqlite::TransactionMode::kRead, options.busy_timeout_ms, body);
}

namespace repository_internal {

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ActorOrDefault(const std::string& actor) {
  return actor.empty() ? DefaultActor() : actor;
}

Expected<SemVer> StoredVersion(const std::string& text, std::string_view what) {
  auto version = SemVer::Parse(text);
  if (!version.ok()) {
    return Corrupt(
        fmt::format("{}: stored version '{}' is not MAJOR.MINOR.PATCH; run "
                    "`gpuos-registry verify`",
                    what, text));
  }
  return *version;
}

Expected<OperatorKind> StoredKind(const std::string& text, std::string_view what) {
  auto kind = ParseOperatorKind(text);
  if (!kind) {
    return Corrupt(fmt::format("{}: stored operator kind '{}' is unknown", what, text));
  }
  return *kind;
}

Status AppendHistory(sqlite::Connection& db, const HistoryRow& row, std::int64_t at_ms) {
  auto empty_as_null = [](const std::string& text) {
    return text.empty() ? std::optional<std::string>() : std::optional<std::string>(text);
  };
  GPUOS_ASSIGN_OR_RETURN(
      sqlite::Statement insert,
      db.Prepare("INSERT INTO history (at, action, operator_name, pack, pack_version, "
                 "from_version, to_version, actor, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  insert.Bind(at_ms, HistoryActionName(row.action), empty_as_null(row.operator_name),
              empty_as_null(row.pack), empty_as_null(row.pack_version),
              empty_as_null(row.from_version), empty_as_null(row.to_version), row.actor,
              row.detail);
  return insert.Run();
}

std::string PackContentHash(const std::string& pack, const std::string& version,
                            const std::string& description, const std::string& source_hash,
                            std::vector<PackMember> members) {
  std::sort(members.begin(), members.end(), [](const PackMember& a, const PackMember& b) {
    return std::tie(a.name, a.version) < std::tie(b.name, b.version);
  });
  ContentHasher hasher;
  hasher.Add("gpuos-pack-version-1").Add(pack).Add(version).Add(description).Add(source_hash);
  for (const PackMember& member : members) {
    hasher.Add(member.name).Add(member.version).Add(member.content_hash);
  }
  return hasher.Finish();
}

}  // namespace repository_internal
}  // namespace gpuos::registry
