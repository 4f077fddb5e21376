// Matrix products with few rows per batch item (M <= kMatmulFewRowsMax):
// GEMV-like shapes such as a Linear layer over 1 to 16 tokens or one decoder
// token's attention. Their cost is latency, not arithmetic: the 32 x 32 tiles
// of matmul.cuh would leave most rows of a tile empty and pay one global
// round trip (plus two barriers) per K-slice of 32. Here the block spreads
// output columns and K over its threads, keeps partial sums in registers and
// issues many independent loads per thread at once, so a product with K up
// to a few hundred costs about one round trip, then a reduction.
//
// Work split. The unit is one output column of one batch item (unit
// u = batch * N + n, M output elements). Unit u's anchor is u * M, i.e. a
// task owns the units whose first element lies in its [begin, end)
// (ctx.first_unit(M) / ctx.end_unit(M)): any split of [0, items) computes
// every output element exactly once, and a uniform split balances.
//
// Layout. A task's units are walked in segments of one batch item
// (consecutive columns [n0, n1)). For each segment the block forms `teams`
// teams of `lanes` = kMatmulThreads / teams threads (powers of 2). A team
// owns up to kMatmulFewRowsCols columns per pass (team + teams * j); its
// threads split K (k = lane_k + lanes * i) and each accumulates a
// kMatmulFewRowsRows x kMatmulFewRowsCols block of partial sums; rows go in
// chunks of kMatmulFewRowsRows (later chunks find b in L1). The loads of one
// K round (kUnroll K steps x the columns, and `a` for the rows) are all
// issued before the arithmetic that uses them. Consecutive threads walk b's
// smaller stride:
// - k_fast (|b's K stride| <= |b's N stride|, e.g. a transposed weight
//   [N, K] viewed as [K, N]): a team is consecutive threads, lanes walk K.
// - otherwise (b row-major [K, N]): teams interleave (team = thread % teams),
//   so consecutive threads read consecutive columns of one row of b.
// The team's partial sums meet by warp shuffles (xor butterfly: every lane
// ends with the same sum), then, when a team spans several warps, through
// the block's scratch, summed in a fixed order. The layout minimizes
// passes x (K rounds + scratch reductions) for the segment, so the result
// of an element depends on the segment's size (rounding only).
//
// `a` is read straight from global memory (every team reads the same rows:
// L1 hits after the first); plain loads, never the non-coherent path, since
// inputs may have been written by earlier tasks of the same kernel.
//
// REQUIRES: blockDim.x == kWorkerThreads; every thread calls MatmulFewRows.
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/matmul_common.cuh"
#include "gpuos/device/op_context.cuh"
#include "gpuos/device/tensor.cuh"

namespace gpuos {
namespace device {

// Products whose M (rows per batch item) is at most this take this path.
// Up to 16 rows a 32-row tile is at least half empty, and this path reads b
// at most ceil(16 / kMatmulFewRowsRows) = 4 times (the later times from L1
// when a pass's columns fit there); it also needs far fewer round trips than
// the tiled path at any K. Above it, the tiles (tensor cores for halves)
// reuse b across rows.
constexpr long long kMatmulFewRowsMax = 16;
// Rows and columns of the partial sums each thread keeps in registers.
//
// Register budget. The worker calls an operator through a function pointer,
// and the call ABI makes the callee store and reload every register it uses
// above roughly the first 120 (callee-saved), in every thread: with 4 x 4
// partial sums and 8 K steps of loads in flight, this path used all 255
// registers and its operators saved 132 of them per call, which cost a
// 29-column tile 2.7 us of its 6.0 (H100, bench/probes/matmul_few_rows.cu
// at the tree of 4ee57a8 plus these constants as a sweep). 4 x 2 sums and 4
// steps (f32) keep the path under that line; the same tile then took 3.8 us
// through the pointer (2.5 us inlined), and tiles of 4 and 8 rows gained
// as much. Only whole-matrix tiles of 256 columns were slower (20.9 us
// instead of 14.9): the default tiling makes tiles of about 32 columns at
// K = 256. ptxas's report for the operators: GPUOS_PTXAS_INFO=1
// (docs/device-code.md, "Register budget").
constexpr int kMatmulFewRowsRows = 4;
constexpr int kMatmulFewRowsCols = 2;

static_assert((kMatmulFewRowsCols & (kMatmulFewRowsCols - 1)) == 0,
              "columns per team: a power of 2");
static_assert((kMatmulThreads & (kMatmulThreads - 1)) == 0 && kMatmulThreads % 32 == 0,
              "the layouts assume a power-of-2 block of whole warps");
// The scratch holds groups x teams <= kMatmulThreads partial blocks of at
// least one row.
static_assert(kMatmulThreads * kMatmulFewRowsCols * sizeof(double) <= kWorkerScratchBytes,
              "one row of partial sums per thread must fit the block's scratch");

// K steps per load round: 4 for float (8 loads of b in flight per thread,
// with 16 of a), 2 for double (the same registers); see the register budget
// above. A pass of one row of float (M = 1: a Linear layer over one token)
// holds no other rows' loads, and a product with a bias (addmm, baddbmm,
// fused_addmm) takes GPUOS_FEW_ROWS_ONE_ROW_UNROLL (2) times as many steps
// there: inside the worker each round is a round trip to L2 (a layer's
// weights are not in the SM's L1 when its tile starts). Measured on the H100
// in one call, twice each, alternating (bench/results/experiments/
// few_rows_one_row_unroll.json): x2 took the mlp's device span at batch 1
// from 73.8-74.5 us to 64.5-64.8 and decoder_step's from 284.5-286.0 to
// 279.6-281.8; x4 made the operators save more registers per call and was
// slower than x1. Plain products (matmul, bmm: MatmulIdentity) keep 1: at
// x2 their operators save 212-216 bytes a thread per call instead of 76 and
// bmm's tiles took 0.5-0.7 us longer. So do halves (addmm's saves would go
// from 208 to 380 bytes; not measured). ptxas's reports: bench/results/
// experiments/ptxas_few_rows_unroll.txt. An experiment knob (GPUOS_JIT_DEFINES).
#ifndef GPUOS_FEW_ROWS_ONE_ROW_UNROLL
#define GPUOS_FEW_ROWS_ONE_ROW_UNROLL 2
#endif
static_assert(GPUOS_FEW_ROWS_ONE_ROW_UNROLL == 1 || GPUOS_FEW_ROWS_ONE_ROW_UNROLL == 2 ||
                  GPUOS_FEW_ROWS_ONE_ROW_UNROLL == 4,
              "GPUOS_FEW_ROWS_ONE_ROW_UNROLL: 1, 2 or 4 (ChooseMatmulFewRowsLayout costs rounds "
              "of up to 16 K steps; 0 would never end a round)");
template <typename T, typename Epilogue, int kRows = kMatmulFewRowsRows>
struct MatmulFewRowsUnroll {
  static constexpr int kOneRow = kRows == 1 && sizeof(T) == 4 && !IsPlainProduct<Epilogue>::kValue
                                     ? GPUOS_FEW_ROWS_ONE_ROW_UNROLL
                                     : 1;
  static constexpr int kValue = kOneRow * (sizeof(compute_type_t<T>) == 8 ? 2 : 4);
};

struct MatmulFewRowsLayout {
  int teams;        // column teams, a power of 2 in [1, kMatmulThreads]
  int lanes;        // threads per team (they split K): kMatmulThreads / teams
  int cols;         // columns per team per pass: a power of 2 up to kMatmulFewRowsCols
  int groups;       // warps a team spans (its partial sums meet in scratch when > 1)
  int reduce_rows;  // rows of partial sums per scratch round (groups > 1)
  bool k_fast;      // a team is consecutive threads (they walk K)
};

// A thread's place in a layout.
struct MatmulFewRowsRole {
  int team;
  int lane_k;   // which K steps: lane_k + lanes * i
  int group;    // scratch slot of the team's partial sums (groups > 1)
  bool leader;  // writes the team's (warp's) sums
};

// floor(log2(v)) for v >= 1, at compile time (NVRTC has no __builtin_clz).
__host__ __device__ constexpr int MatmulFloorLog2(unsigned long long v) {
  return v <= 1 ? 0 : 1 + MatmulFloorLog2(v / 2);
}

// The layout for `cols` (>= 1) columns of a batch item with `k` (>= 0) and
// `rows` (>= 1) rows, loads of `unroll` (2, 4, 8 or 16) K steps a round and partial
// sums of `value_bytes` (4 or 8) bytes. Every thread computes the same one.
//
// Every tile pays for this before its first load, so it is kept to 32-bit
// shifts and adds over an unrolled loop: with 64-bit arithmetic, a tile
// spent 3.2 us before its first load, now 1.5 us, of which 0.8 us is the
// shape check and operand views (H100, bench/probes/matmul_few_rows.cu,
// which also checks that both versions choose the same layouts). Sizes are
// clamped to 2^30 for the cost, which only ranks the layouts; any layout
// computes the same sums.
__device__ inline MatmulFewRowsLayout ChooseMatmulFewRowsLayout(long long cols, long long k,
                                                                long long rows, bool k_fast,
                                                                int unroll, int value_bytes) {
  constexpr int kWarps = kMatmulThreads / 32;
  constexpr int kThreadsLog2 = MatmulFloorLog2(kMatmulThreads);
  constexpr int kScratchLog2 = MatmulFloorLog2(kWorkerScratchBytes);
  constexpr int kColsLog2 = MatmulFloorLog2(kMatmulFewRowsCols);
  constexpr long long kClamp = 1ll << 30;
  const int n = static_cast<int>(cols < kClamp ? cols : kClamp);
  const int depth = static_cast<int>(k < kClamp ? k : kClamp);
  const int row_count = static_cast<int>(rows < kClamp ? rows : kClamp);
  const int chunk_rows = row_count < kMatmulFewRowsRows ? row_count : kMatmulFewRowsRows;
  const int chunks = (row_count + kMatmulFewRowsRows - 1) / kMatmulFewRowsRows;
  const int unroll_log2 = unroll >= 16 ? 4 : (unroll >= 8 ? 3 : (unroll >= 4 ? 2 : 1));
  const int value_log2 = value_bytes >= 8 ? 3 : 2;
  MatmulFewRowsLayout best = {};
  long long best_cost = -1;
  // From the most teams down: on a tie, fewer threads share a column.
#pragma unroll
  for (int teams_log2 = kThreadsLog2; teams_log2 >= 0; --teams_log2) {
    const int lanes_log2 = kThreadsLog2 - teams_log2;
    MatmulFewRowsLayout l;
    l.teams = 1 << teams_log2;
    l.lanes = 1 << lanes_log2;
    l.k_fast = k_fast;
    const int per_team = ((n - 1) >> teams_log2) + 1;
    // 1, 2, 4, ... columns, at most kMatmulFewRowsCols.
    int cols_log2 = 0;
    while (cols_log2 < kColsLog2 && (1 << cols_log2) < per_team) ++cols_log2;
    l.cols = 1 << cols_log2;
    l.groups = k_fast ? (l.lanes > 32 ? l.lanes / 32 : 1) : (l.lanes < kWarps ? l.lanes : kWarps);
    const int groups_log2 = __ffs(l.groups) - 1;
    const int slot_log2 = groups_log2 + teams_log2 + cols_log2 + value_log2;
    const int fit = slot_log2 >= kScratchLog2 ? 1 : 1 << (kScratchLog2 - slot_log2);
    l.reduce_rows = fit < chunk_rows ? fit : chunk_rows;
    const int passes = ((n - 1) >> (teams_log2 + cols_log2)) + 1;
    const int rounds = depth == 0 ? 0 : ((depth - 1) >> (lanes_log2 + unroll_log2)) + 1;
    const int reductions = l.groups > 1 ? (chunk_rows + l.reduce_rows - 1) / l.reduce_rows : 0;
    // A round trip counts 4, a scratch round (two barriers) 1.
    const long long cost = static_cast<long long>(passes) * chunks * (4ll * rounds + reductions);
    if (best_cost < 0 || cost < best_cost) {
      best = l;
      best_cost = cost;
    }
  }
  return best;
}

__device__ inline MatmulFewRowsRole MakeMatmulFewRowsRole(const MatmulFewRowsLayout& l, int t) {
  MatmulFewRowsRole role;
  const int lane = t & 31;
  if (l.k_fast) {
    role.team = t / l.lanes;
    role.lane_k = t % l.lanes;
    role.group = role.lane_k / 32;  // 0 when a team fits one warp
    role.leader = (role.lane_k & ((l.lanes < 32 ? l.lanes : 32) - 1)) == 0;
  } else {
    role.team = t % l.teams;
    role.lane_k = t / l.teams;
    // Teams narrower than a warp: every warp holds lanes of every team.
    role.group = l.teams >= 32 ? role.lane_k : t / 32;
    role.leader = lane < l.teams;
  }
  return role;
}

// Whether lanes `lane` and `lane ^ offset` (offset a power of 2 below 32)
// belong to the same team.
__device__ __forceinline__ bool MatmulFewRowsSameTeam(const MatmulFewRowsLayout& l, int offset) {
  return l.k_fast ? offset < l.lanes : offset >= l.teams;
}

// Loads one K round of the thread's columns of b and rows of a, converted
// to C: its kUnroll steps k + lanes * i, whose elements lie `b_k` (`a_k`)
// past each b_col (a_row) pointer, and `b_lane` (`a_lane`) further for each
// next step. `checked`: steps at or past `k_end` read the pointer's own
// element instead and yield 0 (the last round only).
template <typename T, int kRows, int kUnroll, bool checked>
__device__ __forceinline__ void MatmulFewRowsLoad(
    const T* const (&b_col)[kMatmulFewRowsCols], const T* const (&a_row)[kRows], long long b_k,
    long long a_k, long long b_lane, long long a_lane, long long k, long long lanes,
    long long k_end, compute_type_t<T> (&bv)[kUnroll][kMatmulFewRowsCols],
    compute_type_t<T> (&av)[kUnroll][kRows]) {
  using C = compute_type_t<T>;
#pragma unroll
  for (int i = 0; i < kUnroll; ++i) {
    const bool in = !checked || k + lanes * i < k_end;
    const long long b_at = in ? b_k : 0;
    const long long a_at = in ? a_k : 0;
#pragma unroll
    for (int j = 0; j < kMatmulFewRowsCols; ++j) {
      const C v = convert<C>(b_col[j][b_at]);
      bv[i][j] = in ? v : C(0);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const C v = convert<C>(a_row[r][a_at]);
      av[i][r] = in ? v : C(0);
    }
    b_k += b_lane;
    a_k += a_lane;
  }
}

// Rows [row0, row0 + kRows) of the columns col0 + team + teams * j
// (j < l.cols, below col_end) of batch item `batch`, stored through
// `epilogue`. REQUIRES: row0 < M, col0 < col_end.
template <typename T, int kRows, typename Epilogue>
__device__ void MatmulFewRowsPass(const OpContext& ctx, const TensorAccessor<const T>& a,
                                  const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                                  const MatmulShape& s, const MatmulFewRowsLayout& l,
                                  const MatmulFewRowsRole& role, const MatmulOperand& ao,
                                  const MatmulOperand& bo, long long batch, long long col0,
                                  long long col_end, long long row0, const Epilogue& epilogue) {
  using C = compute_type_t<T>;
  constexpr int kCols = kMatmulFewRowsCols;
  constexpr int kUnroll = MatmulFewRowsUnroll<T, Epilogue, kRows>::kValue;
  const int rows = s.m - row0 < kRows ? static_cast<int>(s.m - row0) : kRows;
  // Columns and rows outside the pass read column col0 / row row0 (always
  // there), so the loads need no predicates; their sums are dropped.
  long long col[kCols];
  bool col_ok[kCols];
  const T* b_col[kCols];
  const T* a_row[kRows];
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    col[j] = col0 + role.team + static_cast<long long>(l.teams) * j;
    col_ok[j] = j < l.cols && col[j] < col_end;
    b_col[j] = b.data() + bo.base + (col_ok[j] ? col[j] : col0) * bo.col_stride;
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    a_row[r] = a.data() + ao.base + (row0 + (r < rows ? r : 0)) * ao.row_stride;
  }
  C acc[kRows][kCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int j = 0; j < kCols; ++j) acc[r][j] = C(0);
  }
  C bv[kUnroll][kCols], av[kUnroll][kRows];
  const auto accumulate = [&]() {
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int j = 0; j < kCols; ++j) acc[r][j] += av[i][r] * bv[i][j];
      }
    }
  };
  const long long lanes = l.lanes;
  const long long step = lanes * kUnroll;
  // Offsets of this thread's first K step of a round from b_col / a_row, and
  // between its steps and rounds.
  const long long b_lane = lanes * bo.row_stride, a_lane = lanes * ao.col_stride;
  const long long b_round = step * bo.row_stride, a_round = step * ao.col_stride;
  long long b_k = role.lane_k * bo.row_stride, a_k = role.lane_k * ao.col_stride;
  long long k0 = 0;
  for (; k0 + step <= s.k; k0 += step) {  // the same trip count in every thread
    MatmulFewRowsLoad<T, kRows, kUnroll, false>(b_col, a_row, b_k, a_k, b_lane, a_lane,
                                                k0 + role.lane_k, lanes, s.k, bv, av);
    accumulate();
    b_k += b_round;
    a_k += a_round;
  }
  if (k0 < s.k) {
    MatmulFewRowsLoad<T, kRows, kUnroll, true>(b_col, a_row, b_k, a_k, b_lane, a_lane,
                                               k0 + role.lane_k, lanes, s.k, bv, av);
    accumulate();
  }
  // The team's lanes within each warp: an xor butterfly (both partners add
  // the same two values, so every lane holds the same sum). Every lane
  // shuffles every sum at every level (no branch around the shuffles) and
  // adds 0 across teams.
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const bool same_team = MatmulFewRowsSameTeam(l, offset);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const C other = __shfl_xor_sync(0xffffffffu, acc[r][j], offset);
        acc[r][j] += same_team ? other : C(0);
      }
    }
  }
  if (l.groups == 1) {
    if (!role.leader) return;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        if (r < rows && col_ok[j]) {
          MatmulStore(out, s, batch, row0 + r, col[j], acc[r][j], epilogue);
        }
      }
    }
    return;
  }
  // Across warps: slot [group][team][row - r_lo][j], then sums in group order.
  C* partial = ctx.scratch<C>();
  const int per_group = l.teams * l.reduce_rows * l.cols;
  for (int r_lo = 0; r_lo < rows; r_lo += l.reduce_rows) {
    const int round_rows = rows - r_lo < l.reduce_rows ? rows - r_lo : l.reduce_rows;
    if (role.leader) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          if (r >= r_lo && r < r_lo + round_rows && j < l.cols) {
            partial[role.group * per_group + (role.team * l.reduce_rows + r - r_lo) * l.cols + j] =
                acc[r][j];
          }
        }
      }
    }
    ctx.sync();
    for (int i = ctx.thread_index(); i < per_group; i += ctx.num_threads()) {
      const int j = i % l.cols;
      const int r = (i / l.cols) % l.reduce_rows;
      const int team = i / (l.cols * l.reduce_rows);
      const long long c = col0 + team + static_cast<long long>(l.teams) * j;
      if (r < round_rows && c < col_end) {
        C sum = partial[i];
        for (int g = 1; g < l.groups; ++g) sum += partial[g * per_group + i];
        MatmulStore(out, s, batch, row0 + r_lo + r, c, sum, epilogue);
      }
    }
    ctx.sync();
  }
}

// out = epilogue(a x b) for the columns this task owns (see the file
// comment). Every thread of the block calls it with the same shape.
template <typename T, typename Epilogue>
__device__ void MatmulFewRows(const OpContext& ctx, const TensorAccessor<const T>& a,
                              const TensorAccessor<const T>& b, const TensorAccessor<T>& out,
                              const MatmulShape& s, const Epilogue& epilogue) {
  using C = compute_type_t<T>;
  if (s.batch <= 0 || s.m <= 0 || s.n <= 0) return;
  const long long items = s.batch * s.m * s.n;
  const long long begin = ctx.begin() < 0 ? 0 : (ctx.begin() > items ? items : ctx.begin());
  const long long end = ctx.end() < begin ? begin : (ctx.end() > items ? items : ctx.end());
  const long long last = (end + s.m - 1) / s.m;
  for (long long u = (begin + s.m - 1) / s.m; u < last;) {
    const long long batch = u / s.n;
    const long long n0 = u - batch * s.n;
    const long long n1 = s.n - n0 < last - u ? s.n : n0 + (last - u);
    const MatmulOperand ao = MakeMatmulOperand(a, s, batch);
    const MatmulOperand bo = MakeMatmulOperand(b, s, batch);
    const long long k_stride = bo.row_stride < 0 ? -bo.row_stride : bo.row_stride;
    const long long n_stride = bo.col_stride < 0 ? -bo.col_stride : bo.col_stride;
    const MatmulFewRowsLayout l =
        ChooseMatmulFewRowsLayout(n1 - n0, s.k, s.m, k_stride <= n_stride,
                                  s.m == 1 ? MatmulFewRowsUnroll<T, Epilogue, 1>::kValue
                                           : MatmulFewRowsUnroll<T, Epilogue>::kValue,
                                  static_cast<int>(sizeof(C)));
    const MatmulFewRowsRole role = MakeMatmulFewRowsRole(l, ctx.thread_index());
    const long long per_pass = static_cast<long long>(l.teams) * l.cols;
    for (long long col0 = n0; col0 < n1; col0 += per_pass) {
      for (long long row0 = 0; row0 < s.m; row0 += kMatmulFewRowsRows) {
        // One row left (M = 1, or the last of 5, 9 or 13): a thinner pass.
        if (s.m - row0 == 1) {
          MatmulFewRowsPass<T, 1>(ctx, a, b, out, s, l, role, ao, bo, batch, col0, n1, row0,
                                  epilogue);
        } else {
          MatmulFewRowsPass<T, kMatmulFewRowsRows>(ctx, a, b, out, s, l, role, ao, bo, batch, col0,
                                                   n1, row0, epilogue);
        }
      }
    }
    u += n1 - n0;
  }
}

}  // namespace device
}  // namespace gpuos
