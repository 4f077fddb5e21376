// The loop of an elementwise operator. Work item i of a task is element i (in
// row-major order) of the first output; every other tensor is indexed at the
// same coordinates with NumPy broadcasting: shapes are aligned at their last
// dimension, and a dimension of size 1 (or stride 0) repeats its element.
//
// Dense fast path: when every tensor is contiguous with the output's shape
// (established by the host when it added the task, TaskDesc::flags, or else
// checked once per task by DenseElementwise, no divisions), work item i is
// offset i in every tensor. Generated code then runs rounds of
// kDenseElementsPerThread elements per thread: all loads of a round are issued
// first (16-byte vector loads when every tensor's tile start is aligned, else
// element loads), then the body, then the stores, so one round costs about one
// memory latency instead of one per element. Whole rounds of an aligned tile
// run with kWorkerThreads threads take a branch-free variant (load_full /
// store_full at constant distances from the thread's first element); the
// rest of the tile, or any other block size, the checked one. Otherwise offsets come from
// ElementOffsets, which is defined once per image (device/src/indexing.cu) and
// never inlined: index arithmetic is the bulk of an operator's code, and
// sharing it keeps the linked image small and quick to build.
//
// Generated code (registry/src/jit/codegen_operator.cpp) uses it like this:
//
//   ElementwiseTile tile(call, 1, 1);
//   if (!tile.ok()) return;
//   Operand<const float> t0(call.tensor(0));  Operand<float> t1(call.tensor(1));
//   if (tile.dense()) {
//     constexpr int kVec = DenseVectorWidth<float, float>();
//     constexpr int kUnroll = DenseUnroll(kVec);
//     const bool vector = t0.aligned(task.begin, kVec) && t1.aligned(task.begin, kVec);
//     for (long long base = task.begin; base < task.end; base += kVec * kUnroll * blockDim.x) {
//       float v0[kVec * kUnroll];  float r0[kVec * kUnroll];
//       for u: t0.load_vector<kVec>(DensePosition(base, u, kVec), task.end, vector, v0 + u * kVec);
//       for e: r0[e] = {}; body(v0[e], r0[e]);
//       for u: t1.store_vector<kVec>(DensePosition(base, u, kVec), task.end, vector, r0 + u *
//       kVec);
//     }
//   } else { ... long long at[2]; tile.offsets(i, at); ... t0.load(at[0]) ... }
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/op_call.cuh"

namespace gpuos {
namespace device {

// Checks the task's tensors for an elementwise operator with the given
// arity: every tensor broadcasts to the shape of the first output (tensor
// number num_inputs), and [begin, end) lies inside it. Reports
// kWorkerBadShape (detail = tensor) and returns false otherwise. Sets *dense
// when every tensor is dense with the output's shape. Same answer in every
// thread. Defined in device/src/indexing.cu.
__device__ bool PrepareElementwise(const OpCall& call, int num_inputs, int num_outputs,
                                   bool* dense);

// Whether the task can take the dense path: every tensor is contiguous with
// exactly the first output's shape and [begin, end) lies inside it. Cheap (no
// divisions); when false, PrepareElementwise does the full check. Same
// answer in every thread. Defined in device/src/indexing.cu.
__device__ bool DenseElementwise(const OpCall& call, int num_inputs, int num_outputs);

// Elements per thread per round of the dense path.
constexpr int kDenseElementsPerThread = 16;

// Elements per vector access of the dense path: 16 bytes of the widest type.
template <typename... E>
__host__ __device__ constexpr int DenseVectorWidth() {
  int widest = 1;
  ((widest = static_cast<int>(sizeof(E)) > widest ? static_cast<int>(sizeof(E)) : widest), ...);
  return widest >= 16 ? 1 : 16 / widest;
}
__host__ __device__ constexpr int DenseUnroll(int vector_width) {
  return vector_width >= kDenseElementsPerThread ? 1 : kDenseElementsPerThread / vector_width;
}
// First work item of vector `u` of this thread in the round starting at
// `base`: vectors are interleaved across threads so that each warp access
// is contiguous.
__device__ __forceinline__ long long DensePosition(long long base, int u, int vector_width) {
  return base + (static_cast<long long>(u) * blockDim.x + threadIdx.x) * vector_width;
}

// An unsigned word of N bytes (N = 1, 2, 4, 8, 16) for vector accesses.
template <int N>
struct VectorWord;
template <>
struct VectorWord<1> {
  using type = unsigned char;
};
template <>
struct VectorWord<2> {
  using type = unsigned short;
};
template <>
struct VectorWord<4> {
  using type = unsigned int;
};
template <>
struct VectorWord<8> {
  using type = uint2;
};
template <>
struct VectorWord<16> {
  using type = uint4;
};

// Storage offsets, in each of the task's first `count` tensors, of the
// element at row-major position `linear` of tensor `shape_index` (the first
// output), with broadcasting. Defined in device/src/indexing.cu.
__device__ void ElementOffsets(const OpCall& call, int count, int shape_index, long long linear,
                               long long* offsets);

class ElementwiseTile {
 public:
  __device__ ElementwiseTile(const OpCall& call, int num_inputs, int num_outputs)
      : call_(&call), num_inputs_(num_inputs), count_(num_inputs + num_outputs), dense_(false) {
    // The host's verdict (TaskDesc::flags) when it gave one: no descriptor
    // loads for a dense task, no second check for a strided one.
    const unsigned int flags = call.task->flags;
    if ((flags & kTaskLayoutChecked) != 0) {
      dense_ = (flags & kTaskDenseElementwise) != 0;
    } else {
      dense_ = DenseElementwise(call, num_inputs, num_outputs);
    }
    ok_ = dense_ || PrepareElementwise(call, num_inputs, num_outputs, &dense_);
  }

  __device__ bool ok() const { return ok_; }
  __device__ bool dense() const { return dense_; }
  __device__ long long first() const { return call_->task->begin + threadIdx.x; }
  __device__ long long end() const { return call_->task->end; }
  __device__ long long step() const { return blockDim.x; }

  // Offsets of work item `linear` in every tensor of the task (inputs, then
  // outputs); `offsets` has room for num_inputs + num_outputs.
  __device__ void offsets(long long linear, long long* offsets) const {
    ElementOffsets(*call_, count_, num_inputs_, linear, offsets);
  }

 private:
  const OpCall* call_;
  int num_inputs_;
  int count_;
  bool dense_;
  bool ok_;
};

// One input or output of an elementwise operator, addressed by storage
// offset; loads convert to the compute type, stores back.
template <typename E>
class Operand {
 public:
  using value_type = typename RemoveConst<E>::type;
  using compute_type = compute_type_t<value_type>;

  __device__ explicit Operand(const TensorDesc& desc) : data_(reinterpret_cast<E*>(desc.data)) {}

  __device__ compute_type load(long long offset) const {
    return convert<compute_type>(data_[offset]);
  }
  __device__ void store(long long offset, compute_type value) const {
    data_[offset] = convert<value_type>(value);
  }

  // Whether element `offset` starts a V-element vector (V * sizeof(E) bytes).
  __device__ bool aligned(long long offset, int vector_width) const {
    const unsigned long long address = reinterpret_cast<unsigned long long>(data_ + offset);
    return address % (sizeof(value_type) * static_cast<unsigned long long>(vector_width)) == 0;
  }

  // Elements [i, i + V) into out (converted); elements at or past `end` read
  // as zero. One vector access when `vector` and the whole vector is inside.
  template <int V>
  __device__ __forceinline__ void load_vector(long long i, long long end, bool vector,
                                              compute_type* out) const {
    if (vector && i + V <= end) {
      using Word = typename VectorWord<static_cast<int>(sizeof(value_type)) * V>::type;
      alignas(sizeof(Word)) value_type elements[V];
      *reinterpret_cast<Word*>(elements) = *reinterpret_cast<const Word*>(data_ + i);
#pragma unroll
      for (int j = 0; j < V; ++j) out[j] = convert<compute_type>(elements[j]);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) out[j] = i + j < end ? load(i + j) : compute_type{};
    }
  }

  // Elements [i, i + V) into out (converted) in one vector access. REQUIRES:
  // aligned(i, V) and the whole vector inside the tensor.
  template <int V>
  __device__ __forceinline__ void load_full(long long i, compute_type* out) const {
    using Word = typename VectorWord<static_cast<int>(sizeof(value_type)) * V>::type;
    alignas(sizeof(Word)) value_type elements[V];
    *reinterpret_cast<Word*>(elements) = *reinterpret_cast<const Word*>(data_ + i);
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = convert<compute_type>(elements[j]);
  }

  // Stores values[0, V) at [i, i + V) in one vector access. REQUIRES: as
  // load_full.
  template <int V>
  __device__ __forceinline__ void store_full(long long i, const compute_type* values) const {
    using Word = typename VectorWord<static_cast<int>(sizeof(value_type)) * V>::type;
    alignas(sizeof(Word)) value_type elements[V];
#pragma unroll
    for (int j = 0; j < V; ++j) elements[j] = convert<value_type>(values[j]);
    *reinterpret_cast<Word*>(data_ + i) = *reinterpret_cast<const Word*>(elements);
  }

  // Stores values[0, V) at [i, i + V), skipping elements at or past `end`.
  template <int V>
  __device__ __forceinline__ void store_vector(long long i, long long end, bool vector,
                                               const compute_type* values) const {
    if (vector && i + V <= end) {
      using Word = typename VectorWord<static_cast<int>(sizeof(value_type)) * V>::type;
      alignas(sizeof(Word)) value_type elements[V];
#pragma unroll
      for (int j = 0; j < V; ++j) elements[j] = convert<value_type>(values[j]);
      *reinterpret_cast<Word*>(data_ + i) = *reinterpret_cast<const Word*>(elements);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        if (i + j < end) store(i + j, values[j]);
      }
    }
  }

 private:
  E* data_;
};

}  // namespace device
}  // namespace gpuos
