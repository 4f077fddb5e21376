// The matrix-product stage of stitched programs (stitch.cuh): addmm,
// baddbmm, fused_addmm, matmul and bmm with every shape and stride a
// compile-time constant of the stage's parameter struct P (written by the
// generator, registry/src/jit/stitch_codegen.cpp):
//
//   a'  = rows of a, layer-normalized along K then activation kNorm - 1
//         (kNorm = 0: a' = a)
//   v   = alpha * (a' x b) + beta * c          (c read only when kBias)
//   out = activation kAct (v) + residual       (the residual only when kResidual)
//
// with the roundings of fused_addmm (matmul_fused.cuh): the normalized value
// after its activation and the product before an activation or a residual
// are rounded to T. Shapes: out [kBatch, kM, kN], a [kBatch, kM, kK], b
// [kBatch, kK, kN]; each tensor has a buffer (kA, ...), an element offset
// (kAOff, ...) and strides per axis (kASb, kASm, kASk, ...; 0 broadcasts).
//
// A tile computes rows [m0, m0 + kBM) x columns [n0, n0 + kBN) of one batch
// item. Its rows of a' go to the block's shared scratch first (kBM * kK
// values of the compute type, at most kWorkerScratchBytes), normalized
// there when kNorm. Then, with b's values loaded into registers (before
// the wait for the stage's inputs when b is not written by the program:
// kPrefetchB, a Linear layer's weights; likewise the bias: kBiasReady):
// - kKFast (b contiguous along K, few rows: a Linear layer's weights): warp
//   w handles columns n0 + w, n0 + w + 8, ...; its lanes split K (kVec
//   consecutive values each, 16-byte loads when kVec = 4) and the warp sums
//   with shuffles;
// - otherwise a thread per column and group: kBN columns, the block's
//   256 / kBN groups split into kKG groups along K (summed through shared
//   memory) and row groups (kRPT rows each).
#pragma once

#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/normalization.cuh"
#include "gpuos/device/phase_timing.cuh"
#include "gpuos/device/stitch.cuh"

namespace gpuos {
namespace device {
namespace stitch {

// The four values of `v` into out[0..3].
template <typename C>
__device__ __forceinline__ void Unpack4(const float4& v, C* out) {
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
}

// kVec values of b along K from `p` (consecutive when kVec = 4: b's K
// stride is 1), or zeros when !in.
template <typename T, int kVec>
__device__ __forceinline__ void LoadAlongK(const T* p, long long k_stride, bool in,
                                           compute_type_t<T> (&out)[kVec]) {
  using C = compute_type_t<T>;
  if constexpr (kVec == 4) {
    static_assert(sizeof(T) == 4 && sizeof(C) == 4, "16-byte loads are for f32");
    (void)k_stride;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (in) v = Load4(reinterpret_cast<const float*>(p));
    Unpack4(v, out);
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = in ? convert<C>(Load(p + i * k_stride)) : C(0);
  }
}

// The stage's tensors, read from the table once per tile (Tile::ptr); a
// flagged one (P::kAFlagged, kRFlagged, kOFlagged: stitch.cuh,
// StoreFlagged) as its slots, with this run's tag.
template <class P>
struct MatmulPointers {
  using T = typename P::T;
  static constexpr bool kAnyFlagged = P::kAFlagged || P::kRFlagged || P::kOFlagged;
  static_assert(!kAnyFlagged || sizeof(T) == 4, "flagged values are f32");
  const Tile& tile;
  const T* a;
  const T* b;
  const T* c;
  const T* weight;
  const T* bias;
  const T* r;
  T* out;
  const unsigned long long* a_slots;
  const unsigned long long* r_slots;
  unsigned long long* out_slots;
  unsigned int tag;
  __device__ explicit MatmulPointers(const Tile& t)
      : tile(t),
        a(P::kAFlagged ? nullptr : t.ptr<const T>(P::kA) + P::kAOff),
        b(t.ptr<const T>(P::kB) + P::kBOff),
        c(P::kBias ? t.ptr<const T>(P::kC) + P::kCOff : nullptr),
        weight(P::kNorm != 0 ? t.ptr<const T>(P::kG) + P::kGOff : nullptr),
        bias(P::kNorm != 0 ? t.ptr<const T>(P::kH) + P::kHOff : nullptr),
        r(P::kResidual && !P::kRFlagged ? t.ptr<const T>(P::kR) + P::kROff : nullptr),
        out(P::kOFlagged ? nullptr : t.ptr<T>(P::kO) + P::kOOff),
        a_slots(P::kAFlagged ? t.slot(P::kAOff) : nullptr),
        r_slots(P::kResidual && P::kRFlagged ? t.slot(P::kROff) : nullptr),
        out_slots(P::kOFlagged ? t.slot(P::kOOff) : nullptr),
        tag(kAnyFlagged ? t.RunTag() : 0u) {}
};

// Rows [m0, m0 + kBM) of a' into `smem` as the compute type, dense [kBM][kK]
// (rows past kM are zero). Every thread of the block; ends with a barrier.
template <class P>
__device__ __forceinline__ void StageRows(const MatmulPointers<P>& p, int batch, int m0,
                                          unsigned char* smem) {
  using T = typename P::T;
  using C = compute_type_t<T>;
  static_assert(P::kBM * P::kK * static_cast<long long>(sizeof(C)) <= kWorkerScratchBytes,
                "the tile's rows must fit the scratch");
  C* const rows = reinterpret_cast<C*>(smem);
  const long long a_first =
      static_cast<long long>(batch) * P::kASb + static_cast<long long>(m0) * P::kASm;
  const T* const a = P::kAFlagged ? nullptr : p.a + a_first;
  const unsigned long long* const a_slots = P::kAFlagged ? p.a_slots + a_first : nullptr;
  if constexpr (P::kNorm != 0) {
    constexpr int kPerLane = (P::kK + 31) / 32;
    const int lane = threadIdx.x & 31;
    const T* const weight = p.weight;
    const T* const bias = p.bias;
    for (int m = threadIdx.x >> 5; m < P::kBM; m += kWarps) {
      C* const dst = rows + m * P::kK;
      if (m0 + m >= P::kM) {
        for (int k = lane; k < P::kK; k += 32) dst[k] = C(0);
        continue;
      }
      C x[kPerLane], w[kPerLane], b[kPerLane];
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int k = lane + 32 * i;
        const bool in = k < P::kK;
        if constexpr (!P::kAFlagged) {
          x[i] =
              in ? convert<C>(Load(a + static_cast<long long>(m) * P::kASm + k * P::kASk)) : C(0);
        }
        w[i] = in ? convert<C>(Load(weight + k * P::kGS)) : C(0);
        b[i] = in ? convert<C>(Load(bias + k * P::kHS)) : C(0);
      }
      if constexpr (P::kAFlagged) {
        const unsigned long long* const src = a_slots + static_cast<long long>(m) * P::kASm;
        float v[kPerLane];
        LoadFlagged<kPerLane>(
            p.tile, p.tag, 0.f,
            [&](int i) -> const unsigned long long* {
              const int k = lane + 32 * i;
              return k < P::kK ? src + k * P::kASk : nullptr;
            },
            v);
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) x[i] = v[i];
      }
      C sum = C(0);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) sum += x[i];
      const C mean = WarpSum(sum) / static_cast<C>(P::kK);
      C squares = C(0);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const C d = lane + 32 * i < P::kK ? x[i] - mean : C(0);
        squares += d * d;
      }
      const C scale =
          C(1) / sqrt(WarpSum(squares) / static_cast<C>(P::kK) + static_cast<C>(P::kEps));
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int k = lane + 32 * i;
        if (k < P::kK) {
          dst[k] = convert<C>(NormOutput<T>((x[i] - mean) * scale * w[i] + b[i], P::kNorm - 1));
        }
      }
    }
  } else if constexpr (P::kAFlagged) {
    // Eight slots a thread in flight at once.
    constexpr int kTotal = P::kBM * P::kK;
    constexpr int kBatchLoads = 8;
    for (int first = threadIdx.x; first < kTotal; first += kThreads * kBatchLoads) {
      float v[kBatchLoads];
      LoadFlagged<kBatchLoads>(
          p.tile, p.tag, 0.f,
          [&](int j) -> const unsigned long long* {
            const int i = first + j * kThreads;
            const int m = i / P::kK;
            const int k = i - m * P::kK;
            return i < kTotal && m0 + m < P::kM
                       ? a_slots + static_cast<long long>(m) * P::kASm + k * P::kASk
                       : nullptr;
          },
          v);
#pragma unroll
      for (int j = 0; j < kBatchLoads; ++j) {
        if (first + j * kThreads < kTotal) rows[first + j * kThreads] = v[j];
      }
    }
  } else {
    FillShared<P::kBM * P::kK>(rows, [&](int i) {
      const int m = i / P::kK;
      const int k = i - m * P::kK;
      return m0 + m < P::kM
                 ? convert<C>(Load(a + static_cast<long long>(m) * P::kASm + k * P::kASk))
                 : C(0);
    });
  }
  __syncthreads();
}

// The bias c at (batch, row, n).
template <class P>
__device__ __forceinline__ compute_type_t<typename P::T> BiasAt(const MatmulPointers<P>& p,
                                                                int batch, int row, int n) {
  return convert<compute_type_t<typename P::T>>(Load(p.c + static_cast<long long>(batch) * P::kCSb +
                                                     static_cast<long long>(row) * P::kCSm +
                                                     static_cast<long long>(n) * P::kCSn));
}

// Output (batch, row, n) from its accumulated product and its bias (read
// by the caller; ignored without kBias).
template <class P>
__device__ __forceinline__ void StoreProduct(const MatmulPointers<P>& p, int batch, int row, int n,
                                             compute_type_t<typename P::T> acc,
                                             compute_type_t<typename P::T> bias) {
  using T = typename P::T;
  using C = compute_type_t<T>;
  C v = static_cast<C>(P::kAlpha) * acc;
  if constexpr (P::kBias) v = static_cast<C>(P::kBeta) * bias + v;
  T result;
  if constexpr (P::kAct != 0 || P::kResidual) {
    // As the activation's and the add's tasks would read the product: in T.
    C y = convert<C>(NormOutput<T>(convert<C>(convert<T>(v)), P::kAct));
    if constexpr (P::kResidual) {
      const long long at = static_cast<long long>(batch) * P::kRSb +
                           static_cast<long long>(row) * P::kRSm +
                           static_cast<long long>(n) * P::kRSn;
      if constexpr (P::kRFlagged) {
        float residual[1];
        LoadFlagged<1>(
            p.tile, p.tag, 0.f, [&](int) { return p.r_slots + at; }, residual);
        y += residual[0];
      } else {
        y += convert<C>(Load(p.r + at));
      }
    }
    result = convert<T>(y);
  } else {
    result = convert<T>(v);
  }
  const long long at = static_cast<long long>(batch) * P::kOSb +
                       static_cast<long long>(row) * P::kOSm + static_cast<long long>(n) * P::kOSn;
  if constexpr (P::kOFlagged) {
    StoreFlagged(p.out_slots + at, result, p.tag);
  } else {
    p.out[at] = result;
  }
}

template <class P, class Wait>
__device__ __forceinline__ void MatmulKFast(const MatmulPointers<P>& p, int batch, int m0, int n0,
                                            unsigned char* smem, const Wait& wait) {
  using T = typename P::T;
  using C = compute_type_t<T>;
  constexpr int kVec = P::kVec;
  constexpr int kColumnsPerWarp = P::kBN / kWarps;
  constexpr int kChunks = P::kK / kVec;
  constexpr int kChunksPerLane = (kChunks + 31) / 32;
  static_assert(P::kBN % kWarps == 0 && P::kK % kVec == 0, "kKFast tile shape");
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const T* const b = p.b + static_cast<long long>(batch) * P::kBSb;
  C bv[kColumnsPerWarp][kChunksPerLane][kVec];
  const auto load_b = [&]() {
#pragma unroll
    for (int j = 0; j < kColumnsPerWarp; ++j) {
      const int n = n0 + warp + kWarps * j;
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c) {
        const int chunk = lane + 32 * c;
        const bool in = n < P::kN && chunk < kChunks;
        LoadAlongK<T, kVec>(b + (in ? static_cast<long long>(n) * P::kBSn +
                                          static_cast<long long>(chunk) * kVec * P::kBSk
                                    : 0),
                            P::kBSk, in, bv[j][c]);
      }
    }
  };
  // The warp's outputs: output o is (m, j) = (o / kColumnsPerWarp, o %
  // kColumnsPerWarp), row m0 + m and column n0 + warp + kWarps * j. Their
  // sums are reduce-scattered (WarpReduceScatter): this lane stores the
  // kHeld outputs ScatteredIndex gives it, where it is their owner.
  constexpr int kOutputs = P::kBM * kColumnsPerWarp;
  constexpr int kPadded = PowerOfTwoAtLeast(kOutputs);
  constexpr int kHeld = kPadded > 32 ? kPadded / 32 : 1;
  const auto row_of = [&](int o) { return m0 + o / kColumnsPerWarp; };
  const auto column_of = [&](int o) { return n0 + warp + kWarps * (o % kColumnsPerWarp); };
  const auto stored = [&](int o) {
    return o < kOutputs && ScatteredOwner<kPadded>(lane) && row_of(o) < P::kM &&
           column_of(o) < P::kN;
  };
  // The bias of this lane's outputs, with b when the program does not
  // write it (a Linear layer's bias): no round trip in the store.
  constexpr bool kBiasEarly = P::kBias && P::kBiasReady;
  C bias[kHeld];
#pragma unroll
  for (int r = 0; r < kHeld; ++r) {
    const int o = ScatteredIndex<kPadded>(lane, r);
    bias[r] = kBiasEarly && stored(o) ? BiasAt(p, batch, row_of(o), column_of(o)) : C(0);
  }
  GPUOS_PHASE_BEGIN(phase_clock);
  if constexpr (P::kPrefetchB) load_b();
  wait();
  GPUOS_PHASE_MARK(phase_clock, 12);
  StageRows<P>(p, batch, m0, smem);
  GPUOS_PHASE_MARK(phase_clock, 13);
  if constexpr (!P::kPrefetchB) load_b();
  const C* const rows = reinterpret_cast<const C*>(smem);
  C acc[P::kBM][kColumnsPerWarp];
#pragma unroll
  for (int m = 0; m < P::kBM; ++m) {
#pragma unroll
    for (int j = 0; j < kColumnsPerWarp; ++j) acc[m][j] = C(0);
  }
#pragma unroll
  for (int c = 0; c < kChunksPerLane; ++c) {
    const int chunk = lane + 32 * c;
    if (chunk >= kChunks) continue;
#pragma unroll
    for (int m = 0; m < P::kBM; ++m) {
      C av[kVec];
      if constexpr (kVec == 4) {
        Unpack4(*reinterpret_cast<const float4*>(rows + m * P::kK + chunk * 4), av);
      } else {
#pragma unroll
        for (int v = 0; v < kVec; ++v) av[v] = rows[m * P::kK + chunk * kVec + v];
      }
#pragma unroll
      for (int j = 0; j < kColumnsPerWarp; ++j) {
#pragma unroll
        for (int v = 0; v < kVec; ++v) acc[m][j] += av[v] * bv[j][c][v];
      }
    }
  }
  C sums[kPadded];
#pragma unroll
  for (int o = 0; o < kPadded; ++o) {
    sums[o] = o < kOutputs ? acc[o / kColumnsPerWarp][o % kColumnsPerWarp] : C(0);
  }
  WarpReduceScatter<kPadded>(sums, lane);
  GPUOS_PHASE_MARK(phase_clock, 14);
  // The warp's epilogues (bias, activation, residual, store) side by side,
  // kHeld outputs a lane.
#pragma unroll
  for (int r = 0; r < kHeld; ++r) {
    const int o = ScatteredIndex<kPadded>(lane, r);
    if (stored(o)) {
      C b_value = bias[r];
      if constexpr (!kBiasEarly && P::kBias) b_value = BiasAt(p, batch, row_of(o), column_of(o));
      StoreProduct<P>(p, batch, row_of(o), column_of(o), sums[r], b_value);
    }
  }
  GPUOS_PHASE_MARK(phase_clock, 15);
}

template <class P, class Wait>
__device__ __forceinline__ void MatmulColumns(const MatmulPointers<P>& p, int batch, int m0, int n0,
                                              unsigned char* smem, const Wait& wait) {
  using T = typename P::T;
  using C = compute_type_t<T>;
  constexpr int kGroups = kThreads / P::kBN;
  constexpr int kKG = P::kKG;
  constexpr int kRowGroups = kGroups / kKG;
  constexpr int kRowsPerThread = (P::kBM + kRowGroups - 1) / kRowGroups;
  constexpr int kKPerThread = (P::kK + kKG - 1) / kKG;
  constexpr int kVec = P::kVec;
  constexpr int kSteps = kKPerThread / kVec;
  static_assert(kThreads % P::kBN == 0 && kGroups % kKG == 0, "columns tile shape");
  static_assert(kKPerThread % kVec == 0, "K per thread must be whole vectors");
  static_assert(kKG == 1 || kRowsPerThread * kThreads * static_cast<long long>(sizeof(C)) <=
                                kWorkerScratchBytes,
                "the partial sums must fit the scratch");
  const int column = threadIdx.x % P::kBN;
  const int group = threadIdx.x / P::kBN;
  const int row_group = group / kKG;
  const int k_group = group - row_group * kKG;
  const int n = n0 + column;
  const bool column_in = n < P::kN;
  const int k0 = k_group * kKPerThread;
  const T* const b = p.b + static_cast<long long>(batch) * P::kBSb +
                     (column_in ? static_cast<long long>(n) * P::kBSn : 0);
  // b's values of this thread, kChunk steps at a time: a round of loads,
  // then their products, so that the loads of a chunk are in flight
  // together (in one loop of a load and its products per step, a decoder
  // step's attention-weighted values, 17 steps a thread, took 5.2 us after
  // the softmax on the H200 at b0ad4c1, bench/results/
  // pytorch_stitch_profile.json). With kPrefetchB the whole range is
  // loaded before the wait.
  constexpr int kChunk = P::kPrefetchB ? kSteps : (kSteps < 8 ? kSteps : 8);
  constexpr int kChunks = (kSteps + kChunk - 1) / kChunk;
  C bv[kChunk * kVec];
  const auto load_chunk = [&](int chunk) {
#pragma unroll
    for (int s = 0; s < kChunk; ++s) {
      const int k = k0 + (chunk * kChunk + s) * kVec;
      const bool in = column_in && chunk * kChunk + s < kSteps && k < P::kK;
      C part[kVec];
      LoadAlongK<T, kVec>(b + (in ? static_cast<long long>(k) * P::kBSk : 0), P::kBSk, in, part);
#pragma unroll
      for (int v = 0; v < kVec; ++v) bv[s * kVec + v] = part[v];
    }
  };
  if constexpr (P::kPrefetchB) load_chunk(0);
  wait();
  StageRows<P>(p, batch, m0, smem);
  const C* const rows = reinterpret_cast<const C*>(smem);
  C acc[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) acc[r] = C(0);
#pragma unroll 1
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    if constexpr (!P::kPrefetchB) load_chunk(chunk);
#pragma unroll
    for (int s = 0; s < kChunk; ++s) {
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int k = k0 + (chunk * kChunk + s) * kVec + v;
        if (chunk * kChunk + s >= kSteps || k >= P::kK) continue;
#pragma unroll
        for (int r = 0; r < kRowsPerThread; ++r) {
          const int m = row_group * kRowsPerThread + r;
          if (m < P::kBM) acc[r] += rows[m * P::kK + k] * bv[s * kVec + v];
        }
      }
    }
  }
  if constexpr (kKG > 1) {
    __syncthreads();  // every thread is done with the rows: the scratch holds partial sums now
    C* const partial = reinterpret_cast<C*>(smem);
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      partial[((k_group * kRowGroups + row_group) * kRowsPerThread + r) * P::kBN + column] = acc[r];
    }
    __syncthreads();
    if (k_group == 0) {
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
#pragma unroll
        for (int g = 1; g < kKG; ++g) {
          acc[r] += partial[((g * kRowGroups + row_group) * kRowsPerThread + r) * P::kBN + column];
        }
      }
    }
  }
  if (k_group != 0 || !column_in) return;
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int m = row_group * kRowsPerThread + r;
    if (m < P::kBM && m0 + m < P::kM) {
      StoreProduct<P>(p, batch, m0 + m, n, acc[r], P::kBias ? BiasAt(p, batch, m0 + m, n) : C(0));
    }
  }
}

// Tile `tile` of a matrix-product stage with parameters P (see the file
// comment); `wait()` waits for the stage's inputs. Every thread of the block.
template <class P, class Wait>
__device__ __forceinline__ void Matmul(const Tile& t, int tile, unsigned char* smem,
                                       const Wait& wait) {
  AssumeShared(smem);
  constexpr int kMTiles = (P::kM + P::kBM - 1) / P::kBM;
  constexpr int kNTiles = (P::kN + P::kBN - 1) / P::kBN;
  const int batch = tile / (kMTiles * kNTiles);
  const int rest = tile - batch * (kMTiles * kNTiles);
  const int m0 = (rest / kNTiles) * P::kBM;
  const int n0 = (rest % kNTiles) * P::kBN;
  const MatmulPointers<P> p(t);
  if constexpr (P::kKFast) {
    MatmulKFast<P>(p, batch, m0, n0, smem, wait);
  } else {
    MatmulColumns<P>(p, batch, m0, n0, smem, wait);
  }
}

}  // namespace stitch
}  // namespace device
}  // namespace gpuos
