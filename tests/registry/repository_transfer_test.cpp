// Export and import between repositories.
#include <gtest/gtest.h>

#include "gpuos/registry/repository.h"
#include "registry/repository_test_util.h"

namespace gpuos::registry {
namespace {

using testing::Elementwise;
using testing::OpenOrDie;
using testing::Pack;
using testing::RawDb;
using testing::TempDir;
using testing::V;

// The observable state of a repository, as text, for comparisons.
std::vector<std::string> Describe(Repository& repo) {
  std::vector<std::string> lines;
  auto operators = repo.ListOperators();
  EXPECT_TRUE(operators.ok());
  if (!operators.ok()) return lines;
  for (const OperatorSummary& op : *operators) {
    lines.push_back("op " + op.name + " " + op.pack + " " + op.current.ToString() + " " +
                    (op.previous ? op.previous->ToString() : "-"));
    auto versions = repo.ListVersions(op.name);
    EXPECT_TRUE(versions.ok());
    if (!versions.ok()) return lines;
    for (const OperatorVersionInfo& version : *versions) {
      auto record = repo.GetOperator(op.name, version.version);
      lines.push_back("  " + version.version.ToString() + " " + version.content_hash + " " +
                      version.actor + " " + std::to_string(version.published_at_ms) + " " +
                      record->spec_json);
    }
  }
  auto packs = repo.ListPackVersions();
  EXPECT_TRUE(packs.ok());
  if (!packs.ok()) return lines;
  for (const PackVersionInfo& pack : *packs) {
    lines.push_back("pack " + pack.pack + "@" + pack.version.ToString() + " " + pack.content_hash +
                    " " + pack.actor + " " + pack.message);
  }
  return lines;
}

class RepositoryTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = OpenOrDie(dir_.File("source.db"));
    ASSERT_NE(source_, nullptr);
    ASSERT_TRUE(source_
                    ->Publish(Pack("std.math", "0.1.0",
                                   {Elementwise("add", "1.0.0"), Elementwise("sub", "1.0.0")}),
                              {"alice", "first"})
                    .ok());
    ASSERT_TRUE(
        source_
            ->Publish(Pack("std.math", "0.2.0",
                           {Elementwise("add", "1.1.0", "out = b;"), Elementwise("sub", "1.0.0")}),
                      {"bob", "second"})
            .ok());
    ASSERT_TRUE(source_->Publish(Pack("std.more", "1.0.0", {Elementwise("mul", "1.0.0")})).ok());
    ASSERT_TRUE(source_->Rollback("add").ok());
    ASSERT_TRUE(source_->Put("k1", {"cubin", "sm_90", "cubin bytes"}).ok());
    ASSERT_TRUE(source_->Put("k2", {"ltoir", "sm_80", "ltoir bytes"}).ok());
  }

  TempDir dir_;
  std::unique_ptr<Repository> source_;
};

TEST_F(RepositoryTransferTest, ExportImportRoundTrip) {
  const std::string exported = dir_.File("out/export.db");
  auto result = source_->Export(exported);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->pack_versions, 3);
  EXPECT_EQ(result->operator_versions, 4);
  EXPECT_EQ(result->cache_entries, 2);
  EXPECT_GT(result->file_bytes, 0);
  EXPECT_EQ(RawDb(exported).Value("PRAGMA application_id"),
            std::to_string(kRepositoryApplicationId));

  auto target = OpenOrDie(dir_.File("target.db"));
  ASSERT_NE(target, nullptr);
  auto imported = target->Import(exported, {true, "importer"});
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(imported->pack_versions_added, 3);
  EXPECT_EQ(imported->operator_versions_added, 4);
  EXPECT_EQ(imported->operators_added, (std::vector<std::string>{"add", "mul", "sub"}));
  EXPECT_EQ(imported->cache_entries_added, 2);
  EXPECT_FALSE(imported->source_migrated);

  EXPECT_EQ(Describe(*target), Describe(*source_));
  EXPECT_EQ((*target->Get("k2"))->bytes, "ltoir bytes");
  EXPECT_TRUE(target->Verify()->ok());
  auto history = target->History();
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 4u);  // three adopted aliases and the summary
  EXPECT_EQ(history->back().action, HistoryAction::kImport);
  EXPECT_EQ(history->back().actor, "importer");

  // Importing the same file again adds nothing.
  auto again = target->Import(exported);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->pack_versions_added, 0);
  EXPECT_EQ(again->pack_versions_skipped, 3);
  EXPECT_EQ(again->operator_versions_skipped, 4);
  EXPECT_TRUE(again->operators_added.empty());
  EXPECT_TRUE(again->aliases_kept.empty());
  EXPECT_EQ(again->cache_entries_skipped, 2);
  EXPECT_EQ(Describe(*target), Describe(*source_));
}

TEST_F(RepositoryTransferTest, ExportWithoutCacheAndOverwrite) {
  const std::string exported = dir_.File("export.db");
  auto result = source_->Export(exported, {false});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->cache_entries, 0);
  EXPECT_EQ(result->operator_versions, 4);

  auto refused = source_->Export(exported);
  EXPECT_EQ(refused.status().code(), StatusCode::kAlreadyExists);
  auto replaced = source_->Export(exported, {true, true});
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_EQ(replaced->cache_entries, 2);
}

TEST_F(RepositoryTransferTest, ImportKeepsTargetAliases) {
  auto target = OpenOrDie(dir_.File("target.db"));
  ASSERT_NE(target, nullptr);
  ASSERT_TRUE(target
                  ->Publish(Pack("std.math", "0.1.0",
                                 {Elementwise("add", "1.0.0"), Elementwise("sub", "1.0.0")}),
                            {"alice", "first"})
                  .ok());
  const std::string exported = dir_.File("export.db");
  ASSERT_TRUE(source_->Export(exported).ok());
  auto imported = target->Import(exported);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  // The identical std.math 0.1.0 is skipped (identity is content, not time).
  EXPECT_EQ(imported->pack_versions_skipped, 1);
  EXPECT_EQ(imported->pack_versions_added, 2);
  EXPECT_EQ(imported->operators_added, std::vector<std::string>{"mul"});
  // Source's add is at 1.0.0 after its rollback, like the target's: no report.
  EXPECT_TRUE(imported->aliases_kept.empty());
  ASSERT_TRUE(source_->Rollback("add").ok());  // source add -> 1.1.0
  ASSERT_TRUE(source_->Export(exported, {true, true}).ok());
  auto second = target->Import(exported);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_EQ(second->aliases_kept.size(), 1u);
  EXPECT_EQ(second->aliases_kept[0].name, "add");
  EXPECT_EQ(second->aliases_kept[0].target_current, V("1.0.0"));
  EXPECT_EQ(second->aliases_kept[0].source_current, V("1.1.0"));
  EXPECT_EQ(target->GetOperator("add")->info.version, V("1.0.0"));
}

TEST_F(RepositoryTransferTest, ConflictingVersionImportsNothing) {
  auto target = OpenOrDie(dir_.File("target.db"));
  ASSERT_NE(target, nullptr);
  ASSERT_TRUE(target->Publish(Pack("std.other", "1.0.0", {Elementwise("div", "1.0.0")})).ok());
  ASSERT_TRUE(
      target->Publish(Pack("std.more", "1.0.0", {Elementwise("mul", "1.0.0", "out = a * b;")}))
          .ok());
  const auto before = testing::DumpRepository(dir_.File("target.db"));
  const std::string exported = dir_.File("export.db");
  ASSERT_TRUE(source_->Export(exported).ok());
  auto imported = target->Import(exported);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(imported.status().message().find("nothing was imported"), std::string::npos);
  EXPECT_EQ(testing::DumpRepository(dir_.File("target.db")), before);
}

TEST_F(RepositoryTransferTest, ImportRefusesNonRepositories) {
  auto target = OpenOrDie(dir_.File("target.db"));
  ASSERT_NE(target, nullptr);
  RawDb(dir_.File("foreign.db")).Exec("CREATE TABLE t (x)");
  auto foreign = target->Import(dir_.File("foreign.db"));
  EXPECT_EQ(foreign.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(target->Import(dir_.File("missing.db")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(target->Import(dir_.File("target.db")).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RepositoryTransferTest, OlderSourceIsMigratedInACopy) {
  const std::string exported = dir_.File("export.db");
  ASSERT_TRUE(source_->Export(exported).ok());
  RepositoryOptions newer;
  newer.migrations_for_testing = RepositorySchemaMigrations();
  newer.migrations_for_testing.push_back(
      {RepositorySchemaVersion() + 1, "test", "ALTER TABLE packs ADD COLUMN homepage TEXT;"});
  auto target = OpenOrDie(dir_.File("target.db"), newer);
  ASSERT_NE(target, nullptr);
  auto imported = target->Import(exported);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_TRUE(imported->source_migrated);
  EXPECT_EQ(imported->source_schema_version, RepositorySchemaVersion());
  EXPECT_EQ(imported->operator_versions_added, 4);
  EXPECT_EQ(RawDb(exported).Value("PRAGMA user_version"),
            std::to_string(RepositorySchemaVersion()));  // the source itself is untouched
}

}  // namespace
}  // namespace gpuos::registry
