#include "gpuos/tensor.h"

#include <string>

namespace gpuos {
namespace {

static_assert(static_cast<int>(DType::kF32) == device::kDTypeF32 &&
                  static_cast<int>(DType::kF16) == device::kDTypeF16 &&
                  static_cast<int>(DType::kBF16) == device::kDTypeBF16 &&
                  static_cast<int>(DType::kF64) == device::kDTypeF64 &&
                  static_cast<int>(DType::kI8) == device::kDTypeI8 &&
                  static_cast<int>(DType::kU8) == device::kDTypeU8 &&
                  static_cast<int>(DType::kI32) == device::kDTypeI32 &&
                  static_cast<int>(DType::kI64) == device::kDTypeI64 &&
                  static_cast<int>(DType::kBool) == device::kDTypeBool,
              "gpuos::DType and device::DTypeCode disagree");

// The view must lie inside [address, address + bytes) and its first element
// must be aligned for the dtype.
Status CheckFitsInStorage(const Layout& layout, DType dtype, uint64_t address, size_t bytes) {
  const size_t itemsize = DTypeSize(dtype);
  const uint64_t extent = static_cast<uint64_t>(layout.StorageExtent());
  if (layout.numel() > 0 && extent > bytes / itemsize) {
    return InvalidArgument("a " + std::string(DTypeName(dtype)) + " view with " +
                           layout.ToString() + " needs " + std::to_string(extent) +
                           " elements of storage, but the storage has " + std::to_string(bytes) +
                           " bytes (" + std::to_string(bytes / itemsize) + " elements)");
  }
  if ((address + static_cast<uint64_t>(layout.offset) * itemsize) % itemsize != 0) {
    return InvalidArgument("a " + std::string(DTypeName(dtype)) + " view at address " +
                           std::to_string(address) + " + element offset " +
                           std::to_string(layout.offset) + " is not aligned to " +
                           std::to_string(itemsize) + " bytes");
  }
  return Status::Ok();
}

}  // namespace

Expected<Tensor> Tensor::Empty(std::shared_ptr<DeviceArena> arena, const Dims& sizes, DType dtype,
                               int device) {
  GPUOS_ASSIGN_OR_RETURN(Layout layout, Layout::Contiguous(sizes));
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(layout.numel()), DTypeSize(dtype), &bytes)) {
    return InvalidArgument("a " + std::string(DTypeName(dtype)) + " tensor of shape " +
                           sizes.ToString() + " has more bytes than fit in 64 bits");
  }
  GPUOS_ASSIGN_OR_RETURN(auto storage, Storage::Allocate(std::move(arena), bytes, device));
  return Tensor(std::move(storage), dtype, std::move(layout));
}

Expected<Tensor> Tensor::FromStorage(std::shared_ptr<Storage> storage, DType dtype,
                                     const Layout& layout) {
  if (storage == nullptr) return InvalidArgument("Tensor::FromStorage: null storage");
  GPUOS_ASSIGN_OR_RETURN(Layout checked,
                         Layout::Strided(layout.sizes, layout.strides, layout.offset));
  GPUOS_RETURN_IF_ERROR(CheckFitsInStorage(checked, dtype, storage->address(), storage->nbytes()));
  return Tensor(std::move(storage), dtype, std::move(checked));
}

Expected<Tensor> Tensor::WrapExternal(ExternalMemory memory, DType dtype, const Dims& sizes,
                                      const Dims& strides, int64_t storage_offset) {
  // Validate everything before the storage exists: once it does, dropping it
  // would run the caller's release callback.
  GPUOS_ASSIGN_OR_RETURN(Layout layout, Layout::Strided(sizes, strides, storage_offset));
  GPUOS_RETURN_IF_ERROR(CheckFitsInStorage(layout, dtype, memory.address, memory.bytes)
                            .WithContext("cannot wrap external memory"));
  GPUOS_ASSIGN_OR_RETURN(auto storage, Storage::WrapExternal(std::move(memory)));
  return Tensor(std::move(storage), dtype, std::move(layout));
}

Expected<Tensor> Tensor::WrapExternal(ExternalMemory memory, DType dtype, const Dims& sizes) {
  GPUOS_ASSIGN_OR_RETURN(Layout layout, Layout::Contiguous(sizes));
  return WrapExternal(std::move(memory), dtype, layout.sizes, layout.strides, 0);
}

uint64_t Tensor::data_address() const {
  if (storage_ == nullptr) return 0;
  return storage_->address() + static_cast<uint64_t>(layout_.offset) * itemsize();
}

Status Tensor::CheckDefined(const char* operation) const {
  if (defined()) return Status::Ok();
  return InvalidArgument(std::string(operation) + " of an undefined tensor");
}

Expected<device::TensorDesc> Tensor::ToDesc() const {
  GPUOS_RETURN_IF_ERROR(CheckDefined("ToDesc"));
  if (numel() > 0 && storage_->address() == 0) {
    return InvalidArgument("tensor " + ToString() + " has elements but a null storage address");
  }
  device::TensorDesc desc = {};
  desc.data = data_address();
  desc.dtype = static_cast<int>(dtype_);
  desc.rank = rank();
  desc.numel = numel();
  for (int d = 0; d < rank(); ++d) {
    desc.sizes[d] = layout_.sizes[d];
    desc.strides[d] = layout_.strides[d];
  }
  return desc;
}

std::string Tensor::ToString() const {
  if (!defined()) return "undefined tensor";
  return std::string(DTypeName(dtype_)) + sizes().ToString() + " strides " + strides().ToString() +
         " offset " + std::to_string(storage_offset());
}

}  // namespace gpuos
