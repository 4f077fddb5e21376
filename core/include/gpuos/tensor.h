// Tensor: a typed, strided view of a Storage (docs/tensors.md).
//
// A Tensor is (storage, dtype, layout). View operations (Permute, Slice,
// Expand, View, ...) return new Tensors over the same storage without
// copying; none of them touches device memory. Dimensions may be negative and
// count from the end, as in PyTorch. Every error is a Status naming the
// operation, the tensor's shape and the bad argument.
//
// What the device sees is a device::TensorDesc (ToDesc): the address of the
// view's first element, dtype code, rank, numel, sizes and strides.
//
// Thread safety: a Tensor is a value (copying it shares the storage); the
// storage's reference count is atomic, so views may cross threads freely.
#pragma once

#include <cstdint>
#include <memory>

#include "gpuos/device/abi.h"
#include "gpuos/device_memory.h"
#include "gpuos/dtype.h"
#include "gpuos/shape.h"
#include "gpuos/status.h"
#include "gpuos/storage.h"

namespace gpuos {

// Stop value meaning "to the end" for Tensor::Slice.
inline constexpr int64_t kSliceEnd = INT64_MAX;

class Tensor {
 public:
  // An undefined tensor (no storage); only defined() may be called on it.
  Tensor() = default;

  // A new dense row-major tensor from `arena`; contents are uninitialised.
  static Expected<Tensor> Empty(std::shared_ptr<DeviceArena> arena, const Dims& sizes, DType dtype,
                                int device = 0);

  // A view of `storage` with `layout` (in elements of `dtype`). Error when
  // the layout is invalid or reaches past the end of the storage.
  static Expected<Tensor> FromStorage(std::shared_ptr<Storage> storage, DType dtype,
                                      const Layout& layout);

  // Wraps memory owned elsewhere (e.g. a PyTorch tensor's data_ptr) without
  // copying. `memory.address` is the storage's byte 0; the view starts at
  // element `storage_offset`. memory.release runs once when the last view
  // is dropped; on error it does not run (the caller keeps ownership).
  static Expected<Tensor> WrapExternal(ExternalMemory memory, DType dtype, const Dims& sizes,
                                       const Dims& strides, int64_t storage_offset = 0);
  // As above, dense row-major.
  static Expected<Tensor> WrapExternal(ExternalMemory memory, DType dtype, const Dims& sizes);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Layout& layout() const { return layout_; }
  const Dims& sizes() const { return layout_.sizes; }
  const Dims& strides() const { return layout_.strides; }
  int64_t storage_offset() const { return layout_.offset; }
  int rank() const { return layout_.rank(); }
  int64_t numel() const { return layout_.numel(); }
  size_t itemsize() const { return DTypeSize(dtype_); }
  // numel() * itemsize(): the bytes of the elements (not of the span they cover).
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(); }
  bool IsContiguous() const { return layout_.IsContiguous(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // Device address of element (0, ..., 0): storage address + offset * itemsize.
  uint64_t data_address() const;

  // ---- Views (same storage, no copy) ----

  // Dimensions reordered: result dimension i is this tensor's dimension
  // order[i]. `order` must name every dimension once.
  Expected<Tensor> Permute(const Dims& order) const;
  Expected<Tensor> Transpose(int64_t dim0, int64_t dim1) const;
  // Python slicing along `dim`: start and stop may be negative (counted from
  // the end) and are clamped to [0, size]; step must be positive.
  Expected<Tensor> Slice(int64_t dim, int64_t start, int64_t stop = kSliceEnd,
                         int64_t step = 1) const;
  // Element `index` along `dim`, which is removed (rank - 1).
  Expected<Tensor> Select(int64_t dim, int64_t index) const;
  // A new dimension of size 1 before position `dim` (-rank-1 <= dim <= rank).
  Expected<Tensor> Unsqueeze(int64_t dim) const;
  // Removes `dim` if its size is 1; otherwise returns the same view (PyTorch).
  Expected<Tensor> Squeeze(int64_t dim) const;
  // Removes every dimension of size 1.
  Tensor Squeeze() const;
  // torch.expand: `sizes` has at least rank() entries; -1 keeps a size;
  // dimensions of size 1 and new leading dimensions get stride 0.
  Expected<Tensor> Expand(const Dims& sizes) const;
  // Broadcast to `shape` (NumPy rules; stride 0 where a size grows).
  Expected<Tensor> ExpandTo(const Dims& shape) const;
  // The same elements with new sizes (one may be -1, inferred), when the
  // strides allow it without a copy (torch.view's rule). Otherwise
  // InvalidArgument saying a contiguous copy is needed first.
  Expected<Tensor> View(const Dims& sizes) const;

  // ---- Device form ----

  // The descriptor tasks carry. Error when the tensor is undefined, or when
  // it has elements but its storage has a null address.
  Expected<device::TensorDesc> ToDesc() const;

  // "f32[2, 3] strides [3, 1] offset 0"
  std::string ToString() const;

 private:
  Tensor(std::shared_ptr<Storage> storage, DType dtype, Layout layout)
      : storage_(std::move(storage)), dtype_(dtype), layout_(std::move(layout)) {}
  Tensor WithLayout(Layout layout) const { return Tensor(storage_, dtype_, std::move(layout)); }
  Status CheckDefined(const char* operation) const;

  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::kF32;
  Layout layout_;
};

}  // namespace gpuos
