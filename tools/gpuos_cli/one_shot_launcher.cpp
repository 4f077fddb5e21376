#include "one_shot_launcher.h"

#include <algorithm>

#include "gpuos/registry/codegen.h"

namespace gpuos::cli {
namespace {

namespace dev = gpuos::device;

const registry::OperatorSpec* FindSpec(const std::vector<registry::OperatorSpec>& ops,
                                       const registry::ImageEntry& entry) {
  for (const auto& op : ops) {
    if (op.name == entry.op_name && op.version == entry.version) return &op;
  }
  return nullptr;
}

}  // namespace

#define GPUOS_CU(call, what) GPUOS_RETURN_IF_ERROR(CudaStatus(*d_, (call), what))

Expected<std::unique_ptr<OneShotLauncher>> OneShotLauncher::Load(
    const registry::KernelImage& image, const std::vector<registry::OperatorSpec>& ops) {
  GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
  std::unique_ptr<OneShotLauncher> launcher(new OneShotLauncher(driver));
  const CudaDriverApi* d_ = driver;
  CUdevice device = 0;
  CUcontext context = nullptr;
  GPUOS_CU(d_->cuDeviceGet(&device, 0), "cuDeviceGet");
  GPUOS_CU(d_->cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  GPUOS_CU(d_->cuCtxSetCurrent(context), "cuCtxSetCurrent");
  GPUOS_CU(d_->cuModuleLoadData(&launcher->module_, image.cubin.data()),
           "cuModuleLoadData(kernel image)");
  GPUOS_CU(
      d_->cuModuleGetFunction(&launcher->worker_, launcher->module_, registry::kWorkerKernelSymbol),
      "cuModuleGetFunction(gpuos_worker)");
  GPUOS_CU(d_->cuStreamCreate(&launcher->stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  GPUOS_ASSIGN_OR_RETURN(launcher->status_, launcher->Allocate(sizeof(dev::WorkerStatus)));
  launcher->image_ = &image;
  launcher->ops_ = &ops;
  return launcher;
}

OneShotLauncher::~OneShotLauncher() {
  if (stream_ != nullptr) d_->cuStreamSynchronize(stream_);
  for (CUdeviceptr p : allocations_) d_->cuMemFree(p);
  if (stream_ != nullptr) d_->cuStreamDestroy(stream_);
  if (module_ != nullptr) d_->cuModuleUnload(module_);
}

Expected<CUdeviceptr> OneShotLauncher::Allocate(std::size_t bytes) {
  CUdeviceptr p = 0;
  GPUOS_CU(d_->cuMemAlloc(&p, std::max<std::size_t>(bytes, 16)), "cuMemAlloc");
  allocations_.push_back(p);
  return p;
}

// Copies and fills go through the launcher's own stream, so they are ordered
// with its launches (the legacy stream does not order a non-blocking one).
Status OneShotLauncher::Upload(CUdeviceptr to, const void* from, std::size_t bytes) {
  GPUOS_CU(d_->cuMemcpyHtoDAsync(to, from, bytes, stream_), "cuMemcpyHtoDAsync");
  return CudaStatus(*d_, d_->cuStreamSynchronize(stream_), "cuStreamSynchronize(upload)");
}

Status OneShotLauncher::Download(void* to, CUdeviceptr from, std::size_t bytes) {
  GPUOS_CU(d_->cuMemcpyDtoHAsync(to, from, bytes, stream_), "cuMemcpyDtoHAsync");
  return CudaStatus(*d_, d_->cuStreamSynchronize(stream_), "cuStreamSynchronize(download)");
}

Status OneShotLauncher::Poison(CUdeviceptr at, std::size_t bytes) {
  const std::vector<unsigned char> nan(bytes, 0xff);
  return Upload(at, nan.data(), bytes);
}

Status OneShotLauncher::Prepare(const std::vector<device::TensorDesc>& tensors,
                                const std::vector<LaunchStep>& steps, long long items_per_task) {
  GPUOS_ASSIGN_OR_RETURN(tensor_table_, Allocate(tensors.size() * sizeof(dev::TensorDesc)));
  GPUOS_RETURN_IF_ERROR(
      Upload(tensor_table_, tensors.data(), tensors.size() * sizeof(dev::TensorDesc)));
  num_tensors_ = static_cast<unsigned int>(tensors.size());
  steps_.clear();
  tasks_per_run_ = 0;
  for (const auto& step : steps) {
    const registry::ImageEntry* entry = image_->FindLatest(step.op, step.dtype);
    if (entry == nullptr) {
      return NotFound("the kernel image has no " + std::string(DTypeName(step.dtype)) + " '" +
                      step.op + "'; publish the built-in packs");
    }
    const registry::OperatorSpec* spec = FindSpec(*ops_, *entry);
    if (spec == nullptr) return Internal("no spec for image entry " + entry->symbol);
    GPUOS_ASSIGN_OR_RETURN(auto slots, registry::EncodeAttributeSlots(*spec, step.attributes));
    // Work items are the elements of the first output (the last tensor for
    // the operators the demo uses).
    const long long items = tensors.at(step.tensors.back()).numel;
    std::vector<dev::TaskDesc> tasks;
    for (long long begin = 0; begin < items; begin += items_per_task) {
      dev::TaskDesc task = {};
      task.opcode = entry->slot;
      task.task_id = static_cast<unsigned int>(tasks.size());
      task.num_tensors = static_cast<unsigned short>(step.tensors.size());
      task.begin = begin;
      task.end = std::min(begin + items_per_task, items);
      for (std::size_t k = 0; k < step.tensors.size(); ++k) task.tensors[k] = step.tensors[k];
      for (std::size_t k = 0; k < slots.size(); ++k) task.scalars[k].bits = slots[k];
      task.dependency_counter = dev::kNoDependencyCounter;
      tasks.push_back(task);
    }
    PreparedStep prepared{step.op, 0, static_cast<unsigned int>(tasks.size())};
    GPUOS_ASSIGN_OR_RETURN(prepared.tasks, Allocate(tasks.size() * sizeof(dev::TaskDesc)));
    GPUOS_RETURN_IF_ERROR(
        Upload(prepared.tasks, tasks.data(), tasks.size() * sizeof(dev::TaskDesc)));
    tasks_per_run_ += prepared.num_tasks;
    steps_.push_back(std::move(prepared));
  }
  return Status::Ok();
}

Status OneShotLauncher::Run() {
  static const dev::WorkerStatus kZero = {};
  GPUOS_CU(d_->cuMemcpyHtoDAsync(status_, &kZero, sizeof(kZero), stream_),
           "cuMemcpyHtoDAsync(status)");
  for (const auto& step : steps_) {
    dev::WorkerParams params = {};
    params.tasks = step.tasks;
    params.tensors = tensor_table_;
    params.status = status_;
    params.num_tasks = step.num_tasks;
    params.num_tensors = num_tensors_;
    void* args[] = {&params};
    GPUOS_CU(d_->cuLaunchKernel(worker_, step.num_tasks, 1, 1, dev::kWorkerThreads, 1, 1, 0,
                                stream_, args, nullptr),
             "cuLaunchKernel(gpuos_worker) for " + step.op);
  }
  GPUOS_CU(d_->cuStreamSynchronize(stream_), "running the launched operators");
  dev::WorkerStatus status = {};
  GPUOS_RETURN_IF_ERROR(Download(&status, status_, sizeof(status)));
  if (status.error != dev::kWorkerOk) {
    return Internal("the worker reported error " + std::to_string(status.error) + " on task " +
                    std::to_string(status.task_id) + " (detail " + std::to_string(status.detail) +
                    ")");
  }
  if (status.completed != tasks_per_run_) {
    return Internal("the worker completed " + std::to_string(status.completed) + " of " +
                    std::to_string(tasks_per_run_) + " tasks");
  }
  return Status::Ok();
}

}  // namespace gpuos::cli
