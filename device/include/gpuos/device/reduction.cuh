// The loop of a reduction operator, one block per output element.
//
// Shapes: the input has rank R + K and the output rank R; the output's R
// dimensions equal the input's first R, and the input's last K dimensions are
// reduced (the host permutes the input view so the reduced dimensions come
// last; strides make that free). Work item s of a task is output element s
// (row-major); its `count` = product of the K reduced sizes; `index` runs over
// the reduced elements in row-major order.
//
// Per output element: every thread folds a strided share of the elements into
// its own accumulator (init, then step), the block merges the partial
// accumulators in shared scratch in a fixed order (merge), and thread 0 writes
// finish(acc, count). Deterministic for a given block size. The accumulator
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

template <typename In, typename Out, typename Reducer>
__device__ void RunReduction(const OpCall& call, const Reducer& reducer) {
  using Acc = typename Reducer::acc_type;
  using InCompute = compute_type_t<In>;
  using OutCompute = typename Reducer::out_compute;
  ReductionLayout layout;
  if (!PrepareReduction(call, sizeof(Acc), alignof(Acc), &layout)) return;
  const TaskDesc& task = *call.task;
  const In* in_data = reinterpret_cast<const In*>(call.tensor(0).data);
  Out* out_data = reinterpret_cast<Out*>(call.tensor(1).data);
  Acc* partial = reinterpret_cast<Acc*>(call.scratch);
  const unsigned int slots = call.scratch_bytes / static_cast<unsigned int>(sizeof(Acc));
  const unsigned int used_slots = slots < blockDim.x ? slots : blockDim.x;

  for (long long s = task.begin; s < task.end; ++s) {
    long long in_base = 0;
    long long out_offset = 0;
    SliceOffsets(call, s, &in_base, &out_offset);
    Acc acc;
    reducer.init(acc);
    for (long long j = threadIdx.x; j < layout.count; j += blockDim.x) {
      const long long offset =
          in_base + (layout.inner_stride >= 0 ? j * layout.inner_stride : ReducedOffset(call, j));
      reducer.step(acc, convert<InCompute>(in_data[offset]), j);
    }
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
    if (threadIdx.x == 0) {
      OutCompute result{};
      reducer.finish(result, partial[0], layout.count);
      out_data[out_offset] = convert<Out>(result);
    }
    __syncthreads();
  }
}

}  // namespace device
}  // namespace gpuos
