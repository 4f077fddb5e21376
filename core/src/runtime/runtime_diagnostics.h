// The runtime's state for per-submission errors (runtime_errors.cpp), the
// watchdog (runtime_watchdog.cpp) and the Chrome trace (runtime_trace.cpp).
// docs/runtime.md, "Errors", "Watchdog", "Chrome trace".
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpuos/cuda_driver.h"
#include "gpuos/device/queue.h"
#include "gpuos/registry/kernel_image.h"
#include "gpuos/status.h"

namespace gpuos::runtime {

// Where a submission's tasks are: its first runtime-wide task id and count.
struct SubmissionSpan {
  std::uint64_t sequence = 0;
  std::uint32_t first_task_id = 0;
  std::uint32_t task_count = 0;
};

// The most recent `capacity` submissions, so that a task id of an error,
// a watchdog report or a trace record can be named as "task k of
// submission s". Thread safe.
class SubmissionHistory {
 public:
  explicit SubmissionHistory(std::size_t capacity = 16384) : ring_(capacity) {}
  void Add(const SubmissionSpan& span);
  // The span of `sequence` while it is among the most recent ones.
  std::optional<SubmissionSpan> Find(std::uint64_t sequence) const;
  // The most recent span that holds `task_id`.
  std::optional<SubmissionSpan> FindTask(std::uint32_t task_id) const;
  std::uint64_t newest() const;

 private:
  mutable std::mutex mutex_;
  std::vector<SubmissionSpan> ring_;  // index (sequence - 1) % size
  std::uint64_t newest_ = 0;
};

// Errors of finished submissions, kept once their ring slot's record may be
// overwritten: the newest kMaxKept failures. Thread safe.
class FailureLog {
 public:
  static constexpr std::size_t kMaxKept = 4096;
  void Add(std::uint64_t sequence, Status status);
  std::optional<Status> Find(std::uint64_t sequence) const;
  // REQUIRES: mutex() held (see RuntimeImpl::SubmissionResult).
  std::optional<Status> FindLocked(std::uint64_t sequence) const;
  std::mutex& mutex() const { return mutex_; }

 private:
  mutable std::mutex mutex_;
  std::map<std::uint64_t, Status> failures_;
};

// Names of the operators in each slot of the kernel images the worker ran,
// by launch generation (tasks carry slots, and an epoch switch replaces the
// image). Thread safe.
class SlotNames {
 public:
  struct Name {
    std::string name;     // "add f32", "cast f32->i64"
    std::string version;  // "1.0.0"
  };
  // REQUIRES: generations noted in increasing order. Grid `generation` runs
  // `image`; cheap when the image is the one noted last.
  void Note(std::uint64_t generation, const registry::KernelImage& image);
  // The name of `slot` in the image of grid `generation` (the newest noted
  // at or before it); nullopt when unknown.
  std::optional<Name> Find(std::uint64_t generation, std::uint32_t slot) const;
  std::uint64_t newest_generation() const;

 private:
  struct Epoch {
    std::uint64_t first_generation = 0;
    std::string image_key;
    std::vector<std::optional<Name>> by_slot;
  };
  static constexpr std::size_t kMaxEpochs = 64;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const Epoch>> epochs_;  // oldest first
  std::uint64_t newest_generation_ = 0;
};

// The watchdog's view of one worker block: the task it last saw there and
// since when (host clock); a task seen at two checks `limit` apart has run at
// least that long.
struct WatchedBlock {
  device::BlockActivity seen = {};
  std::chrono::steady_clock::time_point since{};
  bool reported = false;
};

struct Diagnostics {
  // Set by AllocateQueue; fixed afterwards.
  device::SubmissionError* slot_errors = nullptr;  // mapped, [submission_capacity]
  CUdeviceptr activity = 0;                        // BlockActivity[blocks]
  CUdeviceptr trace = 0;                           // 0: tracing off
  CUdeviceptr trace_counts = 0;                    // unsigned long long[blocks]
  unsigned int blocks = 0;                         // QueueParams::diagnostic_blocks
  unsigned int trace_per_block = 0;
  int device_ordinal = 0;                       // the trace's pid
  std::chrono::nanoseconds task_time_limit{0};  // 0: watchdog off
  std::function<void(const std::string&)> watchdog_log;

  SubmissionHistory history;
  FailureLog failures;
  SlotNames slot_names;

  // Guards the watchdog's state and every copy from the diagnostic device
  // memory (Shutdown takes it before freeing that memory).
  mutable std::mutex device_mutex;
  std::vector<WatchedBlock> watched;
  std::chrono::steady_clock::time_point last_check{};
  std::vector<std::string> over_limit;  // found by the last check
  std::atomic<std::uint64_t> watchdog_reports{0};
};

// How often the watchdog looks while a Wait waits: limit / 8, within
// [1 ms, 250 ms].
std::chrono::nanoseconds WatchdogInterval(std::chrono::nanoseconds limit);

// "2.15 s", "310 ms", "12 us".
std::string FormatDuration(std::chrono::nanoseconds duration);

}  // namespace gpuos::runtime
