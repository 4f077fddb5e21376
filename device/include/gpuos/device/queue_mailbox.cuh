// Direct hand-off of a tiled task's helper references to idle blocks
// (device/src/queue_worker.cu). Internal to the worker.
//
// Why: helper references pushed to the ready ring are popped one per CAS
// round by all idle blocks at once; with one winner per round, the eighth
// helper of a task started about 3 us after the first (H100, mlp batch 1
// trace at 689afe4). Here an idle block sets its bit in
// QueueDeviceState::idle_mask and polls its own mailbox word; the block that
// claims a task's first tile clears the bits of up to `helpers` idle blocks
// with one atomicAnd per mask word (all words at once, one lane each) and
// writes a letter (the ring entry's encoding) into each mailbox it won. The
// helpers it found no idle block for go to the ring as before.
//
// Invariants:
// - A block's mailbox is empty whenever its bit is set: letters are written
//   only after the writer cleared the bit, and a block sets its bit only
//   after it took its last letter (and fenced the clearing of the word).
// - A block that takes other work (ring, submission) withdraws its bit; if
//   the bit was already gone, a letter is on its way and the block takes it
//   when it is next idle. A block never exits with its bit set or a letter
//   due (Mailbox::Close).
#pragma once

#include "gpuos/device/queue.h"
#include "gpuos/device/queue_sync.cuh"

namespace gpuos {
namespace device {
namespace queue {

// Thread 0's view of its block's mailbox.
struct Mailbox {
  enum State : int {
    kOff = 0,    // not offered
    kOpen,       // bit set (or just cleared by a writer): polling
    kWithdrawn,  // bit withdrawn; whether a writer had taken it is in `withdrawn_from`
    kTaken,      // a writer took the bit: its letter is due
  };
  int state = kOff;
  unsigned int withdrawn_from = 0;  // the mask word before the withdrawal (kWithdrawn)

  __device__ static bool Usable() { return blockIdx.x < kMailboxBlocks; }
  __device__ static unsigned int Bit() { return 1u << (blockIdx.x & 31u); }
  __device__ static unsigned int* Word(const Queue& q) {
    return q.state->idle_mask + blockIdx.x / 32u;
  }

  // Idle: offers the block for letters (once per idle spell).
  __device__ void Open(const Queue& q) {
    if (state != kOff || !Usable()) return;
    atomicOr(Word(q), Bit());
    state = kOpen;
  }

  // The block took other work: withdraws the offer. The atomic's answer is
  // read only when the block is idle again (Settle), so taking work does not
  // wait for it.
  __device__ void Withdraw(const Queue& q) {
    if (state != kOpen) return;
    withdrawn_from = atomicAnd(Word(q), ~Bit());
    state = kWithdrawn;
  }

  __device__ void Settle() {
    if (state == kWithdrawn) state = (withdrawn_from & Bit()) != 0 ? kOff : kTaken;
  }

  // The letter in the mailbox, or 0; acquires what its writer published.
  __device__ unsigned long long Take(const Queue& q) {
    Settle();
    if (state != kOpen && state != kTaken) return 0;
    unsigned long long* box = q.state->mailbox + blockIdx.x;
    const unsigned long long letter = Volatile(box);
    if (letter == 0) return 0;
    StoreVolatile(box, 0ull);
    __threadfence();  // the writer's results; the cleared box before a new offer
    state = kOff;     // the writer cleared the bit
    return letter;
  }

  // Before the block exits: true when no letter can come any more; false
  // when one is due (the block must stay and take it).
  __device__ bool Close(const Queue& q) {
    Withdraw(q);
    Settle();
    return state == kOff;
  }
};

// What ReserveIdleBlocks won: this lane's mask word bits, and the warp's total.
struct IdleBlocks {
  unsigned int won;    // bits of idle_mask word `lane`
  unsigned int total;  // over all lanes
};

// Warp 0 of a block, every lane, `wanted` the same in all: takes up to
// `wanted` idle blocks' bits (lowest blocks first), one atomicAnd per mask
// word with a candidate, all words at once.
__device__ inline IdleBlocks ReserveIdleBlocks(const Queue& q, unsigned int wanted) {
  const unsigned int lane = threadIdx.x & 31u;
  const unsigned int blocks = gridDim.x < kMailboxBlocks ? gridDim.x : kMailboxBlocks;
  const unsigned int words = (blocks + 31u) / 32u;
  unsigned int idle = lane < words ? Volatile(q.state->idle_mask + lane) : 0u;
  if (lane == blockIdx.x / 32u) idle &= ~Mailbox::Bit();  // never set while busy; be sure
  const unsigned int count = __popc(idle);
  unsigned int inclusive = count;
#pragma unroll
  for (unsigned int offset = 1; offset < 32; offset <<= 1) {
    const unsigned int below = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += below;
  }
  const unsigned int before = inclusive - count;
  unsigned int take = before >= wanted ? 0u : (wanted - before < count ? wanted - before : count);
  unsigned int picked = 0;
  for (; take != 0; --take) {
    picked |= idle & (0u - idle);  // the lowest idle block left
    idle &= idle - 1u;
  }
  IdleBlocks result;
  result.won = picked != 0 ? atomicAnd(q.state->idle_mask + lane, ~picked) & picked : 0u;
  result.total = __reduce_add_sync(0xffffffffu, static_cast<unsigned int>(__popc(result.won)));
  return result;
}

// Every lane of the warp that reserved them: writes `letter` into the
// mailboxes of the blocks it won. REQUIRES: what the letter publishes is
// fenced (and ordered before these writes, e.g. by __syncwarp).
__device__ inline void DeliverLetters(const Queue& q, unsigned int won, unsigned long long letter) {
  const unsigned int lane = threadIdx.x & 31u;
  while (won != 0) {
    const unsigned int bit = static_cast<unsigned int>(__ffs(won)) - 1u;
    won &= won - 1u;
    StoreVolatile(q.state->mailbox + lane * 32u + bit, letter);
  }
}

}  // namespace queue
}  // namespace device
}  // namespace gpuos
