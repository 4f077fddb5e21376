// Tensor index arithmetic shared by every operator of a kernel image.
//
// These functions are compiled once per image and marked __noinline__: each
// operator instantiation calls them instead of carrying its own copy of the
// 64-bit division loops, which would otherwise dominate the image's size and
// the time nvJitLink needs to link it.
#include "gpuos/device/abi.h"
#include "gpuos/device/elementwise.cuh"
#include "gpuos/device/op_call.cuh"
#include "gpuos/device/reduction.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

__device__ __noinline__ bool IsContiguous(const TensorDesc& desc) {
  long long expected = 1;
  for (int d = desc.rank - 1; d >= 0; --d) {
    if (desc.sizes[d] != 1 && desc.strides[d] != expected) return false;
    expected *= desc.sizes[d];
  }
  return true;
}

__device__ __noinline__ long long LinearToOffset(const TensorDesc& desc, long long linear) {
  long long offset = 0;
  for (int d = desc.rank - 1; d >= 0; --d) {
    const long long size = desc.sizes[d];
    offset += (linear % size) * desc.strides[d];
    linear /= size;
  }
  return offset;
}

// Branch-free over the dimensions (all kMaxRank of them, masked by the rank)
// so that every descriptor load is issued at once instead of one dependent
// load after another.
__device__ __noinline__ bool DenseElementwise(const OpCall& call, int num_inputs, int num_outputs) {
  const TensorDesc& shape = call.tensor(num_inputs);
  const int rank = shape.rank;
  // Bitwise operators: no short circuit, so no load waits for a branch.
  bool ok =
      (call.task->begin >= 0) & (call.task->end <= shape.numel) & (rank >= 0) & (rank <= kMaxRank);
  const int count = num_inputs + num_outputs;
  for (int k = 0; k < count; ++k) {
    const TensorDesc& t = call.tensor(k);
    ok = ok & (t.rank == rank) & (t.numel == shape.numel);
    long long expected = 1;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 0; --d) {
      const long long size = t.sizes[d];
      const long long stride = t.strides[d];
      const bool inside = d < rank;
      ok = ok & (!inside | ((size == shape.sizes[d]) & ((size == 1) | (stride == expected))));
      expected = inside ? expected * size : expected;
    }
  }
  return ok;
}

__device__ __noinline__ bool PrepareElementwise(const OpCall& call, int num_inputs, int num_outputs,
                                                bool* dense) {
  const TensorDesc& shape = call.tensor(num_inputs);
  const int count = num_inputs + num_outputs;
  bool all_dense = true;
  for (int k = 0; k < count; ++k) {
    const TensorDesc& t = call.tensor(k);
    bool broadcasts = t.rank >= 0 && t.rank <= shape.rank;
    const int shift = shape.rank - t.rank;
    for (int d = 0; broadcasts && d < t.rank; ++d) {
      broadcasts = t.sizes[d] == 1 || t.sizes[d] == shape.sizes[d + shift];
    }
    // An output must cover the whole shape: broadcasting a store would race.
    if (k >= num_inputs) broadcasts = broadcasts && t.numel == shape.numel;
    if (!broadcasts) {
      if (threadIdx.x == 0) ReportError(call, kWorkerBadShape, static_cast<unsigned int>(k));
      return false;
    }
    all_dense = all_dense && t.numel == shape.numel && IsContiguous(t);
  }
  if (call.task->begin < 0 || call.task->end > shape.numel) {
    if (threadIdx.x == 0) ReportError(call, kWorkerBadShape, static_cast<unsigned int>(count));
    return false;
  }
  *dense = all_dense;
  return true;
}

__device__ __noinline__ void ElementOffsets(const OpCall& call, int count, int shape_index,
                                            long long linear, long long* offsets) {
  const TensorDesc& shape = call.tensor(shape_index);
  long long coords[kMaxRank];
  for (int d = shape.rank - 1; d >= 0; --d) {
    coords[d] = linear % shape.sizes[d];
    linear /= shape.sizes[d];
  }
  for (int k = 0; k < count; ++k) {
    const TensorDesc& t = call.tensor(k);
    const int shift = shape.rank - t.rank;
    long long offset = 0;
    for (int d = 0; d < t.rank; ++d) {
      if (t.sizes[d] != 1) offset += coords[d + shift] * t.strides[d];
    }
    offsets[k] = offset;
  }
}

__device__ __noinline__ bool PrepareReduction(const OpCall& call, unsigned int acc_bytes,
                                              unsigned int acc_align, ReductionLayout* layout) {
  const TensorDesc& in = call.tensor(0);
  const TensorDesc& out = call.tensor(1);
  bool ok = in.rank >= out.rank && call.task->begin >= 0 && call.task->end <= out.numel;
  for (int d = 0; ok && d < out.rank; ++d) ok = in.sizes[d] == out.sizes[d];
  if (!ok) {
    if (threadIdx.x == 0) ReportError(call, kWorkerBadShape, 0);
    return false;
  }
  if (acc_bytes > call.scratch_bytes || acc_align > 16) {
    if (threadIdx.x == 0) ReportError(call, kWorkerScratchTooSmall, acc_bytes);
    return false;
  }
  // The reduced dimensions collapse to one stride when each (of size > 1)
  // steps over exactly the extent of the ones inside it.
  long long count = 1;
  long long inner_stride = 0;
  bool collapses = true;
  for (int d = in.rank - 1; d >= out.rank; --d) {
    if (in.sizes[d] == 1) continue;
    if (count == 1) {
      inner_stride = in.strides[d];
    } else if (in.strides[d] != inner_stride * count) {
      collapses = false;
    }
    count *= in.sizes[d];
  }
  layout->count = count;
  layout->inner_stride = collapses ? inner_stride : -1;
  return true;
}

__device__ __noinline__ void SliceOffsets(const OpCall& call, long long s, long long* in_base,
                                          long long* out_offset) {
  const TensorDesc& in = call.tensor(0);
  const TensorDesc& out = call.tensor(1);
  long long in_offset = 0;
  long long offset = 0;
  for (int d = out.rank - 1; d >= 0; --d) {
    const long long coord = s % out.sizes[d];
    s /= out.sizes[d];
    in_offset += coord * in.strides[d];
    offset += coord * out.strides[d];
  }
  *in_base = in_offset;
  *out_offset = offset;
}

__device__ __noinline__ long long ReducedOffset(const OpCall& call, long long j) {
  const TensorDesc& in = call.tensor(0);
  const int out_rank = call.tensor(1).rank;
  long long offset = 0;
  for (int d = in.rank - 1; d >= out_rank; --d) {
    offset += (j % in.sizes[d]) * in.strides[d];
    j /= in.sizes[d];
  }
  return offset;
}

}  // namespace device
}  // namespace gpuos
