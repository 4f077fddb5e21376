// Speculative slot reads (docs/runtime.md, "Speculative slot reads"; queue.h,
// kSpeculativeSlotWords). Internal to the persistent worker
// (device/src/queue_worker.cu).
//
// A claim used to cost two PCIe round trips one after the other: the
// poller's read of the tail, then, once it had claimed, its read of the ring
// slot (1.5-1.8 us of the 2.9 from a claim to the opening of a direct
// submission, H200, session 31). Here warp 0 of a block that attempts a
// claim reads the first kSpeculativeSlotWords words of the slot it expects
// the next submission in, and the slot's last word (gate word and
// checksum), in flight with lane 0's read of the tail. The device's reads of
// host memory are not ordered among themselves, so the words may mix the
// slot's earlier submission with the one just published: they count only
// where the record names the claimed submission, its used words fit, their
// SlotChecksum equals the host's, and a slot gate (open_later) is open.
// Otherwise the slot is read again after the claim (ReadSlot), as before.
#pragma once

#include "gpuos/device/queue.h"
#include "gpuos/device/queue_direct.cuh"  // SlotWords
#include "gpuos/device/queue_sync.cuh"

// GPUOS_JIT_DEFINES=GPUOS_SPECULATIVE_SLOT_READS=0: no speculative read, the
// slot read after the claim as before (an A/B switch).
#ifndef GPUOS_SPECULATIVE_SLOT_READS
#define GPUOS_SPECULATIVE_SLOT_READS 1
#endif

namespace gpuos {
namespace device {
namespace queue {

constexpr bool kSpeculativeSlotReads = GPUOS_SPECULATIVE_SLOT_READS != 0;

// A speculative read as warp 0 leaves it in shared memory (the block's
// operator scratch, free between tasks): the slot's first words and its
// last.
struct SpeculativeSlot {
  int4 words[kSpeculativeSlotWords];
  int4 last;  // gate_word, checksum
};
static_assert(kSpeculativeSlotWords == 64, "warp 0 reads two words a lane");

__device__ __forceinline__ unsigned long long LowHalf(const int4& w) {
  return static_cast<unsigned long long>(static_cast<unsigned int>(w.y)) << 32 |
         static_cast<unsigned int>(w.x);
}
__device__ __forceinline__ unsigned long long HighHalf(const int4& w) {
  return static_cast<unsigned long long>(static_cast<unsigned int>(w.w)) << 32 |
         static_cast<unsigned int>(w.z);
}

// Warp 0 of a block that attempts a claim this round, converged: lane 0
// claims (TryClaimSubmission: its return value, *host_flags, *direct and
// *next_head are lane 0's) while every lane reads its words of the ring slot
// of submission `expected` (an index, as TryClaimSubmission's *next_head
// gave it last round). Returns, on lane 0, whether the words are the claimed
// submission's whole slot as the host wrote it (then they are in *spec).
__device__ __forceinline__ unsigned long long ClaimWithSlotRead(
    const Queue& q, unsigned long long expected, unsigned long long* host_flags, bool* direct,
    unsigned long long claim_below, unsigned long long* next_head, SpeculativeSlot* spec,
    bool* speculated) {
  const unsigned int lane = threadIdx.x;
  const int4* slot_words = reinterpret_cast<const int4*>(
      q.submissions + static_cast<unsigned int>(expected % q.submission_capacity));
  const int4 first = __ldcv(slot_words + lane);
  const int4 second = __ldcv(slot_words + lane + 32);
  int4 last = make_int4(0, 0, 0, 0);
  if (lane == 1) last = __ldcv(slot_words + kSubmissionSlotWords - 1);
  unsigned long long value = kNone;
  if (lane == 0) value = TryClaimSubmission(q, host_flags, direct, claim_below, next_head);
  value = __shfl_sync(~0u, value, 0);
  bool ok = value != kNone && value != kContended && value == expected;
  if (ok) {
    // The record: sequence (word 0, low), gate and gate_value (word 2),
    // inline_words (word 3's second 4 bytes).
    const unsigned long long sequence = __shfl_sync(~0u, LowHalf(first), 0);
    const unsigned long long gate = __shfl_sync(~0u, LowHalf(first), 2);
    const unsigned long long gate_value = __shfl_sync(~0u, HighHalf(first), 2);
    const unsigned int used =
        SlotUsedWords(static_cast<unsigned int>(__shfl_sync(~0u, first.y, 3)));
    const unsigned long long gate_word = __shfl_sync(~0u, LowHalf(last), 1);
    const unsigned long long checksum = __shfl_sync(~0u, HighHalf(last), 1);
    unsigned long long hashes = 0;
    if (lane < used) hashes += SlotWordHash(LowHalf(first), HighHalf(first), lane);
    if (lane + 32 < used) hashes += SlotWordHash(LowHalf(second), HighHalf(second), lane + 32);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) hashes += __shfl_xor_sync(~0u, hashes, offset);
    // A slot gate read closed is read again with the slot (its host opens it
    // after publishing, once PyTorch's stream is found idle).
    const bool gate_open =
        gate != kSlotGate ||
        static_cast<long long>((gate_word & ~kGateDropped) - gate_value) >= 0;
    ok = sequence == value + 1 && used <= kSpeculativeSlotWords &&
         SlotChecksum(sequence, hashes) == checksum && gate_open;
  }
  if (ok) {
    spec->words[lane] = first;
    spec->words[lane + 32] = second;
    if (lane == 1) spec->last = last;
  }
  if (lane == 0) *speculated = ok;
  return value;
}

// All threads, after the barrier that follows ClaimWithSlotRead: `words` as
// ReadSlot would have left them for a slot whose used words are in
// `spec` (the words past them are zero: nothing reads them).
__device__ __forceinline__ void TakeSpeculativeSlot(const SpeculativeSlot& spec,
                                                    SlotWords& words) {
#pragma unroll
  for (unsigned int j = 0; j < kSlotWordsPerThread; ++j) {
    const unsigned int w = threadIdx.x + j * blockDim.x;
    words.w[j] = w < kSpeculativeSlotWords        ? spec.words[w]
                 : w == kSubmissionSlotWords - 1u ? spec.last
                                                  : make_int4(0, 0, 0, 0);
  }
}

}  // namespace queue
}  // namespace device
}  // namespace gpuos
