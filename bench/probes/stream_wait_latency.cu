// Probe: how long the host waits for a result that a *running* kernel
// writes, by each way the PyTorch frontend could wait for it (a diagnostic,
// not a benchmark of record; bench/README.md, "Probes").
//
// One block spins on a "go" word in mapped host memory; for step i the host
// writes go = i and the kernel answers, --delay-us after it saw go (default
// 0; a compiled call's device time, during which the host's calls below
// overlap the device's work), by writing done = i to a word in mapped host
// memory and to one in device memory. The host times, from its write of go
// until it knows the answer is there:
//   host_poll       spinning on the mapped done word (the runtime's Future::Wait)
//   host_poll_sync  the same, then cuStreamSynchronize of the (idle) legacy
//                   default stream (a host-waited compiled call and the
//                   benchmark's synchronize of PyTorch's default stream)
//   wait_host_word  cuStreamWaitValue64 on the mapped word, then
//                   cuStreamSynchronize of that stream (what Program::Launch
//                   does without the host wait)
//   wait_dev_word   the same on the device-memory word
//   kernel_dev_word a one-warp kernel launched on that stream that spins on
//                   the device-memory word, then cuStreamSynchronize
//   kernel_dev_word_legacy  the same on the legacy default stream
//   kernel_host_word_legacy the same, the kernel spinning on the mapped word
// and, separately, what the host calls cost by themselves on an idle stream:
//   api_wait_value  cuStreamWaitValue64 of a satisfied value (enqueue only)
//   api_query       cuStreamQuery of an idle stream
//   api_sync_idle   cuStreamSynchronize of an idle stream
// Medians of --reps steps (default 2000) after 200 warm-up steps, in us.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/stream_wait_latency.cu -lcuda \
//     -o /tmp/wait_probe && /tmp/wait_probe
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "host_timing.h"

namespace {

__device__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One block per SM, like the worker; block 0 answers, the others only hold
// their SM until the last step (so a waiting kernel must fit beside them).
__global__ void __launch_bounds__(256, 1)
    Answer(const volatile unsigned long long* go, volatile unsigned long long* done_host,
           volatile unsigned long long* done_dev, unsigned long long steps,
           unsigned long long delay_ns) {
  __shared__ int hold[8192];  // 32 KiB of static shared memory per block, like a worker block
  hold[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (blockIdx.x != 0 || threadIdx.x != 0) {
    if (threadIdx.x == 0) {  // polls device memory: PCIe polls by 131 blocks would slow the rest
      while (*done_dev < steps) __nanosleep(1000);
    }
    __syncthreads();
    if (hold[threadIdx.x] != static_cast<int>(threadIdx.x)) *done_dev = 0;
    return;
  }
  for (unsigned long long i = 1; i <= steps; ++i) {
    while (*go < i) __nanosleep(32);
    if (delay_ns != 0) {
      const unsigned long long start = GlobalTimerNs();
      while (GlobalTimerNs() - start < delay_ns) {
      }
    }
    *done_dev = i;
    *done_host = i;
    __threadfence_system();
  }
}

// The stream waits for `word >= value` by running this (one warp).
__global__ void WaitWord(const volatile unsigned long long* word, unsigned long long value) {
  if (threadIdx.x == 0) {
    while (*word < value) __nanosleep(64);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 2000;
  double delay_us = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--delay-us") == 0) delay_us = std::atof(argv[i + 1]);
  }
  if (reps < 1 || delay_us < 0 || delay_us > 1000) {
    std::fprintf(stderr, "usage: %s [--reps N>0] [--delay-us 0..1000]\n", argv[0]);
    return 2;
  }
  const int warm = 200;
  enum Mode {
    kHostPoll,
    kHostPollSync,
    kWaitHostWord,
    kWaitDevWord,
    kKernelDevWord,
    kKernelDevWordLegacy,
    kKernelHostWordLegacy,
    kModes
  };
  const char* modes[kModes] = {
      "host_poll",       "host_poll_sync",         "wait_host_word",         "wait_dev_word",
      "kernel_dev_word", "kernel_dev_word_legacy", "kernel_host_word_legacy"};
  const unsigned long long steps = static_cast<unsigned long long>(warm + reps) * kModes;

  CHECK_CUDA(cudaSetDevice(0));
  unsigned long long* host_words = nullptr;  // [0] go, [1] done
  CHECK_CUDA(cudaHostAlloc(&host_words, 2 * sizeof(unsigned long long), cudaHostAllocMapped));
  host_words[0] = 0;
  host_words[1] = 0;
  unsigned long long* dev_host_words = nullptr;
  CHECK_CUDA(cudaHostGetDevicePointer(&dev_host_words, host_words, 0));
  unsigned long long* done_dev = nullptr;
  CHECK_CUDA(cudaMalloc(&done_dev, sizeof(unsigned long long)));
  CHECK_CUDA(cudaMemset(done_dev, 0, sizeof(unsigned long long)));
  cudaStream_t worker_stream;
  cudaStream_t waiter;
  CHECK_CUDA(cudaStreamCreateWithFlags(&worker_stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&waiter, cudaStreamNonBlocking));
  CHECK_CUDA(cudaDeviceSynchronize());
  // Load WaitWord's module now: under lazy loading its first launch would load
  // it, and a module load waits for every running kernel (Answer) to exit.
  cudaFuncAttributes wait_word_attributes;
  CHECK_CUDA(cudaFuncGetAttributes(&wait_word_attributes, WaitWord));
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Answer<<<sms, 256, 0, worker_stream>>>(dev_host_words, dev_host_words + 1, done_dev, steps,
                                         static_cast<unsigned long long>(delay_us * 1e3));
  CHECK_CUDA(cudaGetLastError());

  volatile unsigned long long* go = host_words;
  volatile unsigned long long* done_host = host_words + 1;
  std::vector<double> samples[kModes];
  unsigned long long step = 0;
  for (int r = 0; r < warm + reps; ++r) {
    for (int m = 0; m < kModes; ++m) {
      ++step;
      const double t0 = probe::NowUs();
      std::atomic_thread_fence(std::memory_order_seq_cst);
      *go = step;
      if (m == kHostPoll || m == kHostPollSync) {
        while (*done_host < step) {
        }
        if (m == kHostPollSync) CHECK_CU(cuStreamSynchronize(CU_STREAM_LEGACY));
      } else if (m >= kKernelDevWord) {
        const cudaStream_t stream = m == kKernelDevWord ? waiter : cudaStreamLegacy;
        WaitWord<<<1, 32, 0, stream>>>(m == kKernelHostWordLegacy ? dev_host_words + 1 : done_dev,
                                       step);
        CHECK_CU(cuStreamSynchronize(reinterpret_cast<CUstream>(stream)));
      } else {
        const CUdeviceptr word = m == kWaitHostWord
                                     ? reinterpret_cast<CUdeviceptr>(dev_host_words + 1)
                                     : reinterpret_cast<CUdeviceptr>(done_dev);
        CHECK_CU(cuStreamWaitValue64(reinterpret_cast<CUstream>(waiter), word, step,
                                     CU_STREAM_WAIT_VALUE_GEQ));
        CHECK_CU(cuStreamSynchronize(reinterpret_cast<CUstream>(waiter)));
      }
      const double t1 = probe::NowUs();
      if (r >= warm) samples[m].push_back(t1 - t0);
      while (*done_host < step) {
      }
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(worker_stream));

  std::vector<double> api_wait, api_query, api_sync, api_launch;
  for (int r = 0; r < warm + reps; ++r) {
    double t0 = probe::NowUs();
    CHECK_CU(cuStreamWaitValue64(reinterpret_cast<CUstream>(waiter),
                                 reinterpret_cast<CUdeviceptr>(done_dev), 1,
                                 CU_STREAM_WAIT_VALUE_GEQ));
    double t1 = probe::NowUs();
    CHECK_CU(cuStreamSynchronize(reinterpret_cast<CUstream>(waiter)));
    double t2 = probe::NowUs();
    CHECK_CU(cuStreamQuery(reinterpret_cast<CUstream>(waiter)));
    double t3 = probe::NowUs();
    CHECK_CU(cuStreamSynchronize(reinterpret_cast<CUstream>(waiter)));
    double t4 = probe::NowUs();
    WaitWord<<<1, 32, 0, waiter>>>(done_dev, 1);
    double t5 = probe::NowUs();
    CHECK_CU(cuStreamSynchronize(reinterpret_cast<CUstream>(waiter)));
    if (r >= warm) {
      api_launch.push_back(t5 - t4);
      api_wait.push_back(t1 - t0);
      api_query.push_back(t3 - t2);
      api_sync.push_back(t4 - t3);
    }
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const char* commit = std::getenv("GPUOS_COMMIT");
  std::printf(
      "{\"probe\": \"stream_wait_latency\", \"commit\": \"%s\", \"device\": \"%s\", "
      "\"reps\": %d, \"delay_us\": %.1f,\n",
      commit != nullptr ? commit : "unknown", prop.name, reps, delay_us);
  for (int m = 0; m < kModes; ++m) {
    std::printf("  \"%s_us\": %.3f,\n", modes[m], probe::Median(samples[m]));
  }
  std::printf(
      "  \"api_wait_value_us\": %.3f,\n  \"api_launch_wait_kernel_us\": %.3f,\n"
      "  \"api_query_us\": %.3f,\n  \"api_sync_idle_us\": %.3f\n}\n",
      probe::Median(api_wait), probe::Median(api_launch), probe::Median(api_query),
      probe::Median(api_sync));
  return 0;
}
