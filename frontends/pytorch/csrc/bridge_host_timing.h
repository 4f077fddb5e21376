// A diagnostic of the host part of a compiled call (docs/pytorch.md,
// "Configuration at run time"): with GPUOS_TORCH_HOST_TIMING set, the
// bridge adds up the time of each step of Program::Launch and prints each
// step's mean to stderr when the process exits. Off: one branch per step.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace gpuos::torch_bridge {

enum class LaunchStep : int {
  kReclaim = 0,  // finished earlier runs of the program
  kBind,         // the descriptors' addresses
  kStreamQuery,  // PyTorch's stream: idle?
  kSubmit,       // Runtime::Submit
  kStreamWait,   // the stream waits for the submission (cuStreamWaitValue64)
  kCount
};

class HostTiming {
 public:
  static HostTiming& Get();
  bool on() const { return on_; }
  void Add(LaunchStep step, std::chrono::steady_clock::duration elapsed);
  ~HostTiming();

 private:
  HostTiming();
  bool on_ = false;
  // Per step: time and how many times it ran (a launch that returns early
  // skips the later steps, so each mean is over its own count).
  std::array<std::atomic<std::uint64_t>, static_cast<int>(LaunchStep::kCount)> ns_{};
  std::array<std::atomic<std::uint64_t>, static_cast<int>(LaunchStep::kCount)> counts_{};
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
