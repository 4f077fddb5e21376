// The control-socket protocol (docs/control-socket.md): how `gpuos-registry`
// talks to live runtimes over a local Unix domain socket.
//
// A frame is a 4-byte big-endian unsigned body length followed by the body:
// one UTF-8 JSON object. The body length must be 1..max_frame_bytes (64 KiB by
// default). Requests:
//   {"protocol":1,"id":N,"command":"status"}
//   {"protocol":1,"id":N,"command":"published"|"rolled_back",
//    "repository":"/path/to/repo.db",
//    "operators":[{"name":"add","version":"1.2.0"}, ...]}
// Responses:
//   {"id":N,"ok":true,"error":null,"result":{...}}
//   {"id":N,"ok":false,"error":{"code":"invalid_argument","message":"..."},
//    "result":null}
// Unknown fields are ignored (so a newer sender can add optional fields);
// an unknown "protocol" value or "command" is rejected.
//
// Every function here is pure (no I/O), never throws, and is thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuos/status.h"

namespace gpuos::control {

inline constexpr int kProtocolVersion = 1;
inline constexpr std::size_t kFrameHeaderBytes = 4;
inline constexpr std::size_t kDefaultMaxFrameBytes = 64 * 1024;

enum class Command { kStatus, kPublished, kRolledBack };

// "status", "published", "rolled_back".
const char* CommandName(Command command);

// One operator and the version that is now current for it.
struct OperatorVersion {
  std::string name;
  std::string version;  // "MAJOR.MINOR.PATCH" as the repository prints it

  bool operator==(const OperatorVersion&) const = default;
};

struct Request {
  std::int64_t id = 0;
  Command command = Command::kStatus;
  // Only for kPublished / kRolledBack (REQUIRED non-empty there; ignored for
  // kStatus): the repository file and the operators that changed.
  std::string repository;
  std::vector<OperatorVersion> operators;

  bool operator==(const Request&) const = default;
};

struct ResponseError {
  std::string code;  // a StatusCodeName(), e.g. "invalid_argument"
  std::string message;

  bool operator==(const ResponseError&) const = default;
};

struct Response {
  std::int64_t id = 0;
  bool ok = false;
  std::optional<ResponseError> error;  // set exactly when !ok
  nlohmann::json result;               // an object when ok, null otherwise

  bool operator==(const Response&) const = default;
};

// A successful response carrying `result` (REQUIRES: result is an object).
Response SuccessResponse(std::int64_t id, nlohmann::json result);
// A failed response carrying `status` (REQUIRES: !status.ok()).
Response ErrorResponse(std::int64_t id, const Status& status);

// JSON forms. The *FromJson functions validate every field and name the
// offending one; they return InvalidArgument on any malformed input and
// FailedPrecondition for an unknown protocol version.
nlohmann::json RequestToJson(const Request& request);
Expected<Request> RequestFromJson(const nlohmann::json& json);
nlohmann::json ResponseToJson(const Response& response);
Expected<Response> ResponseFromJson(const nlohmann::json& json);

// Framing. EncodeFrame returns header + body, or InvalidArgument when the
// body is empty or longer than max_frame_bytes.
Expected<std::string> EncodeFrame(std::string_view body,
                                  std::size_t max_frame_bytes = kDefaultMaxFrameBytes);
// The body length announced by a header; InvalidArgument when it is 0 or
// above max_frame_bytes (the reader must not then read the body).
Expected<std::uint32_t> DecodeFrameLength(const std::array<std::uint8_t, kFrameHeaderBytes>& header,
                                          std::size_t max_frame_bytes = kDefaultMaxFrameBytes);

// Body <-> message, with JSON parsing and validation (bodies exclude the header).
Expected<Request> DecodeRequest(std::string_view body);
Expected<Response> DecodeResponse(std::string_view body);
// Whole frames (header + body) ready to write.
Expected<std::string> EncodeRequestFrame(const Request& request,
                                         std::size_t max_frame_bytes = kDefaultMaxFrameBytes);
Expected<std::string> EncodeResponseFrame(const Response& response,
                                          std::size_t max_frame_bytes = kDefaultMaxFrameBytes);

}  // namespace gpuos::control
