#include "exit_codes.h"

namespace gpuos::cli {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidArgument:
      return kExitInvalidInput;
    case StatusCode::kNotFound:
      return kExitNotFound;
    case StatusCode::kAlreadyExists:
      return kExitConflict;
    case StatusCode::kFailedPrecondition:
      return kExitRepository;
    case StatusCode::kCompileError:
      return kExitCompileError;
    case StatusCode::kCorrupt:
      return kExitRepository;
    case StatusCode::kUnavailable:
      return kExitUnavailable;
    case StatusCode::kAbiMismatch:
      return kExitFailure;
    case StatusCode::kIoError:
      return kExitFailure;
    case StatusCode::kInternal:
      return kExitFailure;
  }
  return kExitFailure;
}

}  // namespace gpuos::cli
