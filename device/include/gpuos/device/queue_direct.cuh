// Direct tiles (docs/runtime.md, "Direct tiles"): the tiles of a lone tiled
// task (SubmissionCountsTiles, its graph inline in the ring slot) run
// without the admission's copy into the mirrors, its fence and the help
// board. Internal to the persistent worker (device/src/queue_worker.cu).
//
// The protocol, per submission S in ring slot `slot`:
// - The poller that claims S finds the host's lone_hint naming it and
//   announces S on QueueDeviceState::direct_board (one word on the help
//   board's line, which idle blocks read every round), with how many blocks
//   should help and how many payload words S has.
// - The admitting block (the poller) reads the slot as for any admission.
//   If S is a lone tiled task whose gate is open, it copies the graph's
//   payload into the slot's area of device memory (DirectArea), fences and
//   opens DirectSlot::claim with an exchange (S's sequence, tile 0 taken);
//   otherwise it closes the word (S's sequence, kDirectClosed) and admits S
//   as any other graph.
// - A helper (an idle block the board names) waits for the word with
//   acquire loads (kDirectOpenWaitNs at most), reads the task and its
//   tensors from the area (L2) and claims tiles with 64-bit adds. The word
//   it finds says whose tiles it gets: S's; a later submission's of the
//   slot (S completed and the slot was reused while this block was late:
//   that one's area is read and its tile run; it cannot complete before
//   the tile counts); closed (leave).
// - Every block claims its next tile before it counts the last one (so S
//   cannot complete, nor its slot and area be reused, while it holds a
//   claim), fences its results and adds 1 to DirectSlot::done; the block
//   whose add makes it S's tiles sets it back to 0 and completes S
//   (CompleteSubmission).
//
// Helpers do not read the ring slot themselves: PCIe reads of it by tens of
// blocks at once stalled every block's memory traffic for 10-40 us (session
// 24's first version, bench/results/experiments/direct_tiles_session24.txt).
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/op_call.cuh"
#include "gpuos/device/queue.h"
#include "gpuos/device/queue_sync.cuh"

extern "C" __device__ gpuos::device::OpFunction gpuos_resolve_operator(
    const gpuos::device::TaskDesc& task, unsigned int* slot);

namespace gpuos {
namespace device {
namespace queue {

// How long a helper waits for its submission's claim word to open (the
// admitting block opens or closes it about 2-3 us after the claim; this is
// a bound for the unexpected), and how long it naps between two looks.
constexpr unsigned long long kDirectOpenWaitNs = 50000;
constexpr unsigned int kDirectPollNs = 256;
constexpr unsigned int kTaskWords = sizeof(TaskDesc) / 16;
constexpr unsigned int kTensorWords = sizeof(TensorDesc) / 16;
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

// All threads: the record and the gate word of `words` into the shared
// *sub and *gate_word. Ends with a barrier.
__device__ __forceinline__ void ParseSlot(const SlotWords& words, Submission* sub,
                                          unsigned long long* gate_word) {
  if (threadIdx.x < kSubmissionRecordWords) reinterpret_cast<int4*>(sub)[threadIdx.x] = words.w[0];
  if (threadIdx.x + (kSlotWordsPerThread - 1) * blockDim.x == kSubmissionSlotWords - 1) {
    const int4 last = words.w[kSlotWordsPerThread - 1];  // gate_word, then reserved
    *gate_word = static_cast<unsigned long long>(static_cast<unsigned int>(last.y)) << 32 |
                 static_cast<unsigned int>(last.x);
  }
  __syncthreads();
}

// Thread 0 of an idle block: whether the direct board names a submission
// this block has not seen (*seen: the last sequence it saw, or claimed
// itself) and counts it among its helpers (blocks [0, helpers]: the
// pollers, which claim most submissions, are the first blocks). *seen
// becomes the board's sequence.
__device__ __forceinline__ bool DirectHelpWanted(unsigned long long board_word,
                                                 unsigned long long* seen) {
  if (board_word == 0) return false;
  const DirectBoard board = DecodeDirectBoard(board_word);
  const unsigned long long sequence = DirectBoardSequence(board.sequence, *seen);
  if (sequence == *seen) return false;
  *seen = sequence;
  return blockIdx.x <= board.helpers;
}

// Tile `t` of `tiles` of a task's items [begin, end): as RunChain splits
// them (large tiles start on 64-item boundaries).
__device__ __forceinline__ void TileItems(const TaskDesc& task, unsigned int tiles, unsigned int t,
                                          long long* begin, long long* end) {
  const long long items = task.end - task.begin;
  long long chunk = (items + tiles - 1) / tiles;
  if (chunk >= 1024) chunk = (chunk + 63) & ~63ll;
  const long long b = task.begin + chunk * t;
  *begin = b < task.end ? b : task.end;
  *end = b + chunk < task.end ? b + chunk : task.end;
}

// What RunDirect needs of the worker.
struct DirectContext {
  TensorDesc* descs;       // kMaxTaskTensors descriptors in shared memory (overwritten)
  unsigned char* scratch;  // the operators' shared scratch
  unsigned int* completed;
  BlockRecorder* recorder;
  unsigned long long claimed_ns;  // the admitting block's claim (its trace record)
};

// Ring slot `slot`'s area: the graph's payload words as the admitting block
// copied them (the task, its tensor indices made relative to the graph's
// first tensor, then the graph's tensors).
__device__ __forceinline__ int4* DirectArea(const Queue& q, unsigned int slot) {
  return reinterpret_cast<int4*>(q.direct_areas +
                                 static_cast<unsigned long long>(slot) * kDirectAreaBytes);
}

// The low half of a claim word closed by an admitting block that admits its
// submission otherwise: no tile to claim, for any number of adds.
constexpr unsigned int kDirectClosed = 0x80000000u;

__device__ __forceinline__ unsigned long long DirectClaimWord(unsigned long long sequence,
                                                              unsigned int low) {
  return sequence << 32 | low;
}

// All threads. Runs tiles of submission `sequence`'s lone tiled task until
// none is left for this block, as its admitting block (`words`: the whole
// ring slot, ReadSlot) or as a helper (`words` null; `area_words`: the
// payload words to read from the slot's area). Returns
// false, having run nothing, when the opener finds the submission is not
// one for direct tiles (not a lone tiled inline task, a closed or dropped
// gate, another sequence in the slot, a tensor index outside the graph):
// it closes the claim word and admits the submission as any other.
__device__ bool RunDirect(const Queue& q, unsigned long long sequence, const SlotWords* words,
                          unsigned int area_words, const DirectContext& ctx) {
  bool opener = words != nullptr;
  __shared__ Submission sub;
  __shared__ unsigned long long gate_word;
  __shared__ __align__(16) TaskDesc task;
  __shared__ __align__(16) TaskDesc tile;
  __shared__ int go;                  // opener: eligible; helper: the word is open for it
  __shared__ unsigned int claimed;    // the tile to run next, kNoTask: none
  __shared__ unsigned long long run;  // the submission whose tiles the block runs
  __shared__ OpFunction op_function;
  __shared__ unsigned int op_slot;
  const unsigned int slot = static_cast<unsigned int>((sequence - 1) % q.submission_capacity);
  DirectSlot* const direct = q.direct + slot;
  int4* const area = DirectArea(q, slot);
  if (opener) {
    ParseSlot(*words, &sub, &gate_word);
    if (threadIdx.x == 0) {
      const bool dropped = sub.gate == kSlotGate && (gate_word & kGateDropped) != 0;
      go = sub.sequence == sequence &&
           SubmissionCountsTiles(sub.task_count, sub.first_root_tiles) && !dropped &&
           GateOpen(sub, gate_word) && sub.inline_words * 16 <= kDirectAreaBytes &&
           sub.inline_words >= kTaskWords + sub.tensor_count * kTensorWords;
    }
    // The task's words (tensor indices made relative) and the graph's
    // tensors into the slot's area, from the words read.
#pragma unroll
    for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
      const unsigned int w = threadIdx.x + j * blockDim.x;
      if (w >= kSubmissionRecordWords && w - kSubmissionRecordWords < sub.inline_words) {
        __stcg(area + (w - kSubmissionRecordWords), words->w[j]);
      }
      if (w >= kSubmissionRecordWords && w - kSubmissionRecordWords < kTaskWords) {
        reinterpret_cast<int4*>(&task)[w - kSubmissionRecordWords] = words->w[j];
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned int num = task.num_tensors;
      bool ok = go && num != 0 && num <= kMaxTaskTensors && task.num_tiles == sub.first_root_tiles;
      for (unsigned int k = 0; ok && k < num; ++k) {
        const unsigned int j = static_cast<unsigned int>(task.tensors[k]) - sub.tensor_begin;
        ok = j < sub.tensor_count;
        task.tensors[k] = static_cast<int>(j);
      }
      go = ok ? 1 : 0;
      if (ok) {
        // The relative indices, then the area before the opening (release).
        for (unsigned int k = 0; k < num; ++k) {
          reinterpret_cast<volatile int*>(reinterpret_cast<TaskDesc*>(area)->tensors)[k] =
              task.tensors[k];
        }
        StoreVolatile(q.sequences + slot, sequence);
        __threadfence();
        atomicExch(&direct->claim, DirectClaimWord(sequence, 1));  // tile 0 is this block's
        ctx.recorder->QueueEvent(q, kTraceAdmitOp, ctx.claimed_ns, sequence);
      } else {
        // Helpers that wait for the opening leave at once.
        atomicExch(&direct->claim, DirectClaimWord(sequence, kDirectClosed));
      }
      run = sequence;
      claimed = 0;
    }
    __syncthreads();
    if (!go) return false;
    area_words = sub.inline_words;
  } else if (threadIdx.x == 0) {
    // Wait for the opening: until the word holds this submission (or a
    // later one of the slot: this one is done), kDirectOpenWaitNs at most.
    const unsigned long long deadline = GlobalTimerNs() + kDirectOpenWaitNs;
    unsigned long long word;
    go = 0;
    for (;;) {
      word = LoadAcquireGpu(&direct->claim);  // the area, written before the opening
      const int ahead = static_cast<int>(static_cast<unsigned int>(word >> 32) -
                                         static_cast<unsigned int>(sequence));
      if (ahead >= 0) break;
      if (GlobalTimerNs() > deadline) break;
      // Not faster: a hundred helpers polling the word's line every few
      // hundred ns delayed the opening exchange until most had given up
      // (attention seq 128, 104 tiles: 16 blocks came).
      __nanosleep(kDirectPollNs);
    }
    const unsigned int holder = static_cast<unsigned int>(word >> 32);
    const bool closed = static_cast<unsigned int>(word) >= kDirectClosed;
    if (static_cast<int>(holder - static_cast<unsigned int>(sequence)) >= 0 && !closed) {
      go = 1;
      run = sequence + (holder - static_cast<unsigned int>(sequence));
    }
  }
  if (!opener) {
    __syncthreads();
    if (!go) return true;
    if (run != sequence) area_words = kInlinePayloadWords;  // a later graph's size is not known
  }
  // Helpers (again after claiming a later submission's tile): the task and
  // its descriptors from the area, the claim in flight with the loads.
  for (;;) {
    const unsigned long long current = run;
    SlotWords payload;
#pragma unroll
    for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
      const unsigned int p = threadIdx.x + j * blockDim.x;
      payload.w[j] = p < area_words ? __ldcg(area + p) : make_int4(0, 0, 0, 0);
    }
    unsigned long long word = 0;
    if (threadIdx.x == 0 && !opener) word = atomicAdd(&direct->claim, 1ull);
#pragma unroll
    for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
      const unsigned int p = threadIdx.x + j * blockDim.x;
      if (p < kTaskWords) reinterpret_cast<int4*>(&task)[p] = payload.w[j];
    }
    __syncthreads();
    const unsigned int num_tensors = task.num_tensors <= kMaxTaskTensors ? task.num_tensors : 0u;
#pragma unroll
    for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
      const unsigned int p = threadIdx.x + j * blockDim.x;
      if (p < kTaskWords || p >= area_words) continue;
      const unsigned int tensor = (p - kTaskWords) / kTensorWords;
      for (unsigned int k = 0; k < num_tensors; ++k) {
        if (static_cast<unsigned int>(task.tensors[k]) == tensor) {
          reinterpret_cast<int4*>(ctx.descs + k)[(p - kTaskWords) % kTensorWords] = payload.w[j];
        }
      }
    }
    const unsigned int tiles = task.num_tiles;
    if (threadIdx.x == 0 && !opener) {
      const unsigned int holder = static_cast<unsigned int>(word >> 32);
      const unsigned int index = static_cast<unsigned int>(word);
      if (holder == static_cast<unsigned int>(current)) {
        claimed = index < tiles ? index : kNoTask;
      } else {
        // The submission read completed and a later one of the slot opened
        // the word: the index is that one's, which cannot complete (nor its
        // area change) before the tile counts. Its area is read again, after
        // a fence (the add that saw the opening is relaxed).
        __threadfence();
        run = current + (holder - static_cast<unsigned int>(current));
        claimed = index;
      }
    }
    if (threadIdx.x == 32) {
      unsigned int found = 0;
      op_function = gpuos_resolve_operator(task, &found);
      op_slot = found;
    }
    __syncthreads();
    if (run != current) {
      if (claimed >= kDirectClosed) return true;
      // Loop with the tile held: the opener's claim path is skipped below.
      area_words = kInlinePayloadWords;
      opener = true;  // hold `claimed`: claim nothing while loading
      __syncthreads();
      continue;
    }
    if (threadIdx.x == 0) ctx.recorder->sequence = static_cast<unsigned int>(current);
    OpCall call;
    call.task = &tile;
    call.tensors = ctx.descs;
    call.scratch = ctx.scratch;
    call.scratch_bytes = kWorkerScratchBytes;
    call.num_tensors = num_tensors;
    call.status = q.slot_status + slot;
    call.table = reinterpret_cast<const TensorDesc*>(area + kTaskWords) + task.tensors[0];
    if (threadIdx.x == 0 && claimed != kNoTask && claimed >= tiles) claimed = kNoTask;
    __syncthreads();
    while (claimed != kNoTask) {
      if (threadIdx.x == 0) {
        tile = task;
        for (unsigned int k = 0; k < num_tensors; ++k) tile.tensors[k] = static_cast<int>(k);
        TileItems(task, tiles, claimed, &tile.begin, &tile.end);
        ctx.recorder->Start(q, task, claimed);
      }
      __syncthreads();
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
        // The next claim first: this submission cannot complete (nor its
        // slot be reused) while this tile is not counted.
        const unsigned int next = static_cast<unsigned int>(atomicAdd(&direct->claim, 1ull));
        __threadfence();  // this tile's results before its count
        if (atomicAdd(&direct->done, 1u) + 1u == tiles) {
          StoreVolatile(&direct->done, 0u);  // fenced by the completion's system fence
          const unsigned long long counted_ns = q.trace != nullptr ? GlobalTimerNs() : 0;
          CompleteSubmission(q, slot, current);
          ctx.recorder->QueueEvent(q, kTraceCompleteOp, counted_ns, current);
        }
        claimed = next < tiles ? next : kNoTask;  // this submission's: it had not completed
      }
      __syncthreads();
    }
    return true;
  }
}

}  // namespace queue
}  // namespace device
}  // namespace gpuos
