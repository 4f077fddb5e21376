// An epoch switch (docs/live-update.md): replace the active kernel image by a
// staged one without losing or re-running a task. The steps, in order:
//
//   1. stage: build the new image (from the build cache where it can) and
//      prepare its host-side tables while the active image keeps serving;
//   2. quiesce: stop admitting submissions, let the worker finish what it
//      holds and park (module loading blocks while any kernel runs);
//   3. load the staged image next to the active one;
//   4. commit: make it active (dispatch table, alias table), unload the old
//      image, which is safe: nothing runs;
//   5. resume: admit again; the next submission relaunches the worker.
//
// The queue, tensors and every submission outlive the switch. A failure in
// 1 leaves everything untouched; in 2 or 3 the active image is kept and the
// runtime resumes; either way the error is returned.
//
// RunEpochSwitch drives an EpochDevice through these steps; the runtime is
// one, tests use a fake.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gpuos/registry/kernel_image.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::runtime {

// A built, not yet loaded image and the operator versions it was built from.
struct StagedImage {
  registry::KernelImage image;
  std::vector<registry::OperatorSpec> specs;
  // Operator -> the version to activate in it (others: the newest).
  std::map<std::string, registry::SemVer> active;
};

class EpochDevice {
 public:
  virtual ~EpochDevice() = default;
  // Host-side preparation of `staged` (dispatch tables), outside the service
  // gap: nothing is loaded and the active image keeps serving. A failure
  // leaves everything as it was.
  virtual Status Prepare(const StagedImage& staged) = 0;
  // Stops admitting submissions and waits, at most `timeout`, until none is
  // in flight and the worker is parked. On error the device must still
  // accept Resume().
  virtual Status Quiesce(std::chrono::microseconds timeout) = 0;
  // Loads `staged` next to the active image. REQUIRES: quiesced, and
  // Prepare(staged) succeeded.
  virtual Status Load(const StagedImage& staged) = 0;
  // Makes the loaded staged image active and unloads the old one; cannot
  // fail once Load succeeded (its checks belong in Load). REQUIRES: quiesced.
  virtual void Commit(StagedImage staged) = 0;
  // Admits submissions again and drops what Prepare made if it was not
  // committed. Called exactly once after every Quiesce.
  virtual void Resume() = 0;
};

struct EpochSwitchTiming {
  double stage_ms = 0;  // building and preparing the staged image (the service continues)
  double gap_us = 0;    // from quiesce to resume: the service gap
  // The gap's steps (they add up to about gap_us).
  double quiesce_us = 0;  // drain the submissions in flight and park the worker
  double load_us = 0;     // load the staged image and check it
  double commit_us = 0;   // make it active, then resume admitting
};

// Runs the steps above. `stage` builds the image (no lock held: the device
// keeps serving). Errors of `stage`, Prepare, Quiesce and Load are returned,
// with context saying which step failed.
Expected<EpochSwitchTiming> RunEpochSwitch(EpochDevice& device,
                                           const std::function<Expected<StagedImage>()>& stage,
                                           std::chrono::microseconds quiesce_timeout);

}  // namespace gpuos::runtime
