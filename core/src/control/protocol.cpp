#include "gpuos/control/protocol.h"

#include <exception>
#include <utility>

namespace gpuos::control {
namespace {

using nlohmann::json;

Status FieldError(const std::string& what, const std::string& field, const std::string& problem) {
  return InvalidArgument("control " + what + ": field '" + field + "' " + problem +
                         " (see docs/control-socket.md)");
}

Expected<std::int64_t> GetId(const json& object, const std::string& what) {
  auto it = object.find("id");
  if (it == object.end()) return FieldError(what, "id", "is missing");
  if (!it->is_number_integer()) return FieldError(what, "id", "must be an integer");
  return it->get<std::int64_t>();
}

Expected<std::string> GetString(const json& object, const std::string& key,
                                const std::string& what) {
  auto it = object.find(key);
  if (it == object.end()) return FieldError(what, key, "is missing");
  if (!it->is_string()) return FieldError(what, key, "must be a string");
  return it->get<std::string>();
}

Expected<Command> ParseCommand(const std::string& name) {
  if (name == "status") return Command::kStatus;
  if (name == "published") return Command::kPublished;
  if (name == "rolled_back") return Command::kRolledBack;
  return InvalidArgument("control request: unknown command '" + name +
                         "' (expected status, published or rolled_back)");
}

Expected<std::vector<OperatorVersion>> ParseOperators(const json& object) {
  auto it = object.find("operators");
  if (it == object.end()) return FieldError("request", "operators", "is missing");
  if (!it->is_array()) return FieldError("request", "operators", "must be an array");
  if (it->empty()) return FieldError("request", "operators", "must not be empty");
  std::vector<OperatorVersion> operators;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& entry = (*it)[i];
    const std::string where = "operators[" + std::to_string(i) + "]";
    if (!entry.is_object()) return FieldError("request", where, "must be an object");
    GPUOS_ASSIGN_OR_RETURN(std::string name, GetString(entry, "name", "request " + where));
    GPUOS_ASSIGN_OR_RETURN(std::string version, GetString(entry, "version", "request " + where));
    if (name.empty()) return FieldError("request", where + ".name", "must not be empty");
    if (version.empty()) return FieldError("request", where + ".version", "must not be empty");
    operators.push_back({std::move(name), std::move(version)});
  }
  return operators;
}

Expected<json> ParseObject(std::string_view body, const std::string& what) {
  json parsed = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return InvalidArgument("control " + what + ": body is not valid JSON (" +
                           std::to_string(body.size()) + " bytes)");
  }
  if (!parsed.is_object())
    return InvalidArgument("control " + what + ": body must be a JSON object");
  return parsed;
}

}  // namespace

const char* CommandName(Command command) {
  switch (command) {
    case Command::kStatus:
      return "status";
    case Command::kPublished:
      return "published";
    case Command::kRolledBack:
      return "rolled_back";
  }
  return "unknown";
}

Response SuccessResponse(std::int64_t id, nlohmann::json result) {
  return Response{id, true, std::nullopt, std::move(result)};
}

Response ErrorResponse(std::int64_t id, const Status& status) {
  return Response{id, false, ResponseError{StatusCodeName(status.code()), status.message()},
                  nullptr};
}

json RequestToJson(const Request& request) {
  json out = {{"protocol", kProtocolVersion},
              {"id", request.id},
              {"command", CommandName(request.command)}};
  if (request.command != Command::kStatus) {
    out["repository"] = request.repository;
    json operators = json::array();
    for (const OperatorVersion& op : request.operators) {
      operators.push_back({{"name", op.name}, {"version", op.version}});
    }
    out["operators"] = std::move(operators);
  }
  return out;
}

Expected<Request> RequestFromJson(const json& object) {
  if (!object.is_object()) return InvalidArgument("control request: must be a JSON object");
  auto protocol = object.find("protocol");
  if (protocol == object.end()) return FieldError("request", "protocol", "is missing");
  if (!protocol->is_number_integer())
    return FieldError("request", "protocol", "must be an integer");
  if (protocol->get<std::int64_t>() != kProtocolVersion) {
    return FailedPrecondition("control request: protocol version " +
                              std::to_string(protocol->get<std::int64_t>()) +
                              " is not supported (this runtime speaks version " +
                              std::to_string(kProtocolVersion) + "; upgrade one side)");
  }
  Request request;
  GPUOS_ASSIGN_OR_RETURN(request.id, GetId(object, "request"));
  GPUOS_ASSIGN_OR_RETURN(std::string command, GetString(object, "command", "request"));
  GPUOS_ASSIGN_OR_RETURN(request.command, ParseCommand(command));
  if (request.command == Command::kStatus) return request;
  GPUOS_ASSIGN_OR_RETURN(request.repository, GetString(object, "repository", "request"));
  if (request.repository.empty()) return FieldError("request", "repository", "must not be empty");
  GPUOS_ASSIGN_OR_RETURN(request.operators, ParseOperators(object));
  return request;
}

json ResponseToJson(const Response& response) {
  json error = nullptr;
  if (response.error)
    error = {{"code", response.error->code}, {"message", response.error->message}};
  return {{"id", response.id},
          {"ok", response.ok},
          {"error", std::move(error)},
          {"result", response.ok ? response.result : json(nullptr)}};
}

Expected<Response> ResponseFromJson(const json& object) {
  if (!object.is_object()) return InvalidArgument("control response: must be a JSON object");
  Response response;
  GPUOS_ASSIGN_OR_RETURN(response.id, GetId(object, "response"));
  auto ok = object.find("ok");
  if (ok == object.end()) return FieldError("response", "ok", "is missing");
  if (!ok->is_boolean()) return FieldError("response", "ok", "must be a boolean");
  response.ok = ok->get<bool>();
  auto error = object.find("error");
  auto result = object.find("result");
  if (response.ok) {
    if (error != object.end() && !error->is_null()) {
      return FieldError("response", "error", "must be null when ok is true");
    }
    if (result == object.end() || !result->is_object()) {
      return FieldError("response", "result", "must be an object when ok is true");
    }
    response.result = *result;
    return response;
  }
  if (error == object.end() || !error->is_object()) {
    return FieldError("response", "error", "must be an object when ok is false");
  }
  ResponseError parsed;
  GPUOS_ASSIGN_OR_RETURN(parsed.code, GetString(*error, "code", "response error"));
  GPUOS_ASSIGN_OR_RETURN(parsed.message, GetString(*error, "message", "response error"));
  response.error = std::move(parsed);
  return response;
}

Expected<std::string> EncodeFrame(std::string_view body, std::size_t max_frame_bytes) {
  if (body.empty()) return InvalidArgument("control frame: body is empty");
  if (body.size() > max_frame_bytes || body.size() > UINT32_MAX) {
    return InvalidArgument("control frame: body of " + std::to_string(body.size()) +
                           " bytes exceeds the limit of " + std::to_string(max_frame_bytes) +
                           " bytes (send fewer operators per message)");
  }
  const auto size = static_cast<std::uint32_t>(body.size());
  std::string frame;
  frame.reserve(kFrameHeaderBytes + body.size());
  frame.push_back(static_cast<char>((size >> 24) & 0xff));
  frame.push_back(static_cast<char>((size >> 16) & 0xff));
  frame.push_back(static_cast<char>((size >> 8) & 0xff));
  frame.push_back(static_cast<char>(size & 0xff));
  frame.append(body);
  return frame;
}

Expected<std::uint32_t> DecodeFrameLength(const std::array<std::uint8_t, kFrameHeaderBytes>& header,
                                          std::size_t max_frame_bytes) {
  const std::uint32_t size = (std::uint32_t{header[0]} << 24) | (std::uint32_t{header[1]} << 16) |
                             (std::uint32_t{header[2]} << 8) | std::uint32_t{header[3]};
  if (size == 0) return InvalidArgument("control frame: announced body length is 0");
  if (size > max_frame_bytes) {
    return InvalidArgument("control frame: announced body length " + std::to_string(size) +
                           " exceeds the limit of " + std::to_string(max_frame_bytes) + " bytes");
  }
  return size;
}

Expected<Request> DecodeRequest(std::string_view body) {
  GPUOS_ASSIGN_OR_RETURN(json parsed, ParseObject(body, "request"));
  return RequestFromJson(parsed);
}

Expected<Response> DecodeResponse(std::string_view body) {
  GPUOS_ASSIGN_OR_RETURN(json parsed, ParseObject(body, "response"));
  return ResponseFromJson(parsed);
}

Expected<std::string> EncodeRequestFrame(const Request& request, std::size_t max_frame_bytes) {
  return EncodeFrame(RequestToJson(request).dump(-1, ' ', false, json::error_handler_t::replace),
                     max_frame_bytes);
}

Expected<std::string> EncodeResponseFrame(const Response& response, std::size_t max_frame_bytes) {
  // error_handler_t::replace: invalid UTF-8 in a string must not throw out of dump().
  return EncodeFrame(ResponseToJson(response).dump(-1, ' ', false, json::error_handler_t::replace),
                     max_frame_bytes);
}

}  // namespace gpuos::control
