// The Chrome trace (docs/runtime.md, "Chrome trace"): with
// RuntimeConfig::trace_capacity set, thread 0 of each worker block writes a
// TraceRecord per finished task (tile) into its own ring in device memory
// (no atomics shared between blocks); here the host copies the rings on the
// copy stream and names the records.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "runtime_impl.h"

namespace gpuos::runtime {

Expected<std::vector<TraceEvent>> RuntimeImpl::TraceEvents() const {
  const Diagnostics& d = diagnostics_;
  if (d.trace == 0) {
    return FailedPrecondition(
        "tracing is off: open the runtime with RuntimeConfig::trace_capacity > 0 (the number of "
        "task records the device keeps)");
  }
  const std::size_t per_block = d.trace_per_block;
  std::vector<std::uint64_t> counts(d.blocks);
  std::vector<device::TraceRecord> records(std::size_t{d.blocks} * per_block);
  {
    std::lock_guard<std::mutex> lock(d.device_mutex);
    if (shut_down_.load()) return Unavailable("the runtime was shut down");
    GPUOS_RETURN_IF_ERROR(MakeCurrent());
    // Counts first: a record a count covers was written before the count.
    GPUOS_RETURN_IF_ERROR(
        Cuda(driver_->cuMemcpyDtoHAsync(counts.data(), d.trace_counts,
                                        counts.size() * sizeof(std::uint64_t), copy_stream_),
             "copying the trace counts"));
    GPUOS_RETURN_IF_ERROR(
        Cuda(driver_->cuMemcpyDtoHAsync(records.data(), d.trace,
                                        records.size() * sizeof(device::TraceRecord), copy_stream_),
             "copying the trace records"));
    GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuStreamSynchronize(copy_stream_), "copying the trace"));
  }
  // Records carry the low 32 bits of their sequence: the newest sequence
  // with those bits, at most the newest submitted.
  const std::uint64_t newest = d.history.newest();
  const std::uint64_t newest_grid = d.slot_names.newest_generation();
  // By (operator code, generation): slots are named by the image of the
  // grid that ran them.
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::pair<std::string, std::string>> names;
  std::vector<TraceEvent> events;
  for (unsigned int block = 0; block < d.blocks; ++block) {
    const std::uint64_t count = counts[block];
    const std::uint64_t kept = std::min<std::uint64_t>(count, per_block);
    for (std::uint64_t i = count - kept; i < count; ++i) {
      const device::TraceRecord& r = records[block * per_block + i % per_block];
      if (r.start_ns == 0) continue;  // not written yet
      TraceEvent e;
      e.block = block;
      e.start_ns = r.start_ns;
      e.duration_ns = r.duration_ns;
      e.sequence =
          newest - static_cast<std::uint32_t>(static_cast<std::uint32_t>(newest) - r.sequence);
      e.task_id = r.task_id;
      e.tile = r.tile;
      e.num_tiles = r.num_tiles;
      // Records carry the low 32 bits of their grid's generation.
      e.grid = newest_grid -
               static_cast<std::uint32_t>(static_cast<std::uint32_t>(newest_grid) - r.generation);
      if (r.op == device::kTraceAdmitOp || r.op == device::kTraceCompleteOp ||
          r.op == device::kTraceHelpOp) {
        e.name = r.op == device::kTraceAdmitOp      ? "admit"
                 : r.op == device::kTraceCompleteOp ? "complete"
                                                    : "help";
        e.category = "queue";
        events.push_back(std::move(e));
        continue;
      }
      if (const auto span = d.history.Find(e.sequence);
          span && r.task_id - span->first_task_id < span->task_count) {
        e.task_index = r.task_id - span->first_task_id;
      }
      const auto key = std::make_pair(r.op, e.grid);
      auto name = names.find(key);
      if (name == names.end()) name = names.emplace(key, OperatorNames(r.op, e.grid)).first;
      e.name = name->second.first;
      e.version = name->second.second;
      events.push_back(std::move(e));
    }
  }
  std::sort(events.begin(), events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.block != b.block ? a.block < b.block : a.start_ns < b.start_ns;
  });
  return events;
}

Expected<std::vector<TraceEvent>> Runtime::TraceEvents() const { return impl_->TraceEvents(); }

Status Runtime::ExportChromeTrace(const std::string& path) const {
  return impl_->ExportChromeTrace(path);
}

Status RuntimeImpl::ExportChromeTrace(const std::string& path) const {
  GPUOS_ASSIGN_OR_RETURN(const std::vector<TraceEvent> events, TraceEvents());
  ChromeTraceProcess process;
  process.pid = diagnostics_.device_ordinal;
  process.name = "gpuos device " + std::to_string(process.pid) + " (" + device_name_ + ")";
  process.thread_label = "worker block";
  return WriteChromeTrace(path, events, process);
}

}  // namespace gpuos::runtime
