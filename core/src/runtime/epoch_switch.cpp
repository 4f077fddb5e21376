#include "epoch_switch.h"

namespace gpuos::runtime {

Expected<EpochSwitchTiming> RunEpochSwitch(EpochDevice& device,
                                           const std::function<Expected<StagedImage>()>& stage,
                                           std::chrono::microseconds quiesce_timeout) {
  using Clock = std::chrono::steady_clock;
  EpochSwitchTiming timing;
  const Clock::time_point stage_start = Clock::now();
  Expected<StagedImage> staged = stage();
  timing.stage_ms = std::chrono::duration<double, std::milli>(Clock::now() - stage_start).count();
  if (!staged.ok()) {
    return staged.status().WithContext(
        "staging the new kernel image failed; the active image "
        "keeps serving");
  }
  const Clock::time_point gap_start = Clock::now();
  Status quiesced = device.Quiesce(quiesce_timeout);
  if (!quiesced.ok()) {
    device.Resume();
    return quiesced.WithContext(
        "the worker did not quiesce for the epoch switch; the active "
        "image keeps serving");
  }
  Status loaded = device.Load(*staged);
  if (!loaded.ok()) {
    device.Resume();
    return loaded.WithContext(
        "loading the staged kernel image failed; the active image keeps "
        "serving");
  }
  device.Commit(std::move(*staged));
  device.Resume();
  timing.gap_us = std::chrono::duration<double, std::micro>(Clock::now() - gap_start).count();
  return timing;
}

}  // namespace gpuos::runtime
