#include "gpuos/runtime/chrome_trace.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace gpuos::runtime {
namespace {

double Microseconds(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

nlohmann::json Metadata(const char* what, int pid, unsigned int tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

std::string ChromeTraceJson(const std::vector<TraceEvent>& events,
                            const ChromeTraceProcess& process) {
  std::vector<const TraceEvent*> sorted;
  sorted.reserve(events.size());
  for (const TraceEvent& e : events) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const TraceEvent* a, const TraceEvent* b) {
    return a->block != b->block ? a->block < b->block : a->start_ns < b->start_ns;
  });
  std::uint64_t origin = std::numeric_limits<std::uint64_t>::max();
  for (const TraceEvent* e : sorted) origin = std::min(origin, e->start_ns);
  if (sorted.empty()) origin = 0;

  nlohmann::json trace_events = nlohmann::json::array();
  trace_events.push_back(Metadata("process_name", process.pid, 0, process.name));
  std::set<unsigned int> blocks;
  for (const TraceEvent* e : sorted) blocks.insert(e->block);
  const std::string label = process.thread_label.empty() ? "block" : process.thread_label;
  for (unsigned int block : blocks) {
    trace_events.push_back(
        Metadata("thread_name", process.pid, block, label + " " + std::to_string(block)));
  }
  for (const TraceEvent* e : sorted) {
    nlohmann::json args = {{"task_id", e->task_id},
                           {"sequence", e->sequence},
                           {"tile", e->tile},
                           {"num_tiles", e->num_tiles}};
    if (e->grid != 0) args["grid"] = e->grid;
    if (e->task_index) args["task"] = *e->task_index;
    if (!e->version.empty()) args["version"] = e->version;
    trace_events.push_back({{"ph", "X"},
                            {"name", e->name},
                            {"cat", e->category},
                            {"ts", Microseconds(e->start_ns - origin)},
                            {"dur", Microseconds(e->duration_ns)},
                            {"pid", process.pid},
                            {"tid", e->block},
                            {"args", std::move(args)}});
  }
  nlohmann::json document = {
      {"traceEvents", std::move(trace_events)},
      {"displayTimeUnit", "ns"},
      {"otherData", {{"origin_ns", origin}, {"clock", "device %globaltimer"}}}};
  return document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status WriteChromeTrace(const std::string& path, const std::vector<TraceEvent>& events,
                        const ChromeTraceProcess& process) {
  const std::string text = ChromeTraceJson(events, process);
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) {
    return IoError("cannot write the Chrome trace '" + path + "': " + std::strerror(errno) +
                   "; check that the directory exists and is writable");
  }
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const int write_errno = errno;
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    std::remove(temporary.c_str());
    return IoError("cannot write the Chrome trace '" + path +
                   "': " + std::strerror(written ? errno : write_errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(temporary.c_str());
    return IoError("cannot move the Chrome trace into place at '" + path +
                   "': " + std::strerror(rename_errno));
  }
  return Status::Ok();
}

}  // namespace gpuos::runtime
