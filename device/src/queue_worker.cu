// The persistent worker: `gpuos_queue_worker`, one long-lived grid per GPU
// fed through the queue in gpuos/device/queue.h (docs/runtime.md).
//
// Every block loops: take a batch of ready tasks from the device ready ring
// and run each; else claim the next published submission, copy its graph
// from mapped host memory into the device mirrors, initialize its dependency
// counters, push its root tasks but the first and run that one itself; else,
// after idle_park_ns without work anywhere, exit (park).
//
// Running a task (RunChain): its descriptor comes from a window of
// kWindow consecutive descriptors held in shared memory (with each one's
// first successor), and its tensor descriptors from the previous task's when
// the indices repeat, so a chain step mostly touches shared memory only.
// When a task's only successor has this task as its only predecessor, the
// block runs it next without any atomic or fence (__syncthreads makes the
// results visible within the block). Otherwise it fences, decrements each
// successor's counter, runs the first that becomes ready and pushes the
// others. A task with num_tiles > 1 is split into tiles: the first block to
// claim one announces min(num_tiles, gridDim.x) - 1 helper tickets on the help
// board (helper references in the ready ring when the board is full) so other
// blocks join, and the block finishing the last tile completes the task
// (docs/runtime.md, "Tiles").
// Completions are counted per block and subtracted from the submission's
// `remaining` once per batch (queue_sync.cuh, Completions). A submission
// whose only task is tiled and travels inline runs as direct tiles instead
// (queue_direct.cuh: the poller that claims it names its helpers at once,
// and tiles are claimed and counted in the slot's DirectSlot).
//
// Launch: grid = one block per SM by default (all resident), block =
// kWorkerThreads, no dynamic shared memory, one parameter (QueueParams). At
// most kWorkerMaxRegisters registers a thread (its own __maxnreg__, and
// every other unit of the image compiled with that -maxrregcount, since the
// linked kernel takes the most that any callee uses), so that other
// kernels fit beside it.
#include "gpuos/device/abi.h"
#include "gpuos/device/op_call.cuh"
#include "gpuos/device/phase_timing.cuh"
#include "gpuos/device/queue.h"
#include "gpuos/device/queue_direct.cuh"
#include "gpuos/device/queue_sync.cuh"

namespace {

using gpuos::device::DecodeDirectBoard;
using gpuos::device::DirectBoardSequence;
using gpuos::device::DrainedLook;
using gpuos::device::kHelpBoardWords;
using gpuos::device::kMaxTaskTensors;
using gpuos::device::kNoDependencyCounter;
using gpuos::device::NodeState;
using gpuos::device::OpCall;
using gpuos::device::SecondLookConfirms;
using gpuos::device::Submission;
using gpuos::device::TaskDesc;
using gpuos::device::TensorDesc;
using namespace gpuos::device::queue;  // NOLINT: the worker's own helpers

constexpr unsigned int kWindow = 16;  // task descriptors cached per block
// An idle block's longest nap while a submission is in flight.
constexpr unsigned int kBusyIdleSleepNs = 256;
// A helper from the help board reads its submission's slot and claims its
// first tile while its window loads (0: in TakeHelperTicket and after the
// window, one round trip each, as before; an experiment:
// GPUOS_JIT_DEFINES=GPUOS_HELPER_EARLY_CLAIM=0).
#ifndef GPUOS_HELPER_EARLY_CLAIM
#define GPUOS_HELPER_EARLY_CLAIM 1
#endif
constexpr bool kHelperEarlyClaim = GPUOS_HELPER_EARLY_CLAIM != 0;
// A/B experiment (GPUOS_JIT_DEFINES=GPUOS_POLLER_QUIET_NS=N): while a
// submission is in flight, a poller reads the host's tail at most every N ns
// (0, the default: at full rate, as always). Eight pollers made every fence
// and PCIe read of a call several times slower (H200, session 38: bench/
// results/experiments/pollers_ab_session38.txt); with the default two, 4000
// changed nothing measurable (session 39: bench/results/experiments/
// poller_switches_ab_session39.txt). Never 0 while in flight: a submission at a gate may
// wait for a stream that waits for a later submission, which must be
// picked up.
#ifndef GPUOS_POLLER_QUIET_NS
#define GPUOS_POLLER_QUIET_NS 0
#endif
constexpr unsigned long long kPollerQuietNs = GPUOS_POLLER_QUIET_NS;
// A/B experiment (GPUOS_JIT_DEFINES=GPUOS_POLLER_FLAGS_EVERY=N): a poller
// reads the host's stop and keep_warm word with every Nth read of the tail
// instead of every one (1, the default), for half the pollers' PCIe reads;
// a stop or keep_warm is then seen up to N rounds later (an idle grid may
// park in the meantime despite a keep_warm).
#ifndef GPUOS_POLLER_FLAGS_EVERY
#define GPUOS_POLLER_FLAGS_EVERY 1
#endif
constexpr unsigned int kPollerFlagsEvery = GPUOS_POLLER_FLAGS_EVERY;
static_assert(kPollerFlagsEvery >= 1, "GPUOS_POLLER_FLAGS_EVERY: at least 1");
// ReadyEntry::slot of a help-board helper: "the slot is its task node's".
constexpr unsigned int kNodeSlot = 0x7fffffffu;

enum Action : int {
  kIdle = 0,
  kAgain,
  kRun,
  kAdmit,
  kAdmitDirect,
  kAdmitCached,
  kHelp,
  kDirect,
  kExit
};

// Per-block caches in shared memory. Valid for the tasks of the submissions
// admitted before they were filled: `Invalidate` at every new batch, since a
// finished submission's arena ranges are reused. Within a chain the block
// always holds something that keeps the submission in flight: a helper
// reference, its unflushed completions, or a tile it claimed and has not
// counted done (RunChain claims the next tile of a task before counting its
// previous one).
struct BlockCache {
  TaskDesc window[kWindow];               // descriptors [window_base, window_base + window_count)
  unsigned int first_successor[kWindow];  // kNoTask when none
  unsigned int window_base;
  unsigned int window_count;
  TensorDesc descs[2][kMaxTaskTensors];  // current task's tensors, previous task's
  int desc_index[2][kMaxTaskTensors];    // their arena indices (-1: none)
  unsigned int current;                  // which of descs[] the running task uses
  unsigned int helper_slot;              // RunChain's: a kNodeSlot helper's slot, once read
};

// All threads.
__device__ void Invalidate(BlockCache& cache) {
  if (threadIdx.x < 2 * kMaxTaskTensors) (&cache.desc_index[0][0])[threadIdx.x] = -1;
  if (threadIdx.x == 0) cache.window_count = 0;
  __syncthreads();
}

// All threads: descriptors [task, task + kWindow) and their first successors.
__device__ void LoadWindow(const Queue& q, BlockCache& cache, unsigned int task) {
  const unsigned int left = q.task_capacity - task;
  const unsigned int count = left < kWindow ? left : kWindow;
  for (unsigned int w = threadIdx.x; w < count * kTaskWords; w += blockDim.x) {
    reinterpret_cast<int4*>(cache.window)[w] =
        __ldcg(reinterpret_cast<const int4*>(q.tasks + task) + w);
  }
  __syncthreads();
  if (threadIdx.x < count) {
    const TaskDesc& t = cache.window[threadIdx.x];
    // Entries past the caller's submission may be stale or being written:
    // only those of its own successors are ever used, but reads stay in bounds.
    cache.first_successor[threadIdx.x] =
        t.successor_count == 0 || t.successor_begin >= q.successor_capacity
            ? kNoTask
            : __ldcg(q.successors + t.successor_begin);
  }
  if (threadIdx.x == 0) {
    cache.window_base = task;
    cache.window_count = count;
  }
  __syncthreads();
}

__device__ __forceinline__ bool InWindow(const BlockCache& cache, unsigned int task) {
  return task - cache.window_base < cache.window_count;
}

// Thread 0: announces the helper tickets of a tiled task on a free word of
// the help board; the tickets, their count in the submission's `remaining`
// and what the helpers read are set and fenced already. Returns how many
// helpers still need ready-ring entries: 0 when announced; when every word is
// taken, the tickets are taken back and those nobody took yet are returned.
__device__ unsigned int PostHelperTickets(const Queue& q, unsigned int task, unsigned int slot) {
  const unsigned long long word = EncodeReady(task, slot, true);
  // The task's own word first (usually free: one CAS); when it is taken, one
  // round trip reads the board and only words seen free are tried, so a
  // full board costs no CAS round per word.
  if (atomicCAS(&q.state->help_board[task % kHelpBoardWords], 0ull, word) == 0ull) return 0;
  unsigned long long seen[kHelpBoardWords];
#pragma unroll
  for (unsigned int i = 0; i < kHelpBoardWords; ++i) seen[i] = Volatile(&q.state->help_board[i]);
  for (unsigned int i = 1; i < kHelpBoardWords; ++i) {
    const unsigned int w = (task + i) % kHelpBoardWords;
    if (seen[w] == 0ull && atomicCAS(&q.state->help_board[w], 0ull, word) == 0ull) return 0;
  }
  const int left = atomicExch(&q.nodes[task].helper_tickets, 0);
  return left > 0 ? static_cast<unsigned int>(left) : 0u;
}

// The helpers of a tiled first root (Submission::first_root_tiles > 1):
// one per block that can run one of its other tiles at once.
__device__ __forceinline__ unsigned int FirstRootHelpers(const Submission& sub) {
  const unsigned int tiles = sub.first_root_tiles;
  return tiles <= 1 ? 0u : (tiles < gridDim.x ? tiles : gridDim.x) - 1u;
}

// One thread: stores word `i` of submission `sub`'s graph (the inline
// payload's order: tasks, tensors, then the successor entries four to a
// word) into the device mirrors. The last word of a task descriptor holds
// its dependency counter: the thread that stores it initializes the task's
// NodeState too; a tiled first root's with tile 0 claimed (by the admitting
// block) and its helper tickets set. The first word holds the flags: the
// admission's own kTaskTilesCountInSubmission is set or cleared there.
__device__ __forceinline__ void StoreGraphWord(const Queue& q, const Submission& sub,
                                               unsigned int slot, unsigned int i, int4 v) {
  const unsigned int task_words = sub.task_count * kTaskWords;
  const unsigned int tensor_words = sub.tensor_count * kTensorWords;
  if (i < task_words) {
    if (i % kTaskWords == 0) {  // TaskDesc::flags is the high half of .w (abi.h)
      const int flag = static_cast<int>(gpuos::device::kTaskTilesCountInSubmission) << 16;
      const bool counts =
          gpuos::device::SubmissionCountsTiles(sub.task_count, sub.first_root_tiles);
      v.w = counts ? v.w | flag : v.w & ~flag;
    }
    reinterpret_cast<int4*>(q.tasks + sub.task_begin)[i] = v;
    if (i % kTaskWords == kTaskWords - 1) {
      // TaskDesc's last word: dependency_counter, successor_begin,
      // successor_count, logical_op (abi.h checks the offset).
      const unsigned int deps = static_cast<unsigned int>(v.x);
      const unsigned int task = sub.task_begin + i / kTaskWords;
      const bool claimed_first = task == sub.first_root && sub.first_root_tiles > 1;
      NodeState node;
      node.pending = deps == kNoDependencyCounter ? 0u : deps;
      node.tiles_next = claimed_first ? 1u : 0u;
      node.tiles_done = 0;
      node.submission = slot;
      node.helper_tickets = claimed_first ? static_cast<int>(FirstRootHelpers(sub)) : 0;
      node.reserved[0] = node.reserved[1] = node.reserved[2] = 0;
      q.nodes[task] = node;
    }
  } else if (i < task_words + tensor_words) {
    reinterpret_cast<int4*>(q.tensors + sub.tensor_begin)[i - task_words] = v;
  } else {
    const unsigned int entries = sub.successor_count + sub.root_count;
    const unsigned int first = (i - task_words - tensor_words) * 4;
    const unsigned int values[4] = {static_cast<unsigned int>(v.x), static_cast<unsigned int>(v.y),
                                    static_cast<unsigned int>(v.z), static_cast<unsigned int>(v.w)};
#pragma unroll
    for (unsigned int k = 0; k < 4; ++k) {
      if (first + k >= entries) break;
      q.successors[sub.successor_begin + first + k] = values[k];
    }
  }
}

// All threads: copies a graph staged in the arenas (one too large for its
// ring slot) into the device mirrors, in StoreGraphWord's word order, eight
// loads in flight per thread so one pass costs about one PCIe round trip.
// Out of line: inlined into a worker short of registers
// (GPUOS_OPERATOR_PRESERVE, op_call.cuh), each loaded value was spilled as
// it arrived, the eight loads one round trip after another.
__device__ __noinline__ void CopyStagedGraph(const Queue& q, const Submission& sub,
                                             unsigned int slot) {
  const unsigned int task_words = sub.task_count * kTaskWords;
  const unsigned int tensor_words = sub.tensor_count * kTensorWords;
  const unsigned int entries = sub.successor_count + sub.root_count;
  const unsigned int total =
      gpuos::device::SubmissionPayloadWords(sub.task_count, sub.tensor_count, entries);
  const int4* tasks_in = reinterpret_cast<const int4*>(q.staged_tasks + sub.task_begin);
  const int4* tensors_in = reinterpret_cast<const int4*>(q.staged_tensors + sub.tensor_begin);
  const unsigned int* entries_in = q.staged_successors + sub.successor_begin;
  constexpr unsigned int kInFlight = 8;
  for (unsigned int base = threadIdx.x; base < total; base += kInFlight * blockDim.x) {
    int4 v[kInFlight];
#pragma unroll
    for (unsigned int j = 0; j < kInFlight; ++j) {
      const unsigned int i = base + j * blockDim.x;
      if (i < task_words) {
        v[j] = __ldcv(tasks_in + i);
      } else if (i < task_words + tensor_words) {
        v[j] = __ldcv(tensors_in + (i - task_words));
      } else if (i < total) {
        const unsigned int first = (i - task_words - tensor_words) * 4;
        int* parts = &v[j].x;
#pragma unroll
        for (unsigned int k = 0; k < 4; ++k) {
          parts[k] = first + k < entries ? static_cast<int>(__ldcv(entries_in + first + k)) : 0;
        }
      }
    }
#pragma unroll
    for (unsigned int j = 0; j < kInFlight; ++j) {
      const unsigned int i = base + j * blockDim.x;
      if (i < total) StoreGraphWord(q, sub, slot, i, v[j]);
    }
  }
}

// All threads: copies submission `index` in, initializes its tasks, pushes
// its roots but the first, which it returns (kNone when the graph is empty)
// for the caller to run. `words`: the whole ring slot, read by the caller
// (ReadSlot; one PCIe round trip), with its record and gate word parsed
// (`sub`, shared, and `slot_gate_word`; ParseSlot): a graph that fits in
// the slot is copied from those words, a larger one from the staging
// arenas (a second round trip).
// The host lists the roots in
// the order they should start (a scheduler plugin's, runtime_plugins.h): the
// first is run here, the others go into the ready ring in that order. When
// the first root is tiled, its tile 0 is this block's (*first_claimed) and
// its helpers are announced here, before the caller loads it. Only index %
// submission_capacity (the ring slot) is used, so a gate retry passes the
// slot. A submission whose gate is closed is not admitted: a retry entry is
// pushed and kNone returned.
__device__ unsigned long long Admit(const Queue& q, unsigned long long index,
                                    const SlotWords& words, const Submission& sub,
                                    unsigned long long slot_gate_word, bool* first_claimed) {
  __shared__ unsigned long long push_base;
  __shared__ int gate_closed;
  const unsigned int slot = static_cast<unsigned int>(index % q.submission_capacity);
  *first_claimed = false;
  if (sub.gate != 0) {
    // Ordered after another CUDA stream: while its gate is closed, a retry
    // entry goes back into the ready ring (the host reserved room for it) and
    // the block serves other work; the block that pops the entry tries again.
    // At shutdown the entry is dropped: the host has given up on the graph.
    if (threadIdx.x == 0) {
      gate_closed = !GateOpen(sub, slot_gate_word);
      if (gate_closed && Volatile(&q.control->stop) == 0) {
        PushReady(q, EncodeReady(gpuos::device::kGateRetryTask, slot, false));
      }
      // Dropped by the host (Runtime::DropGated): complete it as an empty
      // graph.
      if (!gate_closed && sub.gate == gpuos::device::kSlotGate &&
          (slot_gate_word & gpuos::device::kGateDropped) != 0) {
        gate_closed = 1;
        q.sequences[slot] = sub.sequence;
        CompleteSubmission(q, slot, sub.sequence);
      }
    }
    __syncthreads();
    if (gate_closed) return kNone;
  }
  if (threadIdx.x == 0 && sub.root_count > 1) {
    push_base = atomicAdd(&q.state->ready_tail, sub.root_count - 1ull);
  }
  if (sub.inline_words != 0) {
#pragma unroll
    for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
      const unsigned int w = threadIdx.x + j * blockDim.x;
      if (w >= gpuos::device::kSubmissionRecordWords &&
          w - gpuos::device::kSubmissionRecordWords < sub.inline_words) {
        StoreGraphWord(q, sub, slot, w - gpuos::device::kSubmissionRecordWords, words.w[j]);
      }
    }
  } else {
    CopyStagedGraph(q, sub, slot);
  }
  const unsigned int helpers = sub.task_count == 0 ? 0u : FirstRootHelpers(sub);
  if (threadIdx.x == 0) {
    // The helpers' references count too; a lone tiled task's tiles count
    // one by one (SubmissionCountsTiles).
    const bool counts = gpuos::device::SubmissionCountsTiles(sub.task_count, sub.first_root_tiles);
    q.remaining[slot] = (counts ? sub.first_root_tiles : sub.task_count) + helpers;
    q.sequences[slot] = sub.sequence;
  }
  // No fence here: whatever hands a task of this submission to another
  // block (a ready-ring entry, the help board) fences first, after this
  // barrier, so the copies and counters reach those blocks before the task.
  __syncthreads();
  if (sub.task_count == 0) {
    if (threadIdx.x == 0) CompleteSubmission(q, slot, sub.sequence);
    return kNone;
  }
  if (threadIdx.x == 0 && helpers != 0) {
    __threadfence();  // every thread's copies and nodes (ordered by the barrier) first
    const unsigned int left = PostHelperTickets(q, sub.first_root, slot);
    // Those the board could not take go into the ready ring.
    if (left != 0) {
      const unsigned long long base = atomicAdd(&q.state->ready_tail, left);
      for (unsigned int h = 0; h < left; ++h) {
        WriteReady(q, base + h, EncodeReady(sub.first_root, slot, true));
      }
    }
  }
  *first_claimed = sub.first_root_tiles > 1;
  // The other roots, read back from the successor mirror (L2) this block
  // has just written.
  bool fenced = false;
  for (unsigned int r = threadIdx.x + 1; r < sub.root_count; r += blockDim.x) {
    if (!fenced) {
      __threadfence();  // every thread's copies and node writes (ordered by the barrier) first
      fenced = true;
    }
    const unsigned int root = __ldcg(q.successors + sub.successor_begin + sub.successor_count + r);
    WriteReady(q, push_base + r - 1, EncodeReady(root, slot, false));
  }
  return EncodeReady(sub.first_root, slot, false);
}

// All threads: loads the descriptors of the tensors `indices[0, num_tensors)`
// into cache.descs[previous ^ 1], reusing those of cache.descs[previous]
// where the index repeats, and records their indices. One barrier, at the
// end. Returns whether any index is out of range (its descriptor is not
// loaded and its cache entry is left invalid). `indices` must not change
// during the call.
__device__ bool LoadTensors(const Queue& q, BlockCache& cache, const int* indices,
                            unsigned int num_tensors, unsigned int previous) {
  const unsigned int next = previous ^ 1u;
  int bad = 0;
  for (unsigned int w = threadIdx.x; w < num_tensors * kTensorWords; w += blockDim.x) {
    const unsigned int k = w / kTensorWords;
    const unsigned int word = w % kTensorWords;
    const int index = indices[k];
    if (index < 0 || static_cast<unsigned int>(index) >= q.tensor_capacity) {
      bad = 1;
      continue;
    }
    int cached = -1;
#pragma unroll
    for (int j = 0; j < kMaxTaskTensors; ++j) {
      if (cache.desc_index[previous][j] == index) cached = j;
    }
    reinterpret_cast<int4*>(&cache.descs[next][k])[word] =
        cached >= 0 ? reinterpret_cast<const int4*>(&cache.descs[previous][cached])[word]
                    : __ldcg(reinterpret_cast<const int4*>(q.tensors + index) + word);
  }
  if (threadIdx.x < kMaxTaskTensors) {
    const int index = threadIdx.x < num_tensors ? indices[threadIdx.x] : -1;
    cache.desc_index[next][threadIdx.x] =
        index < 0 || static_cast<unsigned int>(index) >= q.tensor_capacity ? -1 : index;
  }
  return __syncthreads_or(bad) != 0;
}

// Thread 0: the first tensor of `task` whose index is out of range.
__device__ unsigned int FirstBadTensor(const Queue& q, const TaskDesc& task,
                                       unsigned int num_tensors) {
  for (unsigned int k = 0; k < num_tensors; ++k) {
    if (task.tensors[k] < 0 || static_cast<unsigned int>(task.tensors[k]) >= q.tensor_capacity) {
      return k;
    }
  }
  return 0;
}

// Thread 0: the only successor of window entry `at` when this task is its
// only predecessor (it is then ready as soon as the task is done and nobody
// else touches its counter), else kNoTask.
__device__ unsigned int SoleSuccessor(const Queue& q, const BlockCache& cache, unsigned int at) {
  const unsigned int first = cache.first_successor[at];
  if (cache.window[at].successor_count != 1 || first == kNoTask) return kNoTask;
  const unsigned int deps = InWindow(cache, first)
                                ? cache.window[first - cache.window_base].dependency_counter
                                : __ldcg(&q.tasks[first].dependency_counter);
  return deps == 1 ? first : kNoTask;
}

// Thread 0: SoleSuccessor of window entry `at` when it is a tiled task, else
// kNoTask: the task a block that finished the last tile it could claim of
// entry `at`'s task joins once that task is done (RunChain).
__device__ unsigned int TiledSoleSuccessor(const Queue& q, const BlockCache& cache,
                                           unsigned int at) {
  const unsigned int next = SoleSuccessor(q, cache, at);
  if (next == kNoTask) return kNoTask;
  const unsigned int tiles = InWindow(cache, next)
                                 ? cache.window[next - cache.window_base].num_tiles
                                 : __ldcg(&q.tasks[next].num_tiles);
  return tiles > 1 ? next : kNoTask;
}

// Thread 0: waits until all `tiles` tiles of `task` are done, then acquires
// their results. Every tile has been claimed by a running block when this is
// called, so the wait ends within a tile's time; the caller holds a
// completion of the task's submission, so the node is not reused meanwhile.
__device__ void WaitForTiles(const Queue& q, unsigned int task, unsigned int tiles) {
  while (Volatile(&q.nodes[task].tiles_done) < tiles) __nanosleep(32);
  __threadfence();
}

// Thread 0, claiming tile 0 of a tiled task whose `helpers` are counted in
// its submission's `remaining`: sets the task's helper tickets and announces
// it on a free word of the help board. Returns how many helpers still need
// ready-ring entries: 0 when announced; when every word is taken, the
// tickets are taken back and those nobody took yet are returned.
__device__ unsigned int AnnounceHelpers(const Queue& q, unsigned int task, unsigned int slot,
                                        unsigned int helpers) {
  __threadfence();  // the count in `remaining` and the predecessors' results first
  StoreVolatile(&q.nodes[task].helper_tickets, static_cast<int>(helpers));
  __threadfence();  // the tickets before the announcement
  return PostHelperTickets(q, task, slot);
}

// Thread 0 of an idle block: a helper ticket of a task on the help board, as
// the ready entry of a helper (its submission's slot read from the task's
// node), or kNone. A word whose tickets are gone is cleared. The direct
// board is read in flight with the help board (its line): when it names a
// submission this block should help run directly (DirectHelpWanted,
// `*direct_seen`), no ticket is taken and *direct gets the board's word.
__device__ unsigned long long TakeHelperTicket(const Queue& q, unsigned long long* direct_seen,
                                               unsigned long long* direct) {
  unsigned long long words[kHelpBoardWords];
#pragma unroll
  for (unsigned int i = 0; i < kHelpBoardWords; ++i) words[i] = Volatile(&q.state->help_board[i]);
  *direct = 0;
  if (kDirectTiles) {
    // Not an acquire: what a helper reads of the submission is published by
    // the claim word's opening, which it acquires (HelpRunDirect).
    const unsigned long long board = Volatile(&q.state->direct_board);
    if (DirectHelpWanted(board, q.pollers, direct_seen)) {
      *direct = board;
      return kNone;
    }
  }
  const unsigned int first = blockIdx.x % kHelpBoardWords;
  for (unsigned int j = 0; j < kHelpBoardWords; ++j) {
    const unsigned int i = (first + j) % kHelpBoardWords;
    if (words[i] == 0) continue;
    const unsigned int task = DecodeReady(words[i]).task;
    if (task >= q.task_capacity) {  // never written so; cleared all the same
      atomicCAS(&q.state->help_board[i], words[i], 0ull);
      continue;
    }
    const int before = atomicSub(&q.nodes[task].helper_tickets, 1);
    if (before <= 1) atomicCAS(&q.state->help_board[i], words[i], 0ull);  // none left
    if (before > 0) {
      __threadfence();  // the announcer's results and node before this helper's reads
      // The ticket holds the submission (it counts in `remaining`), so the
      // node's slot is this task's until the helper is done: RunChain reads
      // it with the task's window (kNodeSlot).
      return EncodeReady(task, kHelperEarlyClaim ? kNodeSlot : Volatile(&q.nodes[task].submission),
                         true);
    }
  }
  return kNone;
}

// All threads: runs the task of ready entry `entry` (its tiles) and then the
// successors that became ready in this block, until there is nothing left
// to run here.
//
// A step of a chain (an untiled task whose sole successor has it as sole
// predecessor) costs three barriers: after thread 0 has copied the task and
// decided its successor, after the tensor descriptors, after the operator.
// Shared values written by thread 0 before a barrier are read by the others
// between that barrier and the next one, so that thread 0 can rewrite them
// in the next step without another barrier.
__device__ void RunChain(const Queue& q, unsigned long long entry, BlockCache& cache,
                         unsigned char* scratch, unsigned int* completed, Completions* completions,
                         BlockRecorder* recorder, bool start_claimed = false) {
  __shared__ __align__(16) TaskDesc tile;
  __shared__ unsigned int next_task;
  __shared__ unsigned int sole_successor;
  __shared__ int claimed;
  // The task's operator, resolved by thread 0 before the first barrier of a
  // step, so that the table loads overlap its other work.
  __shared__ gpuos::device::OpFunction op_function;
  __shared__ unsigned int op_slot;
  const ReadyEntry start = DecodeReady(entry);
  // Thread 0's: the tile of `task` this block claimed before counting its
  // previous tile done (kNoTask: none; claim at the top of the step), tile
  // 0 of the start task when Admit claimed it and announced its helpers
  // (start_claimed), or a board helper's first claim.
  unsigned int claimed_ahead = start_claimed ? 0u : kNoTask;
  unsigned int slot = start.slot;
  if (slot == kNodeSlot) {
    // A helper from the help board: its submission's slot, its first
    // tile's claim and its task's window, in flight together (the claim
    // before the descriptor says how many tiles there are: one beyond
    // them claims nothing, as at the top of a step).
    unsigned int node_slot = 0;
    if (threadIdx.x == 0) {
      claimed_ahead = atomicAdd(&q.nodes[start.task].tiles_next, 1u);
      node_slot = Volatile(&q.nodes[start.task].submission);
    }
    LoadWindow(q, cache, start.task);
    if (threadIdx.x == 0) cache.helper_slot = node_slot;
    __syncthreads();
    slot = cache.helper_slot;
  }
  if (threadIdx.x == 0) {
    if (start.helper) completions->Add(q, slot, 1);
    recorder->StartChain(q, slot);
  }
  unsigned int current = cache.current;  // thread 0 keeps cache.current equal to it
  unsigned int task = start.task;
  unsigned int tile_index = 0;  // thread 0's: the running tile's index in its task
  bool announced = start_claimed;
  while (task != kNoTask) {
    GPUOS_PHASE_BEGIN(step_clock);
    GPUOS_PHASE_BEGIN(phase);
    if (!InWindow(cache, task)) LoadWindow(q, cache, task);
    const unsigned int at = task - cache.window_base;
    const TaskDesc& desc = cache.window[at];
    if (threadIdx.x < 32) {
      unsigned int helpers = 0;
      unsigned long long helper_base = 0;
      unsigned int t = 0;
      if (threadIdx.x == 0) {
#pragma unroll
        for (unsigned int w = 0; w < kTaskWords; ++w) {
          reinterpret_cast<int4*>(&tile)[w] = reinterpret_cast<const int4*>(&desc)[w];
        }
        const unsigned int tiles = desc.num_tiles == 0 ? 1u : desc.num_tiles;
        // An untiled task is pushed or handed over exactly once: no claim.
        if (tiles == 1) {
          t = 0;
        } else if (claimed_ahead != kNoTask) {
          t = claimed_ahead;
          claimed_ahead = kNoTask;
        } else {
          t = atomicAdd(&q.nodes[task].tiles_next, 1u);
        }
        claimed = t < tiles;
        tile_index = t;
        const bool announce = !announced;
        announced = false;
        if (claimed && tiles > 1) {
          if (t == 0 && announce) {
            helpers = (tiles < gridDim.x ? tiles : gridDim.x) - 1;
            if (helpers != 0) {
              atomicAdd(q.remaining + slot, helpers);  // before they can be taken
              helpers = AnnounceHelpers(q, task, slot, helpers);
              // Those the board could not take go into the ready ring.
              if (helpers != 0) helper_base = atomicAdd(&q.state->ready_tail, helpers);
            }
          }
          TileItems(desc, tiles, t, &tile.begin, &tile.end);
        }
      }
      // The helper references, written by the warp's lanes at once: each
      // ring write first waits for its position to be free (a round trip),
      // so one after another they cost a round trip per helper (a
      // Linear(256, 256)'s 8 put 5.9 us between the previous task's end and
      // its first tile, 3.9 us written at once: task_chain_probe_4ea6ae4 and
      // _3648c82.json in bench/results/experiments). Each
      // writer fences after the warp barrier, so lane 0's count and fence and
      // the predecessors' results come first.
      helpers = __shfl_sync(0xffffffffu, helpers, 0);
      if (helpers != 0) {
        helper_base = __shfl_sync(0xffffffffu, helper_base, 0);
        const unsigned long long reference = EncodeReady(task, slot, true);
        for (unsigned int h = threadIdx.x; h < helpers; h += 32) {
          __threadfence();
          WriteReady(q, helper_base + h, reference);
        }
      }
      if (threadIdx.x == 0) {
        if (claimed) {
          unsigned int op_slot_found = 0;
          op_function = gpuos_resolve_operator(tile, &op_slot_found);
          op_slot = op_slot_found;
        }
        const unsigned int tiles = desc.num_tiles == 0 ? 1u : desc.num_tiles;
        sole_successor = tiles == 1 ? SoleSuccessor(q, cache, at) : kNoTask;
        if (claimed) {
          recorder->Start(q, desc, t);
          completions->fenced = false;  // the tile's results are not fenced yet
        }
      }
    }
    __syncthreads();
    if (!claimed) return;
    const unsigned int tiles = tile.num_tiles == 0 ? 1u : tile.num_tiles;
    const unsigned int chain_next = sole_successor;
    const unsigned int num_tensors =
        tile.num_tensors <= kMaxTaskTensors ? tile.num_tensors : kMaxTaskTensors;
    GPUOS_PHASE_MARK(phase, 0);
    bool bad_tensor = false;
    if (num_tensors != 0) {
      // The operator indexes the block's descriptor copies: 0, 1, ...
      // (LoadTensors reads the window's indices, not these).
      if (threadIdx.x == 0) {
        for (unsigned int k = 0; k < num_tensors; ++k) tile.tensors[k] = static_cast<int>(k);
      }
      bad_tensor = LoadTensors(q, cache, desc.tensors, num_tensors, current);
      current ^= 1u;
      if (threadIdx.x == 0) cache.current = current;
    }
    GPUOS_PHASE_MARK(phase, 1);
    OpCall call;
    call.task = &tile;
    call.tensors = cache.descs[current];
    call.scratch = scratch;
    call.scratch_bytes = gpuos::device::kWorkerScratchBytes;
    call.num_tensors = num_tensors;
    call.status = q.slot_status + slot;  // the submission's own error record
    call.table = num_tensors != 0 && !bad_tensor ? q.tensors + desc.tensors[0] : nullptr;
    // LoadTensors checked the indices and num_tensors is clamped, so only
    // the slot is left to check (gpuos_task_operator does all three).
    const gpuos::device::OpFunction op = op_function;
    if (!bad_tensor) {
      if (op != nullptr) {
        // The operators' calling convention (op_call.cuh; the default ABI
        // unless GPUOS_OPERATOR_PRESERVE is set).
        GPUOS_OPERATOR_ABI
        op(call);
      } else if (op_slot != 0 && threadIdx.x == 0) {
        gpuos::device::ReportError(call, gpuos::device::kWorkerBadOpcode, op_slot);
      }
    } else if (threadIdx.x == 0) {
      gpuos::device::ReportError(call, gpuos::device::kWorkerBadTensorIndex,
                                 FirstBadTensor(q, desc, num_tensors));
    }
    GPUOS_PHASE_MARK(phase, 2);
    __syncthreads();  // the results, and the scratch free for the next task
    GPUOS_PHASE_MARK(phase, 3);
    if (threadIdx.x == 0) recorder->Finish(q, tile);
    if (chain_next != kNoTask) {
      // Sole successor, sole predecessor: the barrier above made the results
      // visible to this block, which runs it next; no atomic, no fence.
      if (threadIdx.x == 0) {
        ++*completed;  // flushed when the block goes idle: a shared counter is a hot spot
        completions->Add(q, slot, 1);
      }
      task = chain_next;
      GPUOS_PHASE_MARK(phase, 4);
      GPUOS_PHASE_MARK(step_clock, 5);
      continue;
    }
    if (threadIdx.x == 0) {
      ++*completed;
      unsigned int next = kNoTask;
      unsigned int done = 1;
      unsigned int ahead = tiles;
      unsigned int join = kNoTask;
      unsigned int taken_back = 0;  // helper tickets this block took back
      // The only task of its submission, tiled: its tiles count there (Admit).
      const bool counts_in_submission =
          (tile.flags & gpuos::device::kTaskTilesCountInSubmission) != 0;
      if (tiles > 1) {
        // The next tile is claimed before this one counts as done: until
        // then the task, and with it the submission, cannot finish, so the
        // node and this block's window still hold this task. Claimed after
        // the count, a block that had stalled could take a tile of the next
        // submission in the same arena entry and run it with the old
        // descriptor (one racecheck run: an element one add short;
        // bench/results/experiments/help_board_race_5934a45.txt).
        // The block running the last tile index claimed it, so every tile
        // is claimed: no claim can succeed (one round trip less; the last
        // tile of a stitched program is its final stage's, usually the last
        // to finish).
        ahead = tile_index + 1 >= tiles ? tiles : atomicAdd(&q.nodes[task].tiles_next, 1u);
        // When every other tile had a helper ticket of its own (tiles <=
        // blocks), the tickets nobody took are taken back at once, in flight
        // together with the claim (one round trip less before the count): a
        // helper that has not come by the time a tile is done is not needed,
        // the blocks already running claim what is left.
        int early_left = 0;
        if (tiles <= gridDim.x) early_left = atomicExch(&q.nodes[task].helper_tickets, 0);
        if (counts_in_submission && tile_index + 1 >= tiles) {
          // The last tile index of a submission's only task (below): its
          // results' fence is issued now, in flight with the exchange.
          __threadfence();
          completions->fenced = true;
        }
        // No tile left for this block: it will join the task's tiled sole
        // successor once the task is done (the blocks that ran its tiles
        // start the successor's tiles at once, instead of going back to the
        // idle loop and finding them through the help board). It holds one
        // completion of the submission from before its tile counts as done,
        // so the submission cannot finish, and the task's node and the
        // window cannot be reused, while it waits; given back with the
        // block's other completions.
        if (ahead >= tiles) {
          if (!counts_in_submission) join = TiledSoleSuccessor(q, cache, at);
          // Every tile is claimed: a helper that came now would find nothing
          // to run, so the tickets nobody took are taken back here (above
          // when tiles <= blocks; they count as helpers that came and left),
          // while this tile's results are fenced, not after the count below.
          // Whichever block takes them counts them; the block finishing the
          // last tile has always been here.
          if (tiles > gridDim.x) early_left = atomicExch(&q.nodes[task].helper_tickets, 0);
        }
        taken_back = early_left > 0 ? static_cast<unsigned int>(early_left) : 0u;
        if (join != kNoTask) {
          atomicAdd(q.remaining + slot, 1u);
          completions->Add(q, slot, 1);
        }
        if (counts_in_submission) {
          // The submission's only task: this tile counts in `remaining`
          // with the block's other completions (no successor waits for the
          // task). Its results are fenced before that count: here (or above)
          // when the block has no tile of the task left, so that
          // Completions::Flush need not fence again, else by the Flush after
          // a later tile.
          done = 0;  // not counted per task: the branch below that ends a tile's block
          if (ahead >= tiles && !completions->fenced) {
            __threadfence();
            completions->fenced = true;
          }
        } else {
          __threadfence();  // this tile's results (and the hold) before the count others read
          done = atomicAdd(&q.nodes[task].tiles_done, 1u) + 1;
          // Acquire the other tiles' results for the successors; without
          // successors, the completion's own fence does (Completions::Flush).
          if (done == tiles && tile.successor_count != 0) __threadfence();
        }
      }
      // The tickets taken back, and a lone task's tile (one Add: each is
      // an inlined copy of Flush).
      const unsigned int counted = taken_back + (counts_in_submission ? 1u : 0u);
      if (counted != 0) completions->Add(q, slot, counted);
      if (ahead < tiles) {
        next = task;  // the tile claimed above
        claimed_ahead = ahead;
      } else if (done < tiles) {
        // The blocks still running tiles finish the task; join its
        // successor after them, or go back to the idle loop.
        if (join != kNoTask) WaitForTiles(q, task, tiles);
        next = join;
      } else {
        // (Helper tickets nobody took were taken back above.)
        completions->Add(q, slot, 1u);
        const unsigned int count = tile.successor_count;
        const unsigned int first = cache.first_successor[at];
        const unsigned int sole = tiles > 1 ? SoleSuccessor(q, cache, at) : kNoTask;
        if (sole != kNoTask) {
          next = sole;
        } else if (count != 0) {
          __threadfence();  // this task's results before its successors start
          for (unsigned int s = 0; s < count; ++s) {
            const unsigned int successor = s == 0 && first != kNoTask
                                               ? first
                                               : __ldcg(q.successors + tile.successor_begin + s);
            if (atomicSub(&q.nodes[successor].pending, 1u) == 1u) {
              if (next == kNoTask) {
                next = successor;
              } else {
                PushReady(q, EncodeReady(successor, slot, false));
              }
            }
          }
          if (next != kNoTask) __threadfence();  // acquire the predecessors' results
        }
      }
      next_task = next;
    }
    __syncthreads();
    task = next_task;
    GPUOS_PHASE_MARK(phase, 4);
    GPUOS_PHASE_MARK(step_clock, 5);
  }
}

// Thread 0's view of its grid's park (ShouldPark).
struct ParkWatch {
  // The submissions this block may claim: those below it (PeekSubmission's
  // claim_below). ~0 while the grid runs; once the grid parks
  // (QueueDeviceState::parking_generation), 0 until the park's bound is
  // known (park_run_until), then the bound (queue.h, ParkClaimBound).
  unsigned long long claim_below;
  // The first look that saw the queue drained and idle with the current
  // idle clock (queue.h, SecondLookConfirms).
  DrainedLook drained;
  __device__ bool leaving() const { return claim_below != ~0ull; }
};

// Thread 0: whether the grid has begun to park, looked at now (an L2
// load); a block that sees it claims nothing until the park's bound is
// known.
__device__ __forceinline__ void LookForPark(const Queue& q, ParkWatch* watch) {
  if (!watch->leaving() &&
      Volatile(&q.state->parking_generation) == static_cast<unsigned int>(q.generation)) {
    watch->claim_below = gpuos::device::ParkClaimBound(gpuos::device::ParkPhase::kBoundUnknown, 0);
  }
}

// Mirrors what the host reads of the worker, and announces the park
// (QueueControl::parked_generation): at the park's start, and again by the
// last block to exit (the mirrors, up to date).
__device__ __noinline__ void AnnouncePark(const Queue& q, unsigned long long started_ns,
                                          long long started_clock) {
  StoreVolatile(&q.control->completed_tasks,
                static_cast<unsigned long long>(Volatile(&q.state->status.completed)));
  const unsigned long long elapsed_ns = GlobalTimerNs() - started_ns;
  if (elapsed_ns > 0) {
    StoreVolatile(
        &q.control->sm_clock_khz,
        static_cast<unsigned long long>(clock64() - started_clock) * 1000000ull / elapsed_ns);
  }
  StoreVolatile(&q.control->parked_generation, q.generation);
  __threadfence_system();
}

// The block that began the park: announces it, then reads the tail once
// more and publishes that as the park's bound. The host publishes then
// reads parked_generation; this block writes it then reads the tail: a
// submission this read misses is one whose Submit sees the park and
// launches a new grid (which waits behind this one on the worker's
// stream), so no submission is stranded (both may act for one: then an
// extra grid is launched, which is harmless).
__device__ __noinline__ void AnnounceParkAndBound(const Queue& q, unsigned long long started_ns,
                                                  long long started_clock, ParkWatch* watch) {
  AnnouncePark(q, started_ns, started_clock);
  const unsigned long long run_until = LoadAcquireSys(&q.control->submit_tail);
  StoreVolatile(&q.state->park_run_until, run_until);
  __threadfence();
  StoreVolatile(&q.state->park_bound_generation, static_cast<unsigned int>(q.generation));
  watch->claim_below = gpuos::device::ParkClaimBound(gpuos::device::ParkPhase::kBounded, run_until);
}

// Thread 0 of an idle block: true when the block should exit now. A
// poller's `host_flags` are the stop and keep_warm words its claim attempt
// read this round (PeekSubmission); the others read host memory here
// only once they have been idle for idle_park_ns.
//
// The grid parks when a block and the queue have been idle for
// idle_park_ns (QueueDeviceState::last_busy_ns: no claim or completion)
// with nothing in flight or published, seen on two looks. That block
// begins the park for the whole grid (parking_generation) and bounds it
// (AnnounceParkAndBound); every block then claims only what lies below the
// bound and exits once that and what is in flight are done, so no block
// exits before the bound is known and a call that lands while the grid
// parks runs on all of its blocks. Blocks that exited one by one, each
// when it had been idle long enough, left such a call to the few still
// there: a process ran mlp batch 1 on 5 of 132 blocks for all its 210
// calls (session 26), and after session 26's rule (the blocks that saw the
// park left at once, the last stayed for what it saw) decoder_step
// unstitched still ran a call that landed in a park on 1 to 3 blocks for
// 3.1 ms against 340 us (bench/results/experiments/gpu_checks_session27.txt,
// and the park probe in gpu_checks_session28.txt). With the claim alone as
// the queue's clock, a call longer than idle_park_ns let the blocks it
// left idle exit at its completion: decoder_step unstitched parked at
// every call and took 1704 us (gpu_checks_session26.txt); the completion
// counts since.
__device__ bool ShouldPark(const Queue& q, unsigned long long idle_since,
                           unsigned long long started_ns, long long started_clock,
                           unsigned int max_pollers, unsigned long long host_flags,
                           unsigned int idle_rounds, bool* poller, ParkWatch* watch) {
  bool stop;
  if (*poller) {
    const unsigned long long words = host_flags;
    stop = static_cast<unsigned int>(words) != 0;
    if (stop && Volatile(&q.state->stop_seen) == 0) StoreVolatile(&q.state->stop_seen, 1u);
    const unsigned int keep_warm = static_cast<unsigned int>(words >> 32);
    if (keep_warm != Volatile(&q.state->keep_warm_seen)) {
      // The host expects work soon (Runtime::KeepWarm): idle from now on.
      StoreVolatile(&q.state->keep_warm_seen, keep_warm);
      atomicMax(&q.state->last_busy_ns, GlobalTimerNs());
    }
  } else {
    stop = Volatile(&q.state->stop_seen) != 0;
  }
  if (!stop) {
    const unsigned int generation = static_cast<unsigned int>(q.generation);
    if (*poller || (idle_rounds & 7u) == 0) LookForPark(q, watch);
    if (!watch->leaving()) {
      const unsigned long long now = GlobalTimerNs();
      if (now < idle_since || now - idle_since < q.idle_park_ns) return false;
      const unsigned long long last_busy = Volatile(&q.state->last_busy_ns);
      if (now < last_busy || now - last_busy < q.idle_park_ns) return false;
      const bool busy = Volatile(&q.state->in_flight) != 0;
      if (busy || LoadAcquireSys(&q.control->submit_tail) != Volatile(&q.state->submit_head)) {
        // Work waits and the pollers may have parked: poll for it, unless
        // enough pollers run (QueueDeviceState::pollers_alive says why).
        if (!busy && !*poller) {
          if (atomicAdd(&q.state->pollers_alive, 1u) < max_pollers) {
            *poller = true;
          } else {
            atomicSub(&q.state->pollers_alive, 1u);
          }
        }
        return false;
      }
      // Park on a second look only (queue.h, SecondLookConfirms): a claim
      // and a completion each update in_flight and the clock with two
      // unfenced atomics, so one look can read the clock before the update
      // lands and in_flight after (that it mattered is not shown:
      // gpu_checks_session27.txt).
      if (!SecondLookConfirms(&watch->drained, static_cast<unsigned int>(last_busy),
                              static_cast<unsigned int>(now))) {
        return false;
      }
      watch->claim_below =
          gpuos::device::ParkClaimBound(gpuos::device::ParkPhase::kBoundUnknown, 0);
      if (atomicExch(&q.state->parking_generation, generation) != generation) {
        // This block begins the park; it polls for what lies below the bound.
        AnnounceParkAndBound(q, started_ns, started_clock, watch);
        if (!*poller) atomicAdd(&q.state->pollers_alive, 1u);
        *poller = true;
      }
    }
    if (watch->claim_below == 0) {
      // The bound: not known until the block that began the park has read
      // it (0 as a bound reads it again, harmlessly).
      if (Volatile(&q.state->park_bound_generation) != generation) return false;
      __threadfence();
      watch->claim_below = gpuos::device::ParkClaimBound(gpuos::device::ParkPhase::kBounded,
                                                         Volatile(&q.state->park_run_until));
    }
    // What this grid claimed or may still claim runs on all of its blocks.
    if (Volatile(&q.state->submit_head) < watch->claim_below ||
        Volatile(&q.state->in_flight) != 0) {
      return false;
    }
  }
  // Stopped, or parked with this grid's work done.
  if (atomicSub(&q.state->alive, 1u) == 1u) AnnouncePark(q, started_ns, started_clock);
  return true;
}

}  // namespace

// __maxnreg__, not __launch_bounds__ (a kernel takes one of the two, and
// launch bounds would override -maxrregcount): the cap is what leaves room
// for other kernels (abi.h, kWorkerMaxRegisters); the host launches
// kWorkerThreads threads.
extern "C" __global__ void __maxnreg__(gpuos::device::kWorkerMaxRegisters)
    gpuos_queue_worker(const gpuos::device::QueueParams params) {
  __shared__ __align__(16) unsigned char scratch[gpuos::device::kWorkerScratchBytes];
  __shared__ __align__(16) BlockCache cache;
  __shared__ unsigned long long batch[kMaxBatch];
  __shared__ int action;
  __shared__ unsigned long long argument;
  __shared__ unsigned int batch_count;
  // kDirect's: the board's slot words; kAdmitDirect's: the lone hint's.
  __shared__ unsigned int direct_words;
  // The ring slot being admitted, parsed once (ParseSlot) for
  // AnnounceDirectFromRecord, OpenAndRunDirect and Admit.
  __shared__ __align__(16) Submission slot_record;
  __shared__ unsigned long long slot_gate_word;
  __shared__ unsigned int slot_cache_fill;
  // kAdmitCached's: the payload cache entry, the tiles and the area's words
  // (the hints').
  __shared__ CachedOpening cached_opening;
  // Thread 0's; in shared memory, as it is read only on the idle path and
  // at claims: in registers, with its `drained` look, the worker spilled
  // 24 B where in shared memory it spilled none (210 registers, ef8b44e).
  // Since the park's bound (9e51386) the worker takes 216 registers and
  // spills 24 B again (16 B since the flags' load is 8 bytes, ABI 10):
  // idle_since and the keep_warm word, stored after an
  // action or a claim attempt and loaded on the idle path (cuobjdump -sass;
  // making ShouldPark or the announcements non-inline spilled more).
  __shared__ ParkWatch park_watch;
  __shared__ OpCache op_cache;  // RunDirectTiles's (queue_direct.cuh)
  // Thread 0's: when its current idle round began (kTraceIdleRounds, tracing;
  // with GPUOS_TRACE_IDLE_ROUNDS=2, when that round's load saw the board;
  // with =3, when thread 0 passed the barriers after that), read by thread 0
  // alone.
  __shared__ unsigned long long round_started_ns;
  const Queue q = Unpack(params);
  if (threadIdx.x == 0) {
    atomicAdd(&q.state->alive, 1u);
    cache.current = 0;
  }
  if (threadIdx.x == 32) op_cache.slot = kNoOpCached;  // the thread that reads it
  const unsigned long long started_ns = GlobalTimerNs();
  const long long started_clock = clock64();
  unsigned long long idle_since = started_ns;
  unsigned int idle_rounds = 0;
  unsigned int completed = 0;  // thread 0's count of tiles run, not yet flushed
  Completions completions;     // thread 0's
  BlockRecorder recorder;      // thread 0's
  completions.recorder = &recorder;
  unsigned long long claimed_ns = 0;  // thread 0's: when it claimed the submission it admits
  unsigned long long host_flags = 0;  // thread 0's: stop and keep_warm, as the last claim read them
  // Thread 0's: the last submission the direct board named that this block
  // saw or claimed (one already there at the launch is not new).
  unsigned long long direct_seen = 0;
  unsigned long long peeked_ns = 0;  // thread 0's: its last read of the tail (kPollerQuietNs)
  unsigned int peeks = 0;            // thread 0's: its reads of the tail (kPollerFlagsEvery)
  if (threadIdx.x == 0) {
    park_watch =
        ParkWatch{gpuos::device::ParkClaimBound(gpuos::device::ParkPhase::kRunning, 0), {}};
    recorder.Begin(q);
    direct_seen = DirectBoardSequence(DecodeDirectBoard(Volatile(&q.state->direct_board)).sequence,
                                      Volatile(&q.state->submit_head));
  }
  // Pollers read the host's tail at full rate (a PCIe round trip each); the
  // others every 8th idle round. The block that begins a park becomes a
  // poller (AnnounceParkAndBound).
  bool poller = blockIdx.x < params.pollers;
  if (threadIdx.x == 0 && poller) atomicAdd(&q.state->pollers_alive, 1u);
  if (kTraceIdleRounds && threadIdx.x == 0) round_started_ns = 0;
  for (;;) {
    if (threadIdx.x == 0) {
      if (kTraceIdleRounds && q.trace != nullptr) round_started_ns = GlobalTimerNs();
      int next = kIdle;
      unsigned int count = 0;
      unsigned long long direct_board = 0;
      unsigned long long value = TakeHelperTicket(q, &direct_seen, &direct_board);
      if (kTraceBoardSighting && direct_board != 0 && q.trace != nullptr) {
        round_started_ns = GlobalTimerNs();  // the board's sighting instead
      }
      if (direct_board != 0) {
        next = kDirect;
        value = direct_seen;  // the board's sequence, widened
        direct_words = DecodeDirectBoard(direct_board).slot_words;
      } else if (value != kNone) {
        next = kHelp;
      } else if ((value = TryPopBatch(q, &count)) == kContended) {
        next = kAgain;
      } else if (value != kNone) {
        next = kRun;
        batch_count = count;
      } else if (kPollerQuietNs != 0 && poller && Volatile(&q.state->in_flight) != 0 &&
                 GlobalTimerNs() - peeked_ns < kPollerQuietNs) {
        // Quiet while a submission runs (kPollerQuietNs): idle this round.
      } else if (poller || ((idle_rounds & 7u) == 7u &&
                            Volatile(&q.state->host_tail_seen) > Volatile(&q.state->submit_head))) {
        // An idle poller looked in its last round (ShouldPark); a poller
        // back from work, or another block, before that work or up to 7
        // rounds ago: long enough for the rest of a parking grid to exit
        // and leave what it claims now to it alone (session 28: calls on 1
        // and on 7 of 16 blocks, runtime_park_gpu_test.cpp).
        if (!poller || idle_rounds == 0) LookForPark(q, &park_watch);
        bool direct = false;
        bool from_cache = false;
        unsigned long long claim_hint = 0;  // the lone hint read with the tail
        GPUOS_PHASE_BEGIN(claim_clock);
        if (kPollerQuietNs != 0) peeked_ns = GlobalTimerNs();
        value = PeekSubmission(q, &host_flags, park_watch.claim_below, &claim_hint,
                               kPollerFlagsEvery == 1 || peeks++ % kPollerFlagsEvery == 0);
        // A cached submission whose gate the host has not opened yet is
        // claimed once a later read shows it open (queue_direct.cuh,
        // "Cached payloads"); this round is idle.
        const gpuos::device::queue::CachedClaim cached =
            value == kNone ? gpuos::device::queue::CachedClaim::kNone
                           : CachedClaimOf(value + 1, claim_hint);
        if (cached == gpuos::device::queue::CachedClaim::kWait) value = kNone;
        if (value != kNone) {
          GPUOS_PHASE_MARK(claim_clock, 28);
          // The claim after the read (its atomics: 0.33 us at attention seq
          // 32). Issued beside the slot's read instead, behind the slot's
          // loads, they took 1.7 us and calls 1.3-2.8 us longer (session
          // 35, docs/runtime.md "The claim's read and the admission's
          // early work").
          if ((value = FinishClaim(q, value, claim_hint, &direct)) == kContended) {
            next = kAgain;
          } else {
            GPUOS_PHASE_MARK(claim_clock, 25);
            from_cache = direct && cached == gpuos::device::queue::CachedClaim::kOpen;
            next = direct ? (from_cache ? kAdmitCached : kAdmitDirect) : kAdmit;
            if (from_cache) {
              cached_opening.entry = gpuos::device::LoneHintEntry(claim_hint);
              cached_opening.tiles = gpuos::device::LoneHintTiles(claim_hint);
              cached_opening.area_words =
                  gpuos::device::LoneHintWords(claim_hint) - gpuos::device::kSubmissionRecordWords;
            }
            if (direct) direct_seen = value + 1;  // its own board word is not news
            if (kSlotUsedWords && direct) direct_words = gpuos::device::LoneHintWords(claim_hint);
            if (q.trace != nullptr) claimed_ns = GlobalTimerNs();
          }
        }
      }
      if (next == kIdle) {
        if (completed != 0) {
          atomicAdd(&q.state->status.completed, completed);
          completed = 0;
        }
        // A poller reaches this only after its claim attempt of this round
        // (kNone), which read host_flags (with GPUOS_POLLER_QUIET_NS also
        // after a quiet round, and with GPUOS_POLLER_FLAGS_EVERY after a
        // read without the flags: host_flags are then an earlier read's,
        // which only delays a stop or a keep_warm; a submission in flight
        // keeps the grid from parking anyway).
        if ((poller || (idle_rounds & 7u) == 0) &&
            ShouldPark(q, idle_since, started_ns, started_clock, params.pollers, host_flags,
                       idle_rounds, &poller, &park_watch)) {
          next = kExit;
          if (poller) atomicSub(&q.state->pollers_alive, 1u);
        }
      }
      action = next;
      argument = value;
    }
    __syncthreads();
    const int current = action;
    const unsigned long long value = argument;
    __syncthreads();
    if (current == kExit) return;
    if (current == kRun) {
      const unsigned int count = batch_count;
      if (threadIdx.x < count) batch[threadIdx.x] = TakeReady(q, value + threadIdx.x);
      Invalidate(cache);
      for (unsigned int i = 0; i < count; ++i) {
        unsigned long long entry = batch[i];
        if (DecodeReady(entry).task == gpuos::device::kGateRetryTask) {
          // A submission waiting for another stream: admit it if its gate opened.
          bool first_claimed = false;
          SlotWords words;
          ReadSlot(q, DecodeReady(entry).slot, words);
          ParseSlot(words, &slot_record, &slot_gate_word, &slot_cache_fill);
          entry =
              Admit(q, DecodeReady(entry).slot, words, slot_record, slot_gate_word, &first_claimed);
          if (entry == kNone) continue;
          Invalidate(cache);  // Admit copied descriptors the window may hold stale
          RunChain(q, entry, cache, scratch, &completed, &completions, &recorder, first_claimed);
          continue;
        }
        RunChain(q, entry, cache, scratch, &completed, &completions, &recorder);
      }
    } else if (current == kHelp) {
      Invalidate(cache);
      RunChain(q, value, cache, scratch, &completed, &completions, &recorder);
    } else if (current == kDirect) {
      // A helper of a lone tiled task: its task and tensors from the area
      // its admitting block fills.
      if (kTraceHelpDispatch && threadIdx.x == 0 && q.trace != nullptr) {
        round_started_ns = GlobalTimerNs();  // past the barriers instead
      }
      HelpRunDirect(q, value, direct_words - gpuos::device::kSubmissionRecordWords,
                    DirectContext{cache.descs[0], &op_cache, scratch, &completed, &recorder,
                                  kTraceIdleRounds && threadIdx.x == 0 ? round_started_ns : 0});
      Invalidate(cache);  // its descriptors were overwritten
    } else if (current == kAdmit || current == kAdmitDirect || current == kAdmitCached) {
      bool first_claimed = false;
      SlotWords words;
      GPUOS_PHASE_BEGIN(read_clock);
      const bool from_cache = current == kAdmitCached;
      if (from_cache) {
        // From the payload cache (queue_direct.cuh, "Cached payloads"): the
        // ring slot is not read (its words, zero, are parsed but not used:
        // with the parse skipped too the worker spilled 128 bytes against
        // 48 in a first layout, ptxas -v, sm_90; 32 now, 24 before the cache).
#pragma unroll
        for (unsigned int j = 0; j < gpuos::device::queue::kSlotWordsPerThread; ++j) {
          words.w[j] = make_int4(0, 0, 0, 0);
        }
      } else if (kSlotUsedWords && current == kAdmitDirect) {
        ReadSlotUsed(q, SlotOf(q, value + 1), direct_words, words);
      } else {
        ReadSlot(q, SlotOf(q, value + 1), words);
      }
      ParseSlot(words, &slot_record, &slot_gate_word, &slot_cache_fill);
      GPUOS_PHASE_MARK(read_clock, 24);
      // A lone tiled task runs directly where it can (OpenAndRunDirect: its
      // gate open, ...), announced at the claim (the host's hint) or, where
      // the hint read was older than the tail, now (its record); otherwise,
      // and for any other graph, the admission.
      const bool direct =
          current != kAdmit ||
          (kDirectTiles && AnnounceDirectFromRecord(q, value + 1, slot_record, &direct_seen));
      if (direct && OpenAndRunDirect(q, value + 1, words, slot_record, slot_gate_word,
                                     slot_cache_fill, from_cache ? &cached_opening : nullptr,
                                     DirectContext{cache.descs[0], &op_cache, scratch, &completed,
                                                   &recorder, claimed_ns})) {
        Invalidate(cache);  // its descriptors were overwritten
      } else {
        const unsigned long long first =
            Admit(q, value, words, slot_record, slot_gate_word, &first_claimed);
        if (first != kNone) {
          if (threadIdx.x == 0 && q.trace != nullptr) {  // no sequence read when not tracing
            recorder.QueueEvent(q, gpuos::device::kTraceAdmitOp, claimed_ns,
                                Volatile(q.sequences + DecodeReady(first).slot));
          }
          Invalidate(cache);
          RunChain(q, first, cache, scratch, &completed, &completions, &recorder, first_claimed);
        }
      }
    }
    if (current != kIdle && current != kAgain) {
      if (threadIdx.x == 0) {
        completions.Flush(q, completions.fenced);
        completions.fenced = false;
        recorder.Idle(q);
      }
      idle_since = GlobalTimerNs();
      idle_rounds = 0;
    } else if (current == kIdle) {
      ++idle_rounds;
      // Idle blocks back off (asked up to 2 us, which sleeps about 4: an
      // H200's __nanosleep takes twice what it is asked, bench/probes/
      // idle_wake.cu) so that their polling does not
      // slow the busy blocks' atomics on the same lines; while a submission
      // is in flight, by at most kBusyIdleSleepNs, since its tiles and
      // successors may be pushed at any moment (a 2 us nap could hold a
      // tiled task's helper entries in the ring that long). Short naps for
      // a while after each claim as well were tried (session 23): helpers
      // started 0.04-0.46 us sooner, the calls' device spans did not shrink
      // (bench/results/experiments/idle_quick_naps_ab_session23.txt).
      if (threadIdx.x == 0) {
        unsigned int sleep = 64u << (idle_rounds < 5u ? idle_rounds : 5u);
        if (sleep > kBusyIdleSleepNs && Volatile(&q.state->in_flight) != 0) {
          sleep = kBusyIdleSleepNs;
        }
        __nanosleep(poller ? 64u : sleep);
      }
    }
  }
}
