#include "gpuos/control/control_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <boost/asio.hpp>
#include <cerrno>
#include <exception>
#include <iostream>
#include <mutex>
#include <thread>
#include <utility>

#include "unix_socket.h"

namespace gpuos::control {

namespace asio = boost::asio;
using asio::local::stream_protocol;

struct ControlServer::Impl {
  ControlServerOptions options;
  asio::io_context io;
  stream_protocol::acceptor acceptor{io};
  std::thread thread;
  dev_t socket_device = 0;
  ino_t socket_inode = 0;
  std::mutex stop_mutex;  // Stop may be called from several threads
  bool stopped = false;   // guarded by stop_mutex

  void Log(const std::string& line) {
    const std::string message = "gpuos control [" + options.socket_path.string() + "]: " + line;
    if (options.log) {
      options.log(message);
    } else {
      std::cerr << message << '\n';
    }
  }
  void Accept();
};

namespace {

// An id for error answers: the request's own id when the body is a JSON
// object with an integer "id", else 0.
std::int64_t BestEffortId(const std::string& body) {
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    auto it = parsed.find("id");
    if (it != parsed.end() && it->is_number_integer()) return it->get<std::int64_t>();
  }
  return 0;
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ControlServer::Impl& server, stream_protocol::socket socket)
      : server_(server), socket_(std::move(socket)), timer_(server.io) {}

  void Start() {
    ucred peer{};
    socklen_t length = sizeof(peer);
    if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
      Reject(0, IoError("cannot read the peer's credentials (SO_PEERCRED)"));
      return;
    }
    if (peer.uid != ::geteuid()) {
      Reject(0, FailedPrecondition("peer uid " + std::to_string(peer.uid) + " (pid " +
                                   std::to_string(peer.pid) + ") is not the runtime's uid " +
                                   std::to_string(::geteuid()) + "; connection refused"));
      return;
    }
    ReadHeader();
  }

 private:
  void ArmTimer(const char* phase) {
    timer_.expires_after(server_.options.read_timeout);
    timer_.async_wait([self = shared_from_this(), phase](const boost::system::error_code& ec) {
      if (ec || self->timer_.expiry() > asio::steady_timer::clock_type::now()) return;
      self->server_.Log(std::string("connection timed out while ") + phase + "; closed");
      self->Close();
    });
  }

  void ReadHeader() {
    ArmTimer("waiting for a request");
    asio::async_read(socket_, asio::buffer(header_),
                     [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                       self->OnHeader(ec);
                     });
  }

  void OnHeader(const boost::system::error_code& ec) {
    if (ec) {
      // A client closing between requests is the normal end of a connection.
      if (ec != asio::error::eof && ec != asio::error::operation_aborted) {
        server_.Log("read failed: " + ec.message());
      }
      Close();
      return;
    }
    auto length = DecodeFrameLength(header_, server_.options.max_frame_bytes);
    if (!length.ok()) {
      Reject(0, length.status());
      return;
    }
    body_.assign(*length, '\0');
    asio::async_read(socket_, asio::buffer(body_),
                     [self = shared_from_this()](const boost::system::error_code& read_ec,
                                                 std::size_t) { self->OnBody(read_ec); });
  }

  void OnBody(const boost::system::error_code& ec) {
    timer_.cancel();
    if (ec) {
      if (ec != asio::error::operation_aborted) {
        server_.Log("read of a " + std::to_string(body_.size()) +
                    "-byte body failed: " + ec.message());
      }
      Close();
      return;
    }
    auto request = DecodeRequest(body_);
    if (!request.ok()) {
      Reject(BestEffortId(body_), request.status());
      return;
    }
    Write(Dispatch(*request), /*close_after=*/false);
  }

  Response Dispatch(const Request& request) {
    ControlHandler& handler = *server_.options.handler;
    Expected<nlohmann::json> result = Internal("no result");
    try {
      switch (request.command) {
        case Command::kStatus:
          result = handler.Status();
          break;
        case Command::kPublished:
          result = handler.Published(request);
          break;
        case Command::kRolledBack:
          result = handler.RolledBack(request);
          break;
      }
    } catch (const std::exception& e) {
      result = Internal(std::string("control handler threw: ") + e.what());
    } catch (...) {
      result = Internal("control handler threw a non-standard exception");
    }
    if (!result.ok()) return ErrorResponse(request.id, result.status());
    if (!result->is_object()) {
      return ErrorResponse(request.id,
                           Internal("control handler returned a non-object result for '" +
                                    std::string(CommandName(request.command)) + "'"));
    }
    return SuccessResponse(request.id, std::move(*result));
  }

  void Reject(std::int64_t id, const Status& status) {
    server_.Log("rejected: " + status.ToString());
    Write(ErrorResponse(id, status), /*close_after=*/true);
  }

  void Write(const Response& response, bool close_after) {
    auto frame = EncodeResponseFrame(response, server_.options.max_frame_bytes);
    if (!frame.ok()) {
      server_.Log("answer not sendable: " + frame.status().ToString());
      frame = EncodeResponseFrame(ErrorResponse(response.id, frame.status()),
                                  server_.options.max_frame_bytes);
      if (!frame.ok()) {
        Close();
        return;
      }
    }
    out_ = std::move(*frame);
    ArmTimer("writing an answer");
    asio::async_write(
        socket_, asio::buffer(out_),
        [self = shared_from_this(), close_after](const boost::system::error_code& ec, std::size_t) {
          self->timer_.cancel();
          if (ec && ec != asio::error::operation_aborted) {
            self->server_.Log("write failed: " + ec.message());
          }
          if (ec || close_after) {
            self->Close();
          } else {
            self->ReadHeader();
          }
        });
  }

  void Close() {
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.shutdown(stream_protocol::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  ControlServer::Impl& server_;
  stream_protocol::socket socket_;
  asio::steady_timer timer_;
  std::array<std::uint8_t, kFrameHeaderBytes> header_{};
  std::string body_;
  std::string out_;
};

Status PrepareDirectory(const std::filesystem::path& directory) {
  if (directory.empty()) return Status::Ok();
  std::error_code ec;
  if (std::filesystem::exists(directory, ec)) {
    if (!std::filesystem::is_directory(directory, ec)) {
      return FailedPrecondition("'" + directory.string() + "' is not a directory");
    }
    return Status::Ok();
  }
  if (!std::filesystem::create_directories(directory, ec) && ec) {
    return IoError("cannot create '" + directory.string() + "': " + ec.message());
  }
  if (::chmod(directory.c_str(), 0700) != 0) return internal::ErrnoStatus("chmod 0700", directory);
  return Status::Ok();
}

}  // namespace

void ControlServer::Impl::Accept() {
  acceptor.async_accept(
      [this](const boost::system::error_code& ec, stream_protocol::socket socket) {
        if (ec == asio::error::operation_aborted) return;
        if (ec) {
          Log("accept failed: " + ec.message());
        } else {
          std::make_shared<Connection>(*this, std::move(socket))->Start();
        }
        Accept();
      });
}

Expected<std::unique_ptr<ControlServer>> ControlServer::Start(ControlServerOptions options) {
  if (options.handler == nullptr) return InvalidArgument("ControlServer::Start: handler is null");
  if (options.max_frame_bytes == 0) {
    return InvalidArgument("ControlServer::Start: max_frame_bytes must be positive");
  }
  const std::filesystem::path path = options.socket_path;
  GPUOS_RETURN_IF_ERROR(internal::CheckSocketPathLength(path));
  GPUOS_RETURN_IF_ERROR(PrepareDirectory(path.parent_path()));

  GPUOS_ASSIGN_OR_RETURN(internal::SocketState state, internal::ProbeSocket(path));
  if (state == internal::SocketState::kLive) {
    return AlreadyExists("a live control server already answers on '" + path.string() +
                         "' (stop that runtime or choose another socket path)");
  }
  if (state == internal::SocketState::kStale && ::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return internal::ErrnoStatus("removing stale socket", path);
  }

  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  boost::system::error_code ec;
  impl->acceptor.open(stream_protocol(), ec);
  if (!ec) impl->acceptor.bind(stream_protocol::endpoint(path.string()), ec);
  if (ec) return IoError("cannot bind control socket '" + path.string() + "': " + ec.message());
  // Between bind and chmod the socket has umask permissions; the 0700 directory
  // and the SO_PEERCRED check cover that window.
  if (::chmod(path.c_str(), 0600) != 0) {
    Status status = internal::ErrnoStatus("chmod 0600", path);
    ::unlink(path.c_str());
    return status;
  }
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    impl->socket_device = info.st_dev;
    impl->socket_inode = info.st_ino;
  }
  impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    ::unlink(path.c_str());
    return IoError("cannot listen on control socket '" + path.string() + "': " + ec.message());
  }
  impl->Accept();
  Impl* raw = impl.get();
  try {
    impl->thread = std::thread([raw] {
      try {
        raw->io.run();
      } catch (const std::exception& e) {
        raw->Log(std::string("server thread stopped by an exception: ") + e.what());
      }
    });
  } catch (const std::exception& e) {
    ::unlink(path.c_str());
    return Internal(std::string("cannot start the control server thread: ") + e.what());
  }
  return std::unique_ptr<ControlServer>(new ControlServer(std::move(impl)));
}

ControlServer::ControlServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ControlServer::~ControlServer() { Stop(); }

const std::filesystem::path& ControlServer::socket_path() const {
  return impl_->options.socket_path;
}

void ControlServer::Stop() {
  std::lock_guard<std::mutex> lock(impl_->stop_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  // Only remove the file if it is still ours (a successor may have replaced it).
  struct stat info {};
  const std::filesystem::path& path = impl_->options.socket_path;
  if (::stat(path.c_str(), &info) == 0 && info.st_dev == impl_->socket_device &&
      info.st_ino == impl_->socket_inode) {
    ::unlink(path.c_str());
  }
}

}  // namespace gpuos::control
