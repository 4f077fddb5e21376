// For the runtime's stream and tensor GPU tests: CUDA streams of the
// runtime's context and a host latch, a word in mapped pinned memory that a
// stream waits on (cuStreamWaitValue64) until the test opens it, so that
// work on the stream is held back, deterministically, for as long as a test
// needs.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpuos/cuda_driver.h"
#include "gpuos/status.h"

namespace gpuos::runtime::testing {

// A non-blocking stream. REQUIRES: the runtime's context is current on the
// calling thread (every Runtime call makes it so).
class UserStream {
 public:
  static Expected<std::unique_ptr<UserStream>> Create() {
    GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
    CUstream stream = nullptr;
    GPUOS_RETURN_IF_ERROR(CudaStatus(
        *driver, driver->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    return std::unique_ptr<UserStream>(new UserStream(driver, stream));
  }
  ~UserStream() { (void)driver_->cuStreamDestroy(stream_); }
  UserStream(const UserStream&) = delete;
  UserStream& operator=(const UserStream&) = delete;

  CUstream get() const { return stream_; }
  const CudaDriverApi& driver() const { return *driver_; }
  // CUDA_SUCCESS when all its work is done, CUDA_ERROR_NOT_READY while not.
  CUresult Query() const { return driver_->cuStreamQuery(stream_); }
  Status Synchronize() const {
    return CudaStatus(*driver_, driver_->cuStreamSynchronize(stream_), "cuStreamSynchronize");
  }

 private:
  UserStream(const CudaDriverApi* driver, CUstream stream) : driver_(driver), stream_(stream) {}
  const CudaDriverApi* driver_;
  CUstream stream_;
};

// Declare after the streams it holds back: its destructor opens it and waits
// for them.
class HostLatch {
 public:
  static Expected<std::unique_ptr<HostLatch>> Create() {
    GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
    void* host = nullptr;
    GPUOS_RETURN_IF_ERROR(CudaStatus(
        *driver, driver->cuMemHostAlloc(&host, sizeof(std::uint64_t), CU_MEMHOSTALLOC_DEVICEMAP),
        "cuMemHostAlloc(latch)"));
    *static_cast<std::uint64_t*>(host) = 0;
    CUdeviceptr device = 0;
    Status mapped = CudaStatus(*driver, driver->cuMemHostGetDevicePointer(&device, host, 0),
                               "cuMemHostGetDevicePointer(latch)");
    if (!mapped.ok()) {
      (void)driver->cuMemFreeHost(host);
      return mapped;
    }
    return std::unique_ptr<HostLatch>(new HostLatch(driver, host, device));
  }
  ~HostLatch() {
    Open();
    for (CUstream stream : held_) (void)driver_->cuStreamSynchronize(stream);
    (void)driver_->cuMemFreeHost(host_);
  }
  HostLatch(const HostLatch&) = delete;
  HostLatch& operator=(const HostLatch&) = delete;

  // Work enqueued on `stream` after this starts once Open() was called.
  Status HoldBack(CUstream stream) {
    held_.push_back(stream);
    return CudaStatus(*driver_, driver_->cuStreamWaitValue64(stream, device_, 1, 0),
                      "cuStreamWaitValue64(latch)");
  }
  void Open() {
    std::atomic_ref<std::uint64_t>(*static_cast<std::uint64_t*>(host_))
        .store(1, std::memory_order_release);
  }

 private:
  HostLatch(const CudaDriverApi* driver, void* host, CUdeviceptr device)
      : driver_(driver), host_(host), device_(device) {}
  const CudaDriverApi* driver_;
  void* host_;
  CUdeviceptr device_;
  std::vector<CUstream> held_;
};

inline std::uint32_t FloatBits(float value) {
  std::uint32_t bits = 0;
  static_assert(sizeof(bits) == sizeof(value));
  __builtin_memcpy(&bits, &value, sizeof(bits));
  return bits;
}

}  // namespace gpuos::runtime::testing
