// Probe: how soon a *running* kernel sees a small submission, by each way
// the host could publish it (a diagnostic for docs/runtime.md, "Speculative
// slot reads (session 32, not kept)": publishing a PyTorch call through
// PyTorch's own stream; bench/README.md, "Probes").
//
// One block per SM runs for the whole probe (like the worker); block 0,
// thread 0, answers. For step i the host publishes a 64-byte record (eight
// words, word k = i * 8 + k) and a tail = i, and the kernel, once it sees
// the tail, reads the record and writes ack = i and the record's sum into
// mapped host memory. The host times, from just before it publishes until
// it reads the ack (spinning on mapped memory, as Future::Wait does):
//   mapped        record and tail written to mapped host memory (the ring
//                 slot's way today): the kernel polls the tail over PCIe,
//                 then reads the record (a second round trip)
//   query_mapped  cuStreamQuery of the legacy default stream first (the
//                 PyTorch frontend's ordering with GPUOS_TORCH_OPEN_LATER=0),
//                 then as `mapped`
//   memop_legacy  one cuStreamBatchMemOp on the legacy default stream (what
//                 PyTorch's default stream is) writing the record's words and
//                 then the tail into device memory: the stream orders it after
//                 its earlier work, no query; the kernel polls the tail in L2
//   memop_stream  the same on a stream created non-blocking
// and what the host's part costs by itself (the writes; the query and the
// writes; the batch's enqueue). Medians of --reps steps (default 2000) per
// mode, after 200 warm-up steps, modes interleaved, in us; JSON on stdout.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/stream_publish_latency.cu -lcuda \
//     -o /tmp/publish_probe && GPUOS_COMMIT=<sha> /tmp/publish_probe
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "host_timing.h"

namespace {

constexpr int kModes = 4;
constexpr int kRecordWords = 8;
const char* const kModeNames[kModes] = {"mapped", "query_mapped", "memop_legacy", "memop_stream"};
__host__ __device__ bool MemopMode(int mode) { return mode >= 2; }

struct Words {
  unsigned long long tail;
  unsigned long long record[kRecordWords];
};
struct Ack {
  unsigned long long step;
  unsigned long long sum;
};

// Block 0, thread 0 answers step after step; step s's mode is (s - 1) %
// kModes, so it polls the one tail that step is published to. The other
// blocks hold their SMs, polling device memory only.
__global__ void __launch_bounds__(256, 1)
    Answer(const volatile Words* mapped, const volatile Words* device, volatile Ack* ack,
           volatile unsigned long long* finished, unsigned long long steps) {
  __shared__ int hold[8192];  // 32 KiB of shared memory per block, like a worker block
  hold[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (blockIdx.x != 0 || threadIdx.x != 0) {
    if (threadIdx.x == 0) {
      while (*finished < steps) __nanosleep(1000);
    }
    __syncthreads();
    if (hold[threadIdx.x] != static_cast<int>(threadIdx.x)) *finished = 0;
    return;
  }
  for (unsigned long long s = 1; s <= steps; ++s) {
    const volatile Words* words = MemopMode(static_cast<int>((s - 1) % kModes)) ? device : mapped;
    unsigned long long tail;
    do {
      asm volatile("ld.acquire.sys.global.u64 %0, [%1];"
                   : "=l"(tail)
                   : "l"(&words->tail)
                   : "memory");
    } while (tail < s);
    unsigned long long sum = 0;
#pragma unroll
    for (int k = 0; k < kRecordWords; ++k) sum += words->record[k];
    ack->sum = sum;
    __threadfence_system();
    ack->step = s;
  }
  *finished = steps;
}

unsigned long long RecordWord(unsigned long long step, int k) { return step * kRecordWords + k; }

}  // namespace

int main(int argc, char** argv) {
  const int reps = probe::RepsOption(argc, argv, 2000);
  const int warm = 200;
  const unsigned long long steps = static_cast<unsigned long long>(warm + reps) * kModes;

  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));  // the primary context, current for the driver calls below
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));
  int memops = 0;
  CHECK_CU(
      cuDeviceGetAttribute(&memops, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device));
  if (memops == 0) {
    std::fprintf(stderr, "64-bit stream memory operations are not supported here\n");
    return 1;
  }
  // Mapped host memory: the mapped words, then the ack.
  Words* mapped_dev = nullptr;
  Ack* ack_dev = nullptr;
  Words* mapped = probe::MappedZeroed(&mapped_dev);
  Ack* ack = probe::MappedZeroed(&ack_dev);
  Words* device_words = nullptr;
  unsigned long long* finished = nullptr;
  CHECK_CUDA(cudaMalloc(&device_words, sizeof(Words)));
  CHECK_CUDA(cudaMalloc(&finished, sizeof(unsigned long long)));
  CHECK_CUDA(cudaMemset(device_words, 0, sizeof(Words)));
  CHECK_CUDA(cudaMemset(finished, 0, sizeof(unsigned long long)));
  cudaStream_t worker_stream;
  cudaStream_t other;
  CHECK_CUDA(cudaStreamCreateWithFlags(&worker_stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  CHECK_CUDA(cudaDeviceSynchronize());
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Answer<<<sms, 256, 0, worker_stream>>>(mapped_dev, device_words, ack_dev, finished, steps);
  CHECK_CUDA(cudaGetLastError());

  // The batch: the record's words, then the tail; each write fenced after
  // the stream's earlier work and writes (CU_STREAM_WRITE_VALUE_DEFAULT).
  CUstreamBatchMemOpParams batch[kRecordWords + 1];
  std::memset(batch, 0, sizeof(batch));
  const CUdeviceptr base = reinterpret_cast<CUdeviceptr>(device_words);
  for (int k = 0; k <= kRecordWords; ++k) {
    batch[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    batch[k].writeValue.address =
        k < kRecordWords ? base + offsetof(Words, record) + k * sizeof(unsigned long long)
                         : base + offsetof(Words, tail);
    batch[k].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  }

  volatile Words* host_words = mapped;
  volatile Ack* host_ack = ack;
  std::vector<double> roundtrip[kModes];
  std::vector<double> host_part[kModes];
  unsigned long long step = 0;
  bool wrong = false;
  for (int r = 0; r < warm + reps; ++r) {
    for (int m = 0; m < kModes; ++m) {
      ++step;
      const double t0 = probe::NowUs();
      if (m == 1) CHECK_CU(cuStreamQuery(CU_STREAM_LEGACY));
      if (!MemopMode(m)) {
        for (int k = 0; k < kRecordWords; ++k) host_words->record[k] = RecordWord(step, k);
        std::atomic_thread_fence(std::memory_order_release);
        host_words->tail = step;
      } else {
        for (int k = 0; k < kRecordWords; ++k) batch[k].writeValue.value64 = RecordWord(step, k);
        batch[kRecordWords].writeValue.value64 = step;
        const CUstream stream = m == 2 ? CU_STREAM_LEGACY : reinterpret_cast<CUstream>(other);
        CHECK_CU(cuStreamBatchMemOp(stream, kRecordWords + 1, batch, 0));
      }
      const double t1 = probe::NowUs();
      while (host_ack->step < step) {
      }
      const double t2 = probe::NowUs();
      std::atomic_thread_fence(std::memory_order_acquire);
      unsigned long long want = 0;
      for (int k = 0; k < kRecordWords; ++k) want += RecordWord(step, k);
      if (host_ack->sum != want) wrong = true;
      if (r >= warm) {
        roundtrip[m].push_back(t2 - t0);
        host_part[m].push_back(t1 - t0);
      }
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(worker_stream));
  CHECK_CUDA(cudaDeviceSynchronize());

  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf(
      "{\"probe\": \"stream_publish_latency\", \"commit\": \"%s\", \"device\": \"%s\", "
      "\"reps\": %d, \"records_read_right\": %s,\n",
      probe::CommitOrUnknown(), prop.name, reps, wrong ? "false" : "true");
  for (int m = 0; m < kModes; ++m) {
    std::printf("  \"%s_us\": %.3f, \"%s_host_part_us\": %.3f%s\n", kModeNames[m],
                probe::Median(roundtrip[m]), kModeNames[m], probe::Median(host_part[m]),
                m + 1 < kModes ? "," : "");
  }
  std::printf("}\n");
  return wrong ? 1 : 0;
}
