#include "jit_gpu_util.h"

namespace gpuos::registry::testing {
namespace {

// Device memory freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer(const CudaDriverApi& driver, std::size_t bytes) : driver_(driver) {
    status_ =
        CudaStatus(driver, driver.cuMemAlloc(&pointer_, bytes == 0 ? 16 : bytes), "cuMemAlloc");
  }
  ~DeviceBuffer() {
    if (pointer_ != 0) (void)driver_.cuMemFree(pointer_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  const Status& status() const { return status_; }
  CUdeviceptr get() const { return pointer_; }

 private:
  const CudaDriverApi& driver_;
  CUdeviceptr pointer_ = 0;
  Status status_;
};

}  // namespace

GpuSession::GpuSession() {
  auto driver = LoadCudaDriver();
  if (!driver.ok()) {
    skip_reason_ = driver.status().message();
    return;
  }
  auto arch = DetectGpuArch(0);
  if (!arch.ok()) {
    skip_reason_ = arch.status().message();
    return;
  }
  driver_ = *driver;
  arch_ = *arch;
  Status status = CudaStatus(*driver_, driver_->cuDeviceGet(&device_, 0), "cuDeviceGet");
  if (status.ok()) {
    status = CudaStatus(*driver_, driver_->cuDevicePrimaryCtxRetain(&context_, device_),
                        "cuDevicePrimaryCtxRetain");
  }
  if (status.ok()) {
    status = CudaStatus(*driver_, driver_->cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  }
  if (!status.ok()) error_ = status.ToString();
}

GpuSession::~GpuSession() {
  if (driver_ == nullptr) return;
  if (module_ != nullptr) (void)driver_->cuModuleUnload(module_);
  if (context_ != nullptr) (void)driver_->cuDevicePrimaryCtxRelease(device_);
}

void GpuSession::LoadImageOf(const std::vector<OperatorSpec>& ops, LinkMode mode) {
  if (!error_.empty()) return;
  JitOptions options;
  options.arch = arch_;
  options.link_mode = mode;
  options.progress = ProgressMode::kQuiet;
  InMemoryBuildCache cache;
  auto image = JitBuilder(&cache, options).Build(ops);
  if (!image.ok()) {
    error_ = image.status().ToString();
    return;
  }
  image_ = std::move(image).value();
  Status status = CudaStatus(*driver_, driver_->cuModuleLoadData(&module_, image_.cubin.data()),
                             "cuModuleLoadData");
  CUdeviceptr version_address = 0;
  size_t version_bytes = 0;
  if (status.ok()) {
    status = CudaStatus(*driver_,
                        driver_->cuModuleGetGlobal(&version_address, &version_bytes, module_,
                                                   kImageAbiVersionSymbol),
                        "cuModuleGetGlobal");
  }
  unsigned int version = 0;
  if (status.ok()) {
    status = CudaStatus(*driver_, driver_->cuMemcpyDtoH(&version, version_address, sizeof(version)),
                        "cuMemcpyDtoH");
  }
  if (status.ok() && version != image_.abi_version) {
    status = AbiMismatch("image ABI version " + std::to_string(version) + ", expected " +
                         std::to_string(image_.abi_version));
  }
  CUfunction function = nullptr;
  if (status.ok()) {
    status =
        CudaStatus(*driver_, driver_->cuModuleGetFunction(&function, module_, kWorkerKernelSymbol),
                   "cuModuleGetFunction");
  }
  if (!status.ok()) {
    error_ = status.ToString();
    return;
  }
  function_ = function;
}

Expected<device::WorkerStatus> GpuSession::Run(const std::vector<device::TaskDesc>& tasks,
                                               const std::vector<HostTensor*>& tensors,
                                               unsigned blocks) {
  const CudaDriverApi& d = *driver_;
  std::vector<std::unique_ptr<DeviceBuffer>> storage;
  std::vector<device::TensorDesc> descs;
  for (HostTensor* tensor : tensors) {
    storage.push_back(std::make_unique<DeviceBuffer>(d, tensor->storage.size()));
    GPUOS_RETURN_IF_ERROR(storage.back()->status());
    GPUOS_RETURN_IF_ERROR(CudaStatus(
        d, d.cuMemcpyHtoD(storage.back()->get(), tensor->storage.data(), tensor->storage.size()),
        "cuMemcpyHtoD"));
    device::TensorDesc desc = {};
    desc.data = storage.back()->get();
    desc.dtype = static_cast<int>(tensor->dtype);
    desc.rank = static_cast<int>(tensor->sizes.size());
    desc.numel = tensor->numel();
    for (std::size_t k = 0; k < tensor->sizes.size(); ++k) {
      desc.sizes[k] = tensor->sizes[k];
      desc.strides[k] = tensor->strides[k];
    }
    descs.push_back(desc);
  }
  DeviceBuffer task_buffer(d, tasks.size() * sizeof(device::TaskDesc));
  DeviceBuffer desc_buffer(d, descs.size() * sizeof(device::TensorDesc));
  DeviceBuffer status_buffer(d, sizeof(device::WorkerStatus));
  GPUOS_RETURN_IF_ERROR(task_buffer.status());
  GPUOS_RETURN_IF_ERROR(desc_buffer.status());
  GPUOS_RETURN_IF_ERROR(status_buffer.status());
  if (!tasks.empty()) {
    GPUOS_RETURN_IF_ERROR(CudaStatus(
        d, d.cuMemcpyHtoD(task_buffer.get(), tasks.data(), tasks.size() * sizeof(device::TaskDesc)),
        "cuMemcpyHtoD"));
  }
  if (!descs.empty()) {
    GPUOS_RETURN_IF_ERROR(CudaStatus(
        d,
        d.cuMemcpyHtoD(desc_buffer.get(), descs.data(), descs.size() * sizeof(device::TensorDesc)),
        "cuMemcpyHtoD"));
  }
  device::WorkerStatus status = {};
  GPUOS_RETURN_IF_ERROR(
      CudaStatus(d, d.cuMemcpyHtoD(status_buffer.get(), &status, sizeof(status)), "cuMemcpyHtoD"));

  device::WorkerParams params = {};
  params.tasks = task_buffer.get();
  params.tensors = desc_buffer.get();
  params.status = status_buffer.get();
  params.num_tasks = static_cast<unsigned int>(tasks.size());
  params.num_tensors = static_cast<unsigned int>(descs.size());
  void* args[] = {&params};
  GPUOS_RETURN_IF_ERROR(CudaStatus(d,
                                   d.cuLaunchKernel(function_, blocks, 1, 1, device::kWorkerThreads,
                                                    1, 1, 0, nullptr, args, nullptr),
                                   "cuLaunchKernel"));
  GPUOS_RETURN_IF_ERROR(CudaStatus(d, d.cuCtxSynchronize(), "running the worker"));
  GPUOS_RETURN_IF_ERROR(
      CudaStatus(d, d.cuMemcpyDtoH(&status, status_buffer.get(), sizeof(status)), "cuMemcpyDtoH"));
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    GPUOS_RETURN_IF_ERROR(CudaStatus(
        d,
        d.cuMemcpyDtoH(tensors[k]->storage.data(), storage[k]->get(), tensors[k]->storage.size()),
        "cuMemcpyDtoH"));
  }
  return status;
}

}  // namespace gpuos::registry::testing
