// Helpers shared by the control-socket tests.
#pragma once

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuos/control/control_server.h"
#include "gpuos/control/protocol.h"
#include "temp_dir.h"

namespace gpuos::control::testing {

using gpuos::testing::TempDir;

// Records what it was told; answers with a fixed image name.
class FakeHandler : public ControlHandler {
 public:
  explicit FakeHandler(std::string image = "image-a") : image_(std::move(image)) {}

  Expected<nlohmann::json> Status() override {
    return nlohmann::json{{"image", image_}, {"pid", ::getpid()}};
  }
  Expected<nlohmann::json> Published(const Request& request) override {
    std::lock_guard lock(mutex_);
    received_.push_back(request);
    if (fail_next_) {
      fail_next_ = false;
      return FailedPrecondition("staging failed on purpose");
    }
    return nlohmann::json{{"switched", true}, {"image", image_ + "+1"}};
  }
  Expected<nlohmann::json> RolledBack(const Request& request) override {
    std::lock_guard lock(mutex_);
    received_.push_back(request);
    return nlohmann::json{{"switched", true}, {"image", image_}};
  }

  void FailNext() {
    std::lock_guard lock(mutex_);
    fail_next_ = true;
  }
  std::vector<Request> received() {
    std::lock_guard lock(mutex_);
    return received_;
  }

 private:
  std::string image_;
  std::mutex mutex_;
  std::vector<Request> received_;
  bool fail_next_ = false;
};

inline sockaddr_un AddressOf(const std::filesystem::path& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  return address;
}

// A socket file nobody listens on (a runtime that died without cleaning up).
inline bool MakeStaleSocket(const std::filesystem::path& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address = AddressOf(path);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return ok;
}

// A raw client connection with a 5 s receive timeout; -1 when connect fails.
inline int RawConnect(const std::filesystem::path& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_un address = AddressOf(path);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool RawSend(int fd, const std::string& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

inline std::string Header(std::uint32_t length) {
  return {static_cast<char>(length >> 24), static_cast<char>(length >> 16),
          static_cast<char>(length >> 8), static_cast<char>(length)};
}

// Reads one response frame; an error Status on EOF, timeout or bad frame.
inline Expected<Response> RawReceive(int fd) {
  std::array<std::uint8_t, kFrameHeaderBytes> header{};
  std::size_t got = 0;
  while (got < header.size()) {
    ssize_t n = ::recv(fd, header.data() + got, header.size() - got, 0);
    if (n <= 0) return IoError("no answer header");
    got += static_cast<std::size_t>(n);
  }
  GPUOS_ASSIGN_OR_RETURN(std::uint32_t length, DecodeFrameLength(header));
  std::string body(length, '\0');
  got = 0;
  while (got < length) {
    ssize_t n = ::recv(fd, body.data() + got, length - got, 0);
    if (n <= 0) return IoError("short answer body");
    got += static_cast<std::size_t>(n);
  }
  return DecodeResponse(body);
}

// True when the peer closed the connection: recv returns 0, or ECONNRESET
// when the peer closed with bytes of ours still unread.
inline bool PeerClosed(int fd) {
  char byte;
  ssize_t n = ::recv(fd, &byte, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

}  // namespace gpuos::control::testing
