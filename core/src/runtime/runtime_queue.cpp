// The host side of the queue protocol (docs/runtime.md): publishing graphs,
// backpressure, completions, relaunching a parked worker, shutdown.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "runtime_impl.h"

namespace gpuos::runtime {
namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
T LoadAcquire(T* p) {
  return std::atomic_ref<T>(*p).load(std::memory_order_acquire);
}

template <typename T>
void StoreRelease(T* p, T value) {
  std::atomic_ref<T>(*p).store(value, std::memory_order_release);
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins for up to 2 ms (a completion is often a few microseconds away and
// a sleep costs 50 us or more of latency), then yields for up to 20 ms, then
// sleeps in 20 us steps, so a long wait does not burn a core. (The spin was
// 200 us; lengthening it did not remove the demo's bimodal chain100 times,
// so their cause is elsewhere: docs/pytorch.md, "Performance".)
class Backoff {
 public:
  void Pause() {
    if ((++rounds_ & 63) == 0) elapsed_ = Clock::now() - start_;
    if (elapsed_ < std::chrono::milliseconds(2)) {
      CpuRelax();
    } else if (elapsed_ < std::chrono::milliseconds(20)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  Clock::time_point start_ = Clock::now();
  Clock::duration elapsed_{};
  unsigned int rounds_ = 0;
};

}  // namespace

long long RingArena::Allocate(std::uint32_t count) {
  if (count == 0) return 0;
  if (count > capacity_) return -1;
  std::uint32_t start = 0;
  if (!live_.empty()) {
    const std::uint32_t head = live_.front().first;
    const std::uint32_t tail = live_.back().second;
    const bool wrapped = live_.back().first < head;
    if (wrapped) {
      if (tail + count > head) return -1;
      start = tail;
    } else if (tail + count <= capacity_) {
      start = tail;
    } else if (count <= head) {
      start = 0;
    } else {
      return -1;
    }
  }
  live_.emplace_back(start, start + count);
  return start;
}

void RingArena::ReleaseOldest() {
  if (!live_.empty()) live_.pop_front();
}

void RingArena::ReleaseNewest() {
  if (!live_.empty()) live_.pop_back();
}

std::uint64_t RuntimeImpl::LoadDone(std::uint32_t slot) const { return LoadAcquire(done_ + slot); }

bool RuntimeImpl::Done(std::uint64_t sequence) const {
  const std::uint32_t slot =
      static_cast<std::uint32_t>((sequence - 1) % params_.submission_capacity);
  return LoadDone(slot) >= sequence;
}

bool RuntimeImpl::GridIdle() const { return driver_->cuStreamQuery(stream_) == CUDA_SUCCESS; }

bool RuntimeImpl::GridRunning() const {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const std::uint64_t parked = LoadAcquire(&control_->parked_generation);
  return generation_ != 0 && parked < generation_;
}

void RuntimeImpl::Reclaim() {
  while (!in_flight_.empty() && Done(in_flight_.front().sequence)) {
    const InFlight& oldest = in_flight_.front();
    KeepFailure(oldest.sequence);  // before its slot and arenas can be reused
    if (oldest.has_tasks) task_arena_.ReleaseOldest();
    if (oldest.has_tensors) tensor_arena_.ReleaseOldest();
    if (oldest.has_successors) successor_arena_.ReleaseOldest();
    ready_reserved_ -= oldest.ready_entries;
    in_flight_.pop_front();
  }
}

Status RuntimeImpl::EnsureWorker() {
  if (GridRunning()) return Status::Ok();
  if (GridIdle()) {  // what must wait until no kernel runs
    RunDeferredFrees();
    // One at a time, and not right after an epoch switch (this launch ends
    // its service gap): the caller waits for it.
    if (!relaunch_after_switch_) UnloadOldestRetiredModule();
  }
  relaunch_after_switch_ = false;
  // The generation moves only when a grid really starts: after a failed
  // launch the next Submit must try again, not believe a grid is running.
  params_.generation = generation_ + 1;
  diagnostics_.slot_names.Note(params_.generation, image_);  // names what this grid runs
  void* args[] = {&params_};
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuLaunchKernel(queue_worker_, blocks_, 1, 1, device::kWorkerThreads, 1, 1, 0,
                                   stream_, args, nullptr),
           "cuLaunchKernel(gpuos_queue_worker)"));
  generation_ = params_.generation;
  ++stats_.launches;
  return Status::Ok();
}

Status RuntimeImpl::KeepWarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return Unavailable("the runtime was shut down");
  ++worker_requests_;  // WorkerActivity::requests
  if (GridRunning()) {
    // Running: a poller sees the new value and restarts the idle clock. A
    // grid already parking still parks; the next call relaunches it.
    StoreRelease(&control_->keep_warm, control_->keep_warm + 1u);
    return Status::Ok();
  }
  GPUOS_RETURN_IF_ERROR(MakeCurrent());
  return EnsureWorker();
}

Expected<Future> RuntimeImpl::Submit(const TaskGraph& graph, const SubmitOptions& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return Unavailable("the runtime was shut down");
  if (graph.empty()) return Future{};
  GPUOS_RETURN_IF_ERROR(MakeCurrent());
  GPUOS_RETURN_IF_ERROR(CheckWaitFor(options));
  GPUOS_RETURN_IF_ERROR(CheckServed(graph));
  // A scheduler plugin decides the order of the roots (runtime_plugins.h);
  // the default, fifo, is not called: the graph's order costs nothing.
  std::vector<std::uint32_t> staging_order;  // empty: the graph's order
  if (plugins_->consulted_scheduler() != nullptr) {
    GPUOS_ASSIGN_OR_RETURN(staging_order, StagingOrderOf(graph));
  }
  const auto& tasks = graph.tasks();
  const auto& tensors = graph.tensors();
  const auto& edges = graph.successors();
  const std::uint32_t task_count = static_cast<std::uint32_t>(tasks.size());
  const std::uint32_t tensor_count = static_cast<std::uint32_t>(tensors.size());
  // One pass over the tasks in staging order: the ready-ring entries they
  // may take, and the roots, which follow the edges in the successor arena
  // (device::Submission) so that the device starts them without scanning.
  roots_.clear();
  std::uint64_t ready_need = 0;
  std::uint32_t first_root_tiles = 1;
  for (std::uint32_t i = 0; i < task_count; ++i) {
    const device::TaskDesc& task = tasks[staging_order.empty() ? i : staging_order[i]];
    const std::uint32_t tiles = std::max(task.num_tiles, 1u);
    ready_need += std::min<std::uint32_t>(tiles, blocks_);
    if (task.dependency_counter == 0 || task.dependency_counter == device::kNoDependencyCounter) {
      if (roots_.empty()) first_root_tiles = tiles;
      roots_.push_back(i);
    }
  }
  const std::uint32_t root_count = static_cast<std::uint32_t>(roots_.size());
  const std::uint32_t edge_count = static_cast<std::uint32_t>(edges.size());
  const std::uint32_t entry_count = edge_count + root_count;
  // The gate's retry entry (runtime_streams.cpp).
  if (options.wait_for != nullptr || options.open_later) ++ready_need;
  if (task_count > task_arena_.capacity() || tensor_count > tensor_arena_.capacity() ||
      entry_count > successor_arena_.capacity() || ready_need > params_.ready_capacity) {
    return InvalidArgument(
        "a graph of " + std::to_string(task_count) + " tasks, " + std::to_string(tensor_count) +
        " tensors and " + std::to_string(edge_count) + " edges (+ " + std::to_string(root_count) +
        " roots) does not fit the queue (capacities: tasks " +
        std::to_string(task_arena_.capacity()) + ", tensors " +
        std::to_string(tensor_arena_.capacity()) + ", edges and roots " +
        std::to_string(successor_arena_.capacity()) + "; ready-ring entries " +
        std::to_string(ready_need) + " needed of " + std::to_string(params_.ready_capacity) +
        ", which grows with task_capacity); raise RuntimeConfig's capacities "
        "or split the graph");
  }

  // Backpressure: wait for older submissions to finish; never overwrite.
  long long task_begin = -1, tensor_begin = -1, edge_begin = -1;
  Backoff backoff;
  bool waited = false;
  const Clock::time_point start = Clock::now();
  for (;;) {
    Reclaim();
    if (in_flight_.size() < params_.submission_capacity &&
        ready_reserved_ + ready_need <= params_.ready_capacity) {
      task_begin = task_arena_.Allocate(task_count);
      tensor_begin = task_begin < 0 ? -1 : tensor_arena_.Allocate(tensor_count);
      edge_begin = tensor_begin < 0 ? -1 : successor_arena_.Allocate(entry_count);
      if (edge_begin >= 0) break;
      // Undo partial allocations (they are the newest).
      if (task_begin >= 0 && task_count > 0) task_arena_.ReleaseNewest();
      if (tensor_begin >= 0 && tensor_count > 0) tensor_arena_.ReleaseNewest();
    }
    waited = true;
    if (Clock::now() - start > std::chrono::seconds(60)) {
      return Unavailable(
          "Submit waited 60 s for room in the queue; the worker made no "
          "progress (" +
          std::to_string(in_flight_.size()) + " submissions in flight)");
    }
    GPUOS_RETURN_IF_ERROR(EnsureWorker());
    backoff.Pause();
  }
  if (waited) ++stats_.backpressure_waits;

  const std::uint64_t sequence = next_sequence_;
  const std::uint32_t slot =
      static_cast<std::uint32_t>((sequence - 1) % params_.submission_capacity);
  device::SubmissionSlot& ring_slot = submission_slots_[slot];
  // A graph that fits in its ring slot travels there: the device reads the
  // record and the graph in one PCIe round trip (queue.h).
  const std::uint32_t payload_words =
      device::SubmissionPayloadWords(task_count, tensor_count, entry_count);
  const bool inline_graph = payload_words <= device::kInlinePayloadWords;
  unsigned char* payload = reinterpret_cast<unsigned char*>(ring_slot.payload);
  device::TaskDesc* task_out =
      inline_graph ? reinterpret_cast<device::TaskDesc*>(payload) : staged_tasks_ + task_begin;
  device::TensorDesc* tensor_out =
      inline_graph
          ? reinterpret_cast<device::TensorDesc*>(payload + task_count * sizeof(device::TaskDesc))
          : staged_tensors_ + tensor_begin;
  std::uint32_t* entry_out =
      inline_graph
          ? reinterpret_cast<std::uint32_t*>(payload + task_count * sizeof(device::TaskDesc) +
                                             std::size_t{tensor_count} * sizeof(device::TensorDesc))
          : staged_successors_ + edge_begin;
  // The payload cache (payload_cache.h; queue_direct.cuh, "Cached
  // payloads"): a lone tiled task travelling inline whose task and tensors
  // an entry of the device's cache holds runs from there, its ring slot not
  // read; one new to the cache fills an entry.
  PayloadCache::Decision cached;
  if (inline_graph && device::SubmissionCountsTiles(task_count, first_root_tiles) &&
      options.wait_for == nullptr && payload_cache_.entries() != 0 &&
      CachedPayloadKey(BoundTask(tasks[0]), tensors.data(), tensor_count, first_root_tiles,
                       &cache_key_)) {
    cached = payload_cache_.Choose(
        cache_key_, sequence, next_task_id_, [this](std::uint64_t s) { return Done(s); },
        [this](unsigned int entry, std::uint64_t fill) {
          return LoadAcquire(cache_filled_ + entry) == fill;
        });
  }
  const bool cached_use = cached.kind == PayloadCache::Kind::kUse;
  // A use's task keeps its fill's id, which the entry's copy holds.
  const std::uint32_t first_id = cached_use ? cached.first_task_id : next_task_id_;
  if (!cached_use) next_task_id_ += task_count;
  for (std::uint32_t i = 0; i < task_count; ++i) {
    const std::uint32_t index = staging_order.empty() ? i : staging_order[i];
    device::TaskDesc task = BoundTask(tasks[index]);
    for (unsigned int k = 0; k < task.num_tensors && k < device::kMaxTaskTensors; ++k) {
      task.tensors[k] += static_cast<int>(tensor_begin);
    }
    task.successor_begin += static_cast<std::uint32_t>(edge_begin);
    task.task_id = first_id + index;  // the graph's index, wherever it is staged
    task_out[i] = task;
  }
  std::copy(tensors.begin(), tensors.end(), tensor_out);
  for (std::uint32_t e = 0; e < edge_count; ++e) {
    entry_out[e] = edges[e] + static_cast<std::uint32_t>(task_begin);
  }
  for (std::uint32_t r = 0; r < root_count; ++r) {
    entry_out[edge_count + r] = roots_[r] + static_cast<std::uint32_t>(task_begin);
  }
  const Expected<Gate> gate = EnqueueGate(options, sequence, slot);
  if (!gate.ok()) {
    if (task_count > 0) task_arena_.ReleaseNewest();
    if (tensor_count > 0) tensor_arena_.ReleaseNewest();
    if (entry_count > 0) successor_arena_.ReleaseNewest();
    return gate.status();
  }
  NoteTensorUse(sequence);
  ++next_sequence_;
  device::Submission& record = ring_slot.record;
  record.sequence = sequence;
  record.task_begin = static_cast<std::uint32_t>(task_begin);
  record.task_count = task_count;
  record.tensor_begin = static_cast<std::uint32_t>(tensor_begin);
  record.tensor_count = tensor_count;
  record.successor_begin = static_cast<std::uint32_t>(edge_begin);
  record.successor_count = edge_count;
  record.gate = gate->address;
  record.gate_value = gate->value;
  record.root_count = root_count;
  record.inline_words = inline_graph ? payload_words : 0;
  record.first_root = root_count == 0 ? 0 : static_cast<std::uint32_t>(task_begin) + roots_[0];
  record.first_root_tiles = first_root_tiles;
  ring_slot.cache_fill = cached.kind == PayloadCache::Kind::kFill ? cached.entry + 1ull : 0ull;
  diagnostics_.history.Add({sequence, first_id, task_count});
  // A lone tiled task that travels inline: the poller that claims it names
  // it to idle blocks, which run its tiles directly (queue.h, lone_hint;
  // queue_direct.cuh). Written before the tail, in the same 16-byte word
  // that pollers read at once: a poller that sees this tail sees this hint.
  // A use of the payload cache names its entry in the hint, open where the
  // submission has no gate; a slot gate opens it later (OpenGate). Any
  // other submission clears the word, so that the hint names the newest
  // submission or none: its 29 bits of a sequence then never match a claim
  // 2^29 submissions later, and a closed cached use that waits for its gate
  // stops holding up the claims once a later submission is published.
  // Atomic: OpenGate may exchange the word from another thread.
  unsigned long long lone_hint = 0;
  if (inline_graph && device::SubmissionCountsTiles(task_count, first_root_tiles)) {
    const unsigned long long cache_bits =
        cached_use ? device::LoneHintCacheBits(cached.entry, gate->address == 0) : 0ull;
    lone_hint = device::EncodeLoneHint(sequence, first_root_tiles,
                                       device::kSubmissionRecordWords + payload_words, cache_bits);
  }
  std::atomic_ref<unsigned long long>(control_->lone_hint)
      .store(lone_hint, std::memory_order_relaxed);
  StoreRelease(&control_->submit_tail, static_cast<unsigned long long>(sequence));

  InFlight entry;
  entry.sequence = sequence;
  entry.has_tasks = task_count > 0;
  entry.has_tensors = tensor_count > 0;
  entry.has_successors = entry_count > 0;
  entry.tasks = task_count;
  entry.ready_entries = static_cast<std::uint32_t>(ready_need);
  entry.storages = graph.storages();
  ready_reserved_ += entry.ready_entries;
  in_flight_.push_back(std::move(entry));
  GPUOS_RETURN_IF_ERROR(EnsureWorker());

  ++stats_.submissions;
  if (!options.stands_in_for_launch) ++worker_requests_;  // WorkerActivity::requests
  stats_.tasks_submitted += task_count;
  stats_.max_queue_depth = std::max<std::uint64_t>(stats_.max_queue_depth, in_flight_.size());
  std::uint64_t tasks_in_flight = 0;
  for (const InFlight& f : in_flight_) tasks_in_flight += f.tasks;
  stats_.max_tasks_in_flight = std::max(stats_.max_tasks_in_flight, tasks_in_flight);
  for (std::uint32_t logical : graph.logical_ops()) ++TasksOfLogical(logical);

  Future future;
  future.runtime_ = this;
  future.sequence_ = sequence;
  future.first_task_id_ = first_id;
  future.task_count_ = task_count;
  return future;
}

Status RuntimeImpl::CheckServed(const TaskGraph& graph) const {
  for (std::uint32_t logical : graph.logical_ops()) {
    if (logical != 0 && table_.Slot(logical) == 0) {
      return FailedPrecondition(table_.Unresolvable(logical));
    }
  }
  return Status::Ok();
}

device::TaskDesc RuntimeImpl::BoundTask(const device::TaskDesc& graph_task) const {
  device::TaskDesc task = graph_task;
  // Bound to the version active now (docs/live-update.md): its slot, not
  // the alias table, is what the worker dispatches.
  if (task.logical_op != 0) {
    task.opcode = table_.Slot(task.logical_op);
    task.logical_op = 0;
  }
  return task;
}

Status RuntimeImpl::OpenGate(const Future& future, bool drop) {
  if (future.sequence_ == 0) return Status::Ok();
  if (future.runtime_ != this) {
    return InvalidArgument(std::string(drop ? "DropGated" : "OpenGate") +
                           ": the future of submission " + std::to_string(future.sequence_) +
                           " belongs to another runtime; pass it to the runtime that made it");
  }
  if (shut_down_) {
    return Unavailable(std::string(drop ? "DropGated" : "OpenGate") +
                       ": the runtime was shut down");
  }
  // No lock (a Submit waiting for room in the queue holds it, maybe for
  // this very submission) and no look at the record: the word's sequence
  // only grows. The slot is this submission's until it finished; once it
  // has, a later submission of the slot may own the word, for which this
  // smaller sequence is closed, so the store never opens or closes another
  // submission's gate. For a submission without a slot gate the word is not
  // read.
  const std::uint32_t slot =
      static_cast<std::uint32_t>((future.sequence_ - 1) % params_.submission_capacity);
  std::atomic_ref<unsigned long long> word(submission_slots_[slot].gate_word);
  const unsigned long long value = future.sequence_ | (drop ? device::kGateDropped : 0ull);
  unsigned long long seen = word.load(std::memory_order_relaxed);
  while (static_cast<long long>((seen & ~device::kGateDropped) - future.sequence_) < 0 &&
         !word.compare_exchange_weak(seen, value, std::memory_order_release,
                                     std::memory_order_relaxed)) {
  }
  // A use of the payload cache waits for its lone hint, not the slot
  // (queue_direct.cuh, "Cached payloads"): opened, the hint says so;
  // dropped, it no longer names the entry, so that the worker reads the
  // slot and finds the drop there (written above, before). Which of the two
  // is the gate word's, now final for this submission: an OpenGate and a
  // DropGated of one submission agree with whichever won the word. Only
  // while the hint still names this submission closed: a later
  // submission's hint is left alone (the exchange fails where Submit
  // replaced the word). A finished submission is left out: the hint names
  // 29 bits of a sequence, which an unfinished one shares with no other.
  // (Nothing to do with the cache off: no hint names an entry.)
  if (payload_cache_.entries() == 0) return Status::Ok();
  const unsigned long long final_word = word.load(std::memory_order_relaxed);
  const bool dropped = final_word == (future.sequence_ | device::kGateDropped);
  std::atomic_ref<unsigned long long> hint(control_->lone_hint);
  unsigned long long named = hint.load(std::memory_order_relaxed);
  if (!Done(future.sequence_) && device::LoneHintNames(named, future.sequence_) &&
      device::LoneHintCached(named) && !device::LoneHintOpen(named)) {
    const unsigned long long next =
        dropped ? named & ~device::kLoneHintCacheMask : named | device::kLoneHintOpen;
    hint.compare_exchange_strong(named, next, std::memory_order_release, std::memory_order_relaxed);
  }
  return Status::Ok();
}

Status RuntimeImpl::WaitFinished(std::uint64_t sequence, std::uint32_t task_count,
                                 std::chrono::microseconds timeout) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + timeout;
  const bool watchdog = diagnostics_.task_time_limit.count() > 0;
  const auto watchdog_after = WatchdogInterval(diagnostics_.task_time_limit);
  Backoff backoff;
  int polls = 0;
  while (!Done(sequence)) {
    if (shut_down_.load()) {
      return Unavailable("the runtime was shut down before submission " + std::to_string(sequence) +
                         " finished");
    }
    ++polls;
    // The deadline is checked often (timeouts stay accurate once the
    // backoff sleeps); the stream, which costs a driver call, rarely.
    if ((polls & 15) == 0) {
      const Clock::time_point now = Clock::now();
      if (now > deadline) {
        return Unavailable(
            "submission " + std::to_string(sequence) +
            (task_count == 0 ? std::string() : " (" + std::to_string(task_count) + " tasks)") +
            " did not finish within " + std::to_string(timeout.count()) +
            " us; tiles completed so far: " +
            std::to_string(LoadAcquire(&control_->completed_tasks)));
      }
      if (watchdog && now - start >= watchdog_after) {
        // Reported by a Wait that has itself waited the limit: a stuck task
        // is reported to each waiter, and again to later Waits, at most once
        // per limit each.
        const std::vector<std::string> over = TasksOverLimit();
        if (!over.empty() && now - start >= diagnostics_.task_time_limit && !Done(sequence)) {
          std::string message = "watchdog: submission " + std::to_string(sequence) +
                                " has not finished after " + FormatDuration(now - start) +
                                " of waiting; ";
          for (std::size_t i = 0; i < over.size(); ++i) message += (i ? "; " : "") + over[i];
          return Unavailable(message + " (RuntimeConfig::task_time_limit is " +
                             FormatDuration(diagnostics_.task_time_limit) +
                             "); the runtime keeps running it: Wait again to keep waiting");
        }
      }
    }
    if ((polls & 1023) == 0) {
      GPUOS_RETURN_IF_ERROR(MakeCurrent());
      const CUresult result = driver_->cuStreamQuery(stream_);
      if (result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_READY) {
        return Cuda(result, "the worker");
      }
    }
    backoff.Pause();
  }
  return Status::Ok();
}

Status RuntimeImpl::Wait(const Future& future, std::chrono::microseconds timeout) {
  GPUOS_RETURN_IF_ERROR(WaitFinished(future.sequence_, future.task_count_, timeout));
  return SubmissionResult(future.sequence_);
}

Status RuntimeImpl::Synchronize(std::chrono::microseconds timeout) {
  std::uint64_t first = 0, last = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Reclaim();
    if (in_flight_.empty()) return Status::Ok();
    first = in_flight_.front().sequence;
    last = next_sequence_ - 1;
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  // Submissions complete out of order: wait for each one that was in
  // flight; report the first that failed.
  Status first_failure;
  for (std::uint64_t s = first; s <= last; ++s) {
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    GPUOS_RETURN_IF_ERROR(WaitFinished(s, 0, std::max(left, std::chrono::microseconds(0))));
    Status result = SubmissionResult(s);
    if (first_failure.ok()) first_failure = std::move(result);
  }
  return first_failure;
}

Status RuntimeImpl::WaitUntilParked(std::chrono::microseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (shut_down_.load()) return Status::Ok();  // nothing runs any more
      GPUOS_RETURN_IF_ERROR(MakeCurrent());
      const CUresult result = driver_->cuStreamQuery(stream_);
      if (result == CUDA_SUCCESS) {
        RunDeferredFrees();
        UnloadRetiredModules();
        return Status::Ok();
      }
      if (result != CUDA_ERROR_NOT_READY) return Cuda(result, "the worker");
    }
    if (Clock::now() > deadline) {
      return Unavailable("the worker did not park within " + std::to_string(timeout.count()) +
                         " us");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

std::uint64_t& RuntimeImpl::TasksOfLogical(std::uint32_t logical) {
  if (logical < tasks_of_logical_.size() && tasks_of_logical_[logical] != nullptr) {
    return *tasks_of_logical_[logical];
  }
  const OperatorRef* ref = ByLogical(logical);
  std::uint64_t& counter =
      stats_.tasks_per_operator[ref == nullptr ? std::string("noop")
                                               : ref->name + " " + DTypeName(ref->dtype)];
  // An id not given out yet may be given out later: only known ids (and the
  // no-op's 0) are remembered.
  if (ref != nullptr || logical == 0) {
    if (logical >= tasks_of_logical_.size()) tasks_of_logical_.resize(logical + 1, nullptr);
    tasks_of_logical_[logical] = &counter;
  }
  return counter;
}

RuntimeStats RuntimeImpl::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  RuntimeStats stats = stats_;
  stats.worker_blocks = blocks_;
  stats.worker_pollers = params_.pollers;
  stats.worker_registers = worker_registers_;
  stats.worker_local_bytes = worker_local_bytes_;
  stats.idle_park = idle_park_;
  stats.device_memory_results = params_.completion_scope == device::kCompletionScopeGpu;
  stats.retired_images = retired_modules_.size();
  stats.payload_cache_uses = payload_cache_.uses();
  stats.payload_cache_fills = payload_cache_.fills();
  stats.payload_cache_entries = payload_cache_.entries();
  if (control_ != nullptr) {
    stats.tiles_completed = LoadAcquire(&control_->completed_tasks);
    stats.direct_submissions = LoadAcquire(&control_->direct_submissions);
    stats.cached_openings = LoadAcquire(&control_->cached_openings);
    stats.worker_sm_clock_mhz = static_cast<double>(LoadAcquire(&control_->sm_clock_khz)) / 1000;
    const std::uint64_t parked = LoadAcquire(&control_->parked_generation);
    stats.parks = generation_ == 0 ? 0 : (generation_ - 1) + (parked >= generation_ ? 1 : 0);
  }
  stats.relaunches = stats.launches == 0 ? 0 : stats.launches - 1;
  stats.watchdog_reports = diagnostics_.watchdog_reports.load();
  return stats;
}

Status RuntimeImpl::Shutdown() {
  if (driver_ == nullptr) return Status::Ok();
  Status first;
  if (control_ != nullptr && !shut_down_) first = Synchronize(std::chrono::seconds(10));
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return Unavailable("the runtime was shut down");
  shut_down_ = true;
  if (context_ == nullptr) return first;
  (void)MakeCurrent();
  if (control_ != nullptr) StoreRelease(&control_->stop, 1u);
  if (stream_ != nullptr) {
    // Bounded: a task that never ends keeps the worker from seeing `stop`.
    // Then nothing may be freed or unloaded (it would block on the running
    // kernel), so the resources are left to the process's exit.
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
    CUresult result = CUDA_ERROR_NOT_READY;
    while ((result = driver_->cuStreamQuery(stream_)) == CUDA_ERROR_NOT_READY &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (result == CUDA_ERROR_NOT_READY) {
      worker_abandoned_ = true;
      return Unavailable(
          "the worker did not stop within 10 s (a task that never finishes?); its memory and "
          "module are left in place");
    }
    Status parked = Cuda(result, "parking the worker");
    if (first.ok()) first = parked;
    (void)driver_->cuStreamDestroy(stream_);
    stream_ = nullptr;
  }
  // Watchdog and trace copies use the copy stream and the device block.
  std::lock_guard<std::mutex> diagnostics_lock(diagnostics_.device_mutex);
  if (copy_stream_ != nullptr) (void)driver_->cuStreamDestroy(copy_stream_);
  copy_stream_ = nullptr;
  RunDeferredFrees();
  for (CUdeviceptr address : allocations_) (void)driver_->cuMemFree(address);
  allocations_.clear();
  if (device_block_ != 0) (void)driver_->cuMemFree(device_block_);
  // The pinned host block (queue control, completion words) stays until the
  // destructor: Futures and stats() may still read it after Shutdown().
  if (module_ != nullptr) UnloadModule(module_);
  UnloadRetiredModules();
  device_block_ = 0;
  module_ = nullptr;
  return first;
}

}  // namespace gpuos::runtime
