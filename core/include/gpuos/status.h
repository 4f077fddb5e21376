// Status and Expected<T>: the error currency of gpuos.
//
// Every fallible C++ API returns a Status (no value) or an Expected<T> (a value
// or a Status). No exceptions cross a module or plugin boundary. A message
// says what failed, on which input, and what to do about it.
//
// Thread safety: values; copy freely.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace gpuos {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong (bad YAML, bad name)
  kNotFound,            // a named thing (operator, version, file) does not exist
  kAlreadyExists,       // a conflicting thing exists (same version, other content)
  kFailedPrecondition,  // the system is not in a state to do this (schema too new)
  kCompileError,        // NVRTC or nvJitLink rejected the sources
  kIoError,             // the file system or the database failed
  kCorrupt,             // stored data failed its integrity check
  kUnavailable,         // a resource is missing (no GPU, no driver, busy db)
  kAbiMismatch,         // a plugin built for another ABI version
  kInternal,            // a bug in gpuos
};

// Stable lowercase name of a code, e.g. "not_found". Used in --json output.
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "not_found: operator 'foo' is not in the repository"
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status CompileError(std::string m) { return {StatusCode::kCompileError, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status AbiMismatch(std::string m) { return {StatusCode::kAbiMismatch, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value of type T or a non-OK Status.
// REQUIRES: constructing from a Status only with a non-OK status.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : storage_(std::move(value)) {}        // NOLINT: implicit by design
  Expected(Status status) : storage_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(storage_).ok() && "Expected built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(storage_); }
  explicit operator bool() const { return ok(); }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(storage_); }
  const T& value() const& { return std::get<T>(storage_); }
  T&& value() && { return std::get<T>(std::move(storage_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // OK when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(storage_); }

 private:
  std::variant<T, Status> storage_;
};

}  // namespace gpuos

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define GPUOS_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::gpuos::Status gpuos_status_ = (expr);        \
    if (!gpuos_status_.ok()) return gpuos_status_; \
  } while (0)

#define GPUOS_CONCAT_INNER_(a, b) a##b
#define GPUOS_CONCAT_(a, b) GPUOS_CONCAT_INNER_(a, b)

// `GPUOS_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the
// Status from the enclosing function.
#define GPUOS_ASSIGN_OR_RETURN(lhs, expr) \
  GPUOS_ASSIGN_OR_RETURN_IMPL_(GPUOS_CONCAT_(gpuos_expected_, __LINE__), lhs, expr)
#define GPUOS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
