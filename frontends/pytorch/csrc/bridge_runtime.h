// The objects behind the C API (gpuos_torch_bridge.h): a runtime opened for
// the PyTorch frontend, and programs built once and run many times.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bridge_program.h"
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

  // Writes each descriptor's address from `addresses` (one per buffer),
  // submits the graph once and waits for it.
  Status Run(const unsigned long long* addresses, std::uint32_t num_buffers,
             std::chrono::microseconds timeout);

  std::uint32_t num_tasks() const { return static_cast<std::uint32_t>(graph_.size()); }
  std::uint32_t num_buffers() const { return num_buffers_; }

 private:
  Program(runtime::Runtime& runtime, std::uint32_t num_buffers)
      : runtime_(&runtime), graph_(runtime), num_buffers_(num_buffers) {}

  runtime::Runtime* runtime_;
  runtime::TaskGraph graph_;
  std::vector<Binding> bindings_;
  std::uint32_t num_buffers_;
};

}  // namespace gpuos::torch_bridge
