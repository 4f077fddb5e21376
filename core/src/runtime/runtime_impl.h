// The runtime's internals: device resources (runtime_device.cpp), the queue
// protocol on the host side (runtime_queue.cpp). docs/runtime.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "gpuos/cuda_driver.h"
#include "gpuos/device/queue.h"
#include "gpuos/registry/kernel_image.h"
#include "gpuos/runtime/runtime.h"

namespace gpuos::runtime {

// FIFO allocator over [0, capacity) entries: allocations are released in the
// order they were made (submissions are reclaimed in order).
class RingArena {
 public:
  explicit RingArena(std::uint32_t capacity = 0) : capacity_(capacity) {}
  // The first entry of `count` free contiguous entries, or -1 when full.
  long long Allocate(std::uint32_t count);
  void ReleaseOldest();
  void ReleaseNewest();  // undoes the last Allocate
  std::uint32_t capacity() const { return capacity_; }

 private:
  std::uint32_t capacity_;
  std::deque<std::pair<std::uint32_t, std::uint32_t>> live_;  // [begin, end), oldest first
};

struct InFlight {
  std::uint64_t sequence = 0;
  bool has_tasks = false, has_tensors = false, has_successors = false;
  std::uint32_t tasks = 0;
  std::uint32_t ready_entries = 0;
};

// Key of logical_by_name_.
std::tuple<std::string, int, int> LogicalKey(const std::string& op, DType dtype,
                                             std::optional<DType> out_dtype);

class RuntimeImpl {
 public:
  ~RuntimeImpl();

  Status Init(const RuntimeConfig& config);
  Status MakeCurrent() const;
  Status Cuda(CUresult result, const std::string& what) const {
    return CudaStatus(*driver_, result, what);
  }

  // runtime_queue.cpp
  Expected<Future> Submit(const TaskGraph& graph);
  Status Wait(const Future& future, std::chrono::microseconds timeout);
  bool Done(std::uint64_t sequence) const;
  Status Synchronize(std::chrono::microseconds timeout);
  Status WaitUntilParked(std::chrono::microseconds timeout);
  RuntimeStats Stats() const;
  Status Shutdown();

  // runtime_device.cpp
  Expected<DeviceBuffer> Allocate(std::size_t bytes);
  void Free(const DeviceBuffer& buffer);
  Status Copy(bool to_device, std::uint64_t address, void* host, std::size_t bytes);
  Expected<OperatorRef> Resolve(const std::string& op, DType dtype,
                                std::optional<DType> out_dtype) const;
  const OperatorRef* ByLogical(std::uint32_t logical) const;
  Expected<DeviceBuffer> ImageGlobal(const std::string& symbol) const;

  const registry::KernelImage& image() const { return image_; }
  const std::string& device_name() const { return device_name_; }
  unsigned int blocks() const { return blocks_; }

 private:
  Status LoadImage(const RuntimeConfig& config);
  Status AllocateQueue(const RuntimeConfig& config);
  // REQUIRES mutex_. Launches a grid when none runs (or the last parked).
  Status EnsureWorker();
  // REQUIRES mutex_. Releases the arenas of finished submissions, in order.
  void Reclaim();
  // REQUIRES mutex_ and no grid running.
  void RunDeferredFrees();
  bool GridIdle() const;  // the worker stream has nothing running
  Status WorkerError(std::uint32_t first_task_id, std::uint32_t count) const;

  std::uint64_t LoadDone(std::uint32_t slot) const;

  const CudaDriverApi* driver_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction queue_worker_ = nullptr;
  CUstream stream_ = nullptr;       // the worker's, non-blocking
  CUstream copy_stream_ = nullptr;  // copies, non-blocking
  std::string device_name_;
  unsigned int blocks_ = 0;

  registry::KernelImage image_;
  std::vector<registry::OperatorSpec> specs_;
  std::vector<OperatorRef> operators_;  // index = logical id - 1
  // (operator, dtype, out_dtype or -1) -> logical id.
  std::map<std::tuple<std::string, int, int>, std::uint32_t> logical_by_name_;

  // Mapped host memory and device memory of the queue (queue.h).
  void* host_block_ = nullptr;
  CUdeviceptr device_block_ = 0;
  device::QueueControl* control_ = nullptr;
  device::Submission* submissions_ = nullptr;
  std::uint64_t* done_ = nullptr;
  device::TaskDesc* staged_tasks_ = nullptr;
  device::TensorDesc* staged_tensors_ = nullptr;
  std::uint32_t* staged_successors_ = nullptr;
  device::QueueParams params_ = {};

  mutable std::mutex mutex_;
  // Set once by Shutdown(); read without the mutex by Wait/Ready/Copy.
  std::atomic<bool> shut_down_{false};
  // Shutdown() gave up on a worker that would not stop: its memory stays.
  bool worker_abandoned_ = false;
  RingArena task_arena_, tensor_arena_, successor_arena_;
  std::uint32_t ready_reserved_ = 0;
  std::deque<InFlight> in_flight_;
  std::uint64_t next_sequence_ = 1;
  std::uint32_t next_task_id_ = 1;
  std::uint64_t generation_ = 0;  // of the last launch; 0 = none yet
  std::vector<CUdeviceptr> allocations_;
  std::vector<CUdeviceptr> deferred_frees_;
  RuntimeStats stats_;
};

}  // namespace gpuos::runtime
