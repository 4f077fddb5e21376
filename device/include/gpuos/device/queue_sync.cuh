// Building blocks of the persistent worker (device/src/queue_worker.cu): the
// queue's pointers, memory-order helpers, the device ready ring, submission
// claims and completion accounting. Internal to the worker; operators never
// include it. docs/runtime.md describes the protocol.
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/queue.h"

namespace gpuos {
namespace device {
namespace queue {

constexpr unsigned long long kNone = ~0ull;
constexpr unsigned long long kContended = ~0ull - 1;  // lost a race: try again at once
constexpr unsigned int kNoTask = 0xffffffffu;
constexpr unsigned int kNoSlot = 0xffffffffu;
// Ready-ring entries a block takes at once, at most (one per thread of a warp).
constexpr unsigned int kMaxBatch = 32;

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Acquire at system scope: the host's writes before its release of *p are
// visible after this load.
__device__ __forceinline__ unsigned long long LoadAcquireSys(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Acquire at GPU scope (a helper's look at a claim word, queue_direct.cuh).
__device__ __forceinline__ unsigned long long LoadAcquireGpu(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Lone tiled tasks' tiles run directly (queue_direct.cuh, docs/runtime.md,
// "Direct tiles"); GPUOS_JIT_DEFINES=GPUOS_DIRECT_TILES=0: through the
// admission and the help board, as before (an A/B switch).
// GPUOS_DIRECT_TILES=2 (a diagnostic): the pollers read the hint but never
// announce, as with 0 otherwise. =3 (a diagnostic): direct tiles, every one
// announced from its slot's record (AnnounceDirectFromRecord), the hint
// never used (its load still made).
#ifndef GPUOS_DIRECT_TILES
#define GPUOS_DIRECT_TILES 1
#endif
constexpr bool kDirectTiles = GPUOS_DIRECT_TILES == 1 || GPUOS_DIRECT_TILES == 3;
constexpr bool kReadLoneHint = GPUOS_DIRECT_TILES == 1 || GPUOS_DIRECT_TILES == 2;

template <typename T>
__device__ __forceinline__ T Volatile(const T* p) {
  return *reinterpret_cast<const volatile T*>(p);
}

template <typename T>
__device__ __forceinline__ void StoreVolatile(T* p, T v) {
  *reinterpret_cast<volatile T*>(p) = v;
}

struct Queue {
  QueueControl* control;
  const SubmissionSlot* submissions;
  unsigned long long* done;
  const TaskDesc* staged_tasks;
  const TensorDesc* staged_tensors;
  const unsigned int* staged_successors;
  TaskDesc* tasks;
  TensorDesc* tensors;
  unsigned int* successors;
  NodeState* nodes;
  unsigned long long* ready;
  QueueDeviceState* state;
  unsigned int* remaining;
  unsigned long long* sequences;
  WorkerStatus* slot_status;
  SubmissionError* slot_errors;
  BlockActivity* activity;
  TraceRecord* trace;  // null: tracing off
  unsigned long long* trace_counts;
  DirectSlot* direct;           // per ring slot (queue.h)
  unsigned char* direct_areas;  // kDirectAreaBytes per ring slot, then per cache entry
  unsigned long long idle_park_ns;
  unsigned long long generation;
  unsigned int task_capacity;
  unsigned int tensor_capacity;
  unsigned int successor_capacity;
  unsigned int submission_capacity;
  unsigned int ready_capacity;
  unsigned int diagnostic_blocks;
  unsigned int trace_per_block;
  unsigned int pollers;           // QueueParams::pollers: blocks [0, pollers) poll at launch
  unsigned int completion_scope;  // QueueParams::completion_scope
};

__device__ __forceinline__ Queue Unpack(const QueueParams& p) {
  Queue q;
  q.control = reinterpret_cast<QueueControl*>(p.control);
  q.submissions = reinterpret_cast<const SubmissionSlot*>(p.submissions);
  q.done = reinterpret_cast<unsigned long long*>(p.done);
  q.staged_tasks = reinterpret_cast<const TaskDesc*>(p.staged_tasks);
  q.staged_tensors = reinterpret_cast<const TensorDesc*>(p.staged_tensors);
  q.staged_successors = reinterpret_cast<const unsigned int*>(p.staged_successors);
  q.tasks = reinterpret_cast<TaskDesc*>(p.tasks);
  q.tensors = reinterpret_cast<TensorDesc*>(p.tensors);
  q.successors = reinterpret_cast<unsigned int*>(p.successors);
  q.nodes = reinterpret_cast<NodeState*>(p.nodes);
  q.ready = reinterpret_cast<unsigned long long*>(p.ready);
  q.state = reinterpret_cast<QueueDeviceState*>(p.state);
  q.remaining = reinterpret_cast<unsigned int*>(p.remaining);
  q.sequences = reinterpret_cast<unsigned long long*>(p.sequences);
  q.slot_status = reinterpret_cast<WorkerStatus*>(p.slot_status);
  q.slot_errors = reinterpret_cast<SubmissionError*>(p.slot_errors);
  q.activity = reinterpret_cast<BlockActivity*>(p.activity);
  q.trace = reinterpret_cast<TraceRecord*>(p.trace);
  q.trace_counts = reinterpret_cast<unsigned long long*>(p.trace_counts);
  q.direct = reinterpret_cast<DirectSlot*>(p.direct);
  q.direct_areas = reinterpret_cast<unsigned char*>(p.direct) +
                   static_cast<unsigned long long>(p.submission_capacity) * sizeof(DirectSlot);
  q.idle_park_ns = p.idle_park_ns;
  q.generation = p.generation;
  q.task_capacity = p.task_capacity;
  q.tensor_capacity = p.tensor_capacity;
  q.successor_capacity = p.successor_capacity;
  q.submission_capacity = p.submission_capacity;
  q.ready_capacity = p.ready_capacity;
  q.diagnostic_blocks = p.diagnostic_blocks;
  q.trace_per_block = p.trace_per_block;
  q.pollers = p.pollers;
  q.completion_scope = p.completion_scope;
  return q;
}

// A ready-ring entry: task + 1 (bits 0-31, so 0 means empty), the ring slot
// of its submission (bits 32-62) and whether it is a helper reference of a
// tiled task (bit 63). Helper references are counted in the submission's
// `remaining` until they are popped, so a submission never completes (and
// its arenas are never reused) while one of them is still in the ring.
struct ReadyEntry {
  unsigned int task;
  unsigned int slot;
  bool helper;
};

__device__ __forceinline__ unsigned long long EncodeReady(unsigned int task, unsigned int slot,
                                                          bool helper) {
  return (helper ? (1ull << 63) : 0ull) | (static_cast<unsigned long long>(slot) << 32) |
         (static_cast<unsigned long long>(task) + 1ull);
}

__device__ __forceinline__ ReadyEntry DecodeReady(unsigned long long value) {
  ReadyEntry e;
  e.task = static_cast<unsigned int>(value & 0xffffffffull) - 1u;
  e.slot = static_cast<unsigned int>((value >> 32) & 0x7fffffffull);
  e.helper = (value >> 63) != 0;
  return e;
}

// Writes an entry at a reserved ring position. The host reserves ring room
// for every push of the submissions in flight, so the position is free or
// about to be freed by the consumer of the entry one lap earlier. REQUIRES:
// the writer's earlier writes that the entry publishes are fenced.
__device__ __forceinline__ void WriteReady(const Queue& q, unsigned long long position,
                                           unsigned long long value) {
  unsigned long long* slot = q.ready + position % q.ready_capacity;
  while (Volatile(slot) != 0) __nanosleep(32);
  StoreVolatile(slot, value);
}

// One thread: fences, then pushes one entry.
__device__ __forceinline__ void PushReady(const Queue& q, unsigned long long value) {
  __threadfence();
  WriteReady(q, atomicAdd(&q.state->ready_tail, 1ull), value);
}

// One thread: claims up to kMaxBatch ring positions (about an even share of
// what is ready among the blocks). Returns the first position (count in
// *count), kNone or kContended.
__device__ __forceinline__ unsigned long long TryPopBatch(const Queue& q, unsigned int* count) {
  const unsigned long long head = Volatile(&q.state->ready_head);
  const unsigned long long tail = Volatile(&q.state->ready_tail);
  if (head >= tail) return kNone;
  unsigned long long take = (tail - head) / gridDim.x;
  take = take < 1 ? 1 : (take > kMaxBatch ? kMaxBatch : take);
  if (atomicCAS(&q.state->ready_head, head, head + take) != head) return kContended;
  *count = static_cast<unsigned int>(take);
  return head;
}

// One thread: the entry at a claimed position (waits until its producer has
// written it), clearing the position; acquires what the producer published.
__device__ __forceinline__ unsigned long long TakeReady(const Queue& q,
                                                        unsigned long long position) {
  unsigned long long* slot = q.ready + position % q.ready_capacity;
  unsigned long long value;
  while ((value = Volatile(slot)) == 0) __nanosleep(16);
  StoreVolatile(slot, 0ull);
  __threadfence();
  return value;
}

// Payload cache entry `entry`'s filled word (queue.h, kCacheFilledWords):
// mapped host memory right after QueueControl.
__device__ __forceinline__ unsigned long long* CacheFilled(const Queue& q, unsigned int entry) {
  return reinterpret_cast<unsigned long long*>(q.control + 1) + entry;
}

// One thread: announces direct submission `sequence` (its first root's
// `tiles`, its slot's record and graph words) on QueueDeviceState::
// direct_board, asking min(tiles, grid) - 1 blocks to help (which ones:
// queue_direct.cuh, DirectHelpWanted). A maximum,
// not a store: the sequence is the word's top bits, so an announcement made
// late (AnnounceDirectFromRecord, after the slot's read) never puts back an
// older submission over a newer one (until 2^42 submissions wrap it).
__device__ __forceinline__ void PostDirectBoard(const Queue& q, unsigned long long sequence,
                                                unsigned int tiles, unsigned int slot_words) {
  DirectBoard board;
  board.sequence = sequence;
  const unsigned int helpers = (tiles < gridDim.x ? tiles : gridDim.x) - 1u;
  board.helpers = helpers < 4095u ? helpers : 4095u;  // the board's field
  board.slot_words = slot_words;
  atomicMax(&q.state->direct_board, EncodeDirectBoard(board));
}

// One thread: the index of the submission a claim would take now (the
// oldest published one not claimed yet, below `claim_below`), or kNone. Reads
// the host's tail and lone hint (*hint) and `*host_flags` (QueueControl's
// stop and keep_warm, one 8-byte word, stop in the low half), in flight
// together: a poller's idle round costs one PCIe round trip, not two
// (ShouldPark uses the word). Claims nothing: FinishClaim does (phase
// timing marks the read apart from the claim: phase_timing.cuh, slot 28).
//
// Only submissions below `claim_below` are claimed (a block that announced
// the park runs only those published before; queue_worker.cu, ParkWatch).
//
// `read_flags` false leaves *host_flags as an earlier read left them (an A/B
// experiment, GPUOS_POLLER_FLAGS_EVERY in queue_worker.cu: one PCIe read a
// poll instead of two).
__device__ __forceinline__ unsigned long long PeekSubmission(const Queue& q,
                                                             unsigned long long* host_flags,
                                                             unsigned long long claim_below,
                                                             unsigned long long* hint,
                                                             bool read_flags = true) {
  // The flags issued before the acquiring load, so that both are in flight
  // together; the tail and the hint in one 16-byte load, so that a new tail
  // comes with its hint. (Read as a separate load beside the tail, a third
  // load per poll, the hint made calls 3-7 us slower, GPUOS_DIRECT_TILES=2 in
  // bench/results/experiments/direct_tiles_session24.txt.)
  if (read_flags) {
    *host_flags = Volatile(reinterpret_cast<const unsigned long long*>(&q.control->stop));
  }
  // The head and the tail seen so far in flight with the tail's PCIe read
  // (L2 loads that would otherwise follow it, one after the other; session
  // 31): a head older than the tail's read costs at most a failed CAS
  // (kContended).
  const unsigned long long tail_seen = Volatile(&q.state->host_tail_seen);
  const unsigned long long head = Volatile(&q.state->submit_head);
  unsigned long long tail;
  asm volatile("ld.acquire.sys.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(tail), "=l"(*hint)
               : "l"(&q.control->submit_tail)
               : "memory");
  if (!kReadLoneHint) *hint = 0;
  // A maximum: `tail_seen` is a PCIe round trip older than `tail`, and a
  // store could put back a smaller tail that another poller replaced.
  if (tail_seen < tail) atomicMax(&q.state->host_tail_seen, tail);
  if (head >= tail || head >= claim_below) return kNone;
  return head;
}

// One thread: claims submission `head` (PeekSubmission's answer): `head`, or
// kContended when another block took it first. When the host's lone hint
// (`hint`, read with the tail) names it (a lone tiled task travelling
// inline), *direct is set and the claim is announced on the direct board
// (GPUOS_DIRECT_TILES; queue_direct.cuh): its helpers wait for its claim
// word to open and run its tiles from the slot's area.
// Where the hint also names a payload cache entry (CachedClaimOf said
// kOpen), the admitting block opens the tiles from the entry without
// reading the ring slot (queue_direct.cuh, "Cached payloads").
__device__ __forceinline__ unsigned long long FinishClaim(const Queue& q, unsigned long long head,
                                                          unsigned long long hint, bool* direct) {
  *direct = false;
  if (atomicCAS(&q.state->submit_head, head, head + 1) != head) return kContended;
  atomicAdd(&q.state->in_flight, 1u);
  atomicMax(&q.state->last_busy_ns, GlobalTimerNs());
  // The hint names the newest submission the tail shows; it counts only
  // where that is this very one (a poller behind the tail claims an older
  // submission first, which its admitting block may announce from the
  // record: AnnounceDirectFromRecord).
  if (kDirectTiles && LoneHintNames(hint, head + 1)) {
    PostDirectBoard(q, head + 1, LoneHintTiles(hint), LoneHintWords(hint));
    *direct = true;
  }
  return head;
}

// What a poller does with submission `sequence`, which it could claim, given
// the lone hint read with the tail (PeekSubmission).
enum class CachedClaim {
  kNone,  // not cached (or the hint names another submission): claim as before
  kWait,  // cached, its gate still closed: claim once a later read shows it open
  kOpen,  // cached and open: claim, and open from the cache entry
};
__device__ __forceinline__ CachedClaim CachedClaimOf(unsigned long long sequence,
                                                     unsigned long long hint) {
  // (The entry is the host's, which names only entries it allocated and
  // whose fill the device confirmed: QueueParams::payload_cache_entries.)
  if (!kDirectTiles || !LoneHintNames(hint, sequence) || !LoneHintCached(hint)) {
    return CachedClaim::kNone;
  }
  return LoneHintOpen(hint) ? CachedClaim::kOpen : CachedClaim::kWait;
}

// One thread: whether `sub` may start (or, dropped, complete): it has no
// gate, or its gate word is open. `slot_gate_word`: SubmissionSlot::gate_word
// as read with the slot, the word of a kSlotGate submission (the host opens
// it once the stream it orders after is idle, before or after publishing: a
// value read with the record is as fresh as the record). Otherwise the word
// is the one the stream it waits for (SubmitOptions::wait_for) writes; the
// acquire makes what that stream's work wrote before the write visible to
// this thread (the stream write fences like __threadfence_system).
__device__ __forceinline__ bool GateOpen(const Submission& sub, unsigned long long slot_gate_word) {
  if (sub.gate == 0) return true;
  const unsigned long long value =
      sub.gate == gpuos::device::kSlotGate
          ? slot_gate_word & ~gpuos::device::kGateDropped
          : LoadAcquireSys(reinterpret_cast<const unsigned long long*>(sub.gate));
  return static_cast<long long>(value - sub.gate_value) >= 0;
}

// One thread, once every task of the submission in ring slot `slot` is
// done: mirrors the submission's error record (if any) into mapped memory,
// clears it for the slot's next submission, then publishes the completion.
// `sequence`: the submission's (q.sequences[slot], read by the caller while
// the slot was still held, so that the read overlaps the count).
// `acquired`: the caller's count was an acquire-release whose acquire saw
// every other count of the submission, each a release of its block's
// results and error reports (queue_direct.cuh, CountDirectTile), and its
// release covered the caller's own: where results are in device memory,
// the gpu-scope fence is skipped. The completion word is then a plain
// store issued once the count's add has returned (the caller branches on
// it), so every result is in device memory before the word leaves the SM;
// in PTX's terms the store is not a release of the word, which is enough
// for its readers (the host and cuStreamWaitValue64) but not for device
// code acquiring it: none does.
__device__ __forceinline__ void CompleteSubmission(const Queue& q, unsigned int slot,
                                                   unsigned long long sequence,
                                                   bool acquired = false) {
  // Releases the tasks' results and acquires the other blocks' error
  // reports (each fenced before, or released by, the count that made this
  // one the last).
  // Where every task's outputs are in device memory (kCompletionScopeGpu),
  // a gpu-scope fence: the results are in device memory before the word is
  // stored, where later GPU work and copies read them. The system fence took
  // 0.74-1.84 us of a call's completion where the gpu-scope one takes
  // 0.51-0.64 (H200, session 37: bench/results/experiments/
  // completion_fence_ab_session37.txt); it also orders a task's stores to
  // mapped host memory, which the other does not.
  if (q.completion_scope == kCompletionScopeGpu) {
    if (!acquired) __threadfence();
  } else {
    __threadfence_system();
  }
  WorkerStatus* record = q.slot_status + slot;
  const unsigned int error = Volatile(&record->error);
  if (error != 0) {
    SubmissionError* out = q.slot_errors + slot;
    StoreVolatile(&out->status.task_id, Volatile(&record->task_id));
    StoreVolatile(&out->status.detail, Volatile(&record->detail));
    StoreVolatile(&out->status.error, error);
    StoreVolatile(&out->sequence, sequence);
    StoreVolatile(&record->error, 0u);
    __threadfence_system();  // the record before the completion
  }
  StoreVolatile(q.done + slot, sequence);
  // The idle clock restarts before in_flight drops (after the completion,
  // which the host is waiting for). Unfenced: a block may see in_flight at
  // 0 and still the older time; ShouldPark looks twice before it parks.
  atomicMax(&q.state->last_busy_ns, GlobalTimerNs());
  atomicSub(&q.state->in_flight, 1u);
}

// Thread 0 of a block: the block's part of the diagnostics. The watchdog's
// BlockActivity costs one 16-byte store per task; the trace, when on, one
// 32-byte record and its count per task (when off, one branch).
struct BlockRecorder {
  unsigned long long trace_count = 0;  // records this block wrote, all launches
  unsigned long long started = 0;      // tasks started in this launch
  unsigned long long start_ns = 0;     // of the running task, when tracing
  unsigned int tile = 0;               // the running task's tile index
  unsigned int sequence = 0;           // low bits of the running chain's submission

  // At the start of the kernel.
  __device__ void Begin(const Queue& q) {
    if (q.trace != nullptr && blockIdx.x < q.diagnostic_blocks) {
      trace_count = Volatile(q.trace_counts + blockIdx.x);
    }
  }
  // When a chain of submission slot `slot` starts (only the trace needs it).
  __device__ void StartChain(const Queue& q, unsigned int slot) {
    if (q.trace != nullptr) sequence = static_cast<unsigned int>(Volatile(q.sequences + slot));
  }
  // When the block starts tile `tile_index` of `task`.
  __device__ void Start(const Queue& q, const TaskDesc& task, unsigned int tile_index) {
    tile = tile_index;
    if (q.trace != nullptr) start_ns = GlobalTimerNs();
    if (blockIdx.x >= q.diagnostic_blocks) return;
    BlockActivity a;
    a.task_id = task.task_id;
    a.op = TraceOperator(task.logical_op, task.opcode);
    a.stamp = ++started;
    __stcg(reinterpret_cast<int4*>(q.activity + blockIdx.x), *reinterpret_cast<const int4*>(&a));
  }
  // When the started tile's operator has returned in every thread.
  __device__ void Finish(const Queue& q, const TaskDesc& task) {
    if (q.trace == nullptr || blockIdx.x >= q.diagnostic_blocks) return;
    Write(q, TraceOperator(task.logical_op, task.opcode), start_ns, task.task_id, sequence, tile,
          task.num_tiles == 0 ? 1u : task.num_tiles);
  }
  // Appends a record lasting from `start` until `end` (0: now) to the
  // block's ring.
  __device__ void Write(const Queue& q, unsigned int op, unsigned long long start,
                        unsigned int task_id, unsigned int record_sequence, unsigned int tile_index,
                        unsigned int num_tiles, unsigned long long end = 0) {
    const unsigned long long elapsed = (end != 0 ? end : GlobalTimerNs()) - start;
    TraceRecord r;
    r.start_ns = start;
    r.duration_ns = elapsed > 0xffffffffull ? 0xffffffffu : static_cast<unsigned int>(elapsed);
    r.task_id = task_id;
    r.sequence = record_sequence;
    r.op = op;
    r.tile = static_cast<unsigned short>(tile_index);
    r.num_tiles = static_cast<unsigned short>(num_tiles);
    r.generation = static_cast<unsigned int>(q.generation);
    int4* at = reinterpret_cast<int4*>(
        q.trace + static_cast<unsigned long long>(blockIdx.x) * q.trace_per_block +
        trace_count % q.trace_per_block);
    __stcg(at, reinterpret_cast<const int4*>(&r)[0]);
    __stcg(at + 1, reinterpret_cast<const int4*>(&r)[1]);
    StoreVolatile(q.trace_counts + blockIdx.x, ++trace_count);
  }
  // One of the queue's own records (kTraceAdmitOp, kTraceCompleteOp,
  // kTraceHelpOp) of the submission with sequence `submission`, from
  // `start` until `end` (0: now).
  __device__ void QueueEvent(const Queue& q, unsigned int op, unsigned long long start,
                             unsigned long long submission, unsigned long long end = 0) {
    if (q.trace == nullptr || blockIdx.x >= q.diagnostic_blocks) return;
    Write(q, op, start, kTraceNoTask, static_cast<unsigned int>(submission), 0, 1, end);
  }
  // When the block has nothing left to run.
  __device__ void Idle(const Queue& q) {
    if (blockIdx.x < q.diagnostic_blocks) {
      __stcg(reinterpret_cast<int4*>(q.activity + blockIdx.x), make_int4(0, 0, 0, 0));
    }
  }
};

// Thread 0 of a block: tasks (and popped helper references) finished by the
// block, counted locally and subtracted from their submission's `remaining`
// in one atomic when the block moves to another submission or goes idle. A
// submission completes when its count reaches zero.
struct Completions {
  unsigned int slot = kNoSlot;
  unsigned int count = 0;
  BlockRecorder* recorder = nullptr;  // records the completions it makes (tracing)
  // The block's results of what `count` holds are fenced already: RunChain
  // sets it after a fence when a lone tiled task's tiles are done in this
  // block, and clears it when the block starts a tile. The worker's loop
  // passes it to its Flush after a chain, which then skips its own fence
  // (about 0.25 us after another: bench/results/experiments/
  // queue_costs_h200.json); the other Flushes (in Add) fence as before, so
  // that only one inlined copy of Flush tests it.
  bool fenced = false;

  __device__ void Add(const Queue& q, unsigned int task_slot, unsigned int n) {
    if (task_slot != slot) {
      Flush(q);
      slot = task_slot;
    }
    count += n;
  }
  // `results_fenced`: the caller's `fenced`, or false.
  __device__ void Flush(const Queue& q, bool results_fenced = false) {
    if (count == 0) return;
    if (!results_fenced) __threadfence();  // the tasks' results before their completion
    // Read while this block's count still holds the slot (it may be reused
    // right after the completion), in flight together with the count.
    const unsigned long long sequence = Volatile(q.sequences + slot);
    if (atomicSub(q.remaining + slot, count) == count) {
      const bool traced = recorder != nullptr && q.trace != nullptr;
      const unsigned long long counted_ns = traced ? GlobalTimerNs() : 0;
      CompleteSubmission(q, slot, sequence);
      if (traced) recorder->QueueEvent(q, kTraceCompleteOp, counted_ns, sequence);
    }
    count = 0;
  }
};

}  // namespace queue
}  // namespace device
}  // namespace gpuos
