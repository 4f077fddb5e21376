// The default number of tiles a task's work items are split into
// (TaskOptions::tiles == 0; constants in gpuos/runtime/task_graph.h). Pure
// functions of the task's shape and the worker grid, so they are tested
// without a GPU (tests/core/task_tiling_test.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "gpuos/device/abi.h"
#include "gpuos/registry/operator_spec.h"

namespace gpuos::runtime {

// Tiles for a task of `kind` with `items` work items whose tensors hold
// `touched_elements` elements in all (inputs and outputs), on a worker grid
// of `worker_blocks` blocks. In [1, kMaxTiles], and at most max(1, items).
//
// Elementwise: kWorkItemsPerTile items per tile, at most
// kElementwiseTilesPerBlock per worker block. Reductions and custom
// operators: one tile per kElementsPerOperatorTile touched elements, at most
// kOperatorTilesPerBlock per worker block. Touched elements estimate the
// work where the work items alone do not (a matmul's 1 x 256 output reads a
// 256 x 256 weight; a reduction's few outputs may read millions of
// elements), without naming operators.
std::uint32_t DefaultTileCount(registry::OperatorKind kind, long long items,
                               long long touched_elements, unsigned int worker_blocks);

// Sum of the tensors' element counts (saturating).
long long TouchedElements(const std::vector<device::TensorDesc>& tensors);

}  // namespace gpuos::runtime
