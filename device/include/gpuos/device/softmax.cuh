// Row-wise operators along the last dimension: softmax and log_softmax, and
// the row loop (ForEachRow) that the std.normalization operators' long rows
// also use (normalization.cuh).
//
// Work items are out's elements; a task handles the rows whose first element
// lies in its tile (OpContext::first_unit / end_unit). Rows of up to
// kWarpRowLimit elements are held in registers, a batch of rows per warp
// (row_batch.cuh); longer rows are handled one at a time by the whole block
// (ForEachRow, OpContext::reduce). The choice depends on the row length only,
// so results do not depend on how the host splits the work.
#pragma once

#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/op_context.cuh"
#include "gpuos/device/row_batch.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

// The threads that handle one row: a warp or the whole block. Element j of
// the row belongs to thread `lane` when j % size == lane.
struct RowGroup {
  const OpContext* ctx;
  bool warp;
  int lane;
  int size;

  // combine() folded over the group's values, in a fixed order; every
  // thread of the group gets it. Every thread of the group must call it
  // (of the block, for a block group).
  template <typename V, typename F>
  __device__ V reduce(V value, F combine) const {
    if (warp) return OpContext::Broadcast(OpContext::WarpReduce(value, combine), 0);
    return ctx->reduce(value, combine);
  }
};

// Calls body(row, group) for the task's rows of `n` elements (n > 0). Every
// thread of the block must call it; body must not call ctx.sync() or
// ctx.reduce() itself (use the RowGroup's reduce).
template <typename F>
__device__ void ForEachRow(const OpContext& ctx, long long n, F&& body) {
  const long long first = ctx.first_unit(n);
  const long long end = ctx.end_unit(n);
  const int tid = ctx.thread_index();
  if (n <= kWarpRowLimit) {
    const RowGroup group{&ctx, true, tid % 32, 32};
    for (long long row = first + tid / 32; row < end; row += ctx.num_threads() / 32) {
      body(row, group);
    }
  } else {
    const RowGroup group{&ctx, false, tid, ctx.num_threads()};
    for (long long row = first; row < end; ++row) body(row, group);
  }
}

// SoftmaxRows for rows of n <= kWarpRowLimit elements: each element is read
// once into registers (row_batch.cuh) and exp is taken once per element.
template <typename T, bool kLog>
struct SoftmaxWarpRows {
  using C = compute_type_t<T>;
  const OpContext* ctx;
  const TensorAccessor<const T>* a;
  const TensorAccessor<T>* out;
  long long n;
  const RowOffsets* a_rows;
  const RowOffsets* out_rows;

  template <int kPerRow, bool kDense>
  __device__ void Run() const {
    constexpr int kRows = WarpRowBatch<kPerRow>::kRows;
    // In registers before the loop (NormalizeWarpRows::Run says why).
    const T* const a_data = a->data();
    T* const out_data = out->data();
    const RowOffsets a_at = *a_rows;
    const RowOffsets out_at = *out_rows;
    ForEachWarpRowBatch<kPerRow>(*ctx, n, [&](const WarpRowBatch<kPerRow>& batch) {
      long long a_base[kRows];
      long long out_base[kRows];
      batch.template row_bases<kDense>(a_at, a_base);
      batch.template row_bases<kDense>(out_at, out_base);
      C v[kRowBatchElements];
#pragma unroll
      for (int e = 0; e < kRowBatchElements; ++e) {
        v[e] = batch.has(e)
                   ? convert<C>(a_data[a_at.at<kDense>(a_base[e / kPerRow], batch.column(e))])
                   : ::gpuos::lowest<C>();
      }
      C row_max[kRows];
      batch.reduce(
          v, ::gpuos::lowest<C>(), [](C x) { return x; }, [](C x, C y) { return x > y ? x : y; },
          row_max);
#pragma unroll
      for (int e = 0; e < kRowBatchElements; ++e) {
        v[e] -= row_max[e / kPerRow];
        if (!kLog) v[e] = exp(v[e]);
      }
      C sum[kRows];
      batch.reduce(
          v, C(0), [](C x) { return kLog ? exp(x) : x; }, [](C x, C y) { return x + y; }, sum);
#pragma unroll
      for (int r = 0; r < kRows; ++r) sum[r] = kLog ? log(sum[r]) : sum[r];
#pragma unroll
      for (int e = 0; e < kRowBatchElements; ++e) {
        if (!batch.has(e)) continue;
        const int r = e / kPerRow;
        const C result = kLog ? v[e] - sum[r] : v[e] / sum[r];
        out_data[out_at.at<kDense>(out_base[r], batch.column(e))] = convert<T>(result);
      }
    });
  }
};

// kLog = false: softmax; true: log_softmax. Per row: the maximum, then the
// sum of exp(a - max), then the outputs. Reports ctx.fail(1) when a and out
// differ in shape. Every thread of the block must call it. Rows of up to
// kWarpRowLimit elements go through registers (row_batch.cuh), longer ones
// through the block, reading the row three times.
template <typename T, bool kLog>
__device__ __noinline__ void SoftmaxBlockRows(const OpContext& ctx,
                                              const TensorAccessor<const T>& a,
                                              const TensorAccessor<T>& out, long long n);

template <typename T, bool kLog>
__device__ void SoftmaxRows(const OpContext& ctx, const TensorAccessor<const T>& a,
                            const TensorAccessor<T>& out) {
  if (!a.same_shape(out.desc())) {
    if (ctx.thread_index() == 0) ctx.fail(1);
    return;
  }
  const long long n = out.last_size();
  if (n == 0) return;
  if (n <= kWarpRowLimit) {
    const RowOffsets a_rows(a.desc(), n);
    const RowOffsets out_rows(out.desc(), n);
    RunWithRowBatchShape(n, a_rows.dense() && out_rows.dense(),
                         SoftmaxWarpRows<T, kLog>{&ctx, &a, &out, n, &a_rows, &out_rows});
    return;
  }
  SoftmaxBlockRows<T, kLog>(ctx, a, out, n);
}

// The block path of SoftmaxRows, for rows longer than kWarpRowLimit. Out of
// line, called last (RunWithRowBatchShape says why).
template <typename T, bool kLog>
__device__ __noinline__ void SoftmaxBlockRows(const OpContext& ctx,
                                              const TensorAccessor<const T>& a,
                                              const TensorAccessor<T>& out, long long n) {
  using C = compute_type_t<T>;
  const long long a_step = a.last_stride();
  const long long out_step = out.last_stride();
  ForEachRow(ctx, n, [&](long long row, const RowGroup& g) {
    const long long a_base = a.offset_of(row * n);
    const long long out_base = out.offset_of(row * n);
    C local_max = ::gpuos::lowest<C>();
    for (long long j = g.lane; j < n; j += g.size) {
      const C v = convert<C>(a.at_offset(a_base + j * a_step));
      local_max = v > local_max ? v : local_max;
    }
    const C row_max = g.reduce(local_max, [](C x, C y) { return x > y ? x : y; });
    C local_sum = C(0);
    for (long long j = g.lane; j < n; j += g.size) {
      local_sum += exp(convert<C>(a.at_offset(a_base + j * a_step)) - row_max);
    }
    const C sum = g.reduce(local_sum, [](C x, C y) { return x + y; });
    const C log_sum = log(sum);
    for (long long j = g.lane; j < n; j += g.size) {
      const C shifted = convert<C>(a.at_offset(a_base + j * a_step)) - row_max;
      out.at_offset(out_base + j * out_step) =
          convert<T>(kLog ? shifted - log_sum : exp(shifted) / sum);
    }
  });
}

}  // namespace device
}  // namespace gpuos
