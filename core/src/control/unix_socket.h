// POSIX helpers shared by the control server and client (private to
// gpuos::control). All return Status/Expected and never throw.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "gpuos/status.h"

namespace gpuos::control::internal {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  ~UniqueFd();
  int get() const { return fd_; }
  int release();

 private:
  int fd_ = -1;
};

// InvalidArgument when `path` does not fit sockaddr_un.
Status CheckSocketPathLength(const std::filesystem::path& path);

enum class SocketState {
  kMissing,  // no file at the path
  kLive,     // a server accepted (or is too busy to accept) a connection
  kStale,    // a socket file nobody listens on (connect refused)
};

// Probes `path` with a non-blocking connect. FailedPrecondition when the path
// exists and is not a socket; IoError for other failures (e.g. permission).
Expected<SocketState> ProbeSocket(const std::filesystem::path& path);

// Connects to `path`; the returned descriptor has send and receive timeouts of
// `timeout`. Unavailable (message says "refused") when nobody listens.
Expected<UniqueFd> ConnectWithTimeout(const std::filesystem::path& path,
                                      std::chrono::milliseconds timeout);

// Writes all of `data` (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
Status SendAll(int fd, const std::string& data);
// Reads exactly `size` bytes; IoError on timeout or a peer that closed early.
Expected<std::string> ReceiveExactly(int fd, std::size_t size);

// "<what> failed for '<path>': <strerror(errno)>".
Status ErrnoStatus(const std::string& what, const std::filesystem::path& path);

}  // namespace gpuos::control::internal
