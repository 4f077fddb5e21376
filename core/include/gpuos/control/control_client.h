// Discovery of live runtimes and the client side of the control socket
// (docs/control-socket.md).
//
// A runtime that uses repository file R registers by listening on
// `<R>.runtimes/<pid>.sock` (RuntimeSocketPath). The client lists that
// directory, connects to every `*.sock` in it, sends one request and collects
// the answers. A socket file whose connect is refused belongs to a runtime
// that died; it is removed and reported as stale.
//
// Thread safety: free functions without shared state; safe to call from any
// thread. Blocking: each runtime is contacted in turn, each bounded by
// `timeout` for connect+send and again for the answer.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <vector>

#include "gpuos/control/protocol.h"
#include "gpuos/status.h"

namespace gpuos::control {

// `<repository>.runtimes` (a sibling of the repository file).
std::filesystem::path RuntimeDirectory(const std::filesystem::path& repository);
// `<repository>.runtimes/<pid>.sock`; `<pid>-<instance>.sock` for the
// instance-th (2, 3, ...) runtime of one process on the same repository.
std::filesystem::path RuntimeSocketPath(const std::filesystem::path& repository, pid_t pid,
                                        int instance = 1);

// Sends one request on `socket_path` and waits for its answer.
// Unavailable when nobody listens; IoError on a timeout or broken
// connection; InvalidArgument when the answer is malformed or its id differs.
Expected<Response> SendRequest(const std::filesystem::path& socket_path, const Request& request,
                               std::chrono::milliseconds timeout,
                               std::size_t max_frame_bytes = kDefaultMaxFrameBytes);

// The outcome for one socket in the runtime directory.
struct RuntimeAnswer {
  std::filesystem::path socket_path;
  Status status;                     // transport/protocol failure; OK when an answer arrived
  std::optional<Response> response;  // set exactly when status.ok() (the answer may be ok=false)
};

struct NotifyReport {
  std::vector<RuntimeAnswer> answers;                // live (or unreachable) runtimes, by path
  std::vector<std::filesystem::path> stale_removed;  // refused sockets that were deleted
};

// Sends `request` to every runtime registered for `repository`. A missing
// runtime directory is not an error (no runtime: empty report). IoError only
// when the directory exists but cannot be listed.
Expected<NotifyReport> NotifyAll(const std::filesystem::path& repository, const Request& request,
                                 std::chrono::milliseconds timeout);

// NotifyAll with a "status" request: each answer's result is the runtime's
// active image and operator versions.
Expected<NotifyReport> ListRuntimes(const std::filesystem::path& repository,
                                    std::chrono::milliseconds timeout);

}  // namespace gpuos::control
