// Publishing, queries, aliases and rollback of the SQLite repository.
#include "gpuos/registry/repository.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "gpuos/registry/operator_spec_json.h"
#include "gpuos/registry/pack_loader.h"
#include "registry/repository_test_util.h"

namespace gpuos::registry {
namespace {

using testing::Elementwise;
using testing::OpenOrDie;
using testing::Pack;
using testing::RawDb;
using testing::TempDir;
using testing::V;

class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = OpenOrDie(dir_.File("registry.db"));
    ASSERT_NE(repo_, nullptr);
  }

  PublishResult PublishOk(const OperatorPack& pack, const std::string& actor = "alice") {
    auto result = repo_->Publish(pack, {actor, "msg"});
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : PublishResult{};
  }

  TempDir dir_;
  std::unique_ptr<Repository> repo_;
};

TEST_F(RepositoryTest, OpenSetsPragmas) {
  EXPECT_EQ(repo_->schema_version(), RepositorySchemaVersion());
  EXPECT_FALSE(repo_->read_only());
  RawDb raw(dir_.File("registry.db"));
  EXPECT_EQ(raw.Value("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.Value("PRAGMA application_id"), std::to_string(kRepositoryApplicationId));
  EXPECT_EQ(raw.Value("PRAGMA user_version"), std::to_string(RepositorySchemaVersion()));
}

TEST_F(RepositoryTest, CreatesParentDirectories) {
  auto nested = OpenOrDie(dir_.File("a/b/c/registry.db"));
  ASSERT_NE(nested, nullptr);
  EXPECT_TRUE(std::filesystem::exists(dir_.File("a/b/c/registry.db")));
}

TEST_F(RepositoryTest, PublishThenListGetVersionsHistory) {
  PublishResult first =
      PublishOk(Pack("std.math", "0.1.0",
                     {Elementwise("add", "1.0.0"), Elementwise("sub", "1.0.0", "out = a - b;")}));
  EXPECT_FALSE(first.already_published);
  ASSERT_EQ(first.operators.size(), 2u);
  EXPECT_EQ(first.operators[0].name, "add");
  EXPECT_EQ(first.operators[0].change, AliasChange::kAdded);
  EXPECT_TRUE(first.operators[0].new_version);
  EXPECT_FALSE(first.operators[0].old_current.has_value());

  PublishResult second = PublishOk(Pack("std.math", "0.2.0",
                                        {Elementwise("add", "1.1.0", "out = b + a;"),
                                         Elementwise("sub", "1.0.0", "out = a - b;")}),
                                   "bob");
  ASSERT_EQ(second.operators.size(), 2u);
  EXPECT_EQ(second.operators[0].change, AliasChange::kUpdated);
  EXPECT_EQ(second.operators[0].old_current, V("1.0.0"));
  EXPECT_EQ(second.operators[1].change, AliasChange::kUnchanged);
  EXPECT_FALSE(second.operators[1].new_version);

  auto list = repo_->ListOperators();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "add");
  EXPECT_EQ((*list)[0].pack, "std.math");
  EXPECT_EQ((*list)[0].current, V("1.1.0"));
  EXPECT_EQ((*list)[0].previous, V("1.0.0"));
  EXPECT_EQ((*list)[0].kind, OperatorKind::kElementwise);
  EXPECT_EQ((*list)[1].name, "sub");
  EXPECT_FALSE((*list)[1].previous.has_value());

  auto current = repo_->GetOperator("add");
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  EXPECT_EQ(current->info.version, V("1.1.0"));
  EXPECT_EQ(current->info.slot, AliasSlot::kCurrent);
  EXPECT_EQ(current->info.pack_version, V("0.2.0"));
  EXPECT_EQ(current->info.actor, "bob");
  EXPECT_EQ(current->spec.body.code, "out = b + a;");
  EXPECT_EQ(current->spec.body.location.line, 10);  // locations are kept for error mapping
  EXPECT_EQ(current->info.content_hash, OperatorContentHash(current->spec));

  auto old = repo_->GetOperator("add", V("1.0.0"));
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->info.slot, AliasSlot::kPrevious);
  EXPECT_EQ(old->spec.body.code, "out = a + b;");
  EXPECT_EQ(old->info.actor, "alice");

  auto versions = repo_->ListVersions("add");
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_EQ((*versions)[0].version, V("1.0.0"));
  EXPECT_EQ((*versions)[1].version, V("1.1.0"));

  auto history = repo_->History();
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  // Pack row + add + sub for 0.1.0, pack row + add for 0.2.0 (sub unchanged).
  ASSERT_EQ(history->size(), 5u);
  EXPECT_EQ((*history)[0].action, HistoryAction::kPublish);
  EXPECT_EQ((*history)[0].pack_version, "0.1.0");
  EXPECT_EQ((*history)[4].operator_name, "add");
  EXPECT_EQ((*history)[4].from_version, "1.0.0");
  EXPECT_EQ((*history)[4].to_version, "1.1.0");
  EXPECT_EQ((*history)[4].actor, "bob");
  EXPECT_EQ((*history)[4].detail, "msg");

  auto add_history = repo_->History({"add"});
  ASSERT_TRUE(add_history.ok());
  ASSERT_EQ(add_history->size(), 2u);
  auto newest = repo_->History({"", 1});
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->size(), 1u);
  EXPECT_EQ((*newest)[0].id, (*history)[4].id);

  auto packs = repo_->ListPackVersions("std.math");
  ASSERT_TRUE(packs.ok()) << packs.status().ToString();
  ASSERT_EQ(packs->size(), 2u);
  EXPECT_EQ((*packs)[1].version, V("0.2.0"));
  ASSERT_EQ((*packs)[1].operators.size(), 2u);
  EXPECT_EQ((*packs)[1].operators[0].second, V("1.1.0"));
  auto source = repo_->GetPackSource("std.math", V("0.1.0"));
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(*source,
            Pack("std.math", "0.1.0",
                 {Elementwise("add", "1.0.0"), Elementwise("sub", "1.0.0", "out = a - b;")})
                .source_text);
}

TEST_F(RepositoryTest, UnknownNamesAreNotFound) {
  PublishOk(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")}));
  auto missing = repo_->GetOperator("mul");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'mul'"), std::string::npos);
  auto missing_version = repo_->GetOperator("add", V("9.9.9"));
  ASSERT_FALSE(missing_version.ok());
  EXPECT_EQ(missing_version.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing_version.status().message().find("published: 1.0.0"), std::string::npos);
  EXPECT_EQ(repo_->ListVersions("mul").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(repo_->GetPackSource("p", V("2.0.0")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(repo_->ListPackVersions("q").status().code(), StatusCode::kNotFound);
}

TEST_F(RepositoryTest, IdenticalRepublishIsIdempotent) {
  OperatorPack pack = Pack("p", "1.0.0", {Elementwise("add", "1.0.0")});
  PublishOk(pack);
  auto before = testing::DumpRepository(dir_.File("registry.db"));
  PublishResult again = PublishOk(pack, "someone-else");
  EXPECT_TRUE(again.already_published);
  ASSERT_EQ(again.operators.size(), 1u);
  EXPECT_EQ(again.operators[0].change, AliasChange::kUnchanged);
  EXPECT_EQ(testing::DumpRepository(dir_.File("registry.db")), before);
}

TEST_F(RepositoryTest, PackVersionIsImmutable) {
  PublishOk(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")}));
  auto before = testing::DumpRepository(dir_.File("registry.db"));
  OperatorPack changed = Pack("p", "1.0.0", {Elementwise("add", "1.0.0")});
  changed.source_text += "# a comment changes the YAML\n";
  auto result = repo_->Publish(changed);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(result.status().message().find("pack 'p' version 1.0.0"), std::string::npos);
  EXPECT_NE(result.status().message().find("bump the pack version"), std::string::npos);
  EXPECT_EQ(testing::DumpRepository(dir_.File("registry.db")), before);
}

TEST_F(RepositoryTest, OperatorVersionIsImmutable) {
  PublishOk(Pack("p", "1.0.0", {Elementwise("add", "1.0.0"), Elementwise("neg", "1.0.0")}));
  auto before = testing::DumpRepository(dir_.File("registry.db"));
  // A new pack version whose `add` 1.0.0 has another body; `neg` would be fine.
  auto result = repo_->Publish(Pack(
      "p", "1.1.0",
      {Elementwise("neg", "2.0.0", "out = -a;"), Elementwise("add", "1.0.0", "out = a * b;")}));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(result.status().message().find("operator 'add' version 1.0.0"), std::string::npos);
  EXPECT_NE(result.status().message().find("test.yaml:3:5"), std::string::npos);
  EXPECT_NE(result.status().message().find("bump the operator's version"), std::string::npos);
  EXPECT_EQ(testing::DumpRepository(dir_.File("registry.db")), before);
}

TEST_F(RepositoryTest, OperatorNameBelongsToOnePack) {
  PublishOk(Pack("first", "1.0.0", {Elementwise("add", "1.0.0")}));
  auto before = testing::DumpRepository(dir_.File("registry.db"));
  auto result = repo_->Publish(Pack("second", "1.0.0", {Elementwise("add", "2.0.0")}));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(result.status().message().find("belongs to pack 'first'"), std::string::npos);
  EXPECT_EQ(testing::DumpRepository(dir_.File("registry.db")), before);
}

TEST_F(RepositoryTest, InvalidPackIsRejected) {
  OperatorSpec broken = Elementwise("add", "1.0.0");
  broken.body.code.clear();
  auto result = repo_->Publish(Pack("p", "1.0.0", {broken}));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  auto bad_name = repo_->Publish(Pack("Bad Name", "1.0.0", {Elementwise("add", "1.0.0")}));
  EXPECT_EQ(bad_name.status().code(), StatusCode::kInvalidArgument);
  auto twice = repo_->Publish(
      Pack("p", "1.0.0", {Elementwise("add", "1.0.0"), Elementwise("add", "1.0.1")}));
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(repo_->ListOperators()->empty());
}

TEST_F(RepositoryTest, OperatorsLeftOutOfAPackVersionKeepTheirAlias) {
  PublishOk(Pack("p", "1.0.0", {Elementwise("add", "1.0.0"), Elementwise("sub", "1.0.0")}));
  PublishResult result = PublishOk(Pack("p", "2.0.0", {Elementwise("add", "1.0.0")}));
  EXPECT_EQ(result.operators_not_in_pack, std::vector<std::string>{"sub"});
  EXPECT_EQ(repo_->ListOperators()->size(), 2u);
}

TEST_F(RepositoryTest, RollbackSwapsAndTargets) {
  PublishOk(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")}));
  PublishOk(Pack("p", "1.1.0", {Elementwise("add", "1.1.0", "out = a + b + 0;")}));
  PublishOk(Pack("p", "1.2.0", {Elementwise("add", "1.2.0", "out = a + b + 1;")}));

  auto swap = repo_->Rollback("add", {std::nullopt, "carol", "bad build"});
  ASSERT_TRUE(swap.ok()) << swap.status().ToString();
  EXPECT_EQ(swap->old_current, V("1.2.0"));
  EXPECT_EQ(swap->current, V("1.1.0"));
  EXPECT_EQ(swap->previous, V("1.2.0"));
  auto listed = repo_->ListOperators();
  EXPECT_EQ((*listed)[0].current, V("1.1.0"));
  EXPECT_EQ((*listed)[0].previous, V("1.2.0"));

  // Swapping again restores the newer version.
  auto swap_back = repo_->Rollback("add");
  ASSERT_TRUE(swap_back.ok());
  EXPECT_EQ(swap_back->current, V("1.2.0"));

  auto to = repo_->Rollback("add", {V("1.0.0")});
  ASSERT_TRUE(to.ok()) << to.status().ToString();
  EXPECT_EQ(to->old_current, V("1.2.0"));
  EXPECT_EQ(to->current, V("1.0.0"));
  auto image = repo_->CurrentOperatorSet();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_EQ(image->size(), 1u);
  EXPECT_EQ((*image)[0].current.version, V("1.0.0"));
  ASSERT_TRUE((*image)[0].previous.has_value());
  EXPECT_EQ((*image)[0].previous->version, V("1.2.0"));
  EXPECT_EQ((*image)[0].previous->body.code, "out = a + b + 1;");
  EXPECT_EQ((*image)[0].previous_hash, OperatorContentHash(*(*image)[0].previous));

  auto history = repo_->History({"add"});
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 6u);
  EXPECT_EQ((*history)[3].action, HistoryAction::kRollback);
  EXPECT_EQ((*history)[3].actor, "carol");
  EXPECT_EQ((*history)[3].detail, "bad build");
  EXPECT_EQ((*history)[5].from_version, "1.2.0");
  EXPECT_EQ((*history)[5].to_version, "1.0.0");
}

TEST_F(RepositoryTest, RollbackErrors) {
  PublishOk(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")}));
  auto before = testing::DumpRepository(dir_.File("registry.db"));

  auto unknown = repo_->Rollback("mul");
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  auto nothing = repo_->Rollback("add");
  EXPECT_EQ(nothing.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(nothing.status().message().find("no previous version"), std::string::npos);
  auto bad_version = repo_->Rollback("add", {V("3.0.0")});
  EXPECT_EQ(bad_version.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad_version.status().message().find("no version 3.0.0"), std::string::npos);
  auto same = repo_->Rollback("add", {V("1.0.0")});
  EXPECT_EQ(same.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(testing::DumpRepository(dir_.File("registry.db")), before);
}

TEST_F(RepositoryTest, RepublishingAfterRollbackChangesNothing) {
  OperatorPack newer = Pack("p", "1.1.0", {Elementwise("add", "1.1.0", "out = b + a;")});
  PublishOk(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")}));
  PublishOk(newer);
  ASSERT_TRUE(repo_->Rollback("add").ok());
  PublishResult again = PublishOk(newer);
  EXPECT_TRUE(again.already_published);
  EXPECT_EQ(again.operators[0].old_current, V("1.0.0"));
  EXPECT_EQ(repo_->GetOperator("add")->info.version, V("1.0.0"));
}

TEST_F(RepositoryTest, PublishHookFailureRollsBack) {
  auto before = testing::DumpRepository(dir_.File("registry.db"));
  int calls = 0;
  PublishOptions options{"alice", "", [&] {
                           ++calls;
                           return Internal("stop here");
                         }};
  auto result = repo_->Publish(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")}), options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "stop here");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(testing::DumpRepository(dir_.File("registry.db")), before);
}

TEST_F(RepositoryTest, DefaultActorIsTheUser) {
  PublishOk(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")}), "");
  auto history = repo_->History();
  ASSERT_TRUE(history.ok());
  EXPECT_EQ((*history)[0].actor, DefaultActor());
  EXPECT_FALSE(DefaultActor().empty());
}

// The packs shipped in operators/ publish, and what comes back is what was
// loaded, source locations included.
TEST_F(RepositoryTest, ShippedPacksRoundTrip) {
  auto packs = LoadPackPath(std::string(GPUOS_SOURCE_DIR) + "/operators");
  ASSERT_TRUE(packs.ok()) << packs.status().ToString();
  ASSERT_FALSE(packs->empty());
  for (const OperatorPack& pack : *packs) {
    PublishResult result = PublishOk(pack);
    ASSERT_EQ(result.operators.size(), pack.operators.size());
    for (const OperatorSpec& spec : pack.operators) {
      auto stored = repo_->GetOperator(spec.name);
      ASSERT_TRUE(stored.ok()) << stored.status().ToString();
      EXPECT_EQ(OperatorToJson(stored->spec, true), OperatorToJson(spec, true)) << spec.name;
      EXPECT_EQ(stored->spec.location.file, pack.source_path);
      EXPECT_GT(stored->spec.location.line, 0);
    }
    EXPECT_TRUE(PublishOk(pack).already_published);
    auto source = repo_->GetPackSource(pack.name, pack.version);
    ASSERT_TRUE(source.ok());
    EXPECT_EQ(*source, pack.source_text);
  }
  EXPECT_TRUE(repo_->Verify()->ok());
}

TEST(RepositoryTimestamp, FormatsUtc) {
  EXPECT_EQ(FormatTimestamp(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatTimestamp(1700000000123), "2023-11-14T22:13:20.123Z");
}

}  // namespace
}  // namespace gpuos::registry
