#include "task_layout.h"

namespace gpuos::runtime {
namespace {

bool DenseWithShape(const device::TensorDesc& t, const device::TensorDesc& shape) {
  if (t.rank != shape.rank || t.numel != shape.numel) return false;
  long long expected = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (t.sizes[d] != shape.sizes[d]) return false;
    if (t.sizes[d] != 1 && t.strides[d] != expected) return false;
    // Raw descriptors may carry any sizes: an overflow is no dense layout.
    if (t.sizes[d] < 0 || __builtin_mul_overflow(expected, t.sizes[d], &expected)) return false;
  }
  return true;
}

}  // namespace

unsigned short ElementwiseLayoutFlags(const std::vector<device::TensorDesc>& tensors,
                                      std::size_t first_output, long long items) {
  const device::TensorDesc& shape = tensors[first_output];
  bool dense = shape.rank >= 0 && shape.rank <= device::kMaxRank && items <= shape.numel;
  for (std::size_t k = 0; dense && k < tensors.size(); ++k) {
    dense = DenseWithShape(tensors[k], shape);
  }
  unsigned int flags = device::kTaskLayoutChecked;
  if (dense) flags |= device::kTaskDenseElementwise;
  return static_cast<unsigned short>(flags);
}

}  // namespace gpuos::runtime
