// A diagnostic of the host part of a compiled call (docs/pytorch.md,
// "Configuration at run time"): with GPUOS_TORCH_HOST_TIMING set, the
// bridge records the time of each step of Program::Launch (and the torch
// extension those of Program.run around it, through the C API) and prints
// each step's mean and median to stderr when the process exits. Off: one
// branch per step.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "gpuos_torch_bridge.h"

namespace gpuos::torch_bridge {

enum class LaunchStep : int {
  kReclaim = 0,  // finished earlier runs of the program
  kBind,         // the descriptors' addresses
  kStreamQuery,  // PyTorch's stream: idle?
  kSubmit,       // Runtime::Submit
  kStreamWait,   // the stream waits for the submission (cuStreamWaitValue64)
  kAllocate,     // extension: the outputs and the workspace from PyTorch's allocator
  kRun,          // extension: Program.run from its guards to its result list
  kHostWait,     // the host waits for the submission (GPUOS_TORCH_HOST_WAIT_US)
  kCount
};
static_assert(static_cast<int>(LaunchStep::kAllocate) == GPUOS_TORCH_STEP_ALLOCATE &&
                  static_cast<int>(LaunchStep::kRun) == GPUOS_TORCH_STEP_RUN,
              "the C API's step numbers (gpuos_torch_bridge.h)");

class HostTiming {
 public:
  static HostTiming& Get();
  bool on() const { return on_; }
  void Add(LaunchStep step, std::chrono::steady_clock::duration elapsed);
  ~HostTiming();

 private:
  HostTiming();
  bool on_ = false;
  // Per step, the duration of each time it ran, in ns (a launch that
  // returns early skips the later steps, so each step has its own count);
  // at most kMaxSamples each, later ones are dropped.
  static constexpr std::size_t kMaxSamples = std::size_t{1} << 20;
  std::mutex mutex_;
  std::array<std::vector<std::uint32_t>, static_cast<int>(LaunchStep::kCount)> samples_;
};

// Times one step from construction to Stop() (or destruction).
class StepTimer {
 public:
  explicit StepTimer(LaunchStep step)
      : step_(step), on_(HostTiming::Get().on()), start_(on_ ? Now() : Clock::time_point()) {}
  ~StepTimer() { Stop(); }
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;
  void Stop() {
    if (!on_) return;
    HostTiming::Get().Add(step_, Now() - start_);
    on_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static Clock::time_point Now() { return Clock::now(); }
  LaunchStep step_;
  bool on_;
  Clock::time_point start_;
};

}  // namespace gpuos::torch_bridge
