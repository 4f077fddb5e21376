// The gpuos runtime: one persistent worker per GPU fed through a queue in
// mapped host memory (docs/runtime.md).
//
//   auto runtime = Runtime::Open({.repository_path = "ops.db"});   // builds/loads the image
//   TaskGraph graph(**runtime);
//   auto a = graph.Add("add", DType::kF32, {x, y, z});
//   auto b = graph.Add("relu", DType::kF32, {z, z}, {}, {*a});
//   auto done = (*runtime)->Submit(graph);
//   GPUOS_RETURN_IF_ERROR(done->Wait());
//
// The worker parks itself after `idle_park` without work and is relaunched
// by the next Submit, so other CUDA users (a device synchronize, cuMemFree)
// are held up at most that long. Device memory from Allocate is freed by
// Free only once the worker is parked (cuMemFree would block on it).
//
// Thread safety: every Runtime method may be called from any thread; calls
// that change state are serialized. Futures may be waited on from any thread.
// A Runtime must outlive its futures and graphs.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuos/dtype.h"
#include "gpuos/registry/kernel_image.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/runtime/task_graph.h"
#include "gpuos/status.h"

namespace gpuos::runtime {

struct RuntimeConfig {
  // The operator repository whose current operator set (current and previous
  // versions) makes the kernel image; also the build cache.
  std::string repository_path;
  // When not empty: build the image from these instead (tests, benchmarks);
  // repository_path, when set, is then used as the build cache only.
  std::vector<registry::OperatorSpec> operators;
  int device = 0;
  std::string arch;  // "" = the device's
  std::chrono::microseconds idle_park{200};
  // Worker grid; 0 = one block per SM. Capped at the blocks that fit on the
  // device at once (all must be resident).
  unsigned int blocks = 0;
  // Queue sizes. A graph must fit: tasks <= task_capacity, distinct tensors
  // <= tensor_capacity, edges <= successor_capacity. When they are full,
  // Submit waits (backpressure) until older submissions finish.
  unsigned int task_capacity = 1u << 16;
  unsigned int tensor_capacity = 1u << 16;
  unsigned int successor_capacity = 1u << 18;
  unsigned int submission_capacity = 1024;
};

struct RuntimeStats {
  std::uint64_t submissions = 0;
  std::uint64_t tasks_submitted = 0;
  std::uint64_t tiles_completed = 0;     // by the device (no-ops included)
  std::uint64_t launches = 0;            // worker grids launched
  std::uint64_t relaunches = 0;          // launches after the first
  std::uint64_t parks = 0;               // grids that parked by themselves
  std::uint64_t backpressure_waits = 0;  // Submits that had to wait for room
  std::uint64_t max_queue_depth = 0;     // most submissions in flight at once
  std::uint64_t max_tasks_in_flight = 0;
  unsigned int worker_blocks = 0;
  double worker_sm_clock_mhz = 0;  // measured by the worker over its last run (diagnostics)
  std::map<std::string, std::uint64_t> tasks_per_operator;  // "add f32" -> count
};

// A device allocation owned by the runtime.
struct DeviceBuffer {
  std::uint64_t address = 0;  // CUdeviceptr
  std::size_t bytes = 0;
};

// One operator instantiation as the runtime dispatches it.
struct OperatorRef {
  std::string name;
  registry::SemVer version;
  DType dtype = DType::kF32;
  std::optional<DType> out_dtype;  // U of operators with out_dtypes (cast f32 -> i64)
  std::uint32_t slot = 0;          // in the image's operator table
  std::uint32_t logical = 0;       // alias-table id: what tasks carry
  const registry::OperatorSpec* spec = nullptr;
};

class RuntimeImpl;

// The completion of one submission. Copyable; cheap.
class Future {
 public:
  Future() = default;

  // Waits until the submission finished, at most `timeout`. Errors:
  // Unavailable when it did not finish in time (the worker is running;
  // the message says how many of its tasks are done) or the worker died;
  // InvalidArgument / FailedPrecondition when one of its tasks failed
  // (the message names the task and the worker error).
  Status Wait(std::chrono::microseconds timeout = std::chrono::seconds(60)) const;
  bool Ready() const;
  std::uint64_t sequence() const { return sequence_; }

 private:
  friend class RuntimeImpl;
  RuntimeImpl* runtime_ = nullptr;
  std::uint64_t sequence_ = 0;  // 0: nothing to wait for
  std::uint32_t first_task_id_ = 0;
  std::uint32_t task_count_ = 0;
};

class Runtime {
 public:
  // Opens device `config.device`, builds (or takes from the cache) the
  // kernel image and allocates the queue; the worker starts with the first
  // Submit. Errors: Unavailable("no CUDA device: ...") without a driver or
  // GPU; InvalidArgument for a bad config; the repository's and the JIT's
  // errors.
  static Expected<std::unique_ptr<Runtime>> Open(const RuntimeConfig& config);
  ~Runtime();  // Shutdown()
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The newest version of `op` for `dtype` in the image. NotFound names
  // what the image has.
  Expected<OperatorRef> Resolve(const std::string& op, DType dtype,
                                std::optional<DType> out_dtype = std::nullopt) const;

  // Device memory (cuMemAlloc; fine while the worker runs). Free is
  // deferred until the worker is parked.
  Expected<DeviceBuffer> Allocate(std::size_t bytes);
  void Free(const DeviceBuffer& buffer);
  // Synchronous copies on the runtime's copy stream (never the legacy
  // stream, which would wait for the worker). Not ordered with tasks: wait
  // for a task's future before reading what it wrote.
  Status CopyToDevice(std::uint64_t address, const void* source, std::size_t bytes);
  Status CopyToHost(void* destination, std::uint64_t address, std::size_t bytes);

  // Publishes `graph` and returns its future; relaunches a parked worker.
  // Waits while the queue is full. Errors: InvalidArgument when the graph
  // cannot fit the queue even when empty; Unavailable after a shutdown or
  // when the worker died.
  Expected<Future> Submit(const TaskGraph& graph);

  // Waits for every submission so far.
  Status Synchronize(std::chrono::microseconds timeout = std::chrono::seconds(60));
  // Waits until the worker grid has exited (parked), then runs deferred
  // frees. Unavailable on timeout.
  Status WaitUntilParked(std::chrono::microseconds timeout = std::chrono::seconds(10));

  RuntimeStats stats() const;
  const registry::KernelImage& image() const;
  // Address and size of a `__device__` variable of the loaded image (for
  // diagnostics, e.g. gpuos/device/phase_timing.cuh); NotFound when the image
  // has no such symbol. Read or write it with CopyToHost / CopyToDevice.
  Expected<DeviceBuffer> ImageGlobal(const std::string& symbol) const;
  std::string device_name() const;

  // Waits for outstanding work (up to 10 s), stops and parks the worker,
  // frees everything. Idempotent; later calls fail with Unavailable.
  Status Shutdown();

 private:
  explicit Runtime(std::unique_ptr<RuntimeImpl> impl);
  friend class TaskGraph;
  std::unique_ptr<RuntimeImpl> impl_;
};

}  // namespace gpuos::runtime
