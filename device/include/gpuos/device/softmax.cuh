// Softmax and log_softmax along the last dimension, shared by the
// std.normalization operators (operators/std_normalization.yaml).
//
// Work items are out's elements; a task handles the rows whose first element
// lies in its tile (OpContext::first_unit / end_unit). Per row: the maximum,
// then the sum of exp(a - max), both block-reduced (ctx.reduce), then the
// outputs. Reports ctx.fail(1) when a and out differ in shape.
#pragma once

#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/op_context.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

// kLog = false: softmax; true: log_softmax. Every thread of the block must
// call it.
template <typename T, bool kLog>
__device__ void SoftmaxRows(const OpContext& ctx, const TensorAccessor<const T>& a,
                            const TensorAccessor<T>& out) {
  using C = compute_type_t<T>;
  if (!a.same_shape(out.desc())) {
    if (ctx.thread_index() == 0) ctx.fail(1);
    return;
  }
  const long long n = out.last_size();
  if (n == 0) return;
  const long long a_step = a.last_stride();
  const long long out_step = out.last_stride();
  for (long long row = ctx.first_unit(n); row < ctx.end_unit(n); ++row) {
    const long long a_base = a.offset_of(row * n);
    const long long out_base = out.offset_of(row * n);
    C local_max = ::gpuos::lowest<C>();
    for (long long j = ctx.thread_index(); j < n; j += ctx.num_threads()) {
      const C v = convert<C>(a.at_offset(a_base + j * a_step));
      local_max = v > local_max ? v : local_max;
    }
    const C row_max = ctx.reduce(local_max, [](C x, C y) { return x > y ? x : y; });
    C local_sum = C(0);
    for (long long j = ctx.thread_index(); j < n; j += ctx.num_threads()) {
      local_sum += exp(convert<C>(a.at_offset(a_base + j * a_step)) - row_max);
    }
    const C sum = ctx.reduce(local_sum, [](C x, C y) { return x + y; });
    const C log_sum = log(sum);
    for (long long j = ctx.thread_index(); j < n; j += ctx.num_threads()) {
      const C shifted = convert<C>(a.at_offset(a_base + j * a_step)) - row_max;
      out.at_offset(out_base + j * out_step) =
          convert<T>(kLog ? shifted - log_sum : exp(shifted) / sum);
    }
  }
}

}  // namespace device
}  // namespace gpuos
