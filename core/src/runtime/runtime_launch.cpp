// Tile launches (docs/runtime.md, "Tile launches"): one tiled task run as a
// kernel of its own on the caller's stream (device/src/worker.cu,
// gpuos_tiles_worker) instead of through the persistent worker's queue.
#include <algorithm>
#include <cstring>
#include <string>

#include "runtime_impl.h"

namespace gpuos::runtime {

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
  for (std::uint32_t logical : graph.logical_ops()) {
    if (logical != 0 && table_.Slot(logical) == 0) {
      return FailedPrecondition(table_.Unresolvable(logical));
    }
  }
  // The function of the image in use; an epoch switch replaces module_.
  if (tiles_worker_module_ != module_ || tiles_worker_ == nullptr) {
    CUfunction function = nullptr;
    GPUOS_RETURN_IF_ERROR(
        Cuda(driver_->cuModuleGetFunction(&function, module_, registry::kTilesWorkerKernelSymbol),
             "cuModuleGetFunction(gpuos_tiles_worker)"));
    tiles_worker_ = function;
    tiles_worker_module_ = module_;
    tile_launch_modules_.push_back(module_);
  }
  device::TileLaunchParams params;
  std::memset(&params, 0, sizeof(params));
  params.task = BoundTask(tasks.front());
  params.task.task_id = next_task_id_++;
  std::copy(tensors.begin(), tensors.end(), params.table);
  params.num_tensors = static_cast<unsigned int>(tensors.size());
  params.status = status_address;
  const unsigned int tiles = std::max(params.task.num_tiles, 1u);
  // One block a tile: the task's tiles do not wait for one another (a
  // caller's contract, Runtime::LaunchTiles), so any grid is safe; a grid
  // dimension holds 2^31 - 1 blocks.
  const unsigned int grid = std::min(tiles, 0x7fffffffu);
  void* args[] = {&params};
  GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuLaunchKernel(tiles_worker_, grid, 1, 1,
                                                     device::kWorkerThreads, 1, 1, 0, stream,
                                                     args, nullptr),
                             "cuLaunchKernel(gpuos_tiles_worker)"));
  ++stats_.tile_launches;
  return Status::Ok();
}

Status Runtime::LaunchTiles(const TaskGraph& graph, CUstream_st* stream,
                            std::uint64_t status_address) {
  return impl_->LaunchTiles(graph, stream, status_address);
}

}  // namespace gpuos::runtime
