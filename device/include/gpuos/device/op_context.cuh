// What a custom operator's body sees as `ctx` (docs/device-code.md).
//
// The body runs once per task in every thread of the block. ctx.begin() and
// ctx.end() give the task's tile of work items (by default the host uses the
// first output's elements as work items); the body divides them among the
// block's threads itself, e.g.
//
//   for (long long i = ctx.begin() + ctx.thread_index(); i < ctx.end();
//        i += ctx.num_threads()) { out[i] = a[i] * 2; }
//
// or with ctx.for_each([&](long long i) { ... }).
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/op_call.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

// Tells the compiler that `p` is in shared memory (the worker's scratch,
// OpCall::scratch, reaches stage code as a plain pointer, so without the
// hint every access through it is a generic load or store instead of LDS /
// STS). On by default in the stitched stages (H200, same machine: an
// attention tile of 8 x 128 keys 8.8 us instead of 10.6, docs/device-code.md);
// an image built with GPUOS_JIT_DEFINES=GPUOS_NO_SHARED_SCRATCH_HINT leaves it
// out. Whoever fills an OpCall must point `scratch` at shared memory
// (op_call.cuh).
__device__ __forceinline__ void AssumeShared(const void* p) {
#if !defined(GPUOS_NO_SHARED_SCRATCH_HINT)
  __builtin_assume(__isShared(p));
#else
  (void)p;
#endif
}

class OpContext {
 public:
  __device__ OpContext(const OpCall& call, int num_inputs)
      : call_(&call), num_inputs_(num_inputs) {}

  // The task's tile of work items: [begin(), end()).
  __device__ long long begin() const { return call_->task->begin; }
  __device__ long long end() const { return call_->task->end; }

  __device__ int thread_index() const { return static_cast<int>(threadIdx.x); }
  __device__ int num_threads() const { return static_cast<int>(blockDim.x); }
  // Block-wide barrier. Every thread of the block must reach it.
  __device__ void sync() const { __syncthreads(); }

  // Calls f(i) for the work items of this task, spread over the threads.
  template <typename F>
  __device__ void for_each(F&& f) const {
    for (long long i = begin() + threadIdx.x; i < end(); i += blockDim.x) f(i);
  }

  // Units of `unit_size` consecutive work items (rows of a softmax, tiles of
  // a matmul): the task handles the units whose *first* work item lies in
  // [begin(), end()), i.e. units [first_unit(), end_unit()). However the host
  // splits the work items into tiles, every unit is then handled by exactly
  // one task; tiles that are multiples of the unit balance best.
  // REQUIRES: unit_size > 0.
  __device__ long long first_unit(long long unit_size) const {
    return CeilDivide(begin(), unit_size);
  }
  __device__ long long end_unit(long long unit_size) const { return CeilDivide(end(), unit_size); }
  // ceil(x / d) for x >= 0, d > 0: in 32 bits when both fit (a 64-bit
  // division is a call of some 70 instructions, paid by every tile).
  __device__ static long long CeilDivide(long long x, long long d) {
    const long long top = x + d - 1;
    if (((top | d) >> 31) == 0) {
      return static_cast<long long>(static_cast<unsigned int>(top) / static_cast<unsigned int>(d));
    }
    return top / d;
  }

  // Block-wide reduction: every thread passes its `value`; all threads get
  // combine() folded over all of them, in a fixed order (deterministic for a
  // given block size). `combine` must be associative and commutative (the
  // fold pairs threads as a tree). V must be trivially copyable, of up to 32
  // bytes. Each warp folds its values with shuffles, warp leaders exchange
  // through the scratch (32 * sizeof(V) bytes at most), and every thread folds
  // the warps' partials in warp order: two barriers. Every thread of the
  // block must call it.
  template <typename V, typename F>
  __device__ V reduce(V value, F combine) const {
    V* slots = scratch<V>();
    const int tid = thread_index();
    const int warps = (num_threads() + 31) / 32;
    const V warp_value = WarpReduce(value, combine, num_threads() - (tid & ~31));
    if ((tid & 31) == 0) slots[tid / 32] = warp_value;
    __syncthreads();
    V result = slots[0];
    for (int w = 1; w < warps; ++w) result = combine(result, slots[w]);
    __syncthreads();
    return result;
  }

  // Folds `value` over the lanes of the calling warp with shuffles (a tree in
  // a fixed order); lane 0 gets the result (other lanes a partial fold).
  // `lanes`: the warp's threads that exist (>= 32 for a full warp). Every
  // existing lane of the warp must call it.
  template <typename V, typename F>
  __device__ static V WarpReduce(V value, F combine, int lanes = 32) {
    const int lane = static_cast<int>(threadIdx.x & 31);
    const unsigned int mask = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1u;
    for (int offset = 16; offset > 0; offset /= 2) {
      const V other = ShuffleDown(value, offset, mask);
      if (lane + offset < lanes) value = combine(value, other);
    }
    return value;
  }

  // Lane (lane + offset)'s `value` (undefined where that lane is not in
  // `mask`), moved as 32-bit words so any trivially copyable V works.
  template <typename V>
  __device__ static V ShuffleDown(const V& value, int offset, unsigned int mask = 0xffffffffu) {
    Words<V> words(value);
#pragma unroll
    for (int w = 0; w < Words<V>::kCount; ++w) {
      words.word[w] = __shfl_down_sync(mask, words.word[w], offset);
    }
    return words.Get(value);
  }

  // Lane `source`'s `value` in every lane of the (full) warp.
  template <typename V>
  __device__ static V Broadcast(const V& value, int source) {
    Words<V> words(value);
#pragma unroll
    for (int w = 0; w < Words<V>::kCount; ++w) {
      words.word[w] = __shfl_sync(0xffffffffu, words.word[w], source);
    }
    return words.Get(value);
  }

  __device__ int num_inputs() const { return num_inputs_; }
  __device__ int num_outputs() const {
    return static_cast<int>(call_->task->num_tensors) - num_inputs_;
  }

  // Accessor of input k / output k with element type E (E must match the
  // tensor's dtype; the generated named accessors already do).
  template <typename E>
  __device__ TensorAccessor<const E> input(int k) const {
    return TensorAccessor<const E>(call_->tensor(k));
  }
  template <typename E>
  __device__ TensorAccessor<E> output(int k) const {
    return TensorAccessor<E>(call_->tensor(num_inputs_ + k));
  }
  // Descriptor of the task's k-th tensor (inputs first, then outputs).
  __device__ const TensorDesc& tensor(int k) const { return call_->tensor(k); }

  // Shared memory of the block for this task (contents undefined on entry).
  template <typename U>
  __device__ U* scratch() const {
    // Opt-in (GPUOS_JIT_DEFINES=GPUOS_OPERATOR_SCRATCH_HINT): with the hint
    // here, the unstitched attention of seq 32 (bmm, softmax, bmm) returned
    // wrong values on an H200 at 469dd1a (test_gpu_stitch.py); cause not found.
#if defined(GPUOS_OPERATOR_SCRATCH_HINT)
    AssumeShared(call_->scratch);
#endif
    return reinterpret_cast<U*>(call_->scratch);
  }
  __device__ unsigned int scratch_bytes() const { return call_->scratch_bytes; }

  // Raw attribute slots (the named attribute locals are usually nicer).
  __device__ double scalar_f64(int k) const { return call_->task->scalars[k].f64; }
  __device__ long long scalar_i64(int k) const { return call_->task->scalars[k].i64; }

  // Reports kWorkerOperatorFailed with `code` to the host: the Future of the
  // task's submission fails, naming the task (the first error of a
  // submission wins; other submissions are unaffected). The operator should
  // return afterwards.
  __device__ void fail(unsigned int code) const {
    ReportError(*call_, kWorkerOperatorFailed, code);
  }

  __device__ const OpCall& call() const { return *call_; }

 private:
  // A value of V as 32-bit words (for shuffles). NVRTC has no memcpy, so
  // bytes are copied through unsigned char, which may alias anything;
  // word-aligned types copy whole words.
  template <typename V>
  struct Words {
    static constexpr int kCount = static_cast<int>((sizeof(V) + 3) / 4);
    unsigned int word[kCount];
    __device__ explicit Words(const V& value) {
      if constexpr (sizeof(V) % 4 == 0 && alignof(V) >= 4) {
        const unsigned int* from = reinterpret_cast<const unsigned int*>(&value);
#pragma unroll
        for (int w = 0; w < kCount; ++w) word[w] = from[w];
      } else {
        word[kCount - 1] = 0;
        const unsigned char* from = reinterpret_cast<const unsigned char*>(&value);
        unsigned char* to = reinterpret_cast<unsigned char*>(word);
#pragma unroll
        for (unsigned int i = 0; i < sizeof(V); ++i) to[i] = from[i];
      }
    }
    // The words as a V (`like` supplies a V to overwrite, for types
    // without a default constructor).
    __device__ V Get(const V& like) const {
      V result = like;
      if constexpr (sizeof(V) % 4 == 0 && alignof(V) >= 4) {
        unsigned int* to = reinterpret_cast<unsigned int*>(&result);
#pragma unroll
        for (int w = 0; w < kCount; ++w) to[w] = word[w];
      } else {
        const unsigned char* from = reinterpret_cast<const unsigned char*>(word);
        unsigned char* to = reinterpret_cast<unsigned char*>(&result);
#pragma unroll
        for (unsigned int i = 0; i < sizeof(V); ++i) to[i] = from[i];
      }
      return result;
    }
  };

  const OpCall* call_;
  int num_inputs_;
};

}  // namespace device

// Operator code spells it gpuos::OpContext (docs/operator-packs.md).
using device::OpContext;
using device::TensorAccessor;

}  // namespace gpuos
