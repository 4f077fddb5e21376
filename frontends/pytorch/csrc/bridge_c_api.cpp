// The C API (gpuos_torch_bridge.h) over bridge_runtime.h. Every entry point
// catches everything: nothing may unwind into the Python extension.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bridge_fusion.h"
#include "bridge_host_timing.h"
#include "bridge_program.h"
#include "bridge_runtime.h"
#include "bridge_stitch.h"
#include "gpuos/device/phase_timing.cuh"
#include "gpuos_torch_bridge.h"

struct GpuosTorchRuntime {
  std::unique_ptr<gpuos::runtime::Runtime> runtime;
  unsigned int trace_capacity = 0;
};

struct GpuosTorchProgram {
  std::unique_ptr<gpuos::torch_bridge::Program> program;
};

namespace {

thread_local std::string last_error;

int Report(const gpuos::Status& status) {
  if (status.ok()) {
    last_error.clear();
    return 0;
  }
  last_error = status.message();
  return static_cast<int>(status.code());
}

template <typename Body>
int Guarded(const char* what, Body&& body) {
  try {
    return Report(body());
  } catch (const std::exception& e) {
    return Report(gpuos::Internal(std::string(what) + ": unexpected exception: " + e.what()));
  } catch (...) {
    return Report(gpuos::Internal(std::string(what) + ": unexpected exception"));
  }
}

}  // namespace

extern "C" {

const char* gpuos_torch_last_error(void) { return last_error.c_str(); }

int gpuos_torch_runtime_open(int device, const char* repository_path, int use_repository,
                             const char* cache_path, unsigned int trace_capacity,
                             GpuosTorchRuntime** out) {
  return Guarded("gpuos_torch_runtime_open", [&]() -> gpuos::Status {
    if (out == nullptr) return gpuos::InvalidArgument("gpuos_torch_runtime_open: out is NULL");
    *out = nullptr;
    gpuos::torch_bridge::OpenOptions options;
    options.device = device;
    if (use_repository != 0) {
      if (repository_path == nullptr || *repository_path == '\0') {
        return gpuos::InvalidArgument("a repository was asked for but no path was given");
      }
      options.repository_path = repository_path;
    }
    if (cache_path != nullptr) options.cache_path = cache_path;
    options.trace_capacity = trace_capacity;
    GPUOS_ASSIGN_OR_RETURN(auto runtime, gpuos::torch_bridge::OpenRuntime(options));
    *out = new GpuosTorchRuntime;
    (*out)->runtime = std::move(runtime);
    (*out)->trace_capacity = trace_capacity;
    return gpuos::Status::Ok();
  });
}

int gpuos_torch_runtime_export_trace(GpuosTorchRuntime* runtime, const char* path) {
  return Guarded("gpuos_torch_runtime_export_trace", [&]() -> gpuos::Status {
    if (runtime == nullptr || path == nullptr || *path == '\0') {
      return gpuos::InvalidArgument("gpuos_torch_runtime_export_trace: no runtime or no path");
    }
    if (runtime->trace_capacity == 0) {
      return gpuos::FailedPrecondition(
          "the runtime keeps no task timeline: set GPUOS_TORCH_TRACE to the number of task "
          "records to keep (e.g. 65536) before the first gpuos call");
    }
    return runtime->runtime->ExportChromeTrace(path);
  });
}

void gpuos_torch_runtime_close(GpuosTorchRuntime* runtime) {
  if (runtime == nullptr) return;
  try {
    (void)runtime->runtime->Shutdown();
  } catch (...) {
  }
  delete runtime;
}

char* gpuos_torch_runtime_stats_json(GpuosTorchRuntime* runtime) {
  char* text = nullptr;
  Guarded("gpuos_torch_runtime_stats_json", [&]() -> gpuos::Status {
    if (runtime == nullptr) return gpuos::InvalidArgument("runtime is NULL");
    const gpuos::runtime::RuntimeStats s = runtime->runtime->stats();
    const gpuos::torch_bridge::StreamTrackerReport tracker =
        gpuos::torch_bridge::StreamTrackerStatus();
    nlohmann::json doc = {{"submissions", s.submissions},
                          {"tasks_submitted", s.tasks_submitted},
                          {"tiles_completed", s.tiles_completed},
                          {"launches", s.launches},
                          {"relaunches", s.relaunches},
                          {"parks", s.parks},
                          {"epoch_switches", s.epoch_switches},
                          {"backpressure_waits", s.backpressure_waits},
                          {"max_queue_depth", s.max_queue_depth},
                          {"direct_submissions", s.direct_submissions},
                          {"tile_launches", s.tile_launches},
                          {"early_parks", s.early_parks},
                          {"cached_openings", s.cached_openings},
                          {"payload_cache_uses", s.payload_cache_uses},
                          {"payload_cache_fills", s.payload_cache_fills},
                          {"payload_cache_entries", s.payload_cache_entries},
                          {"worker_blocks", s.worker_blocks},
                          {"worker_registers", s.worker_registers},
                          {"worker_pollers", s.worker_pollers},
                          {"idle_park_us", s.idle_park.count()},
                          {"completion_fence", s.device_memory_results ? "gpu" : "system"},
                          {"stream_tracker", tracker.state},
                          {"stream_queries_skipped", tracker.queries_skipped},
                          {"stream_tracker_enqueues", tracker.enqueues},
                          {"tasks_per_operator", s.tasks_per_operator},
                          {"device_name", runtime->runtime->device_name()}};
    // An image built with GPUOS_PHASE_TIMING (gpuos/device/phase_timing.cuh):
    // its per-slot cycle sums and counts since it was loaded.
    for (const char* symbol : {"gpuos_phase_cycles", "gpuos_phase_counts"}) {
      auto global = runtime->runtime->ImageGlobal(symbol);
      if (!global.ok()) break;
      std::vector<unsigned long long> sums(gpuos::device::kPhaseSlots, 0);
      GPUOS_RETURN_IF_ERROR(runtime->runtime->CopyToHost(sums.data(), global->address,
                                                         sums.size() * sizeof(sums[0])));
      doc[symbol] = sums;
    }
    const std::string dumped = doc.dump();
    text = static_cast<char*>(std::malloc(dumped.size() + 1));
    if (text == nullptr) return gpuos::Internal("out of memory");
    std::memcpy(text, dumped.c_str(), dumped.size() + 1);
    return gpuos::Status::Ok();
  });
  return text;
}

void gpuos_torch_free_string(char* text) { std::free(text); }

int gpuos_torch_program_create(GpuosTorchRuntime* runtime, const char* program_json,
                               GpuosTorchProgram** out) {
  return Guarded("gpuos_torch_program_create", [&]() -> gpuos::Status {
    if (runtime == nullptr || program_json == nullptr || out == nullptr) {
      return gpuos::InvalidArgument("gpuos_torch_program_create: NULL argument");
    }
    *out = nullptr;
    namespace bridge = gpuos::torch_bridge;
    GPUOS_ASSIGN_OR_RETURN(auto spec, bridge::ParseProgramSpec(program_json));
    std::string note;
    GPUOS_ASSIGN_OR_RETURN(const bool stitching, bridge::StitchingEnabled());
    if (stitching && spec.tasks.size() >= bridge::kMinStitchedTasks) {
      GPUOS_ASSIGN_OR_RETURN(auto attempt, bridge::StitchSpec(*runtime->runtime, spec));
      if (attempt.program) {
        note = attempt.program->op.name + " (" + attempt.program->op.description + ")";
        GPUOS_ASSIGN_OR_RETURN(
            auto program,
            bridge::Program::CreateStitched(*runtime->runtime, std::move(spec), *attempt.program));
        program->set_stitch_note(std::move(note));
        *out = new GpuosTorchProgram{std::move(program)};
        return gpuos::Status::Ok();
      }
      note = "not stitched: " + attempt.reason;
    }
    GPUOS_RETURN_IF_ERROR(bridge::ResolveFusedTasks(*runtime->runtime, &spec));
    GPUOS_ASSIGN_OR_RETURN(auto program, bridge::Program::Create(*runtime->runtime, spec));
    program->set_stitch_note(std::move(note));
    *out = new GpuosTorchProgram{std::move(program)};
    return gpuos::Status::Ok();
  });
}

int gpuos_torch_program_launch(GpuosTorchProgram* program, const unsigned long long* addresses,
                               unsigned int num_buffers, void* stream) {
  return Guarded("gpuos_torch_program_launch", [&]() -> gpuos::Status {
    if (program == nullptr || (addresses == nullptr && num_buffers > 0)) {
      return gpuos::InvalidArgument("gpuos_torch_program_launch: NULL argument");
    }
    return program->program->Launch(addresses, num_buffers, static_cast<CUstream>(stream));
  });
}

int gpuos_torch_program_start(GpuosTorchProgram* program, const unsigned long long* addresses,
                              unsigned int num_buffers, void* stream) {
  return Guarded("gpuos_torch_program_start", [&]() -> gpuos::Status {
    if (program == nullptr || (addresses == nullptr && num_buffers > 0)) {
      return gpuos::InvalidArgument("gpuos_torch_program_start: NULL argument");
    }
    return program->program->Start(addresses, num_buffers, static_cast<CUstream>(stream));
  });
}

int gpuos_torch_program_finish(GpuosTorchProgram* program) {
  return Guarded("gpuos_torch_program_finish", [&]() -> gpuos::Status {
    if (program == nullptr) return gpuos::InvalidArgument("gpuos_torch_program_finish: NULL");
    return program->program->Finish();
  });
}

int gpuos_torch_program_keep_warm(GpuosTorchProgram* program) {
  return Guarded("gpuos_torch_program_keep_warm", [&]() -> gpuos::Status {
    if (program == nullptr) return gpuos::InvalidArgument("gpuos_torch_program_keep_warm: NULL");
    return program->program->KeepWarm();
  });
}

int gpuos_torch_program_testing_set_finished_runs(GpuosTorchProgram* program,
                                                  unsigned long long runs) {
  return Guarded("gpuos_torch_program_testing_set_finished_runs", [&]() -> gpuos::Status {
    if (program == nullptr) {
      return gpuos::InvalidArgument("gpuos_torch_program_testing_set_finished_runs: NULL");
    }
    return program->program->TestingOnlySetFinishedRuns(runs);
  });
}

int gpuos_torch_program_check(const char* program_json) {
  return Guarded("gpuos_torch_program_check", [&]() -> gpuos::Status {
    if (program_json == nullptr) return gpuos::InvalidArgument("program_json is NULL");
    return gpuos::torch_bridge::ParseProgramSpec(program_json).status();
  });
}

int gpuos_torch_program_idle(const GpuosTorchProgram* program) {
  return program != nullptr && program->program->Idle() ? 1 : 0;
}

unsigned int gpuos_torch_program_num_tasks(const GpuosTorchProgram* program) {
  return program == nullptr ? 0 : program->program->num_tasks();
}

unsigned int gpuos_torch_program_num_buffers(const GpuosTorchProgram* program) {
  return program == nullptr ? 0 : program->program->num_buffers();
}

int gpuos_torch_program_stitched(const GpuosTorchProgram* program) {
  return program != nullptr && program->program->stitched() ? 1 : 0;
}

const char* gpuos_torch_program_stitch_note(const GpuosTorchProgram* program) {
  return program == nullptr ? "" : program->program->stitch_note().c_str();
}

void gpuos_torch_program_destroy(GpuosTorchProgram* program) { delete program; }

int gpuos_torch_host_timing_on(void) { return gpuos::torch_bridge::HostTiming::Get().on() ? 1 : 0; }

void gpuos_torch_host_timing_add(int step, unsigned long long ns) {
  using gpuos::torch_bridge::LaunchStep;
  if (step != static_cast<int>(LaunchStep::kAllocate) && step != static_cast<int>(LaunchStep::kRun))
    return;
  auto& timing = gpuos::torch_bridge::HostTiming::Get();
  if (timing.on()) timing.Add(static_cast<LaunchStep>(step), std::chrono::nanoseconds(ns));
}

}  // extern "C"
