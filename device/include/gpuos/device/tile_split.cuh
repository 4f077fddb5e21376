// How a tiled task's work items [begin, end) split into tiles: shared by the
// persistent worker (queue_worker.cu, queue_direct.cuh) and the tile
// launcher (worker.cu, gpuos_tiles_worker), so that a task's tile t covers
// the same items whichever of them runs it.
#pragma once

#include "gpuos/device/abi.h"

namespace gpuos {
namespace device {

// A/B experiment (GPUOS_JIT_DEFINES=GPUOS_SLOT_MASK=1): the direct path
// finds a submission's ring slot with a mask where the ring's capacity is a
// power of two (the default 1024) instead of a 64-bit remainder, and a tile's
// items with a 32-bit division where they fit: a block runs five such 64-bit
// divisions between the opening and its first tile, which the admitting
// block reaches 1.38-1.44 us after the opening (session 41, bench/results/
// experiments/flagged_area_ab_session41.txt). Off (0): the remainders, as before.
#ifndef GPUOS_SLOT_MASK
#define GPUOS_SLOT_MASK 0
#endif
constexpr bool kSlotMask = GPUOS_SLOT_MASK != 0;

// Tile `t` of `tiles` of a task's items [begin, end), for RunChain,
// RunDirectTiles and gpuos_tiles_worker. Large tiles start on 64-element boundaries, so every tile
// keeps the operators' 16-byte vector path (an odd chunk loses it).
// TileChunk: the items of one tile (a 64-bit division: RunDirectTiles
// does it once a task); ChunkItems: tile `t`'s of chunks of `chunk`.
__device__ __forceinline__ long long TileChunk(const TaskDesc& task, unsigned int tiles) {
  const long long items = task.end - task.begin;
  long long chunk;
  if (kSlotMask && items >= 0 && items < (1ll << 31)) {
    chunk = (static_cast<unsigned int>(items) + tiles - 1u) / tiles;
  } else {
    chunk = (items + tiles - 1) / tiles;
  }
  if (chunk >= 1024) chunk = (chunk + 63) & ~63ll;
  return chunk;
}
__device__ __forceinline__ void ChunkItems(const TaskDesc& task, long long chunk, unsigned int t,
                                           long long* begin, long long* end) {
  const long long b = task.begin + chunk * t;
  *begin = b < task.end ? b : task.end;
  *end = b + chunk < task.end ? b + chunk : task.end;
}
__device__ __forceinline__ void TileItems(const TaskDesc& task, unsigned int tiles, unsigned int t,
                                          long long* begin, long long* end) {
  ChunkItems(task, TileChunk(task, tiles), t, begin, end);
}

}  // namespace device
}  // namespace gpuos
