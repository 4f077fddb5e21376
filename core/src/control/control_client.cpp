#include "gpuos/control/control_client.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "unix_socket.h"

namespace gpuos::control {

std::filesystem::path RuntimeDirectory(const std::filesystem::path& repository) {
  std::filesystem::path directory = repository;
  directory += ".runtimes";
  return directory;
}

std::filesystem::path RuntimeSocketPath(const std::filesystem::path& repository, pid_t pid,
                                        int instance) {
  const std::string suffix = instance <= 1 ? "" : "-" + std::to_string(instance);
  return RuntimeDirectory(repository) / (std::to_string(pid) + suffix + ".sock");
}

Expected<Response> SendRequest(const std::filesystem::path& socket_path, const Request& request,
                               std::chrono::milliseconds timeout, std::size_t max_frame_bytes) {
  const std::string where = "control socket '" + socket_path.string() + "'";
  GPUOS_ASSIGN_OR_RETURN(std::string frame, EncodeRequestFrame(request, max_frame_bytes));
  GPUOS_ASSIGN_OR_RETURN(internal::UniqueFd fd, internal::ConnectWithTimeout(socket_path, timeout));
  GPUOS_RETURN_IF_ERROR(internal::SendAll(fd.get(), frame).WithContext(where));
  auto header_bytes = internal::ReceiveExactly(fd.get(), kFrameHeaderBytes);
  if (!header_bytes.ok()) return header_bytes.status().WithContext(where);
  std::array<std::uint8_t, kFrameHeaderBytes> header{};
  std::memcpy(header.data(), header_bytes->data(), kFrameHeaderBytes);
  auto length = DecodeFrameLength(header, max_frame_bytes);
  if (!length.ok()) return length.status().WithContext(where);
  auto body = internal::ReceiveExactly(fd.get(), *length);
  if (!body.ok()) return body.status().WithContext(where);
  auto response = DecodeResponse(*body);
  if (!response.ok()) return response.status().WithContext(where);
  // An error answer to a message the server could not parse carries id 0.
  if (response->id != request.id && !(response->id == 0 && !response->ok)) {
    return InvalidArgument(where + ": answer id " + std::to_string(response->id) +
                           " does not match request id " + std::to_string(request.id));
  }
  return response;
}

Expected<NotifyReport> NotifyAll(const std::filesystem::path& repository, const Request& request,
                                 std::chrono::milliseconds timeout) {
  NotifyReport report;
  const std::filesystem::path directory = RuntimeDirectory(repository);
  std::error_code ec;
  if (!std::filesystem::exists(directory, ec)) return report;
  std::vector<std::filesystem::path> sockets;
  for (std::filesystem::directory_iterator it(directory, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().extension() == ".sock") sockets.push_back(it->path());
  }
  if (ec)
    return IoError("cannot list runtime directory '" + directory.string() + "': " + ec.message());
  std::sort(sockets.begin(), sockets.end());

  for (const std::filesystem::path& socket : sockets) {
    auto state = internal::ProbeSocket(socket);
    if (state.ok() && *state == internal::SocketState::kMissing) continue;  // gone meanwhile
    if (state.ok() && *state == internal::SocketState::kStale) {
      if (::unlink(socket.c_str()) == 0 || errno == ENOENT) {
        report.stale_removed.push_back(socket);
      } else {
        report.answers.push_back(
            {socket, internal::ErrnoStatus("removing stale socket", socket), std::nullopt});
      }
      continue;
    }
    if (!state.ok()) {
      report.answers.push_back({socket, state.status(), std::nullopt});
      continue;
    }
    auto response = SendRequest(socket, request, timeout);
    if (response.ok()) {
      report.answers.push_back({socket, Status::Ok(), std::move(*response)});
    } else {
      report.answers.push_back({socket, response.status(), std::nullopt});
    }
  }
  return report;
}

Expected<NotifyReport> ListRuntimes(const std::filesystem::path& repository,
                                    std::chrono::milliseconds timeout) {
  Request request;
  request.id = 1;
  request.command = Command::kStatus;
  return NotifyAll(repository, request, timeout);
}

}  // namespace gpuos::control
