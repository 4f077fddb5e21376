// The default tile count of a task (core/src/runtime/task_tiling.h): small
// and medium reductions and custom operators spread over the worker blocks,
// tiny ones stay one tile, large ones stop at a few tiles per block, and the
// elementwise rule is the documented one.
#include "task_tiling.h"

#include <gtest/gtest.h>

#include <vector>

#include "gpuos/runtime/task_graph.h"

namespace gpuos::runtime {
namespace {

using registry::OperatorKind;

constexpr unsigned int kBlocks = 132;  // an H100's worker grid

device::TensorDesc Desc(long long numel) {
  device::TensorDesc desc = {};
  desc.rank = 1;
  desc.numel = numel;
  desc.sizes[0] = numel;
  desc.strides[0] = 1;
  return desc;
}

std::uint32_t Custom(const std::vector<long long>& numels, long long items) {
  std::vector<device::TensorDesc> tensors;
  for (long long n : numels) tensors.push_back(Desc(n));
  return DefaultTileCount(OperatorKind::kCustom, items, TouchedElements(tensors), kBlocks);
}

TEST(TaskTilingTest, ElementwiseTilesFollowTheItemsUpToAFewPerBlock) {
  EXPECT_EQ(DefaultTileCount(OperatorKind::kElementwise, 1, 3, kBlocks), 1u);
  EXPECT_EQ(DefaultTileCount(OperatorKind::kElementwise, kWorkItemsPerTile, 0, kBlocks), 1u);
  EXPECT_EQ(DefaultTileCount(OperatorKind::kElementwise, kWorkItemsPerTile + 1, 0, kBlocks), 2u);
  EXPECT_EQ(DefaultTileCount(OperatorKind::kElementwise, 1LL << 40, 0, kBlocks),
            kElementwiseTilesPerBlock * kBlocks);
}

TEST(TaskTilingTest, SmallMatmulsSpreadOverBlocksByTheElementsTheyRead) {
  // Linear(256, 256) on a batch of 1 and 8: a [b, 256] x [256, 256] product
  // has 8 output tiles of 32 x 32; it gets about that many tasks instead of
  // one, although its output has only 256 (2048) elements.
  const std::uint32_t batch1 = Custom({256, 256 * 256, 256}, 256);
  EXPECT_GE(batch1, 8u);
  EXPECT_LE(batch1, 16u);
  const std::uint32_t batch8 = Custom({8 * 256, 256 * 256, 8 * 256}, 8 * 256);
  EXPECT_GE(batch8, 8u);
  EXPECT_LE(batch8, 16u);
  // bmm [8, 128, 64] x [8, 64, 128]: 128 output tiles over a few dozen tasks.
  const std::uint32_t bmm = Custom({8 * 128 * 64, 8 * 64 * 128, 8 * 128 * 128}, 8 * 128 * 128);
  EXPECT_GE(bmm, 16u);
  EXPECT_LE(bmm, 128u);
}

TEST(TaskTilingTest, TinyOperatorsStayOneTile) {
  // layer_norm of one 256-element row (input, weight, bias, output).
  EXPECT_EQ(Custom({256, 256, 256, 256}, 256), 1u);
  EXPECT_EQ(Custom({}, 0), 1u);
  EXPECT_EQ(Custom({0, 0}, 0), 1u);
}

TEST(TaskTilingTest, NeverMoreTilesThanWorkItemsForNonElementwiseOperators) {
  // sum over [4, 1 Mi]: 4 outputs, each reduced by one block.
  EXPECT_EQ(DefaultTileCount(OperatorKind::kReduction, 4, 4 * (1LL << 20) + 4, kBlocks), 4u);
  EXPECT_EQ(DefaultTileCount(OperatorKind::kCustom, 1, 1LL << 30, kBlocks), 1u);
}

TEST(TaskTilingTest, LargeOperatorsStopAtAFewTilesPerBlock) {
  const long long big = 1LL << 34;
  EXPECT_EQ(DefaultTileCount(OperatorKind::kCustom, big, big, kBlocks),
            kOperatorTilesPerBlock * kBlocks);
  EXPECT_EQ(DefaultTileCount(OperatorKind::kReduction, big, big, 100000), kMaxTiles);
  // A grid not yet known counts as one block.
  EXPECT_EQ(DefaultTileCount(OperatorKind::kCustom, big, big, 0), kOperatorTilesPerBlock);
}

TEST(TaskTilingTest, TouchedElementsSaturates) {
  const long long huge = 1LL << 62;
  EXPECT_EQ(TouchedElements({Desc(3), Desc(4)}), 7);
  EXPECT_GT(TouchedElements({Desc(huge), Desc(huge), Desc(huge)}), huge);
  EXPECT_EQ(DefaultTileCount(OperatorKind::kCustom, huge,
                             TouchedElements({Desc(huge), Desc(huge), Desc(huge)}), kBlocks),
            kOperatorTilesPerBlock * kBlocks);
}

}  // namespace
}  // namespace gpuos::runtime
