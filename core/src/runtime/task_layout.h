// Layout facts the host establishes once per task (device::TaskFlags), so
// the worker's operators skip rechecking them on every run.
#pragma once

#include <cstddef>
#include <vector>

#include "gpuos/device/abi.h"

namespace gpuos::runtime {

// TaskDesc::flags for an elementwise task over `tensors` (inputs, then
// outputs; the first output is tensors[first_output]) whose work items are
// [0, items): kTaskLayoutChecked, plus kTaskDenseElementwise when every tensor
// is dense row-major with exactly the first output's shape (dimensions of
// size 1 may carry any stride: Layout::IsContiguous) and items <= its
// element count: the device's DenseElementwise (device/src/indexing.cu) for
// any task with work.
// REQUIRES: first_output < tensors.size().
unsigned short ElementwiseLayoutFlags(const std::vector<device::TensorDesc>& tensors,
                                      std::size_t first_output, long long items);

}  // namespace gpuos::runtime
