#include "gpuos/control/control_server.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <thread>

#include "control_test_support.h"
#include "gpuos/control/control_client.h"

namespace gpuos::control {
namespace {

using testing::FakeHandler;
using testing::TempDir;

class ControlServerTest : public ::testing::Test {
 protected:
  ControlServerOptions Options(const std::filesystem::path& path) {
    ControlServerOptions options;
    options.socket_path = path;
    options.handler = &handler_;
    options.read_timeout = std::chrono::milliseconds(2000);
    options.log = [this](const std::string& line) {
      std::lock_guard lock(log_mutex_);
      log_.push_back(line);
    };
    return options;
  }
  std::unique_ptr<ControlServer> StartAt(const std::filesystem::path& path) {
    auto server = ControlServer::Start(Options(path));
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return server.ok() ? std::move(*server) : nullptr;
  }
  std::string Log() {
    std::lock_guard lock(log_mutex_);
    std::string all;
    for (const auto& line : log_) all += line + "\n";
    return all;
  }

  TempDir dir_;
  FakeHandler handler_;
  std::mutex log_mutex_;
  std::vector<std::string> log_;
};

Request StatusRequest(std::int64_t id) {
  Request request;
  request.id = id;
  return request;
}

TEST_F(ControlServerTest, AnswersRequestsOnOneConnection) {
  auto server = StartAt(dir_.File("rt.sock"));
  ASSERT_NE(server, nullptr);
  int fd = testing::RawConnect(server->socket_path());
  ASSERT_GE(fd, 0);

  ASSERT_TRUE(testing::RawSend(fd, *EncodeRequestFrame(StatusRequest(5))));
  auto status = testing::RawReceive(fd);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_TRUE(status->ok);
  EXPECT_EQ(status->id, 5);
  EXPECT_EQ(status->result["image"], "image-a");

  Request published;
  published.id = 6;
  published.command = Command::kPublished;
  published.repository = "/r.db";
  published.operators = {{"add", "2.0.0"}};
  ASSERT_TRUE(testing::RawSend(fd, *EncodeRequestFrame(published)));
  auto answer = testing::RawReceive(fd);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_TRUE(answer->ok);
  EXPECT_EQ(answer->id, 6);
  EXPECT_EQ(answer->result["switched"], true);
  ASSERT_EQ(handler_.received().size(), 1u);
  EXPECT_EQ(handler_.received()[0], published);

  // A handler failure is an answer, not a broken connection.
  handler_.FailNext();
  published.id = 7;
  ASSERT_TRUE(testing::RawSend(fd, *EncodeRequestFrame(published)));
  auto failed = testing::RawReceive(fd);
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_FALSE(failed->ok);
  EXPECT_EQ(failed->error->code, "failed_precondition");
  EXPECT_NE(failed->error->message.find("on purpose"), std::string::npos);
  ASSERT_TRUE(testing::RawSend(fd, *EncodeRequestFrame(StatusRequest(8))));
  EXPECT_TRUE(testing::RawReceive(fd).ok());
  ::close(fd);

  auto via_client = SendRequest(server->socket_path(), StatusRequest(9), std::chrono::seconds(2));
  ASSERT_TRUE(via_client.ok()) << via_client.status().ToString();
  EXPECT_EQ(via_client->id, 9);
}

struct BadInput {
  const char* name;
  std::string bytes;
  const char* error_mentions;
};

TEST_F(ControlServerTest, BadFramesAreRejectedWhileOtherConnectionsAreServed) {
  auto server = StartAt(dir_.File("rt.sock"));
  ASSERT_NE(server, nullptr);
  const std::string not_json = "this is not json";
  const std::string unknown = R"({"protocol":1,"id":77,"command":"reboot"})";
  const std::vector<BadInput> inputs = {
      {"malformed", testing::Header(not_json.size()) + not_json, "not valid JSON"},
      {"oversized", testing::Header(70000), "exceeds the limit"},
      {"garbage", std::string("\x00\x00\x00\x05\xff\x00\xfe\x01\x80", 9), "not valid JSON"},
      {"http", "GET / HTTP/1.1\r\n\r\n", "exceeds the limit"},
      {"unknown_command", testing::Header(unknown.size()) + unknown, "reboot"},
  };
  int healthy = testing::RawConnect(server->socket_path());
  ASSERT_GE(healthy, 0);
  for (const BadInput& input : inputs) {
    SCOPED_TRACE(input.name);
    int bad = testing::RawConnect(server->socket_path());
    ASSERT_GE(bad, 0);
    ASSERT_TRUE(testing::RawSend(bad, input.bytes));
    auto answer = testing::RawReceive(bad);
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    EXPECT_FALSE(answer->ok);
    EXPECT_EQ(answer->error->code, "invalid_argument");
    EXPECT_NE(answer->error->message.find(input.error_mentions), std::string::npos)
        << answer->error->message;
    EXPECT_TRUE(testing::PeerClosed(bad)) << "the bad connection must be closed";
    ::close(bad);

    ASSERT_TRUE(testing::RawSend(healthy, *EncodeRequestFrame(StatusRequest(1))));
    auto served = testing::RawReceive(healthy);
    ASSERT_TRUE(served.ok()) << served.status().ToString();
    EXPECT_TRUE(served->ok);
  }
  ::close(healthy);
  const std::string log = Log();
  EXPECT_NE(log.find("not valid JSON"), std::string::npos) << log;
  EXPECT_NE(log.find("exceeds the limit"), std::string::npos) << log;
  EXPECT_NE(log.find("reboot"), std::string::npos) << log;
}

TEST_F(ControlServerTest, AnswerToAnUnknownCommandKeepsTheRequestId) {
  auto server = StartAt(dir_.File("rt.sock"));
  ASSERT_NE(server, nullptr);
  int fd = testing::RawConnect(server->socket_path());
  const std::string body = R"({"protocol":1,"id":77,"command":"reboot"})";
  ASSERT_TRUE(testing::RawSend(fd, testing::Header(body.size()) + body));
  auto answer = testing::RawReceive(fd);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->id, 77);
  ::close(fd);
}

TEST_F(ControlServerTest, IdleConnectionTimesOut) {
  ControlServerOptions options = Options(dir_.File("rt.sock"));
  options.read_timeout = std::chrono::milliseconds(150);
  auto server = ControlServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  int fd = testing::RawConnect((*server)->socket_path());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(testing::RawSend(fd, std::string("\x00\x00", 2)));  // half a header, then silence
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(testing::PeerClosed(fd));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  ::close(fd);
  EXPECT_NE(Log().find("timed out"), std::string::npos) << Log();
}

TEST_F(ControlServerTest, SocketIsOwnerOnlyInAnOwnerOnlyDirectory) {
  const auto path = std::filesystem::path(dir_.File("runtimes")) / "rt.sock";
  auto server = StartAt(path);
  ASSERT_NE(server, nullptr);
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(path.parent_path().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);

  server->Stop();
  EXPECT_FALSE(std::filesystem::exists(path)) << "Stop() removes the socket file";
  server->Stop();  // idempotent
}

TEST_F(ControlServerTest, StaleSocketIsReplacedLiveOneIsRefused) {
  const auto path = dir_.File("rt.sock");
  ASSERT_TRUE(testing::MakeStaleSocket(path));
  auto first = StartAt(path);
  ASSERT_NE(first, nullptr);
  auto status = SendRequest(path, StatusRequest(1), std::chrono::seconds(2));
  EXPECT_TRUE(status.ok()) << status.status().ToString();

  auto second = ControlServer::Start(Options(path));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists) << second.status().ToString();
  // The refused start must leave the live server alone.
  EXPECT_TRUE(SendRequest(path, StatusRequest(2), std::chrono::seconds(2)).ok());

  const auto regular = dir_.File("file.sock");
  { std::ofstream(regular) << "x"; }
  auto on_file = ControlServer::Start(Options(regular));
  ASSERT_FALSE(on_file.ok());
  EXPECT_EQ(on_file.status().code(), StatusCode::kFailedPrecondition);

  ControlServerOptions no_handler = Options(dir_.File("x.sock"));
  no_handler.handler = nullptr;
  EXPECT_EQ(ControlServer::Start(no_handler).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ControlServer::Start(Options(dir_.File(std::string(120, 'a')))).status().code(),
            StatusCode::kInvalidArgument);
}

// Runs `body` in a child process with uid/gid nobody; returns its exit code.
int RunAsNobody(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(90);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

TEST_F(ControlServerTest, ClientOfAnotherUidIsRefused) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to fork a client with another uid (running as uid " << ::geteuid()
                 << ")";
  }
  const auto path = std::filesystem::path(dir_.File("runtimes")) / "rt.sock";
  auto server = StartAt(path);
  ASSERT_NE(server, nullptr);
  // File permissions alone stop the other user (0700 directory, 0600 socket).
  EXPECT_EQ(RunAsNobody([&] { return testing::RawConnect(path) < 0 ? 0 : 1; }), 0);

  // With the permissions opened up, SO_PEERCRED still refuses the peer.
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(path.parent_path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0777), 0);
  EXPECT_EQ(RunAsNobody([&] {
              int fd = testing::RawConnect(path);
              if (fd < 0) return 2;
              // The server may refuse before the request arrives (EPIPE); its
              // answer is still waiting in this socket's receive queue.
              (void)testing::RawSend(fd, *EncodeRequestFrame(StatusRequest(3)));
              auto answer = testing::RawReceive(fd);
              if (!answer.ok()) return 4;
              if (answer->ok || answer->error->code != "failed_precondition") return 5;
              return testing::PeerClosed(fd) ? 0 : 6;
            }),
            0);
  EXPECT_NE(Log().find("uid 65534"), std::string::npos) << Log();
  EXPECT_TRUE(handler_.received().empty());
}

}  // namespace
}  // namespace gpuos::control
