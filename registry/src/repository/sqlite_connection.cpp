#include "sqlite_connection.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

namespace gpuos::registry::sqlite {

Connection::~Connection() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Connection::Connection(Connection&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      display_path_(std::move(other.display_path_)),
      busy_seen_(other.busy_seen_) {}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    display_path_ = std::move(other.display_path_);
    busy_seen_ = other.busy_seen_;
  }
  return *this;
}

Expected<Connection> Connection::Open(const std::string& filename, int flags,
                                      std::string display_path) {
  Connection connection;
  connection.display_path_ = std::move(display_path);
  int rc = sqlite3_open_v2(filename.c_str(), &connection.db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    Status status =
        connection.db_ != nullptr
            ? connection.Error(rc, "open")
            : IoError(fmt::format("{}: cannot open: out of memory", connection.display_path_));
    return status;
  }
  sqlite3_extended_result_codes(connection.db_, 1);
  return connection;
}

Status Connection::Error(int rc, std::string_view what) {
  const char* detail = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  std::string message = fmt::format("{}: {}: {}", display_path_, what, detail);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      busy_seen_ = true;
      return Unavailable(message);
    case SQLITE_READONLY:
      return FailedPrecondition(
          fmt::format("{} is read-only: {} failed ({}); use a writable file or another --db",
                      display_path_, what, detail));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Corrupt(message);
    case SQLITE_CONSTRAINT:
    case SQLITE_MISUSE:
    case SQLITE_RANGE:
    case SQLITE_ERROR:
      return Internal(message);
    default:
      return IoError(message);
  }
}

Status Connection::Exec(const std::string& sql, std::string_view what) {
  char* error = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  sqlite3_free(error);  // sqlite3_errmsg still holds the text
  if (rc != SQLITE_OK) return Error(rc, what);
  return Status::Ok();
}

Expected<Statement> Connection::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, fmt::format("prepare `{}`", sql));
  return Statement(this, stmt);
}

Expected<std::int64_t> Connection::QueryInt(const std::string& sql) {
  GPUOS_ASSIGN_OR_RETURN(Statement statement, Prepare(sql));
  GPUOS_ASSIGN_OR_RETURN(bool row, statement.Step());
  if (!row) return Internal(fmt::format("{}: `{}` returned no row", display_path_, sql));
  return statement.Int(0);
}

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept
    : connection_(other.connection_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      bind_error_(other.bind_error_) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    connection_ = other.connection_;
    stmt_ = std::exchange(other.stmt_, nullptr);
    bind_error_ = other.bind_error_;
  }
  return *this;
}

void Statement::CheckBind(int rc) {
  if (rc != SQLITE_OK && bind_error_ == SQLITE_OK) bind_error_ = rc;
}

void Statement::BindOne(int index, std::int64_t value) {
  CheckBind(sqlite3_bind_int64(stmt_, index, value));
}

void Statement::BindOne(int index, std::string_view value) {
  CheckBind(
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
}

void Statement::BindOne(int index, Blob value) {
  // A zero-length blob must still be a BLOB, not NULL.
  static const char kEmpty = 0;
  const char* data = value.bytes.empty() ? &kEmpty : value.bytes.data();
  CheckBind(sqlite3_bind_blob64(stmt_, index, data, value.bytes.size(), SQLITE_TRANSIENT));
}

void Statement::BindOne(int index, std::nullopt_t) { CheckBind(sqlite3_bind_null(stmt_, index)); }

Expected<bool> Statement::Step() {
  if (bind_error_ != SQLITE_OK) {
    return connection_->Error(bind_error_, fmt::format("bind `{}`", sqlite3_sql(stmt_)));
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status status = connection_->Error(rc, fmt::format("run `{}`", sqlite3_sql(stmt_)));
  sqlite3_reset(stmt_);
  return status;
}

Status Statement::Run() {
  for (;;) {
    GPUOS_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

std::string Statement::Text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (text == nullptr) return {};
  return std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::string Statement::BlobBytes(int column) const {
  const auto* data = static_cast<const char*>(sqlite3_column_blob(stmt_, column));
  if (data == nullptr) return {};
  return std::string(data, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::optional<std::string> Statement::OptionalText(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Text(column);
}

std::optional<std::int64_t> Statement::OptionalInt(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Int(column);
}

namespace {

Status RunTransactionOnce(Connection& db, TransactionMode mode,
                          const std::function<Status()>& body) {
  GPUOS_RETURN_IF_ERROR(db.Exec(
      mode == TransactionMode::kWrite ? "BEGIN IMMEDIATE" : "BEGIN",
      mode == TransactionMode::kWrite ? "start a write transaction" : "start a read transaction"));
  Status status = body();
  if (status.ok()) status = db.Exec("COMMIT", "commit");
  // SQLite may already have rolled back by itself (e.g. disk full); only an
  // open transaction needs ROLLBACK.
  if (!status.ok() && db.InTransaction()) (void)db.Exec("ROLLBACK", "roll back");
  return status;
}

}  // namespace

Status RunTransaction(Connection& db, TransactionMode mode, int busy_timeout_ms,
                      const std::function<Status()>& body) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(busy_timeout_ms);
  std::minstd_rand jitter(static_cast<unsigned>(Clock::now().time_since_epoch().count()));
  for (;;) {
    db.clear_busy_seen();
    Status status = RunTransactionOnce(db, mode, body);
    if (status.ok() || !db.busy_seen()) return status;
    if (Clock::now() >= deadline) {
      return Unavailable(fmt::format(
          "{} stayed locked by another process for more than {} ms ({}); try again, or raise "
          "the busy timeout",
          db.display_path(), busy_timeout_ms, status.message()));
    }
    // Short random sleeps so that two retrying writers do not stay in step.
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + jitter() % 20));
  }
}

std::string QuoteLiteral(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') quoted += '\'';
    quoted += c;
  }
  quoted += '\'';
  return quoted;
}

std::string FileUri(const std::string& path, std::string_view query) {
  std::error_code ec;
  std::string absolute = std::filesystem::absolute(path, ec).string();
  if (ec) absolute = path;
  std::string uri = "file:";
  for (unsigned char c : absolute) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '/' || c == '-' || c == '_' || c == '.' || c == '~';
    if (plain) {
      uri += static_cast<char>(c);
    } else {
      uri += fmt::format("%{:02X}", c);
    }
  }
  if (!query.empty()) {
    uri += '?';
    uri += query;
  }
  return uri;
}

}  // namespace gpuos::registry::sqlite
