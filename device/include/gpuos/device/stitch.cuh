// Stitched programs (docs/stitching.md): a whole task program compiled into
// one custom operator whose task runs on many blocks of the persistent
// worker. The program's stages (one per task of the program, or per part of
// a cat) are laid out one after another as the task's tiles, in dependency
// order; the block that runs a tile first waits until the stages it reads
// are done, runs its share of its stage with code specialized for the
// stage's shapes and strides (stitch_matmul.cuh, stitch_rows.cuh, generated
// elementwise code), then counts its tile done.
//
// Why it cannot deadlock: the worker hands out a task's tiles in increasing
// order, each to a running block that runs it at once, and a tile waits only
// for stages whose tiles all come before it. So the lowest tile not yet done
// never waits for anything unfinished: tiles finish in some order whatever
// the number of blocks (one block runs them all in order).
//
// Synchronization: a device buffer of 64-bit counters, one per stage and
// one for the whole task, each on its own 128-byte line (the host allocates
// it zeroed and passes it as the table's first descriptor). A tile's thread
// 0 adds one to its stage's counter and to the task's after the block's
// stores (release), and waiting tiles read the stage's with acquire loads.
// The counters are never reset: they count over all runs, so run r (from
// 0) waits for a stage of n tiles to reach (r + 1) * n, and a tile learns r
// from the task's counter when it starts (r * tiles + the tiles of run r
// done so far, which are fewer than tiles while this one is not done). So
// runs of one stitched program must not overlap: the host starts a run only
// after the previous one finished (and zeroes the counters after a failed
// one). 64 bits: at one run a microsecond they wrap after 500000 years.
//
// Only the persistent worker (queue_worker.cu) runs a stitched task: the
// one-shot worker (worker.cu) does not split a task into tiles.
//
// Memory: every global load goes through L2 (ld.global.cg): the worker runs
// for a long time, so neither L1 nor the read-only cache may hold a line
// from an earlier run or stage (weights updated in place between calls,
// intermediates of the previous call).
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/op_context.cuh"

namespace gpuos {
namespace device {
namespace stitch {

// 64-bit words from one counter to the next (128 bytes).
constexpr unsigned int kCounterStride = 16;
// How long a tile waits for a stage before it reports kWaitTimedOut and
// goes on (no results are trusted then: the submission fails).
constexpr unsigned long long kWaitLimitNs = kStitchWaitLimitNs;  // abi.h
// ctx.fail code of a wait that timed out (abi.h).
constexpr unsigned int kWaitTimedOut = kStitchWaitTimedOut;
constexpr int kThreads = static_cast<int>(kWorkerThreads);
constexpr int kWarps = kThreads / 32;

static_assert(kThreads == 256, "the stitched stage code is written for 256-thread blocks");

// One global load through L2 only (see the file comment).
template <typename E>
__device__ __forceinline__ E Load(const E* p) {
  return __ldcg(p);
}
__device__ __forceinline__ float4 Load4(const float* p) {
  return __ldcg(reinterpret_cast<const float4*>(p));
}

// A word of the task's table (Tile): in the worker's shared memory where a
// direct tile staged it (queue_direct.cuh, StagedTableLength), else in
// device memory, read at L2 as Load does; a generic address either way. No
// "memory" clobber: the table does not change during an operator's call
// (it was written before the call's barrier), so the load may be scheduled
// like Load's.
__device__ __forceinline__ unsigned long long LoadTableWord(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p));
  return v;
}

// Every thread of the block: dst[i] = value(i) for i in [0, kCount), each
// thread's values loaded into registers first, with all its loads in flight
// at once (one round trip), then stored. A loop of a load and a store per
// value, strided by the block, left it to the compiler, which unrolled it by
// four behind a remainder loop: two round trips for a few-rows product's 8
// values a thread, one per value for attention's 2 or 3 (sm_90 SASS). This
// way mlp batch 8's first product tile took 2.5 us instead of 3.2 and
// attention's 3.2 / 7.6 instead of 3.8 / 8.4 (H200, session 29,
// bench/results/experiments/fill_shared_ab_session29.txt).
// FillSharedAt: value(i) goes to dst[at(i)] instead (a padded layout).
template <int kCount, class C, class Value, class At>
__device__ __forceinline__ void FillSharedAt(C* dst, const Value& value, const At& at) {
  constexpr int kPerThread = (kCount + kThreads - 1) / kThreads;
  static_assert(kPerThread <= 8, "a thread holds its values in registers");
  // Masked below kThreads so that value()'s index arithmetic folds: with
  // threadIdx.x as it is, each load waited for a division (batch 8's tile
  // 3.9 us, the same file).
  const int first = static_cast<int>(threadIdx.x) & (kThreads - 1);
  C v[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = first + j * kThreads;
    v[j] = i < kCount ? value(i) : C(0);
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = first + j * kThreads;
    if (i < kCount) dst[at(i)] = v[j];
  }
}
template <int kCount, class C, class Value>
__device__ __forceinline__ void FillShared(C* dst, const Value& value) {
  FillSharedAt<kCount>(dst, value, [](int i) { return i; });
}

__device__ __forceinline__ unsigned long long LoadAcquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long LoadRelaxed(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void AddRelaxed(unsigned long long* p) {
  asm volatile("red.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(p) : "memory");
}

__device__ __forceinline__ void FenceAcqRel() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

__device__ __forceinline__ unsigned long long NowNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread's deadline for all the waits of a tile: the clock starts at
// the first wait that is not over at once (a tile whose waits all are never
// reads the timer), and every wait of the tile after kWaitLimitNs from then
// reports kWaitTimedOut and gives up, so a stuck producer fails a tile
// after 2 s however many rows or stages it waits for.
class WaitClock {
 public:
  // True, after reporting kWaitTimedOut through `ctx`, once the limit has
  // passed.
  __device__ bool Expired(const OpContext& ctx) {
    const unsigned long long now = NowNs();
    if (start_ == 0) start_ = now;
    if (now - start_ <= kWaitLimitNs) return false;
    ctx.fail(kWaitTimedOut);
    return true;
  }

 private:
  unsigned long long start_ = 0;
};

// One thread: polls N words until none is short, reading them together
// (all in flight at once), then only those still short again, with a nap of
// `nap_ns` between rounds (0: none). `word` holds the first reads;
// `is_short(i, word)` says whether word i is still short, `load(i)` reads
// word i again. Returns false when `clock` expired first.
template <int N, class IsShort, class Load>
__device__ __forceinline__ bool PollWords(unsigned long long (&word)[N], const IsShort& is_short,
                                          const Load& load, unsigned int nap_ns, WaitClock& clock,
                                          const OpContext& ctx) {
  for (;;) {
    bool any = false;
#pragma unroll
    for (int i = 0; i < N; ++i) any |= is_short(i, word[i]);
    if (!any) return true;
    if (clock.Expired(ctx)) return false;
    if (nap_ns > 0) __nanosleep(nap_ns);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (is_short(i, word[i])) word[i] = load(i);
    }
  }
}

// The sum of `v` over the warp (kLanes 16: over each half warp), in every
// lane.
template <typename C, int kLanes = 32>
__device__ __forceinline__ C WarpSum(C v) {
  static_assert(kLanes == 32 || kLanes == 16, "a warp or a half warp");
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// The least power of two >= n (n >= 1).
__host__ __device__ constexpr int PowerOfTwoAtLeast(int n) {
  return n <= 1 ? 1 : 2 * PowerOfTwoAtLeast((n + 1) / 2);
}

// `yes` where `pick`, else `no`, as a select of two registers: written as
// `pick ? v[a] : v[b]` the compiler indexed the array with the condition,
// which put it in local memory (190 local loads and stores in a batch-8
// product, sm_90 SASS, session 29). Float (the stages' compute type) by
// selp; any other type by the plain conditional.
template <typename C>
__device__ __forceinline__ C Select(bool pick, C yes, C no) {
  return pick ? yes : no;
}
__device__ __forceinline__ float Select(bool pick, float yes, float no) {
  float r;
  asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %3, 0;\n\tselp.f32 %0, %1, %2, p;\n\t}"
      : "=f"(r)
      : "f"(yes), "f"(no), "r"(pick ? 1u : 0u));
  return r;
}

// One exchange of WarpReduceScatter (offset kOffset; kHalf: the values a
// lane keeps, 0 once one is left), then the next. Templates, so that every
// array index is a constant: as a loop over the exchanges nvcc left it
// partly rolled and put v in local memory.
template <int kHalf, int kOffset, typename C, int N>
__device__ __forceinline__ void ReduceScatterFrom(C (&v)[N], int lane) {
  if constexpr (kOffset >= 1) {
    if constexpr (kHalf == 0) {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], kOffset);
    } else {
      const bool upper = (lane & kOffset) != 0;
#pragma unroll
      for (int i = 0; i < kHalf; ++i) {
        const C keep = Select(upper, v[i + kHalf], v[i]);
        const C send = Select(upper, v[i], v[i + kHalf]);
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
      }
    }
    ReduceScatterFrom<kHalf / 2, kOffset / 2>(v, lane);
  }
}
// A reduce-scatter of a warp's N sums (N a power of two, at most 64): each
// lane holds its own N partial values in v; afterwards v[0..R) hold warp
// totals, R = max(1, N / 32): lane `lane`'s v[r] is the total of value
// ScatteredIndex<N>(lane, r), which the 32 / N lanes of a group hold alike
// when N < 32 (ScatteredOwner: one of them). Exchange k (offset 16 >> k)
// halves the values a lane holds (it keeps one half, its partner the other,
// each adding what the other sends) while more than one is left, then plain
// butterflies finish: N - 1 + log2(32 / N) shuffles for N <= 32, where a
// WarpSum each takes 5 N (16 against 80 for a batch-8 product's 16 sums:
// its tile's product phase 230 instructions instead of 379, its device span
// 11.3 us instead of 12.4 on an H200, bench/results/experiments/
// reduce_scatter_ab_session29.txt).
template <int N, typename C>
__device__ __forceinline__ void WarpReduceScatter(C (&v)[N], int lane) {
  static_assert(N >= 1 && N <= 64 && (N & (N - 1)) == 0, "N: a power of two up to 64");
  ReduceScatterFrom<N / 2, 16>(v, lane);
}
// Which value WarpReduceScatter<N> leaves in lane `lane`'s v[r].
template <int N>
__device__ __forceinline__ int ScatteredIndex(int lane, int r) {
  int index = r;
#pragma unroll
  for (int k = 0; k < 5; ++k) {
    if ((N >> k) / 2 >= 1 && (lane & (16 >> k)) != 0) index += (N >> k) / 2;
  }
  return index;
}
// Whether lane `lane` is the first of the lanes that hold its values alike.
template <int N>
__device__ __forceinline__ bool ScatteredOwner(int lane) {
  return N >= 32 || lane % (32 / N) == 0;
}

// The maximum of `v` over the warp (kLanes 16: over each half warp), in
// every lane.
template <typename C, int kLanes = 32>
__device__ __forceinline__ C WarpMax(C v) {
  static_assert(kLanes == 32 || kLanes == 16, "a warp or a half warp");
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    const C other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

// One tile of a stitched task: its buffers and its stage's synchronization.
// Buffer addresses are read from the task's table where a stage needs them
// (each stage reads its few once, before it waits): in the worker's shared
// memory where a direct tile staged it there (since session 39, for a
// table of up to seven address records, 140 buffers: every program of the
// benchmark), else in device memory; not copied to shared memory here: a
// `__shared__` table in this header would be one more static allocation in
// every stitched operator's unit of the image.
// The table (TaskGraph::AddAddressTableTask): the counters' descriptor,
// then the buffers' addresses, 8 bytes each.
class Tile {
 public:
  // `stages`: the program's stages; `tiles`: the task's tiles; `waits`:
  // whether the stage waits for others (Poll). Constructed in the stage's
  // own function, so that its loads stay in flight with the stage's first
  // loads (a call waits for every load in flight before it).
  // REQUIRES: the task was added with its address table
  // (TaskGraph::AddAddressTableTask).
  // Not copyable: a copy would carry its own deadline (clock_).
  Tile(const Tile&) = delete;
  Tile& operator=(const Tile&) = delete;
  __device__ Tile(const OpContext& ctx, int stages, unsigned int tiles, bool waits)
      : ctx_(&ctx),
        addresses_(reinterpret_cast<const unsigned long long*>(ctx.call().table + 1)),
        stages_(stages),
        tiles_(tiles) {
    counters_ = reinterpret_cast<unsigned long long*>(LoadTableWord(&ctx.call().table[0].data));
    // Thread 0 of a stage that waits: the task's counter, which tells the
    // run (Poll; in flight while the stage loads its weights). A stage that
    // waits for nothing does not need it.
    if (waits && threadIdx.x == 0) task_count_ = LoadRelaxed(counters_ + stages_ * kCounterStride);
  }

  // Element 0 of buffer `buffer` as E (one load from the table: keep it).
  template <typename E>
  __device__ __forceinline__ E* ptr(int buffer) const {
    return reinterpret_cast<E*>(LoadTableWord(addresses_ + buffer));
  }

  // Thread 0: waits until stage `stage` counted its `tiles` tiles of this
  // run done; its acquire loads make their results visible to this thread,
  // and the caller's barrier passes them on to the block (the pattern of
  // CUTLASS's semaphores). Past the tile's deadline (WaitClock) it reports
  // kWaitTimedOut and returns.
  // REQUIRES: constructed with `waits`.
  __device__ void Poll(int stage, unsigned int tiles) const {
    const unsigned long long* counter = counters_ + stage * kCounterStride;
    const unsigned long long full = Run() * tiles;
    while (LoadAcquire(counter) < full) {
      if (clock_.Expired(*ctx_)) return;
      __nanosleep(32);
    }
  }

  // Thread 0: waits until every stage `stages[i]` counted its `tiles[i]`
  // tiles of this run done. The counters are read together (relaxed, in
  // flight at once), then only those still short again, and one fence
  // acquires what they count: one round trip when the stages are done
  // already, where Poll one after another costs a round trip each (an
  // acquire load holds back every later load until it returns).
  // REQUIRES: constructed with `waits`; N > 1.
  template <int N>
  __device__ void Poll(const int (&stages)[N], const unsigned int (&tiles)[N]) const {
    const unsigned long long run = Run();
    unsigned long long seen[N];
#pragma unroll
    for (int i = 0; i < N; ++i) seen[i] = LoadRelaxed(counters_ + stages[i] * kCounterStride);
    const bool done = PollWords(
        seen, [&](int i, unsigned long long count) { return count < run * tiles[i]; },
        [&](int i) { return LoadRelaxed(counters_ + stages[i] * kCounterStride); }, 32, clock_,
        *ctx_);
    if (done) FenceAcqRel();  // with the relaxed loads above: acquires the stages' results
  }

  // All threads: counts this tile of `stage` done once every thread's
  // stores are made (a barrier, then a release by thread 0), and counts it
  // in the task's counter, which only the next run reads (after this run's
  // submission finished).
  __device__ void Done(int stage) const {
    __syncthreads();
    if (threadIdx.x != 0) return;
    FenceAcqRel();  // the block's results before the count (release)
    AddRelaxed(counters_ + stage * kCounterStride);
    AddRelaxed(counters_ + stages_ * kCounterStride);
  }

  // All threads: counts this tile in the task's counter only, for a stage
  // no other stage waits for (its last stage, or one whose readers poll
  // flagged values): nothing reads its stage counter, so no fence precedes
  // the count. The worker fences every tile's results before it counts the
  // tile in the submission (queue_worker.cu, queue_direct.cuh), which is
  // what orders them before the completion and the next run. The barrier
  // stays: the task's counter is also read during the run (the Tile's
  // constructor, RunTag), and a warp of this tile that reads it after the
  // add would take the tile for the next run's (a flagged read would then
  // wait for values that never come).
  __device__ void DoneUnwaited() const {
    __syncthreads();
    if (threadIdx.x == 0) AddRelaxed(counters_ + stages_ * kCounterStride);
  }

  __device__ const OpContext& ctx() const { return *ctx_; }

  // Slot `slot` of the counter buffer (flagged intermediates).
  __device__ unsigned long long* slot(long long slot) const { return counters_ + slot; }

  // Any thread: the tag of this run's flagged values, run + 1 (1 in the
  // first run, so that the zeroed slots never match). One load of the
  // task's counter: r * tiles + the tiles of run r done so far, fewer than
  // tiles while this tile is not done. The 32-bit tag wraps after 2^32
  // runs, harmlessly: every run stores every slot of a flagged output
  // (dense outputs only), so a slot holds the previous run's tag or this
  // one's, never an older one that the wrap could bring back.
  __device__ unsigned int RunTag() const {
    return static_cast<unsigned int>(RunOf(LoadRelaxed(counters_ + stages_ * kCounterStride)));
  }

  // The calling thread's deadline for the tile's waits (LoadFlagged).
  __device__ WaitClock& clock() const { return clock_; }

 private:
  // The run (from 1) that a task counter of `count` belongs to: run r (from
  // 0) reads r * tiles_ plus the tiles of run r done so far, fewer than
  // tiles_ while the reading tile is not done.
  __device__ unsigned long long RunOf(unsigned long long count) const { return count / tiles_ + 1; }
  // Thread 0's, when the stage waits.
  __device__ unsigned long long Run() const { return RunOf(task_count_); }

  const OpContext* ctx_;
  const unsigned long long* addresses_;  // the buffers' (the table's records)
  unsigned long long* counters_ = nullptr;
  int stages_;
  unsigned int tiles_;
  // Thread 0's, when the stage waits: the task's counter when the tile
  // started (RunOf).
  unsigned long long task_count_ = 0;
  mutable WaitClock clock_;
};

// Flagged intermediates (docs/stitching.md, "Flagged intermediates"): a
// product stage's output that only later stages read lives in 8-byte slots
// of the counter buffer, each a value (low word) and the tag of the run
// that stored it (high word, Tile::RunTag), written and read with single
// 64-bit relaxed accesses: a reader that sees the tag sees the value, with
// no fence on either side and no count to wait for (NCCL's LL protocol).
// f32 values only.
__device__ __forceinline__ void StoreFlagged(unsigned long long* slot, float value,
                                             unsigned int tag) {
  const unsigned long long word =
      (static_cast<unsigned long long>(tag) << 32) | __float_as_uint(value);
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(slot), "l"(word) : "memory");
}

// One thread: the values of slots `slot_of(0..N-1)` once each carries
// `tag` (`pad` where slot_of gives null). All N loads are in flight at
// once, then only the slots still short are read again, without a nap (on
// H200s a 20 ns nap made the mlp's device spans 0.2-0.5 us longer in one
// call and moved them by -0.3 to +0.3 us in another: bench/results/
// experiments/flag_nap_ab_f60a132.txt, flag_nap_epilogue_addc735.txt). Past
// the tile's deadline (WaitClock) it reports kWaitTimedOut and returns what
// it has.
template <int N, class SlotOf>
__device__ __forceinline__ void LoadFlagged(const Tile& t, unsigned int tag, float pad,
                                            const SlotOf& slot_of, float (&out)[N]) {
  const unsigned long long ready = static_cast<unsigned long long>(tag) << 32;
  unsigned long long word[N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const unsigned long long* p = slot_of(i);
    word[i] = p != nullptr ? LoadRelaxed(p) : ready | __float_as_uint(pad);
  }
  PollWords(
      word, [&](int, unsigned long long w) { return (w >> 32) != tag; },
      [&](int i) { return LoadRelaxed(slot_of(i)); }, 0, t.clock(), t.ctx());
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = __uint_as_float(static_cast<unsigned int>(word[i]));
}

// A stage with nothing to wait for.
struct NoWait {
  __device__ __forceinline__ void operator()() const {}
};

}  // namespace stitch
}  // namespace device
}  // namespace gpuos
