// Probe: what one few-rows matmul tile costs by itself, outside the worker
// (a diagnostic, not a benchmark of record; bench/README.md, "Probes").
//
// The PyTorch task profile (bench/results/pytorch_task_profile.json) puts a
// tile of Linear(256, 256) at batch 1 (29 output columns, K = 256, weight
// read transposed) at 8.6 us inside the persistent worker. This kernel runs
// the same device code (gpuos::device::Matmul<float>, matmul_few_rows.cuh)
// in one block of kWorkerThreads threads on the same shapes, called
//   direct    inlined into the kernel, as a compiler sees a plain kernel
//   indirect  through a function pointer, as the worker calls an operator
//             (the ABI's callee-saved registers go to the stack and back)
//   layout    only the work before the loads: the shape check, the operand
//             views and ChooseMatmulFewRowsLayout (what any tile pays first)
//   layout_64 the same with the chooser as it was at 7c6d64d (64-bit
//             arithmetic; kept below as OldChooseLayout for comparison)
//   prologue  the same without any chooser
// It also checks that both choosers pick the same layout over a sweep of
// shapes ("layout_mismatches" must be 0).
// and reports the median of --reps calls (globaltimer, ns) after warm-up, so
// the compute loop and the call's fixed cost can be told apart from the
// worker's own hand-over costs.
//
//   nvcc -O3 -arch=sm_90 -rdc=true -std=c++17 -I device/include \
//     bench/probes/matmul_few_rows.cu device/src/indexing.cu -o /tmp/probe && /tmp/probe
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpuos/device/matmul.cuh"
#include "probe_common.cuh"

using gpuos::device::kWorkerScratchBytes;
using gpuos::device::kWorkerThreads;
using gpuos::device::OpCall;
using gpuos::device::OpContext;
using gpuos::device::TaskDesc;
using gpuos::device::TensorAccessor;
using gpuos::device::TensorDesc;

namespace {

constexpr int kReps = 64;
const char* const kModes[] = {"direct", "indirect", "layout", "layout_64", "prologue"};
constexpr long long kK = 256, kN = 256;

__device__ void RunMatmul(const OpCall& call) {
  OpContext ctx(call, 2);
  gpuos::device::Matmul<float>(ctx, ctx.input<float>(0), ctx.input<float>(1), ctx.output<float>(0),
                               0, 1);
}

using gpuos::device::MatmulFewRowsLayout;

// ChooseMatmulFewRowsLayout at 7c6d64d (64-bit arithmetic), for comparison.
__device__ int OldLog2(long long power_of_two) { return 63 - __clzll(power_of_two); }
__device__ long long OldCeilShift(long long x, int shift) {
  return (x + (1ll << shift) - 1) >> shift;
}
__device__ MatmulFewRowsLayout OldChooseLayout(long long cols, long long k, long long rows,
                                               bool k_fast, int unroll, int value_bytes) {
  using gpuos::device::kMatmulFewRowsRows;
  using gpuos::device::kMatmulThreads;
  constexpr int kWarps = kMatmulThreads / 32;
  const long long chunk_rows = rows < kMatmulFewRowsRows ? rows : kMatmulFewRowsRows;
  const long long chunks = OldCeilShift(rows, OldLog2(kMatmulFewRowsRows));
  MatmulFewRowsLayout best = {};
  long long best_cost = -1;
  for (int teams = kMatmulThreads; teams >= 1; teams /= 2) {
    MatmulFewRowsLayout l;
    l.teams = teams;
    l.lanes = kMatmulThreads / teams;
    l.k_fast = k_fast;
    const int teams_log2 = OldLog2(teams);
    const long long per_team = OldCeilShift(cols, teams_log2);
    // (4 was kMatmulFewRowsCols then; capped by today's value so that both
    // choosers are compared on the same column limit.)
    l.cols = per_team >= 3 ? 4 : static_cast<int>(per_team);
    if (l.cols > gpuos::device::kMatmulFewRowsCols) l.cols = gpuos::device::kMatmulFewRowsCols;
    l.groups = k_fast ? (l.lanes > 32 ? l.lanes / 32 : 1) : (l.lanes < kWarps ? l.lanes : kWarps);
    const int slot_bytes_log2 =
        OldLog2(static_cast<long long>(l.groups) * teams * l.cols * value_bytes);
    const long long fit = static_cast<long long>(kWorkerScratchBytes) >> slot_bytes_log2;
    l.reduce_rows = static_cast<int>(fit < chunk_rows ? fit : chunk_rows);
    const long long passes = OldCeilShift(cols, teams_log2 + OldLog2(l.cols));
    const long long rounds = OldCeilShift(k, OldLog2(static_cast<long long>(l.lanes) * unroll));
    const long long reductions =
        l.groups > 1 ? (chunk_rows + l.reduce_rows - 1) / l.reduce_rows : 0;
    const long long cost = passes * chunks * (4 * rounds + reductions);
    if (best_cost < 0 || cost < best_cost) {
      best = l;
      best_cost = cost;
    }
  }
  return best;
}

__device__ bool SameLayout(const MatmulFewRowsLayout& x, const MatmulFewRowsLayout& y) {
  return x.teams == y.teams && x.lanes == y.lanes && x.cols == y.cols && x.groups == y.groups &&
         x.reduce_rows == y.reduce_rows && x.k_fast == y.k_fast;
}

// Counts the shapes where the two choosers differ.
__global__ void CompareChoosers(unsigned long long* mismatches) {
  const long long ks[] = {0, 1, 7, 64, 255, 256, 1000, 4096, 100000};
  const int rows = 1 + static_cast<int>(threadIdx.x % 16);
  for (long long cols = 1 + blockIdx.x; cols <= 1100; cols += gridDim.x) {
    for (long long k : ks) {
      for (int variant = 0; variant < 8; ++variant) {
        const bool k_fast = variant & 1;
        const int unroll = variant & 2 ? 8 : 4;
        const int bytes = variant & 4 ? 8 : 4;
        if (!SameLayout(
                OldChooseLayout(cols, k, rows, k_fast, unroll, bytes),
                gpuos::device::ChooseMatmulFewRowsLayout(cols, k, rows, k_fast, unroll, bytes))) {
          atomicAdd(mismatches, 1ull);
        }
      }
    }
  }
}

// What MatmulFewRows does before its first load, for one segment: 0 the
// current chooser, 1 the old one, 2 none.
__device__ void RunLayout(const OpCall& call, int chooser, int* sink) {
  OpContext ctx(call, 2);
  const auto a = ctx.input<float>(0);
  const auto b = ctx.input<float>(1);
  const auto out = ctx.output<float>(0);
  gpuos::device::MatmulShape s;
  if (!gpuos::device::MatmulCheck(a, b, out, &s)) return;
  const long long begin = ctx.begin(), end = ctx.end();
  const long long last = (end + s.m - 1) / s.m;
  const long long u = (begin + s.m - 1) / s.m;
  const long long batch = u / s.n;
  const long long n0 = u - batch * s.n;
  const long long n1 = s.n - n0 < last - u ? s.n : n0 + (last - u);
  const auto ao = gpuos::device::MakeMatmulOperand(a, s, batch);
  const auto bo = gpuos::device::MakeMatmulOperand(b, s, batch);
  const long long k_stride = bo.row_stride < 0 ? -bo.row_stride : bo.row_stride;
  const long long n_stride = bo.col_stride < 0 ? -bo.col_stride : bo.col_stride;
  MatmulFewRowsLayout l = {};
  l.teams = 8;
  l.lanes = 32;
  if (chooser == 0) {
    l = gpuos::device::ChooseMatmulFewRowsLayout(n1 - n0, s.k, s.m, k_stride <= n_stride, 8,
                                                 static_cast<int>(sizeof(float)));
  } else if (chooser == 1) {
    l = OldChooseLayout(n1 - n0, s.k, s.m, k_stride <= n_stride, 8,
                        static_cast<int>(sizeof(float)));
  }
  const auto role = gpuos::device::MakeMatmulFewRowsRole(l, ctx.thread_index());
  if (role.team + l.cols + ao.base == -12345) *sink = 1;  // keep the work
}

__device__ __noinline__ void RunMatmulCalled(const OpCall& call) { RunMatmul(call); }

__device__ void (*g_indirect)(const OpCall&) = RunMatmulCalled;

__device__ void Describe(TensorDesc* d, const float* data, long long rows, long long cols,
                         long long row_stride, long long col_stride) {
  probe::DescribeF32(d, data, {rows, cols}, {row_stride, col_stride});
}

// out[m, n] = x[m, :] . w[n, :] for n in the tile [0, cols) (items m * N).
__global__ void __launch_bounds__(kWorkerThreads)
    Probe(const float* x, const float* w, float* out, long long rows, long long cols, int mode,
          unsigned long long* ns) {
  __shared__ __align__(16) unsigned char scratch[kWorkerScratchBytes];
  __shared__ __align__(16) TensorDesc descs[3];
  __shared__ __align__(16) TaskDesc task;
  if (threadIdx.x == 0) {
    Describe(&descs[0], x, rows, kK, kK, 1);
    Describe(&descs[1], w, kK, kN, 1, kK);  // w^T: [K, N] view of a [N, K] weight
    Describe(&descs[2], out, rows, kN, kN, 1);
    task = TaskDesc{};
    task.num_tensors = 3;
    task.begin = 0;
    task.end = rows * cols;  // the units (columns) whose first element lies here
    for (int k = 0; k < 3; ++k) task.tensors[k] = k;
  }
  __syncthreads();
  OpCall call{&task, descs, scratch, kWorkerScratchBytes, 3, nullptr};
  void (*fn)(const OpCall&) = g_indirect;
  probe::TimeCalls(ns, kReps, [&]() {
    if (mode == 1) {
      fn(call);
    } else if (mode == 0) {
      RunMatmul(call);
    } else {
      RunLayout(call, mode - 2, reinterpret_cast<int*>(out));
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  // --carveout P: the kernel's preferred shared-memory carveout in percent
  // (cudaFuncAttributePreferredSharedMemoryCarveout; 0 = the most L1), to see
  // whether the indirect call's register saves stay in L1. Default: the
  // driver's choice.
  int carveout = -1;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--carveout") carveout = std::atoi(argv[i + 1]);
  }
  if (carveout >= 0 && cudaFuncSetAttribute(Probe, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            carveout) != cudaSuccess) {
    std::printf("FAILED: cudaFuncSetAttribute: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  float *x, *w, *out;
  unsigned long long* ns;
  cudaMalloc(&x, 16 * kK * sizeof(float));
  cudaMalloc(&w, kN * kK * sizeof(float));
  cudaMalloc(&out, 16 * kN * sizeof(float));
  cudaMalloc(&ns, kReps * sizeof(unsigned long long));
  cudaMemset(x, 0, 16 * kK * sizeof(float));
  cudaMemset(w, 0, kN * kK * sizeof(float));
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("{\"device\": \"%s\", \"carveout\": %d, \"k\": %lld, \"n\": %lld, \"cases\": [\n",
              prop.name, carveout, kK, kN);
  bool first = true;
  for (long long rows : {1LL, 4LL, 8LL}) {
    for (long long cols : {29LL, 64LL, 256LL}) {
      for (int mode : {0, 1, 2, 3, 4}) {
        Probe<<<1, kWorkerThreads>>>(x, w, out, rows, cols, mode, ns);
        unsigned long long median = 0, cold = 0;
        if (!probe::CollectTimes(ns, kReps, 4, &median, &cold)) return 1;
        std::printf(
            "%s {\"rows\": %lld, \"cols\": %lld, \"call\": \"%s\", \"median_ns\": %llu, "
            "\"first_ns\": %llu}\n",
            first ? " " : ",", rows, cols, kModes[mode], median, cold);
        first = false;
      }
    }
  }
  unsigned long long* mismatches;
  cudaMalloc(&mismatches, sizeof(unsigned long long));
  cudaMemset(mismatches, 0, sizeof(unsigned long long));
  CompareChoosers<<<64, 256>>>(mismatches);
  unsigned long long count = 0;
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("FAILED: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  cudaMemcpy(&count, mismatches, sizeof(count), cudaMemcpyDeviceToHost);
  std::printf("], \"layout_mismatches\": %llu}\n", count);
  return count == 0 ? 0 : 1;
}
