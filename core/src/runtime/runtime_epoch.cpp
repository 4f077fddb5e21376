// Live updates (docs/live-update.md): alias flips and epoch switches.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>

#include "gpuos/registry/repository.h"
#include "runtime_impl.h"
#include "update_plan.h"

namespace gpuos::runtime {
namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
void StoreRelease(T* p, T value) {
  std::atomic_ref<T>(*p).store(value, std::memory_order_release);
}

// Appends (name, microseconds since the previous mark) to a list of steps.
class StepClock {
 public:
  explicit StepClock(std::vector<std::pair<std::string, double>>* steps)
      : steps_(steps), last_(Clock::now()) {}
  void Mark(const char* name) {
    const Clock::time_point now = Clock::now();
    steps_->emplace_back(name, std::chrono::duration<double, std::micro>(now - last_).count());
    last_ = now;
  }

 private:
  std::vector<std::pair<std::string, double>>* steps_;
  Clock::time_point last_;
};

std::vector<std::pair<std::string, std::string>> VersionPairs(
    const std::vector<std::pair<std::string, registry::SemVer>>& versions) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& [name, version] : versions) pairs.emplace_back(name, version.ToString());
  return pairs;
}

}  // namespace

Status RuntimeImpl::WriteAliasTable() {
  std::vector<unsigned int> aliases = table_.AliasTable();
  // Only the entries that changed: a flip touches a few words.
  std::size_t first = 0, last = aliases.size();
  if (alias_upload_.size() == aliases.size()) {
    while (first < last && aliases[first] == alias_upload_[first]) ++first;
    while (last > first && aliases[last - 1] == alias_upload_[last - 1]) --last;
  }
  if (first == last) return Status::Ok();
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuModuleGetGlobal(&address, &bytes, module_, registry::kAliasTableSymbol),
           "cuModuleGetGlobal(gpuos_alias_table)"));
  last = std::min(last, bytes / sizeof(unsigned int));
  if (first >= last) return Status::Ok();
  // `alias_upload_` is what the device holds: updated only once the copy
  // was accepted (a pageable source is staged before the call returns).
  // A copy on the copy stream runs next to the worker (the legacy stream
  // would wait for it). From pageable memory it returns once the source is
  // staged; not waited for beyond that: Submit binds slots on the host, the
  // device table serves only late-bound tasks, and later copies on this
  // stream are ordered after it.
  GPUOS_RETURN_IF_ERROR(Cuda(
      driver_->cuMemcpyHtoDAsync(address + first * sizeof(unsigned int), aliases.data() + first,
                                 (last - first) * sizeof(unsigned int), copy_stream_),
      "writing the alias table"));
  alias_upload_ = std::move(aliases);
  return Status::Ok();
}

Status RuntimeImpl::Activate(const std::string& op, const registry::SemVer& version) {
  std::lock_guard<std::mutex> update(update_mutex_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return Unavailable("the runtime was shut down");
  GPUOS_RETURN_IF_ERROR(MakeCurrent());
  bool changed = false;
  {
    std::lock_guard<std::mutex> table_lock(table_mutex_);
    GPUOS_ASSIGN_OR_RETURN(changed, table_.Activate(op, version));
  }
  if (!changed) return Status::Ok();
  ++stats_.alias_flips;
  return WriteAliasTable();
}

Expected<UpdateOutcome> RuntimeImpl::Update(const std::vector<LiveOperator>& operators) {
  std::lock_guard<std::mutex> update(update_mutex_);
  if (shut_down_) return Unavailable("the runtime was shut down");
  UpdatePlan plan;
  std::map<std::string, registry::SemVer> active;
  {
    std::lock_guard<std::mutex> table_lock(table_mutex_);
    plan = PlanUpdate(table_, operators);
    active = table_.ActiveVersions();
  }
  UpdateOutcome outcome;
  outcome.action = UpdateActionName(plan.action);
  outcome.activated = VersionPairs(plan.activate);
  outcome.reasons = plan.reasons;
  if (plan.action == UpdateAction::kAliasFlip) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return Unavailable("the runtime was shut down");
    GPUOS_RETURN_IF_ERROR(MakeCurrent());
    {
      std::lock_guard<std::mutex> table_lock(table_mutex_);
      OperatorTable next = table_;
      for (const auto& [name, version] : plan.activate) {
        GPUOS_RETURN_IF_ERROR(next.Activate(name, version).status());
      }
      table_ = std::move(next);
    }
    ++stats_.alias_flips;
    GPUOS_RETURN_IF_ERROR(WriteAliasTable());
  } else if (plan.action == UpdateAction::kEpochSwitch) {
    for (const auto& [name, version] : plan.activate) active[name] = version;
    // spec_sets_ changes only in Commit, which runs under update_mutex_ (held).
    std::vector<registry::OperatorSpec> specs = StagedSpecs(operators, *spec_sets_.back());
    GPUOS_ASSIGN_OR_RETURN(
        EpochSwitchTiming timing,
        RunEpochSwitch(
            *this, [&] { return BuildStaged(std::move(specs), std::move(active)); },
            quiesce_timeout_));
    outcome.stage_ms = timing.stage_ms;
    outcome.gap_us = timing.gap_us;
    outcome.quiesce_us = timing.quiesce_us;
    outcome.load_us = timing.load_us;
    outcome.commit_us = timing.commit_us;
    std::lock_guard<std::mutex> lock(mutex_);
    outcome.gap_detail_us = gap_detail_us_;
    stats_.last_epoch_gap_us = timing.gap_us;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  outcome.image_key = image_.key;
  return outcome;
}

Expected<UpdateOutcome> RuntimeImpl::Refresh() {
  if (repository_path_.empty()) {
    return FailedPrecondition(
        "this runtime was opened without a repository (RuntimeConfig::repository_path); use "
        "Update() with the operators to serve");
  }
  registry::RepositoryOptions options;
  options.path = repository_path_;
  GPUOS_ASSIGN_OR_RETURN(auto repository, registry::Repository::Open(options));
  GPUOS_ASSIGN_OR_RETURN(auto set, repository->CurrentOperatorSet());
  std::vector<LiveOperator> operators;
  for (auto& op : set) {
    LiveOperator live;
    live.current = std::move(op.current);
    live.previous = std::move(op.previous);
    operators.push_back(std::move(live));
  }
  repository.reset();  // the staged build opens its own
  return Update(operators);
}

std::vector<ActiveOperator> RuntimeImpl::ActiveOperators() const {
  std::lock_guard<std::mutex> table_lock(table_mutex_);
  std::vector<ActiveOperator> result;
  for (const auto& [name, version] : table_.ActiveVersions()) {
    ActiveOperator op;
    op.name = name;
    op.version = version;
    op.in_image = table_.VersionsInImage(name);
    result.push_back(std::move(op));
  }
  return result;
}

// ---- EpochDevice ----

Status RuntimeImpl::Quiesce(std::chrono::microseconds timeout) {
  quiesce_lock_ = std::unique_lock<std::mutex>(mutex_);  // stops admitting: Submit waits
  gap_detail_us_.clear();
  if (shut_down_) return Unavailable("the runtime was shut down");
  GPUOS_RETURN_IF_ERROR(MakeCurrent());
  StepClock step(&gap_detail_us_);
  const Clock::time_point deadline = Clock::now() + timeout;
  for (Reclaim(); !in_flight_.empty(); Reclaim()) {
    if (Clock::now() > deadline) {
      return Unavailable(std::to_string(in_flight_.size()) +
                         " submissions were still running after " +
                         std::to_string(timeout.count()) + " us");
    }
    std::this_thread::yield();
  }
  step.Mark("drain");
  if (generation_ == 0 || GridIdle()) {
    if (UnloadOldestRetiredModuleIfFull()) step.Mark("unload_retired");
    return Status::Ok();
  }
  // Nothing is in flight: ask the idle blocks to exit now rather than after
  // idle_park.
  GPUOS_RETURN_IF_ERROR(ParkIdleGrid(deadline, timeout));
  step.Mark("park");
  RunDeferredFrees();
  step.Mark("deferred_frees");
  if (UnloadOldestRetiredModuleIfFull()) step.Mark("unload_retired");
  return Status::Ok();
}

Status RuntimeImpl::ParkIdleGrid(Clock::time_point deadline, std::chrono::microseconds timeout) {
  StoreRelease(&control_->stop, 1u);
  CUresult result = CUDA_ERROR_NOT_READY;
  while ((result = driver_->cuStreamQuery(stream_)) == CUDA_ERROR_NOT_READY &&
         Clock::now() < deadline) {
    std::this_thread::yield();
  }
  StoreRelease(&control_->stop, 0u);
  // The pollers copied `stop` into the device state; clear that copy too, or
  // the next grid would exit at once. On the worker's stream: after this
  // grid and before the next launch, without waiting here (a grid that did
  // not park in time is cleared at once as well, below).
  const CUdeviceptr stop_seen = params_.state + offsetof(device::QueueDeviceState, stop_seen);
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuMemsetD32Async(stop_seen, 0u, 1, stream_), "clearing stop_seen"));
  if (result == CUDA_ERROR_NOT_READY) {
    // The grid still runs and serves: clear its copy now, or its blocks
    // would keep exiting as if stopped and the last one would skip its look
    // at the submission tail (stranding a Submit).
    static const unsigned int kZero = 0;
    GPUOS_RETURN_IF_ERROR(Cuda(
        driver_->cuMemcpyHtoDAsync(stop_seen, &kZero, sizeof(kZero), copy_stream_), "stop_seen"));
    GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuStreamSynchronize(copy_stream_), "stop_seen"));
    return Unavailable("the worker did not park within " + std::to_string(timeout.count()) + " us");
  }
  return Cuda(result, "the worker");
}

// Unloading an image costs about as much as loading one (the H100 at
// c275eda: 463 us against 642 us, bench/results/live_update.json), so a busy
// runtime keeps a few replaced images loaded and unloads them one per
// relaunch after the worker parked by itself (EnsureWorker) or all in
// WaitUntilParked. Inside a switch's gap only the oldest, once
// kRetiredImagesKept have piled up: unloading all of them there would put
// several unloads into one gap.
bool RuntimeImpl::UnloadOldestRetiredModuleIfFull() {
  if (retired_modules_.size() < kRetiredImagesKept) return false;
  UnloadOldestRetiredModule();
  return true;
}

void RuntimeImpl::UnloadModule(CUmodule module) {
  // A later module may get the same handle: the tile launchers' cache must
  // not take it for this one's.
  if (tiles_worker_module_ == module) {
    tiles_worker_module_ = nullptr;
    launch_functions_.clear();
  }
  const auto launched = std::find(tile_launch_modules_.begin(), tile_launch_modules_.end(), module);
  if (launched != tile_launch_modules_.end()) {
    // Tile launches from it may still be queued on their callers' streams,
    // and an unload does not wait for a module's kernels: the context's
    // work first (no grid runs here, so nothing waits for the worker; a
    // stream held back indefinitely holds this, as it holds a deferred
    // cuMemFree at the same points).
    (void)driver_->cuCtxSynchronize();
    tile_launch_modules_.erase(launched);
  }
  (void)driver_->cuModuleUnload(module);
}

void RuntimeImpl::UnloadOldestRetiredModule() {
  if (retired_modules_.empty()) return;
  UnloadModule(retired_modules_.front());
  retired_modules_.erase(retired_modules_.begin());
}

void RuntimeImpl::UnloadRetiredModules() {
  for (CUmodule module : retired_modules_) UnloadModule(module);
  retired_modules_.clear();
}

Status RuntimeImpl::Prepare(const StagedImage& staged) {
  auto pending = std::make_unique<Pending>();
  pending->specs = std::make_unique<std::vector<registry::OperatorSpec>>(staged.specs);
  std::vector<const registry::OperatorSpec*> pointers;
  for (const auto& spec : *pending->specs) pointers.push_back(&spec);
  {
    // The table changes only under update_mutex_, which the caller holds
    // until Commit: this copy is still current then.
    std::lock_guard<std::mutex> table_lock(table_mutex_);
    pending->table = table_;
  }
  GPUOS_RETURN_IF_ERROR(pending->table.Load(staged.image, pointers, staged.active));
  pending_ = std::move(pending);
  return Status::Ok();
}

Status RuntimeImpl::Load(const StagedImage& staged) {
  if (pending_ == nullptr) return FailedPrecondition("Load without a prepared staged image");
  Pending* pending = pending_.get();
  GPUOS_RETURN_IF_ERROR(LoadModule(staged.image, pending->table.AliasTable(), &pending->module,
                                   &pending->worker, &gap_detail_us_));
  StepClock step(&gap_detail_us_);
  int per_sm = 0;
  const Status occupancy = Cuda(driver_->cuOccupancyMaxActiveBlocksPerMultiprocessor(
                                    &per_sm, pending->worker, device::kWorkerThreads, 0),
                                "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  if (!occupancy.ok() || per_sm < 1) {
    (void)driver_->cuModuleUnload(pending->module);
    pending->module = nullptr;
    return occupancy.ok() ? FailedPrecondition("the staged worker does not fit on an SM")
                          : occupancy;
  }
  // From the first epoch's grid, which the ready ring and the per-block
  // diagnostics are sized for, not the current one: a bigger worker in one
  // epoch must not shrink the grid for good, and no epoch may run more.
  pending->blocks =
      std::min(params_.diagnostic_blocks, static_cast<unsigned int>(per_sm) * multiprocessors_);
  step.Mark("occupancy");
  return Status::Ok();
}

void RuntimeImpl::Commit(StagedImage staged) {
  // Unloaded later, when no kernel runs anyway (retired_modules_):
  // unloading here would lengthen the service gap.
  retired_modules_.push_back(module_);
  relaunch_after_switch_ = true;
  module_ = pending_->module;
  queue_worker_ = pending_->worker;
  NoteWorkerRegisters();
  blocks_ = pending_->blocks;
  blocks_hint_ = blocks_;
  params_.pollers = std::min(pollers_, blocks_);
  image_ = std::move(staged.image);
  spec_sets_.push_back(std::move(pending_->specs));
  {
    std::lock_guard<std::mutex> table_lock(table_mutex_);
    table_ = std::move(pending_->table);
  }
  alias_upload_ = table_.AliasTable();  // what LoadModule wrote into the new image
  pending_.reset();
  ++stats_.epoch_switches;
}

void RuntimeImpl::Resume() {
  pending_.reset();  // prepared (and maybe not loaded) but not committed
  if (quiesce_lock_.owns_lock()) quiesce_lock_.unlock();
}

// ---- Runtime: forwarding ----

Status Runtime::Activate(const std::string& op, const registry::SemVer& version) {
  return impl_->Activate(op, version);
}
Expected<UpdateOutcome> Runtime::Update(const std::vector<LiveOperator>& operators) {
  return impl_->Update(operators);
}
Expected<UpdateOutcome> Runtime::Refresh() { return impl_->Refresh(); }
std::vector<ActiveOperator> Runtime::ActiveOperators() const { return impl_->ActiveOperators(); }
std::string Runtime::control_socket_path() const { return impl_->control_socket_path(); }

}  // namespace gpuos::runtime
