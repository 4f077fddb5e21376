#include "epoch_switch.h"

namespace gpuos::runtime {

Expected<EpochSwitchTiming> RunEpochSwitch(EpochDevice& device,
                                           const std::function<Expected<StagedImage>()>& stage,
                                           std::chrono::microseconds quiesce_timeout) {
  using Clock = std::chrono::steady_clock;
  EpochSwitchTiming timing;
  const Clock::time_point stage_start = Clock::now();
  Expected<StagedImage> staged = stage();
  if (!staged.ok()) {
    return staged.status().WithContext(
        "staging the new kernel image failed; the active image "
        "keeps serving");
  }
  Status prepared = device.Prepare(*staged);
  timing.stage_ms = std::chrono::duration<double, std::milli>(Clock::now() - stage_start).count();
  if (!prepared.ok()) {
    return prepared.WithContext(
        "preparing the staged kernel image failed; the active image keeps serving");
  }
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
  };
  const Clock::time_point gap_start = Clock::now();
  Status quiesced = device.Quiesce(quiesce_timeout);
  timing.quiesce_us = since(gap_start);
  if (!quiesced.ok()) {
    device.Resume();
    return quiesced.WithContext(
        "the worker did not quiesce for the epoch switch; the active "
        "image keeps serving");
  }
  const Clock::time_point load_start = Clock::now();
  Status loaded = device.Load(*staged);
  timing.load_us = since(load_start);
  if (!loaded.ok()) {
    device.Resume();
    return loaded.WithContext(
        "loading the staged kernel image failed; the active image keeps "
        "serving");
  }
  const Clock::time_point commit_start = Clock::now();
  device.Commit(std::move(*staged));
  device.Resume();
  timing.commit_us = since(commit_start);
  timing.gap_us = since(gap_start);
  return timing;
}

}  // namespace gpuos::runtime
