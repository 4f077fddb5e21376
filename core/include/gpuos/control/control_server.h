// ControlServer: a runtime's control socket (docs/control-socket.md).
//
// Listens on a local Unix domain socket, reads framed JSON requests
// (gpuos/control/protocol.h), hands them to a ControlHandler and writes the
// answers back. One Boost.Asio io_context runs on a thread the server owns;
// connections are served concurrently, but handler calls are made one at a
// time from that thread (a handler needs no locking against itself).
//
// Security: the parent directory is created 0700 and the socket is chmod'ed
// 0600, so only the owning user can connect; in addition each connection's
// peer uid (SO_PEERCRED) must equal this process's effective uid.
// Robustness: a malformed, oversized or unauthorised message is answered with
// an error where possible, reported to the log callback, and that connection
// is closed; the server keeps serving every other connection.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gpuos/control/protocol.h"
#include "gpuos/status.h"

namespace gpuos::control {

// What a runtime does when told about the repository. Called on the server
// thread, one call at a time; must not throw (exceptions are caught, logged
// and answered as kInternal). The returned JSON must be an object; it becomes
// the response's "result". A non-OK status becomes the response's "error".
class ControlHandler {
 public:
  virtual ~ControlHandler() = default;
  // Active image and operator versions, e.g. {"image": "...", "operators": [...]}.
  virtual Expected<nlohmann::json> Status() = 0;
  // Operators were published / rolled back in `request.repository`.
  virtual Expected<nlohmann::json> Published(const Request& request) = 0;
  virtual Expected<nlohmann::json> RolledBack(const Request& request) = 0;
};

struct ControlServerOptions {
  std::filesystem::path socket_path;  // REQUIRED; its length must fit sockaddr_un (< 108 bytes)
  std::size_t max_frame_bytes = kDefaultMaxFrameBytes;
  // A connection that has sent part of a frame, or nothing, for this long is closed.
  std::chrono::milliseconds read_timeout{5000};
  // REQUIRED, not owned; must outlive the server.
  ControlHandler* handler = nullptr;
  // Receives one line per rejected message or connection; stderr when unset.
  // Called on the server thread.
  std::function<void(const std::string&)> log;
};

class ControlServer {
 public:
  // Creates the parent directory (0700) if missing, removes a stale socket
  // file (one whose connect is refused), binds, chmods the socket 0600 and
  // starts serving on a new thread. Errors: InvalidArgument (no handler, path
  // too long), AlreadyExists (a live server answers on the path),
  // FailedPrecondition (the path exists and is not a socket; the directory is
  // owned by another user), IoError (mkdir/bind/listen failed).
  static Expected<std::unique_ptr<ControlServer>> Start(ControlServerOptions options);

  // Stops serving, joins the thread, removes the socket file (if it is still
  // the one this server created). Idempotent; also done by the destructor.
  void Stop();
  ~ControlServer();

  const std::filesystem::path& socket_path() const;

  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  struct Impl;

 private:
  explicit ControlServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuos::control
