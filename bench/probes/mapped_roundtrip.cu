// Probe: what a host -> running kernel -> host round trip through mapped
// pinned memory is made of (a diagnostic for docs/runtime.md, "Publishing and
// waiting through PyTorch's stream (session 33, measured, not built)":
// stream_publish_latency.cu's `mapped` mode took 8.8-9.2 us on the H200,
// device-facts.md's doorbell 2.3 us).
//
// Warp 0 of block 0 answers step after step (lane 0 polls and acks); step
// s's mode is (s - 1) % kModes (modes interleaved). The host writes an
// eight-word record, then the tail = s; the kernel polls the tail, and
// writes ack = s after a __threadfence_system:
//   volatile_fence       volatile poll, nothing else (the doorbell of
//                        ../shared/probes/epoch_switch.cpp)
//   acquire_fence        ld.acquire.sys poll (the runtime's tail)
//   flags_acquire_fence  a volatile load of another word issued before each
//                        ld.acquire.sys poll (TryClaimSubmission's flags)
//   record1              acquire poll, then one volatile load of the record,
//                        its value stored into mapped memory
//   record8              the same with the record's eight words, one after
//                        the other by lane 0 (stream_publish_latency's
//                        `mapped`), their sum stored into mapped memory
//   record8_device_sum   the same, the sum stored into device memory
//   record8_v2           lane 0 reads the record with four 16-byte loads
//   record8_lanes        lanes 0-7 read one word each, summed by shuffles
// `--grid all` puts one block per SM (the others poll device memory, as idle
// workers do); `--grid 1` launches block 0 only. Host: from just before the
// record's write until it reads the ack (spinning on mapped memory, as
// Future::Wait does); medians of --reps steps per mode after 200 warm-up
// steps, in us; JSON on stdout.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/mapped_roundtrip.cu -o /tmp/roundtrip && \
//     GPUOS_COMMIT=<sha> /tmp/roundtrip --grid all && GPUOS_COMMIT=<sha> /tmp/roundtrip --grid 1
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "host_timing.h"

namespace {

constexpr int kModes = 8;
constexpr int kRecordWords = 8;
const char* const kModeNames[kModes] = {"volatile_fence", "acquire_fence", "flags_acquire_fence",
                                        "record1",        "record8",       "record8_device_sum",
                                        "record8_v2",     "record8_lanes"};
enum Mode {
  kVolatileFence,
  kAcquireFence,
  kFlagsAcquireFence,
  kRecord1,
  kRecord8,
  kRecord8DeviceSum,
  kRecord8V2,
  kRecord8Lanes
};

struct Words {
  unsigned long long tail;
  unsigned long long flags;
  unsigned long long record[kRecordWords];
};
struct Ack {
  unsigned long long step;
  unsigned long long sum;
};

__device__ unsigned long long LoadAcquireSys(const volatile unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// The record's sum as `mode` reads it; lane 0's value counts.
__device__ unsigned long long ReadRecord(const volatile Words* words, int mode, int lane) {
  unsigned long long sum = 0;
  if (mode == kRecord1) {
    if (lane == 0) sum = words->record[0];
  } else if (mode == kRecord8 || mode == kRecord8DeviceSum) {
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < kRecordWords; ++k) sum += words->record[k];
    }
  } else if (mode == kRecord8V2) {
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < kRecordWords; k += 2) {
        unsigned long long a, b;
        asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                     : "=l"(a), "=l"(b)
                     : "l"(&words->record[k])
                     : "memory");
        sum += a + b;
      }
    }
  } else {
    if (lane < kRecordWords) sum = words->record[lane];
#pragma unroll
    for (int d = 4; d > 0; d /= 2) sum += __shfl_down_sync(0xffffffffu, sum, d);
  }
  return sum;
}

__global__ void __launch_bounds__(256, 1)
    Answer(const volatile Words* words, volatile Ack* ack, volatile unsigned long long* device_sum,
           volatile unsigned long long* finished, unsigned long long steps) {
  __shared__ int hold[8192];  // 32 KiB of shared memory per block, like a worker block
  hold[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (blockIdx.x != 0 || threadIdx.x >= 32) {
    if (threadIdx.x == 32) {
      while (*finished < steps) __nanosleep(1000);
    }
    if (hold[threadIdx.x] != static_cast<int>(threadIdx.x)) *finished = 0;
    return;
  }
  const int lane = static_cast<int>(threadIdx.x);
  for (unsigned long long s = 1; s <= steps; ++s) {
    const int mode = static_cast<int>((s - 1) % kModes);
    if (lane == 0) {
      if (mode == kVolatileFence) {
        while (words->tail < s) {
        }
      } else if (mode == kFlagsAcquireFence) {
        unsigned long long tail;
        do {
          (void)words->flags;
          tail = LoadAcquireSys(&words->tail);
        } while (tail < s);
      } else {
        while (LoadAcquireSys(&words->tail) < s) {
        }
      }
    }
    __syncwarp();
    if (mode >= kRecord1) {
      const unsigned long long sum = ReadRecord(words, mode, lane);
      if (lane == 0) {
        if (mode == kRecord8DeviceSum) {
          *device_sum = sum;
        } else {
          ack->sum = sum;
        }
      }
    }
    if (lane == 0) {
      __threadfence_system();
      ack->step = s;
    }
    __syncwarp();
  }
  if (lane == 0) *finished = steps;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 2000;
  bool all_sms = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--reps") == 0) {
      reps = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--grid") == 0) {
      all_sms = std::string(argv[i + 1]) != "1";
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--grid all|1]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1) {
    std::fprintf(stderr, "--reps wants a positive count\n");
    return 2;
  }
  const int warm = 200;
  const unsigned long long steps = static_cast<unsigned long long>(warm + reps) * kModes;

  CHECK_CUDA(cudaSetDevice(0));
  Words* words_dev = nullptr;
  Ack* ack_dev = nullptr;
  Words* words = probe::MappedZeroed(&words_dev);
  Ack* ack = probe::MappedZeroed(&ack_dev);
  unsigned long long* finished = nullptr;
  unsigned long long* device_sum = nullptr;
  CHECK_CUDA(cudaMalloc(&finished, sizeof(unsigned long long)));
  CHECK_CUDA(cudaMalloc(&device_sum, sizeof(unsigned long long)));
  CHECK_CUDA(cudaMemset(finished, 0, sizeof(unsigned long long)));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaDeviceSynchronize());
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Answer<<<all_sms ? sms : 1, 256, 0, stream>>>(words_dev, ack_dev, device_sum, finished, steps);
  CHECK_CUDA(cudaGetLastError());

  volatile Words* host_words = words;
  volatile Ack* host_ack = ack;
  std::vector<double> roundtrip[kModes];
  unsigned long long step = 0;
  bool wrong = false;
  for (int r = 0; r < warm + reps; ++r) {
    for (int m = 0; m < kModes; ++m) {
      ++step;
      const double t0 = probe::NowUs();
      for (int k = 0; k < kRecordWords; ++k) host_words->record[k] = step * kRecordWords + k;
      std::atomic_thread_fence(std::memory_order_release);
      host_words->tail = step;
      while (host_ack->step < step) {
      }
      const double t1 = probe::NowUs();
      std::atomic_thread_fence(std::memory_order_acquire);
      if (m >= kRecord1 && m != kRecord8DeviceSum) {
        unsigned long long want = 0;
        for (int k = 0; k < (m == kRecord1 ? 1 : kRecordWords); ++k)
          want += step * kRecordWords + k;
        if (host_ack->sum != want) wrong = true;
      }
      if (r >= warm) roundtrip[m].push_back(t1 - t0);
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));

  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const char* commit = std::getenv("GPUOS_COMMIT");
  std::printf(
      "{\"probe\": \"mapped_roundtrip\", \"commit\": \"%s\", \"device\": \"%s\", \"grid\": %d, "
      "\"reps\": %d, \"records_read_right\": %s,\n",
      commit != nullptr ? commit : "unknown", prop.name, all_sms ? sms : 1, reps,
      wrong ? "false" : "true");
  for (int m = 0; m < kModes; ++m) {
    std::printf("  \"%s_us\": %.3f%s\n", kModeNames[m], probe::Median(roundtrip[m]),
                m + 1 < kModes ? "," : "");
  }
  std::printf("}\n");
  return wrong ? 1 : 0;
}
