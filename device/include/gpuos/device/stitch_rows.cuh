// The row stage of stitched programs (stitch.cuh): layer_norm, rms_norm,
// softmax and log_softmax along the last dimension, with the row length, the
// row count and every stride compile-time constants of the stage's
// parameter struct P (registry/src/jit/stitch_codegen.cpp). The formulas are
// those of the std.normalization operators (normalization.cuh, softmax.cuh):
// two passes over values held in registers, the activation of layer_norm
// applied in the store (NormOutput).
//
// P: T; kKind (RowKind); kRows rows of kL elements; kRowsPerTile; input
// kIn + kInOff, element stride kInSL along the row, P::InRow(r) the offset
// of row r's first element; likewise kOut, kOutOff, kOutSL, P::OutRow(r);
// for the norms the per-column weight kG + kGOff (stride kGS) and, for
// layer_norm, bias kH + kHOff (stride kHS), kEps and kAct, and
// kParametersReady when the program does not write them (they are then read
// before the wait). A warp handles
// kRowsPerTile / 8 rows (rounded up) and reads all of them in one round.
#pragma once

#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/normalization.cuh"
#include "gpuos/device/stitch.cuh"

namespace gpuos {
namespace device {
namespace stitch {

enum RowKind : int { kLayerNorm = 0, kRmsNorm = 1, kSoftmax = 2, kLogSoftmax = 3 };

template <class P, class Wait>
__device__ __forceinline__ void Rows(const Tile& t, int tile, const Wait& wait) {
  using T = typename P::T;
  using C = compute_type_t<T>;
  constexpr bool kNorm = P::kKind == kLayerNorm || P::kKind == kRmsNorm;
  constexpr int kPerLane = (P::kL + 31) / 32;
  constexpr int kRowsPerWarp = (P::kRowsPerTile + kWarps - 1) / kWarps;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  static_assert(!P::kInFlagged || sizeof(T) == 4, "flagged values are f32");
  const T* const in = P::kInFlagged ? nullptr : t.ptr<const T>(P::kIn) + P::kInOff;
  const unsigned long long* const in_slots = P::kInFlagged ? t.slot(P::kInOff) : nullptr;
  const unsigned int tag = P::kInFlagged ? t.RunTag() : 0u;
  T* const out = t.ptr<T>(P::kOut) + P::kOutOff;
  C w[kNorm ? kPerLane : 1];
  C h[P::kKind == kLayerNorm ? kPerLane : 1];
  const T* const weight = kNorm ? t.ptr<const T>(P::kG) + P::kGOff : nullptr;
  const T* const bias = P::kKind == kLayerNorm ? t.ptr<const T>(P::kH) + P::kHOff : nullptr;
  const auto load_parameters = [&]() {
    if constexpr (kNorm) {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = lane + 32 * i;
        w[i] = j < P::kL ? convert<C>(Load(weight + j * P::kGS)) : C(0);
      }
    }
    if constexpr (P::kKind == kLayerNorm) {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = lane + 32 * i;
        h[i] = j < P::kL ? convert<C>(Load(bias + j * P::kHS)) : C(0);
      }
    }
  };
  // The weights before the wait unless the program writes them.
  if constexpr (P::kParametersReady) load_parameters();
  wait();
  if constexpr (!P::kParametersReady) load_parameters();
  const long long first = static_cast<long long>(tile) * P::kRowsPerTile;
  const long long end = first + P::kRowsPerTile < P::kRows ? first + P::kRowsPerTile
                                                           : static_cast<long long>(P::kRows);
  const C kPad = P::kKind == kSoftmax || P::kKind == kLogSoftmax ? ::gpuos::lowest<C>() : C(0);
  C x[kRowsPerWarp][kPerLane];
#pragma unroll
  for (int q = 0; q < kRowsPerWarp; ++q) {
    const long long r = first + warp + kWarps * q;
    const long long row = r < end ? P::InRow(r) : 0;
    if constexpr (P::kInFlagged) {
      float v[kPerLane];
      LoadFlagged<kPerLane>(
          t, tag, static_cast<float>(kPad),
          [&](int i) -> const unsigned long long* {
            const int j = lane + 32 * i;
            return r < end && j < P::kL ? in_slots + row + j * P::kInSL : nullptr;
          },
          v);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) x[q][i] = v[i];
    } else {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = lane + 32 * i;
        x[q][i] = r < end && j < P::kL ? convert<C>(Load(in + row + j * P::kInSL)) : kPad;
      }
    }
  }
#pragma unroll
  for (int q = 0; q < kRowsPerWarp; ++q) {
    const long long r = first + warp + kWarps * q;
    if (r >= end) continue;
    T* const dst = out + P::OutRow(r);
    if constexpr (P::kKind == kLayerNorm) {
      C sum = C(0);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) sum += x[q][i];
      const C mean = WarpSum(sum) / static_cast<C>(P::kL);
      C squares = C(0);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        x[q][i] = lane + 32 * i < P::kL ? x[q][i] - mean : C(0);
        squares += x[q][i] * x[q][i];
      }
      const C scale =
          C(1) / sqrt(WarpSum(squares) / static_cast<C>(P::kL) + static_cast<C>(P::kEps));
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = lane + 32 * i;
        if (j < P::kL) dst[j * P::kOutSL] = NormOutput<T>(x[q][i] * scale * w[i] + h[i], P::kAct);
      }
    } else if constexpr (P::kKind == kRmsNorm) {
      C squares = C(0);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) squares += x[q][i] * x[q][i];
      const C scale =
          C(1) / sqrt(WarpSum(squares) / static_cast<C>(P::kL) + static_cast<C>(P::kEps));
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = lane + 32 * i;
        if (j < P::kL) dst[j * P::kOutSL] = NormOutput<T>(x[q][i] * scale * w[i], P::kAct);
      }
    } else {
      C high = x[q][0];
#pragma unroll
      for (int i = 1; i < kPerLane; ++i) high = x[q][i] > high ? x[q][i] : high;
      high = WarpMax(high);
      C sum = C(0);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        x[q][i] -= high;
        const C e = lane + 32 * i < P::kL ? exp(x[q][i]) : C(0);
        if constexpr (P::kKind == kSoftmax) x[q][i] = e;
        sum += e;
      }
      sum = WarpSum(sum);
      if constexpr (P::kKind == kLogSoftmax) sum = log(sum);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = lane + 32 * i;
        if (j < P::kL) {
          dst[j * P::kOutSL] = convert<T>(P::kKind == kSoftmax ? x[q][i] / sum : x[q][i] - sum);
        }
      }
    }
  }
}

}  // namespace stitch
}  // namespace device
}  // namespace gpuos
