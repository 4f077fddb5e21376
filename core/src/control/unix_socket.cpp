#include "unix_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuos::control::internal {
namespace {

Expected<sockaddr_un> MakeAddress(const std::filesystem::path& path) {
  GPUOS_RETURN_IF_ERROR(CheckSocketPathLength(path));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.native().size() + 1);
  return address;
}

timeval ToTimeval(std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  return tv;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

Status ErrnoStatus(const std::string& what, const std::filesystem::path& path) {
  return IoError(what + " failed for '" + path.string() + "': " + std::strerror(errno));
}

Status CheckSocketPathLength(const std::filesystem::path& path) {
  if (path.empty()) return InvalidArgument("control socket path is empty");
  if (path.native().size() >= sizeof(sockaddr_un::sun_path)) {
    return InvalidArgument("control socket path '" + path.string() + "' is " +
                           std::to_string(path.native().size()) + " bytes; Unix sockets allow " +
                           std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                           " (choose a shorter path)");
  }
  return Status::Ok();
}

Expected<SocketState> ProbeSocket(const std::filesystem::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return SocketState::kMissing;
    return ErrnoStatus("stat", path);
  }
  if (!S_ISSOCK(info.st_mode)) {
    return FailedPrecondition("'" + path.string() +
                              "' exists and is not a socket (remove it or choose another path)");
  }
  GPUOS_ASSIGN_OR_RETURN(sockaddr_un address, MakeAddress(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) return ErrnoStatus("socket", path);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) {
    return SocketState::kLive;
  }
  // EAGAIN: the listener's backlog is full, so somebody is listening.
  if (errno == EAGAIN || errno == EINPROGRESS) return SocketState::kLive;
  if (errno == ECONNREFUSED) return SocketState::kStale;
  if (errno == ENOENT) return SocketState::kMissing;
  return ErrnoStatus("connect", path);
}

Expected<UniqueFd> ConnectWithTimeout(const std::filesystem::path& path,
                                      std::chrono::milliseconds timeout) {
  GPUOS_ASSIGN_OR_RETURN(sockaddr_un address, MakeAddress(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return ErrnoStatus("socket", path);
  const timeval tv = ToTimeval(timeout);
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
      ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
    return ErrnoStatus("setsockopt", path);
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    if (errno == ECONNREFUSED || errno == ENOENT) {
      return Unavailable("connect to '" + path.string() + "' refused: no runtime listens there");
    }
    return ErrnoStatus("connect", path);
  }
  return fd;
}

Status SendAll(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return IoError("send timed out");
      return IoError(std::string("send failed: ") + std::strerror(errno));
    }
    sent += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

Expected<std::string> ReceiveExactly(int fd, std::size_t size) {
  std::string data(size, '\0');
  std::size_t received = 0;
  while (received < size) {
    ssize_t n = ::recv(fd, data.data() + received, size - received, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return IoError("receive timed out");
      return IoError(std::string("receive failed: ") + std::strerror(errno));
    }
    if (n == 0) {
      return IoError("peer closed the connection after " + std::to_string(received) + " of " +
                     std::to_string(size) + " bytes");
    }
    received += static_cast<std::size_t>(n);
  }
  return data;
}

}  // namespace gpuos::control::internal
