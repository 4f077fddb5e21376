// Block-level matrix multiplication for the std.linalg operators
// (operators/std_linalg.yaml): out[b] = a[b] x b[b] for strided views of
// rank 2 ([M, K] x [K, N]) or 3 ([B, M, K] x [B, K, N]; a batch stride of 0
// broadcasts), and addmm / baddbmm, which add a scaled bias in the store
// (an epilogue: matmul_common.cuh, MatmulBias).
//
// Two paths, chosen from the shape alone (so every task of a product takes
// the same one, and the block the same branch):
// - M <= kMatmulFewRowsMax (16): columns and K spread over the threads,
//   partial sums in registers, shuffle / scratch reductions
//   (matmul_few_rows.cuh; its unit of work is one output column).
// - otherwise the 32 x 32 tiles below.
//
// Tiles. The output is cut into J 32 x 32 tiles (batch-major, then
// row-major). Work items are out's elements (items = out.numel()); tile j
// belongs to the task whose [begin, end) holds its anchor j * q + min(j, r),
// where q = items / J and r = items % J: the anchors split [0, items)
// uniformly, so any split of the items into tasks computes every tile
// exactly once and a uniform split balances the tiles over the tasks
// (MatmulOwnedTiles).
//
// Inputs are staged through the block's scratch in K-slices of 32 (16 for
// f64), converted to the compute type and zero-padded at the edges, so any
// strides work. Each thread loads its share of the next slice into registers
// before the block computes the current one, so one global round trip
// overlaps each slice's arithmetic. Loads walk the operand's unit-stride
// dimension across consecutive threads (rows when the row stride is 1, as in
// a transposed weight), so they coalesce either way.
//
// - __half / __nv_bfloat16: tensor cores (nvcuda::wmma 16x16x16, f32
//   accumulation); warps 0-3 each own a 16 x 16 quarter of the tile.
// - float / double: thread t accumulates row t / 8, columns (t % 8) * 4 + 0..3
//   of the tile, from k-major XOR-swizzled slices in shared memory
//   (MatmulSimt says how).
//
// REQUIRES: blockDim.x == kWorkerThreads (the worker's launch).
#pragma once

#include <mma.h>

#include "gpuos/device/abi.h"
#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/matmul_common.cuh"
#include "gpuos/device/matmul_few_rows.cuh"
#include "gpuos/device/op_context.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

constexpr int kMatmulTile = 32;

// The output tiles [*first, *last) this task computes (see the file comment).
__device__ inline void MatmulOwnedTiles(const OpContext& ctx, const MatmulShape& s,
                                        long long* first, long long* last) {
  *first = *last = 0;
  if (s.batch == 0 || s.m == 0 || s.n == 0) return;
  const long long tiles =
      s.batch * ((s.m + kMatmulTile - 1) / kMatmulTile) * ((s.n + kMatmulTile - 1) / kMatmulTile);
  const long long items = s.batch * s.m * s.n;  // >= tiles, so q >= 1
  const long long q = items / tiles;
  const long long r = items % tiles;
  // The first tile whose anchor is >= x, for x in [0, items].
  const auto first_at_or_after = [&](long long x) {
    if (x <= r * (q + 1)) return (x + q) / (q + 1);
    return r + (x - r * (q + 1) + q - 1) / q;
  };
  const long long begin = ctx.begin() < 0 ? 0 : (ctx.begin() > items ? items : ctx.begin());
  const long long end = ctx.end() < begin ? begin : (ctx.end() > items ? items : ctx.end());
  *first = first_at_or_after(begin);
  *last = first_at_or_after(end);
}

// Position (r, c) of this thread's p-th element of a kRows x kCols block.
template <int kRows, int kCols>
__device__ __forceinline__ void MatmulElement(bool rows_fast, int p, int* r, int* c) {
  const int i = static_cast<int>(threadIdx.x) + p * kMatmulThreads;
  *r = rows_fast ? i % kRows : i / kCols;
  *c = rows_fast ? i / kRows : i % kCols;
}

// Loads this thread's share of the kRows x kCols block at (row0, col0) of an
// operand into registers, converted to C; 0 outside the operand.
template <int kRows, int kCols, typename C, typename E>
__device__ __forceinline__ void MatmulLoadBlock(const E* data, const MatmulOperand& o,
                                                long long row0, long long col0,
                                                C (&regs)[kRows * kCols / kMatmulThreads]) {
#pragma unroll
  for (int p = 0; p < kRows * kCols / kMatmulThreads; ++p) {
    int r, c;
    MatmulElement<kRows, kCols>(o.rows_fast, p, &r, &c);
    const long long row = row0 + r;
    const long long col = col0 + c;
    regs[p] = row < o.rows && col < o.cols
                  ? convert<C>(data[o.base + row * o.row_stride + col * o.col_stride])
                  : convert<C>(0.0f);
  }
}

// Stores the registers MatmulLoadBlock filled at tile[index(r, c)].
template <int kRows, int kCols, typename C, typename Index>
__device__ __forceinline__ void MatmulStoreBlock(C* tile, bool rows_fast,
                                                 const C (&regs)[kRows * kCols / kMatmulThreads],
                                                 Index index) {
#pragma unroll
  for (int p = 0; p < kRows * kCols / kMatmulThreads; ++p) {
    int r, c;
    MatmulElement<kRows, kCols>(rows_fast, p, &r, &c);
    tile[index(r, c)] = regs[p];
  }
}

// Calls tile(batch, row0, col0) for the tiles this task owns (uniform across
// the block).
template <typename F>
__device__ void ForEachMatmulTile(const OpContext& ctx, const MatmulShape& s, F&& tile) {
  long long first, last;
  MatmulOwnedTiles(ctx, s, &first, &last);
  const long long tiles_n = (s.n + kMatmulTile - 1) / kMatmulTile;
  const long long per_batch = ((s.m + kMatmulTile - 1) / kMatmulTile) * tiles_n;
  for (long long j = first; j < last; ++j) {
    const long long in_batch = j % per_batch;
    tile(j / per_batch, (in_batch / tiles_n) * kMatmulTile, (in_batch % tiles_n) * kMatmulTile);
  }
}

// The four compute-type values at p (16-byte aligned) with vector loads.
__device__ __forceinline__ void MatmulLoad4(const float* p, float (&v)[4]) {
  const float4 x = *reinterpret_cast<const float4*>(p);
  v[0] = x.x;
  v[1] = x.y;
  v[2] = x.z;
  v[3] = x.w;
}
__device__ __forceinline__ void MatmulLoad4(const double* p, double (&v)[4]) {
  const double2 x = reinterpret_cast<const double2*>(p)[0];
  const double2 y = reinterpret_cast<const double2*>(p)[1];
  v[0] = x.x;
  v[1] = x.y;
  v[2] = y.x;
  v[3] = y.y;
}

// float / double: SIMT tiles.
//
// The staged slices are k-major, 32 values per k: a's element (r, k) at
// k * 32 + (r ^ (k % 32)) and b's element (k, c) at k * 32 + c with c's group
// of four XOR-ed by k % 8. Thread t computes row t / 8, columns 4 (t % 8) +
// 0..3: per k it reads one value of a (its warp's four rows lie in four
// banks) and its four values of b with one vector load, all from shared
// memory (the scratch is; __builtin_assume lets the compiler use shared
// loads with immediate offsets instead of generic ones), then four FFMAs.
// The swizzles keep the stores conflict-free (a) or 4-way (b, k fastest).
// Before, with element swizzles on both and generic loads, a tile ran about
// 8.5 other instructions per FFMA, now 4.4 (Nsight Compute on
// bench/probes/matmul_tiles.cu, everything inlined:
// bench/results/experiments/ncu_probe_summaries.json), and a 32 x 32 x 64
// output tile of attention's scores took 5.3 us instead of 3.9.
template <typename T, typename Epilogue>
__device__ void MatmulSimt(const OpContext& ctx, const TensorAccessor<const T>& a,
                           const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                           const MatmulShape& s, const Epilogue& epilogue) {
  using C = compute_type_t<T>;
  constexpr int kSlice = sizeof(C) == 8 ? 16 : 32;  // 2 * 32 * kSlice * sizeof(C) <= 8 KiB
  constexpr int kPerThread = kMatmulTile * kSlice / kMatmulThreads;
  static_assert(2 * kMatmulTile * kSlice * sizeof(C) <= kWorkerScratchBytes,
                "the staged slices must fit the block's scratch");
  C* a_tile = ctx.scratch<C>();               // [kSlice][32] (see above)
  C* b_tile = a_tile + kMatmulTile * kSlice;  // [kSlice][32]
  // (r, c) of a block as MatmulLoadBlock walks it: a is [32 rows][kSlice k],
  // b is [kSlice k][32 columns].
  const auto a_index = [](int r, int k) { return k * kMatmulTile + (r ^ (k & 31)); };
  const auto b_index = [](int k, int c) {
    return k * kMatmulTile + ((((c >> 2) ^ (k & 7)) << 2) | (c & 3));
  };
  const int tid = ctx.thread_index();
  const int row = tid / 8;
  const int group = tid % 8;
  const int col = group * 4;
  // What the loop reads of the shape, the descriptors and the epilogue, in
  // registers before it: this path runs out of line (MatmulTiledPath), where
  // each read through the references went to the caller's stack and the
  // descriptors, again after every store (stores may alias them).
  const MatmulShape shape = s;
  const T* const a_data = a.data();
  const T* const b_data = b.data();
  T* const out_data = out.data();
  const long long out_row_stride = out.stride(shape.rank - 2);
  const long long out_col_stride = out.stride(shape.rank - 1);
  const long long out_batch_stride = shape.rank == 3 ? out.stride(0) : 0;
  const Epilogue store = epilogue;
  ForEachMatmulTile(ctx, shape, [&](long long batch, long long row0, long long col0) {
    const MatmulOperand ao = MakeMatmulOperand(a, shape, batch);
    const MatmulOperand bo = MakeMatmulOperand(b, shape, batch);
    C a_next[kPerThread], b_next[kPerThread];
    MatmulLoadBlock<kMatmulTile, kSlice>(a_data, ao, row0, 0, a_next);
    MatmulLoadBlock<kSlice, kMatmulTile>(b_data, bo, 0, col0, b_next);
    C acc[4] = {C(0), C(0), C(0), C(0)};
    for (long long k0 = 0; k0 < shape.k; k0 += kSlice) {
      MatmulStoreBlock<kMatmulTile, kSlice>(a_tile, ao.rows_fast, a_next, a_index);
      MatmulStoreBlock<kSlice, kMatmulTile>(b_tile, bo.rows_fast, b_next, b_index);
      ctx.sync();
      if (k0 + kSlice < shape.k) {  // the next slice's loads fly while this one computes
        MatmulLoadBlock<kMatmulTile, kSlice>(a_data, ao, row0, k0 + kSlice, a_next);
        MatmulLoadBlock<kSlice, kMatmulTile>(b_data, bo, k0 + kSlice, col0, b_next);
      }
      const C* a_shared = a_tile;
      const C* b_shared = b_tile;
      __builtin_assume(__isShared(a_shared));
      __builtin_assume(__isShared(b_shared));
#pragma unroll
      for (int kk = 0; kk < kSlice; ++kk) {
        const C x = a_shared[kk * kMatmulTile + (row ^ (kk & 31))];
        C y[4];
        MatmulLoad4(b_shared + kk * kMatmulTile + ((group ^ (kk & 7)) << 2), y);
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[j] += x * y[j];
      }
      ctx.sync();
    }
    const long long r = row0 + row;
    if (r < shape.m) {
      T* const out_row = out_data + batch * out_batch_stride + r * out_row_stride;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const long long c = col0 + col + j;
        if (c < shape.n) out_row[c * out_col_stride] = convert<T>(store(batch, r, c, acc[j]));
      }
    }
  });
}

// __half / __nv_bfloat16: tensor cores.
template <typename T, typename Epilogue>
__device__ void MatmulTensorCore(const OpContext& ctx, const TensorAccessor<const T>& a,
                                 const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                                 const MatmulShape& s, const Epilogue& epilogue) {
  namespace wmma = nvcuda::wmma;
  constexpr int kSlice = 32;
  constexpr int kPerThread = kMatmulTile * kSlice / kMatmulThreads;
  // Rows padded by 8 elements (16 bytes) against bank conflicts; wmma wants
  // 32-byte aligned fragment pointers (every 16th row and column is) and
  // leading dimensions that are multiples of 8.
  constexpr int kLd = kMatmulTile + 8;  // == kSlice + 8
  // The slices, or the f32 output tile after the K loop, plus 32 bytes of
  // alignment slack.
  static_assert(2 * kMatmulTile * kLd * sizeof(T) + 32 <= kWorkerScratchBytes &&
                    kMatmulTile * kMatmulTile * sizeof(float) + 32 <= kWorkerScratchBytes,
                "the staged slices must fit the block's scratch");
  unsigned char* base = ctx.scratch<unsigned char>();
  base += (32 - (reinterpret_cast<unsigned long long>(base) & 31)) & 31;
  T* a_tile = reinterpret_cast<T*>(base);  // [32][kLd], 2.5 KiB
  T* b_tile = a_tile + kMatmulTile * kLd;  // [kSlice][kLd], 2.5 KiB
  // [32][32] f32, 4 KiB: reuses the staging area once the K loop is done.
  float* c_tile = reinterpret_cast<float*>(base);
  const auto index = [](int r, int c) { return r * kLd + c; };
  const int tid = ctx.thread_index();
  const int warp = tid / 32;
  const int warp_row = (warp / 2) * 16;
  const int warp_col = (warp % 2) * 16;
  ForEachMatmulTile(ctx, s, [&](long long batch, long long row0, long long col0) {
    const MatmulOperand ao = MakeMatmulOperand(a, s, batch);
    const MatmulOperand bo = MakeMatmulOperand(b, s, batch);
    T a_next[kPerThread], b_next[kPerThread];
    MatmulLoadBlock<kMatmulTile, kSlice>(a.data(), ao, row0, 0, a_next);
    MatmulLoadBlock<kSlice, kMatmulTile>(b.data(), bo, 0, col0, b_next);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (long long k0 = 0; k0 < s.k; k0 += kSlice) {
      MatmulStoreBlock<kMatmulTile, kSlice>(a_tile, ao.rows_fast, a_next, index);
      MatmulStoreBlock<kSlice, kMatmulTile>(b_tile, bo.rows_fast, b_next, index);
      ctx.sync();
      if (k0 + kSlice < s.k) {
        MatmulLoadBlock<kMatmulTile, kSlice>(a.data(), ao, row0, k0 + kSlice, a_next);
        MatmulLoadBlock<kSlice, kMatmulTile>(b.data(), bo, k0 + kSlice, col0, b_next);
      }
      if (warp < 4) {
#pragma unroll
        for (int kk = 0; kk < kSlice; kk += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
          wmma::load_matrix_sync(fa, a_tile + warp_row * kLd + kk, kLd);
          wmma::load_matrix_sync(fb, b_tile + kk * kLd + warp_col, kLd);
          wmma::mma_sync(acc, fa, fb, acc);
        }
      }
      ctx.sync();
    }
    if (warp < 4) {
      wmma::store_matrix_sync(c_tile + warp_row * kMatmulTile + warp_col, acc, kMatmulTile,
                              wmma::mem_row_major);
    }
    ctx.sync();
    for (int i = tid; i < kMatmulTile * kMatmulTile; i += ctx.num_threads()) {
      MatmulStore(out, s, batch, row0 + i / kMatmulTile, col0 + i % kMatmulTile, c_tile[i],
                  epilogue);
    }
    ctx.sync();
  });
}

template <typename T>
struct MatmulDispatch {
  template <typename Epilogue>
  __device__ static void Run(const OpContext& ctx, const TensorAccessor<const T>& a,
                             const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                             const MatmulShape& s, const Epilogue& epilogue) {
    MatmulSimt<T>(ctx, a, b, out, s, epilogue);
  }
};
template <>
struct MatmulDispatch<__half> {
  template <typename Epilogue>
  __device__ static void Run(const OpContext& ctx, const TensorAccessor<const __half>& a,
                             const TensorAccessor<const __half>& b,
                             const TensorAccessor<__half>& out, const MatmulShape& s,
                             const Epilogue& epilogue) {
    MatmulTensorCore<__half>(ctx, a, b, out, s, epilogue);
  }
};
template <>
struct MatmulDispatch<__nv_bfloat16> {
  template <typename Epilogue>
  __device__ static void Run(const OpContext& ctx, const TensorAccessor<const __nv_bfloat16>& a,
                             const TensorAccessor<const __nv_bfloat16>& b,
                             const TensorAccessor<__nv_bfloat16>& out, const MatmulShape& s,
                             const Epilogue& epilogue) {
    MatmulTensorCore<__nv_bfloat16>(ctx, a, b, out, s, epilogue);
  }
};

// The tiled path, kept out of line: inlined next to the few-rows path, its
// registers raised the operator's register count and with it the
// callee-saved registers every call of the operator stores and reloads (the
// register budget in matmul_few_rows.cuh). Called last, with nothing live
// after it, it costs the few-rows path nothing.
template <typename T, typename Epilogue>
__device__ __noinline__ void MatmulTiledPath(const OpContext& ctx, const TensorAccessor<const T>& a,
                                             const TensorAccessor<const T>& b,
                                             const TensorAccessor<T>& out, const MatmulShape& s,
                                             const Epilogue& epilogue) {
  MatmulDispatch<T>::Run(ctx, a, b, out, s, epilogue);
}

// The path for `s` (few rows or tiles), stored through `epilogue`.
template <typename T, typename Epilogue>
__device__ void MatmulRun(const OpContext& ctx, const TensorAccessor<const T>& a,
                          const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                          const MatmulShape& s, const Epilogue& epilogue) {
  if (s.m <= kMatmulFewRowsMax) {
    MatmulFewRows<T>(ctx, a, b, out, s, epilogue);
    return;
  }
  MatmulTiledPath<T>(ctx, a, b, out, s, epilogue);
}

// out = a x b for the columns (few rows) or tiles this task owns; reports
// ctx.fail(code) when the shapes do not fit. Every thread of the block must
// call it.
template <typename T>
__device__ void Matmul(const OpContext& ctx, const TensorAccessor<const T>& a,
                       const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                       int required_rank, unsigned int code) {
  MatmulShape shape;
  if (!MatmulCheck(a, b, out, &shape) || (required_rank != 0 && shape.rank != required_rank)) {
    if (ctx.thread_index() == 0) ctx.fail(code);
    return;
  }
  MatmulRun<T>(ctx, a, b, out, shape, MatmulIdentity{});
}

// out = beta * bias + alpha * (a x b) (torch.addmm / baddbmm) for the same
// columns or tiles as Matmul, computed in the compute type with one rounding
// to T at the store. bias broadcasts to out's shape (MakeMatmulBias: at most
// out's rank, sizes out's or 1, any strides); beta == 0 never reads it.
// Reports ctx.fail(code) when a shape does not fit. In place: out may be
// bias itself (the same elements at the same strides), since every element's
// bias is read by the thread that writes it, just before; a bias that
// broadcasts must not overlap out. Every thread of the block must call it.
template <typename T>
__device__ void Addmm(const OpContext& ctx, const TensorAccessor<const T>& a,
                      const TensorAccessor<const T>& b, const TensorAccessor<const T>& bias,
                      const TensorAccessor<T>& out, double alpha, double beta, int required_rank,
                      unsigned int code) {
  MatmulShape shape;
  MatmulBias<T> epilogue = {};
  if (!MatmulCheck(a, b, out, &shape) || (required_rank != 0 && shape.rank != required_rank) ||
      !MakeMatmulBias(bias, shape, alpha, beta, &epilogue)) {
    if (ctx.thread_index() == 0) ctx.fail(code);
    return;
  }
  MatmulRun<T>(ctx, a, b, out, shape, epilogue);
}

}  // namespace device
}  // namespace gpuos
