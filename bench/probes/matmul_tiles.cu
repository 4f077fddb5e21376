// Probe: what one task tile of attention_small's scores product costs by
// itself, outside the worker (a diagnostic, not a benchmark of record;
// bench/README.md, "Probes"). The PyTorch task profile puts a tile of
// attention_small seq 128's bmm / baddbmm ([8, 128, 64] x [8, 64, 128], the
// second a transposed view, 48 tiles) at about 22 us inside the worker. This
// kernel runs gpuos::device::Matmul<float> (the 32 x 32 SIMT tiles of
// matmul.cuh) in one block of kWorkerThreads threads on the work items of
// one such tile, inlined ("direct") and through a function pointer
// ("indirect"), and reports the median of kReps calls (globaltimer, ns).
//
//   nvcc -O3 -arch=sm_90 -rdc=true -std=c++17 -I device/include \
//     bench/probes/matmul_tiles.cu device/src/indexing.cu -o /tmp/mt && /tmp/mt
#include <cuda_runtime.h>

#include <cstdio>

#include "gpuos/device/matmul.cuh"
#include "probe_common.cuh"

using gpuos::device::kWorkerScratchBytes;
using gpuos::device::kWorkerThreads;
using gpuos::device::OpCall;
using gpuos::device::OpContext;
using gpuos::device::TaskDesc;
using gpuos::device::TensorDesc;

namespace {

constexpr int kReps = 32;
constexpr long long kBatch = 8, kM = 128, kK = 64, kN = 128;
const char* const kModes[] = {"direct", "indirect"};

__device__ __forceinline__ void RunMatmul(const OpCall& call) {
  OpContext ctx(call, 2);
  gpuos::device::Matmul<float>(ctx, ctx.input<float>(0), ctx.input<float>(1), ctx.output<float>(0),
                               3, 1);
}
__device__ __noinline__ void RunMatmulCalled(const OpCall& call) { RunMatmul(call); }
__device__ void (*g_indirect)(const OpCall&) = RunMatmulCalled;

__device__ void Describe(TensorDesc* d, const float* data, long long rows, long long cols,
                         long long batch_stride, long long row_stride, long long col_stride) {
  probe::DescribeF32(d, data, {kBatch, rows, cols}, {batch_stride, row_stride, col_stride});
}

__global__ void __launch_bounds__(kWorkerThreads)
    Probe(const float* q, const float* k, float* out, long long begin, long long end, int mode,
          unsigned long long* ns) {
  __shared__ __align__(16) unsigned char scratch[kWorkerScratchBytes];
  __shared__ __align__(16) TensorDesc descs[3];
  __shared__ __align__(16) TaskDesc task;
  if (threadIdx.x == 0) {
    Describe(&descs[0], q, kM, kK, kM * kK, kK, 1);  // q [8, 128, 64]
    Describe(&descs[1], k, kK, kN, kN * kK, 1, kK);  // k^T: [8, 64, 128] view of [8, 128, 64]
    Describe(&descs[2], out, kM, kN, kM * kN, kN, 1);
    task = TaskDesc{};
    task.num_tensors = 3;
    task.begin = begin;
    task.end = end;
    for (int i = 0; i < 3; ++i) task.tensors[i] = i;
  }
  __syncthreads();
  OpCall call{&task, descs, scratch, kWorkerScratchBytes, 3, nullptr};
  void (*fn)(const OpCall&) = g_indirect;
  probe::TimeCalls(ns, kReps, [&]() {
    if (mode == 1) {
      fn(call);
    } else {
      RunMatmul(call);
    }
  });
}

}  // namespace

int main() {
  float *q, *k, *out;
  unsigned long long* ns;
  cudaMalloc(&q, kBatch * kM * kK * sizeof(float));
  cudaMalloc(&k, kBatch * kN * kK * sizeof(float));
  cudaMalloc(&out, kBatch * kM * kN * sizeof(float));
  cudaMalloc(&ns, kReps * sizeof(unsigned long long));
  cudaMemset(q, 0, kBatch * kM * kK * sizeof(float));
  cudaMemset(k, 0, kBatch * kN * kK * sizeof(float));
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("{\"device\": \"%s\", \"shape\": \"[8, 128, 64] x [8, 64, 128]\", \"cases\": [\n",
              prop.name);
  const long long items = kBatch * kM * kN;
  bool first = true;
  for (long long tiles : {48LL, 128LL}) {
    for (int mode : {0, 1}) {
      const long long end = (items + tiles - 1) / tiles;
      Probe<<<1, kWorkerThreads>>>(q, k, out, 0, end, mode, ns);
      unsigned long long median = 0, cold = 0;
      if (!probe::CollectTimes(ns, kReps, 4, &median, &cold)) return 1;
      std::printf(
          "%s {\"task_tiles\": %lld, \"items\": %lld, \"call\": \"%s\", "
          "\"median_ns\": %llu, \"first_ns\": %llu}\n",
          first ? " " : ",", tiles, end, kModes[mode], median, cold);
      first = false;
    }
  }
  std::printf("]}\n");
  return 0;
}
