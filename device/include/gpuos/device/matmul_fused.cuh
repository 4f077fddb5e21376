// The body of std.linalg's fused_addmm (operators/std_linalg.yaml): addmm
// with the work of the tasks around it done in the same task, so that a
// Linear layer's neighbours cost no task and no hand-over of their own:
//
//   a'  = layer_norm(a) along K, then activation k     (norm = 1 + k: prologue)
//   v   = beta * c + alpha * (a' x b)                  (addmm)
//   out = activation(v) + residual                     (epilogue)
//
// Each stage rounds to T where the separate tasks would have stored T (the
// normalized value after its activation, the product before an activation
// or a residual), so the fused task computes what the tasks it replaces
// computed, up to the order of the sums.
//
// Three phases, so that the product runs addmm's own code (the same
// instantiation, hence the same registers: inlined into the product's
// unrolled loads and stores, the prologue and the activations made the
// operator save and restore several times addmm's registers on every call
// in a draft; as phases it saves 264 bytes a thread where addmm saves 224:
// bench/results/experiments/ptxas_fused_addmm.txt):
// 1. Prologue: every row of a (all batch items, at most
//    kFusedNormBytes of T in all) normalized into the block's
//    fused-norm buffer in shared memory, a warp per row (two passes over the
//    row for the mean and the variance, like layer_norm; a single row of up
//    to a thread per element by the whole block), then a barrier.
//    Every task of the product normalizes the rows itself: they are few (a
//    Linear layer over a few tokens), and it saves the layer_norm task.
// 2. addmm (few-rows path or tiles) from that buffer, or from a itself.
// 3. Epilogue: after a barrier, the block reads back the output elements
//    this task owns (as stored, in T) and writes activation(v) + residual.
//    So the residual must not overlap out (the frontend never folds one
//    that does).
//
// Failure codes: 1 shapes (as addmm; norm_weight and norm_bias 1-D of K;
// residual exactly out's sizes), 2 a prologue whose rows do not fit
// kFusedNormBytes, 3 an attribute out of range.
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/matmul.cuh"
#include "gpuos/device/matmul_common.cuh"
#include "gpuos/device/matmul_few_rows.cuh"
#include "gpuos/device/normalization.cuh"
#include "gpuos/device/op_context.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

// Bytes of normalized rows the prologue holds (batch * M * K elements of T).
constexpr long long kFusedNormBytes = 8192;

// The block's buffer for the normalized rows and their descriptor: static
// shared memory of the kernel image, next to the worker's scratch.
struct FusedNormBuffer {
  TensorDesc desc;
  alignas(16) unsigned char rows[kFusedNormBytes];
};

__device__ inline FusedNormBuffer& FusedNormShared() {
  __shared__ FusedNormBuffer buffer;
  return buffer;
}

// Phase 1: a's rows normalized (then `activation`, rounded to T) into
// `buffer`, dense, with a's sizes; returns its accessor. A warp per row.
// Every thread of the block must call it.
template <typename T>
__device__ TensorAccessor<const T> NormalizeRowsToShared(
    const OpContext& ctx, const TensorAccessor<const T>& a, const MatmulShape& s,
    const TensorAccessor<const T>& weight, const TensorAccessor<const T>& bias, double eps,
    int activation, FusedNormBuffer& buffer) {
  using C = compute_type_t<T>;
  T* const rows = reinterpret_cast<T*>(buffer.rows);
  const int lane = ctx.thread_index() & 31;
  const int warps = ctx.num_threads() / 32;
  const long long k = s.k;
  const long long row_count = s.batch * s.m;
  const long long row_stride = a.stride(s.rank - 2);
  const long long col_stride = a.stride(s.rank - 1);
  const long long batch_stride = s.rank == 3 ? a.stride(0) : 0;
  const T* const a_data = a.data();
  const T* const w_data = weight.data();
  const T* const b_data = bias.data();
  const long long w_stride = weight.stride(0);
  const long long b_stride = bias.stride(0);
  const C count = static_cast<C>(k);
  const C epsilon = static_cast<C>(eps);
  const auto butterfly = [](C v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
  };
  // One row of at most a thread per element (a Linear layer over one token):
  // the whole block normalizes it, an element per thread, so a thread's
  // serial work is one load round and one activation, not the 8 elements a
  // lane of the one warp of the loop below handles one after another.
  // Without any prologue a fused tile took 6.6-6.8 us instead of 10.4
  // (H100, bench/results/experiments/fused_addmm_prologue_cost.json), and
  // reading the warp's elements in one round saved only 0.45 of that.
  const bool by_block = row_count == 1 && k <= ctx.num_threads();
  if (by_block) {
    const int j = ctx.thread_index();
    const bool in = j < k;
    const C x = in ? convert<C>(a_data[j * col_stride]) : C(0);
    const C w = in ? convert<C>(w_data[j * w_stride]) : C(0);
    const C b = in ? convert<C>(b_data[j * b_stride]) : C(0);
    const auto plus = [](C u, C v) { return u + v; };
    const C mean = ctx.reduce(x, plus) / count;
    const C d = in ? x - mean : C(0);
    const C scale = C(1) / sqrt(ctx.reduce(d * d, plus) / count + epsilon);
    if (in) rows[j] = NormOutput<T>(d * scale * w + b, activation);
  }
  for (long long row = by_block ? row_count : ctx.thread_index() / 32; row < row_count;
       row += warps) {
    const long long item = row / s.m;
    const T* const src = a_data + item * batch_stride + (row - item * s.m) * row_stride;
    T* const dst = rows + row * k;
    C sum = C(0);
    for (long long j = lane; j < k; j += 32) sum += convert<C>(src[j * col_stride]);
    const C mean = butterfly(sum) / count;
    sum = C(0);
    for (long long j = lane; j < k; j += 32) {
      const C d = convert<C>(src[j * col_stride]) - mean;
      sum += d * d;
    }
    const C scale = C(1) / sqrt(butterfly(sum) / count + epsilon);
    for (long long j = lane; j < k; j += 32) {
      const C x = convert<C>(src[j * col_stride]);
      const C y =
          (x - mean) * scale * convert<C>(w_data[j * w_stride]) + convert<C>(b_data[j * b_stride]);
      dst[j] = NormOutput<T>(y, activation);
    }
  }
  if (ctx.thread_index() == 0) {
    TensorDesc& d = buffer.desc;
    d = a.desc();
    d.data = reinterpret_cast<unsigned long long>(rows);
    long long stride = 1;
    for (int dim = d.rank - 1; dim >= 0; --dim) {
      d.strides[dim] = stride;
      stride *= d.sizes[dim];
    }
  }
  ctx.sync();
  return TensorAccessor<const T>(buffer.desc);
}

// Calls f(batch, r, c) for each output element this task owns (those the
// product's path computed for it), spread over the block's threads.
template <typename F>
__device__ void ForEachOwnedOutput(const OpContext& ctx, const MatmulShape& s, F&& f) {
  const long long tid = ctx.thread_index();
  const long long threads = ctx.num_threads();
  if (s.batch <= 0 || s.m <= 0 || s.n <= 0) return;  // nothing owned (and no division by 0)
  if (s.m <= kMatmulFewRowsMax) {  // units of one column's M elements (matmul_few_rows.cuh)
    const long long items = s.batch * s.m * s.n;
    const long long begin = ctx.begin() < 0 ? 0 : (ctx.begin() > items ? items : ctx.begin());
    const long long end = ctx.end() < begin ? begin : (ctx.end() > items ? items : ctx.end());
    const long long first = (begin + s.m - 1) / s.m * s.m;
    const long long last = (end + s.m - 1) / s.m * s.m;
    for (long long i = first + tid; i < last; i += threads) {
      const long long unit = i / s.m;
      const long long batch = unit / s.n;
      f(batch, i - unit * s.m, unit - batch * s.n);
    }
    return;
  }
  long long first, last;  // tiles (matmul.cuh)
  MatmulOwnedTiles(ctx, s, &first, &last);
  constexpr long long kTileElements = kMatmulTile * kMatmulTile;
  const long long tiles_n = (s.n + kMatmulTile - 1) / kMatmulTile;
  const long long per_batch = ((s.m + kMatmulTile - 1) / kMatmulTile) * tiles_n;
  for (long long i = tid; i < (last - first) * kTileElements; i += threads) {
    const long long j = first + i / kTileElements;
    const long long e = i % kTileElements;
    const long long batch = j / per_batch;
    const long long in_batch = j - batch * per_batch;
    const long long r = (in_batch / tiles_n) * kMatmulTile + e / kMatmulTile;
    const long long c = (in_batch % tiles_n) * kMatmulTile + e % kMatmulTile;
    if (r < s.m && c < s.n) f(batch, r, c);
  }
}

// fused_addmm: see the file comment. `norm`: 0 (no prologue) or 1 + the
// prologue's NormActivation; `activation`: the epilogue's NormActivation;
// `add_residual`: 0 or 1. Tensors a stage does not use (norm_weight and
// norm_bias without norm, residual without add_residual) are not read.
// Every thread of the block must call it.
template <typename T>
__device__ void FusedAddmm(const OpContext& ctx, const TensorAccessor<const T>& a,
                           const TensorAccessor<const T>& b, const TensorAccessor<const T>& c,
                           const TensorAccessor<const T>& norm_weight,
                           const TensorAccessor<const T>& norm_bias,
                           const TensorAccessor<const T>& residual, const TensorAccessor<T>& out,
                           double alpha, double beta, long long norm, double eps,
                           long long activation, long long add_residual) {
  using C = compute_type_t<T>;
  const auto valid_activation = [](long long v) {
    return v >= kNormActivationNone && v <= kNormActivationRelu;
  };
  if ((norm != 0 && !valid_activation(norm - 1)) || (add_residual != 0 && add_residual != 1) ||
      !valid_activation(activation)) {
    if (ctx.thread_index() == 0) ctx.fail(3);
    return;
  }
  MatmulShape shape;
  MatmulBias<T> bias_epilogue = {};
  bool fits = MatmulCheck(a, b, out, &shape) &&
              MakeMatmulBias(c, shape, alpha, beta, &bias_epilogue) &&
              (add_residual == 0 || residual.same_shape(out.desc())) &&
              (norm == 0 ||
               (IsColumnParameter(norm_weight, shape.k) && IsColumnParameter(norm_bias, shape.k)));
  if (!fits) {
    if (ctx.thread_index() == 0) ctx.fail(1);
    return;
  }
  if (norm != 0 &&
      shape.batch * shape.m * shape.k > kFusedNormBytes / static_cast<long long>(sizeof(T))) {
    if (ctx.thread_index() == 0) ctx.fail(2);
    return;
  }
  // One call of the product's path (each call site would inline a copy).
  TensorAccessor<const T> source = a;
  if (norm != 0) {
    source = NormalizeRowsToShared<T>(ctx, a, shape, norm_weight, norm_bias, eps,
                                      static_cast<int>(norm - 1), FusedNormShared());
  }
  MatmulRun<T>(ctx, source, b, out, shape, bias_epilogue);
  if (activation == kNormActivationNone && add_residual == 0) return;
  ctx.sync();  // the product's stores, made by other threads of the block
  const int act = static_cast<int>(activation);
  const int rank = shape.rank;
  ForEachOwnedOutput(ctx, shape, [&](long long batch, long long r, long long col) {
    long long at = r * out.stride(rank - 2) + col * out.stride(rank - 1);
    if (rank == 3) at += batch * out.stride(0);
    // As the activation's and the add's tasks would read the product: in T.
    C y = convert<C>(NormOutput<T>(convert<C>(out.at_offset(at)), act));
    if (add_residual != 0) {
      long long res_at = r * residual.stride(rank - 2) + col * residual.stride(rank - 1);
      if (rank == 3) res_at += batch * residual.stride(0);
      y += convert<C>(residual.at_offset(res_at));
    }
    out.at_offset(at) = convert<T>(y);
  });
}

}  // namespace device
}  // namespace gpuos
