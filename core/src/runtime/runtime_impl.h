// The runtime's internals: device resources (runtime_device.cpp), the queue
// protocol on the host side (runtime_queue.cpp). docs/runtime.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "epoch_switch.h"
#include "gpuos/cuda_driver.h"
#include "gpuos/device/queue.h"
#include "gpuos/registry/kernel_image.h"
#include "gpuos/runtime/runtime.h"
#include "operator_table.h"
#include "payload_cache.h"
#include "runtime_diagnostics.h"
#include "runtime_plugins.h"

namespace gpuos::control {
class ControlServer;
class ControlHandler;
}  // namespace gpuos::control

namespace gpuos::runtime {

// FIFO allocator over [0, capacity) entries: allocations are released in the
// order they were made (submissions are reclaimed in order).
class RingArena {
 public:
  explicit RingArena(std::uint32_t capacity = 0) : capacity_(capacity) {}
  // The first entry of `count` free contiguous entries, or -1 when full.
  long long Allocate(std::uint32_t count);
  void ReleaseOldest();
  void ReleaseNewest();  // undoes the last Allocate
  std::uint32_t capacity() const { return capacity_; }

 private:
  std::uint32_t capacity_;
  std::deque<std::pair<std::uint32_t, std::uint32_t>> live_;  // [begin, end), oldest first
};

struct InFlight {
  std::uint64_t sequence = 0;
  bool has_tasks = false, has_tensors = false, has_successors = false;
  std::uint32_t tasks = 0;
  std::uint32_t ready_entries = 0;
  // The graph's tensor storages, kept alive until the submission is done.
  std::vector<std::shared_ptr<Storage>> storages;
};

class RuntimeImpl final : public EpochDevice {
 public:
  ~RuntimeImpl() override;

  Status Init(const RuntimeConfig& config);
  Status MakeCurrent() const;
  Status Cuda(CUresult result, const std::string& what) const {
    return CudaStatus(*driver_, result, what);
  }

  // runtime_queue.cpp
  Expected<Future> Submit(const TaskGraph& graph, const SubmitOptions& options = {});
  // runtime_launch.cpp (Runtime::LaunchTiles, Activity, ParkNow).
  Status LaunchTiles(const TaskGraph& graph, CUstream stream, std::uint64_t status_address);
  WorkerActivity Activity() const;
  Status ParkNow(std::chrono::microseconds timeout);
  Status Wait(const Future& future, std::chrono::microseconds timeout);
  // Waits until `sequence` finished (its outcome: SubmissionResult), with
  // the watchdog. `task_count` is for the timeout's message (0: unknown).
  Status WaitFinished(std::uint64_t sequence, std::uint32_t task_count,
                      std::chrono::microseconds timeout);
  bool Done(std::uint64_t sequence) const;
  Status Synchronize(std::chrono::microseconds timeout);
  Status WaitUntilParked(std::chrono::microseconds timeout);
  Status KeepWarm();
  RuntimeStats Stats() const;
  Status Shutdown();

  // runtime_device.cpp
  Expected<DeviceBuffer> Allocate(std::size_t bytes);
  void Free(const DeviceBuffer& buffer);
  Status Copy(bool to_device, std::uint64_t address, void* host, std::size_t bytes);
  Expected<OperatorRef> Resolve(const std::string& op, DType dtype,
                                std::optional<DType> out_dtype) const;
  const OperatorRef* ByLogical(std::uint32_t logical) const;
  // REQUIRES mutex_. The counter of stats_.tasks_per_operator that counts
  // tasks of logical id `logical` ("noop" for 0 and ids never given out).
  std::uint64_t& TasksOfLogical(std::uint32_t logical);
  Expected<DeviceBuffer> ImageGlobal(const std::string& symbol) const;

  // runtime_streams.cpp: ordering against other CUDA streams.
  struct Gate {
    std::uint64_t address = 0;  // device address of the gate word; 0 = none
    std::uint64_t value = 0;
  };
  // REQUIRES mutex_. Checks options.wait_for (support, legacy stream; not
  // with open_later) and allocates the gate words on first use.
  Status CheckWaitFor(const SubmitOptions& options);
  // REQUIRES mutex_, and ring slot `slot` free. Enqueues the write that
  // opens submission `sequence`'s gate on options.wait_for; with open_later,
  // the slot's own gate (closed: it holds an earlier sequence of the slot).
  Expected<Gate> EnqueueGate(const SubmitOptions& options, std::uint64_t sequence,
                             std::uint32_t slot);
  Status StreamWaitFor(CUstream stream, const Future& future);
  // OpenGate, or DropGated when `drop`.
  Status OpenGate(const Future& future, bool drop);

  // runtime_tensors.cpp: tensors from the runtime (a DeviceArena).
  Expected<std::shared_ptr<DeviceArena>> TensorArena();
  int DeviceOrdinal() const;  // of device_
  Expected<Tensor> Wrap(std::uint64_t address, DType dtype, const Dims& sizes, const Dims& strides,
                        std::function<void()> release, std::int64_t storage_offset);
  Status CopyTensor(bool to_device, const Tensor& tensor, void* host, std::size_t bytes);
  Expected<std::size_t> TrimTensorMemory();
  // REQUIRES mutex_. Before submission `sequence` is published: recycles
  // the tensor frees that finished submissions made safe, then tags later
  // frees with `sequence`.
  void NoteTensorUse(std::uint64_t sequence);
  // REQUIRES mutex_. Makes arena frees reusable once every submission that
  // might use them is done; with `worker_parked` and nothing in flight, the
  // arena may free immediately again.
  void RecycleTensorMemory(bool worker_parked);

  // runtime_epoch.cpp: live updates (docs/live-update.md).
  Status Activate(const std::string& op, const registry::SemVer& version);
  Expected<UpdateOutcome> Update(const std::vector<LiveOperator>& operators);
  Expected<UpdateOutcome> Refresh();
  std::vector<ActiveOperator> ActiveOperators() const;
  // EpochDevice. Quiesce takes mutex_ and Resume releases it (same thread).
  Status Prepare(const StagedImage& staged) override;
  Status Quiesce(std::chrono::microseconds timeout) override;
  Status Load(const StagedImage& staged) override;
  void Commit(StagedImage staged) override;
  void Resume() override;

  // runtime_control.cpp
  Status StartControlServer(const RuntimeConfig& config);
  void StopControlServer();
  std::string control_socket_path() const;
  const std::string& repository_path() const { return repository_path_; }
  // The active image's build-cache key (a copy: an epoch switch replaces it).
  std::string ImageKey() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return image_.key;
  }
  const std::string& arch() const { return arch_; }

  // runtime_trace.cpp
  Expected<std::vector<TraceEvent>> TraceEvents() const;
  Status ExportChromeTrace(const std::string& path) const;

  const registry::KernelImage& image() const { return image_; }
  // Set by Init before anything else; immutable afterwards.
  const RuntimePluginReport& plugin_report() const { return plugins_->report(); }
  const std::string& device_name() const { return device_name_; }
  CUcontext cuda_context() const { return context_; }  // set by Init, then fixed
  unsigned int blocks() const { return blocks_hint_.load(std::memory_order_relaxed); }

 private:
  Status LoadImage(const RuntimeConfig& config);
  // Records queue_worker_'s register count and local memory (worker_registers_,
  // worker_local_bytes_).
  void NoteWorkerRegisters();
  // Raises the context's per-thread stack (CU_LIMIT_STACK_SIZE) to the
  // worker's local memory where that is larger. Otherwise the driver grows
  // it at the worker's first launch, which waits for every stream of the
  // context to go idle: a Submit ordered after a stream held back by the
  // host (or by a wait on gpuos itself) would never return. Called where an
  // image is loaded, when no worker runs (a module load waits for every
  // kernel to exit: ../shared/design/device-facts.md). The raise itself
  // waits for the context's streams: at Open, and, for an image that needs
  // more than the limit, inside an epoch switch's gap (where the relaunch's
  // own growth waited before).
  Status ReserveWorkerStack(CUfunction worker);
  // Builds an image of `specs` for this device (the repository, when there
  // is one, is the build cache). Takes no lock.
  Expected<StagedImage> BuildStaged(std::vector<registry::OperatorSpec> specs,
                                    std::map<std::string, registry::SemVer> active) const;
  // Loads `image` into a module and checks its ABI; writes `aliases` into its
  // alias table. Appends the time of the load and of the checks to `steps`
  // when given. REQUIRES: no grid running.
  Status LoadModule(const registry::KernelImage& image, const std::vector<unsigned int>& aliases,
                    CUmodule* module, CUfunction* worker,
                    std::vector<std::pair<std::string, double>>* steps = nullptr);
  // REQUIRES mutex_. Writes the active table into the active module's alias
  // table (live: a copy on the copy stream).
  Status WriteAliasTable();
  // REQUIRES: mutex_, no grid running. All retired images; the oldest; the
  // oldest when kRetiredImagesKept are kept (true when it unloaded one).
  void UnloadRetiredModules();
  void UnloadOldestRetiredModule();
  // REQUIRES: mutex_ (or shutdown), no grid running. cuModuleUnload, after
  // the context's work where tile launches came from `module`.
  void UnloadModule(CUmodule module);
  // REQUIRES mutex_. The tile launchers and operator table of module_.
  Status LoadTileLaunchers();
  bool UnloadOldestRetiredModuleIfFull();
  // The staged image from Prepare (tables) and Load (module) until Commit.
  struct Pending {
    CUmodule module = nullptr;
    CUfunction worker = nullptr;
    unsigned int blocks = 0;
    OperatorTable table;
    std::unique_ptr<std::vector<registry::OperatorSpec>> specs;
  };
  Status AllocateQueue(const RuntimeConfig& config);
  // REQUIRES mutex_. Launches a grid when none runs (or the last parked).
  Status EnsureWorker();
  // REQUIRES mutex_. Releases the arenas of finished submissions, in order.
  void Reclaim();
  // REQUIRES mutex_ and no grid running.
  void RunDeferredFrees();
  // REQUIRES mutex_, a grid launched and nothing in flight (runtime_epoch.cpp,
  // for Quiesce and ParkNow): asks the grid's idle blocks to exit now rather
  // than after idle_park and waits until `deadline` for the grid to end.
  // Unavailable when it did not (it keeps serving; `timeout` names the wait).
  Status ParkIdleGrid(std::chrono::steady_clock::time_point deadline,
                      std::chrono::microseconds timeout);
  bool GridIdle() const;  // the worker stream has nothing running
  // REQUIRES mutex_. A grid was launched and has not begun to park (its
  // generation is above the last one that parked): no driver call.
  bool GridRunning() const;
  // runtime_errors.cpp. The outcome of finished submission `sequence`: OK
  // or the first error of one of its tasks.
  Status SubmissionResult(std::uint64_t sequence) const;
  // REQUIRES mutex_; `sequence` finished and its arenas not yet released.
  // Keeps its error (if any) for SubmissionResult once its slot is reused.
  void KeepFailure(std::uint64_t sequence);
  // REQUIRES: the submission's arenas not yet released.
  Status DescribeFailure(std::uint64_t sequence, const device::WorkerStatus& status) const;
  // For a BlockActivity / TraceRecord operator code run by grid
  // `generation` (0: the newest): the name ("add f32") and the version
  // ("1.0.0", "" when unknown).
  std::pair<std::string, std::string> OperatorNames(std::uint32_t op,
                                                    std::uint64_t generation = 0) const;
  // runtime_watchdog.cpp. While a Wait waits: the tasks running longer than
  // the limit (empty when none or the watchdog is off); at most one copy
  // from the device per WatchdogInterval.
  std::vector<std::string> TasksOverLimit();
  // "task 3 of submission 12 (task id 40)".
  std::string NameTask(std::uint32_t task_id) const;

  std::uint64_t LoadDone(std::uint32_t slot) const;
  // REQUIRES mutex_. FailedPrecondition naming the first logical operator
  // of `graph` that no served version resolves (Submit, LaunchTiles).
  Status CheckServed(const TaskGraph& graph) const;
  // A graph's task as Submit stages it: bound to its operator's slot.
  device::TaskDesc BoundTask(const device::TaskDesc& graph_task) const;

  // runtime_plugins.cpp. REQUIRES mutex_. The consulted scheduler's order
  // of `graph`'s roots as StagingOrder (empty: the graph's order).
  Expected<std::vector<std::uint32_t>> StagingOrderOf(const TaskGraph& graph);
  // The scheduler is called under mutex_ (one thread at a time).
  std::unique_ptr<RuntimePlugins> plugins_;

  const CudaDriverApi* driver_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction queue_worker_ = nullptr;
  // Of tiles_worker_module_ (looked up at the first LaunchTiles after
  // module_ changes, LoadTileLaunchers; guarded by mutex_): its
  // gpuos_tiles_worker_<N> per size of device::kLaunchTableSizes, and its
  // operator table's function addresses.
  CUfunction tile_launchers_[std::size(device::kLaunchTableSizes)] = {};
  std::vector<std::uint64_t> launch_functions_;
  CUmodule tiles_worker_module_ = nullptr;
  // Modules that tile launches came from (UnloadModule waits for them).
  std::vector<CUmodule> tile_launch_modules_;
  // CU_FUNC_ATTRIBUTE_NUM_REGS of queue_worker_, noted when it is loaded
  // (NoteWorkerRegisters; Stats() makes no driver call: it is valid after
  // Shutdown too).
  unsigned int worker_registers_ = 0;
  unsigned int worker_local_bytes_ = 0;  // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, noted with it
  CUstream stream_ = nullptr;            // the worker's, non-blocking
  CUstream copy_stream_ = nullptr;       // copies, non-blocking
  std::string device_name_;
  unsigned int blocks_ = 0;
  unsigned int pollers_ = 2;  // RuntimeConfig::pollers (the grid gets at most blocks_)
  std::chrono::microseconds idle_park_{0};  // RuntimeConfig::idle_park, at least 0
  unsigned int multiprocessors_ = 1;
  std::atomic<unsigned int> blocks_hint_{0};  // blocks_, readable without the mutex

  registry::KernelImage image_;
  std::string arch_;
  std::string repository_path_;  // "" = none
  // The operators come from the repository (not RuntimeConfig::operators or
  // pack_paths): only then does a missing operator trigger staging.
  bool from_repository_ = false;
  // Every spec set ever loaded, the active one last: OperatorRef::spec
  // pointers handed out stay valid across epochs.
  std::vector<std::unique_ptr<std::vector<registry::OperatorSpec>>> spec_sets_;
  // Written with mutex_ and table_mutex_ held; read with either.
  OperatorTable table_;
  mutable std::mutex table_mutex_;
  std::unique_ptr<Pending> pending_;
  // The last epoch switch's gap, step by step (UpdateOutcome::gap_detail_us);
  // written between Quiesce and Resume.
  std::vector<std::pair<std::string, double>> gap_detail_us_;
  // Images replaced by an epoch switch, oldest first: one is unloaded per
  // relaunch after the worker parked by itself (EnsureWorker), all by
  // WaitUntilParked and at shutdown, and the oldest by a quiesce that finds
  // kRetiredImagesKept of them.
  std::vector<CUmodule> retired_modules_;
  static constexpr std::size_t kRetiredImagesKept = 4;
  // Set by Commit, cleared by the next EnsureWorker (guarded by mutex_).
  bool relaunch_after_switch_ = false;
  std::vector<unsigned int> alias_upload_;  // source of the last alias-table copy
  std::unique_lock<std::mutex> quiesce_lock_;
  std::chrono::microseconds quiesce_timeout_{10000000};
  std::mutex update_mutex_;  // one live update at a time
  std::unique_ptr<control::ControlHandler> control_handler_;
  std::unique_ptr<control::ControlServer> control_server_;  // guarded by control_mutex_
  mutable std::mutex control_mutex_;

  // Mapped host memory and device memory of the queue (queue.h).
  void* host_block_ = nullptr;
  CUdeviceptr device_block_ = 0;
  device::QueueControl* control_ = nullptr;
  device::SubmissionSlot* submission_slots_ = nullptr;
  std::uint64_t* done_ = nullptr;
  // Per payload cache entry, the fill the device confirmed (queue.h,
  // kCacheFilledWords), and the host's bookkeeping of the entries.
  const std::uint64_t* cache_filled_ = nullptr;
  PayloadCache payload_cache_;
  std::string cache_key_;  // Submit's scratch for PayloadCache::Choose
  device::TaskDesc* staged_tasks_ = nullptr;
  device::TensorDesc* staged_tensors_ = nullptr;
  std::uint32_t* staged_successors_ = nullptr;
  device::QueueParams params_ = {};
  // The staged indices of the graph's roots, in staging order (Submit's
  // scratch, kept to spare an allocation per submission).
  std::vector<std::uint32_t> roots_;

  mutable std::mutex mutex_;
  // Set once by Shutdown(); read without the mutex by Wait/Ready/Copy.
  std::atomic<bool> shut_down_{false};
  // Shutdown() gave up on a worker that would not stop: its memory stays.
  bool worker_abandoned_ = false;
  RingArena task_arena_, tensor_arena_, successor_arena_;
  std::uint32_t ready_reserved_ = 0;
  std::deque<InFlight> in_flight_;
  std::uint64_t next_sequence_ = 1;
  std::uint32_t next_task_id_ = 1;
  std::uint64_t generation_ = 0;  // of the last launch; 0 = none yet
  // WorkerActivity::requests: submissions that do not stand in for a
  // launch, and KeepWarm calls.
  std::uint64_t worker_requests_ = 0;
  std::vector<CUdeviceptr> allocations_;
  std::vector<CUdeviceptr> deferred_frees_;
  RuntimeStats stats_;
  // By logical id: its entry of stats_.tasks_per_operator, looked up at the
  // id's first submitted task (ids are never reused: operator_table.h), so
  // that Submit counts a task without building its operator's name.
  std::vector<std::uint64_t*> tasks_of_logical_;
  Diagnostics diagnostics_;  // errors, watchdog, trace (runtime_diagnostics.h)

  // runtime_streams.cpp. One 64-bit gate word per submission slot (device
  // memory, zeroed); slot s opens for sequence q when its word is >= q.
  CUdeviceptr gate_words_ = 0;
  // CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS; -1 until queried.
  mutable std::atomic<int> stream_memops_{-1};
  // runtime_tensors.cpp. Created on first use (under mutex_).
  std::shared_ptr<DeviceArena> tensor_memory_;
  std::atomic<bool> tensor_memory_ready_{false};  // set once tensor_memory_ is (lock-free reads)
  mutable std::atomic<int> device_ordinal_{-1};
};

}  // namespace gpuos::runtime
