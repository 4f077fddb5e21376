// The gpuos runtime: one persistent worker per GPU fed through a queue in
// mapped host memory (docs/runtime.md).
//
//   auto runtime = Runtime::Open({.repository_path = "ops.db"});   // builds/loads the image
//   TaskGraph graph(**runtime);
//   auto a = graph.Add("add", DType::kF32, {x, y, z});
//   auto b = graph.Add("relu", DType::kF32, {z, z}, {}, {*a});
//   auto done = (*runtime)->Submit(graph);
//   GPUOS_RETURN_IF_ERROR(done->Wait());
//
// The worker parks itself after `idle_park` without work and is relaunched
// by the next Submit, so other CUDA users (a device synchronize, cuMemFree)
// are held up at most that long. Device memory from Allocate is freed by
// Free only once the worker is parked (cuMemFree would block on it).
//
// Thread safety: every Runtime method may be called from any thread; calls
// that change state are serialized. Futures may be waited on from any thread.
// A Runtime must outlive its futures and graphs.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuos/device_memory.h"
#include "gpuos/dtype.h"
#include "gpuos/plugin_host.h"
#include "gpuos/registry/kernel_image.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/runtime/chrome_trace.h"
#include "gpuos/runtime/task_graph.h"
#include "gpuos/status.h"
#include "gpuos/tensor.h"

// cuda.h's stream type (CUstream and cudaStream_t are pointers to it),
// declared here so that this header does not need cuda.h.
struct CUstream_st;
struct CUctx_st;  // cuda.h's context type (CUcontext)

namespace gpuos::runtime {

struct RuntimeConfig {
  // The operator repository whose current operator set (current and previous
  // versions) makes the kernel image; also the build cache.
  std::string repository_path;
  // When not empty: build the image from these instead (tests, benchmarks);
  // repository_path, when set, is then used as the build cache only.
  std::vector<registry::OperatorSpec> operators;
  // Pack files or directories of packs (docs/operator-packs.md) whose
  // operators are added to `operators` (same rules: the repository, when
  // set, is then the build cache only). Errors name the file.
  std::vector<std::string> pack_paths;
  int device = 0;
  std::string arch;  // "" = the device's
  std::chrono::microseconds idle_park{200};
  // Worker grid; 0 = one block per SM. Capped at the blocks that fit on the
  // device at once (all must be resident).
  unsigned int blocks = 0;
  // Blocks that read the host's queue tail at full rate (one PCIe round trip
  // a look; docs/runtime.md, "Parking and relaunch"). At least 1; capped at
  // the grid's blocks. Their reads slow the rest of the GPU: in one round on
  // an H200, eight made attention calls 3-4x slower, their admission, last
  // count and tiles' span several times longer, without a sooner pick-up
  // (bench/results/experiments/pollers_ab_session38.txt); every block
  // polling made round trips 60-540 us on an H100. Keep the default unless
  // measured.
  unsigned int pollers = 2;
  // Queue sizes. A graph must fit: tasks <= task_capacity, distinct tensors
  // <= tensor_capacity, edges + roots <= successor_capacity. When they are
  // full, Submit waits (backpressure) until older submissions finish. Each
  // of the submission_capacity ring slots takes 8 KiB of pinned host memory
  // (a small graph travels in its slot: docs/runtime.md, "The queue").
  unsigned int task_capacity = 1u << 16;
  unsigned int tensor_capacity = 1u << 16;
  unsigned int successor_capacity = 1u << 18;
  unsigned int submission_capacity = 1024;
  // The control socket (docs/control-socket.md), through which
  // `gpuos-registry publish` / `rollback` reach this runtime: "" = the
  // default path when the operators come from repository_path
  // (`<repository>.runtimes/<pid>.sock`, `<pid>-2.sock` for a second runtime
  // of the process; no socket otherwise), "off" = none, else this path.
  std::string control_socket;
  // Longest wait for the worker to drain and park at an epoch switch.
  std::chrono::milliseconds quiesce_timeout{10000};
  // Watchdog (docs/runtime.md, "Watchdog"): a Future::Wait that has waited
  // this long while a task has run longer than this on a worker block
  // returns Unavailable naming the task, its operator and block, instead of
  // waiting on silently. 0 = off.
  std::chrono::milliseconds task_time_limit{10000};
  // Called once per task the watchdog finds over the limit, with the same
  // text, on the thread that is waiting. Must not call into the Runtime.
  std::function<void(const std::string&)> watchdog_log;
  // Chrome trace (docs/runtime.md, "Chrome trace"): task records the device
  // keeps, in all (each worker block keeps its newest trace_capacity /
  // blocks). 0 = off (the worker then pays one branch per task).
  unsigned int trace_capacity = 0;
  // Whether every task's outputs are in device memory (never mapped host
  // memory). The worker then publishes a completion word after a gpu-scope
  // fence instead of a system-scope one (docs/runtime.md, "The completion's
  // fence"): 0.2-1.2 us sooner a submission on an H200. A Future still
  // completes only once the results are in device memory, where later GPU
  // work and copies read them; a task's stores to mapped host memory would
  // not be ordered before the word. The PyTorch frontend sets it (its tasks
  // write CUDA tensors).
  bool device_memory_results = false;
  // Entries of the device's payload cache (docs/runtime.md, "Direct tiles",
  // "Cached payloads"): a lone tiled task that travels inline and was
  // submitted before with the same operator, items and tensors (a compiled
  // program replayed with the same addresses) runs from a copy kept in
  // device memory, without the worker reading its ring slot over PCIe. 8
  // KiB of device memory each; at most 127. Off (0) by default: on an H200
  // it took 1.1-1.8 us off the admission of attention's stitched call but none
  // off the call (its last tile ended no sooner), and calls spent 0.8-5.1 us
  // more on the host (bench/results/experiments/
  // payload_cache_ab_session42.txt).
  unsigned int payload_cache_entries = 0;
  // Plugins (docs/runtime.md, "Plugins"). Open loads the `.so` libraries of
  // these directories, then those of GPUOS_PLUGIN_PATH, before any device
  // work: a missing directory or a library that fails to load fails Open
  // with a message naming the file.
  std::vector<std::string> plugin_dirs;
  // The plugin of each kind (default: the built-ins). A scheduler other than
  // "fifo" orders the root tasks of every submission (TaskOptions::priority);
  // the memory manager and the fusion strategy are created (so their config
  // is checked at Open) and reported by Runtime::plugins(), but not consulted
  // yet; the executor must be "persistent" (the runtime is that executor).
  // Unknown names fail Open with the list of available plugins. Submit calls
  // the scheduler with the runtime's lock held: it must not call the Runtime.
  PluginSelection plugins;
};

// One plugin a runtime selected (Runtime::plugins()).
struct SelectedPlugin {
  PluginInfo info;         // name, kind, version, library path (empty: built in)
  std::string config;      // the config string it was created from
  bool consulted = false;  // whether the runtime calls it (docs/runtime.md, "Plugins")
};

// What a runtime loaded and which plugin of each kind is in effect.
struct RuntimePluginReport {
  SelectedPlugin scheduler, memory_manager, fusion_strategy, executor;
  // Directories searched at Open, in order (RuntimeConfig::plugin_dirs,
  // then GPUOS_PLUGIN_PATH).
  std::vector<std::string> search_path;
  std::vector<PluginInfo> loaded;     // libraries loaded from them
  std::vector<PluginInfo> available;  // every plugin, built-ins included, by kind then name
};

// What a caller that can run a one-task graph either way (LaunchTiles or
// Submit) reads before choosing (Runtime::Activity).
struct WorkerActivity {
  bool running = false;  // a grid was launched and has not begun to park
  // What was asked of the worker so far: submissions (but those that stand
  // in for a launch, SubmitOptions::stands_in_for_launch) and KeepWarm
  // calls. More than at a caller's last look: others use the grid.
  std::uint64_t requests = 0;
};

struct RuntimeStats {
  std::uint64_t submissions = 0;
  std::uint64_t tasks_submitted = 0;
  std::uint64_t tiles_completed = 0;     // by the device (no-ops included)
  std::uint64_t launches = 0;            // worker grids launched
  std::uint64_t relaunches = 0;          // launches after the first
  std::uint64_t parks = 0;               // grids that ended (early_parks included)
  std::uint64_t backpressure_waits = 0;  // Submits that had to wait for room
  std::uint64_t max_queue_depth = 0;     // most submissions in flight at once
  std::uint64_t max_tasks_in_flight = 0;
  // Lone tiled tasks that ran as direct tiles (docs/runtime.md, "Direct
  // tiles"), as the device last mirrored the count: just after each such
  // submission completes, so a lower bound (briefly one behind a wait that
  // returned; two completing together may leave it one low).
  std::uint64_t direct_submissions = 0;
  // Of those, the ones the worker opened from the payload cache without
  // reading their ring slot (RuntimeConfig::payload_cache_entries), mirrored
  // the same way.
  std::uint64_t cached_openings = 0;
  // Tasks run by LaunchTiles (kernels of their own, not through the queue).
  std::uint64_t tile_launches = 0;
  // Grids that exited early because ParkNow asked them to.
  std::uint64_t early_parks = 0;
  // Submissions published as uses of a payload cache entry (the host's
  // count; the worker opens such a one from the cache where the lone hint
  // it reads with the tail still names it, cached_openings) and as fills of
  // an entry.
  std::uint64_t payload_cache_uses = 0;
  std::uint64_t payload_cache_fills = 0;
  unsigned int payload_cache_entries = 0;  // RuntimeConfig::payload_cache_entries
  unsigned int worker_blocks = 0;
  unsigned int worker_pollers = 0;  // RuntimeConfig::pollers as the grid gets it
  // Registers per thread of the loaded worker (CU_FUNC_ATTRIBUTE_NUM_REGS; at
  // most device::kWorkerMaxRegisters, which leaves room for other kernels).
  unsigned int worker_registers = 0;
  // Local memory a thread of the loaded worker takes
  // (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: its stack frame and spills); the
  // context's stack limit is raised to it when the image is loaded.
  unsigned int worker_local_bytes = 0;
  // RuntimeConfig::idle_park as the worker got it (negative: 0), for
  // diagnostics that judge parks (frontends/pytorch/bench/park_probe.py).
  std::chrono::microseconds idle_park{0};
  // RuntimeConfig::device_memory_results: completion words published after a
  // gpu-scope fence (else a system-scope one).
  bool device_memory_results = false;
  double worker_sm_clock_mhz = 0;  // measured by the worker over its last run (diagnostics)
  std::map<std::string, std::uint64_t> tasks_per_operator;  // "add f32" -> count
  std::uint64_t alias_flips = 0;       // live version changes without a new image
  std::uint64_t epoch_switches = 0;    // kernel images replaced
  double last_epoch_gap_us = 0;        // service gap of the last epoch switch
  std::uint64_t retired_images = 0;    // replaced images still loaded (unloaded at a park)
  std::uint64_t watchdog_reports = 0;  // tasks the watchdog found over task_time_limit
};

// A device allocation owned by the runtime.
struct DeviceBuffer {
  std::uint64_t address = 0;  // CUdeviceptr
  std::size_t bytes = 0;
};

// One operator instantiation as the runtime dispatches it.
struct OperatorRef {
  std::string name;
  registry::SemVer version;
  DType dtype = DType::kF32;
  std::optional<DType> out_dtype;  // U of operators with out_dtypes (cast f32 -> i64)
  std::uint32_t slot = 0;          // in the image's operator table
  std::uint32_t logical = 0;       // alias-table id: what tasks carry
  const registry::OperatorSpec* spec = nullptr;
};

// Live updates (docs/live-update.md). One operator as a runtime should serve
// it: `current` active, `previous` kept in the image as the target of an
// alias rollback (dual slots).
struct LiveOperator {
  registry::OperatorSpec current;
  std::optional<registry::OperatorSpec> previous;
};

// What Update / Refresh did.
struct UpdateOutcome {
  std::string action;  // "none", "alias_flip", "epoch_switch"
  std::vector<std::pair<std::string, std::string>> activated;  // operator, version
  std::vector<std::string> reasons;                            // why an epoch switch was needed
  double stage_ms = 0;    // epoch switch: building the staged image
  double gap_us = 0;      // epoch switch: the service gap, and its steps:
  double quiesce_us = 0;  //   drain the submissions in flight and park the worker
  double load_us = 0;     //   load the staged image and check it
  double commit_us = 0;   //   make it active and resume admitting
  // Epoch switch, a diagnostic: the gap's finer steps in order (name,
  // microseconds), e.g. ("drain", 12.5), ("park", 30.1), ("module_load", 250).
  std::vector<std::pair<std::string, double>> gap_detail_us;
  std::string image_key;  // the active image afterwards (build-cache key)
};

struct ActiveOperator {
  std::string name;
  registry::SemVer version;                // what new submissions run
  std::vector<registry::SemVer> in_image;  // versions the image holds (rollback targets)
};

// How Submit orders a graph (docs/runtime.md, "Streams").
struct SubmitOptions {
  // When not null: the graph's tasks start only after the work enqueued on
  // this CUDA stream (a CUstream or cudaStream_t of the runtime's device)
  // before Submit has finished. Submit enqueues a write of a gate word on
  // the stream (cuStreamWriteValue64) and the worker admits the graph once
  // the word is written; the host does not wait, and other submissions keep
  // running. The worker does not park while a graph waits at its gate. The
  // stream's work must be able to run beside the worker: a non-blocking
  // stream is safest; the legacy default stream (CU_STREAM_LEGACY) is
  // refused (it would wait for the worker, which waits for it). Note that a
  // null stream (0) here means "no ordering", not "the default stream".
  CUstream_st* wait_for = nullptr;
  // When true (and wait_for is null): the graph is published at once but
  // its tasks start only after Runtime::OpenGate(future). The caller orders
  // the graph after other work between the two calls, while the worker
  // picks it up: e.g. cuStreamQuery, or cuStreamSynchronize, on the stream
  // whose results it reads (docs/runtime.md, "Streams"). The gate is a word
  // of the submission's ring slot that the worker reads with the slot, so
  // an already open gate costs the worker nothing. A graph that is never
  // opened never runs (and keeps the worker from parking): open or drop it
  // (Runtime::DropGated) on every path, errors included. Sequences stay below
  // device::kGateDropped (2^62).
  bool open_later = false;
  // When true: a run the caller would have made a tile launch (LaunchTiles)
  // but submits because the worker grid runs (Runtime::Activity). It is
  // left out of WorkerActivity::requests, so that such callers tell a grid
  // that others keep busy from one that only their own stand-ins keep.
  bool stands_in_for_launch = false;
};

class RuntimeImpl;

// The completion of one submission. Copyable; cheap.
class Future {
 public:
  Future() = default;

  // Waits until the submission finished, at most `timeout`. Errors:
  // Unavailable when it did not finish in time (the worker is running;
  // the message says how many of its tasks are done), when the watchdog
  // found a task running longer than RuntimeConfig::task_time_limit while
  // this Wait waited at least that long (the message starts "watchdog:" and
  // names the task, its operator, block and time; a later Wait reports it
  // again after waiting the limit) or the worker died; InvalidArgument /
  // FailedPrecondition when one of its own tasks failed (the message names
  // the task, its operator and the worker error; later submissions are not
  // affected).
  Status Wait(std::chrono::microseconds timeout = std::chrono::seconds(60)) const;
  bool Ready() const;
  std::uint64_t sequence() const { return sequence_; }

 private:
  friend class RuntimeImpl;
  RuntimeImpl* runtime_ = nullptr;
  std::uint64_t sequence_ = 0;  // 0: nothing to wait for
  std::uint32_t first_task_id_ = 0;
  std::uint32_t task_count_ = 0;
};

// A device::WorkerStatus error and its detail in words ("tensor dtype
// differs from the operator instantiation (tensor 2, counting inputs then
// outputs from 0)"), as a failed Future's message gives them.
std::string DescribeWorkerError(unsigned int error, unsigned int detail);

class Runtime {
 public:
  // Opens device `config.device`, builds (or takes from the cache) the
  // kernel image and allocates the queue; the worker starts with the first
  // Submit. Plugins are loaded and created first, so a bad plugin
  // configuration fails the same way with or without a GPU. Errors: those
  // of loading and creating plugins (docs/plugins.md, "Error messages");
  // InvalidArgument for an executor other than "persistent" (not
  // implemented); Unavailable("no CUDA device: ...") without a driver or
  // GPU; InvalidArgument for a bad config; the repository's and the JIT's
  // errors.
  static Expected<std::unique_ptr<Runtime>> Open(const RuntimeConfig& config);
  ~Runtime();  // Shutdown()
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The newest version of `op` for `dtype` in the image. NotFound names
  // what the image has.
  Expected<OperatorRef> Resolve(const std::string& op, DType dtype,
                                std::optional<DType> out_dtype = std::nullopt) const;

  // Device memory (cuMemAlloc; fine while the worker runs). Free is
  // deferred until the worker is parked.
  Expected<DeviceBuffer> Allocate(std::size_t bytes);
  void Free(const DeviceBuffer& buffer);
  // Synchronous copies on the runtime's copy stream (never the legacy
  // stream, which would wait for the worker). Not ordered with tasks: wait
  // for a task's future before reading what it wrote.
  Status CopyToDevice(std::uint64_t address, const void* source, std::size_t bytes);
  Status CopyToHost(void* destination, std::uint64_t address, std::size_t bytes);

  // Publishes `graph` and returns its future; relaunches a parked worker.
  // Waits while the queue is full. Errors: InvalidArgument when the graph
  // cannot fit the queue even when empty; Unavailable after a shutdown or
  // when the worker died; the scheduler plugin's error, or its broken
  // contract, naming the plugin (nothing is submitted then).
  Expected<Future> Submit(const TaskGraph& graph);
  // Submit after the work enqueued on options.wait_for (see SubmitOptions).
  // Errors as Submit, and: InvalidArgument for the legacy default stream;
  // FailedPrecondition when the device lacks 64-bit stream memory
  // operations; the driver's error when the stream cannot take the write.
  // An empty graph returns an empty future at once (nothing to order).
  Expected<Future> Submit(const TaskGraph& graph, const SubmitOptions& options);

  // Runs `graph`'s one task as a kernel of its own on `stream` (nullptr: the
  // legacy default stream), not through the worker's queue: block b runs
  // tiles b, b + grid, ... of the task, each over the items the worker would
  // give that tile, with the table carried in the launch's parameter (at most
  // device::kLaunchTableMax descriptors) and the operator resolved and its
  // tensors checked here. Ordered on `stream` as any kernel is; returns once
  // the launch is enqueued (no future: wait on the stream). A no-op task
  // launches nothing.
  // The task's tiles must not wait for one another (a stitched program of
  // one stage; stages that wait for earlier ones need the worker's in-order
  // tiles). Errors an operator reports go to the device::WorkerStatus at
  // `status_address` (device-visible memory, 0: not reported), first one
  // kept, written while the kernel runs. Doesn't start or stop the worker.
  // The kernel comes from the image in use when it is enqueued: an image an
  // epoch switch retires, once a launch came from it, is unloaded only after
  // a synchronize of the whole context (an unload does not wait for its
  // kernels; docs/runtime.md, "Tile launches"). Errors: InvalidArgument for a
  // graph of other than one task, with more descriptors than a launch
  // carries or a tensor index outside them; FailedPrecondition for an
  // operator version no longer served; Internal for a slot the image lacks;
  // Unavailable after Shutdown; the driver's error when the launch fails.
  Status LaunchTiles(const TaskGraph& graph, CUstream_st* stream, std::uint64_t status_address = 0);

  // A tile launch made while the worker grid runs did not start until the
  // grid parked, up to idle_park after its last work (an attention call
  // right after an mlp call took 226 us against 13 alone on an H200;
  // docs/runtime.md "Tile launches" says what is known of why). A caller
  // therefore reads Activity (the runtime's lock and one load of mapped
  // memory) and, while the grid runs, submits through it when others asked
  // something of it since its own last look (WorkerActivity::requests), or
  // else asks it to exit with ParkNow and then launches.
  WorkerActivity Activity() const;
  // Asks the worker grid to exit now rather than after idle_park, and waits
  // up to `timeout` for it to end; then the runtime's deferred frees run. OK
  // at once when no grid runs. The next Submit relaunches the grid.
  // Errors: Unavailable while submissions are in flight (the grid keeps
  // serving them; nothing is asked of it), after Shutdown, and when the grid
  // did not end within `timeout`: it keeps serving then, possibly on fewer
  // blocks (those that saw the request have exited) until its next park;
  // the driver's error.
  Status ParkNow(std::chrono::microseconds timeout = std::chrono::microseconds(500));

  // Tells the worker that work is coming soon: a parked worker is launched
  // now (so a Submit shortly after finds it running instead of paying the
  // relaunch, 23-57 us on the H100 in docs/pytorch.md's runs), a running one restarts its idle
  // clock and stays up for another idle_park. Cheap when it runs (one store to pinned memory); call
  // it at most every few tens of microseconds while a caller prepares a submission (transparent
  // batching does, docs/pytorch.md). Best effort: a grid that was already parking still parks.
  // Errors: Unavailable after Shutdown; the driver's error when the launch fails.
  Status KeepWarm();

  // Makes `stream` wait for `future`: work enqueued on it after this call
  // starts once the submission has finished (results visible). Neither the
  // host nor the worker waits: the stream polls the submission's completion
  // word (cuStreamWaitValue64). OK at once for an empty or finished future.
  // Errors: InvalidArgument for a future of another runtime; FailedPrecondition
  // without 64-bit stream memory operations; the driver's error.
  Status StreamWaitFor(CUstream_st* stream, const Future& future);

  // Opens the gate of a submission made with SubmitOptions::open_later: its
  // tasks may start now (one store to pinned memory; the host does not
  // wait). OK and nothing to do for an empty future or one without such a
  // gate, and for one opened already. Thread-safe, lock-free. Errors:
  // InvalidArgument for a future of another runtime; Unavailable after
  // Shutdown.
  Status OpenGate(const Future& future);
  // Instead of OpenGate: the submission completes without running any of
  // its tasks (Future::Wait returns OK; its outputs are not written), so the
  // worker is free again at once, e.g. when the caller found the stream it
  // orders after busy and must wait for it on the host: a worker holding a
  // closed gate does not park, and that stream's kernels may need the SMs
  // it holds. Same errors as OpenGate; nothing to do once the gate is open.
  Status DropGated(const Future& future);

  // ---- Tensors (docs/runtime.md, "Tensors") ----
  // Tensor memory comes from the runtime's DeviceArena (cuMemAlloc'ed
  // blocks, sub-allocated). A tensor whose last view is dropped returns its
  // range to the arena once every submission that might use it has
  // finished; the arena never gives memory back to the driver while the
  // worker runs. Tasks added with Tensors keep their storages alive until
  // the submission is done, so dropping a tensor right after Submit is safe.

  // A new dense tensor on the runtime's device, contents uninitialised.
  // Unavailable when out of device memory or after Shutdown.
  Expected<Tensor> Empty(const Dims& sizes, DType dtype);
  // Wraps device memory that another library owns (e.g. a PyTorch tensor's
  // data_ptr()) without copying: sizes and strides in elements (strides
  // empty: dense row-major), the view starting at `address` + storage_offset
  // elements. `release` runs once when the last view is dropped (it may run
  // on a thread inside the runtime, with the runtime's lock held: it must
  // not call the Runtime). InvalidArgument when `address` is not memory of
  // the runtime's device, or the layout is bad; on error `release` does not
  // run.
  Expected<Tensor> Wrap(std::uint64_t address, DType dtype, const Dims& sizes,
                        const Dims& strides = {}, std::function<void()> release = {},
                        std::int64_t storage_offset = 0);
  // Synchronous copies of a contiguous tensor's elements (bytes must equal
  // tensor.nbytes()), like CopyToDevice / CopyToHost above: not ordered with
  // tasks (wait for the future of the tasks that write or read it first).
  // InvalidArgument for a non-contiguous tensor (run `contiguous` first), a
  // size mismatch or a tensor of another device.
  Status CopyToDevice(const Tensor& destination, const void* source, std::size_t bytes);
  Status CopyToHost(void* destination, const Tensor& source, std::size_t bytes);
  // The arena tensors come from (statistics, tests). Unavailable after Shutdown.
  Expected<std::shared_ptr<DeviceArena>> TensorArena();
  // Returns the arena's wholly free blocks to the driver. FailedPrecondition
  // while the worker runs or submissions are in flight (WaitUntilParked
  // first). Returns the bytes returned.
  Expected<std::size_t> TrimTensorMemory();

  // Waits for every submission so far.
  Status Synchronize(std::chrono::microseconds timeout = std::chrono::seconds(60));
  // Waits until the worker grid has exited (parked), then runs deferred
  // frees. Unavailable on timeout.
  Status WaitUntilParked(std::chrono::microseconds timeout = std::chrono::seconds(10));

  // ---- Live updates (docs/live-update.md) ----
  // Submissions are bound to operator versions when submitted: a graph
  // submitted before a change runs entirely on the versions it was submitted
  // against; tasks in flight finish on theirs.

  // Makes `version` of `op` the one new submissions run: an alias flip, live
  // (the worker keeps running). FailedPrecondition when the image lacks that
  // version (Update stages one), NotFound for an unknown operator.
  Status Activate(const std::string& op, const registry::SemVer& version);
  // Serves `operators` (others stay as they are): alias flips when the
  // active image holds every current version, else an epoch switch to an
  // image built in the background (from the build cache where it can) while
  // this one keeps serving. On failure the active image keeps serving and
  // the error is returned.
  Expected<UpdateOutcome> Update(const std::vector<LiveOperator>& operators);
  // Update from the repository's current operator set (what a publish or a
  // rollback notification triggers). FailedPrecondition without a repository.
  Expected<UpdateOutcome> Refresh();
  std::vector<ActiveOperator> ActiveOperators() const;
  // The control socket's path; empty when there is none.
  std::string control_socket_path() const;

  RuntimeStats stats() const;
  // The plugins in effect and what Open loaded. Fixed at Open: the reference
  // lives as long as the Runtime; lock-free.
  const RuntimePluginReport& plugins() const;
  // Blocks of the worker grid (may shrink at an epoch switch). Lock-free.
  unsigned int worker_blocks() const;
  // The active image. The reference is invalidated by an epoch switch.
  const registry::KernelImage& image() const;
  // Address and size of a `__device__` variable of the loaded image (for
  // diagnostics, e.g. gpuos/device/phase_timing.cuh); NotFound when the image
  // has no such symbol. Read or write it with CopyToHost / CopyToDevice.
  Expected<DeviceBuffer> ImageGlobal(const std::string& symbol) const;
  std::string device_name() const;
  // The CUDA context the runtime works in: its device's primary context
  // (PyTorch's too). Lock-free.
  CUctx_st* cuda_context() const;

  // The task records of the device's trace rings (RuntimeConfig::
  // trace_capacity), sorted by (block, start). Records of tasks finishing
  // during the call may be missing; Synchronize first for a complete view.
  // Errors: FailedPrecondition when tracing is off; Unavailable after
  // Shutdown; the driver's errors.
  Expected<std::vector<TraceEvent>> TraceEvents() const;
  // TraceEvents written as a Chrome trace (gpuos/runtime/chrome_trace.h).
  // Errors: those of TraceEvents and WriteChromeTrace.
  Status ExportChromeTrace(const std::string& path) const;

  // Waits for outstanding work (up to 10 s), stops and parks the worker,
  // frees everything. Idempotent; later calls fail with Unavailable.
  Status Shutdown();

 private:
  explicit Runtime(std::unique_ptr<RuntimeImpl> impl);
  friend class TaskGraph;
  std::unique_ptr<RuntimeImpl> impl_;
};

}  // namespace gpuos::runtime
