// The attention stage of stitched programs (stitch.cuh): three tasks of a
// program run as one stage,
//
//   scores = alpha * (q x kt)        (baddbmm with beta 0, or bmm: alpha 1)
//   probs  = softmax(scores)         (along the last dimension)
//   out    = probs x v               (bmm)
//
// with the formulas of those stages (stitch_matmul.cuh, stitch_rows.cuh):
// the scores and the probabilities are the values their tasks would store,
// and they are stored where the program may read them elsewhere (kStoreScores,
// kStoreProbs: false when they lie in the program's own workspace and no
// other stage reads them, registry/src/jit/stitch_unread.cpp), so such a
// program sees what it would without the fusion. What the fusion saves is
// two stage boundaries (a wait for every tile of the previous stage, and
// reading the scores and the probabilities back from L2), the products'
// generic tiling and, where nothing else reads them, the intermediates'
// stores.
//
// P (written by registry/src/jit/stitch_codegen.cpp): T; kBatch; kM queries,
// kN keys, kD (q's row length), kDv (v's columns); operands as in
// stitch_matmul.cuh, [batch, rows, columns] with a buffer, an element
// offset and strides per axis (0 broadcasts): Q [batch, M, D] (kQSb, kQSm,
// kQSk), Kt [batch, D, N] (kKtSb, kKtSk, kKtSn), V [batch, N, Dv] (kVSb,
// kVSk, kVSn), S and Pr [batch, M, N] (Sm, Sn), O [batch, M, Dv] (Sm, Sn);
// kAlpha; kBM queries a tile (kBM * (kD + kN) values of the compute type fit
// the scratch); kSplit lanes share one key's dot products (a power of two
// dividing kD and 32), kVec 4 when a key's values are contiguous and
// each lane's 16-byte units of them aligned; kStoreScores and kStoreProbs:
// whether S and Pr are stored.
//
// A tile computes queries [m0, m0 + kBM) of one batch item. After the wait
// its first keys (step 2) and values (step 4) are loaded with q's rows, one
// round trip for all three; the table's output addresses are read before
// any store (a table load after a store waits for it). Then:
// 1. their rows of q into the scratch;
// 2. scores: kSplit lanes per key, each with kD / kSplit values of the key
//    in registers (16-byte units, the lanes' interleaved; every pass's keys
//    loaded at once where they fit 64 registers), the partial dot products
//    of all kBM queries summed with shuffles, then scaled; into the scratch
//    (after q) and to S;
// 3. softmax: a warp per query over its row in the scratch, to Pr (one
//    query a tile: all warps over its row);
// 4. out: a thread per column of v in 256 / columns groups, each group over
//    a range of keys (its loads of v in flight together), the groups' sums
//    added through the scratch.
#pragma once

#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/phase_timing.cuh"
#include "gpuos/device/stitch.cuh"

namespace gpuos {
namespace device {
namespace stitch {

// GPUOS_STITCH_STORE_UNREAD (a JIT define): the scores and probabilities
// are stored even where nothing else reads them (an A/B switch).
#ifdef GPUOS_STITCH_STORE_UNREAD
constexpr bool kStoreUnread = true;
#else
constexpr bool kStoreUnread = false;
#endif

// Step 3 for one row of the scores: its elements j = first, first +
// stride, ... in `row` (the scratch) become the probabilities, there and
// (where the stage stores them and `store`) in `probs_row`; max_of and
// sum_of combine a value over the threads that share the row (a warp's
// shuffles, or the block's through the scratch).
template <class P, class MaxOf, class SumOf>
__device__ __forceinline__ void SoftmaxRow(compute_type_t<typename P::T>* row,
                                           typename P::T* probs_row, int first, int stride,
                                           const MaxOf& max_of, const SumOf& sum_of,
                                           bool store = true) {
  using T = typename P::T;
  using C = compute_type_t<T>;
  C high = ::gpuos::lowest<C>();
  for (int j = first; j < P::kN; j += stride) high = row[j] > high ? row[j] : high;
  high = max_of(high);
  C sum = C(0);
  for (int j = first; j < P::kN; j += stride) {
    const C e = exp(row[j] - high);
    row[j] = e;
    sum += e;
  }
  sum = sum_of(sum);
  for (int j = first; j < P::kN; j += stride) {
    const C p = convert<C>(convert<T>(row[j] / sum));  // as softmax stores it
    row[j] = p;
    if constexpr (P::kStoreProbs || kStoreUnread) {
      if (store) probs_row[static_cast<long long>(j) * P::kPrSn] = convert<T>(p);
    }
  }
}

template <class P, class Wait>
__device__ __forceinline__ void Attention(const Tile& t, int tile, unsigned char* smem,
                                          const Wait& wait) {
  using T = typename P::T;
  using C = compute_type_t<T>;
  constexpr int kMTiles = (P::kM + P::kBM - 1) / P::kBM;
  constexpr int kDPerLane = P::kD / P::kSplit;
  constexpr int kKeysPerPass = kThreads / P::kSplit;
  static_assert(P::kD % P::kSplit == 0 && 32 % P::kSplit == 0, "kSplit divides kD and a warp");
  static_assert(kDPerLane <= 64, "a lane's part of a key fits its registers");
  static_assert(P::kVec == 1 || (P::kVec == 4 && kDPerLane % 4 == 0 && sizeof(T) == 4),
                "16-byte loads of keys are for f32");
  static_assert(P::kBM * (P::kD + P::kN) * static_cast<long long>(sizeof(C)) <= kWorkerScratchBytes,
                "q's rows and the scores must fit the scratch");
  // Which of a key's values a lane holds (step 2). Interleaved: 16-byte
  // units (4 values; single values where a lane holds fewer than 4 or a
  // multiple of none), unit u of part p at u * kSplit + p, so that the
  // kSplit lanes of a key read adjacent units and each 32-byte sector of
  // a key is fetched once, by one load (seq 128: 16 full sectors a warp's
  // load). Blocked (before session 34): part p held [p * kDPerLane,
  // (p + 1) * kDPerLane), so every 16-byte load of a warp touched 32
  // sectors half each and the next load fetched their other halves again
  // (loads of the stage go to L2: ld.global.cg), twice the keys' L2
  // traffic. GPUOS_STITCH_KEYS_BLOCKED (a JIT define): blocked (an A/B
  // switch).
#ifdef GPUOS_STITCH_KEYS_BLOCKED
  constexpr bool kInterleaved = false;
#else
  constexpr bool kInterleaved = true;
#endif
  constexpr int kUnit = kDPerLane % 4 == 0 ? 4 : 1;
  // q's rows in the scratch, blocked, with 4 values of padding after every
  // 32, where that fits: the kSplit lanes of a key read parts of one row
  // that lie 128 bytes (kSplit 2) or 32 bytes (kSplit 8, two of them 128
  // apart) from each other, the same banks, so every 16-byte read of step 2
  // was a two-way bank conflict; padded, each part starts on banks of its
  // own. Interleaved, the lanes of a key read adjacent units of a row (the
  // same for every key: a broadcast), on banks of their own unpadded.
  // GPUOS_STITCH_Q_UNPADDED (a JIT define): unpadded (an A/B switch).
#if defined(GPUOS_STITCH_Q_UNPADDED)
  constexpr bool kPadQ = false;
#else
  constexpr bool kPadQ =
      !kInterleaved && kDPerLane <= 32 && 32 % kDPerLane == 0 &&
      P::kBM * (P::kD + (P::kD + 31) / 32 * 4 + P::kN) * static_cast<long long>(sizeof(C)) <=
          kWorkerScratchBytes;
#endif
  constexpr int kQRow = kPadQ ? P::kD + (P::kD + 31) / 32 * 4 : P::kD;   // a row's stride
  const auto q_at = [](int d) { return kPadQ ? d + (d >> 5) * 4 : d; };  // a value's place
  AssumeShared(smem);
  const int batch = tile / kMTiles;
  const int m0 = (tile - batch * kMTiles) * P::kBM;
  const T* const q = t.ptr<const T>(P::kQ) + P::kQOff + static_cast<long long>(batch) * P::kQSb +
                     static_cast<long long>(m0) * P::kQSm;
  const T* const kt = t.ptr<const T>(P::kKt) + P::kKtOff + static_cast<long long>(batch) * P::kKtSb;
  const T* const v = t.ptr<const T>(P::kV) + P::kVOff + static_cast<long long>(batch) * P::kVSb;
  // Keys [kKtSplit, kN) and values [kVSplit, kN) from a second view (the
  // inputs of the cat that wrote them: a cache and its new rows), their
  // key index counted from the split.
  constexpr bool kKeysInTwo = P::kKtSplit < P::kN;
  constexpr bool kValuesInTwo = P::kVSplit < P::kN;
  const T* kt2 = nullptr;
  const T* v2 = nullptr;
  if constexpr (kKeysInTwo) {
    kt2 = t.ptr<const T>(P::kKt2) + P::kKt2Off + static_cast<long long>(batch) * P::kKt2Sb;
  }
  if constexpr (kValuesInTwo) {
    v2 = t.ptr<const T>(P::kV2) + P::kV2Off + static_cast<long long>(batch) * P::kV2Sb;
  }
  // The outputs' addresses now: the compiler cannot move a table load
  // above a store (which might change the table), so each would wait.
  T* const scores = t.ptr<T>(P::kS) + P::kSOff + static_cast<long long>(batch) * P::kSSb;
  T* const probs = t.ptr<T>(P::kPr) + P::kPrOff + static_cast<long long>(batch) * P::kPrSb;
  T* const out = t.ptr<T>(P::kO) + P::kOOff + static_cast<long long>(batch) * P::kOSb;
  C* const qs = reinterpret_cast<C*>(smem);  // [kBM][kQRow]
  C* const ps = qs + P::kBM * kQRow;         // [kBM][kN]: scores, then probabilities
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;

  // Step 2's keys: lanes [kSplit * key, kSplit * (key + 1)) of a pass hold
  // kDPerLane values of that key each.
  const int part = threadIdx.x % P::kSplit;
  const int d0 = part * kDPerLane;
  // The place in the key (and in q's row) of a lane's value i.
  const auto value_d = [&](int i) {
    return kInterleaved ? kUnit * ((i / kUnit) * P::kSplit + part) + i % kUnit : d0 + i;
  };
  // Every pass's keys are loaded at once (one round trip) when they fit a
  // lane's 64 registers; otherwise one pass after another, each loading
  // the next (only for more keys than a block has threads).
  constexpr int kPasses = (P::kN + kKeysPerPass - 1) / kKeysPerPass;
  constexpr bool kPreload = kPasses * kDPerLane <= 64;
  constexpr int kHeld = kPreload ? kPasses : 1;
  C kv[kHeld][kDPerLane];
  const auto load_keys = [&](C(&dst)[kDPerLane], int j) {
    const bool key_in = j < P::kN;  // the same for the kSplit lanes of a key
    const bool second = kKeysInTwo && j >= P::kKtSplit;
    const long long sk = second ? P::kKt2Sk : P::kKtSk;
    const T* const key =
        second ? kt2 + (key_in ? static_cast<long long>(j - P::kKtSplit) * P::kKt2Sn : 0)
               : kt + (key_in ? static_cast<long long>(j) * P::kKtSn : 0);
    if constexpr (P::kVec == 4) {  // kUnit is 4: value_d(i) is a unit's first
#pragma unroll
      for (int i = 0; i < kDPerLane; i += 4) {
        float4 four = make_float4(0.f, 0.f, 0.f, 0.f);
        if (key_in) four = Load4(reinterpret_cast<const float*>(key + value_d(i)));
        dst[i] = four.x;
        dst[i + 1] = four.y;
        dst[i + 2] = four.z;
        dst[i + 3] = four.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kDPerLane; ++i) {
        dst[i] = key_in ? convert<C>(Load(key + static_cast<long long>(value_d(i)) * sk)) : C(0);
      }
    }
  };
  // Step 4's values: a thread per column of v, its group's keys kChunk at a
  // time.
  constexpr int kCols = P::kDv <= 32 ? 32 : P::kDv <= 64 ? 64 : P::kDv <= 128 ? 128 : 256;
  constexpr int kGroups = kThreads / kCols;
  constexpr int kKeysPerGroup = (P::kN + kGroups - 1) / kGroups;
  // A group of up to 40 keys loads them at once: 32 and then the rest
  // would cost a second round trip for a few keys (a decode step's 129 keys
  // are 4 groups of 33). GPUOS_STITCH_VALUE_CHUNK_32 (a JIT define): 32 at
  // most, as before (an A/B switch).
#ifdef GPUOS_STITCH_VALUE_CHUNK_32
  constexpr int kChunk = kKeysPerGroup < 32 ? kKeysPerGroup : 32;
#else
  constexpr int kChunk = kKeysPerGroup <= 40 ? kKeysPerGroup : 32;
#endif
  static_assert(P::kDv <= kThreads, "a thread per column of v");
  // 16-byte shared-memory reads where every row and lane part is aligned
  // (the scratch is; rows of q and of the scores start at multiples of 4).
  constexpr bool kQuads = sizeof(C) == 4 && kDPerLane % 4 == 0 && P::kD % 4 == 0;  // kQRow too
  constexpr bool kProbQuads = sizeof(C) == 4 && P::kD % 4 == 0 && P::kN % 4 == 0 &&
                              kKeysPerGroup % 4 == 0 && kChunk % 4 == 0;
  const int column = threadIdx.x % kCols;
  const int group = threadIdx.x / kCols;
  const bool column_in = column < P::kDv;
  const int first_key = group * kKeysPerGroup;
  const T* const vcol = v + (column_in ? static_cast<long long>(column) * P::kVSn : 0);
  const T* const vcol2 =
      kValuesInTwo ? v2 + (column_in ? static_cast<long long>(column) * P::kV2Sn : 0) : nullptr;
  C vv[kChunk];
  const auto load_values = [&](int c0) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const int j = first_key + c0 + i;
      const bool in = column_in && c0 + i < kKeysPerGroup && j < P::kN;
      const T* const value = kValuesInTwo && j >= P::kVSplit
                                 ? vcol2 + static_cast<long long>(j - P::kVSplit) * P::kV2Sk
                                 : vcol + static_cast<long long>(j) * P::kVSk;
      vv[i] = in ? convert<C>(Load(value)) : C(0);
    }
  };

  GPUOS_PHASE_BEGIN(phase_clock);
  wait();
  // The first keys and values in flight with q's rows: one round trip.
#pragma unroll
  for (int p = 0; p < kHeld; ++p) load_keys(kv[p], p * kKeysPerPass + threadIdx.x / P::kSplit);
  load_values(0);

  // 1. q's rows (rows past kM are zero).
  FillSharedAt<P::kBM * P::kD>(
      qs,
      [&](int i) {
        const int m = i / P::kD;
        const int d = i - m * P::kD;
        return m0 + m < P::kM ? convert<C>(Load(q + static_cast<long long>(m) * P::kQSm +
                                                static_cast<long long>(d) * P::kQSk))
                              : C(0);
      },
      [&](int i) {
        const int m = i / P::kD;
        return m * kQRow + q_at(i - m * P::kD);
      });
  __syncthreads();
  GPUOS_PHASE_MARK(phase_clock, 12);

  // 2. Scores: pass p covers keys [p * kKeysPerPass, (p + 1) * kKeysPerPass).
  const auto score_pass = [&](const C(&keys)[kDPerLane], int j) {
    C s[P::kBM];
#pragma unroll
    for (int m = 0; m < P::kBM; ++m) {
      C acc = C(0);
      if constexpr (kQuads) {  // 16-byte reads of q's row
#pragma unroll
        for (int i = 0; i < kDPerLane; i += 4) {
          const float4 four = *reinterpret_cast<const float4*>(qs + m * kQRow + q_at(value_d(i)));
          acc +=
              four.x * keys[i] + four.y * keys[i + 1] + four.z * keys[i + 2] + four.w * keys[i + 3];
        }
      } else {
#pragma unroll
        for (int i = 0; i < kDPerLane; ++i) acc += qs[m * kQRow + q_at(value_d(i))] * keys[i];
      }
#pragma unroll
      for (int offset = P::kSplit / 2; offset > 0; offset /= 2) {
        acc += __shfl_xor_sync(0xffffffffu, acc, offset);
      }
      s[m] = static_cast<C>(P::kAlpha) * acc;
    }
    if (j < P::kN && part == 0) {
#pragma unroll
      for (int m = 0; m < P::kBM; ++m) {
        const C value = convert<C>(convert<T>(s[m]));  // as baddbmm stores it
        ps[m * P::kN + j] = value;
        if ((P::kStoreScores || kStoreUnread) && m0 + m < P::kM) {
          scores[static_cast<long long>(m0 + m) * P::kSSm + static_cast<long long>(j) * P::kSSn] =
              convert<T>(value);
        }
      }
    }
  };
  if constexpr (kPreload) {
#pragma unroll
    for (int p = 0; p < kPasses; ++p) score_pass(kv[p], p * kKeysPerPass + threadIdx.x / P::kSplit);
  } else {
#pragma unroll 1
    for (int j0 = 0; j0 < P::kN; j0 += kKeysPerPass) {
      const int j = j0 + threadIdx.x / P::kSplit;
      if (j0 > 0) load_keys(kv[0], j);
      score_pass(kv[0], j);
    }
  }
  __syncthreads();
  GPUOS_PHASE_MARK(phase_clock, 13);

  // 3. Softmax of each query's scores (rows past kM keep their zeros). One
  // query a tile (a decode step): every warp takes part of its row, the
  // warps' maxima and sums meet in the scratch (q's rows are no longer
  // needed), instead of one warp walking the whole row.
  constexpr bool kWideSoftmax = P::kBM == 1 && P::kD >= 2 * kWarps;
  if constexpr (kWideSoftmax) {
    // Maxima and sums in slots of their own. Rows past kM cannot occur:
    // kBM is 1.
    C* const highs = qs;          // [kWarps]
    C* const sums = qs + kWarps;  // [kWarps]
    const auto block_max = [&](C v) {
      v = WarpMax(v);
      if (lane == 0) highs[warp] = v;
      __syncthreads();
      v = highs[0];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) v = highs[w] > v ? highs[w] : v;
      return v;
    };
    const auto block_sum = [&](C v) {
      v = WarpSum(v);
      if (lane == 0) sums[warp] = v;
      __syncthreads();
      v = sums[0];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) v += sums[w];
      return v;
    };
    SoftmaxRow<P>(ps, probs + static_cast<long long>(m0) * P::kPrSm, threadIdx.x, kThreads,
                  block_max, block_sum);
  } else {
    const auto warp_max = [&](C v) { return WarpMax(v); };
    const auto warp_sum = [&](C v) { return WarpSum(v); };
    for (int m = warp; m < P::kBM; m += kWarps) {
      if (m0 + m >= P::kM) continue;
      SoftmaxRow<P>(ps + m * P::kN, probs + static_cast<long long>(m0 + m) * P::kPrSm, lane, 32,
                    warp_max, warp_sum);
    }
  }
  __syncthreads();
  GPUOS_PHASE_MARK(phase_clock, 14);

  // 4. out = probs x v.
  static_assert(
      (kGroups - 1) * P::kBM * kCols * static_cast<long long>(sizeof(C)) <= kWorkerScratchBytes,
      "the groups' sums must fit the scratch");
  C acc[P::kBM];
#pragma unroll
  for (int m = 0; m < P::kBM; ++m) acc[m] = C(0);
#pragma unroll 1
  for (int c0 = 0; c0 < kKeysPerGroup; c0 += kChunk) {
    if (c0 > 0) load_values(c0);
    if constexpr (kProbQuads) {  // 16-byte reads of the probabilities
#pragma unroll
      for (int i = 0; i < kChunk; i += 4) {
        if (c0 + i >= kKeysPerGroup || first_key + c0 + i >= P::kN) continue;
#pragma unroll
        for (int m = 0; m < P::kBM; ++m) {
          const float4 p = *reinterpret_cast<const float4*>(ps + m * P::kN + first_key + c0 + i);
          acc[m] += p.x * vv[i] + p.y * vv[i + 1] + p.z * vv[i + 2] + p.w * vv[i + 3];
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const int j = first_key + c0 + i;
        if (c0 + i >= kKeysPerGroup || j >= P::kN) continue;
#pragma unroll
        for (int m = 0; m < P::kBM; ++m) acc[m] += ps[m * P::kN + j] * vv[i];
      }
    }
  }
  if constexpr (kGroups > 1) {
    __syncthreads();                                // every thread is done with the probabilities
    C* const partial = reinterpret_cast<C*>(smem);  // [kGroups - 1][kBM][kCols]
    if (group > 0) {
#pragma unroll
      for (int m = 0; m < P::kBM; ++m)
        partial[((group - 1) * P::kBM + m) * kCols + column] = acc[m];
    }
    __syncthreads();
    if (group == 0) {
#pragma unroll
      for (int m = 0; m < P::kBM; ++m) {
#pragma unroll
        for (int g = 1; g < kGroups; ++g)
          acc[m] += partial[((g - 1) * P::kBM + m) * kCols + column];
      }
    }
  }
  if (group == 0 && column_in) {
#pragma unroll
    for (int m = 0; m < P::kBM; ++m) {
      if (m0 + m < P::kM) {
        out[static_cast<long long>(m0 + m) * P::kOSm + static_cast<long long>(column) * P::kOSn] =
            convert<T>(acc[m]);
      }
    }
  }
  GPUOS_PHASE_MARK(phase_clock, 15);
}

}  // namespace stitch
}  // namespace device
}  // namespace gpuos
