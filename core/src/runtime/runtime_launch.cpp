// Tile launches (docs/runtime.md, "Tile launches"): one tiled task run as a
// kernel of its own on the caller's stream (device/src/worker.cu,
// gpuos_tiles_worker_<N>) instead of through the persistent worker's queue.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <string>

#include "runtime_impl.h"

namespace gpuos::runtime {
namespace {

// Fills the parameter of the launcher for tables of kTable descriptors and
// launches it.
template <unsigned int kTable>
CUresult LaunchWith(const CudaDriverApi& driver, CUfunction function, const device::TaskDesc& task,
                    const std::vector<device::TensorDesc>& tensors, std::uint64_t operator_function,
                    std::uint64_t status, CUstream stream) {
  device::TileLaunchParamsOf<kTable> params;
  std::memset(&params, 0, sizeof(params));
  params.task = task;
  std::copy(tensors.begin(), tensors.end(), params.table);
  params.num_tensors = static_cast<unsigned int>(tensors.size());
  params.status = status;
  params.function = operator_function;
  // One block a tile: the task's tiles do not wait for one another (the
  // caller's contract, Runtime::LaunchTiles), so any grid is safe.
  const unsigned int grid = std::min(std::max(task.num_tiles, 1u), 0x7fffffffu);
  void* args[] = {&params};
  return driver.cuLaunchKernel(function, grid, 1, 1, device::kWorkerThreads, 1, 1, 0, stream, args,
                               nullptr);
}

}  // namespace

Status RuntimeImpl::LoadTileLaunchers() {
  if (tiles_worker_module_ == module_) return Status::Ok();
  for (std::size_t i = 0; i < std::size(device::kLaunchTableSizes); ++i) {
    const std::string symbol = registry::TilesWorkerKernelSymbol(device::kLaunchTableSizes[i]);
    GPUOS_RETURN_IF_ERROR(
        Cuda(driver_->cuModuleGetFunction(&tile_launchers_[i], module_, symbol.c_str()),
             "cuModuleGetFunction(" + symbol + ")"));
  }
  // The operator table's function addresses, fixed for a loaded image: a
  // launch passes its operator's, so no block resolves it (two dependent
  // loads) before its first tile.
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuModuleGetGlobal(&address, &bytes, module_, registry::kOpTableSymbol),
           "cuModuleGetGlobal(gpuos_op_table)"));
  std::vector<std::uint64_t> functions(bytes / sizeof(std::uint64_t));
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuMemcpyDtoHAsync(functions.data(), address,
                                      functions.size() * sizeof(std::uint64_t), copy_stream_),
           "reading the image's operator table"));
  GPUOS_RETURN_IF_ERROR(
      Cuda(driver_->cuStreamSynchronize(copy_stream_), "reading the image's operator table"));
  launch_functions_ = std::move(functions);
  tiles_worker_module_ = module_;
  if (std::find(tile_launch_modules_.begin(), tile_launch_modules_.end(), module_) ==
      tile_launch_modules_.end()) {
    tile_launch_modules_.push_back(module_);
  }
  return Status::Ok();
}

Status RuntimeImpl::LaunchTiles(const TaskGraph& graph, CUstream stream,
                                std::uint64_t status_address) {
  const auto& tasks = graph.tasks();
  const auto& tensors = graph.tensors();
  if (tasks.size() != 1) {
    return InvalidArgument("LaunchTiles runs a graph of one task; this one has " +
                           std::to_string(tasks.size()));
  }
  if (tensors.size() > device::kLaunchTableMax) {
    return InvalidArgument("LaunchTiles carries at most " +
                           std::to_string(device::kLaunchTableMax) +
                           " tensor descriptors; the graph has " + std::to_string(tensors.size()));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return Unavailable("the runtime was shut down");
  GPUOS_RETURN_IF_ERROR(MakeCurrent());
  GPUOS_RETURN_IF_ERROR(CheckServed(graph));
  GPUOS_RETURN_IF_ERROR(LoadTileLaunchers());
  device::TaskDesc task = BoundTask(tasks.front());
  task.task_id = next_task_id_++;
  if (task.opcode == 0) return Status::Ok();  // a no-op: nothing to run
  // What the worker checks before it calls an operator (gpuos_task_operator).
  if (task.opcode >= launch_functions_.size() || launch_functions_[task.opcode] == 0) {
    return Internal("LaunchTiles: operator slot " + std::to_string(task.opcode) +
                    " is empty in the loaded image");
  }
  if (task.num_tensors > static_cast<unsigned int>(device::kMaxTaskTensors)) {
    return InvalidArgument("LaunchTiles: a task of " + std::to_string(task.num_tensors) +
                           " tensors");
  }
  for (unsigned int k = 0; k < task.num_tensors; ++k) {
    if (task.tensors[k] < 0 || static_cast<std::size_t>(task.tensors[k]) >= tensors.size()) {
      return InvalidArgument("LaunchTiles: tensor " + std::to_string(k) +
                             " of the task is outside the graph's table");
    }
  }
  const std::uint64_t function = launch_functions_[task.opcode];
  const CUresult launched =
      tensors.size() <= device::kLaunchTableSizes[0]
          ? LaunchWith<device::kLaunchTableSizes[0]>(*driver_, tile_launchers_[0], task, tensors,
                                                     function, status_address, stream)
          : LaunchWith<device::kLaunchTableSizes[1]>(*driver_, tile_launchers_[1], task, tensors,
                                                     function, status_address, stream);
  GPUOS_RETURN_IF_ERROR(Cuda(launched, "cuLaunchKernel(gpuos_tiles_worker)"));
  ++stats_.tile_launches;
  return Status::Ok();
}

WorkerActivity RuntimeImpl::Activity() const {
  std::lock_guard<std::mutex> lock(mutex_);
  WorkerActivity activity;
  activity.requests = worker_requests_;
  if (!shut_down_) activity.running = GridRunning();
  return activity;
}

Status RuntimeImpl::ParkNow(std::chrono::microseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return Unavailable("the runtime was shut down");
  GPUOS_RETURN_IF_ERROR(MakeCurrent());
  Reclaim();
  if (!in_flight_.empty()) {
    return Unavailable("ParkNow: " + std::to_string(in_flight_.size()) +
                       " submissions are in flight; the worker keeps serving them");
  }
  if (generation_ == 0 || GridIdle()) return Status::Ok();
  GPUOS_RETURN_IF_ERROR(ParkIdleGrid(std::chrono::steady_clock::now() + timeout, timeout));
  ++stats_.early_parks;
  RunDeferredFrees();
  return Status::Ok();
}

Status Runtime::LaunchTiles(const TaskGraph& graph, CUstream_st* stream,
                            std::uint64_t status_address) {
  return impl_->LaunchTiles(graph, stream, status_address);
}
WorkerActivity Runtime::Activity() const { return impl_->Activity(); }
Status Runtime::ParkNow(std::chrono::microseconds timeout) { return impl_->ParkNow(timeout); }

}  // namespace gpuos::runtime
