// The build cache (put/get, corruption), Verify and Gc.
#include <gtest/gtest.h>

#include <thread>

#include "gpuos/content_hash.h"
#include "gpuos/registry/repository.h"
#include "registry/repository_test_util.h"

namespace gpuos::registry {
namespace {

using testing::Elementwise;
using testing::OpenOrDie;
using testing::Pack;
using testing::RawDb;
using testing::TempDir;

constexpr std::int64_t kDayMs = 24LL * 60 * 60 * 1000;

class RepositoryCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("registry.db");
    repo_ = OpenOrDie(path_);
    ASSERT_NE(repo_, nullptr);
  }

  void PutOk(const std::string& key, const std::string& bytes, const std::string& kind = "cubin") {
    Status status = repo_->Put(key, {kind, "sm_90", bytes});
    ASSERT_TRUE(status.ok()) << status.ToString();
  }

  bool Has(const std::string& key) {
    return RawDb(path_).Value("SELECT count(*) FROM build_cache WHERE key = '" + key + "'") == "1";
  }

  TempDir dir_;
  std::string path_;
  std::unique_ptr<Repository> repo_;
};

TEST_F(RepositoryCacheTest, PutThenGet) {
  std::string bytes(
      "\x7f"
      "ELF\0binary\0data",
      16);
  PutOk("key1", bytes);
  auto got = repo_->Get("key1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->bytes, bytes);
  EXPECT_EQ((*got)->kind, "cubin");
  EXPECT_EQ((*got)->arch, "sm_90");

  auto missing = repo_->Get("other");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  // Put replaces.
  PutOk("key1", "new bytes", "ltoir");
  EXPECT_EQ((*repo_->Get("key1"))->bytes, "new bytes");
  EXPECT_EQ((*repo_->Get("key1"))->kind, "ltoir");

  PutOk("empty", "");
  auto empty = repo_->Get("empty");
  ASSERT_TRUE(empty.ok() && empty->has_value());
  EXPECT_EQ((*empty)->bytes, "");

  auto stats = repo_->CacheStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entries, 2);
  EXPECT_EQ(stats->bytes, 9);
}

TEST_F(RepositoryCacheTest, PutRejectsBadInput) {
  EXPECT_EQ(repo_->Put("k", {"ptx", "sm_90", "x"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repo_->Put("", {"cubin", "sm_90", "x"}).code(), StatusCode::kInvalidArgument);
}

TEST_F(RepositoryCacheTest, HitRefreshesStaleLastUsed) {
  PutOk("key", "bytes");
  RawDb(path_).Exec("UPDATE build_cache SET last_used_at = 1000");
  ASSERT_TRUE(repo_->Get("key").ok());
  EXPECT_NE(RawDb(path_).Value("SELECT last_used_at FROM build_cache"), "1000");
}

TEST_F(RepositoryCacheTest, CorruptBlobIsReportedAndNeverReturned) {
  PutOk("good", "good bytes");
  PutOk("bad", "original bytes");
  RawDb(path_).Exec("UPDATE build_cache SET blob = X'00112233' WHERE key = 'bad'");

  auto report = repo_->Verify();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->problems.size(), 1u);
  EXPECT_EQ(report->problems[0].kind, VerifyProblemKind::kCacheBlob);
  EXPECT_EQ(report->problems[0].subject, "bad");
  EXPECT_EQ(report->cache_entries_checked, 2);
  EXPECT_TRUE(Has("bad"));  // Verify does not fix unless asked

  auto got = repo_->Get("bad");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
  EXPECT_FALSE(Has("bad"));  // dropped, so the rebuild's Put starts clean
  EXPECT_TRUE((*repo_->Get("good")).has_value());
  PutOk("bad", "rebuilt bytes");
  EXPECT_EQ((*repo_->Get("bad"))->bytes, "rebuilt bytes");
  EXPECT_TRUE(repo_->Verify()->ok());
}

TEST_F(RepositoryCacheTest, VerifyRemovesCorruptEntriesWhenAsked) {
  PutOk("bad", "original bytes");
  RawDb(path_).Exec("UPDATE build_cache SET blob_hash = 'ffff' WHERE key = 'bad'");
  auto report = repo_->Verify({true});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->problems.size(), 1u);
  EXPECT_EQ(report->cache_entries_removed, 1);
  EXPECT_FALSE(Has("bad"));
}

TEST_F(RepositoryCacheTest, VerifyDetectsTamperedOperatorVersionsAndAliases) {
  ASSERT_TRUE(repo_->Publish(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")})).ok());
  ASSERT_TRUE(repo_->Publish(Pack("q", "1.0.0", {Elementwise("mul", "1.0.0")})).ok());
  EXPECT_TRUE(repo_->Verify()->ok());
  {
    RawDb raw(path_);
    // Versions are immutable; a tamperer has to drop the guard first.
    raw.Exec("DROP TRIGGER operator_versions_no_update");
    raw.Exec(
        "UPDATE operator_versions SET spec_json = replace(spec_json, 'a + b', 'a - b') "
        "WHERE name = 'add'");
    raw.Exec(
        "UPDATE operators SET current_version_id = "
        "(SELECT id FROM operator_versions WHERE name = 'add') WHERE name = 'mul'");
  }
  auto report = repo_->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->operator_versions_checked, 2);
  int operator_problems = 0;
  int alias_problems = 0;
  for (const VerifyProblem& problem : report->problems) {
    if (problem.kind == VerifyProblemKind::kOperatorVersion) {
      ++operator_problems;
      EXPECT_EQ(problem.subject, "add@1.0.0");
    }
    if (problem.kind == VerifyProblemKind::kAlias) {
      ++alias_problems;
      EXPECT_EQ(problem.subject, "mul");
    }
  }
  EXPECT_EQ(operator_problems, 1);
  EXPECT_EQ(alias_problems, 1);
}

TEST_F(RepositoryCacheTest, ImmutableVersionsRefuseRawUpdates) {
  ASSERT_TRUE(repo_->Publish(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")})).ok());
  RawDb raw(path_);
  std::string error;
  EXPECT_FALSE(raw.TryExec("UPDATE pack_versions SET message = 'x'", &error));
  EXPECT_NE(error.find("immutable"), std::string::npos) << error;
  EXPECT_FALSE(raw.TryExec("DELETE FROM operator_versions", &error));
  EXPECT_EQ(raw.Value("SELECT message FROM pack_versions"), "");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM operator_versions"), "1");
}

TEST_F(RepositoryCacheTest, GcRemovesStaleEntries) {
  PutOk("fresh", "0123456789");
  PutOk("stale", "abc");
  RawDb(path_).Exec("UPDATE build_cache SET last_used_at = last_used_at - " +
                    std::to_string(40 * kDayMs) + " WHERE key = 'stale'");
  GcOptions dry;
  dry.dry_run = true;
  auto preview = repo_->Gc(dry);
  ASSERT_TRUE(preview.ok()) << preview.status().ToString();
  EXPECT_EQ(preview->entries_removed, 1);
  EXPECT_TRUE(Has("stale"));

  auto result = repo_->Gc();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->entries_removed, 1);
  EXPECT_EQ(result->bytes_removed, 3);
  EXPECT_EQ(result->entries_kept, 1);
  EXPECT_EQ(result->bytes_kept, 10);
  EXPECT_FALSE(Has("stale"));
  EXPECT_TRUE(Has("fresh"));
  auto history = repo_->History();
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].action, HistoryAction::kGc);
}

TEST_F(RepositoryCacheTest, GcLiveKeysAndSizeBudget) {
  PutOk("a", std::string(100, 'a'));
  PutOk("b", std::string(100, 'b'));
  PutOk("c", std::string(100, 'c'));
  PutOk("d", std::string(100, 'd'));
  RawDb raw(path_);
  // Least recently used first: a, b, c, d.
  raw.Exec(
      "UPDATE build_cache SET last_used_at = CASE key WHEN 'a' THEN 1 WHEN 'b' THEN 2 "
      "WHEN 'c' THEN 3 ELSE 4 END + last_used_at");
  GcOptions options;
  options.live_keys = std::unordered_set<std::string>{"a", "b", "c"};
  options.max_total_bytes = 150;
  options.vacuum = true;
  auto result = repo_->Gc(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // d is not live; a, b, c are live and so never evicted by the budget.
  EXPECT_EQ(result->entries_removed, 1);
  EXPECT_FALSE(Has("d"));
  EXPECT_GT(result->file_bytes_before, 0);
  EXPECT_GT(result->file_bytes_after, 0);

  GcOptions budget;
  budget.max_total_bytes = 150;
  auto evicted = repo_->Gc(budget);
  ASSERT_TRUE(evicted.ok());
  EXPECT_EQ(evicted->entries_removed, 2);  // a and b, the least recently used
  EXPECT_TRUE(Has("c"));
}

TEST_F(RepositoryCacheTest, GcRemovesCorruptEntries) {
  PutOk("bad", "bytes");
  RawDb(path_).Exec("UPDATE build_cache SET blob = X'01'");
  auto result = repo_->Gc();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->corrupt_removed, 1);
  EXPECT_FALSE(Has("bad"));
}

TEST_F(RepositoryCacheTest, ConcurrentThreadsShareOneRepository) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        EXPECT_TRUE(repo_->Put(key, {"ltoir", "sm_80", key}).ok());
        auto got = repo_->Get(key);
        EXPECT_TRUE(got.ok() && got->has_value() && (*got)->bytes == key);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(repo_->CacheStats()->entries, 80);
}

}  // namespace
}  // namespace gpuos::registry
