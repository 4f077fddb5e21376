// Probe: what one query of a stream's state costs the host, by the kind of
// stream and whether a persistent kernel is running on another one (a
// diagnostic for docs/pytorch.md, "Performance": a compiled call's ordering
// with PyTorch's stream is one cuStreamQuery, 1.4-1.9 us of the legacy
// default stream in session 33's probes; bench/README.md, "Probes").
//
// For each state (idle: nothing running; busy_other: one block per SM
// spinning on a non-blocking stream of its own, as the worker does;
// busy_green: the same kernel on a stream of a green context holding half
// the SMs, cuGreenCtxCreate; since session 45 also busy_device_flag: the
// kernel of busy_other spinning on a flag in device memory, no host traffic;
// busy_device_flag_one_block: that with one block; busy_host_tight:
// busy_other without the nap between its PCIe reads), the host times,
// interleaved, --reps times (default 2000) after 200 warm-up rounds, once
// the state's kernel has started, each an idle stream's query:
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
// Since session 46, with bench/probes/syscall_count_shim.c preloaded
// (LD_PRELOAD), each kind also gets the ioctl and sched_yield calls the
// process made through libc over its timed queries (<kind>_ioctls_total,
// <kind>_yields_total; session 46's records, from the probe before it
// printed totals, have them per query as <kind>_ioctls), and the JSON a shim
// check: the ioctls of one 64 MiB cudaMalloc and cudaFree (zero there means
// the driver's ioctls bypass the shim, and zero elsewhere says nothing).
// Without the shim these fields are absent and the check reads -1.
//
// Every state also gets (shim or not) the thread's user and system CPU
// time over its timed rounds (getrusage RUSAGE_THREAD; cpu_user_ms,
// cpu_system_ms) beside the timed queries' own sum (queries_ms): kernel
// time for any reason (any system call, a page fault), not only the shim's
// two calls, shows as system time. Where the kernel samples the split at
// its ticks (a few ms) this tells whether most of a state's query time is
// kernel time, not small shares of it.
//
// Two settings of the environment (session 45): PROBE_SCHED=spin|yield|
// blocking sets the primary context's scheduling flag before it is created;
// PROBE_SPIN_CTX=separate runs busy_other's kernel (only that state's) in a
// context of its own, made with cuCtxCreate. Each is named in the JSON.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/stream_query_cost.cu -lcuda -ldl \
//     -o /tmp/query_probe && GPUOS_COMMIT=<sha> [PROBE_SCHED=spin] \
//     [PROBE_SPIN_CTX=separate] [LD_PRELOAD=/tmp/syscall_count_shim.so] \
//     /tmp/query_probe [--reps 2000]
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <sys/resource.h>

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

// Thread 0 of each block spins until *stop is set, napping nap_ns between
// reads (0: no nap). stop is mapped host memory (every read crosses PCIe, the
// worker's way) or device memory (no host traffic at all).
// Block 0 sets *started (mapped) first, so that the host times nothing
// before the kernel runs.
__global__ void Spin(const volatile unsigned int* stop, unsigned int nap_ns,
                     volatile unsigned int* started) {
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0) {
      *started = 1;
      __threadfence_system();
    }
    while (*stop == 0) {
      if (nap_ns != 0) __nanosleep(nap_ns);
    }
  }
  __syncthreads();
}

// What runs while the host times its queries.
struct BusyState {
  const char* name;
  bool busy;
  bool green;        // on the green context's stream (half the SMs)
  bool device_flag;  // stop flag in device memory instead of mapped host memory
  bool one_block;    // one block instead of one per SM
  unsigned int nap_ns;
  bool may_be_elsewhere;  // in a context of its own with PROBE_SPIN_CTX=separate
};
constexpr int kStates = 6;
const BusyState kBusyStates[kStates] = {
    {"idle", false, false, false, false, 0, false},
    {"busy_other", true, false, false, false, 1000, true},
    {"busy_green", true, true, false, false, 1000, false},
    // Session 45: is the extra cost the kernel's presence or its PCIe reads?
    {"busy_device_flag", true, false, true, false, 1000, false},
    {"busy_device_flag_one_block", true, false, true, true, 1000, false},
    {"busy_host_tight", true, false, false, false, 0, false},
};

// syscall_count_shim.c's counter, or nullptr when it is not preloaded.
using SyscallCounts = void (*)(unsigned long*, unsigned long*);
SyscallCounts FindSyscallCounts() {
  return reinterpret_cast<SyscallCounts>(dlsym(RTLD_DEFAULT, "probe_syscall_counts"));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = probe::RepsOption(argc, argv, 2000);
  constexpr int kWarm = 200;
  // PROBE_SCHED=spin|yield|blocking: the primary context's scheduling flag,
  // set before it is created (default: the driver's auto).
  const char* sched = std::getenv("PROBE_SCHED");
  if (sched != nullptr && *sched != '\0') {
    const unsigned int flag = std::strcmp(sched, "spin") == 0       ? CU_CTX_SCHED_SPIN
                              : std::strcmp(sched, "yield") == 0    ? CU_CTX_SCHED_YIELD
                              : std::strcmp(sched, "blocking") == 0 ? CU_CTX_SCHED_BLOCKING_SYNC
                                                                    : ~0u;
    if (flag == ~0u) {
      std::fprintf(stderr, "PROBE_SCHED wants spin, yield or blocking\n");
      return 2;
    }
    CHECK_CU(cuInit(0));
    CUdevice first;
    CHECK_CU(cuDeviceGet(&first, 0));
    CHECK_CU(cuDevicePrimaryCtxSetFlags(first, flag));
  }
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
  // PROBE_SPIN_CTX=separate: busy_other's kernel runs in a context of its own
  // (cuCtxCreate), to tell a cost of the primary context's outstanding work
  // from one of the device's.
  const char* spin_ctx = std::getenv("PROBE_SPIN_CTX");
  if (spin_ctx != nullptr && *spin_ctx != '\0' && std::strcmp(spin_ctx, "separate") != 0) {
    std::fprintf(stderr, "PROBE_SPIN_CTX wants separate (or nothing)\n");
    return 2;
  }
  const bool separate = spin_ctx != nullptr && *spin_ctx != '\0';
  CUcontext primary = nullptr;
  CUcontext other = nullptr;
  CUstream other_stream = nullptr;
  if (separate) {
    CHECK_CU(cuCtxGetCurrent(&primary));
    CHECK_CU(cuCtxCreate(&other, nullptr, 0, device));  // made current
    CHECK_CU(cuStreamCreate(&other_stream, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuCtxSetCurrent(primary));
  }
  const CUstream streams[4] = {CU_STREAM_LEGACY, CU_STREAM_PER_THREAD,
                               reinterpret_cast<CUstream>(blocking),
                               reinterpret_cast<CUstream>(non_blocking)};

  unsigned int* device_stop = nullptr;
  CHECK_CUDA(cudaMalloc(&device_stop, sizeof(unsigned int)));
  cudaStream_t stopper;  // writes device_stop while the spinning kernel runs
  CHECK_CUDA(cudaStreamCreateWithFlags(&stopper, cudaStreamNonBlocking));
  const unsigned int one = 1;
  unsigned int* started_dev = nullptr;
  unsigned int* started = probe::MappedZeroed(&started_dev);

  const SyscallCounts counts = FindSyscallCounts();
  long shim_check = -1;  // ioctls of one cudaMalloc and cudaFree, -1: no shim
  if (counts != nullptr) {
    unsigned long before = 0, after = 0, yields = 0;
    counts(&before, &yields);
    void* block = nullptr;
    CHECK_CUDA(cudaMalloc(&block, 64ull << 20));
    CHECK_CUDA(cudaFree(block));
    counts(&after, &yields);
    shim_check = static_cast<long>(after - before);
  }

  std::string json;
  for (int state = 0; state < kStates; ++state) {
    const BusyState& how = kBusyStates[state];
    const bool busy = how.busy;
    const bool elsewhere = busy && separate && how.may_be_elsewhere;  // in `other`
    cudaStream_t running = how.green ? reinterpret_cast<cudaStream_t>(green_stream) : spin_stream;
    if (busy) {
      *reinterpret_cast<volatile unsigned int*>(stop) = 0;
      *reinterpret_cast<volatile unsigned int*>(started) = 0;
      const int blocks = how.one_block ? 1
                         : how.green   ? static_cast<int>(half_sms.sm.smCount)
                                       : sms;
      if (elsewhere) {
        running = reinterpret_cast<cudaStream_t>(other_stream);
        CHECK_CU(cuCtxSetCurrent(other));
      }
      // Reset on the kernel's own stream, so that the launch follows it.
      if (how.device_flag)
        CHECK_CUDA(cudaMemsetAsync(device_stop, 0, sizeof(unsigned int), running));
      Spin<<<blocks, 256, 0, running>>>(how.device_flag ? device_stop : stop_dev, how.nap_ns,
                                        started_dev);
      CHECK_CUDA(cudaGetLastError());
      if (elsewhere) CHECK_CU(cuCtxSetCurrent(primary));
      const double waited_from = probe::NowUs();
      while (*reinterpret_cast<volatile unsigned int*>(started) == 0) {
        if (probe::NowUs() - waited_from > 10e6) {
          std::fprintf(stderr, "%s: the kernel did not start within 10 s\n", how.name);
          return 1;
        }
      }
    }
    std::vector<double> times[kKinds];
    long not_ready[kKinds] = {};
    unsigned long ioctls[kKinds] = {}, yields[kKinds] = {};  // timed calls' (with the shim)
    rusage cpu_start = {}, cpu_end = {};
    for (int r = 0; r < kWarm + reps; ++r) {
      if (r == kWarm) getrusage(RUSAGE_THREAD, &cpu_start);
      for (int k = 0; k < kKinds; ++k) {
        unsigned long ioctl0 = 0, yield0 = 0, ioctl1 = 0, yield1 = 0;
        if (counts != nullptr) counts(&ioctl0, &yield0);
        const double t0 = probe::NowUs();
        const CUresult answer = k == kSync    ? cuStreamSynchronize(CU_STREAM_LEGACY)
                                : k == kEvent ? cuEventQuery(reinterpret_cast<CUevent>(event))
                                              : cuStreamQuery(streams[k]);
        const double t1 = probe::NowUs();
        if (counts != nullptr && r >= kWarm) {
          counts(&ioctl1, &yield1);
          ioctls[k] += ioctl1 - ioctl0;
          yields[k] += yield1 - yield0;
        }
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
    getrusage(RUSAGE_THREAD, &cpu_end);
    if (busy) {
      *reinterpret_cast<volatile unsigned int*>(stop) = 1;
      CHECK_CUDA(cudaMemcpyAsync(device_stop, &one, sizeof(one), cudaMemcpyHostToDevice, stopper));
      CHECK_CUDA(cudaStreamSynchronize(stopper));
      if (elsewhere) {
        CHECK_CU(cuCtxSetCurrent(other));
        CHECK_CUDA(cudaStreamSynchronize(running));
        CHECK_CU(cuCtxSetCurrent(primary));
      } else {
        CHECK_CUDA(cudaStreamSynchronize(running));
      }
    }
    char line[256];
    json += std::string(state == 0 ? "" : ",\n") + "  \"" + how.name + "\": {";
    for (int k = 0; k < kKinds; ++k) {
      std::snprintf(line, sizeof(line), "%s\"%s_us\": %.3f, \"%s_not_ready\": %ld",
                    k == 0 ? "" : ", ", kKindNames[k], probe::Median(times[k]), kKindNames[k],
                    not_ready[k]);
      json += line;
      if (counts != nullptr) {
        std::snprintf(line, sizeof(line), ", \"%s_ioctls_total\": %lu, \"%s_yields_total\": %lu",
                      kKindNames[k], ioctls[k], kKindNames[k], yields[k]);
        json += line;
      }
    }
    const auto ms = [](const timeval& from, const timeval& to) {
      return (to.tv_sec - from.tv_sec) * 1e3 + (to.tv_usec - from.tv_usec) / 1e3;
    };
    double queries_ms = 0;
    for (int k = 0; k < kKinds; ++k) {
      for (const double t : times[k]) queries_ms += t / 1e3;
    }
    std::snprintf(line, sizeof(line),
                  ", \"cpu_user_ms\": %.2f, \"cpu_system_ms\": %.2f, \"queries_ms\": %.2f",
                  ms(cpu_start.ru_utime, cpu_end.ru_utime),
                  ms(cpu_start.ru_stime, cpu_end.ru_stime), queries_ms);
    json += line;
    json += "}";
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf(
      "{\"probe\": \"stream_query_cost\", \"commit\": \"%s\", \"device\": \"%s\", "
      "\"reps\": %d, \"green_sms\": %u, \"sched\": \"%s\", \"busy_other_context\": "
      "\"%s\", \"shim_malloc_free_ioctls\": %ld,\n%s\n}\n",
      probe::CommitOrUnknown(), prop.name, reps, half_sms.sm.smCount,
      sched != nullptr && *sched != '\0' ? sched : "auto", separate ? "separate" : "primary",
      shim_check, json.c_str());
  return 0;
}
