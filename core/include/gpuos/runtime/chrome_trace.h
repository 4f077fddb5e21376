// Task timelines in the Chrome trace event format (docs/runtime.md, "Chrome
// trace"): what Runtime::ExportChromeTrace writes, and the writer itself,
// which needs no GPU. Open the file in chrome://tracing or ui.perfetto.dev.
//
// Thread safety: the functions share no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuos/status.h"

namespace gpuos::runtime {

// One task (or one tile of a tiled task) as a worker block ran it.
struct TraceEvent {
  unsigned int block = 0;         // worker block: the trace's tid
  std::uint64_t start_ns = 0;     // device %globaltimer at the start
  std::uint64_t duration_ns = 0;  // saturates at 0xffffffff (4.29 s)
  std::uint64_t sequence = 0;     // its submission (Future::sequence())
  // The worker grid that ran it: its launch number (1, 2, ...; one more at
  // every launch, QueueParams::generation), so that a trace shows which
  // submissions a relaunched grid ran. 0: not known.
  std::uint64_t grid = 0;
  std::uint32_t task_id = 0;  // runtime-wide id (device::TaskDesc::task_id)
  // Its TaskId in the submitted graph, where the runtime still knows which
  // submission the id belongs to.
  std::optional<std::uint32_t> task_index;
  std::uint32_t tile = 0;       // tile index, 0 .. num_tiles - 1
  std::uint32_t num_tiles = 1;  // tiles of the task
  std::string name;             // "add f32", "cast f32->i64", "noop"
  std::string version;          // operator version, "" when unknown
  // "task" for a task's tile; "queue" for the queue's own records of a
  // submission: "admit" (from its claim until its first task starts),
  // "complete" (from its last task's count until the completion word is
  // stored) and, for a submission run as direct tiles, a "help" record of
  // each block that helped (from when it began to help until it saw the
  // opening); their task_id is device::kTraceNoTask.
  std::string category = "task";
};

struct ChromeTraceProcess {
  int pid = 0;               // the CUDA device ordinal
  std::string name;          // e.g. "gpuos device 0 (NVIDIA H200)"
  std::string thread_label;  // tid names: "<thread_label> <block>"
};

// The trace as JSON text: {"traceEvents": [...], "displayTimeUnit": "ns",
// "otherData": {...}}. Each event is a complete event ("ph": "X") with
// name, "cat" (TraceEvent::category), ts and dur in microseconds (ts relative to the
// earliest start, which otherData.origin_ns gives on the device clock),
// pid = process.pid, tid = block, and args {task_id, task (when known),
// sequence, tile, num_tiles, version}. Metadata events ("ph": "M") name the
// process and each block that has events. Events are sorted by (block,
// start). Never fails; names are escaped as JSON requires (bytes that are
// not UTF-8 are replaced).
std::string ChromeTraceJson(const std::vector<TraceEvent>& events,
                            const ChromeTraceProcess& process);

// Writes ChromeTraceJson to `path` (through a temporary file in the same
// directory, renamed over `path`, so a reader never sees half a file).
// Errors: IoError naming the path and the reason.
Status WriteChromeTrace(const std::string& path, const std::vector<TraceEvent>& events,
                        const ChromeTraceProcess& process);

}  // namespace gpuos::runtime
