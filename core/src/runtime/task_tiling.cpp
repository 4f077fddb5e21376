#include "task_tiling.h"

#include <algorithm>
#include <limits>

#include "gpuos/runtime/task_graph.h"

namespace gpuos::runtime {

std::uint32_t DefaultTileCount(registry::OperatorKind kind, long long items,
                               long long touched_elements, unsigned int worker_blocks) {
  const long long blocks = std::max<long long>(1, worker_blocks);
  const bool elementwise = kind == registry::OperatorKind::kElementwise;
  const long long work = elementwise ? items : touched_elements;
  const long long per_tile = elementwise ? kWorkItemsPerTile : kElementsPerOperatorTile;
  const long long per_block = elementwise ? kElementwiseTilesPerBlock : kOperatorTilesPerBlock;
  long long most = std::min<long long>(per_block * blocks, kMaxTiles);
  // A tile of no work item would only cost its fixed dispatch cost.
  if (!elementwise) most = std::min(most, std::max<long long>(1, items));
  const long long wanted = std::max<long long>(0, work) / per_tile +
                           (std::max<long long>(0, work) % per_tile != 0 ? 1 : 0);
  return static_cast<std::uint32_t>(std::clamp<long long>(wanted, 1, std::max<long long>(1, most)));
}

long long TouchedElements(const std::vector<device::TensorDesc>& tensors) {
  constexpr long long kMost = std::numeric_limits<long long>::max();
  long long total = 0;
  for (const device::TensorDesc& desc : tensors) {
    const long long n = std::max<long long>(0, desc.numel);
    total = n > kMost - total ? kMost : total + n;
  }
  return total;
}

}  // namespace gpuos::runtime
