#include "gpuos/control/control_client.h"

#include <gtest/gtest.h>

#include "control_test_support.h"
#include "gpuos/control/control_server.h"

namespace gpuos::control {
namespace {

using testing::FakeHandler;
using testing::TempDir;

constexpr std::chrono::milliseconds kTimeout{2000};

TEST(ControlClient, RuntimeDirectoryIsASiblingOfTheRepository) {
  EXPECT_EQ(RuntimeDirectory("/srv/ops/repo.db"), "/srv/ops/repo.db.runtimes");
  EXPECT_EQ(RuntimeSocketPath("/srv/ops/repo.db", 1234), "/srv/ops/repo.db.runtimes/1234.sock");
  EXPECT_EQ(RuntimeSocketPath("/srv/ops/repo.db", 1234, 2),
            "/srv/ops/repo.db.runtimes/1234-2.sock");
}

TEST(ControlClient, NotifyAllReachesEveryLiveRuntimeAndRemovesStaleOnes) {
  TempDir dir;
  const std::filesystem::path repository = dir.File("repo.db");
  FakeHandler first("image-1"), second("image-2");
  std::vector<std::unique_ptr<ControlServer>> servers;
  for (auto [pid, handler] : {std::pair{1001, &first}, std::pair{1002, &second}}) {
    ControlServerOptions options;
    options.socket_path = RuntimeSocketPath(repository, pid);
    options.handler = handler;
    auto server = ControlServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    servers.push_back(std::move(*server));
  }
  const auto stale = RuntimeSocketPath(repository, 1003);
  ASSERT_TRUE(testing::MakeStaleSocket(stale));

  Request published;
  published.id = 11;
  published.command = Command::kPublished;
  published.repository = repository.string();
  published.operators = {{"add", "1.1.0"}};
  auto report = NotifyAll(repository, published, kTimeout);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->answers.size(), 2u);
  for (const RuntimeAnswer& answer : report->answers) {
    ASSERT_TRUE(answer.status.ok()) << answer.status.ToString();
    ASSERT_TRUE(answer.response.has_value());
    EXPECT_TRUE(answer.response->ok);
    EXPECT_EQ(answer.response->id, 11);
  }
  EXPECT_EQ(report->answers[0].socket_path, RuntimeSocketPath(repository, 1001));
  EXPECT_EQ(report->answers[0].response->result["image"], "image-1+1");
  EXPECT_EQ(report->answers[1].response->result["image"], "image-2+1");
  ASSERT_EQ(first.received().size(), 1u);
  EXPECT_EQ(first.received()[0], published);
  ASSERT_EQ(second.received().size(), 1u);
  ASSERT_EQ(report->stale_removed.size(), 1u);
  EXPECT_EQ(report->stale_removed[0], stale);
  EXPECT_FALSE(std::filesystem::exists(stale));

  auto listed = ListRuntimes(repository, kTimeout);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->answers.size(), 2u);
  EXPECT_EQ(listed->answers[0].response->result["image"], "image-1");
  EXPECT_EQ(listed->answers[1].response->result["image"], "image-2");
  EXPECT_TRUE(listed->stale_removed.empty());
}

TEST(ControlClient, NoRuntimeDirectoryMeansNoRuntimes) {
  TempDir dir;
  auto report = ListRuntimes(dir.File("repo.db"), kTimeout);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->answers.empty());
  EXPECT_TRUE(report->stale_removed.empty());
}

TEST(ControlClient, SendRequestToNobodyIsUnavailable) {
  TempDir dir;
  Request request;
  request.id = 1;
  auto missing = SendRequest(dir.File("none.sock"), request, kTimeout);
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable) << missing.status().ToString();
}

}  // namespace
}  // namespace gpuos::control
