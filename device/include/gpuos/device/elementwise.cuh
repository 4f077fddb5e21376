// The loop of an elementwise operator. Work item i of a task is element i (in
// row-major order) of the first output; every other tensor is indexed at the
// same coordinates with NumPy broadcasting: shapes are aligned at their last
// dimension, and a dimension of size 1 (or stride 0) repeats its element.
//
// When every tensor is dense with the output's shape (the common case), the
// offset of work item i is i in every tensor. Otherwise offsets come from
// ElementOffsets, which is defined once per image (device/src/indexing.cu) and
// never inlined: index arithmetic is the bulk of an operator's code, and
// sharing it keeps the linked image small and quick to build.
//
// Generated code (registry/src/jit/codegen_operator.cpp) uses it like this:
//
//   ElementwiseTile tile(call, 1, 1);
//   if (!tile.ok()) return;
//   Operand<const float> in0(call.tensor(0));  Operand<float> out0(call.tensor(1));
//   if (tile.dense()) {
//     for (long long i = tile.first(); i < tile.end(); i += tile.step()) {
//       float r{};  body(in0.load(i), r);  out0.store(i, r);
//     }
//   } else { ... long long at[2]; tile.offsets(i, at); ... in0.load(at[0]) ... }
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

// Storage offsets, in each of the task's first `count` tensors, of the
// element at row-major position `linear` of tensor `shape_index` (the first
// output), with broadcasting. Defined in device/src/indexing.cu.
__device__ void ElementOffsets(const OpCall& call, int count, int shape_index, long long linear,
                               long long* offsets);

class ElementwiseTile {
 public:
  __device__ ElementwiseTile(const OpCall& call, int num_inputs, int num_outputs)
      : call_(&call), num_inputs_(num_inputs), count_(num_inputs + num_outputs), dense_(false) {
    ok_ = PrepareElementwise(call, num_inputs, num_outputs, &dense_);
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

 private:
  E* data_;
};

}  // namespace device
}  // namespace gpuos
