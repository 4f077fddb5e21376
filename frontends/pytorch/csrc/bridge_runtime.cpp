#include "bridge_runtime.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>

#include "bridge_fusion.h"
#include "bridge_host_timing.h"
#include "gpuos/cuda_driver.h"
#include "gpuos/device/queue.h"
#include "gpuos/embedded_sets.h"
#include "gpuos/environment.h"
#include "gpuos/registry/pack_loader.h"
#include "gpuos/runtime/stream_tracker.h"

namespace gpuos::torch_bridge {

std::string DefaultCachePath() { return DefaultDataDirectory() + "/pytorch-build-cache.db"; }

namespace {

// The process's stream tracker (GPUOS_TORCH_STREAM_TRACKER=1), started by the
// first runtime opened with it asked for and kept to the process's end: its
// CUPTI callbacks may run on any thread until then. nullptr when not asked
// for or not available (then `why` says why).
struct TrackerState {
  std::mutex mutex;                                       // guards the starting and `why`
  std::atomic<runtime::StreamTracker*> tracker{nullptr};  // set once, leaked on purpose
  std::string why = "off";
};

TrackerState& Tracking() {
  static TrackerState* state = new TrackerState();  // outlives static destructors
  return *state;
}

std::atomic<std::uint64_t> queries_skipped{0};

Status StartStreamTrackerIfAsked() {
  GPUOS_ASSIGN_OR_RETURN(const auto asked,
                         GetEnvInteger("GPUOS_TORCH_STREAM_TRACKER", 0, 1, "0 or 1"));
  if (!asked.value_or(0)) return Status::Ok();
  TrackerState& state = Tracking();
  std::lock_guard<std::mutex> lock(state.mutex);
  // Started, or tried once and unavailable (a profiler holding CUPTI stays):
  // not again at every runtime.
  if (state.why != "off") return Status::Ok();
  auto started = runtime::StreamTracker::Start();
  if (!started.ok()) {
    state.why = "unavailable: " + started.status().message();
    return Status::Ok();  // calls query the stream as without it
  }
  state.tracker.store(started->release(), std::memory_order_release);
  state.why = "on";
  return Status::Ok();
}

// The tracker when it runs; nullptr otherwise (one atomic load: every
// compiled call asks).
runtime::StreamTracker* RunningTracker() {
  return Tracking().tracker.load(std::memory_order_acquire);
}

}  // namespace

StreamTrackerReport StreamTrackerStatus() {
  TrackerState& state = Tracking();
  std::lock_guard<std::mutex> lock(state.mutex);
  StreamTrackerReport report;
  report.state = state.why;
  report.queries_skipped = queries_skipped.load(std::memory_order_relaxed);
  const runtime::StreamTracker* tracker = state.tracker.load(std::memory_order_acquire);
  report.enqueues = tracker != nullptr ? tracker->enqueues() : 0;
  return report;
}

Expected<std::unique_ptr<runtime::Runtime>> OpenRuntime(const OpenOptions& options) {
  runtime::RuntimeConfig config;
  config.device = options.device;
  config.trace_capacity = options.trace_capacity;
  GPUOS_ASSIGN_OR_RETURN(const auto blocks,
                         GetEnvInteger("GPUOS_TORCH_BLOCKS", 1, 4096, "a worker block count"));
  if (blocks) config.blocks = static_cast<unsigned int>(*blocks);
  // Worker blocks reading the host's queue (RuntimeConfig::pollers; A/B runs).
  GPUOS_ASSIGN_OR_RETURN(const auto pollers,
                         GetEnvInteger("GPUOS_TORCH_POLLERS", 1, 64, "a poller count"));
  if (pollers) config.pollers = static_cast<unsigned int>(*pollers);
  // Entries of the device's payload cache (RuntimeConfig::payload_cache_entries;
  // off by default: an experiment, for A/B runs).
  GPUOS_ASSIGN_OR_RETURN(
      const auto cache_entries,
      GetEnvInteger("GPUOS_TORCH_PAYLOAD_CACHE", 0, gpuos::device::kMaxPayloadCacheEntries,
                    "a payload cache size"));
  if (cache_entries) config.payload_cache_entries = static_cast<unsigned int>(*cache_entries);
  // Every task writes CUDA tensors (device memory), so the completion word
  // needs only a gpu-scope fence (docs/runtime.md, "The completion's fence");
  // GPUOS_TORCH_GPU_FENCE=0 keeps the system-scope one (A/B runs).
  GPUOS_ASSIGN_OR_RETURN(const auto gpu_fence,
                         GetEnvInteger("GPUOS_TORCH_GPU_FENCE", 0, 1, "0 or 1"));
  config.device_memory_results = gpu_fence.value_or(1) != 0;
  GPUOS_RETURN_IF_ERROR(StartStreamTrackerIfAsked());
  if (!options.repository_path.empty()) {
    config.repository_path = options.repository_path;
    return runtime::Runtime::Open(config);
  }
  for (const auto& file : builtin_packs::EmbeddedFiles()) {
    GPUOS_ASSIGN_OR_RETURN(auto pack,
                           registry::ParsePack(file.contents, "builtin:" + std::string(file.name)));
    for (auto& spec : pack.operators) config.operators.push_back(std::move(spec));
  }
  config.repository_path = options.cache_path.empty() ? DefaultCachePath() : options.cache_path;
  std::error_code error;
  const auto directory = std::filesystem::path(config.repository_path).parent_path();
  if (!directory.empty()) std::filesystem::create_directories(directory, error);
  if (error) {
    return IoError("cannot create the build cache's directory " + directory.string() + ": " +
                   error.message() + " (set GPUOS_TORCH_CACHE to a writable path)");
  }
  return runtime::Runtime::Open(config);
}

Expected<std::unique_ptr<Program>> Program::Create(runtime::Runtime& runtime,
                                                   const ProgramSpec& spec) {
  std::unique_ptr<Program> program(new Program(runtime, spec.num_buffers));
  for (std::size_t i = 0; i < spec.tasks.size(); ++i) {
    const TaskSpec& task = spec.tasks[i];
    std::vector<device::TensorDesc> descs;
    for (const ViewSpec& view : task.tensors) {
      GPUOS_ASSIGN_OR_RETURN(auto desc, PlaceholderDesc(view));
      descs.push_back(desc);
    }
    runtime::TaskOptions options;
    options.out_dtype = task.out_dtype;
    auto id = program->graph_.Add(task.op, task.dtype, descs, task.attributes, task.deps, options);
    if (!id.ok()) return id.status().WithContext("program task " + std::to_string(i));
    if (*id != i) return Internal("task ids of the program and its graph differ");
  }
  const auto& tensors = program->graph_.tensors();
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    GPUOS_ASSIGN_OR_RETURN(auto binding,
                           DecodePlaceholder(static_cast<std::uint32_t>(k), tensors[k].data));
    program->bindings_.push_back(binding);
  }
  (void)program->graph_.successors();  // flatten once, not on the first run
  return program;
}

Expected<std::chrono::microseconds> HostWaitBudget() {
  GPUOS_ASSIGN_OR_RETURN(const auto value, GetEnvInteger("GPUOS_TORCH_HOST_WAIT_US", 0, 100000,
                                                         "a number of microseconds"));
  return std::chrono::microseconds(value.value_or(kDefaultHostWaitUs));
}

// HostWaitBudget(), read once.
const Expected<std::chrono::microseconds>& HostWait() {
  static const Expected<std::chrono::microseconds> budget = HostWaitBudget();
  return budget;
}

// Returns once `stream` has no unfinished work, given what cuStreamQuery
// just answered for it (`idle`): at once when it was idle (or failed: its
// error), else after a synchronize.
Status AwaitStream(const CudaDriverApi& driver, CUstream stream, CUresult idle) {
  if (idle != CUDA_ERROR_NOT_READY) {
    return CudaStatus(driver, idle, "cuStreamQuery (PyTorch's current stream)");
  }
  return CudaStatus(driver, driver.cuStreamSynchronize(stream),
                    "cuStreamSynchronize (PyTorch's current stream)");
}

// GPUOS_TORCH_OPEN_LATER=0: query PyTorch's stream before submitting, as
// before open_later (for A/B runs); 1 or unset: publish first.
Expected<bool> OpenLater() {
  GPUOS_ASSIGN_OR_RETURN(const auto value, GetEnvInteger("GPUOS_TORCH_OPEN_LATER", 0, 1, "0 or 1"));
  return value.value_or(1) != 0;
}

// GPUOS_TORCH_TILE_LAUNCH=0: stitched programs of one stage run through the
// worker like the others (for A/B runs); 1 or unset: as tile launches.
Expected<bool> TileLaunchesOn() {
  GPUOS_ASSIGN_OR_RETURN(const auto value,
                         GetEnvInteger("GPUOS_TORCH_TILE_LAUNCH", 0, 1, "0 or 1"));
  return value.value_or(1) != 0;
}

Expected<std::unique_ptr<Program>> Program::CreateStitched(
    runtime::Runtime& runtime, ProgramSpec spec, const registry::StitchedProgram& stitched) {
  std::unique_ptr<Program> program(new Program(runtime, spec.num_buffers));
  if (stitched.table_entries != spec.num_buffers + 1) {
    return Internal("the stitched program's table does not match the program's buffers");
  }
  GPUOS_ASSIGN_OR_RETURN(program->counters_, runtime.Allocate(stitched.counter_bytes));
  const std::vector<unsigned char> zeros(stitched.counter_bytes, 0);
  GPUOS_RETURN_IF_ERROR(
      runtime.CopyToDevice(program->counters_.address, zeros.data(), zeros.size()));
  device::TensorDesc counters = {};
  counters.data = program->counters_.address;
  counters.dtype = static_cast<int>(DType::kU8);
  counters.numel = 1;
  // Bound at every run (Bind): address b of the table is buffer b.
  const std::vector<std::uint64_t> unbound(spec.num_buffers, 0);
  runtime::TaskOptions options;
  options.work_items = stitched.tiles;
  options.tiles = stitched.tiles;
  auto id = program->graph_.AddAddressTableTask(stitched.op.name, DType::kU8, counters, unbound, {},
                                                {}, options);
  if (!id.ok()) return id.status().WithContext("the stitched program's task");
  const std::uint32_t first = static_cast<std::uint32_t>(program->graph_.tasks()[*id].tensors[0]);
  constexpr std::uint32_t kPerRecord = runtime::TaskGraph::kAddressesPerRecord;
  for (std::uint32_t b = 0; b < spec.num_buffers; ++b) {
    Binding binding;
    binding.tensor_index = first + 1 + b / kPerRecord;
    binding.word = b % kPerRecord;
    binding.buffer = b;
    program->bindings_.push_back(binding);
  }
  (void)program->graph_.successors();
  program->task_counter_offset_ = stitched.task_counter_offset;
  program->stitched_ = true;
  static const Expected<bool> tile_launches = TileLaunchesOn();
  GPUOS_RETURN_IF_ERROR(tile_launches.status());
  // One stage: no tile waits for another, so a launch's blocks may run its
  // tiles in any order (Runtime::LaunchTiles).
  if (*tile_launches && stitched.stages.size() == 1 &&
      program->graph_.tensors().size() <= device::kLaunchTableMax) {
    // Without its status word (pinned memory), the program runs through the
    // worker instead.
    GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
    void* host = nullptr;
    CUdeviceptr address = 0;
    if (driver->cuMemHostAlloc(&host, sizeof(device::WorkerStatus),
                               CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) ==
        CUDA_SUCCESS) {
      program->launch_status_ = static_cast<device::WorkerStatus*>(host);
      *program->launch_status_ = device::WorkerStatus{};
      if (driver->cuMemHostGetDevicePointer(&address, host, 0) == CUDA_SUCCESS) {
        program->launch_status_device_ = address;
        program->tile_launch_ = true;
      }
    }
  }
  program->spec_ = std::move(spec);
  return program;
}

Program::~Program() {
  if (launch_status_ != nullptr) {
    if (const auto driver = LoadCudaDriver(); driver.ok()) {
      // The last launch may still report into the status.
      if (last_launch_stream_ != nullptr) (void)(*driver)->cuStreamSynchronize(last_launch_stream_);
      (void)(*driver)->cuMemFreeHost(launch_status_);
    }
  }
  if (counters_.address != 0) runtime_->Free(counters_);
}

Status Program::TileLaunchError(const CudaDriverApi& driver) {
  volatile device::WorkerStatus* status = launch_status_;
  if (status->error == 0) return Status::Ok();
  // The failed kernel (and any launch after it) finished before the report
  // is cleared and the counters zeroed.
  GPUOS_RETURN_IF_ERROR(AwaitLastTileLaunch(driver));
  const unsigned int error = status->error;
  const unsigned int detail = status->detail;
  status->error = 0;
  status->task_id = 0;
  status->detail = 0;
  GPUOS_RETURN_IF_ERROR(ZeroCounters());
  return Internal("an earlier run of this program (a tile launch) failed on the GPU: " +
                  runtime::DescribeWorkerError(error, detail) +
                  "; the results of that run and of any run after it are not valid");
}

Expected<bool> Program::LaunchThisRun() {
  // Long enough for an idle grid to exit (a quiesce's park: 44 us median in
  // bench/results/live_update.json, the H100), short against the idle_park
  // it saves.
  constexpr std::chrono::microseconds kParkTimeout(200);
  const runtime::WorkerActivity activity = runtime_->Activity();
  const bool others = activity.requests != requests_seen_;
  requests_seen_ = activity.requests;
  if (!activity.running) return true;
  if (others) return false;
  const Status parked = runtime_->ParkNow(kParkTimeout);
  if (parked.ok()) return true;
  // Runs in flight, or a grid that did not end in time: through it.
  if (parked.code() == StatusCode::kUnavailable) return false;
  return parked;
}

Status Program::AwaitLastTileLaunch(const CudaDriverApi& driver, CUstream unless) {
  if (last_launch_stream_ == nullptr || last_launch_stream_ == unless) return Status::Ok();
  return CudaStatus(driver, driver.cuStreamSynchronize(last_launch_stream_),
                    "cuStreamSynchronize (the stream of the program's last tile launch)");
}

Status Program::LaunchTiled(const CudaDriverApi& driver, CUstream stream) {
  // Runs of a stitched program must not overlap (its counters): a launch on
  // another stream than the last one waits for that one first.
  GPUOS_RETURN_IF_ERROR(AwaitLastTileLaunch(driver, stream));
  StepTimer submit(LaunchStep::kSubmit);
  GPUOS_RETURN_IF_ERROR(runtime_->LaunchTiles(graph_, stream, launch_status_device_));
  last_launch_stream_ = stream;
  return Status::Ok();
}

Expected<Program*> Program::Fallback() {
  if (!fallback_) {
    ProgramSpec spec = spec_;
    GPUOS_RETURN_IF_ERROR(ResolveFusedTasks(*runtime_, &spec));
    GPUOS_ASSIGN_OR_RETURN(fallback_, Create(*runtime_, spec));
  }
  return fallback_.get();
}

Status Program::ZeroCounters() {
  const std::vector<unsigned char> zeros(counters_.bytes, 0);
  return runtime_->CopyToDevice(counters_.address, zeros.data(), zeros.size())
      .WithContext("zeroing the stitched program's counters");
}

Status Program::TestingOnlySetFinishedRuns(std::uint64_t runs) {
  if (!stitched_) return FailedPrecondition("TestingOnlySetFinishedRuns: not a stitched program");
  GPUOS_RETURN_IF_ERROR(AwaitPreviousStitchedRun());
  if (last_launch_stream_ != nullptr) {  // the counters' copy below is not on that stream
    GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
    GPUOS_RETURN_IF_ERROR(AwaitLastTileLaunch(*driver));
  }
  // The graph's one task: the stitched operator's, with all its tiles.
  const std::uint64_t count = runs * graph_.tasks().front().num_tiles;
  return runtime_->CopyToDevice(counters_.address + task_counter_offset_, &count, sizeof(count));
}

Status Program::Finished(const runtime::Future& run) {
  const Status status = run.Wait(std::chrono::microseconds(0));
  // A failed run of a stitched program may leave counts behind (a wait that
  // timed out): the next run starts from zero.
  if (!status.ok() && stitched_) GPUOS_RETURN_IF_ERROR(ZeroCounters());
  return status;
}

Status Program::AwaitPreviousStitchedRun() {
  while (!pending_.empty()) {
    const runtime::Future previous = pending_.front();
    const Status waited = previous.Wait();
    // Not finished (the wait's limit, or the watchdog reporting a long
    // task): it stays pending, and its counters are left alone; the next
    // launch waits for it again.
    if (!waited.ok() && !previous.Ready())
      return waited.WithContext("an earlier run of this program");
    pending_.pop_front();
    GPUOS_RETURN_IF_ERROR(Finished(previous).WithContext("an earlier run of this program"));
  }
  return Status::Ok();
}

Status Program::Bind(const unsigned long long* addresses, std::uint32_t num_buffers) {
  if (num_buffers != num_buffers_) {
    return InvalidArgument("the program has " + std::to_string(num_buffers_) + " buffers; got " +
                           std::to_string(num_buffers) + " addresses");
  }
  // Submit copies the descriptors, so the next run may rebind them as soon
  // as Submit returns.
  for (const Binding& binding : bindings_) {
    GPUOS_RETURN_IF_ERROR(graph_.SetAddressWord(
        binding.tensor_index, binding.word,
        addresses[binding.buffer] + static_cast<unsigned long long>(binding.byte_offset)));
  }
  return Status::Ok();
}

Expected<runtime::Future> Program::SubmitAfter(const CudaDriverApi& driver, CUstream stream) {
  // Published first and started once the stream is found idle (open_later):
  // the query overlaps the worker's pick-up of the run instead of preceding
  // it. A busy stream is waited for on the host with the run dropped, not
  // held at its gate: the worker would not park, and the stream's kernels
  // may need the SMs it holds (docs/pytorch.md, "Ordering").
  static const Expected<bool> open_later = OpenLater();
  GPUOS_RETURN_IF_ERROR(open_later.status());
  runtime::SubmitOptions options;
  options.stands_in_for_launch = tile_launch_;  // LaunchThisRun chose the worker
  if (runtime::StreamTracker* tracker = RunningTracker();
      tracker != nullptr && tracker->KnownIdle(runtime_->cuda_context(), stream)) {
    // Nothing was enqueued in the process since the stream was last found
    // idle: published open, with no query (stream_tracker.h).
    StepTimer submit(LaunchStep::kSubmit);
    GPUOS_ASSIGN_OR_RETURN(const runtime::Future open, runtime_->Submit(graph_, options));
    pending_.push_back(open);
    queries_skipped.fetch_add(1, std::memory_order_relaxed);
    return open;
  }
  CUresult idle = CUDA_ERROR_NOT_READY;  // the stream's query, below
  if (*open_later) {
    StepTimer submit(LaunchStep::kSubmit);
    runtime::SubmitOptions gated = options;
    gated.open_later = true;
    GPUOS_ASSIGN_OR_RETURN(const runtime::Future launched, runtime_->Submit(graph_, gated));
    submit.Stop();
    pending_.push_back(launched);
    StepTimer query(LaunchStep::kStreamQuery);
    idle = driver.cuStreamQuery(stream);
    if (idle == CUDA_SUCCESS) {
      GPUOS_RETURN_IF_ERROR(runtime_->OpenGate(launched));
      return launched;
    }
    // Dropped (it completes at once and runs nothing; a later launch
    // reclaims it), then as below with this query's answer.
    GPUOS_RETURN_IF_ERROR(runtime_->DropGated(launched));
  }
  // The stream's unfinished work waited for on the host, then the run
  // submitted without a gate.
  StepTimer query(LaunchStep::kStreamQuery);
  if (!*open_later) idle = driver.cuStreamQuery(stream);
  GPUOS_RETURN_IF_ERROR(AwaitStream(driver, stream, idle));
  query.Stop();
  StepTimer submit(LaunchStep::kSubmit);
  GPUOS_ASSIGN_OR_RETURN(const runtime::Future plain, runtime_->Submit(graph_, options));
  pending_.push_back(plain);
  return plain;
}

Status Program::Launch(const unsigned long long* addresses, std::uint32_t num_buffers,
                       CUstream stream) {
  GPUOS_RETURN_IF_ERROR(Start(addresses, num_buffers, stream));
  return Finish();
}

Status Program::Start(const unsigned long long* addresses, std::uint32_t num_buffers,
                      CUstream stream) {
  started_ = nullptr;
  GPUOS_RETURN_IF_ERROR(HostWait().status());
  StepTimer reclaim(LaunchStep::kReclaim);
  if (stitched_) {
    for (std::uint32_t b = 0; b < num_buffers && b < num_buffers_; ++b) {
      if (addresses[b] % 16 != 0) {
        // The stitched code assumes 16-byte aligned buffers (vector loads).
        // A tile launch on another stream may still use the workspace the
        // caller hands on (Idle() counts it seen): it finishes first.
        if (last_launch_stream_ != nullptr) {
          GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
          GPUOS_RETURN_IF_ERROR(
              AwaitLastTileLaunch(*driver, stream == nullptr ? CU_STREAM_LEGACY : stream));
        }
        GPUOS_ASSIGN_OR_RETURN(Program * fallback, Fallback());
        GPUOS_RETURN_IF_ERROR(fallback->Start(addresses, num_buffers, stream));
        started_ = fallback;
        return Status::Ok();
      }
    }
    GPUOS_RETURN_IF_ERROR(AwaitPreviousStitchedRun());
  }
  started_tile_launch_ = false;
  if (tile_launch_) {
    GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
    GPUOS_RETURN_IF_ERROR(TileLaunchError(*driver));
    if (stream == nullptr) stream = CU_STREAM_LEGACY;
    GPUOS_ASSIGN_OR_RETURN(const bool launch, LaunchThisRun());
    if (launch) {
      reclaim.Stop();
      StepTimer bind(LaunchStep::kBind);
      GPUOS_RETURN_IF_ERROR(Bind(addresses, num_buffers));
      bind.Stop();
      GPUOS_RETURN_IF_ERROR(LaunchTiled(*driver, stream));
      started_ = this;
      started_stream_ = stream;
      started_tile_launch_ = true;
      return Status::Ok();
    }
    // Through the worker: after the last launch (SubmitAfter orders the run
    // after this stream's work; another stream's is waited for here).
    GPUOS_RETURN_IF_ERROR(AwaitLastTileLaunch(*driver, stream));
  }
  while (!pending_.empty() && pending_.front().Ready()) {
    const runtime::Future previous = pending_.front();
    pending_.pop_front();
    GPUOS_RETURN_IF_ERROR(Finished(previous).WithContext("an earlier run of this program"));
  }
  reclaim.Stop();
  StepTimer bind(LaunchStep::kBind);
  GPUOS_RETURN_IF_ERROR(Bind(addresses, num_buffers));
  bind.Stop();
  GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
  if (stream == nullptr) stream = CU_STREAM_LEGACY;
  GPUOS_RETURN_IF_ERROR(SubmitAfter(*driver, stream).status());
  started_ = this;
  started_stream_ = stream;
  return Status::Ok();
}

Status Program::Finish() {
  const Expected<std::chrono::microseconds>& host_wait = HostWait();
  GPUOS_RETURN_IF_ERROR(host_wait.status());
  Program* const started = started_;
  started_ = nullptr;
  if (started == nullptr) return FailedPrecondition("Program::Finish without a Start before it");
  if (started != this) return started->Finish();
  // A tile launch is enqueued on its stream, which orders everything after it.
  if (started_tile_launch_) return Status::Ok();
  const CUstream stream = started_stream_;
  const runtime::Future launched = pending_.back();  // SubmitAfter's
  // The results are usually there within microseconds: waiting for them
  // here costs less than the stream's own wait for the completion word, and
  // the stream then has nothing to wait for.
  StepTimer host(LaunchStep::kHostWait);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + *host_wait;
  bool finished = launched.Ready();
  while (!finished && Clock::now() < deadline) finished = launched.Ready();
  host.Stop();
  if (finished) {
    pending_.pop_back();
    return Finished(launched);
  }
  StepTimer wait(LaunchStep::kStreamWait);
  const Status ordered = runtime_->StreamWaitFor(stream, launched);
  wait.Stop();
  if (ordered.code() != StatusCode::kFailedPrecondition) return ordered;
  // A device without 64-bit stream memory operations: the stream cannot
  // wait on the device, so the host waits for the results instead (a run
  // still going after the wait's limit stays pending).
  const Status waited = launched.Wait();
  if (!waited.ok() && !launched.Ready()) return waited;
  pending_.pop_back();
  return Finished(launched);
}

}  // namespace gpuos::torch_bridge
