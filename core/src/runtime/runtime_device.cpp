// Device resources of the runtime: context, kernel image, queue memory,
// buffers. The public Runtime methods forward here.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "gpuos/control/control_server.h"
#include "gpuos/registry/jit_builder.h"
#include "gpuos/registry/pack_loader.h"
#include "gpuos/registry/repository.h"
#include "runtime_impl.h"

namespace gpuos::runtime {

namespace {

constexpr std::size_t kAlign = 256;

std::size_t AlignUp(std::size_t value) { return (value + kAlign - 1) / kAlign * kAlign; }

// Offsets of the pieces of one allocation, laid out in order.
class Layout {
 public:
  std::size_t Add(std::size_t bytes) {
    const std::size_t at = size_;
    size_ = AlignUp(size_ + bytes);
    return at;
  }
  std::size_t size() const { return size_; }

 private:
  std::size_t size_ = 0;
};

}  // namespace

RuntimeImpl::~RuntimeImpl() {
  StopControlServer();  // its handler calls into this object
  (void)Shutdown();
  if (driver_ == nullptr || context_ == nullptr || worker_abandoned_) return;
  if (MakeCurrent().ok() && host_block_ != nullptr) (void)driver_->cuMemFreeHost(host_block_);
  host_block_ = nullptr;
  control_ = nullptr;
  (void)driver_->cuDevicePrimaryCtxRelease(device_);
  context_ = nullptr;
}

Status RuntimeImpl::MakeCurrent() const {
  return Cuda(driver_->cuCtxSetCurrent(context_), "cuCtxSetCurrent");
}

Status RuntimeImpl::Init(const RuntimeConfig& config) {
  // Plugins first: a bad plugin configuration is reported as such, with or
  // without a GPU, and before any device work.
  GPUOS_ASSIGN_OR_RETURN(plugins_, RuntimePlugins::Open(config.plugin_dirs, config.plugins));
  if (config.pollers == 0) {
    return InvalidArgument(
        "RuntimeConfig::pollers is 0: at least one worker block must read the host's queue "
        "(the default is 2)");
  }
  pollers_ = config.pollers;
  if (config.payload_cache_entries > device::kMaxPayloadCacheEntries) {
    return InvalidArgument("RuntimeConfig::payload_cache_entries is " +
                           std::to_string(config.payload_cache_entries) + ": at most " +
                           std::to_string(device::kMaxPayloadCacheEntries) +
                           " (0 turns the payload cache off)");
  }
  auto driver = LoadCudaDriver();
  if (!driver.ok()) {
    const std::string message = driver.status().message();
    return Unavailable(message.rfind("no CUDA device", 0) == 0 ? message
                                                               : "no CUDA device: " + message);
  }
  driver_ = *driver;
  auto count = CudaDeviceCount();
  if (!count.ok()) return Unavailable("no CUDA device: " + count.status().message());
  if (config.device < 0 || config.device >= *count) {
    return InvalidArgument("RuntimeConfig::device is " + std::to_string(config.device) +
                           " but the machine has " + std::to_string(*count) + " CUDA device(s)");
  }
  if (config.task_capacity == 0 || config.tensor_capacity == 0 || config.successor_capacity == 0 ||
      config.submission_capacity == 0) {
    return InvalidArgument("RuntimeConfig capacities must be positive");
  }
  GPUOS_ASSIGN_OR_RETURN(CudaDeviceInfo info, QueryCudaDevice(config.device));
  device_name_ = info.name;
  GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuDeviceGet(&device_, config.device), "cuDeviceGet"));
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain"));
  GPUOS_RETURN_IF_ERROR(MakeCurrent());
  GPUOS_RETURN_IF_ERROR(LoadImage(config));
  int per_sm = 0;
  GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuOccupancyMaxActiveBlocksPerMultiprocessor(
                                 &per_sm, queue_worker_, device::kWorkerThreads, 0),
                             "cuOccupancyMaxActiveBlocksPerMultiprocessor"));
  const unsigned int fit = static_cast<unsigned int>(std::max(1, per_sm * info.multiprocessors));
  // One block per SM by default: more blocks per SM only add idle pollers
  // (measured slower on every dispatch benchmark, docs/runtime.md).
  const unsigned int one_per_sm = static_cast<unsigned int>(std::max(1, info.multiprocessors));
  multiprocessors_ = one_per_sm;
  blocks_ = std::min(config.blocks == 0 ? one_per_sm : config.blocks, fit);
  blocks_hint_ = blocks_;
  GPUOS_RETURN_IF_ERROR(AllocateQueue(config));
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuStreamCreate(&copy_stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  return Status::Ok();
}

Status RuntimeImpl::LoadImage(const RuntimeConfig& config) {
  repository_path_ = config.repository_path;
  from_repository_ = config.operators.empty() && config.pack_paths.empty();
  quiesce_timeout_ = config.quiesce_timeout;
  std::vector<registry::OperatorSpec> specs = config.operators;
  std::map<std::string, registry::SemVer> active;
  for (const std::string& path : config.pack_paths) {
    auto packs = registry::LoadPackPath(path);
    if (!packs.ok()) return packs.status().WithContext("RuntimeConfig::pack_paths");
    for (auto& pack : *packs) {
      for (auto& op : pack.operators) specs.push_back(std::move(op));
    }
  }
  if (!specs.empty()) {
    // Operators given directly: each one's newest version is active.
  } else if (!repository_path_.empty()) {
    registry::RepositoryOptions options;
    options.path = repository_path_;
    GPUOS_ASSIGN_OR_RETURN(auto repository, registry::Repository::Open(options));
    GPUOS_ASSIGN_OR_RETURN(auto set, repository->CurrentOperatorSet());
    for (auto& op : set) {
      active[op.name] = op.current.version;
      specs.push_back(std::move(op.current));
      if (op.previous) specs.push_back(std::move(*op.previous));
    }
  } else {
    return InvalidArgument(
        "RuntimeConfig names no operators: set repository_path (an operator repository) or "
        "operators");
  }
  arch_ = config.arch;
  if (arch_.empty()) {
    GPUOS_ASSIGN_OR_RETURN(arch_, DetectGpuArch(config.device));
  }
  GPUOS_ASSIGN_OR_RETURN(StagedImage staged, BuildStaged(std::move(specs), std::move(active)));
  auto set = std::make_unique<std::vector<registry::OperatorSpec>>(std::move(staged.specs));
  std::vector<const registry::OperatorSpec*> pointers;
  for (const auto& spec : *set) pointers.push_back(&spec);
  GPUOS_RETURN_IF_ERROR(table_.Load(staged.image, pointers, staged.active));
  image_ = std::move(staged.image);
  spec_sets_.push_back(std::move(set));
  alias_upload_ = table_.AliasTable();
  GPUOS_RETURN_IF_ERROR(LoadModule(image_, table_.AliasTable(), &module_, &queue_worker_));
  NoteWorkerRegisters();
  return Status::Ok();
}

Expected<StagedImage> RuntimeImpl::BuildStaged(
    std::vector<registry::OperatorSpec> specs,
    std::map<std::string, registry::SemVer> active) const {
  std::unique_ptr<registry::Repository> repository;
  if (!repository_path_.empty()) {
    registry::RepositoryOptions options;
    options.path = repository_path_;
    GPUOS_ASSIGN_OR_RETURN(repository, registry::Repository::Open(options));
  }
  registry::JitOptions options;
  options.arch = arch_;
  options.progress = registry::ProgressMode::kQuiet;
  registry::InMemoryBuildCache memory_cache;
  registry::BuildCache* cache =
      repository ? static_cast<registry::BuildCache*>(repository.get()) : &memory_cache;
  StagedImage staged;
  GPUOS_ASSIGN_OR_RETURN(staged.image, registry::JitBuilder(cache, options).Build(specs));
  staged.specs = std::move(specs);
  staged.active = std::move(active);
  return staged;
}

Status RuntimeImpl::LoadModule(const registry::KernelImage& image,
                               const std::vector<unsigned int>& aliases, CUmodule* module,
                               CUfunction* worker,
                               std::vector<std::pair<std::string, double>>* steps) {
  using StepClock = std::chrono::steady_clock;
  const StepClock::time_point start = StepClock::now();
  CUmodule loaded = nullptr;
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuModuleLoadData(&loaded, image.cubin.data()), "cuModuleLoadData"));
  const StepClock::time_point load_done = StepClock::now();
  auto checked = [&]() -> Status {
    CUdeviceptr address = 0;
    std::size_t bytes = 0;
    GPUOS_RETURN_IF_ERROR(
        Cuda(driver_->cuModuleGetGlobal(&address, &bytes, loaded, registry::kImageAbiVersionSymbol),
             "cuModuleGetGlobal(gpuos_image_abi_version)"));
    unsigned int version = 0;
    // The copy stream, not the legacy one: that would wait for other
    // streams' work (this runs inside an epoch switch's service gap). The
    // alias table is written in the same round trip: an image with another
    // ABI is unloaded below, whatever its table holds. `version` is pageable
    // memory, so the copy into it has finished when the call returns, even
    // on an early return.
    GPUOS_RETURN_IF_ERROR(
        Cuda(driver_->cuMemcpyDtoHAsync(&version, address, sizeof(version), copy_stream_),
             "reading the image's ABI version"));
    const Status alias_table = [&]() -> Status {
      GPUOS_RETURN_IF_ERROR(
          Cuda(driver_->cuModuleGetGlobal(&address, &bytes, loaded, registry::kAliasTableSymbol),
               "cuModuleGetGlobal(gpuos_alias_table)"));
      return Cuda(driver_->cuMemcpyHtoDAsync(address, aliases.data(),
                                             std::min(bytes, aliases.size() * sizeof(unsigned int)),
                                             copy_stream_),
                  "writing the alias table");
    }();
    GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuStreamSynchronize(copy_stream_),
                               "reading the image's ABI version and writing its alias table"));
    // The ABI first: an image of another ABI may lack the alias table.
    if (version != device::kRuntimeAbiVersion) {
      return AbiMismatch("kernel image built for runtime ABI " + std::to_string(version) +
                         ", this gpuos uses " + std::to_string(device::kRuntimeAbiVersion) +
                         "; rebuild it (gpuos-registry build)");
    }
    GPUOS_RETURN_IF_ERROR(alias_table);
    GPUOS_RETURN_IF_ERROR(
        Cuda(driver_->cuModuleGetFunction(worker, loaded, registry::kQueueWorkerKernelSymbol),
             "cuModuleGetFunction(gpuos_queue_worker)"));
    // The tile launchers (runtime_launch.cpp) loaded now, while no kernel
    // runs: under lazy loading (CUDA_MODULE_LOADING, LAZY by default) a
    // function is loaded at its first use, which waited for the context's
    // work: a first LaunchTiles behind a held stream never returned.
    for (unsigned int size : device::kLaunchTableSizes) {
      const std::string symbol = registry::TilesWorkerKernelSymbol(size);
      CUfunction launcher = nullptr;
      GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuModuleGetFunction(&launcher, loaded, symbol.c_str()),
                                 "cuModuleGetFunction(" + symbol + ")"));
      GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuFuncLoad(launcher), "cuFuncLoad(" + symbol + ")"));
    }
    return ReserveWorkerStack(*worker);
  }();
  if (!checked.ok()) {
    (void)driver_->cuModuleUnload(loaded);
    return checked;
  }
  if (steps != nullptr) {
    auto us = [](StepClock::duration d) {
      return std::chrono::duration<double, std::micro>(d).count();
    };
    steps->emplace_back("module_load", us(load_done - start));
    steps->emplace_back("module_checks", us(StepClock::now() - load_done));
  }
  *module = loaded;
  return Status::Ok();
}

Status RuntimeImpl::AllocateQueue(const RuntimeConfig& config) {
  const std::uint32_t subs = config.submission_capacity;
  const std::uint32_t tasks = config.task_capacity;
  const std::uint32_t tensors = config.tensor_capacity;
  const std::uint32_t edges = config.successor_capacity;
  // Every task is pushed at most min(tiles, blocks) times while in flight.
  const std::uint64_t ready64 = static_cast<std::uint64_t>(tasks) * 2 + blocks_;
  const std::uint32_t ready =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(ready64, 1u << 30));

  Layout host;
  // The control block, then the payload cache's filled words (queue.h).
  const std::size_t control_at =
      host.Add(sizeof(device::QueueControl) + device::kCacheFilledWords * sizeof(std::uint64_t));
  const std::size_t subs_at = host.Add(subs * sizeof(device::SubmissionSlot));
  const std::size_t done_at = host.Add(subs * sizeof(std::uint64_t));
  const std::size_t tasks_at = host.Add(std::size_t{tasks} * sizeof(device::TaskDesc));
  const std::size_t tensors_at = host.Add(std::size_t{tensors} * sizeof(device::TensorDesc));
  const std::size_t edges_at = host.Add(std::size_t{edges} * sizeof(std::uint32_t));
  const std::size_t errors_at = host.Add(subs * sizeof(device::SubmissionError));
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuMemHostAlloc(&host_block_, host.size(),
                                   CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
           "cuMemHostAlloc(queue, " + std::to_string(host.size()) + " bytes)"));
  std::memset(host_block_, 0, host.size());
  CUdeviceptr host_device = 0;
  GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuMemHostGetDevicePointer(&host_device, host_block_, 0),
                             "cuMemHostGetDevicePointer"));
  auto* base = static_cast<unsigned char*>(host_block_);
  control_ = reinterpret_cast<device::QueueControl*>(base + control_at);
  cache_filled_ = reinterpret_cast<const std::uint64_t*>(control_ + 1);
  submission_slots_ = reinterpret_cast<device::SubmissionSlot*>(base + subs_at);
  done_ = reinterpret_cast<std::uint64_t*>(base + done_at);
  staged_tasks_ = reinterpret_cast<device::TaskDesc*>(base + tasks_at);
  staged_tensors_ = reinterpret_cast<device::TensorDesc*>(base + tensors_at);
  staged_successors_ = reinterpret_cast<std::uint32_t*>(base + edges_at);

  Layout dev;
  const std::size_t d_tasks = dev.Add(std::size_t{tasks} * sizeof(device::TaskDesc));
  const std::size_t d_tensors = dev.Add(std::size_t{tensors} * sizeof(device::TensorDesc));
  const std::size_t d_edges = dev.Add(std::size_t{edges} * sizeof(std::uint32_t));
  const std::size_t d_nodes = dev.Add(std::size_t{tasks} * sizeof(device::NodeState));
  const std::size_t d_ready = dev.Add(std::size_t{ready} * sizeof(std::uint64_t));
  const std::size_t d_state = dev.Add(sizeof(device::QueueDeviceState));
  const std::size_t d_remaining = dev.Add(subs * sizeof(std::uint32_t));
  const std::size_t d_sequences = dev.Add(subs * sizeof(std::uint64_t));
  // Errors and diagnostics (runtime_diagnostics.h). An epoch switch never
  // grows the grid beyond blocks_, so blocks_ entries per block suffice.
  const std::size_t d_slot_status = dev.Add(subs * sizeof(device::WorkerStatus));
  const std::size_t d_activity = dev.Add(blocks_ * sizeof(device::BlockActivity));
  const std::size_t d_trace_counts = dev.Add(blocks_ * sizeof(std::uint64_t));
  const unsigned int trace_per_block =
      config.trace_capacity == 0 ? 0 : std::max(1u, config.trace_capacity / blocks_);
  const std::size_t d_trace =
      dev.Add(std::size_t{blocks_} * trace_per_block * sizeof(device::TraceRecord));
  // Lone tiled tasks run directly (queue.h, DirectSlot): a record and an
  // area per ring slot, then the payload cache's areas.
  const unsigned int cache_entries = config.payload_cache_entries;
  static_assert(sizeof(device::DirectSlot) == 16, "DirectRegionBytes counts 16 bytes a slot");
  const std::size_t d_direct =
      dev.Add(static_cast<std::size_t>(device::DirectRegionBytes(subs, cache_entries)));
  GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuMemAlloc(&device_block_, dev.size()),
                             "cuMemAlloc(queue, " + std::to_string(dev.size()) + " bytes)"));
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuMemsetD8(device_block_, 0, dev.size()), "cuMemsetD8(queue)"));

  device::QueueParams& p = params_;
  p.control = host_device + control_at;
  p.submissions = host_device + subs_at;
  p.done = host_device + done_at;
  p.staged_tasks = host_device + tasks_at;
  p.staged_tensors = host_device + tensors_at;
  p.staged_successors = host_device + edges_at;
  p.tasks = device_block_ + d_tasks;
  p.tensors = device_block_ + d_tensors;
  p.successors = device_block_ + d_edges;
  p.nodes = device_block_ + d_nodes;
  p.ready = device_block_ + d_ready;
  p.state = device_block_ + d_state;
  p.remaining = device_block_ + d_remaining;
  p.sequences = device_block_ + d_sequences;
  p.slot_status = device_block_ + d_slot_status;
  p.slot_errors = host_device + errors_at;
  p.activity = device_block_ + d_activity;
  p.trace = trace_per_block == 0 ? 0 : device_block_ + d_trace;
  p.trace_counts = device_block_ + d_trace_counts;
  p.direct = device_block_ + d_direct;
  p.payload_cache_entries = cache_entries;
  payload_cache_ = PayloadCache(cache_entries);
  p.diagnostic_blocks = blocks_;
  p.trace_per_block = trace_per_block;
  diagnostics_.slot_errors = reinterpret_cast<device::SubmissionError*>(base + errors_at);
  diagnostics_.activity = p.activity;
  diagnostics_.trace = p.trace;
  diagnostics_.trace_counts = p.trace_counts;
  diagnostics_.blocks = blocks_;
  diagnostics_.trace_per_block = trace_per_block;
  diagnostics_.device_ordinal = config.device;
  diagnostics_.task_time_limit = std::max(std::chrono::milliseconds(0), config.task_time_limit);
  diagnostics_.watchdog_log = config.watchdog_log;
  idle_park_ = std::max(std::chrono::microseconds(0), config.idle_park);
  p.idle_park_ns = static_cast<unsigned long long>(idle_park_.count()) * 1000;
  p.task_capacity = tasks;
  p.tensor_capacity = tensors;
  p.successor_capacity = edges;
  p.submission_capacity = subs;
  p.ready_capacity = ready;
  p.pollers = std::min(pollers_, blocks_);
  p.completion_scope =
      config.device_memory_results ? device::kCompletionScopeGpu : device::kCompletionScopeSystem;
  task_arena_ = RingArena(tasks);
  tensor_arena_ = RingArena(tensors);
  successor_arena_ = RingArena(edges);
  return Status::Ok();
}

Expected<DeviceBuffer> RuntimeImpl::Allocate(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return Unavailable("the runtime was shut down");
  GPUOS_RETURN_IF_ERROR(MakeCurrent());
  CUdeviceptr address = 0;
  GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuMemAlloc(&address, std::max<std::size_t>(bytes, 1)),
                             "cuMemAlloc(" + std::to_string(bytes) + " bytes)"));
  allocations_.push_back(address);
  return DeviceBuffer{address, bytes};
}

void RuntimeImpl::Free(const DeviceBuffer& buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_.load()) return;    // Shutdown() freed every allocation
  if (!MakeCurrent().ok()) return;  // nothing to free into without the context
  auto it = std::find(allocations_.begin(), allocations_.end(), buffer.address);
  if (it == allocations_.end()) return;
  allocations_.erase(it);
  deferred_frees_.push_back(buffer.address);
  if (generation_ == 0 || GridIdle()) RunDeferredFrees();
}

void RuntimeImpl::RunDeferredFrees() {
  for (CUdeviceptr address : deferred_frees_) (void)driver_->cuMemFree(address);
  deferred_frees_.clear();
  RecycleTensorMemory(/*worker_parked=*/true);  // runtime_tensors.cpp
}

Status RuntimeImpl::Copy(bool to_device, std::uint64_t address, void* host, std::size_t bytes) {
  if (shut_down_) return Unavailable("the runtime was shut down");
  GPUOS_RETURN_IF_ERROR(MakeCurrent());
  if (bytes == 0) return Status::Ok();
  const CUresult result = to_device
                              ? driver_->cuMemcpyHtoDAsync(address, host, bytes, copy_stream_)
                              : driver_->cuMemcpyDtoHAsync(host, address, bytes, copy_stream_);
  GPUOS_RETURN_IF_ERROR(Cuda(result, to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync"));
  return Cuda(driver_->cuStreamSynchronize(copy_stream_), "waiting for a copy");
}

Expected<OperatorRef> RuntimeImpl::Resolve(const std::string& op, DType dtype,
                                           std::optional<DType> out_dtype) const {
  Expected<OperatorRef> found = [&] {
    std::lock_guard<std::mutex> lock(table_mutex_);
    return table_.Resolve(op, dtype, out_dtype);
  }();
  if (found.ok() || repository_path_.empty() || !from_repository_ || shut_down_) return found;
  // An operator the active image lacks but the repository has: stage an
  // image with it (an epoch switch, docs/live-update.md), then resolve.
  registry::RepositoryOptions options;
  options.path = repository_path_;
  options.read_only = true;
  auto repository = registry::Repository::Open(options);
  if (!repository.ok() || !(*repository)->GetOperator(op).ok()) return found;
  repository->reset();
  auto refreshed = const_cast<RuntimeImpl*>(this)->Refresh();
  if (!refreshed.ok()) {
    return refreshed.status().WithContext("operator '" + op +
                                          "' is in the repository but not in the active image");
  }
  std::lock_guard<std::mutex> lock(table_mutex_);
  return table_.Resolve(op, dtype, out_dtype);
}

const OperatorRef* RuntimeImpl::ByLogical(std::uint32_t logical) const {
  return table_.ByLogical(logical);
}

// Runtime: forwarding.

Runtime::Runtime(std::unique_ptr<RuntimeImpl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

Expected<std::unique_ptr<Runtime>> Runtime::Open(const RuntimeConfig& config) {
  auto impl = std::make_unique<RuntimeImpl>();
  GPUOS_RETURN_IF_ERROR(impl->Init(config));
  GPUOS_RETURN_IF_ERROR(impl->StartControlServer(config));
  return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

Expected<OperatorRef> Runtime::Resolve(const std::string& op, DType dtype,
                                       std::optional<DType> out_dtype) const {
  return impl_->Resolve(op, dtype, out_dtype);
}
Expected<DeviceBuffer> Runtime::Allocate(std::size_t bytes) { return impl_->Allocate(bytes); }
void Runtime::Free(const DeviceBuffer& buffer) { impl_->Free(buffer); }
Status Runtime::CopyToDevice(std::uint64_t address, const void* source, std::size_t bytes) {
  return impl_->Copy(true, address, const_cast<void*>(source), bytes);
}
Status Runtime::CopyToHost(void* destination, std::uint64_t address, std::size_t bytes) {
  return impl_->Copy(false, address, destination, bytes);
}
Expected<Future> Runtime::Submit(const TaskGraph& graph) { return impl_->Submit(graph); }
Status Runtime::Synchronize(std::chrono::microseconds timeout) {
  return impl_->Synchronize(timeout);
}
Status Runtime::WaitUntilParked(std::chrono::microseconds timeout) {
  return impl_->WaitUntilParked(timeout);
}
Status Runtime::KeepWarm() { return impl_->KeepWarm(); }
RuntimeStats Runtime::stats() const { return impl_->Stats(); }
const RuntimePluginReport& Runtime::plugins() const { return impl_->plugin_report(); }
const registry::KernelImage& Runtime::image() const { return impl_->image(); }
Expected<DeviceBuffer> Runtime::ImageGlobal(const std::string& symbol) const {
  return impl_->ImageGlobal(symbol);
}

Expected<DeviceBuffer> RuntimeImpl::ImageGlobal(const std::string& symbol) const {
  std::lock_guard<std::mutex> lock(mutex_);  // module_ changes at an epoch switch
  if (module_ == nullptr) return Unavailable("the runtime is shut down");
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  if (driver_->cuModuleGetGlobal(&address, &bytes, module_, symbol.c_str()) != CUDA_SUCCESS) {
    return NotFound("the kernel image has no device variable '" + symbol + "'");
  }
  DeviceBuffer buffer;
  buffer.address = address;
  buffer.bytes = bytes;
  return buffer;
}
std::string Runtime::device_name() const { return impl_->device_name(); }
CUctx_st* Runtime::cuda_context() const { return impl_->cuda_context(); }
unsigned int Runtime::worker_blocks() const { return impl_->blocks(); }

Status RuntimeImpl::ReserveWorkerStack(CUfunction worker) {
  int local_bytes = 0;
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuFuncGetAttribute(&local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, worker),
           "cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, gpuos_queue_worker)"));
  std::size_t stack_bytes = 0;
  GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuCtxGetLimit(&stack_bytes, CU_LIMIT_STACK_SIZE),
                             "cuCtxGetLimit(CU_LIMIT_STACK_SIZE)"));
  if (local_bytes <= 0 || static_cast<std::size_t>(local_bytes) <= stack_bytes) {
    return Status::Ok();
  }
  return Cuda(driver_->cuCtxSetLimit(CU_LIMIT_STACK_SIZE, static_cast<std::size_t>(local_bytes)),
              "cuCtxSetLimit(CU_LIMIT_STACK_SIZE, " + std::to_string(local_bytes) +
                  ": the worker's local memory a thread)");
}

void RuntimeImpl::NoteWorkerRegisters() {
  int registers = 0;
  worker_registers_ = driver_->cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS,
                                                  queue_worker_) == CUDA_SUCCESS
                          ? static_cast<unsigned int>(registers)
                          : 0u;
  int local_bytes = 0;
  worker_local_bytes_ =
      driver_->cuFuncGetAttribute(&local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                                  queue_worker_) == CUDA_SUCCESS
          ? static_cast<unsigned int>(std::max(local_bytes, 0))
          : 0u;
}
Status Runtime::Shutdown() {
  impl_->StopControlServer();
  return impl_->Shutdown();
}

Status Future::Wait(std::chrono::microseconds timeout) const {
  if (sequence_ == 0) return Status::Ok();
  return runtime_->Wait(*this, timeout);
}
bool Future::Ready() const { return sequence_ == 0 || runtime_->Done(sequence_); }

}  // namespace gpuos::runtime
