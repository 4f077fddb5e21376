// Per-phase timing of the task path, a diagnostic that is off by default.
//
// Compiled in only when NVRTC gets -DGPUOS_PHASE_TIMING=1, which the JIT
// adds when the environment variable GPUOS_PHASE_TIMING is set (and not "0")
// while an image is built (the option is part of every unit's cache key, so
// an instrumented image never replaces a plain one). Thread 0 of a block
// reads clock64() at phase boundaries and adds each phase's SM cycles and a
// count to gpuos_phase_cycles / gpuos_phase_counts (kPhaseSlots entries, in
// the image; read them with cuModuleGetGlobal, zero them between runs).
// Without the flag every macro expands to nothing.
//
// Slots (docs/runtime.md, "Where the time goes now"):
//   0..5   persistent worker, one chain step: task window + tile copy and
//          claim (0), tensor descriptors (1), the operator call as thread 0 sees
//          it (2), the barrier after the operator (3), completion and
//          successors (4), a whole step (5)
//   6, 7   one-shot worker: the checks and the operator call (6), barrier +
//          count (7)
//   8..11  elementwise operator: arity/dtype checks (8), ElementwiseTile
//          (dense check) (9), operands and attributes (10), the dense or
//          general loop (11)
//   10, 11 a stitched program's tile (stitch_codegen.cpp's body): the
//          stage's Run (10), its count (11: Tile::Done's barrier, fence and
//          adds; DoneUnwaited's barrier and one add)
//   12..15 stitched stage code: matrix products with few rows
//          (stitch_matmul.cuh, MatmulKFast): the wait (12), a's rows into
//          shared memory (13), the products (14), the stores (15);
//          attention (stitch_attention.cuh): wait and q's rows with the
//          first keys and values (12), scores (13), softmax (14), out (15)
//   16..23 direct tiles (queue_direct.cuh): the admitting block's slot
//          checks, copy, fence and opening (16), its task and descriptors
//          read back (17); a helper's wait for the opening (18), its task,
//          descriptors and claim (19); RunDirectTiles' setup: the tile's
//          descriptor, the operator and a barrier (20), the barrier before
//          the operator call (21), the call and after it: barrier, trace,
//          fence and count (22; slots 10 and 11 are parts of it for a
//          stitched task), the completion (23)
//   24, 25 the queue (queue_worker.cu): the admitting block's read of the
//          ring slot and its parse (24), a successful claim after the
//          tail's read: its CAS, counts and direct board (FinishClaim) (25)
//   26, 27 a direct tile's start, thread 0 (slot 21 is what follows, up to
//          the call): its items (26; for a block's later tiles also the
//          claim and the barrier before them), the recorder's start (27)
//   28     the poller's read of the tail (and flags) that showed a submission
//          to claim (PeekSubmission), from its issue until its value is used
#pragma once

namespace gpuos {
namespace device {

constexpr int kPhaseSlots = 29;

}  // namespace device
}  // namespace gpuos

#if defined(GPUOS_PHASE_TIMING) && GPUOS_PHASE_TIMING
extern "C" __device__ unsigned long long gpuos_phase_cycles[gpuos::device::kPhaseSlots];
extern "C" __device__ unsigned long long gpuos_phase_counts[gpuos::device::kPhaseSlots];

// Starts a phase clock named `clock` (a local of the calling thread).
#define GPUOS_PHASE_BEGIN(clock) long long clock = clock64()
// Adds the cycles since `clock` to `slot` (thread 0 only) and restarts it.
#define GPUOS_PHASE_MARK(clock, slot)                                        \
  do {                                                                       \
    const long long gpuos_phase_now = clock64();                             \
    if (threadIdx.x == 0) {                                                  \
      atomicAdd(&gpuos_phase_cycles[slot],                                   \
                static_cast<unsigned long long>(gpuos_phase_now - (clock))); \
      atomicAdd(&gpuos_phase_counts[slot], 1ull);                            \
    }                                                                        \
    clock = gpuos_phase_now;                                                 \
  } while (0)
#else
#define GPUOS_PHASE_BEGIN(clock) \
  do {                           \
  } while (0)
#define GPUOS_PHASE_MARK(clock, slot) \
  do {                                \
  } while (0)
#endif
