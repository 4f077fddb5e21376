// The attention stage on the tensor cores (stitch_attention.cuh has the
// stage, its formulas and P's members): the two products of a tile of up
// to 16 queries as warp-wide m16n8k8 products (PTX `mma.sync ... .tf32`),
// each f32 operand split into two TF32 values (x = hi + lo) and every
// product taken three times, lo x hi + hi x lo + hi x hi, so that the
// result keeps about f32's precision (what is dropped, lo x lo, is 2^-22
// of the product) where one TF32 product would keep 2^-11.
//
// Why: the CUDA-core stage reads one operand of every multiply-add from
// shared memory (q's rows in step 2, the probabilities in step 4), and an
// SM's shared memory returns one 4-byte value a lane per cycle, a quarter
// of its multiply-add rate: at seq 128 the two products took 2565 and 2618
// SM cycles of a 9396-cycle tile (H200, phase timing, session 36). Here a
// lane's fragment registers feed 32 multiply-adds each.
//
// Planned (stitch_plan.cpp, MmaFits) for f32 with kD a multiple of 16 up to
// 64, kN a multiple of 16 up to 128, kDv a multiple of 8 up to 64, at
// least 16 queries, keys contiguous along d and 16-byte aligned (kVec 4)
// and keys and values each in one view; otherwise, or with
// GPUOS_STITCH_ATTENTION_MMA=0, the CUDA-core stage.
//
// A tile, queries [m0, m0 + kBM) of one batch item (kBM <= 16; rows past
// kBM or kM are zeros and never stored):
// 1. after the wait, the keys of the warp's key tiles into registers, in
//    flight with q's rows, which go to the scratch ([16][kD + 16]: the
//    padding puts rows g and g + 1 on banks of their own), then into every
//    warp's A fragments (the values of the warp's column tile are loaded
//    after step 2, their round trip under the softmax: kLean);
// 2. scores: warp w computes key tiles w and w + 8 (8 keys each) over all
//    of d; scaled by kAlpha, stored to S where asked, and to the scratch
//    ([16][kN], over q's rows: a barrier first; odd rows' halves of 16
//    swapped where the probabilities are not stored, so that the product's
//    16-byte reads of rows g and g + 1 fall on other banks);
// 3. softmax: a half warp per row (16 rows at once, SoftmaxRow), on the
//    row as the scratch holds it (its maximum and sum do not depend on the
//    order);
// 4. out: warp w computes output columns [8w, 8w + 8) over all keys, its A
//    fragments read from the scratch, and stores them.
//
// The k index of a fragment is free to stand for any dimension (step 2) or
// key (step 4) as long as A and B agree, so a lane's four consecutive
// values of a 16-wide step s make its k = t and k = t + 4 of two m16n8k8
// steps: one 16-byte load each for q's rows, the keys and the
// probabilities.
#pragma once

#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/phase_timing.cuh"
#include "gpuos/device/stitch.cuh"
#include "gpuos/device/stitch_attention.cuh"

namespace gpuos {
namespace device {
namespace stitch {
namespace mma {

// v's values are loaded after the scores (their round trip under the
// softmax) and the scores keep one accumulator chain a key tile, so that
// fewer registers live through the scores step: at seq 128 the stage's Run
// spills 36 bytes with -maxrregcount=216 instead of 112 (ptxas -v:
// bench/results/experiments/attention_mma_spills_session37.txt), and its tile took
// 5.66-5.70 us against 6.08-6.11 (H200, same-instance A/B, session 37:
// bench/results/experiments/attention_mma_lean_ab_session37.txt; seq 32
// unchanged). GPUOS_STITCH_MMA_EARLY_VALUES (a JIT define, an A/B switch)
// restores session 36's form: values in flight with the keys, two chains.
#ifdef GPUOS_STITCH_MMA_EARLY_VALUES
constexpr bool kLean = false;
#else
constexpr bool kLean = true;
#endif

// An f32 value as two TF32 values, x = hi + lo: hi rounded to TF32's 10
// bits of mantissa (half an ulp added, the rest cut), lo = x - hi (exact),
// whose low 13 bits the tensor cores ignore (2^-22 of x lost). Integer and
// f32 instructions only: cvt.rna.tf32.f32 for both halves made the
// products slower than the CUDA-core stage (session 36). A value within
// 2^-11 of f32's largest rounds to infinity here (and its product to NaN).
struct Split {
  unsigned int hi, lo;
};

__device__ __forceinline__ Split SplitOf(float x) {
  const unsigned int hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
  return {hi, __float_as_uint(x - __uint_as_float(hi))};
}

// d += a x b: one m16n8k8 product of the warp, PTX's fragment layout
// (lane = 4 g + t): a = (row g, k t), (g + 8, t), (g, t + 4), (g + 8, t + 4);
// b = (k t, column g), (t + 4, g); d = (g, 2t), (g, 2t + 1), (g + 8, 2t),
// (g + 8, 2t + 1).
__device__ __forceinline__ void Product(float (&d)[4], unsigned int a0, unsigned int a1,
                                        unsigned int a2, unsigned int a3, unsigned int b0,
                                        unsigned int b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// d[0] += lo(a) x hi(b), d[1] += hi(a) x lo(b), d[2] += hi(a) x hi(b): a
// product to about f32's precision, each term in an accumulator of its own
// (three independent chains; the caller adds them, the small ones first).
__device__ __forceinline__ void Product3(float (&d)[3][4], const Split (&a)[4],
                                         const Split (&b)[2]) {
  Product(d[0], a[0].lo, a[1].lo, a[2].lo, a[3].lo, b[0].hi, b[1].hi);
  Product(d[1], a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].lo, b[1].lo);
  Product(d[2], a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
}

// Element r of the terms of `chains` accumulators, summed.
template <int kChains>
__device__ __forceinline__ float Total(const float (&d)[kChains][3][4], int r) {
  float small = 0.f, large = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) {
    small += d[c][0][r] + d[c][1][r];
    large += d[c][2][r];
  }
  return large + small;
}

// The A fragments of two k steps from a lane's four values of rows g
// (`top`) and g + 8 (`bottom`): values 0 and 1 are k = t and t + 4 of the
// first step, 2 and 3 of the second.
__device__ __forceinline__ void SplitRows(const float4& top, const float4& bottom,
                                          Split (&first)[4], Split (&second)[4]) {
  first[0] = SplitOf(top.x);
  first[1] = SplitOf(bottom.x);
  first[2] = SplitOf(top.y);
  first[3] = SplitOf(bottom.y);
  second[0] = SplitOf(top.z);
  second[1] = SplitOf(bottom.z);
  second[2] = SplitOf(top.w);
  second[3] = SplitOf(bottom.w);
}

}  // namespace mma

template <class P, class Wait>
__device__ __forceinline__ void AttentionMma(const Tile& t, int tile, unsigned char* smem,
                                             const Wait& wait) {
  using T = typename P::T;
  constexpr int kRows = 16;  // an m16 product's rows
  static_assert(sizeof(T) == 4 && sizeof(compute_type_t<T>) == 4, "f32 only");
  static_assert(P::kBM >= 1 && P::kBM <= kRows, "up to 16 queries a tile");
  static_assert(P::kD % 16 == 0 && P::kD <= 64, "d: 16-wide steps, a lane's q in registers");
  static_assert(P::kN % 16 == 0 && P::kN <= 128, "keys: 16-wide steps, the scores in the scratch");
  static_assert(P::kDv % 8 == 0 && P::kDv <= 8 * kWarps, "a column tile of v a warp");
  static_assert(P::kVec == 4 && P::kKtSk == 1, "a key's values contiguous and 16-byte aligned");
  static_assert(P::kKtSplit >= P::kN && P::kVSplit >= P::kN, "keys and values in one view each");
  constexpr int kQRow = P::kD + 16;  // q's row stride in the scratch
  static_assert(
      kRows * kQRow * 4 <= kWorkerScratchBytes && kRows * P::kN * 4 <= kWorkerScratchBytes,
      "q's rows, then the scores, fit the scratch");
  constexpr int kDSteps = P::kD / 16;
  constexpr int kKeySteps = P::kN / 16;
  constexpr int kKeyTiles = P::kN / 8;
  constexpr int kKeyTilesPerWarp = (kKeyTiles + kWarps - 1) / kWarps;
  constexpr int kColumnTiles = P::kDv / 8;
  // Independent accumulators of the product with v (its k steps would
  // otherwise each wait for the one before).
  constexpr int kChains = kKeySteps >= 4 ? 4 : kKeySteps;
  // Odd rows' halves of 16 swapped in the scores' scratch (see the file
  // comment); not where the probabilities are stored (step 3 stores them
  // by their place in the row).
  constexpr bool kSwizzle = P::kN % 32 == 0 && !(P::kStoreProbs || kStoreUnread);
  const auto place = [](int row, int key) {
    return row * P::kN + (kSwizzle ? key ^ ((row & 1) << 4) : key);
  };
  constexpr int kMTiles = (P::kM + P::kBM - 1) / P::kBM;
  AssumeShared(smem);
  const int batch = tile / kMTiles;
  const int m0 = (tile - batch * kMTiles) * P::kBM;
  const auto row_in = [&](int row) { return row < P::kBM && m0 + row < P::kM; };
  const T* const q = t.ptr<const T>(P::kQ) + P::kQOff + static_cast<long long>(batch) * P::kQSb +
                     static_cast<long long>(m0) * P::kQSm;
  const T* const kt = t.ptr<const T>(P::kKt) + P::kKtOff + static_cast<long long>(batch) * P::kKtSb;
  const T* const v = t.ptr<const T>(P::kV) + P::kVOff + static_cast<long long>(batch) * P::kVSb;
  // The outputs' addresses before any store (stitch_attention.cuh says why).
  T* const scores = t.ptr<T>(P::kS) + P::kSOff + static_cast<long long>(batch) * P::kSSb;
  T* const probs = t.ptr<T>(P::kPr) + P::kPrOff + static_cast<long long>(batch) * P::kPrSb;
  T* const out = t.ptr<T>(P::kO) + P::kOOff + static_cast<long long>(batch) * P::kOSb;
  float* const qs = reinterpret_cast<float*>(smem);  // [kRows][kQRow], then the scores [kRows][kN]
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int tq = lane & 3;

  GPUOS_PHASE_BEGIN(phase_clock);
  wait();
  // 1. The warp's keys (key tile w + i kWarps: key 8 tile + g, values
  // [16s + 4tq, +4)) and values (column 8w + g, keys 16s + 4tq + j), in
  // flight with q's rows.
  float4 keys[kKeyTilesPerWarp][kDSteps];
#pragma unroll
  for (int i = 0; i < kKeyTilesPerWarp; ++i) {
    const int key_tile = warp + i * kWarps;
    const T* const key =
        kt + static_cast<long long>(key_tile < kKeyTiles ? key_tile * 8 + g : 0) * P::kKtSn;
#pragma unroll
    for (int s = 0; s < kDSteps; ++s) {
      keys[i][s] =
          key_tile < kKeyTiles ? Load4(key + 16 * s + 4 * tq) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  const bool has_columns = warp < kColumnTiles;
  const int column = warp * 8 + g;
  float values[kKeySteps][4];
  const auto load_values = [&]() {
#pragma unroll
    for (int s = 0; s < kKeySteps; ++s) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const long long key = 16 * s + 4 * tq + j;
        values[s][j] =
            has_columns ? Load(v + key * P::kVSk + static_cast<long long>(column) * P::kVSn) : 0.f;
      }
    }
  };
  if constexpr (!mma::kLean) load_values();
  FillSharedAt<kRows * P::kD>(
      qs,
      [&](int i) {
        const int m = i / P::kD;
        const int d = i - m * P::kD;
        return row_in(m) ? Load(q + static_cast<long long>(m) * P::kQSm +
                                static_cast<long long>(d) * P::kQSk)
                         : 0.f;
      },
      [&](int i) {
        const int m = i / P::kD;
        return m * kQRow + (i - m * P::kD);
      });
  __syncthreads();
  GPUOS_PHASE_MARK(phase_clock, 12);

  // 2. Scores: each key tile's 16 x 8 over d, in two chains (even and odd
  // steps) of three terms a tile.
  constexpr int kScoreChains = mma::kLean ? 1 : 2;
  float acc[kKeyTilesPerWarp][kScoreChains][3][4] = {};
#pragma unroll
  for (int s = 0; s < kDSteps; ++s) {
    const float4 top = *reinterpret_cast<const float4*>(qs + g * kQRow + 16 * s + 4 * tq);
    const float4 bottom = *reinterpret_cast<const float4*>(qs + (g + 8) * kQRow + 16 * s + 4 * tq);
    mma::Split first[4], second[4];
    mma::SplitRows(top, bottom, first, second);
#pragma unroll
    for (int i = 0; i < kKeyTilesPerWarp; ++i) {
      if (warp + i * kWarps >= kKeyTiles) continue;
      const mma::Split b_first[2] = {mma::SplitOf(keys[i][s].x), mma::SplitOf(keys[i][s].y)};
      const mma::Split b_second[2] = {mma::SplitOf(keys[i][s].z), mma::SplitOf(keys[i][s].w)};
      mma::Product3(acc[i][s % kScoreChains], first, b_first);
      mma::Product3(acc[i][s % kScoreChains], second, b_second);
    }
  }
  __syncthreads();  // every warp's q fragments read: the scores go over them
#pragma unroll
  for (int i = 0; i < kKeyTilesPerWarp; ++i) {
    const int key_tile = warp + i * kWarps;
    if (key_tile >= kKeyTiles) continue;
    const int key = key_tile * 8 + 2 * tq;
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // rows g, g + 8
      const int row = g + 8 * half;
      const float s0 = static_cast<float>(P::kAlpha) * mma::Total<kScoreChains>(acc[i], 2 * half);
      const float s1 =
          static_cast<float>(P::kAlpha) * mma::Total<kScoreChains>(acc[i], 2 * half + 1);
      *reinterpret_cast<float2*>(qs + place(row, key)) = make_float2(s0, s1);
      if ((P::kStoreScores || kStoreUnread) && row_in(row)) {
        T* const at = scores + static_cast<long long>(m0 + row) * P::kSSm +
                      static_cast<long long>(key) * P::kSSn;
        at[0] = s0;
        at[P::kSSn] = s1;
      }
    }
  }
  if constexpr (mma::kLean) load_values();  // in flight through the softmax
  __syncthreads();
  GPUOS_PHASE_MARK(phase_clock, 13);

  // 3. Softmax: a half warp per row (all 16 rows at once), in the order
  // the scratch holds the row; rows past kBM or kM (zeros) too, their
  // probabilities not stored.
  {
    const int row = warp * 2 + (lane >> 4);
    const auto half_max = [](float x) { return WarpMax<float, 16>(x); };
    const auto half_sum = [](float x) { return WarpSum<float, 16>(x); };
    SoftmaxRow<P>(qs + row * P::kN, probs + static_cast<long long>(m0 + row) * P::kPrSm, lane & 15,
                  16, half_max, half_sum, row_in(row));
  }
  static_assert(kRows == 2 * kWarps, "two rows a warp");
  __syncthreads();
  GPUOS_PHASE_MARK(phase_clock, 14);

  // 4. out = probs x v: the warp's column tile over all keys.
  if (has_columns) {
    float sums[kChains][3][4] = {};
#pragma unroll
    for (int s = 0; s < kKeySteps; ++s) {
      const float4 top = *reinterpret_cast<const float4*>(qs + place(g, 16 * s + 4 * tq));
      const float4 bottom = *reinterpret_cast<const float4*>(qs + place(g + 8, 16 * s + 4 * tq));
      mma::Split first[4], second[4];
      mma::SplitRows(top, bottom, first, second);
      const mma::Split b_first[2] = {mma::SplitOf(values[s][0]), mma::SplitOf(values[s][1])};
      const mma::Split b_second[2] = {mma::SplitOf(values[s][2]), mma::SplitOf(values[s][3])};
      mma::Product3(sums[s % kChains], first, b_first);
      mma::Product3(sums[s % kChains], second, b_second);
    }
    const int out_column = warp * 8 + 2 * tq;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = g + 8 * half;
      if (!row_in(row)) continue;
      const float o0 = mma::Total<kChains>(sums, 2 * half);
      const float o1 = mma::Total<kChains>(sums, 2 * half + 1);
      T* const at = out + static_cast<long long>(m0 + row) * P::kOSm +
                    static_cast<long long>(out_column) * P::kOSn;
      at[0] = o0;
      at[P::kOSn] = o1;
    }
  }
  GPUOS_PHASE_MARK(phase_clock, 15);
}

}  // namespace stitch
}  // namespace device
}  // namespace gpuos
