// Opening files that are not (usable) repositories, read-only repositories,
// and schema migrations.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "gpuos/registry/repository.h"
#include "registry/repository_test_util.h"

namespace gpuos::registry {
namespace {

using testing::Elementwise;
using testing::OpenOrDie;
using testing::Pack;
using testing::RawDb;
using testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Status OpenStatus(const std::string& path, RepositoryOptions options = {}) {
  options.path = path;
  return Repository::Open(options).status();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RepositoryOpen, TextFileIsRefusedAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.File("notes.txt");
  std::ofstream(path) << "this is a text file, long enough to fill an SQLite header....\n"
                      << std::string(200, 'x') << "\n";
  const std::string before = ReadFile(path);
  Status status = OpenStatus(path);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status.message(), path + " is not a gpuos repository: "))
      << status.message();
  EXPECT_TRUE(Contains(status.message(), "not an SQLite database")) << status.message();
  EXPECT_EQ(ReadFile(path), before);
}

TEST(RepositoryOpen, OtherSqliteDatabasesAreRefusedAndLeftAlone) {
  TempDir dir;
  const std::string foreign = dir.File("foreign.db");
  RawDb(foreign).Exec("CREATE TABLE t (x); INSERT INTO t VALUES (1)");
  Status status = OpenStatus(foreign);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(Contains(status.message(), foreign + " is not a gpuos repository: "))
      << status.message();
  EXPECT_EQ(RawDb(foreign).Value("PRAGMA journal_mode"), "delete");  // not switched to WAL

  const std::string other_app = dir.File("other.db");
  RawDb(other_app).Exec("PRAGMA application_id = 1234; CREATE TABLE t (x)");
  status = OpenStatus(other_app);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(Contains(status.message(), "application id is 0x000004d2")) << status.message();
}

TEST(RepositoryOpen, NewerSchemaIsRefused) {
  TempDir dir;
  const std::string path = dir.File("registry.db");
  ASSERT_NE(OpenOrDie(path), nullptr);
  const int newer = RepositorySchemaVersion() + 5;
  RawDb(path).Exec("PRAGMA user_version = " + std::to_string(newer));
  for (bool read_only : {false, true}) {
    RepositoryOptions options;
    options.read_only = read_only;
    Status status = OpenStatus(path, options);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(status.message(), path + " was created by a newer gpuos (schema " +
                                    std::to_string(newer) + ", this build knows up to " +
                                    std::to_string(RepositorySchemaVersion()) +
                                    "); upgrade gpuos or use another --db");
  }
  EXPECT_EQ(RawDb(path).Value("PRAGMA user_version"), std::to_string(newer));
}

TEST(RepositoryOpen, MissingFileAndDirectory) {
  TempDir dir;
  RepositoryOptions no_create;
  no_create.create_if_missing = false;
  EXPECT_EQ(OpenStatus(dir.File("missing.db"), no_create).code(), StatusCode::kNotFound);
  RepositoryOptions read_only;
  read_only.read_only = true;
  EXPECT_EQ(OpenStatus(dir.File("missing.db"), read_only).code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir.File("missing.db")));
  EXPECT_EQ(OpenStatus(dir.path()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenStatus("").code(), StatusCode::kInvalidArgument);
}

TEST(RepositoryOpen, EmptyFileBecomesARepository) {
  TempDir dir;
  const std::string path = dir.File("empty.db");
  std::ofstream(path).close();
  auto repo = OpenOrDie(path);
  ASSERT_NE(repo, nullptr);
  EXPECT_EQ(repo->schema_version(), RepositorySchemaVersion());
}

// Checks every change fails naming the path as read-only while reads work.
void ExpectReadOnly(Repository& repo, const std::string& path) {
  EXPECT_TRUE(repo.read_only());
  auto list = repo.ListOperators();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->size(), 1u);
  EXPECT_TRUE(repo.GetOperator("add").ok());
  auto cached = repo.Get("key");
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_TRUE(cached->has_value());
  std::vector<Status> failures = {
      repo.Publish(Pack("p", "2.0.0", {Elementwise("add", "2.0.0", "out = b;")})).status(),
      repo.Rollback("add").status(), repo.Put("k2", {"cubin", "sm_90", "x"}), repo.Gc().status(),
      repo.Import(path).status()};
  for (const Status& status : failures) {
    EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition) << status.ToString();
    EXPECT_TRUE(Contains(status.message(), path + " is read-only")) << status.message();
  }
}

void Populate(const std::string& path) {
  auto repo = OpenOrDie(path);
  ASSERT_NE(repo, nullptr);
  ASSERT_TRUE(repo->Publish(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")})).ok());
  ASSERT_TRUE(repo->Put("key", {"cubin", "sm_90", "bytes"}).ok());
}

TEST(RepositoryReadOnly, ReadOnlyOptionAllowsReadsOnly) {
  TempDir dir;
  const std::string path = dir.File("registry.db");
  Populate(path);
  const auto before = testing::DumpRepository(path);
  RepositoryOptions options;
  options.read_only = true;
  auto repo = OpenOrDie(path, options);
  ASSERT_NE(repo, nullptr);
  ExpectReadOnly(*repo, path);
  auto exported = repo->Export(dir.File("copy.db"));
  EXPECT_TRUE(exported.ok()) << exported.status().ToString();
  repo.reset();
  EXPECT_EQ(testing::DumpRepository(path), before);
}

// Opens the repository without asking for read-only, as a user who may read
// but not write the file (and, when `directory_writable` is false, not the
// directory either). As root, permissions do not stop writes, so the check
// runs in a child process that first drops to the `nobody` user.
void CheckUnwritableFile(bool directory_writable) {
  TempDir dir;
  const std::string path = dir.File("registry.db");
  Populate(path);
  const auto before = testing::DumpRepository(path);
  std::filesystem::permissions(path, std::filesystem::perms(0444));
  std::filesystem::permissions(dir.path(),
                               std::filesystem::perms(directory_writable ? 0777 : 0555));

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
    if (access(path.c_str(), W_OK) == 0) _exit(4);  // the check would prove nothing
    auto repo = OpenOrDie(path);
    if (repo == nullptr) _exit(5);
    ExpectReadOnly(*repo, path);
    _exit(::testing::Test::HasFailure() ? 6 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "running as root and cannot switch to nobody";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's checks failed (see its output above)";
  std::filesystem::permissions(dir.path(), std::filesystem::perms(0700));
  EXPECT_EQ(testing::DumpRepository(path), before);
}

TEST(RepositoryReadOnly, UnwritableFileInWritableDirectory) { CheckUnwritableFile(true); }

TEST(RepositoryReadOnly, UnwritableFileAndDirectory) { CheckUnwritableFile(false); }

std::vector<SchemaMigration> WithTestMigration(std::string sql) {
  std::vector<SchemaMigration> migrations = RepositorySchemaMigrations();
  migrations.push_back({RepositorySchemaVersion() + 1, "test migration", std::move(sql)});
  return migrations;
}

TEST(RepositoryMigration, OlderSchemaIsMigratedOnOpen) {
  TempDir dir;
  const std::string path = dir.File("registry.db");
  Populate(path);  // written by "this" build
  ASSERT_EQ(RawDb(path).Value("PRAGMA user_version"), std::to_string(RepositorySchemaVersion()));

  // A newer build, whose schema has one more step, opens the older file.
  RepositoryOptions newer;
  newer.migrations_for_testing = WithTestMigration(
      "ALTER TABLE operators ADD COLUMN note TEXT NOT NULL DEFAULT 'none';"
      "CREATE TABLE notes (operator_name TEXT REFERENCES operators(name));");
  auto repo = OpenOrDie(path, newer);
  ASSERT_NE(repo, nullptr);
  EXPECT_EQ(repo->schema_version(), RepositorySchemaVersion() + 1);
  auto list = repo->ListOperators();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);
  EXPECT_TRUE(repo->Publish(Pack("p", "1.1.0", {Elementwise("add", "1.1.0", "out = b;")})).ok());
  repo.reset();
  RawDb raw(path);
  EXPECT_EQ(raw.Value("PRAGMA user_version"), std::to_string(RepositorySchemaVersion() + 1));
  EXPECT_EQ(raw.Value("SELECT note FROM operators"), "none");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM notes"), "0");

  // Opening the migrated file again is a no-op; this build now refuses it.
  EXPECT_NE(OpenOrDie(path, newer), nullptr);
  Status status = OpenStatus(path);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status.message(), "created by a newer gpuos")) << status.message();
}

TEST(RepositoryMigration, FailedMigrationChangesNothing) {
  TempDir dir;
  const std::string path = dir.File("registry.db");
  Populate(path);
  const auto before = testing::DumpRepository(path);
  RepositoryOptions broken;
  broken.migrations_for_testing =
      WithTestMigration("CREATE TABLE half_done (x); CREATE TABLE packs (x);");
  Status status = OpenStatus(path, broken);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(Contains(status.message(), "migrate to schema")) << status.message();
  RawDb raw(path);
  EXPECT_EQ(raw.Value("PRAGMA user_version"), std::to_string(RepositorySchemaVersion()));
  EXPECT_EQ(raw.Value("SELECT count(*) FROM sqlite_schema WHERE name = 'half_done'"), "0");
  EXPECT_EQ(testing::DumpRepository(path), before);
}

TEST(RepositoryMigration, ReadOnlyOlderSchemaCannotBeMigrated) {
  TempDir dir;
  const std::string path = dir.File("registry.db");
  Populate(path);
  RepositoryOptions options;
  options.read_only = true;
  options.migrations_for_testing = WithTestMigration("CREATE TABLE extra (x);");
  Status status = OpenStatus(path, options);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status.message(), "cannot be migrated")) << status.message();
}

TEST(RepositoryMigration, MigrationsMustBeNumberedInOrder) {
  TempDir dir;
  RepositoryOptions options;
  options.migrations_for_testing = {{2, "skips one", "CREATE TABLE x (y);"}};
  Status status = OpenStatus(dir.File("registry.db"), options);
  EXPECT_EQ(status.code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace gpuos::registry
