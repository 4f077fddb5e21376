// Probe: what one query of a stream's state costs the host, by the kind of
// stream and whether a persistent kernel is running on another one (a
// diagnostic for docs/pytorch.md, "Performance": a compiled call's ordering
// with PyTorch's stream is one cuStreamQuery, 1.4-1.9 us of the legacy
// default stream in session 33's probes; bench/README.md, "Probes").
//
// For each state (idle: nothing running; busy_other: one block per SM
// spinning on a non-blocking stream of its own, as the worker does;
// busy_green: the same kernel on a stream of a green context holding half
// the SMs, cuGreenCtxCreate), the host times, interleaved, --reps times
// (default 2000) after 200 warm-up rounds, each an idle stream's query:
//   legacy        cuStreamQuery(CU_STREAM_LEGACY) (PyTorch's default stream)
//   per_thread    cuStreamQuery(CU_STREAM_PER_THREAD)
//   blocking      a stream created with default flags
//   non_blocking  a stream created CU_STREAM_NON_BLOCKING
//   event         cuEventQuery of an event recorded once on the idle
//                 non-blocking stream
//   sync          cuStreamSynchronize(CU_STREAM_LEGACY) of the idle legacy
//                 stream (what the benchmark's synchronize after a call does)
// Medians in us; JSON on stdout. Every query must answer CUDA_SUCCESS (the
// streams are idle), except legacy and blocking while the kernel runs, which
// may answer CUDA_ERROR_NOT_READY (the legacy stream waits for blocking
// streams, not for non-blocking ones): the answers are counted.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/stream_query_cost.cu -lcuda \
//     -o /tmp/query_probe && GPUOS_COMMIT=<sha> /tmp/query_probe [--reps 2000]
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "host_timing.h"

namespace {

constexpr int kKinds = 6;
const char* const kKindNames[kKinds] = {"legacy",       "per_thread", "blocking",
                                        "non_blocking", "event",      "sync"};
constexpr int kEvent = 4;
constexpr int kSync = 5;

// One block per SM spins until *stop (mapped host memory) is set.
__global__ void Spin(const volatile unsigned int* stop) {
  if (threadIdx.x == 0) {
    while (*stop == 0) __nanosleep(1000);
  }
  __syncthreads();
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = probe::RepsOption(argc, argv, 2000);
  constexpr int kWarm = 200;
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));  // the primary context, current
  unsigned int* stop_dev = nullptr;
  unsigned int* stop = probe::MappedZeroed(&stop_dev);
  cudaStream_t spin_stream, blocking, non_blocking;
  CHECK_CUDA(cudaStreamCreateWithFlags(&spin_stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&blocking, cudaStreamDefault));
  CHECK_CUDA(cudaStreamCreateWithFlags(&non_blocking, cudaStreamNonBlocking));
  cudaEvent_t event;
  CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventRecord(event, non_blocking));
  CHECK_CUDA(cudaDeviceSynchronize());
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // The green context: half the SMs (rounded to the partition's alignment).
  CUdevice device;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUdevResource all_sms;
  CHECK_CU(cuDeviceGetDevResource(device, &all_sms, CU_DEV_RESOURCE_TYPE_SM));
  CUdevResource half_sms, rest;
  unsigned int groups = 1;
  const unsigned int align =
      all_sms.sm.smCoscheduledAlignment > 0 ? all_sms.sm.smCoscheduledAlignment : 1;
  CHECK_CU(cuDevSmResourceSplitByCount(&half_sms, &groups, &all_sms, &rest, 0,
                                       all_sms.sm.smCount / 2 / align * align));
  CUdevResourceDesc green_desc;
  CHECK_CU(cuDevResourceGenerateDesc(&green_desc, &half_sms, 1));
  CUgreenCtx green;
  CHECK_CU(cuGreenCtxCreate(&green, green_desc, device, CU_GREEN_CTX_DEFAULT_STREAM));
  CUstream green_stream;
  CHECK_CU(cuGreenCtxStreamCreate(&green_stream, green, CU_STREAM_NON_BLOCKING, 0));
  CHECK_CUDA(cudaSetDevice(0));  // the primary context current again for the runtime
  const CUstream streams[4] = {CU_STREAM_LEGACY, CU_STREAM_PER_THREAD,
                               reinterpret_cast<CUstream>(blocking),
                               reinterpret_cast<CUstream>(non_blocking)};

  std::string json;
  const char* const kStates[3] = {"idle", "busy_other", "busy_green"};
  for (int state = 0; state < 3; ++state) {
    const bool busy = state > 0;
    cudaStream_t running = state == 2 ? reinterpret_cast<cudaStream_t>(green_stream) : spin_stream;
    if (busy) {
      *reinterpret_cast<volatile unsigned int*>(stop) = 0;
      Spin<<<state == 2 ? static_cast<int>(half_sms.sm.smCount) : sms, 256, 0, running>>>(stop_dev);
      CHECK_CUDA(cudaGetLastError());
    }
    std::vector<double> times[kKinds];
    long not_ready[kKinds] = {};
    for (int r = 0; r < kWarm + reps; ++r) {
      for (int k = 0; k < kKinds; ++k) {
        const double t0 = probe::NowUs();
        const CUresult answer = k == kSync    ? cuStreamSynchronize(CU_STREAM_LEGACY)
                                : k == kEvent ? cuEventQuery(reinterpret_cast<CUevent>(event))
                                              : cuStreamQuery(streams[k]);
        const double t1 = probe::NowUs();
        if (answer == CUDA_ERROR_NOT_READY) {
          ++not_ready[k];
        } else if (answer != CUDA_SUCCESS) {
          const char* s = nullptr;
          cuGetErrorString(answer, &s);
          std::fprintf(stderr, "%s query: %s\n", kKindNames[k], s ? s : "?");
          return 1;
        }
        if (r >= kWarm) times[k].push_back(t1 - t0);
      }
    }
    if (busy) {
      *reinterpret_cast<volatile unsigned int*>(stop) = 1;
      CHECK_CUDA(cudaStreamSynchronize(running));
    }
    char line[256];
    json += std::string(state == 0 ? "" : ",\n") + "  \"" + kStates[state] + "\": {";
    for (int k = 0; k < kKinds; ++k) {
      std::snprintf(line, sizeof(line), "%s\"%s_us\": %.3f, \"%s_not_ready\": %ld",
                    k == 0 ? "" : ", ", kKindNames[k], probe::Median(times[k]), kKindNames[k],
                    not_ready[k]);
      json += line;
    }
    json += "}";
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf(
      "{\"probe\": \"stream_query_cost\", \"commit\": \"%s\", \"device\": \"%s\", "
      "\"reps\": %d, \"green_sms\": %u,\n%s\n}\n",
      probe::CommitOrUnknown(), prop.name, reps, half_sms.sm.smCount, json.c_str());
  return 0;
}
