// A small RAII layer over the SQLite C API for the repository: one
// connection, prepared statements with typed binding, and the mapping of
// SQLite result codes to gpuos Status values. Private to gpuos::repository.
//
// Thread safety: none; the owner serializes calls.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "gpuos/status.h"

namespace gpuos::registry::sqlite {

// Marks a value to be bound as a BLOB rather than TEXT.
struct Blob {
  std::string_view bytes;
};

class Statement;

class Connection {
 public:
  Connection() = default;
  ~Connection();
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Opens `filename` (a path, or a URI when `flags` has SQLITE_OPEN_URI).
  // `display_path` names the file in error messages.
  static Expected<Connection> Open(const std::string& filename, int flags,
                                   std::string display_path);

  bool is_open() const { return db_ != nullptr; }
  sqlite3* get() const { return db_; }
  const std::string& display_path() const { return display_path_; }

  // Runs one or more statements that return no rows of interest.
  Status Exec(const std::string& sql, std::string_view what);
  Expected<Statement> Prepare(std::string_view sql);
  // First column of the first row as an integer (e.g. a PRAGMA).
  Expected<std::int64_t> QueryInt(const std::string& sql);

  std::int64_t LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
  int Changes() const { return sqlite3_changes(db_); }
  bool InTransaction() const { return db_ != nullptr && !sqlite3_get_autocommit(db_); }
  // True when the main database refuses writes (read-only open or file).
  bool ReadOnly() const { return sqlite3_db_readonly(db_, "main") == 1; }
  void SetBusyTimeout(int ms) { sqlite3_busy_timeout(db_, ms); }

  // Status for a failed call that returned `rc`; `what` says what was being
  // done. SQLITE_BUSY/LOCKED map to kUnavailable and set busy_seen().
  Status Error(int rc, std::string_view what);
  bool busy_seen() const { return busy_seen_; }
  void clear_busy_seen() { busy_seen_ = false; }

 private:
  sqlite3* db_ = nullptr;
  std::string display_path_;
  bool busy_seen_ = false;
};

class Statement {
 public:
  Statement() = default;
  Statement(Connection* connection, sqlite3_stmt* stmt) : connection_(connection), stmt_(stmt) {}
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds the arguments to parameters 1..N. Accepted: integers, strings,
  // Blob, std::nullopt, and std::optional of those.
  template <typename... Args>
  Statement& Bind(const Args&... args) {
    int index = 1;
    (BindOne(index++, args), ...);
    return *this;
  }

  // Advances to the next row: true = a row is available, false = done.
  Expected<bool> Step();
  // Steps until done (for INSERT/UPDATE/DELETE).
  Status Run();
  // Allows running the statement again (bindings are kept).
  void Reset() {
    sqlite3_reset(stmt_);
    bind_error_ = SQLITE_OK;
  }

  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string Text(int column) const;
  std::string BlobBytes(int column) const;
  std::optional<std::string> OptionalText(int column) const;
  std::optional<std::int64_t> OptionalInt(int column) const;

 private:
  void BindOne(int index, std::int64_t value);
  void BindOne(int index, int value) { BindOne(index, static_cast<std::int64_t>(value)); }
  void BindOne(int index, std::string_view value);
  void BindOne(int index, const std::string& value) { BindOne(index, std::string_view(value)); }
  void BindOne(int index, const char* value) { BindOne(index, std::string_view(value)); }
  void BindOne(int index, Blob value);
  void BindOne(int index, std::nullopt_t);
  template <typename T>
  void BindOne(int index, const std::optional<T>& value) {
    if (value) {
      BindOne(index, *value);
    } else {
      BindOne(index, std::nullopt);
    }
  }
  void CheckBind(int rc);

  Connection* connection_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  int bind_error_ = SQLITE_OK;
};

enum class TransactionMode { kRead, kWrite };

// Runs `body` inside BEGIN (kRead) or BEGIN IMMEDIATE (kWrite) and commits
// when it returns OK, else rolls back. When SQLite reports the file busy or
// locked, the whole transaction is retried until `busy_timeout_ms` has
// passed since the first attempt; `body` must therefore be safe to re-run.
// REQUIRES: no transaction open on `db`.
Status RunTransaction(Connection& db, TransactionMode mode, int busy_timeout_ms,
                      const std::function<Status()>& body);

// Quotes `text` as an SQL string literal.
std::string QuoteLiteral(std::string_view text);

// file: URI for `path` with percent-encoding, plus `query` ("mode=ro").
std::string FileUri(const std::string& path, std::string_view query);

}  // namespace gpuos::registry::sqlite
