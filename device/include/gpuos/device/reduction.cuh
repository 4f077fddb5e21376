// The loop of a reduction operator, one block per output element.
//
// Shapes: the input has rank R + K and the output rank R; the output's R
// dimensions equal the input's first R, and the input's last K dimensions are
// reduced (the host permutes the input view so the reduced dimensions come
// last; strides make that free). Work item s of a task is output element s
// (row-major); its `count` = product of the K reduced sizes; `index` runs over
// the reduced elements in row-major order.
//
// Per output element, by the block: every thread folds a strided share of
// the elements into its own accumulator (init, then step), then the partial
// accumulators are merged in a fixed order (merge): by warp shuffles and one
// exchange of the warps' partials through the scratch (accumulators of up to
// 32 bytes), or by a tree in the scratch (larger ones). Slices of up to
// kWarpSliceLimit elements are reduced one per warp instead (the block's
// warps take the task's output elements in turn; no block barrier). The
// writing thread stores finish(acc, count). Which path runs depends on
// `count`, sizeof(acc) and the block size only, so results are deterministic
// for a given block size however the host splits the work. The accumulator
// must be trivially copyable, at most 16-byte aligned, and fit the scratch.
//
// `Reducer` supplies (all __device__, const):
//   using acc_type = ...;   using out_compute = ...;
//   void init(acc_type& acc);
//   void step(acc_type& acc, in_compute x, long long index);
//   void merge(acc_type& acc, const acc_type& other);
//   void finish(out_compute& out, acc_type acc, long long count);
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/op_call.cuh"
#include "gpuos/device/op_context.cuh"

namespace gpuos {
namespace device {

struct ReductionLayout {
  long long count;         // reduced elements per output element
  long long inner_stride;  // stride of reduced element j (offset j * inner_stride), or -1
                           // when the reduced dimensions do not collapse to one stride
};

// Checks the task's input (tensor 0) and output (tensor 1) shapes, the tile
// and that `acc_bytes` / `acc_align` fit the scratch; reports kWorkerBadShape
// or kWorkerScratchTooSmall and returns false otherwise. Same answer in
// every thread. Defined in device/src/indexing.cu, like the two below.
__device__ bool PrepareReduction(const OpCall& call, unsigned int acc_bytes, unsigned int acc_align,
                                 ReductionLayout* layout);
// Offset of output element `s` in the output, and of its slice's first
// element in the input.
__device__ void SliceOffsets(const OpCall& call, long long s, long long* in_base,
                             long long* out_offset);
// Offset, relative to the slice's first element, of reduced element `j`.
__device__ long long ReducedOffset(const OpCall& call, long long j);

constexpr long long kWarpSliceLimit = 256;

// Merges the block's accumulators with a tree in the scratch, for
// accumulators too large to shuffle; thread 0 gets the result.
template <typename Acc, typename Reducer>
__device__ Acc MergeInScratch(const OpCall& call, const Reducer& reducer, const Acc& acc) {
  Acc* partial = reinterpret_cast<Acc*>(call.scratch);
  const unsigned int slots = call.scratch_bytes / static_cast<unsigned int>(sizeof(Acc));
  const unsigned int used_slots = slots < blockDim.x ? slots : blockDim.x;
  // Fold the per-thread accumulators into `used_slots` slots, then halve.
  for (unsigned int base = 0; base < blockDim.x; base += used_slots) {
    if (threadIdx.x >= base && threadIdx.x < base + used_slots) {
      if (base == 0) {
        partial[threadIdx.x] = acc;
      } else {
        reducer.merge(partial[threadIdx.x - base], acc);
      }
    }
    __syncthreads();
  }
  for (unsigned int n = used_slots; n > 1;) {
    const unsigned int half = (n + 1) / 2;
    if (threadIdx.x < n - half) reducer.merge(partial[threadIdx.x], partial[threadIdx.x + half]);
    __syncthreads();
    n = half;
  }
  const Acc result = partial[0];
  __syncthreads();
  return result;
}

template <typename In, typename Out, typename Reducer>
__device__ void RunReduction(const OpCall& call, const Reducer& reducer) {
  using Acc = typename Reducer::acc_type;
  using InCompute = compute_type_t<In>;
  using OutCompute = typename Reducer::out_compute;
  constexpr bool kShuffle = sizeof(Acc) <= 32;
  ReductionLayout layout;
  if (!PrepareReduction(call, sizeof(Acc), alignof(Acc), &layout)) return;
  const TaskDesc& task = *call.task;
  const In* in_data = reinterpret_cast<const In*>(call.tensor(0).data);
  Out* out_data = reinterpret_cast<Out*>(call.tensor(1).data);
  const auto combine = [&](Acc x, const Acc& y) {
    reducer.merge(x, y);
    return x;
  };
  // Folds elements lane, lane + lanes, ... of the slice at in_base.
  const auto fold = [&](long long in_base, int lane, int lanes) {
    Acc acc;
    reducer.init(acc);
    for (long long j = lane; j < layout.count; j += lanes) {
      const long long offset =
          in_base + (layout.inner_stride >= 0 ? j * layout.inner_stride : ReducedOffset(call, j));
      reducer.step(acc, convert<InCompute>(in_data[offset]), j);
    }
    return acc;
  };
  const auto write = [&](long long out_offset, const Acc& acc) {
    OutCompute result{};
    reducer.finish(result, acc, layout.count);
    out_data[out_offset] = convert<Out>(result);
  };

  if (kShuffle && layout.count <= kWarpSliceLimit && blockDim.x % 32 == 0) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    for (long long s = task.begin + threadIdx.x / 32; s < task.end; s += blockDim.x / 32) {
      long long in_base = 0;
      long long out_offset = 0;
      SliceOffsets(call, s, &in_base, &out_offset);
      const Acc acc = OpContext::WarpReduce(fold(in_base, lane, 32), combine);
      if (lane == 0) write(out_offset, acc);
    }
    return;
  }
  for (long long s = task.begin; s < task.end; ++s) {
    long long in_base = 0;
    long long out_offset = 0;
    SliceOffsets(call, s, &in_base, &out_offset);
    const Acc acc = fold(in_base, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
    if constexpr (kShuffle) {
      Acc* partial = reinterpret_cast<Acc*>(call.scratch);
      const int warps = static_cast<int>((blockDim.x + 31) / 32);
      const int warp = static_cast<int>(threadIdx.x / 32);
      const Acc warp_acc =
          OpContext::WarpReduce(acc, combine, static_cast<int>(blockDim.x) - warp * 32);
      if (threadIdx.x % 32 == 0) partial[warp] = warp_acc;
      __syncthreads();
      if (threadIdx.x == 0) {
        Acc total = partial[0];
        for (int w = 1; w < warps; ++w) reducer.merge(total, partial[w]);
        write(out_offset, total);
      }
      __syncthreads();
    } else {
      const Acc total = MergeInScratch(call, reducer, acc);
      if (threadIdx.x == 0) write(out_offset, total);
    }
  }
}

}  // namespace device
}  // namespace gpuos
