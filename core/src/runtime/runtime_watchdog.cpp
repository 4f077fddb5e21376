// The watchdog (docs/runtime.md, "Watchdog"). Each worker block writes the
// task it starts into a BlockActivity in device memory; while a Future::Wait
// waits, the host copies those records (on the copy stream, never the
// legacy one) at most once per WatchdogInterval and remembers since when
// (host clock) each block has shown the same task. A task seen for longer
// than RuntimeConfig::task_time_limit is reported.
//
// The host cannot read the device clock, so "running for" is what the host
// observed: at least that long, from the first check that saw the task.
#include <chrono>
#include <string>
#include <vector>

#include "runtime_impl.h"

namespace gpuos::runtime {

std::vector<std::string> RuntimeImpl::TasksOverLimit() {
  using Clock = std::chrono::steady_clock;
  Diagnostics& d = diagnostics_;
  if (d.task_time_limit.count() <= 0 || d.activity == 0) return {};
  std::vector<std::string> fresh;  // over the limit for the first time
  std::vector<std::string> over;
  {
    std::lock_guard<std::mutex> lock(d.device_mutex);
    const Clock::time_point now = Clock::now();
    if (d.last_check != Clock::time_point{} &&
        now - d.last_check < WatchdogInterval(d.task_time_limit)) {
      return d.over_limit;
    }
    d.last_check = now;
    d.over_limit.clear();
    if (shut_down_.load()) return {};
    std::vector<device::BlockActivity> snapshot(d.blocks);
    if (!MakeCurrent().ok() ||
        driver_->cuMemcpyDtoHAsync(snapshot.data(), d.activity,
                                   snapshot.size() * sizeof(device::BlockActivity),
                                   copy_stream_) != CUDA_SUCCESS ||
        driver_->cuStreamSynchronize(copy_stream_) != CUDA_SUCCESS) {
      return {};  // the Wait's own checks report a broken context
    }
    d.watched.resize(d.blocks);
    for (unsigned int block = 0; block < d.blocks; ++block) {
      const device::BlockActivity& activity = snapshot[block];
      WatchedBlock& watched = d.watched[block];
      if (activity.stamp == 0) {
        watched = WatchedBlock{};
        continue;
      }
      if (activity.stamp != watched.seen.stamp || activity.task_id != watched.seen.task_id) {
        watched.seen = activity;
        watched.since = now;
        watched.reported = false;
        continue;
      }
      const auto running =
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - watched.since);
      if (running < d.task_time_limit) continue;
      const auto [name, version] = OperatorNames(activity.op);
      std::string line = NameTask(activity.task_id) + ", " + name +
                         (version.empty() ? "" : " version " + version) +
                         ", has been running on worker block " + std::to_string(block) +
                         " for at least " + FormatDuration(running);
      if (!watched.reported) {
        watched.reported = true;
        fresh.push_back(line);
      }
      over.push_back(std::move(line));
    }
    d.over_limit = over;
  }
  d.watchdog_reports += fresh.size();
  if (d.watchdog_log) {
    for (const std::string& line : fresh) {
      d.watchdog_log("gpuos watchdog: " + line + " (task_time_limit " +
                     FormatDuration(d.task_time_limit) + ")");
    }
  }
  return over;
}

}  // namespace gpuos::runtime
