// Direct tiles (docs/runtime.md, "Direct tiles"): the tiles of a lone tiled
// task (SubmissionCountsTiles, its graph inline in the ring slot) run
// without the admission's copy into the mirrors, its fence and the help
// board. Internal to the persistent worker (device/src/queue_worker.cu).
//
// The protocol, per submission S in ring slot `slot`:
// - The poller that claims S finds the host's lone_hint naming it and
//   announces S on QueueDeviceState::direct_board (one word on the help
//   board's line, which idle blocks read every round), with how many blocks
//   should help and how many payload words S has. The hint shares a
//   16-byte word with the tail and names the newest submission; where a
//   poller behind the tail claims S while the hint names a later one, the
//   admitting block announces S once it has read the slot's record
//   (AnnounceDirectFromRecord).
// - The admitting block (the poller) reads the slot as for any admission.
//   If S is a lone tiled task whose gate is open, it copies the graph's
//   payload into the slot's area of device memory (DirectArea), fences and
//   opens DirectSlot::claim with an exchange (S's sequence, tile 0 taken);
//   otherwise it closes the word (S's sequence, no tiles) and admits S
//   as any other graph.
// - A helper (an idle block the board names) waits for the word with
//   acquire loads (kDirectOpenWaitNs at most), reads the task and its
//   tensors from the area (L2) and claims tiles with 64-bit adds. The word
//   an add returns carries its holder's tiles, so a claim is judged by the
//   word alone (DirectClaim), never by an area a later submission may be
//   rewriting: no tile (leave; what was read is not used); one of S's (the
//   area read is S's: S cannot have completed); one of a later submission
//   of the slot (S completed and the slot was reused while this block was
//   late: that one cannot complete before the tile counts, so its area is
//   read again after a fence and the tile run).
// - Every block adds 1 to DirectSlot::done for a tile, an acquire-release
//   add that releases the tile's results (CountDirectTile); the block whose
//   add makes it S's tiles completes S (CompleteSubmission, with no fence of
//   its own where results are in device memory) and claims nothing more
//   (every tile ran, so every tile was claimed); the count goes back to 0
//   when the slot's next direct submission opens. Near the task's end any
//   other block claims its next tile after its count (far from it, before:
//   RunDirectTiles): S may have completed meanwhile and its slot been
//   reused, so a claim is judged by the word's holder as a helper's is (a later
//   submission's tile is run after its area is read again). Until session
//   31 a block claimed before it counted, which put the claim's round trip
//   on the path of the last count, the one that ends the call.
//
// Helpers do not read the ring slot themselves: PCIe reads of it by tens of
// blocks at once stalled every block's memory traffic for 10-40 us (session
// 24's first version, bench/results/experiments/direct_tiles_session24.txt).
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/op_call.cuh"
#include "gpuos/device/phase_timing.cuh"
#include "gpuos/device/queue.h"
#include "gpuos/device/queue_sync.cuh"
#include "gpuos/device/tile_split.cuh"

extern "C" __device__ gpuos::device::OpFunction gpuos_resolve_operator(
    const gpuos::device::TaskDesc& task, unsigned int* slot);

namespace gpuos {
namespace device {
namespace queue {

// How long a helper waits for its submission's claim word to open (the
// admitting block opens or closes it about 2.5-3.5 us after the claim,
// about 1 us from the payload cache; this is a bound for the unexpected),
// and how long it naps between two looks (GPUOS_DIRECT_POLL_NS, a JIT
// define, sets another nap for A/B runs: a hundred helpers polling faster
// delayed the opening, AwaitDirectOpening; one round at 128 ns, session 37:
// attention seq 32's last tile started 0.4 us sooner, seq 128's no sooner;
// bench/results/experiments/direct_poll_ns_ab_session37.txt).
constexpr unsigned long long kDirectOpenWaitNs = 50000;
#ifndef GPUOS_DIRECT_POLL_NS
#define GPUOS_DIRECT_POLL_NS 256
#endif
constexpr unsigned int kDirectPollNs = GPUOS_DIRECT_POLL_NS;
// A diagnostic (GPUOS_JIT_DEFINES=GPUOS_TRACE_IDLE_ROUNDS=N; 0, the default:
// off): while tracing, a helper's "help" trace record starts at another
// point of its way to HelpRunDirect than its entry stamp (after the entry's
// reads of the queue's fields):
//   1  when the idle round that found the direct board began
//   2  when thread 0's load of the board returned with it (the sighting)
//   3  when thread 0 passed the worker's two barriers after the sighting
//   4  at HelpRunDirect's first instruction, before the entry's reads
// Session 43 found helpers beginning 2.2-3.6 us after the claim posts the
// board (bench/results/experiments/idle_bell_ab_session43.txt). Session 44,
// with these (medians; helper_entry_ab_session44.txt): the round that finds
// the board begins 0.7-0.9 us after the claim, its load returns 0.4-0.55
// later, and the entry stamp comes 1.1-1.4 us after that (the barriers
// 0.3-0.55, the call 0.55-0.85, the reads 0.2-0.3). The worker's default
// code is the same with any of them (nvcc -ptx); the builds for 1 and 3
// spill 84 bytes against 32, for 2 112, for 4 32 (ptxas -v, sm_90).
#ifndef GPUOS_TRACE_IDLE_ROUNDS
#define GPUOS_TRACE_IDLE_ROUNDS 0
#endif
constexpr bool kTraceIdleRounds = GPUOS_TRACE_IDLE_ROUNDS >= 1 && GPUOS_TRACE_IDLE_ROUNDS <= 3;
constexpr bool kTraceBoardSighting = GPUOS_TRACE_IDLE_ROUNDS == 2;
constexpr bool kTraceHelpDispatch = GPUOS_TRACE_IDLE_ROUNDS == 3;
constexpr bool kTraceHelpEntry = GPUOS_TRACE_IDLE_ROUNDS == 4;
constexpr unsigned int kTaskWords = sizeof(TaskDesc) / 16;
constexpr unsigned int kTensorWords = sizeof(TensorDesc) / 16;
// A lone task's one successor word (its root) is fewer words than a
// descriptor's (StagedTableLength counts the area's tensors by division).
static_assert(kTensorWords > 1, "a root's successor word is shorter than a descriptor");
constexpr unsigned int kSlotWordsPerThread = kSubmissionSlotWords / kWorkerThreads;
static_assert(kSlotWordsPerThread * kWorkerThreads == kSubmissionSlotWords,
              "a ring slot is read in whole words per thread");
static_assert(kDirectAreaBytes >= kInlinePayloadWords * 16, "an inline graph fits a block's area");

// A ring slot's words as one block holds them: word w in words[w /
// blockDim.x] of thread w % blockDim.x.
struct SlotWords {
  int4 w[kSlotWordsPerThread];
};

// All threads: ring slot `slot`'s words, all loads in flight together (one
// PCIe round trip).
__device__ __forceinline__ void ReadSlot(const Queue& q, unsigned int slot, SlotWords& words) {
  const int4* slot_words = reinterpret_cast<const int4*>(q.submissions + slot);
#pragma unroll
  for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
    words.w[j] = __ldcv(slot_words + threadIdx.x + j * blockDim.x);
  }
}

// A claim the host's lone hint announced (queue_worker.cu, kAdmitDirect)
// reads only the slot's first `used` words (the record and the inline graph,
// as the hint counts them) and its last (the gate word), a few PCIe requests
// instead of 64; the other words are left zero and never read (Admit, where
// the direct path declines the submission, reads no word past the inline
// graph). The admission took 2.53-2.59 us against 2.82-2.98 reading the whole
// slot (H200, one instance, two rounds, mlp batch 1 and attention seq 32 and
// 128, session 39: bench/results/experiments/slot_used_words_ab_session39.txt).
// GPUOS_JIT_DEFINES=GPUOS_SLOT_USED_WORDS=0: the whole slot, as until session
// 39 (an A/B switch).
#ifndef GPUOS_SLOT_USED_WORDS
#define GPUOS_SLOT_USED_WORDS 1
#endif
constexpr bool kSlotUsedWords = GPUOS_SLOT_USED_WORDS != 0;

// All threads: ring slot `slot`'s words [0, used) and its last word, the
// loads in flight together; the others zero.
__device__ __forceinline__ void ReadSlotUsed(const Queue& q, unsigned int slot, unsigned int used,
                                             SlotWords& words) {
  const int4* slot_words = reinterpret_cast<const int4*>(q.submissions + slot);
#pragma unroll
  for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
    const unsigned int w = threadIdx.x + j * blockDim.x;
    words.w[j] =
        w < used || w == kSubmissionSlotWords - 1 ? __ldcv(slot_words + w) : make_int4(0, 0, 0, 0);
  }
}

// How a block counts a finished tile in DirectSlot::done: one
// atom.acq_rel.gpu.add, whose release orders the tile's results (every
// thread's, after the block's barrier) before the count and whose acquire,
// for the block whose add is the last, orders the other tiles' results
// (each released by its own count) before the completion word, which then
// needs no fence of its own where results are in device memory
// (CompleteSubmission's `acquired`). Until session 39: a __threadfence, a
// relaxed add, then the completion's __threadfence (a second fence costs
// about 0.24 us after the first: bench/probes/queue_costs.cu,
// fence_gpu_twice_after_store against fence_gpu_after_store).
// GPUOS_JIT_DEFINES=GPUOS_DIRECT_COUNT_ACQ_REL=0 restores that (an A/B
// switch).
#ifndef GPUOS_DIRECT_COUNT_ACQ_REL
#define GPUOS_DIRECT_COUNT_ACQ_REL 1
#endif
constexpr bool kDirectCountAcqRel = GPUOS_DIRECT_COUNT_ACQ_REL != 0;

// Thread 0 of a block whose tile's results are stored (after a barrier):
// adds 1 to `done` (DirectSlot::done) and returns the value before the add.
__device__ __forceinline__ unsigned int CountDirectTile(unsigned int* done) {
  if constexpr (kDirectCountAcqRel) {
    unsigned int before;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                 : "=r"(before)
                 : "l"(done)
                 : "memory");
    return before;
  } else {
    __threadfence();  // this tile's results before its count
    return atomicAdd(done, 1u);
  }
}

// All threads: the record, the gate word and the cache fill of `words` into
// the shared *sub, *gate_word and *cache_fill. Ends with a barrier.
__device__ __forceinline__ void ParseSlot(const SlotWords& words, Submission* sub,
                                          unsigned long long* gate_word, unsigned int* cache_fill) {
  if (threadIdx.x < kSubmissionRecordWords) reinterpret_cast<int4*>(sub)[threadIdx.x] = words.w[0];
  if (threadIdx.x + (kSlotWordsPerThread - 1) * blockDim.x == kSubmissionSlotWords - 1) {
    const int4 last = words.w[kSlotWordsPerThread - 1];  // gate_word, then cache_fill
    *gate_word = static_cast<unsigned long long>(static_cast<unsigned int>(last.y)) << 32 |
                 static_cast<unsigned int>(last.x);
    *cache_fill = static_cast<unsigned int>(last.z);
  }
  __syncthreads();
}

// Thread 0 of an idle block: whether the direct board names a submission
// this block has not seen (*seen: the last sequence it saw, or claimed
// itself) and counts it among its helpers. *seen becomes the board's
// sequence. The helpers are blocks [pollers, pollers + helpers) where the
// grid has that many: a poller's round is a PCIe read of the tail (about
// 1.2 us), so the poller that did not claim saw the board last and its tile
// started last, 0.8-1.2 us after every other helper's (H200, attention and
// mlp, session 31). Otherwise blocks [0, helpers] (the claiming poller
// among them). Where a block that is not a poller claimed, one tile waits
// for a block's second claim.
__device__ __forceinline__ bool DirectHelpWanted(unsigned long long board_word,
                                                 unsigned int pollers, unsigned long long* seen) {
  if (board_word == 0) return false;
  const DirectBoard board = DecodeDirectBoard(board_word);
  const unsigned long long sequence = DirectBoardSequence(board.sequence, *seen);
  if (sequence == *seen) return false;
  *seen = sequence;
  if (pollers + board.helpers < gridDim.x) {
    return blockIdx.x >= pollers && blockIdx.x < pollers + board.helpers;
  }
  return blockIdx.x <= board.helpers;
}

// The ring slot of submission `sequence` (1, 2, ...).
__device__ __forceinline__ unsigned int SlotOf(const Queue& q, unsigned long long sequence) {
  const unsigned int capacity = q.submission_capacity;
  if (kSlotMask && (capacity & (capacity - 1)) == 0) {
    return static_cast<unsigned int>(sequence - 1) & (capacity - 1);
  }
  return static_cast<unsigned int>((sequence - 1) % capacity);
}

// A tile's TaskDesc differs from its task's in its first kTileOwnWords
// 16-byte words only (the items and the tensor indices): RunDirectTiles
// copies the rest once a task, with every thread, where thread 0 alone
// copying the whole descriptor at each tile took 0.44 us of the 1.0 from a
// helper's claim to its operator call in the phase-timing image (H200,
// session 31, phase slot 26; the traced tile starts of the plain image did
// not show the saving).
constexpr unsigned int kTileOwnWords = 4;
// (abi.h pins TaskDesc::scalars, the first word not a tile's own, at byte
// 64 = kTileOwnWords * 16, checked by the host compiler.)

// A block's last operator resolved by RunDirectTiles: its slot (kNoOpCached:
// none yet) and function. The operator table is part of the kernel image,
// fixed while a grid runs (an epoch switch relaunches the grid, which starts
// with an empty cache), so a slot's function is resolved once a launch.
// Resolving at every submission (gpuos_resolve_operator: two dependent loads
// of the image's table, through a call) took about 0.4 us of the 1.2 between
// a block's read of the task and its first tile (H200, session 29,
// bench/results/experiments/direct_op_cache_session29.txt).
struct OpCache {
  unsigned int slot;
  OpFunction function;
};
constexpr unsigned int kNoOpCached = 0xffffffffu;

// What OpenAndRunDirect and HelpRunDirect need of the worker.
struct DirectContext {
  TensorDesc* descs;       // kMaxTaskTensors descriptors in shared memory (overwritten)
  OpCache* op_cache;       // the block's, in shared memory
  unsigned char* scratch;  // the operators' shared scratch
  unsigned int* completed;
  BlockRecorder* recorder;
  // The admitting block's claim (its trace record); for a helper, where the
  // worker was built with GPUOS_TRACE_IDLE_ROUNDS=1, 2 or 3, the start of
  // its help record (the idle round's start, the board's sighting, or past
  // the worker's barriers), else 0.
  unsigned long long claimed_ns;
};

// Area `index` (queue.h, DirectRegionBytes: ring slot `index`'s below the
// ring's capacity, a payload cache entry's above): a graph's payload words
// as an admitting block copied them (the task, its tensor indices made
// relative to the graph's first tensor, then the graph's tensors).
__device__ __forceinline__ int4* DirectAreaAt(const Queue& q, unsigned int index) {
  return reinterpret_cast<int4*>(q.direct_areas +
                                 static_cast<unsigned long long>(index) * kDirectAreaBytes);
}
// The area of the submission that last opened `direct` (DirectSlot::area),
// for a block that acquired its opening.
__device__ __forceinline__ int4* OpenedArea(const Queue& q, const DirectSlot* direct) {
  return DirectAreaAt(q, Volatile(&direct->area));
}

// DirectSlot::claim: the submission's sequence (low 32 bits), a bit left
// zero, its tiles (15 bits; 0: closed, nothing to claim) and the next tile
// (16 bits). A claim is valid exactly
// when its `next` is below the word's own `tiles`, so a block never judges
// a claim by an area that a later submission may be rewriting. Every add
// past the last tile is a block's single failed claim (or a late
// helper's), so `next` stays below 2^16 when tiles leave that much room
// (kDirectMaxTiles).
struct DirectClaim {
  unsigned int holder;  // sequence, low 32 bits
  unsigned int tiles;
  unsigned int next;
  __device__ bool valid() const { return next < tiles; }
};
__device__ __forceinline__ unsigned long long EncodeDirectClaim(unsigned long long sequence,
                                                                unsigned int tiles,
                                                                unsigned int next) {
  return (sequence & 0xffffffffull) << 32 | static_cast<unsigned long long>(tiles & 0x7fffu) << 16 |
         (next & 0xffffu);
}
__device__ __forceinline__ DirectClaim DecodeDirectClaim(unsigned long long word) {
  DirectClaim c;
  c.holder = static_cast<unsigned int>(word >> 32);
  c.tiles = static_cast<unsigned int>((word >> 16) & 0x7fffu);
  c.next = static_cast<unsigned int>(word & 0xffffu);
  return c;
}
// Whether claim word `word` shows every tile of `sequence` claimed and no
// later submission opened: a claim would fail, so a block that has counted
// its tile reads the word before it adds (a read, where the tens of blocks
// ending at once would otherwise each add to the line the last count and
// the completion use).
__device__ __forceinline__ bool NoTileLeft(unsigned long long word, unsigned long long sequence) {
  const DirectClaim c = DecodeDirectClaim(word);
  return c.holder == static_cast<unsigned int>(sequence) && !c.valid();
}
// Whether the word's holder is `sequence` or a later submission of its slot.
__device__ __forceinline__ bool HoldsOrFollows(const DirectClaim& c, unsigned long long sequence) {
  return static_cast<int>(c.holder - static_cast<unsigned int>(sequence)) >= 0;
}
// The full sequence of holder `c`, not before `sequence`.
__device__ __forceinline__ unsigned long long HolderSequence(const DirectClaim& c,
                                                             unsigned long long sequence) {
  return sequence + (c.holder - static_cast<unsigned int>(sequence));
}

// All threads of a block that claimed `sequence` while the host's hint
// named another submission, with its slot's record parsed (`sub`, shared;
// ParseSlot): whether the record shows a lone tiled task travelling inline
// (what the host hints). If so, thread 0 announces it on the direct board
// now, after the slot read rather than at the claim, and its *seen becomes
// `sequence` (its own word is not news to it). The hint names only the
// newest submission, so a poller that claims an older one (submissions
// published faster than claimed) finds it here. (Until ABI 10 the hint was
// a separate load in flight with the tail's and could be older than it:
// 37-48% of the lone tiled submissions of
// RuntimeGpuTest.LoneTiledTaskFinishesWithItsLastTile ran on the board path
// without this, bench/results/experiments/gpu_checks_session25.txt.)
__device__ __forceinline__ bool AnnounceDirectFromRecord(const Queue& q,
                                                         unsigned long long sequence,
                                                         const Submission& sub,
                                                         unsigned long long* seen) {
  const bool lone = sub.sequence == sequence && sub.inline_words != 0 &&
                    SubmissionCountsTiles(sub.task_count, sub.first_root_tiles);
  if (lone && threadIdx.x == 0) {
    PostDirectBoard(q, sequence, sub.first_root_tiles, kSubmissionRecordWords + sub.inline_words);
    *seen = sequence;
  }
  return lone;
}

// All threads: the task's words of a slot's `words` (after the record) into
// `task` (shared; the caller's barrier follows).
__device__ __forceinline__ void CopySlotTask(const SlotWords& words, TaskDesc* task) {
#pragma unroll
  for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
    const unsigned int p = threadIdx.x + j * blockDim.x - kSubmissionRecordWords;
    if (threadIdx.x + j * blockDim.x >= kSubmissionRecordWords && p < kTaskWords) {
      reinterpret_cast<int4*>(task)[p] = words.w[j];
    }
  }
}

// Thread 0 of the admitting block, `task` copied (CopySlotTask): whether
// submission `sequence` (`sub`, `gate_word`: ParseSlot) is a lone tiled
// task that may run as direct tiles: the record is its own, its tiles
// counted and at most kDirectMaxTiles, its gate open and not dropped, its
// graph inline with the task's tiles and 1 to kMaxTaskTensors tensor
// indices inside the graph. The indices become relative to the graph's
// first tensor, as the area holds them (up to the first that is not).
__device__ __forceinline__ bool DirectTaskFits(unsigned long long sequence, const Submission& sub,
                                               unsigned long long gate_word, TaskDesc* task) {
  const bool dropped = sub.gate == kSlotGate && (gate_word & kGateDropped) != 0;
  const unsigned int num = task->num_tensors;
  bool ok = sub.sequence == sequence &&
            SubmissionCountsTiles(sub.task_count, sub.first_root_tiles) &&
            sub.first_root_tiles <= kDirectMaxTiles && !dropped && GateOpen(sub, gate_word) &&
            sub.inline_words >= kTaskWords + sub.tensor_count * kTensorWords &&
            task->num_tiles == sub.first_root_tiles && num != 0 && num <= kMaxTaskTensors;
  for (unsigned int k = 0; ok && k < num; ++k) {
    const unsigned int j = static_cast<unsigned int>(task->tensors[k]) - sub.tensor_begin;
    ok = j < sub.tensor_count;
    task->tensors[k] = static_cast<int>(j);  // relative, as the area holds them
  }
  return ok;
}

// All threads of the admitting block, with the slot's words in `words` (the
// whole slot, or the used ones and the last: ReadSlotUsed) and its record,
// gate word and cache fill parsed (`sub`, shared, `gate_word`, `cache_fill`;
// ParseSlot): whether the submission runs as direct tiles (see the file
// comment); if so, its payload is written to its area (the ring slot's, or
// the payload cache entry it fills, whose filled word then tells the host
// that the entry holds it) and the word opened with tile 0 taken by this block, else the
// word is closed. Thread 0 leaves the task's words in `task`, its tiles and
// the area's words in *tiles and *area_words (shared).
__device__ bool OpenDirect(const Queue& q, unsigned long long sequence, const SlotWords& words,
                           const Submission& sub, unsigned long long gate_word,
                           unsigned int cache_fill, TaskDesc* task, unsigned int* tiles,
                           unsigned int* area_words, const DirectContext& ctx) {
  __shared__ int go;
  const unsigned int slot = SlotOf(q, sequence);
  DirectSlot* const direct = q.direct + slot;
  const bool fills = cache_fill != 0;  // the host's, for entries it allocated
  const unsigned int area_index = fills ? q.submission_capacity + cache_fill - 1u : slot;
  int4* const area = DirectAreaAt(q, area_index);
  CopySlotTask(words, task);
  __syncthreads();
  if (threadIdx.x == 0) {
    go = DirectTaskFits(sequence, sub, gate_word, task) ? 1 : 0;
    *tiles = sub.first_root_tiles;
    *area_words = sub.inline_words;
  }
  __syncthreads();
  if (!go) {
    // Helpers waiting for the opening leave at once; the board path runs it.
    if (threadIdx.x == 0) atomicExch(&direct->claim, EncodeDirectClaim(sequence, 0, 0));
    return false;
  }
  // The payload: the task from `task` (its indices relative), the rest as
  // the slot holds it.
#pragma unroll
  for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
    const unsigned int w = threadIdx.x + j * blockDim.x;
    if (w < kSubmissionRecordWords || w - kSubmissionRecordWords >= sub.inline_words) continue;
    const unsigned int p = w - kSubmissionRecordWords;
    __stcg(area + p, p < kTaskWords ? reinterpret_cast<const int4*>(task)[p] : words.w[j]);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    StoreVolatile(&direct->area, area_index);
    // 0 here: the count of the slot's last direct submission ended at its
    // tiles and is not reset by its completing block (RunDirectTiles).
    StoreVolatile(&direct->done, 0u);
    __threadfence();  // the area and the count before the opening (release)
    atomicExch(&direct->claim, EncodeDirectClaim(sequence, *tiles, 1));  // tile 0 is ours
    // The host learns that the entry holds this payload (a posted PCIe
    // store after the opening, off its path).
    if (fills) StoreVolatile(CacheFilled(q, cache_fill - 1u), sequence);
    ctx.recorder->QueueEvent(q, kTraceAdmitOp, ctx.claimed_ns, sequence);
  }
  return true;
}

// Thread 0 of a helper: waits (kDirectOpenWaitNs at most) until the claim
// word holds `sequence` or a later submission of the slot, with acquire
// loads (the area was written before the opening). Returns the word, or 0
// when it never came.
__device__ unsigned long long AwaitDirectOpening(DirectSlot* direct, unsigned long long sequence) {
  const unsigned long long deadline = GlobalTimerNs() + kDirectOpenWaitNs;
  for (;;) {
    const unsigned long long word = LoadAcquireGpu(&direct->claim);
    if (HoldsOrFollows(DecodeDirectClaim(word), sequence)) return word;
    if (GlobalTimerNs() > deadline) return 0;
    // Not faster: a hundred helpers polling the word's line every few
    // hundred ns delayed the opening exchange until most had given up
    // (attention seq 128, 104 tiles: 16 blocks came).
    __nanosleep(kDirectPollNs);
  }
}

// A lone table task's descriptor table (TaskGraph::AddTableTask: its only
// tensor, then the records after it; a stitched program's addresses) in
// ctx.descs, in shared memory, instead of the area: every stage of a
// stitched tile reads its buffers' addresses from the table before its
// first loads, one L2 round trip each time where the table is in device
// memory (stitch.cuh, Tile). The block has the table's words in registers
// already (LoadDirectTask reads the whole area), so staging it costs a few
// shared stores. GPUOS_JIT_DEFINES=GPUOS_DIRECT_TABLE_IN_SHARED=0: the table
// stays in the area, as until session 39 (an A/B switch).
#ifndef GPUOS_DIRECT_TABLE_IN_SHARED
#define GPUOS_DIRECT_TABLE_IN_SHARED 1
#endif
constexpr bool kDirectTableInShared = GPUOS_DIRECT_TABLE_IN_SHARED != 0;

// The length of `task`'s table as staged in ctx.descs (0: not staged): a
// task of one tensor whose area (`area_words`, the submission's own count)
// holds the task, the graph's tensors and the single successor word of its
// root (a lone task: no edges, one root; SubmissionPayloadWords), so that
// the area's tensors from the task's one on are its table and fit
// kMaxTaskTensors descriptors. The tensor count is the words after the task
// divided by kTensorWords, rounded down, which drops the successor word.
__device__ __forceinline__ unsigned int StagedTableLength(const TaskDesc& task,
                                                          unsigned int area_words) {
  if (!kDirectTableInShared || task.num_tensors != 1 || area_words < kTaskWords) return 0;
  const unsigned int area_tensors = (area_words - kTaskWords) / kTensorWords;
  const unsigned int first = static_cast<unsigned int>(task.tensors[0]);
  if (first >= area_tensors) return 0;
  const unsigned int length = area_tensors - first;
  return length <= static_cast<unsigned int>(kMaxTaskTensors) ? length : 0u;
}

// All threads: from `payload`, words of a submission's area laid out with
// a shift (payload word p is in the SlotWords place of word p + `shift`:
// 0 for words read from the area, kSubmissionRecordWords for the ring
// slot's words), the area's first `area_words` words: the task into
// `task` (with `stage_task`; otherwise `task` holds it already, its tensor
// indices relative) and its tensors' descriptors into ctx.descs; where
// `exact_words` (area_words is the submission's own count, not an upper
// bound) and the task's table fits, its whole table into ctx.descs
// (StagedTableLength, returned in *staged; 0 otherwise).
__device__ __forceinline__ void StageDirectPayload(const SlotWords& payload, unsigned int shift,
                                                   unsigned int area_words, bool exact_words,
                                                   bool stage_task, TaskDesc* task,
                                                   const DirectContext& ctx, unsigned int* staged) {
  if (stage_task) {
#pragma unroll
    for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
      const unsigned int p = threadIdx.x + j * blockDim.x - shift;
      if (threadIdx.x + j * blockDim.x >= shift && p < kTaskWords) {
        reinterpret_cast<int4*>(task)[p] = payload.w[j];
      }
    }
  }
  __syncthreads();
  const unsigned int num = task->num_tensors <= kMaxTaskTensors ? task->num_tensors : 0u;
  const unsigned int table = exact_words ? StagedTableLength(*task, area_words) : 0u;
  const unsigned int table_first = static_cast<unsigned int>(task->tensors[0]);
#pragma unroll
  for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
    const unsigned int w = threadIdx.x + j * blockDim.x;
    if (w < shift) continue;
    const unsigned int p = w - shift;
    if (p < kTaskWords || p >= area_words) continue;
    const unsigned int tensor = (p - kTaskWords) / kTensorWords;
    const unsigned int word_of = (p - kTaskWords) % kTensorWords;
    if (table != 0) {  // descs[0] is the task's tensor, as below
      if (tensor - table_first < table) {
        reinterpret_cast<int4*>(ctx.descs + (tensor - table_first))[word_of] = payload.w[j];
      }
      continue;
    }
    for (unsigned int k = 0; k < num; ++k) {
      if (static_cast<unsigned int>(task->tensors[k]) == tensor) {
        reinterpret_cast<int4*>(ctx.descs + k)[word_of] = payload.w[j];
      }
    }
  }
  *staged = table;
}

// All threads: area `area`'s first `area_words` words into registers
// (L2), laid out as StageDirectPayload takes them with shift 0.
__device__ __forceinline__ void LoadDirectArea(const int4* area, unsigned int area_words,
                                               SlotWords& payload) {
#pragma unroll
  for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
    const unsigned int p = threadIdx.x + j * blockDim.x;
    payload.w[j] = p < area_words ? __ldcg(area + p) : make_int4(0, 0, 0, 0);
  }
}

// All threads: the task (into `task`) and its tensors' descriptors (into
// ctx.descs) from the area's first `area_words` words (L2; LoadDirectArea,
// StageDirectPayload). Thread 0 claims a tile with the loads in flight when
// `claim` is set, and returns the word.
__device__ unsigned long long LoadDirectTask(DirectSlot* direct, const int4* area,
                                             unsigned int area_words, bool exact_words, bool claim,
                                             TaskDesc* task, const DirectContext& ctx,
                                             unsigned int* staged) {
  SlotWords payload;
  LoadDirectArea(area, area_words, payload);
  const unsigned long long word = threadIdx.x == 0 && claim ? atomicAdd(&direct->claim, 1ull) : 0;
  StageDirectPayload(payload, 0, area_words, exact_words, true, task, ctx, staged);
  return word;
}

// A later submission's tile that a block claimed after counting its last
// tile of another (RunDirectTiles hands it to RunDirect).
struct DirectHandover {
  unsigned long long sequence;  // 0: none
  unsigned int tiles;
  unsigned int tile;
};

// All threads: runs tile `first` (valid: this block holds it) of submission
// `sequence`'s task (`task`, `tiles`; its descriptors in ctx.descs, its
// table there too where `table_staged`, else in the area) and the tiles it
// claims after it; the block whose count
// is the last completes the submission. A block claims its next tile after
// it counts the one it ran (so that the count of the last tile, which ends
// the call, waits for no claim; the block that makes it claims nothing, as
// no tile is left): the submission may have completed meanwhile and its
// slot been reused, so a claim that takes a later submission's tile (the
// word's holder) is handed over in *handover for the caller to run (true
// returned), as a late helper's (HelpRunDirect).
__device__ bool RunDirectTiles(const Queue& q, unsigned long long sequence, const TaskDesc& task,
                               unsigned int tiles, unsigned int first, bool table_staged,
                               const DirectContext& ctx, DirectHandover* handover) {
  __shared__ __align__(16) TaskDesc tile;
  __shared__ unsigned int claimed;  // the tile to run next, kNoTask: none
  __shared__ OpFunction op_function;
  __shared__ unsigned int op_slot;
  const unsigned int slot = SlotOf(q, sequence);
  DirectSlot* const direct = q.direct + slot;
  const unsigned int num_tensors = task.num_tensors <= kMaxTaskTensors ? task.num_tensors : 0u;
  GPUOS_PHASE_BEGIN(phase_clock);
  // The tile's descriptor but for its items: the task's words, its tensors
  // numbered as ctx.descs holds them.
  for (unsigned int w = kTileOwnWords + threadIdx.x; w < kTaskWords; w += blockDim.x) {
    reinterpret_cast<int4*>(&tile)[w] = reinterpret_cast<const int4*>(&task)[w];
  }
  long long chunk = 0;  // thread 0's
  if (threadIdx.x == 0) {
    claimed = first;
    handover->sequence = 0;
    ctx.recorder->sequence = static_cast<unsigned int>(sequence);
    reinterpret_cast<int4*>(&tile)[0] = reinterpret_cast<const int4*>(&task)[0];
#pragma unroll
    for (unsigned int k = 0; k < kMaxTaskTensors; ++k) {
      tile.tensors[k] = k < num_tensors ? static_cast<int>(k) : task.tensors[k];
    }
    chunk = TileChunk(task, tiles);
  }
  if (threadIdx.x == 32) {
    OpCache& cached = *ctx.op_cache;
    if (task.logical_op == 0 && task.opcode == cached.slot) {
      op_function = cached.function;
      op_slot = cached.slot;
    } else {
      unsigned int found = 0;
      op_function = gpuos_resolve_operator(task, &found);
      op_slot = found;
      if (task.logical_op == 0 && op_function != nullptr) {
        cached.slot = found;
        cached.function = op_function;
      }
    }
  }
  OpCall call;
  call.task = &tile;
  call.tensors = ctx.descs;
  call.scratch = ctx.scratch;
  call.scratch_bytes = kWorkerScratchBytes;
  call.num_tensors = num_tensors;
  call.status = q.slot_status + slot;
  call.table = table_staged
                   ? ctx.descs
                   : reinterpret_cast<const TensorDesc*>(OpenedArea(q, direct) + kTaskWords) +
                         (num_tensors != 0 ? task.tensors[0] : 0);
  __syncthreads();
  GPUOS_PHASE_MARK(phase_clock, 20);
  while (claimed != kNoTask) {
    if (threadIdx.x == 0) {
      ChunkItems(task, chunk, claimed, &tile.begin, &tile.end);
      GPUOS_PHASE_MARK(phase_clock, 26);
      ctx.recorder->Start(q, task, claimed);
      GPUOS_PHASE_MARK(phase_clock, 27);
    }
    __syncthreads();
    GPUOS_PHASE_MARK(phase_clock, 21);
    const OpFunction op = op_function;
    if (op != nullptr) {
      GPUOS_OPERATOR_ABI
      op(call);
    } else if (op_slot != 0 && threadIdx.x == 0) {
      ReportError(call, kWorkerBadOpcode, op_slot);
    }
    __syncthreads();  // the results, and the scratch free for the next tile
    if (threadIdx.x == 0) {
      ctx.recorder->Finish(q, tile);
      ++*ctx.completed;
      // Far from the task's end (more tiles left than the grid has blocks)
      // the next claim goes first, its round trip beside the count's release, as
      // until session 31; the submission cannot complete while this block
      // holds an uncounted tile, so the word is still its own. Near the end
      // the count goes first (below).
      const bool claim_first = claimed + gridDim.x < tiles;
      const DirectClaim early =
          claim_first ? DecodeDirectClaim(atomicAdd(&direct->claim, 1ull)) : DirectClaim{};
      const bool last = CountDirectTile(&direct->done) + 1u == tiles;
      GPUOS_PHASE_MARK(phase_clock, 22);
      unsigned int next = kNoTask;
      if (last) {
        // Every tile ran, so every tile was claimed: nothing to claim. The
        // count goes back to 0 when the slot's next direct submission opens
        // (OpenDirect), not here: a store to the line that the other blocks'
        // last claims are hitting would hold this block's system fence
        // behind them (the likely cause of a completion 0.5-1.0 us longer at
        // 104 tiles in the first version of this change, session 31).
        const unsigned long long counted_ns = q.trace != nullptr ? GlobalTimerNs() : 0;
        CompleteSubmission(q, slot, sequence, kDirectCountAcqRel);
        ctx.recorder->QueueEvent(q, kTraceCompleteOp, counted_ns, sequence);
        // The mirror after the completion, off the call's path (before it,
        // with its atomic and PCIe store, counted-to-stored was 2.2-2.7 us
        // against 0.7-1.9 after it, two instances: gpu_checks_session25.txt).
        StoreVolatile(&q.control->direct_submissions,
                      atomicAdd(&q.state->direct_submissions, 1ull) + 1ull);
        GPUOS_PHASE_MARK(phase_clock, 23);
      } else if (claim_first) {
        next = early.valid() ? early.next : kNoTask;
      } else if (!NoTileLeft(Volatile(&direct->claim), sequence)) {
        const DirectClaim got = DecodeDirectClaim(atomicAdd(&direct->claim, 1ull));
        if (got.valid() && got.holder == static_cast<unsigned int>(sequence)) {
          next = got.next;
        } else if (got.valid()) {
          handover->sequence = HolderSequence(got, sequence);
          handover->tiles = got.tiles;
          handover->tile = got.next;
        }
      }
      claimed = next;
    }
    __syncthreads();
  }
  return handover->sequence != 0;
}

// All threads: RunDirectTiles for tile `first` of submission `sequence`
// (`task`, in shared memory, and its descriptors loaded; its table too
// where `table_staged`), then for each later submission's tile it hands
// over: that submission's area is read after a fence (the add that took the
// tile was relaxed; the opening that published the area was a release) and
// its tiles run the same way (its table left in the area: its size is not
// known here).
__device__ void RunDirect(const Queue& q, unsigned long long sequence, TaskDesc* task,
                          unsigned int tiles, unsigned int first, bool table_staged,
                          const DirectContext& ctx) {
  __shared__ DirectHandover handover;
  const unsigned int slot = SlotOf(q, sequence);
  while (RunDirectTiles(q, sequence, *task, tiles, first, table_staged, ctx, &handover)) {
    if (threadIdx.x == 0) __threadfence();
    __syncthreads();
    sequence = handover.sequence;
    tiles = handover.tiles;
    first = handover.tile;
    unsigned int staged = 0;
    LoadDirectTask(q.direct + slot, OpenedArea(q, q.direct + slot), kInlinePayloadWords, false,
                   false, task, ctx, &staged);
    table_staged = false;
    __syncthreads();
  }
}

// Cached payloads (docs/runtime.md, "Direct tiles"): a program replayed with
// the same addresses publishes the same payload every call. The host keeps
// a few payloads' copies (core/src/runtime, PayloadCache) and marks a
// submission whose payload is new to the cache as the fill of an entry
// (SubmissionSlot::cache_fill): its opening writes the payload into the
// entry's area instead of the ring slot's and then stores its sequence in
// the entry's filled word (mapped host memory, queue.h kCacheFilledWords).
// Once that submission has completed and its filled word is there, the
// host publishes a later one with the same payload with the entry and
// whether its gate is open in its lone hint (LoneHintCacheBits), which
// arrives with the tail in one 16-byte load, and the admitting block opens
// it from the entry without reading the ring slot: a PCIe round trip and
// the payload's copy and fence less. Its gate (the frontend's stream
// ordering, opened by the host after publishing) is read from the hint
// too: a poller that sees it closed claims the submission only once a
// later read shows it open, or shows a hint that no longer names it cached
// (a later submission's, or this one's dropped by the host, whose drop the
// slot then holds), which sends the claim to the ring slot's read.
// (A first version read the entry from a second hint with the host's
// flags, a load issued before the tail's that can arrive older than the
// tail: 27 of 49 uses in runtime_gpu_test's gated test opened from the
// cache.)

// A claim from the payload cache (CachedClaimOf said kOpen): from the lone
// hint, the entry, the task's tiles and the area's words.
struct CachedOpening {
  unsigned int entry;
  unsigned int tiles;
  unsigned int area_words;
};

// Thread 0 of the admitting block of submission `sequence`, claimed from
// the payload cache (`cached`): opens its tiles with tile 0 taken by this
// block, the area being the cache entry's.
__device__ __forceinline__ void OpenCached(const Queue& q, unsigned long long sequence,
                                           const CachedOpening& cached, const DirectContext& ctx) {
  DirectSlot* const direct = q.direct + SlotOf(q, sequence);
  StoreVolatile(&direct->area, q.submission_capacity + cached.entry);
  StoreVolatile(&direct->done, 0u);  // as OpenDirect's
  __threadfence();                   // the area's index and the count before the opening (release)
  atomicExch(&direct->claim, EncodeDirectClaim(sequence, cached.tiles, 1));  // tile 0 is ours
  ctx.recorder->QueueEvent(q, kTraceAdmitOp, ctx.claimed_ns, sequence);
}

// All threads of the admitting block: opens submission `sequence`'s lone
// tiled task and runs its tiles until none is left for this block. From the
// payload cache where `cached` is given (OpenCached; `words`, `sub`,
// `gate_word` and `cache_fill` are then not read); otherwise with the
// slot's words in `words` (the whole slot, or the used ones and the last:
// ReadSlotUsed) and its record, gate word and cache fill parsed (`sub`,
// `gate_word`, `cache_fill`; ParseSlot) through OpenDirect. Returns false,
// having run nothing, when the submission is not one for direct tiles (not
// a lone tiled inline task, a closed or dropped gate, more than
// kDirectMaxTiles tiles, a tensor index outside the graph): the claim word
// is closed and the caller admits the submission as any other. (One
// function for both: a second call site in the worker's loop made it spill
// 144 bytes more, ptxas -v, sm_90.)
__device__ bool OpenAndRunDirect(const Queue& q, unsigned long long sequence,
                                 const SlotWords& words, const Submission& sub,
                                 unsigned long long gate_word, unsigned int cache_fill,
                                 const CachedOpening* cached, const DirectContext& ctx) {
  __shared__ __align__(16) TaskDesc task;
  __shared__ unsigned int tiles;
  __shared__ unsigned int opened_words;
  GPUOS_PHASE_BEGIN(phase_clock);
  if (cached != nullptr) {
    if (threadIdx.x == 0) {
      OpenCached(q, sequence, *cached, ctx);
      tiles = cached->tiles;
      opened_words = cached->area_words;
    }
  } else if (!OpenDirect(q, sequence, words, sub, gate_word, cache_fill, &task, &tiles,
                         &opened_words, ctx)) {
    return false;
  }
  GPUOS_PHASE_MARK(phase_clock, 16);
  __syncthreads();  // what thread 0 left
  DirectSlot* const direct = q.direct + SlotOf(q, sequence);
  unsigned int staged = 0;
  // The descriptors as the helpers get them (the area was written and
  // fenced by this block, or filled by an earlier submission).
  LoadDirectTask(direct, OpenedArea(q, direct), opened_words, true, false, &task, ctx, &staged);
  __syncthreads();
  GPUOS_PHASE_MARK(phase_clock, 17);
  RunDirect(q, sequence, &task, tiles, 0, staged != 0, ctx);
  if (cached != nullptr && threadIdx.x == 0) {
    // Counted after the block's tiles, off the call's path (diagnostics
    // and tests: RuntimeStats::cached_openings).
    StoreVolatile(&q.control->cached_openings, atomicAdd(&q.state->cached_openings, 1ull) + 1ull);
  }
  return true;
}

// Thread 0 of a helper: what its claim `got` (the word its add returned,
// for the submission *run whose opening it saw) gives it: *claimed the tile
// (kNoTask: none) and *tiles; where the tile is a later submission's (the
// one read completed and a later one of the slot opened the word, which
// cannot complete, nor its area change, before the tile counts), *run
// becomes that one and *reload is set: its area is read again, after the
// fence here (the add that saw the opening is relaxed).
__device__ __forceinline__ void TakeHelperClaim(const DirectClaim& got, unsigned long long* run,
                                                unsigned int* claimed, unsigned int* tiles,
                                                int* reload) {
  *reload = 0;
  *claimed = got.valid() ? got.next : kNoTask;
  *tiles = got.tiles;
  if (got.valid() && got.holder != static_cast<unsigned int>(*run)) {
    __threadfence();
    *run = HolderSequence(got, *run);
    *reload = 1;
  }
}

// HelpRunDirect's work: `help_span` (thread 0's, shared) gets when this
// block began to help and when it saw the opening, for the help record the
// caller writes after the tiles (tracing only).
__device__ __forceinline__ void HelpAndRunDirect(const Queue& q, unsigned long long sequence,
                                                 unsigned int area_words, const DirectContext& ctx,
                                                 unsigned long long* help_span) {
  __shared__ __align__(16) TaskDesc task;
  __shared__ unsigned int tiles;
  __shared__ unsigned int claimed;    // the tile held, kNoTask: none
  __shared__ unsigned long long run;  // whose tile it is
  __shared__ int reload;              // the tile is a later submission's
  __shared__ const int4* area;        // the area of the opening seen
  const unsigned int slot = SlotOf(q, sequence);
  DirectSlot* const direct = q.direct + slot;
  GPUOS_PHASE_BEGIN(phase_clock);
  unsigned int staged = 0;
  if (threadIdx.x == 0) {
    // The help record's start: when this block began to help, or (built
    // with GPUOS_TRACE_IDLE_ROUNDS=1, 2 or 3) the worker's earlier stamp
    // (the idle round's start, the board's sighting, past its barriers);
    // with =4, HelpRunDirect's own first stamp.
    if (q.trace != nullptr && !kTraceHelpEntry) {
      help_span[0] = kTraceIdleRounds && ctx.claimed_ns != 0 ? ctx.claimed_ns : GlobalTimerNs();
    }
    const unsigned long long word = AwaitDirectOpening(direct, sequence);
    if (q.trace != nullptr) help_span[1] = GlobalTimerNs();
    const DirectClaim seen = DecodeDirectClaim(word);
    claimed = word != 0 && seen.tiles != 0 ? 0u : kNoTask;  // 0: go on
    run = HolderSequence(seen, sequence);
    area = OpenedArea(q, direct);  // after the opening's acquire
  }
  __syncthreads();
  GPUOS_PHASE_MARK(phase_clock, 18);
  if (claimed == kNoTask) return;
  {
    // The area of the submission the word showed (a later one's size is not
    // known), the claim in flight with the loads.
    const bool own_area = run == sequence;
    if (!own_area) area_words = kInlinePayloadWords;
    const unsigned long long word =
        LoadDirectTask(direct, area, area_words, own_area, true, &task, ctx, &staged);
    if (threadIdx.x == 0) {
      TakeHelperClaim(DecodeDirectClaim(word), &run, &claimed, &tiles, &reload);
      if (reload) area = OpenedArea(q, direct);  // after TakeHelperClaim's fence
    }
    __syncthreads();
  }
  GPUOS_PHASE_MARK(phase_clock, 19);
  if (claimed == kNoTask) return;
  if (reload) {
    LoadDirectTask(direct, area, kInlinePayloadWords, false, false, &task, ctx, &staged);
    __syncthreads();
  }
  RunDirect(q, run, &task, tiles, claimed, staged != 0, ctx);
}

// All threads of a helper the direct board named for submission
// `sequence` (`area_words`: the payload words the board gave): waits for
// the claim word to open and runs tiles until none is left for this block
// (none when the word never opened or was closed). It reads the area the
// opening names (DirectSlot::area) after the opening: that of `sequence`,
// or of a later submission of the slot. Not inlined: inlined
// beside OpenAndRunDirect, the worker spilled 176 bytes of registers
// against 76 with one RunDirect and 60 this way (ptxas -v, sm_90).
//
// When tracing, thread 0 writes the block's help record (kTraceHelpOp:
// from when it began to help until it saw the opening) after its tiles, off
// the path the record times (session 43 wrote it before the block's first
// barrier, where it could delay the helper's first tile).
__device__ __noinline__ void HelpRunDirect(const Queue& q, unsigned long long sequence,
                                           unsigned int area_words, const DirectContext& ctx) {
  __shared__ unsigned long long help_span[2];  // thread 0's: began to help, saw the opening
  if (kTraceHelpEntry && threadIdx.x == 0) help_span[0] = GlobalTimerNs();
  HelpAndRunDirect(q, sequence, area_words, ctx, help_span);
  if (threadIdx.x == 0 && q.trace != nullptr) {
    ctx.recorder->QueueEvent(q, kTraceHelpOp, help_span[0], sequence, help_span[1]);
  }
}

}  // namespace queue
}  // namespace device
}  // namespace gpuos
