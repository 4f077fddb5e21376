// What both matrix-product paths share (matmul.cuh: 32 x 32 tiles;
// matmul_few_rows.cuh: products with few rows): the shape check, one
// operand's strided view of a batch item, and the output store with its
// epilogue (the identity for matmul, the bias of addmm / baddbmm).
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

constexpr int kMatmulThreads = static_cast<int>(kWorkerThreads);

struct MatmulShape {
  long long batch, m, n, k;
  int rank;
};

// Checks ranks and sizes; false (the same in every thread) when they do not
// fit a matmul.
template <typename A, typename B, typename O>
__device__ bool MatmulCheck(const TensorAccessor<A>& a, const TensorAccessor<B>& b,
                            const TensorAccessor<O>& out, MatmulShape* shape) {
  const int rank = out.rank();
  if ((rank != 2 && rank != 3) || a.rank() != rank || b.rank() != rank) return false;
  shape->rank = rank;
  shape->batch = rank == 3 ? out.size(0) : 1;
  shape->m = out.size(rank - 2);
  shape->n = out.size(rank - 1);
  shape->k = a.size(rank - 1);
  if (a.size(rank - 2) != shape->m || b.size(rank - 2) != shape->k || b.size(rank - 1) != shape->n)
    return false;
  if (rank == 3 && (a.size(0) != shape->batch || b.size(0) != shape->batch)) return false;
  return true;
}

// One operand's view of the current product: element (r, c) of batch `batch`
// lies at data[base + r * row_stride + c * col_stride] for r < rows, c < cols.
struct MatmulOperand {
  long long base, row_stride, col_stride, rows, cols;
  bool rows_fast;  // consecutive threads walk rows: the row stride is the unit one
};

template <typename E>
__device__ MatmulOperand MakeMatmulOperand(const TensorAccessor<E>& t, const MatmulShape& s,
                                           long long batch) {
  MatmulOperand o;
  o.base = s.rank == 3 ? batch * t.stride(0) : 0;
  o.row_stride = t.stride(s.rank - 2);
  o.col_stride = t.stride(s.rank - 1);
  o.rows = t.size(s.rank - 2);
  o.cols = t.size(s.rank - 1);
  o.rows_fast = o.row_stride == 1 && o.col_stride != 1;
  return o;
}

// What the store makes of a product's accumulated value v at (batch, r, c):
// v itself for matmul (MatmulIdentity, which compiles to the plain store), or
// beta * bias + alpha * v for addmm / baddbmm (MatmulBias). An epilogue is
// applied once per output element, by the thread that writes it, right
// before the write.
struct MatmulIdentity {
  template <typename C>
  __device__ __forceinline__ C operator()(long long, long long, long long, C v) const {
    return v;
  }
};

// Whether an epilogue is MatmulIdentity (a plain product: matmul, bmm).
template <typename Epilogue>
struct IsPlainProduct {
  static constexpr bool kValue = false;
};
template <>
struct IsPlainProduct<MatmulIdentity> {
  static constexpr bool kValue = true;
};

// out(batch, r, c) = beta * bias(batch, r, c) + alpha * v in the compute
// type. The bias is read at its own strides (0 along broadcast dimensions).
// beta == 0 reads no bias (a NaN there is ignored, as torch.addmm does).
template <typename T>
struct MatmulBias {
  using C = compute_type_t<T>;
  const T* data;
  long long batch_stride, row_stride, col_stride;
  C alpha, beta;

  __device__ __forceinline__ C operator()(long long batch, long long r, long long c, C v) const {
    const C scaled = alpha * v;
    if (beta == C(0)) return scaled;
    const T& bias = data[batch * batch_stride + r * row_stride + c * col_stride];
    return beta * convert<C>(bias) + scaled;
  }
};

// The bias epilogue for `bias` against the product's output shape: bias has
// at most out's rank; aligned from the last dimension, each of its sizes is
// out's or 1 (a size-1 dimension, or one bias lacks, broadcasts). False
// (the same in every thread) otherwise.
template <typename T>
__device__ bool MakeMatmulBias(const TensorAccessor<const T>& bias, const MatmulShape& s,
                               double alpha, double beta, MatmulBias<T>* epilogue) {
  const int rank = bias.rank();
  if (rank > s.rank) return false;
  const long long out_sizes[3] = {s.batch, s.m, s.n};
  long long strides[3] = {0, 0, 0};  // batch, row, column
  for (int d = 0; d < rank; ++d) {
    const int axis = 3 - rank + d;  // rank 2 output: only the row and column axes
    const long long size = bias.size(d);
    if (size != out_sizes[axis] && size != 1) return false;
    strides[axis] = size == 1 ? 0 : bias.stride(d);
  }
  epilogue->data = bias.data();
  epilogue->batch_stride = strides[0];
  epilogue->row_stride = strides[1];
  epilogue->col_stride = strides[2];
  epilogue->alpha = static_cast<compute_type_t<T>>(alpha);
  epilogue->beta = static_cast<compute_type_t<T>>(beta);
  return true;
}

// out[batch](r, c) = epilogue(batch, r, c, v), converted to out's element
// type; nothing outside out.
template <typename E, typename Epilogue>
__device__ __forceinline__ void MatmulStore(const TensorAccessor<E>& out, const MatmulShape& s,
                                            long long batch, long long r, long long c,
                                            compute_type_t<typename RemoveConst<E>::type> v,
                                            const Epilogue& epilogue) {
  if (r >= s.m || c >= s.n) return;
  long long offset = r * out.stride(s.rank - 2) + c * out.stride(s.rank - 1);
  if (s.rank == 3) offset += batch * out.stride(0);
  out.at_offset(offset) = convert<typename RemoveConst<E>::type>(epilogue(batch, r, c, v));
}

}  // namespace device
}  // namespace gpuos
