#include "gpuos/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace gpuos {
namespace {

#define GPUOS_CUDA_STRINGIFY_INNER_(x) #x
// Expands cuda.h's versioning macros first: cuMemAlloc -> "cuMemAlloc_v2".
#define GPUOS_CUDA_STRINGIFY_(x) GPUOS_CUDA_STRINGIFY_INNER_(x)

std::string DlError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dlopen error";
}

std::string ErrorText(const CudaDriverApi& driver, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (driver.cuGetErrorName == nullptr || driver.cuGetErrorName(result, &name) != CUDA_SUCCESS) {
    name = nullptr;
  }
  if (driver.cuGetErrorString == nullptr ||
      driver.cuGetErrorString(result, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  std::string out =
      name != nullptr ? std::string(name) : "CUresult " + std::to_string(static_cast<int>(result));
  if (text != nullptr) out += std::string(" (") + text + ")";
  return out;
}

Status ResolveAll(CudaDriverApi& driver) {
#define GPUOS_CUDA_RESOLVE_(name)                                                                 \
  driver.name =                                                                                   \
      reinterpret_cast<decltype(driver.name)>(dlsym(driver.handle, GPUOS_CUDA_STRINGIFY_(name))); \
  if (driver.name == nullptr) {                                                                   \
    return Unavailable(std::string("no CUDA driver: ") + driver.library +                         \
                       " lacks " GPUOS_CUDA_STRINGIFY_(name) " (" + DlError() +                   \
                       "); install an NVIDIA driver for CUDA 13 or newer");                       \
  }
  GPUOS_CUDA_DRIVER_FUNCTIONS(GPUOS_CUDA_RESOLVE_)
#undef GPUOS_CUDA_RESOLVE_
  return Status::Ok();
}

}  // namespace

Status CudaStatus(const CudaDriverApi& driver, CUresult result, const std::string& what) {
  if (result == CUDA_SUCCESS) return Status::Ok();
  const std::string message = what + " failed: " + ErrorText(driver, result);
  switch (result) {
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_OUT_OF_MEMORY:
      return Unavailable(message);
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return CompileError(message);
    default:
      return Internal(message);
  }
}

Expected<std::unique_ptr<CudaDriverApi>> OpenCudaDriver(const std::string& library) {
  auto driver = std::make_unique<CudaDriverApi>();
  driver->library = library;
  dlerror();
  driver->handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (driver->handle == nullptr) {
    return Unavailable("no CUDA driver: " + library + " not found (" + DlError() +
                       "); install the NVIDIA driver, or run on a machine "
                       "with a GPU");
  }
  GPUOS_RETURN_IF_ERROR(ResolveAll(*driver));
  const CUresult init = driver->cuInit(0);
  if (init == CUDA_ERROR_STUB_LIBRARY) {
    return Unavailable("no CUDA driver: " + library +
                       " is the CUDA toolkit's stub library, not a driver; "
                       "remove the stub directory from the library path");
  }
  if (init != CUDA_SUCCESS) {
    return Unavailable("no CUDA device: cuInit failed: " + ErrorText(*driver, init));
  }
  GPUOS_RETURN_IF_ERROR(CudaStatus(*driver, driver->cuDriverGetVersion(&driver->driver_version),
                                   "cuDriverGetVersion"));
  return driver;
}

Expected<const CudaDriverApi*> LoadCudaDriver() {
  // The outcome, success or error, is decided once: retrying dlopen on every
  // call would only repeat the same failure more slowly.
  static std::once_flag once;
  static std::unique_ptr<CudaDriverApi> driver;
  static Status error;
  std::call_once(once, [] {
    auto opened = OpenCudaDriver("libcuda.so.1");
    if (opened.ok()) {
      driver = std::move(opened).value();
    } else {
      error = opened.status();
    }
  });
  if (driver == nullptr) return error;
  return static_cast<const CudaDriverApi*>(driver.get());
}

Expected<int> CudaDeviceCount() {
  GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
  int count = 0;
  GPUOS_RETURN_IF_ERROR(CudaStatus(*driver, driver->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) {
    return Unavailable("no CUDA device: the driver reports 0 devices");
  }
  return count;
}

Expected<CudaDeviceInfo> QueryCudaDevice(int ordinal) {
  GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
  GPUOS_ASSIGN_OR_RETURN(const int count, CudaDeviceCount());
  if (ordinal < 0 || ordinal >= count) {
    return InvalidArgument("no CUDA device " + std::to_string(ordinal) + ": the driver reports " +
                           std::to_string(count) + " device(s), numbered from 0");
  }
  CUdevice device = 0;
  GPUOS_RETURN_IF_ERROR(CudaStatus(*driver, driver->cuDeviceGet(&device, ordinal), "cuDeviceGet"));
  CudaDeviceInfo info;
  info.ordinal = ordinal;
  info.driver_version = driver->driver_version;
  char name[256] = {};
  GPUOS_RETURN_IF_ERROR(CudaStatus(*driver, driver->cuDeviceGetName(name, sizeof(name) - 1, device),
                                   "cuDeviceGetName"));
  info.name = name;
  struct {
    CUdevice_attribute attribute;
    int* out;
  } const queries[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info.compute_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info.compute_minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info.multiprocessors},
  };
  for (const auto& query : queries) {
    GPUOS_RETURN_IF_ERROR(
        CudaStatus(*driver, driver->cuDeviceGetAttribute(query.out, query.attribute, device),
                   "cuDeviceGetAttribute"));
  }
  size_t total = 0;
  GPUOS_RETURN_IF_ERROR(
      CudaStatus(*driver, driver->cuDeviceTotalMem(&total, device), "cuDeviceTotalMem"));
  info.total_memory = total;
  return info;
}

Expected<std::string> DetectGpuArch(int ordinal) {
  GPUOS_ASSIGN_OR_RETURN(const CudaDeviceInfo info, QueryCudaDevice(ordinal));
  return "sm_" + std::to_string(info.compute_major) + std::to_string(info.compute_minor);
}

}  // namespace gpuos
