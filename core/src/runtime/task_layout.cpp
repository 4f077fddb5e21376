#include "task_layout.h"

#include <optional>

#include "gpuos/shape.h"

namespace gpuos::runtime {
namespace {

// The layout of a raw descriptor, when it is a valid one (rank, sizes and
// strides checked as for any view; raw descriptors may carry anything).
std::optional<Layout> LayoutOf(const device::TensorDesc& t) {
  if (t.rank < 0 || t.rank > device::kMaxRank) return std::nullopt;
  Dims sizes, strides;
  for (int d = 0; d < t.rank; ++d) {
    sizes.push_back(t.sizes[d]);
    strides.push_back(t.strides[d]);
  }
  auto layout = Layout::Strided(sizes, strides);
  if (!layout.ok()) return std::nullopt;
  return *layout;
}

}  // namespace

unsigned short ElementwiseLayoutFlags(const std::vector<device::TensorDesc>& tensors,
                                      std::size_t first_output, long long items) {
  const std::optional<Layout> shape = LayoutOf(tensors[first_output]);
  bool dense = shape.has_value() && items <= shape->numel();
  for (std::size_t k = 0; dense && k < tensors.size(); ++k) {
    const std::optional<Layout> layout = LayoutOf(tensors[k]);
    dense = layout.has_value() && layout->sizes == shape->sizes && layout->IsContiguous();
  }
  unsigned int flags = device::kTaskLayoutChecked;
  if (dense) flags |= device::kTaskDenseElementwise;
  return static_cast<unsigned short>(flags);
}

}  // namespace gpuos::runtime
