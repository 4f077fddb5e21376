// The objects behind the C API (gpuos_torch_bridge.h): a runtime opened for
// the PyTorch frontend, and programs built once and run many times.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "bridge_program.h"
#include "gpuos/cuda_driver.h"
#include "gpuos/runtime/runtime.h"
#include "gpuos/runtime/task_graph.h"
#include "gpuos/status.h"

namespace gpuos::torch_bridge {

struct OpenOptions {
  int device = 0;
  // When set: serve this repository's current operator set; otherwise the
  // built-in packs, with `cache_path` ("" = the default) as build cache.
  std::string repository_path;
  std::string cache_path;
  unsigned int trace_capacity = 0;  // RuntimeConfig::trace_capacity
};

// The default build cache of the built-in packs' image:
// <gpuos data directory>/pytorch-build-cache.db (docs/configuration.md).
std::string DefaultCachePath();

Expected<std::unique_ptr<runtime::Runtime>> OpenRuntime(const OpenOptions& options);

// One lowered graph: a task graph built once with placeholder addresses, and
// for each of its tensor descriptors the buffer and byte offset it is bound
// to at every run. Not thread safe; the runtime must outlive it.
class Program {
 public:
  static Expected<std::unique_ptr<Program>> Create(runtime::Runtime& runtime,
                                                   const ProgramSpec& spec);

  // Binds the addresses and submits the graph ordered on `stream` (nullptr:
  // the legacy default stream): it starts after the work enqueued there so
  // far, and work enqueued there later starts after it (the stream waits
  // for the submission's completion word; no host wait). The first half is
  // a host synchronize of `stream`, and only when it has unfinished work:
  // a gate (SubmitOptions::wait_for) can deadlock, because the worker does
  // not park while a graph waits at its gate and the stream's kernels may
  // need the SMs the worker holds (a cuBLAS matmul on PyTorch's default
  // stream did, on the H100 at b0e5d84). Returns without waiting for the
  // graph (except on a device without 64-bit stream memory operations,
  // where it waits for it, at most 60 s). Errors: the driver's, the
  // runtime's Submit and StreamWaitFor errors, and the error of an earlier
  // launch that finished with one (task errors surface at the next Launch,
  // as CUDA's do).
  Status Launch(const unsigned long long* addresses, std::uint32_t num_buffers, CUstream stream);

  // Runtime::KeepWarm of the program's runtime.
  Status KeepWarm() { return runtime_->KeepWarm(); }

  std::uint32_t num_tasks() const { return static_cast<std::uint32_t>(graph_.size()); }
  std::uint32_t num_buffers() const { return num_buffers_; }

 private:
  Program(runtime::Runtime& runtime, std::uint32_t num_buffers)
      : runtime_(&runtime), graph_(runtime), num_buffers_(num_buffers) {}

  Status Bind(const unsigned long long* addresses, std::uint32_t num_buffers);

  runtime::Runtime* runtime_;
  runtime::TaskGraph graph_;
  std::deque<runtime::Future> pending_;  // launched, not yet seen finished; oldest first
  std::vector<Binding> bindings_;
  std::uint32_t num_buffers_;
};

}  // namespace gpuos::torch_bridge
