// Probe: how soon an idle block of a persistent grid notices a word another
// block posts (a diagnostic, not a benchmark of record; bench/README.md,
// "Probes"). Session 43 measured that the worker's helpers begin 2.2-3.6 us
// after the claim posts the direct board (1.7-2.9 with naps capped at 128
// ns), far more than a round of L2 loads should take; this probe times the
// same idle loop with nothing else in it, to tell the loop's own cost from
// the worker's.
//
// Two parts, both printed as JSON on stdout:
//
//   nanosleep   one thread's __nanosleep(N) as %globaltimer measures it, N = 0
//               .. 4096 ns: median, p90 and max of --reps naps each.
//   wake        a grid of one 256-thread block per SM. Block 0 posts a new
//               value on a board word every --period-us (plus 0-2 us of
//               pseudo-random jitter) as the claim posts the direct board
//               (FinishClaim: a read of a host word, a CAS, an add and the
//               board's atomicMax) and notes when, after them (as the
//               worker's claimed_ns). Blocks 1..P (P = the row's pollers)
//               read a mapped host word as the worker's pollers do. Every
//               other block runs an idle round like the worker's: thread 0
//               loads the board, then the row's loads - 1 more words one
//               after another (each address depends on the load before, as
//               the worker's ready-ring and in_flight loads follow its
//               board's), then naps (asked 64 ns doubled each idle round up
//               to the row's cap, as the worker's 64 << min(rounds, 5), and
//               at most 256 while the third load saw the stand-in for
//               in_flight set), with two block barriers a round. The first
//               --helpers of them note when they first see each post and
//               then "work" --work-us before going idle again (the tiles of
//               a call; the first also clears the in_flight stand-in); the
//               others only poll. Per row: the median over posts (the first
//               tenth left out) of the first, median and last helper's delay
//               from the post to its sighting, and the last's 90th
//               percentile, in ns.
//
// Rows, in this order (loads, cap in ns, spin, pollers): the worker's default
// (3, 2048, no, 0 and 2), capped naps (3, 128, no, 0 and 2), one load a
// round (1, 128, no, 2), and no nap at all (3, 0, spin, 0 and 2; a spin row
// waits on its SM's clock64 instead of __nanosleep).
//
// Session 44, H200 (bench/results/experiments/idle_wake_session44.txt):
// __nanosleep(N) sleeps 2N (64 asked, 128 slept; 2048 asked, 4096 slept); with
// the default naps 15 helpers see a post 1.9-2.3 us after it, about in step
// (they went idle together), and with naps asked at most 128 ns 0.3-0.4 us
// (first) to 0.7-0.9 us (last); two pollers change this by at most 0.03 us,
// one load a round instead of three the last helper's by 0.1 (15 helpers)
// to 0.26 us (63). PTX documents nanosleep's sleep as anywhere in [0, 2t];
// this H200 sleeps 2t. A round's stop look is one more load, independent of
// the row's chain (its address does not depend on them).
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -I device/include bench/probes/idle_wake.cu -o /tmp/idle_wake \
//     && /tmp/idle_wake [--reps 2000] [--posts 400] [--period-us 20] [--helpers 15] \
//                       [--work-us 4]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "probe_common.cuh"

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ unsigned long long LoadVolatile(const unsigned long long* p) {
  return *reinterpret_cast<const volatile unsigned long long*>(p);
}

// Waits about `ns` nanoseconds: __nanosleep, or (spin) a loop on the SM's
// clock, converted with `cycles_per_us`.
__device__ __forceinline__ void Nap(unsigned int ns, bool spin, unsigned int cycles_per_us) {
  if (!spin) {
    __nanosleep(ns);
    return;
  }
  const long long until = clock64() + static_cast<long long>(ns) * cycles_per_us / 1000;
  while (clock64() < until) {
  }
}

__global__ void SleepProbe(unsigned long long* out, int reps) {
  if (threadIdx.x != 0) return;
  const unsigned int lengths[] = {0, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  int k = 0;
  for (unsigned int ns : lengths) {
    for (int r = 0; r < reps; ++r) {
      const unsigned long long start = probe::NowNs();
      __nanosleep(ns);
      out[k * reps + r] = probe::NowNs() - start;
    }
    ++k;
  }
}

// The SM clock's rate, in cycles per microsecond, over about 100 us.
__global__ void ClockRate(unsigned long long* out) {
  const unsigned long long t0 = probe::NowNs();
  const long long c0 = clock64();
  while (probe::NowNs() - t0 < 100000) {
  }
  const unsigned long long t1 = probe::NowNs();
  const long long c1 = clock64();
  *out = static_cast<unsigned long long>((c1 - c0) * 1000 / static_cast<long long>(t1 - t0));
}

struct Board {
  unsigned long long posted;      // the post's number (1, 2, ...), atomicMax
  unsigned long long pad0[15];    // a 128-byte line of its own
  unsigned long long ring[16];    // stands for the ready ring's head and tail
  unsigned long long flight[16];  // stands for in_flight
  unsigned long long stop;
};

struct Config {
  int loads;         // dependent loads a round, the board's first (1..3)
  unsigned int cap;  // the longest nap, ns
  bool spin;         // naps timed by clock64 instead of __nanosleep
  int pollers;       // blocks 1..pollers read host memory as the worker's pollers
  int posts;
  unsigned int period_ns;
  int helpers;
  unsigned int work_ns;
  unsigned int cycles_per_us;
};

// A poller's read of the host's queue (the worker's PeekSubmission): an
// 8-byte volatile load and a 16-byte ld.acquire.sys in flight together.
__device__ __forceinline__ unsigned long long ReadHost(const unsigned long long* host) {
  const unsigned long long flags = LoadVolatile(host + 2);
  unsigned long long tail, hint;
  asm volatile("ld.acquire.sys.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(tail), "=l"(hint)
               : "l"(host)
               : "memory");
  return flags ^ tail ^ hint;
}

__global__ void __launch_bounds__(kThreads, 1)
    WakeProbe(Board* board, const unsigned long long* host, Config c, unsigned long long* post_ns,
              unsigned long long* seen_ns) {
  __shared__ int action;  // 0 idle, 1 work, 2 stop
  if (blockIdx.x == 0) {
    // The claim's pattern (FinishClaim): the host's tail read, the head's
    // CAS, in_flight's add and the board's maximum; the post's time taken
    // after them, as the worker's claimed_ns.
    if (threadIdx.x != 0) return;
    unsigned long long next = probe::NowNs() + 20000;
    unsigned int jitter = 12345u;
    for (int p = 0; p < c.posts; ++p) {
      while (probe::NowNs() < next) {
      }
      const unsigned long long head = (ReadHost(host) & 0) + p;
      atomicCAS(&board->ring[2], head, head + 1);
      atomicAdd(&board->flight[0], 1ull);
      atomicMax(&board->posted, static_cast<unsigned long long>(p + 1));
      const unsigned long long t = probe::NowNs();
      post_ns[p] = t;
      jitter = jitter * 1664525u + 1013904223u;
      next = t + c.period_ns + (jitter >> 8) % 2000u;
    }
    while (probe::NowNs() < next) {
    }
    atomicExch(&board->stop, 1ull);
    return;
  }
  if (static_cast<int>(blockIdx.x) <= c.pollers) {
    if (threadIdx.x != 0) return;
    unsigned long long sum = 0;
    while (LoadVolatile(&board->stop) == 0) {
      sum += ReadHost(host);
      __nanosleep(64);
    }
    if (sum == 0x7fffffffffffffffull) board->pad0[0] = sum;  // keeps the reads
    return;
  }
  const int helper = static_cast<int>(blockIdx.x) - c.pollers;  // 1, 2, ...: a helper
  unsigned long long seen = 0;
  unsigned int rounds = 0;
  unsigned long long flight = 0;
  for (;;) {
    if (threadIdx.x == 0) {
      int next = 0;
      const unsigned long long v = LoadVolatile(&board->posted);
      if (v > seen && helper <= c.helpers) {
        if (v <= static_cast<unsigned long long>(c.posts)) {
          seen_ns[(v - 1) * c.helpers + (helper - 1)] = probe::NowNs();
        }
        seen = v;
        next = 1;
      } else {
        seen = v;  // the others are not asked to help (the worker's DirectHelpWanted)
        // The worker's next looks: each issued after the one before returns.
        unsigned long long x = v & 1;
        if (c.loads >= 2) x = LoadVolatile(&board->ring[x & 1]);
        if (c.loads >= 3) x = flight = LoadVolatile(&board->flight[x & 1]);
        if (LoadVolatile(&board->stop + (x & 0)) != 0) next = 2;
      }
      action = next;
    }
    __syncthreads();
    const int current = action;
    __syncthreads();
    if (current == 2) return;
    if (current == 1) {
      if (threadIdx.x == 0) {
        Nap(c.work_ns, true, c.cycles_per_us);
        if (helper == 1) atomicExch(&board->flight[0], 0ull);  // the call's completion
      }
      __syncthreads();
      rounds = 0;
      continue;
    }
    if (threadIdx.x == 0) {
      // The worker's naps: at most 256 ns while a submission is in flight
      // (kBusyIdleSleepNs), when the round's third load saw it.
      unsigned int ns = 64u << (rounds < 5u ? rounds : 5u);
      if (ns > 256u && flight != 0) ns = 256u;
      Nap(ns < c.cap ? ns : c.cap, c.spin, c.cycles_per_us);
    }
    ++rounds;
  }
}

bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "idle_wake: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

unsigned long long Percentile(std::vector<unsigned long long> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * (v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 2000, posts = 400, helpers = 15;
  double period_us = 20, work_us = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--reps") {
      reps = std::atoi(argv[i + 1]);
    } else if (flag == "--posts") {
      posts = std::atoi(argv[i + 1]);
    } else if (flag == "--helpers") {
      helpers = std::atoi(argv[i + 1]);
    } else if (flag == "--period-us") {
      period_us = std::atof(argv[i + 1]);
    } else if (flag == "--work-us") {
      work_us = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "idle_wake: unknown flag %s (see the file's header)\n", flag.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0 || reps < 10 || posts < 10 || helpers < 1 || period_us <= 0 || work_us < 0) {
    std::fprintf(stderr,
                 "usage: idle_wake [--reps N>=10] [--posts N>=10] [--helpers N>=1] "
                 "[--period-us US] [--work-us US]\n");
    return 2;
  }
  int sms = 0;
  cudaDeviceProp prop{};
  if (!Check(cudaGetDeviceProperties(&prop, 0), "device properties")) return 1;
  sms = prop.multiProcessorCount;
  if (helpers > sms - 3) helpers = sms - 3;  // block 0 posts, up to 2 poll

  unsigned long long* d = nullptr;
  const std::size_t sleep_words = 9ull * reps;
  if (!Check(cudaMalloc(&d, sleep_words * sizeof(unsigned long long)), "cudaMalloc")) return 1;
  SleepProbe<<<1, 32>>>(d, reps);
  std::vector<unsigned long long> sleeps(sleep_words);
  if (!Check(cudaDeviceSynchronize(), "the nanosleep probe")) return 1;
  cudaMemcpy(sleeps.data(), d, sleep_words * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
  ClockRate<<<1, 1>>>(d);
  unsigned long long cycles_per_us = 0;
  if (!Check(cudaDeviceSynchronize(), "the clock probe")) return 1;
  cudaMemcpy(&cycles_per_us, d, sizeof(cycles_per_us), cudaMemcpyDeviceToHost);
  cudaFree(d);

  std::printf("{\"device\": \"%s\", \"sms\": %d, \"sm_cycles_per_us\": %llu,\n", prop.name, sms,
              cycles_per_us);
  std::printf(" \"nanosleep_ns\": [\n");
  const unsigned int lengths[] = {0, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  for (int k = 0; k < 9; ++k) {
    std::vector<unsigned long long> v(sleeps.begin() + k * reps, sleeps.begin() + (k + 1) * reps);
    std::printf("  {\"asked\": %u, \"median\": %llu, \"p90\": %llu, \"max\": %llu}%s\n", lengths[k],
                Percentile(v, 0.5), Percentile(v, 0.9), Percentile(v, 1.0), k < 8 ? "," : "");
  }
  std::printf(
      " ],\n \"wake\": {\"posts\": %d, \"period_us\": %.1f, \"helpers\": %d, "
      "\"work_us\": %.1f, \"rows\": [\n",
      posts, period_us, helpers, work_us);

  const Config configs[] = {
      {3, 2048, false, 0}, {3, 2048, false, 2}, {3, 128, false, 0}, {3, 128, false, 2},
      {1, 128, false, 2},  {3, 0, true, 0},     {3, 0, true, 2},
  };
  const int n = static_cast<int>(sizeof(configs) / sizeof(configs[0]));
  // The host words the pollers and the poster read (mapped, as the queue's
  // control block).
  unsigned long long* host_words = nullptr;
  unsigned long long* host_device = nullptr;
  if (!Check(cudaHostAlloc(&host_words, 4096, cudaHostAllocMapped), "cudaHostAlloc") ||
      !Check(cudaHostGetDevicePointer(&host_device, host_words, 0), "cudaHostGetDevicePointer")) {
    return 1;
  }
  std::memset(host_words, 0, 4096);
  for (int k = 0; k < n; ++k) {
    Config c = configs[k];
    c.posts = posts;
    c.period_ns = static_cast<unsigned int>(period_us * 1000);
    c.helpers = helpers;
    c.work_ns = static_cast<unsigned int>(work_us * 1000);
    c.cycles_per_us = static_cast<unsigned int>(cycles_per_us);
    Board* b = nullptr;
    unsigned long long *post_ns = nullptr, *seen_ns = nullptr;
    const std::size_t seen_words = static_cast<std::size_t>(posts) * helpers;
    if (!Check(cudaMalloc(&b, sizeof(Board)), "cudaMalloc") ||
        !Check(cudaMalloc(&post_ns, posts * sizeof(unsigned long long)), "cudaMalloc") ||
        !Check(cudaMalloc(&seen_ns, seen_words * sizeof(unsigned long long)), "cudaMalloc")) {
      return 1;
    }
    cudaMemset(b, 0, sizeof(Board));
    cudaMemset(seen_ns, 0, seen_words * sizeof(unsigned long long));
    WakeProbe<<<sms, kThreads>>>(b, host_device, c, post_ns, seen_ns);
    if (!Check(cudaDeviceSynchronize(), "the wake probe")) return 1;
    std::vector<unsigned long long> posted(posts), seen(seen_words);
    cudaMemcpy(posted.data(), post_ns, posts * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
    cudaMemcpy(seen.data(), seen_ns, seen_words * sizeof(unsigned long long),
               cudaMemcpyDeviceToHost);
    cudaFree(b);
    cudaFree(post_ns);
    cudaFree(seen_ns);
    // Per post (the first tenth left out as a warm-up): the helpers' delays,
    // sorted; a helper that missed a post (it saw a later one first) counts
    // as missing.
    std::vector<unsigned long long> first, median, last;
    int missed = 0;
    for (int p = posts / 10; p < posts; ++p) {
      std::vector<unsigned long long> delays;
      for (int h = 0; h < helpers; ++h) {
        const unsigned long long s = seen[static_cast<std::size_t>(p) * helpers + h];
        if (s == 0 || s < posted[p]) {
          ++missed;
          continue;
        }
        delays.push_back(s - posted[p]);
      }
      if (delays.empty()) continue;
      std::sort(delays.begin(), delays.end());
      first.push_back(delays.front());
      median.push_back(delays[delays.size() / 2]);
      last.push_back(delays.back());
    }
    if (first.empty()) {
      std::fprintf(stderr, "idle_wake: no helper saw any post (row %d)\n", k);
      return 1;
    }
    std::printf(
        "  {\"loads\": %d, \"cap_ns\": %u, \"spin\": %s, \"pollers\": %d, \"first_ns\": %llu, "
        "\"median_ns\": %llu, \"last_ns\": %llu, \"last_p90_ns\": %llu, \"missed\": %d}%s\n",
        c.loads, c.cap, c.spin ? "true" : "false", c.pollers, Percentile(first, 0.5),
        Percentile(median, 0.5), Percentile(last, 0.5), Percentile(last, 0.9), missed,
        k + 1 < n ? "," : "");
  }
  cudaFreeHost(host_words);
  std::printf(" ]}}\n");
  return 0;
}
