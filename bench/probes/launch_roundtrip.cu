// Probe (session 47; the resident variants _own, _poll, _event and
// launch_idle_poll since session 48): what a call that launches its tiles as a kernel of its
// own on the caller's stream costs the host, against a call through a
// resident kernel, each followed by the synchronize of the legacy default
// stream that the PyTorch benchmark makes after every call (docs/pytorch.md,
// "Not met": attention's gpuos_compile at 1.2x a CUDA graph).
//
// Timed, interleaved in blocks of 50, --reps times each (default 2000) after
// 200 warm-up rounds, for a tile time W of 0 and 2500 ns (attention seq 32's
// tile takes about 2.5 us):
//   launch_idle      cudaLaunchKernel of `tiles` blocks of 256 threads on the
//                    legacy stream, each spinning W ns (globaltimer), then
//                    cuStreamSynchronize(CU_STREAM_LEGACY); nothing resident
//   launch_idle_poll the launch of launch_resident_poll (below), nothing resident
//   launch_resident  the same while a kernel of one 256-thread block per SM
//                    spins on a mapped flag on a non-blocking stream of its
//                    own (the worker's way, 256 ns naps)
//   launch_resident_own   the same, but the launch on a non-blocking stream of
//                    its own and cuStreamSynchronize of that stream (is the
//                    cost the legacy stream's?)
//   launch_resident_poll  the same launch on the legacy stream, block 0 then
//                    writes a sequence number into mapped memory; timed until
//                    the host sees it, without a synchronize (the legacy
//                    stream is synchronized after the sample): does the kernel
//                    start late, or does the synchronize return late?
//   launch_resident_event the same launch, then an event recorded on the legacy
//                    stream and cuEventSynchronize (the driver's other wait)
//   launch_after_stop     the host asks a resident spinner to exit (its
//                    mapped flag), then launches and synchronizes as
//                    launch_idle (the spinner relaunched, untimed, before each)
//   resident_call    the host writes a sequence number into mapped memory; a
//                    resident kernel's block 0 sees it, spins W ns, writes it
//                    back (__threadfence_system); the host polls for it, then
//                    synchronizes the legacy stream (the persistent path's
//                    floor with one block's work, and the benchmark's sync)
// Medians in us; JSON on stdout.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/launch_roundtrip.cu -lcuda \
//     -o /tmp/launch_probe && GPUOS_COMMIT=<sha> /tmp/launch_probe [--reps 2000]
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "host_timing.h"

namespace {

__device__ __forceinline__ unsigned long long GlobalNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void SpinNs(unsigned long long ns) {
  const unsigned long long start = GlobalNs();
  while (GlobalNs() - start < ns) {
  }
}

// Each block: thread 0 spins `ns`, then every thread stores one word.
__global__ void Tiles(unsigned long long ns, unsigned int* out) {
  if (threadIdx.x == 0) SpinNs(ns);
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x;
}

// Tiles, then block 0 thread 0 writes `seq` into mapped memory.
__global__ void TilesThenFlag(unsigned long long ns, unsigned int* out, unsigned int seq,
                              volatile unsigned int* flag) {
  if (threadIdx.x == 0) SpinNs(ns);
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    __threadfence_system();
    *flag = seq;
  }
}

// One block per SM, thread 0 napping until *stop.
__global__ void Spin(const volatile unsigned int* stop, volatile unsigned int* started) {
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0) {
      *started = 1;
      __threadfence_system();
    }
    while (*stop == 0) __nanosleep(256);
  }
  __syncthreads();
}

// Block 0 thread 0 answers every go sequence after `ns`, until *stop.
__global__ void Answer(const volatile unsigned int* go, volatile unsigned int* done,
                       const volatile unsigned int* stop, unsigned long long ns,
                       volatile unsigned int* started) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  *started = 1;
  __threadfence_system();
  unsigned int seen = 0;
  while (*stop == 0) {
    const unsigned int seq = *go;
    if (seq == seen) continue;
    seen = seq;
    SpinNs(ns);
    *done = seq;
    __threadfence_system();
  }
}

void WaitStarted(volatile unsigned int* started) {
  while (*started == 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = probe::RepsOption(argc, argv, 2000);
  constexpr int kWarm = 200;
  constexpr int kBlock = 50;
  constexpr unsigned int kThreads = 256;
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned int *stop_dev, *started_dev, *go_dev, *done_dev;
  unsigned int* stop = probe::MappedZeroed(&stop_dev);
  unsigned int* started = probe::MappedZeroed(&started_dev);
  unsigned int* go = probe::MappedZeroed(&go_dev);
  unsigned int* done = probe::MappedZeroed(&done_dev);
  unsigned int* flag_dev;
  unsigned int* flag = probe::MappedZeroed(&flag_dev);
  unsigned int flag_seq = 0;
  cudaStream_t mine;
  CHECK_CUDA(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking));
  cudaEvent_t event;
  CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  unsigned int* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, 1024 * kThreads * sizeof(unsigned int)));
  cudaStream_t side;
  CHECK_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));

  const unsigned int tile_counts[] = {32, 104};
  const unsigned long long tile_ns[] = {0, 2500};
  std::printf("{\"probe\": \"launch_roundtrip\", \"commit\": \"%s\", \"reps\": %d, \"sms\": %d,\n",
              probe::CommitOrUnknown(), reps, sms);
  std::printf(" \"results\": [\n");
  bool first = true;
  for (unsigned long long ns : tile_ns) {
    for (unsigned int tiles : tile_counts) {
      std::vector<double> idle, idle_poll, resident, resident_own, resident_poll, resident_event,
          stopped, call;
      auto launch_own = [&](std::vector<double>* sample) {
        const double t0 = probe::NowUs();
        Tiles<<<tiles, kThreads, 0, mine>>>(ns, out);
        CHECK_CUDA(cudaStreamSynchronize(mine));
        if (sample != nullptr) sample->push_back(probe::NowUs() - t0);
      };
      auto launch_poll = [&](std::vector<double>* sample) {
        const unsigned int seq = ++flag_seq;
        const double t0 = probe::NowUs();
        TilesThenFlag<<<tiles, kThreads, 0, cudaStreamLegacy>>>(ns, out, seq, flag_dev);
        while (*reinterpret_cast<volatile unsigned int*>(flag) != seq) {
        }
        if (sample != nullptr) sample->push_back(probe::NowUs() - t0);
        CHECK_CU(cuStreamSynchronize(CU_STREAM_LEGACY));
      };
      auto launch_event = [&](std::vector<double>* sample) {
        const double t0 = probe::NowUs();
        Tiles<<<tiles, kThreads, 0, cudaStreamLegacy>>>(ns, out);
        CHECK_CUDA(cudaEventRecord(event, cudaStreamLegacy));
        CHECK_CUDA(cudaEventSynchronize(event));
        if (sample != nullptr) sample->push_back(probe::NowUs() - t0);
      };
      auto launch_once = [&](std::vector<double>* sample) {
        const double t0 = probe::NowUs();
        Tiles<<<tiles, kThreads, 0, cudaStreamLegacy>>>(ns, out);
        CHECK_CU(cuStreamSynchronize(CU_STREAM_LEGACY));
        if (sample != nullptr) sample->push_back(probe::NowUs() - t0);
      };
      unsigned int seq = 0;
      auto call_once = [&](std::vector<double>* sample) {
        const double t0 = probe::NowUs();
        *reinterpret_cast<volatile unsigned int*>(go) = ++seq;
        while (*reinterpret_cast<volatile unsigned int*>(done) != seq) {
        }
        CHECK_CU(cuStreamSynchronize(CU_STREAM_LEGACY));
        if (sample != nullptr) sample->push_back(probe::NowUs() - t0);
      };
      for (int done_reps = -kWarm; done_reps < reps; done_reps += kBlock) {
        const bool timed = done_reps >= 0;
        // Nothing resident.
        for (int i = 0; i < kBlock; ++i) launch_once(timed ? &idle : nullptr);
        for (int i = 0; i < kBlock; ++i) launch_poll(timed ? &idle_poll : nullptr);
        // A spinner resident.
        *stop = 0;
        *started = 0;
        Spin<<<sms, kThreads, 0, side>>>(stop_dev, started_dev);
        WaitStarted(started);
        for (int i = 0; i < kBlock; ++i) launch_once(timed ? &resident : nullptr);
        for (int i = 0; i < kBlock; ++i) launch_own(timed ? &resident_own : nullptr);
        for (int i = 0; i < kBlock; ++i) launch_poll(timed ? &resident_poll : nullptr);
        for (int i = 0; i < kBlock; ++i) launch_event(timed ? &resident_event : nullptr);
        *reinterpret_cast<volatile unsigned int*>(stop) = 1;
        CHECK_CUDA(cudaStreamSynchronize(side));
        // The spinner asked to exit right before each launch.
        for (int i = 0; i < kBlock; ++i) {
          *reinterpret_cast<volatile unsigned int*>(stop) = 0;
          *started = 0;
          Spin<<<sms, kThreads, 0, side>>>(stop_dev, started_dev);
          WaitStarted(started);
          const double t0 = probe::NowUs();
          *reinterpret_cast<volatile unsigned int*>(stop) = 1;
          Tiles<<<tiles, kThreads, 0, cudaStreamLegacy>>>(ns, out);
          CHECK_CU(cuStreamSynchronize(CU_STREAM_LEGACY));
          if (timed) stopped.push_back(probe::NowUs() - t0);
          CHECK_CUDA(cudaStreamSynchronize(side));
        }
        // The resident answerer.
        *stop = 0;
        *started = 0;
        *reinterpret_cast<volatile unsigned int*>(go) = seq;
        *reinterpret_cast<volatile unsigned int*>(done) = seq;
        Answer<<<sms, kThreads, 0, side>>>(go_dev, done_dev, stop_dev, ns, started_dev);
        WaitStarted(started);
        for (int i = 0; i < kBlock; ++i) call_once(timed ? &call : nullptr);
        *reinterpret_cast<volatile unsigned int*>(stop) = 1;
        CHECK_CUDA(cudaStreamSynchronize(side));
      }
      CHECK_CUDA(cudaGetLastError());
      std::printf(
          "%s  {\"tile_ns\": %llu, \"tiles\": %u, \"launch_idle_us\": %.3f, "
          "\"launch_idle_poll_us\": %.3f, \"launch_resident_us\": %.3f, "
          "\"launch_resident_own_us\": %.3f, "
          "\"launch_resident_poll_us\": %.3f, \"launch_resident_event_us\": %.3f, "
          "\"launch_after_stop_us\": %.3f, \"resident_call_us\": %.3f}",
          first ? "" : ",\n", ns, tiles, probe::Median(idle), probe::Median(idle_poll),
          probe::Median(resident), probe::Median(resident_own), probe::Median(resident_poll),
          probe::Median(resident_event), probe::Median(stopped), probe::Median(call));
      first = false;
    }
  }
  std::printf("\n ]}\n");
  return 0;
}
