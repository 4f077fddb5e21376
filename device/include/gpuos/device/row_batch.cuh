// Rows of up to kWarpRowLimit (256) elements held in registers: the warp
// path of the row operators (softmax, log_softmax, layer_norm, rms_norm).
//
// A warp takes a *batch* of rows at once and each lane holds
// kRowBatchElements (8) of the batch's elements in registers: rows of up to
// 32 elements come 8 to a batch, of up to 64 four, of up to 128 two, longer
// ones alone. Every element is loaded once, all of a lane's loads are in
// flight together, and the per-row folds run as XOR butterflies over the
// warp, so every lane gets every row's result (bitwise the same in every
// lane: each step combines the same two operands, and + and max commute).
// The batch shape depends on the row length only, so results do not depend
// on how the host splits the rows into tiles.
//
//   struct MyRows {  // what the operator needs, by value or pointer
//     template <int kPerRow, bool kDense> __device__ void Run() const {
//       ForEachWarpRowBatch<kPerRow>(ctx, n, [&](const WarpRowBatch<kPerRow>& batch) {
//         C v[kRowBatchElements];  // v[e]: row batch.row(e), column batch.column(e)
//         ...
//       });
//     }
//   };
//   RunWithRowBatchShape(n, dense, MyRows{...});
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/op_context.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

constexpr long long kWarpRowLimit = 256;
constexpr int kRowBatchElements = 8;  // elements of a batch each lane holds

// Where a tensor's rows of n elements start and step: row * n and 1 when the
// tensor is dense (the common case, no index arithmetic), else from its
// strides (IsContiguous and LinearToOffset are the image's shared copies).
// base() and at() take the density the caller was instantiated for
// (RunWithRowBatchShape), so that the dense instantiation contains no call.
class RowOffsets {
 public:
  __device__ RowOffsets(const TensorDesc& desc, long long n)
      : desc_(&desc),
        n_(n),
        dense_(IsContiguous(desc)),
        step_(desc.rank > 0 ? desc.strides[desc.rank - 1] : 0) {}

  __device__ bool dense() const { return dense_; }
  template <bool kDense>
  __device__ long long base(long long row) const {
    return kDense ? row * n_ : LinearToOffset(*desc_, row * n_);
  }
  template <bool kDense>
  __device__ long long at(long long base, long long column) const {
    return kDense ? base + column : base + column * step_;
  }

 private:
  const TensorDesc* desc_;
  long long n_;
  bool dense_;
  long long step_;
};

// The strided instantiation, out of line (see RunWithRowBatchShape).
template <int kPerRow, typename Op>
__device__ __noinline__ void RunStridedRowBatches(const Op& op) {
  op.template Run<kPerRow, false>();
}

template <int kPerRow, typename Op>
__device__ __forceinline__ void RunRowBatches(bool dense, const Op& op) {
  if (dense) {
    op.template Run<kPerRow, true>();
  } else {
    RunStridedRowBatches<kPerRow>(op);
  }
}

// Calls op.template Run<kPerRow, kDense>() with the elements per lane per
// row that rows of n (1 <= n <= kWarpRowLimit) elements need: 1, 2, 4 or 8,
// and kDense = `dense` (every tensor's RowOffsets is dense). The strided
// instantiations are called out of line, last: their calls to
// LinearToOffset, inlined next to the dense ones, would make the operator
// keep values across calls in callee-saved registers, which every call of
// the operator stores and reloads in every thread (the register budget in
// matmul_few_rows.cuh). (A functor, not a generic lambda: NVRTC compiles no
// generic lambdas in device code.)
template <typename Op>
__device__ void RunWithRowBatchShape(long long n, bool dense, const Op& op) {
  if (n <= 32) {
    RunRowBatches<1>(dense, op);
  } else if (n <= 64) {
    RunRowBatches<2>(dense, op);
  } else if (n <= 128) {
    RunRowBatches<4>(dense, op);
  } else {
    RunRowBatches<8>(dense, op);
  }
}

// One warp's batch of kRows rows of n elements (kPerRow * 32 >= n). Element
// e in [0, kRowBatchElements) of a lane is row row(e), column column(e); it
// exists when has(e) (the batch may run past the task's last row, and the
// last row slot past n).
template <int kPerRow>
struct WarpRowBatch {
  static constexpr int kRows = kRowBatchElements / kPerRow;
  long long first;  // the batch's first row
  long long end;    // one past the task's last row
  long long n;      // elements per row
  int lane;

  __device__ long long row(int e) const { return first + e / kPerRow; }
  __device__ long long column(int e) const { return lane + 32ll * (e % kPerRow); }
  __device__ bool has_row(int r) const { return first + r < end; }
  __device__ bool has(int e) const { return row(e) < end && column(e) < n; }
  // Where each of the batch's rows starts in a tensor (0 past the task's rows).
  template <bool kDense>
  __device__ void row_bases(const RowOffsets& rows, long long (&base)[kRows]) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) base[r] = has_row(r) ? rows.base<kDense>(first + r) : 0;
  }

  // out[r] = combine folded over map(v[e]) for row r's existing elements
  // (identity for none), in every lane of the warp. Every lane must call it.
  template <typename C, typename Map, typename Combine>
  __device__ void reduce(const C (&v)[kRowBatchElements], C identity, Map map, Combine combine,
                         C (&out)[kRows]) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      C acc = identity;
#pragma unroll
      for (int k = 0; k < kPerRow; ++k) {
        const int e = r * kPerRow + k;
        if (has(e)) acc = combine(acc, map(v[e]));
      }
      out[r] = acc;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        out[r] = combine(out[r], __shfl_xor_sync(0xffffffffu, out[r], offset));
      }
    }
  }
};

// Calls body(batch) for the task's rows of n (1 <= n <= kWarpRowLimit)
// elements, kRows at a time per warp; the block's warps take the batches in
// turn. Every thread of the block must call it (a warp's lanes call body
// together); body must not use block barriers.
template <int kPerRow, typename F>
__device__ void ForEachWarpRowBatch(const OpContext& ctx, long long n, F&& body) {
  constexpr int kRows = WarpRowBatch<kPerRow>::kRows;
  const long long end = ctx.end_unit(n);
  const int tid = ctx.thread_index();
  const long long warps = ctx.num_threads() / 32;
  for (long long row = ctx.first_unit(n) + (tid / 32) * kRows; row < end; row += warps * kRows) {
    const WarpRowBatch<kPerRow> batch{row, end, n, tid & 31};
    body(batch);
  }
}

}  // namespace device
}  // namespace gpuos
