// Helpers shared by the repository tests: temporary directories, packs built
// by hand, and raw SQLite access to inspect or damage a repository file.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/registry/repository.h"
#include "temp_dir.h"

namespace gpuos::registry::testing {

using gpuos::testing::TempDir;

inline SemVer V(const std::string& text) { return SemVer::Parse(text).value(); }

// An elementwise operator `out = a + b` with a body that can be varied.
inline OperatorSpec Elementwise(const std::string& name, const std::string& version,
                                const std::string& body = "out = a + b;") {
  OperatorSpec spec;
  spec.name = name;
  spec.version = V(version);
  spec.kind = OperatorKind::kElementwise;
  spec.description = "test operator";
  spec.dtypes = {DType::kF32, DType::kF64};
  spec.inputs = {{"a", std::nullopt, ""}, {"b", std::nullopt, ""}};
  spec.outputs = {{"out", std::nullopt, ""}};
  spec.body.code = body;
  spec.body.location = {"test.yaml", 10, 7};
  spec.location = {"test.yaml", 3, 5};
  return spec;
}

// A pack whose source text is derived from its contents, as if it had been
// read from a YAML file: equal contents give equal text.
inline OperatorPack Pack(const std::string& name, const std::string& version,
                         std::vector<OperatorSpec> operators) {
  OperatorPack pack;
  pack.name = name;
  pack.version = V(version);
  pack.source_path = "test.yaml";
  pack.operators = std::move(operators);
  pack.source_text = "gpuos_pack: 1\nname: " + name + "\nversion: " + version + "\noperators:\n";
  for (const OperatorSpec& op : pack.operators) {
    pack.source_text += "  - name: " + op.name + "\n    version: " + op.version.ToString() +
                        "\n    body: " + op.body.code + "\n";
  }
  return pack;
}

inline std::unique_ptr<Repository> OpenOrDie(const std::string& path,
                                             RepositoryOptions options = {}) {
  options.path = path;
  auto repository = Repository::Open(options);
  if (!repository.ok()) {
    ADD_FAILURE() << repository.status().ToString();
    return nullptr;
  }
  return std::move(repository).value();
}

// Raw access to the file, bypassing the repository (to inspect or damage it).
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) ADD_FAILURE() << "cannot open " << path;
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void Exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << (error ? error : "?");
    }
    sqlite3_free(error);
  }

  // Runs `sql`; false (and the message in *error) when SQLite refuses it.
  bool TryExec(const std::string& sql, std::string* error) {
    char* message = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
    if (message != nullptr) *error = message;
    sqlite3_free(message);
    return rc == SQLITE_OK;
  }

  // Every row of `sql`, each row's columns joined with '|'.
  std::vector<std::string> Rows(const std::string& sql) {
    std::vector<std::string> rows;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
      return rows;
    }
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
        if (i > 0) row += '|';
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
        row += text ? text : "NULL";
      }
      rows.push_back(row);
    }
    sqlite3_finalize(stmt);
    return rows;
  }

  std::string Value(const std::string& sql) {
    auto rows = Rows(sql);
    return rows.empty() ? "" : rows[0];
  }

 private:
  sqlite3* db_ = nullptr;
};

// Every row of every repository table, for before/after comparisons.
inline std::vector<std::string> DumpRepository(const std::string& path) {
  RawDb db(path);
  std::vector<std::string> dump;
  for (const char* table : {"packs", "pack_versions", "operator_versions", "pack_version_operators",
                            "operators", "build_cache", "history"}) {
    for (const std::string& row : db.Rows(std::string("SELECT * FROM ") + table)) {
      dump.push_back(std::string(table) + ": " + row);
    }
  }
  return dump;
}

}  // namespace gpuos::registry::testing
