// What both matrix-product paths share (matmul.cuh: 32 x 32 tiles;
// matmul_few_rows.cuh: products with few rows): the shape check, one
// operand's strided view of a batch item, and the output store.
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

// out[batch](r, c) = v, converted to out's element type; nothing outside out.
template <typename E>
__device__ __forceinline__ void MatmulStore(const TensorAccessor<E>& out, const MatmulShape& s,
                                            long long batch, long long r, long long c,
                                            compute_type_t<typename RemoveConst<E>::type> v) {
  if (r >= s.m || c >= s.n) return;
  long long offset = r * out.stride(s.rank - 2) + c * out.stride(s.rank - 1);
  if (s.rank == 3) offset += batch * out.stride(0);
  out.at_offset(offset) = convert<typename RemoveConst<E>::type>(v);
}

}  // namespace device
}  // namespace gpuos
