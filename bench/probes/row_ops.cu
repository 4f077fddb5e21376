// Probe: what one layer_norm / softmax tile of a few 256-element rows costs by
// itself, outside the worker (a diagnostic, not a benchmark of record;
// bench/README.md, "Probes"). The task chain probe
// (frontends/pytorch/bench/task_chain_probe.py) puts a layer_norm tile of one
// 256-element row at 5.7 us and softmax at 4.1 us inside the persistent
// worker, repeated on the same block. This kernel runs the same device code
// (LayerNormRows / SoftmaxRows) in one block of kWorkerThreads threads:
//   direct    inlined into the kernel
//   indirect  through a function pointer, as the worker calls an operator
// and reports the median of kReps calls (globaltimer, ns) after warm-up.
//
//   nvcc -O3 -arch=sm_90 -rdc=true -std=c++17 -I device/include \
//     bench/probes/row_ops.cu device/src/indexing.cu -o /tmp/row_ops && /tmp/row_ops
#include <cuda_runtime.h>

#include <cstdio>

#include "gpuos/device/normalization.cuh"
#include "gpuos/device/softmax.cuh"
#include "probe_common.cuh"

using gpuos::device::kWorkerScratchBytes;
using gpuos::device::kWorkerThreads;
using gpuos::device::OpCall;
using gpuos::device::OpContext;
using gpuos::device::TaskDesc;
using gpuos::device::TensorDesc;

namespace {

constexpr int kReps = 64;
constexpr long long kN = 256;
const char* const kOps[] = {"layer_norm", "softmax", "empty"};
const char* const kModes[] = {"direct", "indirect"};

__device__ __forceinline__ void LayerNorm(const OpCall& call) {
  OpContext ctx(call, 3);
  gpuos::device::LayerNormRows<float>(ctx, ctx.input<float>(0), ctx.input<float>(1),
                                      ctx.input<float>(2), ctx.output<float>(0), 1e-5, 0);
}
__device__ __forceinline__ void Softmax(const OpCall& call) {
  OpContext ctx(call, 1);
  gpuos::device::SoftmaxRows<float, false>(ctx, ctx.input<float>(0), ctx.output<float>(0));
}
__device__ __noinline__ void LayerNormCalled(const OpCall& call) { LayerNorm(call); }
__device__ __noinline__ void SoftmaxCalled(const OpCall& call) { Softmax(call); }
__device__ __noinline__ void EmptyCalled(const OpCall& call) {
  if (call.num_tensors == 12345) __syncthreads();
}
__device__ void (*g_layer_norm)(const OpCall&) = LayerNormCalled;
__device__ void (*g_softmax)(const OpCall&) = SoftmaxCalled;
__device__ void (*g_empty)(const OpCall&) = EmptyCalled;

__device__ void Describe(TensorDesc* d, const float* data, int rank, long long rows) {
  if (rank == 1) {
    probe::DescribeF32(d, data, {kN}, {1});
  } else {
    probe::DescribeF32(d, data, {rows, kN}, {kN, 1});
  }
}

__global__ void __launch_bounds__(kWorkerThreads)
    Probe(const float* x, const float* w, const float* b, float* out, long long rows, int op,
          int mode, unsigned long long* ns) {
  __shared__ __align__(16) unsigned char scratch[kWorkerScratchBytes];
  __shared__ __align__(16) TensorDesc descs[4];
  __shared__ __align__(16) TaskDesc task;
  if (threadIdx.x == 0) {
    Describe(&descs[0], x, 2, rows);
    if (op == 0) {
      Describe(&descs[1], w, 1, rows);
      Describe(&descs[2], b, 1, rows);
      Describe(&descs[3], out, 2, rows);
    } else {
      Describe(&descs[1], out, 2, rows);
    }
    task = TaskDesc{};
    task.num_tensors = op == 0 ? 4 : 2;
    task.begin = 0;
    task.end = rows * kN;
    for (int k = 0; k < 4; ++k) task.tensors[k] = k;
  }
  __syncthreads();
  OpCall call{&task, descs, scratch, kWorkerScratchBytes, task.num_tensors, nullptr};
  void (*fn)(const OpCall&) = op == 0 ? g_layer_norm : (op == 1 ? g_softmax : g_empty);
  probe::TimeCalls(ns, kReps, [&]() {
    if (mode == 1) {
      fn(call);
    } else if (op == 0) {
      LayerNorm(call);
    } else if (op == 1) {
      Softmax(call);
    }
  });
}

}  // namespace

int main() {
  float *x, *w, *b, *out;
  unsigned long long* ns;
  cudaMalloc(&x, 64 * kN * sizeof(float));
  cudaMalloc(&w, kN * sizeof(float));
  cudaMalloc(&b, kN * sizeof(float));
  cudaMalloc(&out, 64 * kN * sizeof(float));
  cudaMalloc(&ns, kReps * sizeof(unsigned long long));
  cudaMemset(x, 0, 64 * kN * sizeof(float));
  cudaMemset(w, 0, kN * sizeof(float));
  cudaMemset(b, 0, kN * sizeof(float));
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("{\"device\": \"%s\", \"n\": %lld, \"cases\": [\n", prop.name, kN);
  bool first = true;
  for (int op : {0, 1, 2}) {
    for (long long rows : {1LL, 8LL, 64LL}) {
      for (int mode : {0, 1}) {
        if (op == 2 && (mode == 0 || rows != 1)) continue;
        Probe<<<1, kWorkerThreads>>>(x, w, b, out, rows, op, mode, ns);
        unsigned long long median = 0, cold = 0;
        if (!probe::CollectTimes(ns, kReps, 4, &median, &cold)) return 1;
        std::printf(
            "%s {\"op\": \"%s\", \"rows\": %lld, \"call\": \"%s\", \"median_ns\": %llu, "
            "\"first_ns\": %llu}\n",
            first ? " " : ",", kOps[op], rows, kModes[mode], median, cold);
        first = false;
      }
    }
  }
  std::printf("]}\n");
  return 0;
}
