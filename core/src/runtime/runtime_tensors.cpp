// Tensors from the runtime (docs/runtime.md, "Tensors"): a DeviceArena over
// cuMemAlloc, wrapping memory other libraries own, copies, and the arena's
// deferred frees tied to the queue: a free made while submissions may use
// the memory is tagged with the newest submission and becomes reusable once
// every submission up to it has finished.
#include <string>

#include "runtime_impl.h"

namespace gpuos::runtime {
namespace {

std::string Hex(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), kDigits[value & 15]);
    value >>= 4;
  } while (value != 0);
  return "0x" + out;
}

// Blocks for the arena: cuMemAlloc / cuMemFree in the device's primary
// context, which the allocator retains itself, so that tensors may outlive
// the Runtime (their memory stays valid until the last one is dropped).
class CudaDeviceAllocator final : public DeviceAllocator {
 public:
  static Expected<std::shared_ptr<CudaDeviceAllocator>> Create(const CudaDriverApi* driver,
                                                               CUdevice device, int ordinal) {
    CUcontext context = nullptr;
    GPUOS_RETURN_IF_ERROR(CudaStatus(*driver, driver->cuDevicePrimaryCtxRetain(&context, device),
                                     "cuDevicePrimaryCtxRetain"));
    return std::shared_ptr<CudaDeviceAllocator>(
        new CudaDeviceAllocator(driver, device, context, ordinal));
  }
  ~CudaDeviceAllocator() override { (void)driver_->cuDevicePrimaryCtxRelease(device_); }
  CudaDeviceAllocator(const CudaDeviceAllocator&) = delete;
  CudaDeviceAllocator& operator=(const CudaDeviceAllocator&) = delete;

  Expected<uint64_t> Allocate(size_t bytes) override {
    GPUOS_RETURN_IF_ERROR(MakeCurrent());
    CUdeviceptr address = 0;
    GPUOS_RETURN_IF_ERROR(CudaStatus(*driver_, driver_->cuMemAlloc(&address, bytes),
                                     "cuMemAlloc(" + std::to_string(bytes) + " bytes)"));
    return static_cast<uint64_t>(address);
  }
  Status Free(uint64_t address, size_t /*bytes*/) override {
    GPUOS_RETURN_IF_ERROR(MakeCurrent());
    return CudaStatus(*driver_, driver_->cuMemFree(address), "cuMemFree(" + Hex(address) + ")");
  }
  std::string Name() const override { return "cuda device " + std::to_string(ordinal_); }

 private:
  CudaDeviceAllocator(const CudaDriverApi* driver, CUdevice device, CUcontext context, int ordinal)
      : driver_(driver), device_(device), context_(context), ordinal_(ordinal) {}
  Status MakeCurrent() const {
    return CudaStatus(*driver_, driver_->cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  }

  const CudaDriverApi* driver_;
  CUdevice device_;
  CUcontext context_;
  int ordinal_;
};

}  // namespace

int RuntimeImpl::DeviceOrdinal() const {
  const int cached = device_ordinal_.load(std::memory_order_relaxed);
  if (cached >= 0) return cached;
  // A CUdevice is the ordinal on every driver seen, but the API does not
  // promise it: look it up.
  int ordinal = static_cast<int>(device_);
  int count = 0;
  if (driver_->cuDeviceGetCount(&count) == CUDA_SUCCESS) {
    for (int i = 0; i < count; ++i) {
      CUdevice device = 0;
      if (driver_->cuDeviceGet(&device, i) == CUDA_SUCCESS && device == device_) {
        ordinal = i;
        break;
      }
    }
  }
  device_ordinal_.store(ordinal, std::memory_order_relaxed);
  return ordinal;
}

Expected<std::shared_ptr<DeviceArena>> RuntimeImpl::TensorArena() {
  if (shut_down_) return Unavailable("the runtime was shut down");
  // Without the lock once created: a Submit waiting for room holds it.
  if (tensor_memory_ready_.load(std::memory_order_acquire)) return tensor_memory_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return Unavailable("the runtime was shut down");
  if (tensor_memory_ == nullptr) {
    GPUOS_ASSIGN_OR_RETURN(auto allocator,
                           CudaDeviceAllocator::Create(driver_, device_, DeviceOrdinal()));
    auto arena = std::make_shared<DeviceArena>(std::move(allocator));
    // Submissions already in flight may hold raw descriptors of memory freed
    // from now on.
    if (!in_flight_.empty()) arena->NoteSubmission(next_sequence_ - 1);
    tensor_memory_ = std::move(arena);
    tensor_memory_ready_.store(true, std::memory_order_release);
  }
  return tensor_memory_;
}

void RuntimeImpl::NoteTensorUse(std::uint64_t sequence) {
  if (tensor_memory_ == nullptr) return;
  RecycleTensorMemory(/*worker_parked=*/false);
  tensor_memory_->NoteSubmission(sequence);
}

void RuntimeImpl::RecycleTensorMemory(bool worker_parked) {
  if (tensor_memory_ == nullptr) return;
  Reclaim();  // drops the storages finished submissions kept alive
  // Submissions finish out of order: everything below the oldest one still
  // in flight is done.
  const std::uint64_t done_through =
      in_flight_.empty() ? next_sequence_ - 1 : in_flight_.front().sequence - 1;
  if (worker_parked && in_flight_.empty()) tensor_memory_->SetWorkerMayRun(false);
  tensor_memory_->ReleaseCompletedThrough(done_through);
}

Expected<Tensor> RuntimeImpl::Wrap(std::uint64_t address, DType dtype, const Dims& sizes,
                                   const Dims& strides, std::function<void()> release,
                                   std::int64_t storage_offset) {
  const std::string what =
      "cannot wrap device address " + Hex(address) + " as " + DTypeName(dtype) + sizes.ToString();
  if (shut_down_) return Unavailable(what + ": the runtime was shut down");
  Status counted = CheckedNumel(sizes).status();
  if (!counted.ok()) return counted.WithContext(what);
  const Dims actual_strides = strides.empty() ? ContiguousStrides(sizes) : strides;
  Expected<Layout> layout = Layout::Strided(sizes, actual_strides, storage_offset);
  if (!layout.ok()) return layout.status().WithContext(what);
  const int ordinal = DeviceOrdinal();
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(layout->StorageExtent()), DTypeSize(dtype),
                             &bytes)) {
    return InvalidArgument(what + ": the view spans more bytes than fit in 64 bits");
  }
  if (layout->numel() > 0) {
    GPUOS_RETURN_IF_ERROR(MakeCurrent());
    int owner = -1;
    const CUresult result =
        driver_->cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address);
    if (result != CUDA_SUCCESS) {
      return InvalidArgument(what + ": the CUDA driver does not know this address (" +
                             CudaStatus(*driver_, result, "cuPointerGetAttribute").message() +
                             "); wrap device memory (cudaMalloc, cuMemAlloc, a CUDA tensor's "
                             "data_ptr()), not host memory");
    }
    if (owner != ordinal) {
      return InvalidArgument(what + ": it is memory of CUDA device " + std::to_string(owner) +
                             ", and this runtime runs on device " + std::to_string(ordinal));
    }
  }
  ExternalMemory memory;
  memory.address = address;
  memory.bytes = bytes;
  memory.device = ordinal;
  memory.release = std::move(release);
  Expected<Tensor> tensor =
      Tensor::WrapExternal(std::move(memory), dtype, sizes, layout->strides, storage_offset);
  if (!tensor.ok()) return tensor.status().WithContext(what);
  return tensor;
}

Status RuntimeImpl::CopyTensor(bool to_device, const Tensor& tensor, void* host,
                               std::size_t bytes) {
  const std::string what = to_device ? "CopyToDevice" : "CopyToHost";
  if (!tensor.defined()) return InvalidArgument(what + ": the tensor is undefined");
  if (tensor.storage()->device() != DeviceOrdinal()) {
    return InvalidArgument(what + ": the tensor lives on CUDA device " +
                           std::to_string(tensor.storage()->device()) +
                           ", and this runtime runs on device " + std::to_string(DeviceOrdinal()));
  }
  if (!tensor.IsContiguous()) {
    return InvalidArgument(what + ": the tensor " + tensor.ToString() +
                           " is not contiguous; copy it with the `contiguous` operator first");
  }
  if (bytes != tensor.nbytes()) {
    return InvalidArgument(what + ": " + std::to_string(bytes) + " bytes given for the tensor " +
                           tensor.ToString() + ", which has " + std::to_string(tensor.nbytes()));
  }
  if (bytes == 0) return Status::Ok();
  if (host == nullptr) return InvalidArgument(what + ": the host pointer is null");
  return Copy(to_device, tensor.data_address(), host, bytes);
}

Expected<std::size_t> RuntimeImpl::TrimTensorMemory() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (tensor_memory_ == nullptr) return std::size_t{0};
  if (worker_abandoned_) {
    return FailedPrecondition("the worker did not stop at Shutdown; its memory stays in place");
  }
  if (!shut_down_) {
    GPUOS_RETURN_IF_ERROR(MakeCurrent());
    if (generation_ != 0 && !GridIdle()) {
      return FailedPrecondition(
          "cannot return tensor memory to the driver while the worker runs (cuMemFree would "
          "wait for it); call WaitUntilParked first");
    }
  }
  RecycleTensorMemory(/*worker_parked=*/true);
  if (!in_flight_.empty()) {
    return FailedPrecondition(
        "cannot return tensor memory to the driver: " + std::to_string(in_flight_.size()) +
        " submissions are still in flight; wait for them first");
  }
  return tensor_memory_->Trim();
}

// Runtime: forwarding.

Expected<Tensor> Runtime::Empty(const Dims& sizes, DType dtype) {
  GPUOS_ASSIGN_OR_RETURN(std::shared_ptr<DeviceArena> arena, impl_->TensorArena());
  return Tensor::Empty(std::move(arena), sizes, dtype, impl_->DeviceOrdinal());
}

Expected<Tensor> Runtime::Wrap(std::uint64_t address, DType dtype, const Dims& sizes,
                               const Dims& strides, std::function<void()> release,
                               std::int64_t storage_offset) {
  return impl_->Wrap(address, dtype, sizes, strides, std::move(release), storage_offset);
}

Status Runtime::CopyToDevice(const Tensor& destination, const void* source, std::size_t bytes) {
  return impl_->CopyTensor(true, destination, const_cast<void*>(source), bytes);
}

Status Runtime::CopyToHost(void* destination, const Tensor& source, std::size_t bytes) {
  return impl_->CopyTensor(false, source, destination, bytes);
}

Expected<std::shared_ptr<DeviceArena>> Runtime::TensorArena() { return impl_->TensorArena(); }

Expected<std::size_t> Runtime::TrimTensorMemory() { return impl_->TrimTensorMemory(); }

}  // namespace gpuos::runtime
