// The CUDA driver API, opened at run time.
//
// gpuos never links libcuda: the library is dlopen()ed ("libcuda.so.1") on
// first use and its entry points are resolved into a table of function
// pointers. A binary therefore starts, and every CPU-only path works, on a
// machine without an NVIDIA driver; GPU entry points return
// Unavailable("no CUDA driver: ...") or Unavailable("no CUDA device: ...")
// there (docs/decisions.md, "The CUDA driver is opened at run time").
//
// Adding an entry point: append one X(cuName) line to
// GPUOS_CUDA_DRIVER_FUNCTIONS. The member keeps the name cuda.h gives it and
// therefore its type and its versioned symbol: cuda.h #defines cuMemAlloc to
// cuMemAlloc_v2, so the member (spelled `cuMemAlloc` in code) and the symbol
// looked up are both cuMemAlloc_v2.
//
// Thread safety: LoadCudaDriver() may be called from any thread; the table it
// returns is immutable and lives until the process exits.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "gpuos/status.h"

// Every driver entry point gpuos uses. All must resolve for the load to
// succeed (a driver older than the CUDA 13 headers is reported, not used).
// clang-format off
#define GPUOS_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuGetErrorName)                    \
  X(cuGetErrorString)                  \
  X(cuInit)                            \
  X(cuDriverGetVersion)                \
  X(cuDeviceGetCount)                  \
  X(cuDeviceGet)                       \
  X(cuDeviceGetName)                   \
  X(cuDeviceGetAttribute)              \
  X(cuDeviceTotalMem)                  \
  X(cuDevicePrimaryCtxRetain)          \
  X(cuDevicePrimaryCtxRelease)         \
  X(cuCtxSetCurrent)                   \
  X(cuCtxGetCurrent)                   \
  X(cuCtxSynchronize)                  \
  X(cuCtxGetLimit)                     \
  X(cuCtxSetLimit)                     \
  X(cuModuleLoadData)                  \
  X(cuModuleUnload)                    \
  X(cuModuleGetFunction)               \
  X(cuModuleGetGlobal)                 \
  X(cuFuncGetAttribute)                \
  X(cuFuncLoad)                        \
  X(cuLaunchKernel)                    \
  X(cuStreamCreate)                    \
  X(cuStreamDestroy)                   \
  X(cuStreamSynchronize)               \
  X(cuMemAlloc)                        \
  X(cuMemFree)                         \
  X(cuMemsetD8)                        \
  X(cuMemcpyHtoD)                      \
  X(cuMemcpyDtoH)                      \
  X(cuMemcpyHtoDAsync)                 \
  X(cuMemcpyDtoHAsync)                 \
  X(cuMemHostAlloc)                    \
  X(cuMemFreeHost)                     \
  X(cuMemHostGetDevicePointer)         \
  X(cuStreamQuery)                     \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuStreamBeginCapture)              \
  X(cuStreamEndCapture)                \
  X(cuGraphInstantiate)                \
  X(cuGraphLaunch)                     \
  X(cuGraphExecDestroy)                \
  X(cuGraphDestroy)                    \
  X(cuStreamWriteValue64)              \
  X(cuStreamWaitValue64)               \
  X(cuMemsetD32Async)                  \
  X(cuPointerGetAttribute)
// clang-format on

namespace gpuos {

// The resolved driver. Members are plain function pointers with cuda.h's
// signatures; call them as driver.cuInit(0). Never null in a table returned
// by LoadCudaDriver() / OpenCudaDriver().
struct CudaDriverApi {
#define GPUOS_CUDA_DRIVER_MEMBER_(name) decltype(&::name) name = nullptr;
  GPUOS_CUDA_DRIVER_FUNCTIONS(GPUOS_CUDA_DRIVER_MEMBER_)
#undef GPUOS_CUDA_DRIVER_MEMBER_

  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000
  std::string library;     // what was opened ("libcuda.so.1")
  void* handle = nullptr;  // dlopen handle; never closed
};

// The process-wide driver: opens libcuda.so.1, resolves every entry point and
// calls cuInit(0), once; later calls return the same table or the same error.
// Errors: Unavailable("no CUDA driver: ...") when the library is missing, is
// the toolkit's stub, or lacks an entry point; Unavailable("no CUDA device:
// ...") when cuInit reports no usable device.
Expected<const CudaDriverApi*> LoadCudaDriver();

// Opens `library` (a file name or path for dlopen) without caching, resolves
// every entry point and calls cuInit(0). For tests and diagnostics; the
// handle is never closed (a driver cannot be unloaded safely).
Expected<std::unique_ptr<CudaDriverApi>> OpenCudaDriver(const std::string& library);

// OK for CUDA_SUCCESS; otherwise a Status naming `what` and the driver's
// error name and text. CUDA_ERROR_NO_DEVICE and friends map to Unavailable,
// CUDA_ERROR_INVALID_IMAGE / NO_BINARY_FOR_GPU to CompileError, the rest to
// Internal.
Status CudaStatus(const CudaDriverApi& driver, CUresult result, const std::string& what);

// Number of CUDA devices; Unavailable when there is no driver or none.
Expected<int> CudaDeviceCount();

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;                     // "NVIDIA H200"
  int compute_major = 0;                // 9
  int compute_minor = 0;                // 0
  int multiprocessors = 0;              // 132
  unsigned long long total_memory = 0;  // bytes
  int driver_version = 0;               // 13000
};

// Facts about device `ordinal`. Errors: Unavailable without a driver or
// device; InvalidArgument when `ordinal` is out of range.
Expected<CudaDeviceInfo> QueryCudaDevice(int ordinal);

// The NVRTC/nvJitLink architecture name of device `ordinal`: "sm_" + major +
// minor ("sm_90", "sm_80"). Plain sm_XX, never the arch-specific "a" form:
// choose sm_90a explicitly (--arch / GPUOS_ARCH). Errors as QueryCudaDevice.
Expected<std::string> DetectGpuArch(int ordinal);

}  // namespace gpuos
