// Block-level matrix multiplication for the std.linalg operators
// (operators/std_linalg.yaml): out[b] = a[b] x b[b] for strided views of
// rank 2 ([M, K] x [K, N]) or 3 ([B, M, K] x [B, K, N]; a batch stride of 0
// broadcasts).
//
// The output is cut into 32 x 32 tiles. Work items are the output's
// elements; a task computes the tiles whose first element (top-left corner)
// lies in its [begin, end), so any split of the elements into tasks computes
// every tile exactly once (tasks of whole 32-row bands balance best). Inputs
// are staged through the block's scratch in K-slices, converted to the
// compute type, zero-padded at the edges, so any strides work.
//
// - __half / __nv_bfloat16: tensor cores (nvcuda::wmma 16x16x16, f32
//   accumulation); warps 0-3 each own a 16 x 16 quarter of the tile.
// - float / double: each thread accumulates four outputs of the tile.
#pragma once

#include <mma.h>

#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/op_context.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

constexpr int kMatmulTile = 32;

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

// Calls tile(batch, row0, col0) for the tiles this task owns (uniform across
// the block).
template <typename F>
__device__ void ForEachMatmulTile(const OpContext& ctx, const MatmulShape& s, F&& tile) {
  if (s.m == 0 || s.n == 0 || ctx.begin() >= ctx.end()) return;
  const long long rows = s.batch * s.m;
  const long long first_row = ctx.begin() / s.n;
  long long last_row = (ctx.end() - 1) / s.n;
  if (last_row >= rows) last_row = rows - 1;
  for (long long g = first_row; g <= last_row; ++g) {
    const long long row = g % s.m;
    if (row % kMatmulTile != 0) continue;
    for (long long col = 0; col < s.n; col += kMatmulTile) {
      const long long anchor = g * s.n + col;
      if (anchor >= ctx.begin() && anchor < ctx.end()) tile(g / s.m, row, col);
    }
  }
}

// Element (batch, r, c) of a rank-2 or rank-3 view, converted to C; 0
// outside [0, rows) x [0, cols).
template <typename C, typename E>
__device__ __forceinline__ C MatmulLoad(const TensorAccessor<E>& t, int rank, long long batch,
                                        long long r, long long c, long long rows, long long cols) {
  if (r >= rows || c >= cols) return C(0);
  long long offset = r * t.stride(rank - 2) + c * t.stride(rank - 1);
  if (rank == 3) offset += batch * t.stride(0);
  return convert<C>(t.at_offset(offset));
}

template <typename E>
__device__ __forceinline__ void MatmulStore(const TensorAccessor<E>& out, const MatmulShape& s,
                                            long long batch, long long r, long long c,
                                            compute_type_t<typename RemoveConst<E>::type> v) {
  if (r >= s.m || c >= s.n) return;
  long long offset = r * out.stride(s.rank - 2) + c * out.stride(s.rank - 1);
  if (s.rank == 3) offset += batch * out.stride(0);
  out.at_offset(offset) = convert<typename RemoveConst<E>::type>(v);
}

// float / double: SIMT tiles. Thread t computes row t / 8, columns
// (t % 8) * 4 + 0..3 of the 32 x 32 tile.
template <typename T>
__device__ void MatmulSimt(const OpContext& ctx, const TensorAccessor<const T>& a,
                           const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                           const MatmulShape& s) {
  using C = compute_type_t<T>;
  constexpr int kSlice = sizeof(C) == 8 ? 8 : 16;  // 2 * 32 * kSlice * sizeof(C) <= 8 KiB
  C* a_tile = ctx.scratch<C>();                    // [32][kSlice]
  C* b_tile = a_tile + kMatmulTile * kSlice;       // [kSlice][32]
  const int tid = ctx.thread_index();
  const int row = tid / 8;
  const int col = (tid % 8) * 4;
  ForEachMatmulTile(ctx, s, [&](long long batch, long long row0, long long col0) {
    C acc[4] = {C(0), C(0), C(0), C(0)};
    for (long long k0 = 0; k0 < s.k; k0 += kSlice) {
      for (int i = tid; i < kMatmulTile * kSlice; i += ctx.num_threads()) {
        a_tile[i] = MatmulLoad<C>(a, s.rank, batch, row0 + i / kSlice, k0 + i % kSlice, s.m, s.k);
        b_tile[i] =
            MatmulLoad<C>(b, s.rank, batch, k0 + i / kMatmulTile, col0 + i % kMatmulTile, s.k, s.n);
      }
      ctx.sync();
      for (int kk = 0; kk < kSlice; ++kk) {
        const C x = a_tile[row * kSlice + kk];
        for (int j = 0; j < 4; ++j) acc[j] += x * b_tile[kk * kMatmulTile + col + j];
      }
      ctx.sync();
    }
    for (int j = 0; j < 4; ++j) MatmulStore(out, s, batch, row0 + row, col0 + col + j, acc[j]);
  });
}

// __half / __nv_bfloat16: tensor cores.
template <typename T>
__device__ void MatmulTensorCore(const OpContext& ctx, const TensorAccessor<const T>& a,
                                 const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                                 const MatmulShape& s) {
  namespace wmma = nvcuda::wmma;
  constexpr int kSlice = 16;
  // wmma wants 32-byte aligned tiles; the scratch is 16-byte aligned.
  unsigned char* base = ctx.scratch<unsigned char>();
  base += (32 - (reinterpret_cast<unsigned long long>(base) & 31)) & 31;
  T* a_tile = reinterpret_cast<T*>(base);                                   // [32][16], 1 KiB
  T* b_tile = a_tile + kMatmulTile * kSlice;                                // [16][32], 1 KiB
  float* c_tile = reinterpret_cast<float*>(b_tile + kSlice * kMatmulTile);  // [32][32], 4 KiB
  const int tid = ctx.thread_index();
  const int warp = tid / 32;
  const int warp_row = (warp / 2) * 16;
  const int warp_col = (warp % 2) * 16;
  ForEachMatmulTile(ctx, s, [&](long long batch, long long row0, long long col0) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (long long k0 = 0; k0 < s.k; k0 += kSlice) {
      for (int i = tid; i < kMatmulTile * kSlice; i += ctx.num_threads()) {
        a_tile[i] = convert<T>(
            MatmulLoad<float>(a, s.rank, batch, row0 + i / kSlice, k0 + i % kSlice, s.m, s.k));
        b_tile[i] = convert<T>(MatmulLoad<float>(b, s.rank, batch, k0 + i / kMatmulTile,
                                                 col0 + i % kMatmulTile, s.k, s.n));
      }
      ctx.sync();
      if (warp < 4) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, a_tile + warp_row * kSlice, kSlice);
        wmma::load_matrix_sync(fb, b_tile + warp_col, kMatmulTile);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      ctx.sync();
    }
    if (warp < 4) {
      wmma::store_matrix_sync(c_tile + warp_row * kMatmulTile + warp_col, acc, kMatmulTile,
                              wmma::mem_row_major);
    }
    ctx.sync();
    for (int i = tid; i < kMatmulTile * kMatmulTile; i += ctx.num_threads()) {
      MatmulStore(out, s, batch, row0 + i / kMatmulTile, col0 + i % kMatmulTile, c_tile[i]);
    }
    ctx.sync();
  });
}

template <typename T>
struct MatmulDispatch {
  __device__ static void Run(const OpContext& ctx, const TensorAccessor<const T>& a,
                             const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                             const MatmulShape& s) {
    MatmulSimt<T>(ctx, a, b, out, s);
  }
};
template <>
struct MatmulDispatch<__half> {
  __device__ static void Run(const OpContext& ctx, const TensorAccessor<const __half>& a,
                             const TensorAccessor<const __half>& b,
                             const TensorAccessor<__half>& out, const MatmulShape& s) {
    MatmulTensorCore<__half>(ctx, a, b, out, s);
  }
};
template <>
struct MatmulDispatch<__nv_bfloat16> {
  __device__ static void Run(const OpContext& ctx, const TensorAccessor<const __nv_bfloat16>& a,
                             const TensorAccessor<const __nv_bfloat16>& b,
                             const TensorAccessor<__nv_bfloat16>& out, const MatmulShape& s) {
    MatmulTensorCore<__nv_bfloat16>(ctx, a, b, out, s);
  }
};

// out = a x b for the tiles of this task; reports ctx.fail(code) when the
// shapes do not fit. Every thread of the block must call it.
template <typename T>
__device__ void Matmul(const OpContext& ctx, const TensorAccessor<const T>& a,
                       const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                       int required_rank, unsigned int code) {
  MatmulShape shape;
  if (!MatmulCheck(a, b, out, &shape) || (required_rank != 0 && shape.rank != required_rank)) {
    if (ctx.thread_index() == 0) ctx.fail(code);
    return;
  }
  MatmulDispatch<T>::Run(ctx, a, b, out, shape);
}

}  // namespace device
}  // namespace gpuos
