// The host's per-task layout verdict (core/src/runtime/task_layout.h) that
// lets elementwise operators skip their per-task dense check.
#include "task_layout.h"

#include <gtest/gtest.h>

#include <initializer_list>

namespace gpuos::runtime {
namespace {

device::TensorDesc Desc(std::initializer_list<long long> sizes,
                        std::initializer_list<long long> strides = {}) {
  device::TensorDesc d = {};
  d.rank = static_cast<int>(sizes.size());
  d.numel = 1;
  int k = 0;
  for (long long s : sizes) {
    d.sizes[k++] = s;
    d.numel *= s;
  }
  if (strides.size() == 0) {
    long long stride = 1;
    for (int dim = d.rank - 1; dim >= 0; --dim) {
      d.strides[dim] = stride;
      stride *= d.sizes[dim];
    }
  } else {
    k = 0;
    for (long long s : strides) d.strides[k++] = s;
  }
  return d;
}

constexpr unsigned short kChecked = device::kTaskLayoutChecked;
constexpr unsigned short kDense = device::kTaskLayoutChecked | device::kTaskDenseElementwise;

TEST(TaskLayoutTest, ContiguousSameShapeIsDense) {
  EXPECT_EQ(ElementwiseLayoutFlags({Desc({64, 64}), Desc({64, 64}), Desc({64, 64})}, 2, 4096),
            kDense);
  EXPECT_EQ(ElementwiseLayoutFlags({Desc({}), Desc({})}, 1, 1), kDense);  // scalars
}

TEST(TaskLayoutTest, SizeOneDimensionsMayCarryAnyStride) {
  EXPECT_EQ(ElementwiseLayoutFlags({Desc({1, 8}, {99, 1}), Desc({1, 8})}, 1, 8), kDense);
}

TEST(TaskLayoutTest, BroadcastStridedOrOversizedWorkIsNotDense) {
  // Broadcast input: another shape.
  EXPECT_EQ(ElementwiseLayoutFlags({Desc({1, 64}), Desc({64, 64})}, 1, 4096), kChecked);
  // Same element count, other shape: [4096] with [64, 64].
  EXPECT_EQ(ElementwiseLayoutFlags({Desc({4096}), Desc({64, 64})}, 1, 4096), kChecked);
  // A transposed view.
  EXPECT_EQ(ElementwiseLayoutFlags({Desc({64, 32}, {1, 64}), Desc({64, 32})}, 1, 2048), kChecked);
  // A strided output (every other element).
  EXPECT_EQ(ElementwiseLayoutFlags({Desc({8}), Desc({8}, {2})}, 1, 8), kChecked);
  // More work items than the output has elements.
  EXPECT_EQ(ElementwiseLayoutFlags({Desc({8}), Desc({8})}, 1, 9), kChecked);
}

}  // namespace
}  // namespace gpuos::runtime
