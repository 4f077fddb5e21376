#include "gpuos/status.h"

namespace gpuos {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kAlreadyExists:
      return "already_exists";
    case StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case StatusCode::kCompileError:
      return "compile_error";
    case StatusCode::kIoError:
      return "io_error";
    case StatusCode::kCorrupt:
      return "corrupt";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kAbiMismatch:
      return "abi_mismatch";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace gpuos
