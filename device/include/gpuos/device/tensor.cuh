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
