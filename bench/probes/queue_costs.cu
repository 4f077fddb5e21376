// Probe: what the persistent worker's queue steps cost one block by
// themselves (a diagnostic, not a benchmark of record; bench/README.md,
// "Probes"): the reads of mapped host memory that a claim and an admission
// make, the L2 round trips of its counters, and the fences before a count
// and before the completion word. Each row is the median of --reps timed
// repetitions (after 100 warm-up ones) in one 256-thread block, timed by
// thread 0 with clock64 between two barriers and converted with the SM clock
// measured against %globaltimer in the same launch, in ns:
//
//   host_read_16B_t0     thread 0 reads one 16-byte word of mapped host memory (ld.cv)
//   host_acquire_8B_t0   thread 0's ld.acquire.sys of an 8-byte host word (the tail's read)
//   host_read_<N>w       every thread reads its share of N 16-byte words (ld.cv) in a
//                        loop; slower than the straight-line loads of the _together and
//                        _and_last rows even at 16 words (2.2-2.5 us against 1.4-1.5), for
//                        reasons not known, so these rows are not quoted: Admit's pattern
//                        is host_read_512w_together
//   l2_load_t0           thread 0's ld.cg of a device word
//   l2_atomic_add_t0     thread 0's atomicAdd on a device word, its result used
//   l2_two_atomics_t0    two dependent atomicAdds (tiles_done, then remaining)
//   fence_gpu_after_store  every thread stores 64 bytes to device memory, then thread 0's
//                        __threadfence (what a tile's count waits for)
//   fence_sys_after_store  the same with __threadfence_system (the completion's fence)
//   fence_sys_store_host   __threadfence_system then a volatile store to host memory
//   fence_sys_idle       __threadfence_system with nothing stored before it
//   host_read_512w_together  the whole slot, each thread's two loads issued before
//                        either is used (Admit's pattern)
//   host_read_64w_and_last   the first 64 words and the slot's last word, one load a thread
//   fence_gpu_idle       __threadfence with nothing stored before it
//   fence_gpu_twice_after_store  fence_gpu_after_store with a second __threadfence after it
//   fence_acq_rel_after_store  fence_gpu_after_store with fence.acq_rel.gpu (MEMBAR.ALL.GPU)
//                        instead of __threadfence (fence.sc.gpu: MEMBAR.SC.GPU)
//   red_release_after_store    the same stores, then one red.release.gpu.add (the fence
//                        and the count in one instruction)
//   fence_acq_rel_idle   fence.acq_rel.gpu with nothing stored before it
//   fence_acq_rel_after_16B_store / _1KiB_store  the same after 16 bytes stored by thread 0,
//                        or 1 KiB by 64 threads (a stitched stage tile's small output)
//
// With --pollers N, N more blocks (each on an SM of its own: one 256-thread
// block fits an SM with __launch_bounds__(256, 1) only as the grid is small)
// poll a host word as the worker's pollers do (PeekSubmission: an 8-byte
// volatile load and a 16-byte ld.acquire.sys, in flight together, a 64 ns
// nap) while block 0 times the rows: what the pollers' reads of mapped memory
// cost the other blocks' steps (session 38: eight pollers made a call's fences
// several times slower; bench/results/experiments/pollers_ab_session38.txt).
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/queue_costs.cu -o /tmp/queue_costs \
//     && /tmp/queue_costs [--reps 2000] [--pollers 0]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kThreads = 256;
constexpr int kWarmup = 100;
constexpr int kSlotWords = 512;
constexpr int kCases = 23;
const char* const kNames[kCases] = {"host_read_16B_t0",
                                    "host_acquire_8B_t0",
                                    "host_read_16w",
                                    "host_read_64w",
                                    "host_read_256w",
                                    "host_read_512w",
                                    "l2_load_t0",
                                    "l2_atomic_add_t0",
                                    "l2_two_atomics_t0",
                                    "fence_gpu_after_store",
                                    "fence_sys_after_store",
                                    "fence_sys_store_host",
                                    "fence_sys_idle",
                                    "empty",
                                    "host_read_512w_together",
                                    "host_read_64w_and_last",
                                    "fence_gpu_idle",
                                    "fence_gpu_twice_after_store",
                                    "fence_acq_rel_after_store",
                                    "red_release_after_store",
                                    "fence_acq_rel_idle",
                                    "fence_acq_rel_after_16B_store",
                                    "fence_acq_rel_after_1KiB_store"};

__device__ unsigned long long NowNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__device__ unsigned long long AcquireSys(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Every thread reads its share of `words` 16-byte words at `base` (ld.cv);
// returns a value that depends on all of them.
__device__ int ReadWords(const int4* base, int words) {
  int sum = 0;
  for (int w = threadIdx.x; w < words; w += blockDim.x) {
    const int4 v = __ldcv(base + w);
    sum += v.x ^ v.w;
  }
  return sum;
}

// Blocks 1..N of the grid: poll host_word[32..33] (a line of its own) as
// the worker's pollers read the tail, until block 0 sets *done.
__device__ void Poll(const unsigned long long* host_word, const volatile unsigned int* done,
                     unsigned long long* polls) {
  if (threadIdx.x != 0) return;
  unsigned long long sum = 0, count = 0;
  while (*done == 0) {
    const unsigned long long flags =
        *reinterpret_cast<const volatile unsigned long long*>(host_word + 34);
    unsigned long long tail, hint;
    asm volatile("ld.acquire.sys.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(tail), "=l"(hint)
                 : "l"(host_word + 32)
                 : "memory");
    sum += flags ^ tail ^ hint;
    ++count;
    __nanosleep(64);
  }
  atomicAdd(polls, count + (sum == 0x7fffffffffffffffull ? 1 : 0));
}

__global__ void __launch_bounds__(kThreads, 1)
    Probe(const int4* host_slot, unsigned long long* host_word, unsigned int* dev_counters,
          int4* dev_out, long long* cycles, int reps, unsigned long long* clock_ns,
          unsigned int* done, unsigned long long* polls) {
  if (blockIdx.x != 0) {
    Poll(host_word, done, polls);
    return;
  }
  __shared__ int sink;
  if (threadIdx.x == 0) sink = 0;
  const long long c0 = clock64();
  const unsigned long long t0 = NowNs();
  for (int c = 0; c < kCases; ++c) {
    for (int r = 0; r < reps + kWarmup; ++r) {
      __syncthreads();
      const long long start = clock64();
      int v = 0;
      switch (c) {
        case 0:
          if (threadIdx.x == 0) {
            const int4 x = __ldcv(host_slot);
            v = x.x;
          }
          break;
        case 1:
          if (threadIdx.x == 0) v = static_cast<int>(AcquireSys(host_word));
          break;
        case 2:
          v = ReadWords(host_slot, 16);
          break;
        case 3:
          v = ReadWords(host_slot, 64);
          break;
        case 4:
          v = ReadWords(host_slot, 256);
          break;
        case 5:
          v = ReadWords(host_slot, kSlotWords);
          break;
        case 6:
          if (threadIdx.x == 0) v = static_cast<int>(__ldcg(dev_counters));
          break;
        case 7:
          if (threadIdx.x == 0) v = static_cast<int>(atomicAdd(dev_counters + 32, 1u));
          break;
        case 8:
          if (threadIdx.x == 0) {
            const unsigned int a = atomicAdd(dev_counters + 64, 1u);
            v = static_cast<int>(atomicAdd(dev_counters + 96 + (a & 1u), 1u));
          }
          break;
        case 9:
        case 10:
        case 17:
        case 18:
        case 19:
          // A tile's results (64 bytes a thread) stored to device memory,
          // then thread 0 fences (or releases its count) in one of four ways.
          for (int k = 0; k < 4; ++k) {
            dev_out[threadIdx.x * 4 + k] = make_int4(r, k, c, threadIdx.x);
          }
          __syncthreads();
          if (threadIdx.x == 0) {
            if (c == 9) {
              __threadfence();
            } else if (c == 10) {
              __threadfence_system();
            } else if (c == 17) {
              __threadfence();
              __threadfence();
            } else if (c == 18) {
              asm volatile("fence.acq_rel.gpu;" ::: "memory");
            } else {
              asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(dev_counters + 128)
                           : "memory");
            }
          }
          break;
        case 11:
          if (threadIdx.x == 0) {
            __threadfence_system();
            *reinterpret_cast<volatile unsigned long long*>(host_word + 8) = r;
          }
          break;
        case 12:
          if (threadIdx.x == 0) __threadfence_system();
          break;
        case 14: {  // as Admit reads a slot: both loads of a thread issued before either is used
          const int4 a = __ldcv(host_slot + threadIdx.x);
          const int4 b = __ldcv(host_slot + threadIdx.x + kThreads);
          v = a.x ^ b.w;
          break;
        }
        case 15:  // the first 64 words (a record and a small graph) and the slot's last word
          if (threadIdx.x < 64 || threadIdx.x == kThreads - 1) {
            const int4 a = __ldcv(host_slot + (threadIdx.x < 64 ? threadIdx.x : kSlotWords - 1));
            v = a.x;
          }
          break;
        case 16:
          if (threadIdx.x == 0) __threadfence();
          break;
        case 20:
          if (threadIdx.x == 0) asm volatile("fence.acq_rel.gpu;" ::: "memory");
          break;
        case 21:
        case 22:
          // A stitched stage's small output: 16 bytes from thread 0, or 16
          // bytes from each thread of warp 0 and warp 1 (1 KiB), then the
          // release of its count.
          if (c == 21 ? threadIdx.x == 0 : threadIdx.x < 64) {
            dev_out[threadIdx.x] = make_int4(r, 0, c, threadIdx.x);
          }
          __syncthreads();
          if (threadIdx.x == 0) asm volatile("fence.acq_rel.gpu;" ::: "memory");
          break;
        default:
          break;
      }
      if (v == 0x7fffffff) sink = v;  // keeps the loads
      __syncthreads();
      const long long elapsed = clock64() - start;
      if (threadIdx.x == 0 && r >= kWarmup) cycles[c * reps + r - kWarmup] = elapsed;
    }
  }
  if (threadIdx.x == 0) {
    clock_ns[0] = static_cast<unsigned long long>(clock64() - c0);
    clock_ns[1] = NowNs() - t0;
    clock_ns[2] = sink;
    *reinterpret_cast<volatile unsigned int*>(done) = 1u;
  }
}

bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("FAILED: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 2000;
  int pollers = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--pollers") == 0 && i + 1 < argc) {
      pollers = std::atoi(argv[++i]);
    } else {
      std::printf(
          "usage: %s [--reps N] [--pollers P]   (N >= 10, default 2000; P blocks polling "
          "a host word meanwhile, 0-64, default 0)\n",
          argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  if (reps < 10) {
    std::printf("--reps must be at least 10\n");
    return 2;
  }
  if (pollers < 0 || pollers > 64) {
    std::printf("--pollers must be from 0 to 64\n");
    return 2;
  }
  cudaDeviceProp prop;
  if (!Ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) return 1;
  void* host = nullptr;
  if (!Ok(cudaHostAlloc(&host, kSlotWords * 16 + 4096, cudaHostAllocMapped), "cudaHostAlloc")) {
    return 1;
  }
  std::memset(host, 1, kSlotWords * 16 + 4096);
  void* host_dev = nullptr;
  if (!Ok(cudaHostGetDevicePointer(&host_dev, host, 0), "cudaHostGetDevicePointer")) return 1;
  unsigned int* counters = nullptr;
  int4* out = nullptr;
  long long* cycles = nullptr;
  unsigned long long* clock_ns = nullptr;
  unsigned int* done = nullptr;
  unsigned long long* polls = nullptr;
  if (!Ok(cudaMalloc(&done, 256), "cudaMalloc") || !Ok(cudaMalloc(&polls, 256), "cudaMalloc") ||
      !Ok(cudaMemset(done, 0, 256), "cudaMemset") || !Ok(cudaMemset(polls, 0, 256), "cudaMemset")) {
    return 1;
  }
  if (!Ok(cudaMalloc(&counters, 4096), "cudaMalloc") ||
      !Ok(cudaMalloc(&out, kThreads * 4 * 16), "cudaMalloc") ||
      !Ok(cudaMalloc(&cycles, sizeof(long long) * kCases * reps), "cudaMalloc") ||
      !Ok(cudaMalloc(&clock_ns, 3 * sizeof(unsigned long long)), "cudaMalloc")) {
    return 1;
  }
  cudaMemset(counters, 0, 4096);
  auto* slot = static_cast<const int4*>(host_dev);
  auto* word =
      reinterpret_cast<unsigned long long*>(static_cast<char*>(host_dev) + kSlotWords * 16);
  Probe<<<1 + pollers, kThreads>>>(slot, word, counters, out, cycles, reps, clock_ns, done, polls);
  if (!Ok(cudaDeviceSynchronize(), "the probe kernel")) return 1;
  unsigned long long poll_count = 0;
  cudaMemcpy(&poll_count, polls, sizeof(poll_count), cudaMemcpyDeviceToHost);
  std::vector<long long> c(static_cast<std::size_t>(kCases) * reps);
  unsigned long long clk[3];
  cudaMemcpy(c.data(), cycles, c.size() * sizeof(long long), cudaMemcpyDeviceToHost);
  cudaMemcpy(clk, clock_ns, sizeof(clk), cudaMemcpyDeviceToHost);
  const double ns_per_cycle = static_cast<double>(clk[1]) / static_cast<double>(clk[0]);
  std::printf(
      "{\"probe\": \"bench/probes/queue_costs.cu\", \"device\": \"%s\", \"reps\": %d,\n"
      " \"pollers\": %d, \"polls\": %llu, \"run_ns\": %llu,\n",
      prop.name, reps, pollers, poll_count, clk[1]);
  std::printf(
      " \"sm_mhz\": %.0f, \"note\": \"medians in ns, one 256-thread block, "
      "each row minus nothing (the empty row is the barriers' own cost)\",\n",
      1e3 / ns_per_cycle);
  std::printf(" \"median_ns\": {");
  for (int k = 0; k < kCases; ++k) {
    std::vector<long long> v(c.begin() + static_cast<long>(k) * reps,
                             c.begin() + static_cast<long>(k + 1) * reps);
    std::sort(v.begin(), v.end());
    std::printf("%s\n  \"%s\": %.0f", k == 0 ? "" : ",", kNames[k],
                static_cast<double>(v[v.size() / 2]) * ns_per_cycle);
  }
  std::printf("\n }\n}\n");
  return 0;
}
