// Shows build progress on stderr (a bar on a terminal, else lines) or hands
// events to the caller's callback.
#pragma once

#include <mutex>
#include <string>

#include "gpuos/registry/jit_builder.h"

namespace gpuos::registry::jit {

class ProgressReporter {
 public:
  // `total` = compile units this build will run NVRTC for.
  ProgressReporter(const JitOptions& options, std::string arch, int total);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // Thread safe. Fills in `done` and `total` of compile events.
  void Report(BuildEvent event);
  // Shows that the (silent, possibly long) link has started. Thread safe.
  void StartLink(int units);

 private:
  void DrawBar(const std::string& label);

  std::mutex mutex_;
  const JitOptions& options_;
  std::string arch_;
  ProgressMode mode_;
  int total_;
  int done_ = 0;
  bool bar_drawn_ = false;
};

}  // namespace gpuos::registry::jit
