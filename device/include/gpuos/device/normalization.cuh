// layer_norm and rms_norm along the last dimension: the bodies of the
// std.normalization operators of the same names (operators/std_normalization.yaml).
//
// Rows of up to kWarpRowLimit elements go through registers a batch of rows
// per warp (row_batch.cuh): each element, weight and bias is read once, and
// a lane's weights and biases once per task. Longer rows are reduced by the
// whole block (ForEachRow in softmax.cuh), reading the row once per pass.
// Every thread of the block must call these; they report ctx.fail(1) on
// mismatched shapes.
#pragma once

#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/op_context.cuh"
#include "gpuos/device/row_batch.cuh"
#include "gpuos/device/softmax.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

// What layer_norm may apply to each result in its store (its `activation`
// attribute): the formulas of the std.activation / std.elementwise operators
// of the same names, so that layer_norm followed by one of them (which the
// PyTorch frontend folds into one task) computes what the two tasks would.
enum NormActivation : int {
  kNormActivationNone = 0,
  kNormActivationGelu = 1,      // gelu, approximate='none' (erf)
  kNormActivationGeluTanh = 2,  // gelu_tanh
  kNormActivationRelu = 3,      // relu (NaN stays NaN)
};

// `y` (the normalized value) stored as T: with an activation it is rounded
// to T first, as the separate activation task would have read it.
template <typename T>
__device__ T NormOutput(compute_type_t<T> y, int activation) {
  using C = compute_type_t<T>;
  if (activation == kNormActivationNone) return convert<T>(y);
  const C x = convert<C>(convert<T>(y));
  if (activation == kNormActivationGelu) {
    return convert<T>(static_cast<C>(0.5) * x *
                      (C(1) + erf(x * static_cast<C>(0.70710678118654752440))));
  }
  if (activation == kNormActivationGeluTanh) {
    const C inner =
        static_cast<C>(0.79788456080286535588) * (x + static_cast<C>(0.044715) * x * x * x);
    return convert<T>(static_cast<C>(0.5) * x * (C(1) + tanh(inner)));
  }
  return convert<T>(x < C(0) ? C(0) : x);
}

// Whether `p` is a 1-D tensor of n elements (a per-column parameter).
template <typename T>
__device__ bool IsColumnParameter(const TensorAccessor<const T>& p, long long n) {
  return p.rank() == 1 && p.size(0) == n;
}

// out = (a - mean) / sqrt(var + eps) * weight + bias per row (population
// variance, two passes over the values in registers). With kBias = false
// there is no bias and no mean: out = a / sqrt(mean(a^2) + eps) * weight
// (rms_norm). For rows of n <= kWarpRowLimit elements.
template <typename T, bool kBias>
struct NormalizeWarpRows {
  using C = compute_type_t<T>;
  const OpContext* ctx;
  const TensorAccessor<const T>* a;
  const TensorAccessor<const T>* weight;
  const TensorAccessor<const T>* bias;  // null when !kBias
  const TensorAccessor<T>* out;
  long long n;
  double eps;
  int activation;  // NormActivation

  const RowOffsets* a_rows;
  const RowOffsets* out_rows;

  template <int kPerRow, bool kDense>
  __device__ void Run() const {
    constexpr int kRows = WarpRowBatch<kPerRow>::kRows;
    const C epsilon = static_cast<C>(eps);
    const C count = static_cast<C>(n);
    const auto plus = [](C x, C y) { return x + y; };
    // Everything the loop reads of the descriptors, in registers before it:
    // read through the members (pointers to the caller's stack), each use
    // reloaded them after every store (the stores may alias the stack in
    // the generic address space), one dependent load after another.
    const T* const a_data = a->data();
    T* const out_data = out->data();
    const T* const w_data = weight->data();
    const T* const b_data = kBias ? bias->data() : nullptr;
    const long long w_stride = weight->stride(0);
    const long long b_stride = kBias ? bias->stride(0) : 0;
    const RowOffsets a_at = *a_rows;
    const RowOffsets out_at = *out_rows;
    const long long row_n = n;
    const int act = activation;
    ForEachWarpRowBatch<kPerRow>(*ctx, row_n, [&](const WarpRowBatch<kPerRow>& batch) {
      long long a_base[kRows];
      long long out_base[kRows];
      batch.template row_bases<kDense>(a_at, a_base);
      batch.template row_bases<kDense>(out_at, out_base);
      // The lane's weights and biases (the same columns in every batch) with
      // the batch's values: one round of loads.
      C w[kPerRow];
      C b[kPerRow];
#pragma unroll
      for (int k = 0; k < kPerRow; ++k) {
        const long long j = batch.column(k);
        w[k] = j < row_n ? convert<C>(w_data[j * w_stride]) : C(0);
        b[k] = kBias && j < row_n ? convert<C>(b_data[j * b_stride]) : C(0);
      }
      C v[kRowBatchElements];
#pragma unroll
      for (int e = 0; e < kRowBatchElements; ++e) {
        v[e] = batch.has(e)
                   ? convert<C>(a_data[a_at.at<kDense>(a_base[e / kPerRow], batch.column(e))])
                   : C(0);
      }
      if (kBias) {
        C mean[kRows];
        batch.reduce(
            v, C(0), [](C x) { return x; }, plus, mean);
#pragma unroll
        for (int e = 0; e < kRowBatchElements; ++e) v[e] -= mean[e / kPerRow] / count;
      }
      C scale[kRows];
      batch.reduce(
          v, C(0), [](C x) { return x * x; }, plus, scale);
#pragma unroll
      for (int r = 0; r < kRows; ++r) scale[r] = C(1) / sqrt(scale[r] / count + epsilon);
#pragma unroll
      for (int e = 0; e < kRowBatchElements; ++e) {
        if (!batch.has(e)) continue;
        const int k = e % kPerRow;
        const C scaled = v[e] * scale[e / kPerRow] * w[k];
        out_data[out_at.at<kDense>(out_base[e / kPerRow], batch.column(e))] =
            NormOutput<T>(kBias ? scaled + b[k] : scaled, act);
      }
    });
  }
};

// The block path of NormalizeWarpRows, for rows longer than kWarpRowLimit.
// Out of line, called last (RunWithRowBatchShape says why).
template <typename T, bool kBias>
__device__ __noinline__ void NormalizeBlockRows(const OpContext& ctx,
                                                const TensorAccessor<const T>& a,
                                                const TensorAccessor<const T>& weight,
                                                const TensorAccessor<const T>* bias,
                                                const TensorAccessor<T>& out, long long n,
                                                double eps, int activation) {
  using C = compute_type_t<T>;
  const auto plus = [](C x, C y) { return x + y; };
  ForEachRow(ctx, n, [&](long long row, const RowGroup& g) {
    const long long a_base = a.offset_of(row * n);
    const long long out_base = out.offset_of(row * n);
    const auto load = [&](long long j) {
      return convert<C>(a.at_offset(a_base + j * a.last_stride()));
    };
    C mean = C(0);
    if (kBias) {
      C local = C(0);
      for (long long j = g.lane; j < n; j += g.size) local += load(j);
      mean = g.reduce(local, plus) / static_cast<C>(n);
    }
    C local = C(0);
    for (long long j = g.lane; j < n; j += g.size) {
      const C d = load(j) - mean;
      local += d * d;
    }
    const C scale = C(1) / sqrt(g.reduce(local, plus) / static_cast<C>(n) + static_cast<C>(eps));
    for (long long j = g.lane; j < n; j += g.size) {
      const C scaled =
          (load(j) - mean) * scale * convert<C>(weight.at_offset(j * weight.stride(0)));
      out.at_offset(out_base + j * out.last_stride()) = NormOutput<T>(
          kBias ? scaled + convert<C>(bias->at_offset(j * bias->stride(0))) : scaled, activation);
    }
  });
}

template <typename T>
__device__ void LayerNormRows(const OpContext& ctx, const TensorAccessor<const T>& a,
                              const TensorAccessor<const T>& weight,
                              const TensorAccessor<const T>& bias, const TensorAccessor<T>& out,
                              double eps, long long activation) {
  const long long n = out.last_size();
  if (!a.same_shape(out.desc()) || !IsColumnParameter(weight, n) || !IsColumnParameter(bias, n)) {
    if (ctx.thread_index() == 0) ctx.fail(1);
    return;
  }
  if (activation < kNormActivationNone || activation > kNormActivationRelu) {
    if (ctx.thread_index() == 0) ctx.fail(2);
    return;
  }
  const int act = static_cast<int>(activation);
  if (n == 0) return;
  if (n <= kWarpRowLimit) {
    const RowOffsets a_rows(a.desc(), n);
    const RowOffsets out_rows(out.desc(), n);
    RunWithRowBatchShape(n, a_rows.dense() && out_rows.dense(),
                         NormalizeWarpRows<T, true>{&ctx, &a, &weight, &bias, &out, n, eps, act,
                                                    &a_rows, &out_rows});
  } else {
    NormalizeBlockRows<T, true>(ctx, a, weight, &bias, out, n, eps, act);
  }
}

template <typename T>
__device__ void RmsNormRows(const OpContext& ctx, const TensorAccessor<const T>& a,
                            const TensorAccessor<const T>& weight, const TensorAccessor<T>& out,
                            double eps) {
  const long long n = out.last_size();
  if (!a.same_shape(out.desc()) || !IsColumnParameter(weight, n)) {
    if (ctx.thread_index() == 0) ctx.fail(1);
    return;
  }
  if (n == 0) return;
  if (n <= kWarpRowLimit) {
    const RowOffsets a_rows(a.desc(), n);
    const RowOffsets out_rows(out.desc(), n);
    RunWithRowBatchShape(n, a_rows.dense() && out_rows.dense(),
                         NormalizeWarpRows<T, false>{&ctx, &a, &weight, nullptr, &out, n, eps,
                                                     kNormActivationNone, &a_rows, &out_rows});
  } else {
    NormalizeBlockRows<T, false>(ctx, a, weight, nullptr, out, n, eps, kNormActivationNone);
  }
}

}  // namespace device
}  // namespace gpuos
