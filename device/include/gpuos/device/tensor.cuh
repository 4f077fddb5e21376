// Typed, strided access to a tensor described by a TensorDesc, so operator
// code never computes an offset by hand.
//
//   TensorAccessor<const float> a(desc);
//   a(i, j)          element at coordinates (i, j): sum of index * stride
//   a[i]             element number i in row-major (logical) order
//   a.load(i)        a[i] converted to the compute type (float for halves)
//   out.store(i, v)  out[i] = v, converted to the element type
//
// A stride of 0 broadcasts: every index along that dimension reads the same
// element. No bounds checks: callers stay inside sizes().
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/dtype_traits.cuh"

namespace gpuos {
namespace device {

// True when the strides are those of a dense row-major tensor (dimensions of
// size 1 may carry any stride). Defined in device/src/indexing.cu.
__device__ bool IsContiguous(const TensorDesc& desc);

// Storage offset of the element with row-major number `linear`. Defined in
// device/src/indexing.cu (shared by every operator of an image).
__device__ long long LinearToOffset(const TensorDesc& desc, long long linear);

// Coordinates (one per dimension, outermost first) of the element with
// row-major number `linear` in a tensor with `desc`'s sizes. `coords` has
// room for desc.rank entries.
__device__ inline void LinearToCoords(const TensorDesc& desc, long long linear, long long* coords) {
  for (int d = desc.rank - 1; d >= 0; --d) {
    coords[d] = linear % desc.sizes[d];
    linear /= desc.sizes[d];
  }
}

template <typename E>
class TensorAccessor {
 public:
  using element_type = E;
  using value_type = typename RemoveConst<E>::type;
  using compute_type = compute_type_t<value_type>;

  __device__ explicit TensorAccessor(const TensorDesc& desc)
      : desc_(&desc), data_(reinterpret_cast<E*>(desc.data)) {}

  __device__ int rank() const { return desc_->rank; }
  __device__ long long numel() const { return desc_->numel; }
  __device__ long long size(int d) const { return desc_->sizes[d]; }
  __device__ long long stride(int d) const { return desc_->strides[d]; }
  __device__ E* data() const { return data_; }
  __device__ const TensorDesc& desc() const { return *desc_; }

  // Element at coordinates (one per dimension, outermost first).
  template <typename... Index>
  __device__ E& operator()(Index... index) const {
    const long long coords[] = {static_cast<long long>(index)..., 0};
    long long offset = 0;
    for (int d = 0; d < static_cast<int>(sizeof...(Index)); ++d) {
      offset += coords[d] * desc_->strides[d];
    }
    return data_[offset];
  }

  // Element number `linear` in row-major order over sizes().
  __device__ E& operator[](long long linear) const { return data_[LinearToOffset(*desc_, linear)]; }

  // Element at a storage offset (from the strides).
  __device__ E& at_offset(long long offset) const { return data_[offset]; }

  // Storage offset of element number `linear` in row-major order.
  __device__ long long offset_of(long long linear) const { return LinearToOffset(*desc_, linear); }
  // Storage offset of the element at `coords` (rank() entries).
  __device__ long long offset_at(const long long* coords) const {
    long long offset = 0;
    for (int d = 0; d < desc_->rank; ++d) offset += coords[d] * desc_->strides[d];
    return offset;
  }
  // The last dimension's size and stride (1 and 0 for a scalar): rows for
  // operators that work along the last dimension.
  __device__ long long last_size() const {
    return desc_->rank > 0 ? desc_->sizes[desc_->rank - 1] : 1;
  }
  __device__ long long last_stride() const {
    return desc_->rank > 0 ? desc_->strides[desc_->rank - 1] : 0;
  }
  // Whether the view has exactly the sizes of `other`.
  __device__ bool same_shape(const TensorDesc& other) const {
    if (other.rank != desc_->rank) return false;
    for (int d = 0; d < desc_->rank; ++d) {
      if (other.sizes[d] != desc_->sizes[d]) return false;
    }
    return true;
  }

  __device__ compute_type load(long long linear) const {
    return convert<compute_type>((*this)[linear]);
  }
  __device__ void store(long long linear, compute_type value) const {
    (*this)[linear] = convert<value_type>(value);
  }

 private:
  const TensorDesc* desc_;
  E* data_;
};

}  // namespace device
}  // namespace gpuos
