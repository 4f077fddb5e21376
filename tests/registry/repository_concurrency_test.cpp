// Several processes on one repository: concurrent publishers lose nothing,
// and a publisher killed inside its transaction leaves no trace.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

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

constexpr int kPublishesPerProcess = 30;

std::string VersionOf(int i) { return "1." + std::to_string(i) + ".0"; }

// Child process body: publishes pack conc<k> kPublishesPerProcess times; each
// version moves op<k> and adds a new operator aux<k>_<i>. Exit code 0 = all
// publishes succeeded.
int PublishLoop(const std::string& path, int k, int start_fd) {
  char go = 0;
  if (read(start_fd, &go, 1) != 1) return 2;
  RepositoryOptions options;
  options.path = path;
  auto repo = Repository::Open(options);
  if (!repo.ok()) {
    fprintf(stderr, "child %d: %s\n", k, repo.status().ToString().c_str());
    return 3;
  }
  const std::string suffix = std::to_string(k);
  for (int i = 1; i <= kPublishesPerProcess; ++i) {
    OperatorPack pack =
        Pack("conc" + suffix, VersionOf(i),
             {Elementwise("op" + suffix, VersionOf(i), "out = a + " + std::to_string(i) + ";"),
              Elementwise("aux" + suffix + "_" + std::to_string(i), "1.0.0")});
    auto result = (*repo)->Publish(pack, {"writer" + suffix, "round " + std::to_string(i)});
    if (!result.ok()) {
      fprintf(stderr, "child %d round %d: %s\n", k, i, result.status().ToString().c_str());
      return 4;
    }
  }
  return 0;
}

TEST(RepositoryConcurrency, TwoPublisherProcessesLoseNothing) {
  TempDir dir;
  // Both processes also race to create and initialize the file.
  const std::string path = dir.File("registry.db");
  int start[2];
  ASSERT_EQ(pipe(start), 0);
  pid_t children[2];
  for (int k = 0; k < 2; ++k) {
    children[k] = fork();
    ASSERT_GE(children[k], 0);
    if (children[k] == 0) {
      close(start[1]);
      _exit(PublishLoop(path, k, start[0]));
    }
  }
  close(start[0]);
  ASSERT_EQ(write(start[1], "gg", 2), 2);  // release both at once
  close(start[1]);
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "a publisher failed (see its output above)";
  }

  auto repo = OpenOrDie(path);
  ASSERT_NE(repo, nullptr);
  for (int k = 0; k < 2; ++k) {
    const std::string suffix = std::to_string(k);
    auto packs = repo->ListPackVersions("conc" + suffix);
    ASSERT_TRUE(packs.ok()) << packs.status().ToString();
    EXPECT_EQ(packs->size(), static_cast<std::size_t>(kPublishesPerProcess));
    auto versions = repo->ListVersions("op" + suffix);
    ASSERT_TRUE(versions.ok());
    EXPECT_EQ(versions->size(), static_cast<std::size_t>(kPublishesPerProcess));
    auto op = repo->GetOperator("op" + suffix);
    ASSERT_TRUE(op.ok());
    EXPECT_EQ(op->info.version, V(VersionOf(kPublishesPerProcess)));
    auto history = repo->History({"op" + suffix});
    ASSERT_TRUE(history.ok());
    ASSERT_EQ(history->size(), static_cast<std::size_t>(kPublishesPerProcess));
    for (int i = 0; i < kPublishesPerProcess; ++i) {
      EXPECT_EQ((*history)[i].to_version, VersionOf(i + 1));
      EXPECT_EQ((*history)[i].from_version, i == 0 ? "" : VersionOf(i));
      EXPECT_EQ((*history)[i].actor, "writer" + suffix);
    }
  }
  auto all = repo->History();
  ASSERT_TRUE(all.ok());
  // Per publish: the pack row, op<k> and aux<k>_<i>.
  EXPECT_EQ(all->size(), static_cast<std::size_t>(2 * kPublishesPerProcess * 3));
  EXPECT_EQ(repo->ListOperators()->size(), static_cast<std::size_t>(2 + 2 * kPublishesPerProcess));
  auto report = repo->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->problems[0].message;
}

bool WaitReadable(int fd, int timeout_ms) {
  pollfd poll_fd{fd, POLLIN, 0};
  return poll(&poll_fd, 1, timeout_ms) == 1;
}

TEST(RepositoryConcurrency, PublisherKilledMidTransactionLeavesNoTrace) {
  TempDir dir;
  const std::string path = dir.File("registry.db");
  {
    auto repo = OpenOrDie(path);
    ASSERT_NE(repo, nullptr);
    ASSERT_TRUE(repo->Publish(Pack("p", "1.0.0", {Elementwise("add", "1.0.0")})).ok());
    ASSERT_TRUE(repo->Put("key", {"cubin", "sm_90", "bytes"}).ok());
  }
  const auto before = testing::DumpRepository(path);

  int signal_pipe[2];
  ASSERT_EQ(pipe(signal_pipe), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(signal_pipe[0]);
    RepositoryOptions options;
    options.path = path;
    auto repo = Repository::Open(options);
    if (!repo.ok()) _exit(3);
    PublishOptions publish{"victim", "never committed", [&] {
                             // Every row is written; tell the parent and wait to be killed.
                             if (write(signal_pipe[1], "w", 1) != 1) _exit(4);
                             sleep(60);
                             return Status::Ok();
                           }};
    auto result = (*repo)->Publish(
        Pack("p", "2.0.0",
             {Elementwise("add", "2.0.0", "out = a * b;"), Elementwise("neg", "1.0.0")}),
        publish);
    _exit(result.ok() ? 5 : 6);
  }
  close(signal_pipe[1]);
  if (!WaitReadable(signal_pipe[0], 20000)) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    FAIL() << "the publisher never reached its hook";
  }
  char byte = 0;
  ASSERT_EQ(read(signal_pipe[0], &byte, 1), 1);
  close(signal_pipe[0]);

  {
    // While the publisher holds the write lock, readers see the old state
    // and another writer gives up after its busy timeout.
    RepositoryOptions impatient;
    impatient.busy_timeout_ms = 200;
    auto other = OpenOrDie(path, impatient);
    ASSERT_NE(other, nullptr);
    auto list = other->ListOperators();
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    ASSERT_EQ(list->size(), 1u);
    EXPECT_EQ((*list)[0].current, V("1.0.0"));
    Status put = other->Put("other", {"cubin", "sm_90", "x"});
    EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
    EXPECT_NE(put.message().find(path), std::string::npos) << put.message();
  }

  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  auto repo = OpenOrDie(path);
  ASSERT_NE(repo, nullptr);
  EXPECT_EQ(RawDb(path).Value("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(testing::DumpRepository(path), before);
  EXPECT_TRUE(repo->Verify()->ok());
  // The lock died with the process: the same publish now goes through.
  auto retry = repo->Publish(Pack(
      "p", "2.0.0", {Elementwise("add", "2.0.0", "out = a * b;"), Elementwise("neg", "1.0.0")}));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_EQ(repo->GetOperator("add")->info.version, V("2.0.0"));
}

}  // namespace
}  // namespace gpuos::registry
