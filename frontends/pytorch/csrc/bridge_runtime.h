// The objects behind the C API (gpuos_torch_bridge.h): a runtime opened for
// the PyTorch frontend, and programs built once and run many times.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "bridge_program.h"
#include "gpuos/cuda_driver.h"
#include "gpuos/registry/stitched_program.h"
#include "gpuos/runtime/runtime.h"
#include "gpuos/runtime/task_graph.h"
#include "gpuos/status.h"

namespace gpuos::torch_bridge {

struct OpenOptions {
  int device = 0;
  // When set: serve this repository's current operator set; otherwise the
  // built-in packs, with `cache_path` ("" = the default) as build cache.
  std::string repository_path;
  std::string cache_path;
  unsigned int trace_capacity = 0;  // RuntimeConfig::trace_capacity
};

// The default build cache of the built-in packs' image:
// <gpuos data directory>/pytorch-build-cache.db (docs/configuration.md).
std::string DefaultCachePath();

// Also starts the process's stream tracker when GPUOS_TORCH_STREAM_TRACKER=1
// (gpuos/runtime/stream_tracker.h; opt-in: it holds CUPTI, which profilers
// need): a compiled call whose stream is known idle is then published with
// no query. InvalidArgument for a value other than 0 or 1; a tracker that
// cannot start is reported by StreamTrackerStatus, and calls query as
// without it.
Expected<std::unique_ptr<runtime::Runtime>> OpenRuntime(const OpenOptions& options);

struct StreamTrackerReport {
  std::string state;                  // "off", "on", or "unavailable: <why>"
  std::uint64_t queries_skipped = 0;  // calls published open without a query
  std::uint64_t enqueues = 0;         // driver calls the tracker counted
};
StreamTrackerReport StreamTrackerStatus();

// How long a launch waits on the host for its submission to finish before
// it leaves the wait to the stream (GPUOS_TORCH_HOST_WAIT_US, 0 to 100000;
// default kDefaultHostWaitUs). InvalidArgument for another value.
inline constexpr long long kDefaultHostWaitUs = 500;
Expected<std::chrono::microseconds> HostWaitBudget();

// One lowered graph: a task graph built once with placeholder addresses, and
// for each of its tensor descriptors the buffer and byte offset it is bound
// to at every run. A stitched program's graph is one task of its stitched
// operator (bridge_stitch.h) whose table holds the buffers, then the
// counters this Program owns. Not thread safe; the runtime must outlive it.
class Program {
 public:
  // A graph of the spec's tasks (fused tasks already named:
  // ResolveFusedTasks).
  static Expected<std::unique_ptr<Program>> Create(runtime::Runtime& runtime,
                                                   const ProgramSpec& spec);
  // The one task of `stitched` (served by `runtime`) over the spec's
  // buffers. `spec` (fused tasks not yet named) is kept for the rare run
  // whose buffers are not 16-byte aligned, which runs an unstitched program
  // built at that run.
  static Expected<std::unique_ptr<Program>> CreateStitched(
      runtime::Runtime& runtime, ProgramSpec spec, const registry::StitchedProgram& stitched);
  ~Program();

  // Binds the addresses and submits the graph ordered on `stream` (nullptr:
  // the legacy default stream): it starts after the work enqueued there so
  // far, and work enqueued there later starts after it. A stitched program
  // of one stage (its tiles wait for none of its own) is launched as a
  // kernel of its own on `stream` instead (Runtime::LaunchTiles; tile
  // launches, docs/pytorch.md, "Tile launches"; GPUOS_TORCH_TILE_LAUNCH=0
  // turns them off), unless the worker grid runs for others' work
  // (LaunchThisRun, which may also end a grid kept by this program's own
  // runs): a launch returns once it is enqueued, and an operator error it
  // reports surfaces at the program's next Launch. Otherwise the first
  // half (Start): the submission is published with a closed gate, opened
  // once a query finds `stream` idle; when it has unfinished work, the gated
  // submission is dropped, `stream` synchronized on the host and the graph
  // submitted again. A device-side wait (SubmitOptions::wait_for) can
  // deadlock, because the worker does not park while a graph waits at its
  // gate and the stream's kernels may need the SMs the worker holds (a
  // cuBLAS matmul on PyTorch's default stream did, on the H100 at b0e5d84).
  // The second half (Finish): the host waits for the submission up to
  // HostWaitBudget() (a compiled call is short, and the stream's own wait
  // for it costs several microseconds more); if it has not finished by
  // then, the stream waits for its completion word (no host wait). A
  // stitched program first waits for its previous run (runs must not
  // overlap). Errors: the driver's, the runtime's Submit and StreamWaitFor
  // errors, and the error of an earlier launch that finished with one (task
  // errors surface at the next Launch, as CUDA's do).
  Status Launch(const unsigned long long* addresses, std::uint32_t num_buffers, CUstream stream);
  // Launch in two calls, so that the caller's own work between them (its
  // results' Python objects) overlaps the run: Start returns once the run
  // may start; Finish does the rest. Every Start is followed by one Finish
  // (a Start without its Finish leaves that run to be reclaimed like any
  // unseen one, its ordering with `stream` not established).
  // Errors: Start's, the first half's; Finish's, the second half's, and
  // FailedPrecondition without a Start before it.
  Status Start(const unsigned long long* addresses, std::uint32_t num_buffers, CUstream stream);
  Status Finish();

  // Runtime::KeepWarm of the program's runtime; nothing for a program that
  // runs as tile launches (a resident worker would slow them down), which
  // goes through the worker only while others keep it running (Start).
  Status KeepWarm() { return tile_launch_ ? Status::Ok() : runtime_->KeepWarm(); }

  // No launch of this program (or of its unstitched fallback) is running
  // or unseen: each one's results were seen on the host. The buffers the
  // last launch was bound to are then free of gpuos's use. A tile launch
  // counts as seen: every later run is ordered after it (on its stream, or
  // after a synchronize of it).
  bool Idle() const { return pending_.empty() && (fallback_ == nullptr || fallback_->Idle()); }

  std::uint32_t num_tasks() const { return static_cast<std::uint32_t>(graph_.size()); }
  std::uint32_t num_buffers() const { return num_buffers_; }
  bool stitched() const { return stitched_; }
  // Testing only (the GPU tests of a failed run): waits for the previous
  // run, then sets the stitched task's counter as if `runs` runs had
  // finished, leaving the stages' counters as they are, so that a run whose
  // stages wait for counts (not flags) waits for counts that never come and
  // fails after the stage wait's limit (2 s). FailedPrecondition for a
  // program that is not stitched.
  Status TestingOnlySetFinishedRuns(std::uint64_t runs);

  // The stitched operator and its stages, or why the program is not
  // stitched (set by the creator).
  const std::string& stitch_note() const { return stitch_note_; }
  void set_stitch_note(std::string note) { stitch_note_ = std::move(note); }

 private:
  Program(runtime::Runtime& runtime, std::uint32_t num_buffers)
      : runtime_(&runtime), graph_(runtime), num_buffers_(num_buffers) {}

  Status Bind(const unsigned long long* addresses, std::uint32_t num_buffers);
  // Waits for the previous run of a stitched program and reports its error
  // (Finished); one that is still running after the wait's limit stays
  // pending and its error is returned.
  Status AwaitPreviousStitchedRun();
  // Submits the bound graph ordered after `stream`'s work so far and adds it
  // to pending_ (last): started at once when the stream is idle, else after
  // a host synchronize of the stream.
  Expected<runtime::Future> SubmitAfter(const CudaDriverApi& driver, CUstream stream);
  // The error of finished run `run`; for a stitched program that failed,
  // the counters are zeroed first.
  Status Finished(const runtime::Future& run);
  Status ZeroCounters();
  // Tile launches: enqueues the bound graph on `stream` (after the last
  // launch's stream finished, when that was another one).
  Status LaunchTiled(const CudaDriverApi& driver, CUstream stream);
  // Whether this run goes as a tile launch (else through the worker): a
  // launch waits for a running worker grid to park (Runtime::Activity), so
  // while a grid runs the run goes through it when others asked something
  // of it since this program's last run (WorkerActivity::requests; runs
  // that stand in for launches do not count), and otherwise asks it to
  // exit (Runtime::ParkNow) and launches, or goes through it when the grid
  // does not exit (runs in flight, or not within 200 us). Errors: the
  // driver's, from ParkNow.
  Expected<bool> LaunchThisRun();
  // Synchronizes the stream of the program's last tile launch, unless there
  // is none or it is `unless` (a run about to be ordered on that stream).
  Status AwaitLastTileLaunch(const CudaDriverApi& driver, CUstream unless = nullptr);
  // The error an earlier tile launch reported (OK: none), once: its stream
  // is synchronized, the report cleared and the counters zeroed.
  Status TileLaunchError(const CudaDriverApi& driver);

  // The unstitched program of a stitched one, built on first use.
  Expected<Program*> Fallback();

  runtime::Runtime* runtime_;
  runtime::TaskGraph graph_;
  std::deque<runtime::Future> pending_;  // launched, not yet seen finished; oldest first
  // Between Start and Finish: the program that started the run (this, or
  // the fallback for unaligned buffers), and the stream it is ordered on.
  Program* started_ = nullptr;
  CUstream started_stream_ = nullptr;
  std::vector<Binding> bindings_;
  std::uint32_t num_buffers_;
  bool stitched_ = false;
  runtime::DeviceBuffer counters_;       // stitched: the stages' counters
  std::size_t task_counter_offset_ = 0;  // stitched: the task's counter, after the stages'
  ProgramSpec spec_;                     // stitched: for Fallback()
  std::unique_ptr<Program> fallback_;
  // Tile launches (stitched, one stage): the status the kernels report
  // into (mapped pinned memory, its device address) and the stream of the
  // last launch (nullptr: none yet).
  bool tile_launch_ = false;
  bool started_tile_launch_ = false;  // between Start and Finish: this run is a tile launch
  // WorkerActivity::requests at this program's last run: more at the next
  // run means others use the worker.
  std::uint64_t requests_seen_ = 0;
  device::WorkerStatus* launch_status_ = nullptr;
  std::uint64_t launch_status_device_ = 0;
  CUstream last_launch_stream_ = nullptr;
  std::string stitch_note_;
};

}  // namespace gpuos::torch_bridge
