// The device arena (over host memory), storages, external wrapping and the
// conversion to device::TensorDesc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "arena_fixture.h"
#include "gpuos/device_memory.h"
#include "gpuos/storage.h"
#include "gpuos/tensor.h"

namespace gpuos {
namespace {

constexpr size_t kBlock = testing::kArenaBlock;
using testing::ArenaFixture;

TEST_F(ArenaFixture, AlignedDisjointAndUsable) {
  std::mt19937 rng(7);
  std::vector<std::pair<uint64_t, size_t>> live;
  for (int i = 0; i < 200; ++i) {
    const size_t bytes = 1 + rng() % 5000;
    const uint64_t a = Alloc(bytes);
    EXPECT_EQ(a % kArenaAlignment, 0u);
    std::memset(reinterpret_cast<void*>(a), i & 0xff, bytes);
    live.emplace_back(a, bytes);
    if (rng() % 3 == 0) {  // free a random earlier one
      const size_t victim = rng() % live.size();
      ASSERT_TRUE(arena->Free(live[victim].first).ok());
      live.erase(live.begin() + victim);
    }
  }
  std::sort(live.begin(), live.end());
  for (size_t i = 1; i < live.size(); ++i) {
    EXPECT_LE(live[i - 1].first + live[i - 1].second, live[i].first) << "overlapping allocations";
  }
  ArenaStats stats = arena->Stats();
  EXPECT_EQ(stats.allocations, live.size());
  size_t expected_in_use = 0;
  for (const auto& [a, bytes] : live) expected_in_use += (bytes + 255) / 256 * 256;
  EXPECT_EQ(stats.bytes_in_use, expected_in_use);
  EXPECT_EQ(stats.blocks, host->live_blocks());
}

TEST_F(ArenaFixture, BestFitAndCoalescing) {
  const uint64_t a = Alloc(1024);
  const uint64_t b = Alloc(256);
  const uint64_t c = Alloc(4096);
  const uint64_t d = Alloc(256);
  (void)d;
  ASSERT_TRUE(arena->Free(a).ok());
  ASSERT_TRUE(arena->Free(c).ok());
  EXPECT_EQ(Alloc(3000), c);  // only c's range (4096) and the block's tail fit; c is smaller
  EXPECT_EQ(Alloc(700), a);   // a's range (1024) is the smallest that fits
  ASSERT_TRUE(arena->Free(a).ok());
  ASSERT_TRUE(arena->Free(b).ok());
  // a and b are adjacent and free: they coalesce into one 1280-byte range.
  EXPECT_EQ(Alloc(1280), a);
}

TEST_F(ArenaFixture, LargeRequestsGetTheirOwnBlock) {
  Alloc(100);
  EXPECT_EQ(arena->Stats().blocks, 1u);
  const uint64_t big = Alloc(3 * kBlock + 1);
  ArenaStats stats = arena->Stats();
  EXPECT_EQ(stats.blocks, 2u);
  EXPECT_EQ(stats.bytes_reserved, kBlock + (size_t{4} << 20));  // rounded to 2 MiB
  ASSERT_TRUE(arena->Free(big).ok());
  EXPECT_EQ(Alloc(3 * kBlock), big);  // reused, not returned to the driver
  EXPECT_EQ(arena->Stats().blocks, 2u);
}

TEST_F(ArenaFixture, StatsTrackPeak) {
  const uint64_t a = Alloc(1000);  // 1024
  const uint64_t b = Alloc(2048);
  ASSERT_TRUE(arena->Free(a).ok());
  Alloc(256);
  ArenaStats stats = arena->Stats();
  EXPECT_EQ(stats.bytes_in_use, 2048u + 256u);
  EXPECT_EQ(stats.peak_bytes_in_use, 1024u + 2048u);
  EXPECT_EQ(stats.total_allocations, 3u);
  EXPECT_EQ(stats.allocations, 2u);
  ASSERT_TRUE(arena->Free(b).ok());
  EXPECT_EQ(Alloc(0) % kArenaAlignment, 0u);  // zero bytes still yields a distinct unit
}

TEST_F(ArenaFixture, FreesWhileTheWorkerMayRunAreDeferred) {
  const uint64_t a = Alloc(4096);
  arena->SetWorkerMayRun(true);
  ASSERT_TRUE(arena->Free(a).ok());
  ArenaStats stats = arena->Stats();
  EXPECT_EQ(stats.pending_frees, 1u);
  EXPECT_EQ(stats.pending_free_bytes, 4096u);
  EXPECT_EQ(stats.bytes_in_use, 4096u);  // still held: a queued task may read it
  EXPECT_NE(Alloc(4096), a) << "a pending range was reused before the quiescent point";

  auto twice = arena->Free(a);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("already freed"), std::string::npos);

  EXPECT_EQ(arena->ReleaseDeferred(), 1u);
  stats = arena->Stats();
  EXPECT_EQ(stats.pending_frees, 0u);
  EXPECT_EQ(stats.deferred_releases, 1u);
  EXPECT_EQ(stats.bytes_in_use, 4096u);  // only the second allocation
  EXPECT_EQ(Alloc(4096), a);             // released ranges are reused
  EXPECT_EQ(arena->ReleaseDeferred(), 0u);
}

TEST_F(ArenaFixture, TrimOnlyAtQuiescentPoints) {
  const uint64_t a = Alloc(100);
  Alloc(2 * kBlock);  // a second block, kept in use
  ASSERT_TRUE(arena->Free(a).ok());
  arena->SetWorkerMayRun(true);
  auto refused = arena->Trim();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(host->live_blocks(), 2u);
  arena->SetWorkerMayRun(false);
  auto trimmed = arena->Trim();
  ASSERT_TRUE(trimmed.ok());
  EXPECT_EQ(*trimmed, kBlock);
  EXPECT_EQ(host->live_blocks(), 1u);
  EXPECT_EQ(arena->Stats().blocks, 1u);
}

TEST_F(ArenaFixture, ForeignAndDoubleFreesAreErrors) {
  const uint64_t a = Alloc(256);
  auto foreign = arena->Free(a + 256);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.message().find("did not allocate"), std::string::npos);
  ASSERT_TRUE(arena->Free(a).ok());
  EXPECT_FALSE(arena->Free(a).ok());
}

TEST(ArenaTest, OutOfMemoryNamesTheRequestAndState) {
  auto host = std::make_shared<HostMemoryAllocator>();
  DeviceArena arena(host, ArenaOptions{kBlock, 2 * kBlock});
  ASSERT_TRUE(arena.Allocate(kBlock / 4).ok());
  ASSERT_TRUE(arena.Allocate(kBlock).ok());  // its own block, exactly the limit
  auto refused = arena.Allocate(kBlock);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("out of device memory: cannot allocate 1048576 bytes"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("host memory"), std::string::npos);

  auto small_host = std::make_shared<HostMemoryAllocator>(kBlock / 2);
  DeviceArena small(small_host, ArenaOptions{kBlock, SIZE_MAX});
  auto driver_refused = small.Allocate(10);
  ASSERT_FALSE(driver_refused.ok());
  EXPECT_NE(driver_refused.status().message().find("limit"), std::string::npos);
}

TEST(ArenaTest, DestructorReturnsEveryBlock) {
  auto host = std::make_shared<HostMemoryAllocator>();
  {
    DeviceArena arena(host, ArenaOptions{kBlock, SIZE_MAX});
    ASSERT_TRUE(arena.Allocate(10).ok());
    ASSERT_TRUE(arena.Allocate(5 * kBlock).ok());
    EXPECT_EQ(host->live_blocks(), 2u);
  }
  EXPECT_EQ(host->live_blocks(), 0u);
  EXPECT_EQ(host->live_bytes(), 0u);
}

TEST(ArenaTest, ConcurrentAllocateAndFree) {
  auto host = std::make_shared<HostMemoryAllocator>();
  DeviceArena arena(host, ArenaOptions{kBlock, SIZE_MAX});
  auto work = [&arena](int seed) {
    std::mt19937 rng(seed);
    std::vector<uint64_t> mine;
    for (int i = 0; i < 2000; ++i) {
      auto a = arena.Allocate(1 + rng() % 3000);
      ASSERT_TRUE(a.ok());
      mine.push_back(*a);
      if (mine.size() > 20) {
        ASSERT_TRUE(arena.Free(mine.front()).ok());
        mine.erase(mine.begin());
      }
    }
    for (uint64_t a : mine) ASSERT_TRUE(arena.Free(a).ok());
  };
  std::thread t1(work, 1), t2(work, 2);
  t1.join();
  t2.join();
  EXPECT_EQ(arena.Stats().bytes_in_use, 0u);
  EXPECT_EQ(arena.Stats().allocations, 0u);
}

TEST_F(ArenaFixture, TensorStorageReturnsToTheArena) {
  {
    auto t = Tensor::Empty(arena, {16, 16}, DType::kF16);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->storage()->owner(), StorageOwner::kArena);
    EXPECT_EQ(t->storage()->nbytes(), 512u);
    EXPECT_EQ(arena->Stats().bytes_in_use, 512u);
    auto view = t->Slice(0, 4, 8);  // keeps the storage alive
    t = Expected<Tensor>(InvalidArgument("dropped"));
    EXPECT_EQ(arena->Stats().bytes_in_use, 512u);
  }
  EXPECT_EQ(arena->Stats().bytes_in_use, 0u);

  auto pending = Tensor::Empty(arena, {4}, DType::kI64);
  ASSERT_TRUE(pending.ok());
  arena->SetWorkerMayRun(true);
  pending = Expected<Tensor>(InvalidArgument("dropped"));
  EXPECT_EQ(arena->Stats().pending_frees, 1u);

  auto empty = Tensor::Empty(arena, {0, 5}, DType::kF32);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->storage()->address(), 0u);
  EXPECT_EQ(arena->Stats().allocations, 1u);  // the pending one only

  auto negative = Tensor::Empty(arena, {-1}, DType::kF32);
  EXPECT_FALSE(negative.ok());
}

TEST(ExternalMemoryTest, ReleaseRunsExactlyOnceWhenTheLastViewGoes) {
  int released = 0;
  std::vector<float> buffer(24);
  const auto address = reinterpret_cast<uint64_t>(buffer.data());
  {
    auto t =
        Tensor::WrapExternal({address, 96, 0, [&released] { ++released; }}, DType::kF32, {2, 3, 4});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->storage()->owner(), StorageOwner::kExternal);
    EXPECT_EQ(t->data_address(), address);  // no copy
    Tensor view = *t->Transpose(0, 2);
    Tensor copy_of_view = view;
    t = Expected<Tensor>(InvalidArgument("dropped"));
    EXPECT_EQ(released, 0);
    view = Tensor();
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
}

TEST(ExternalMemoryTest, ErrorsDoNotRunTheCallback) {
  int released = 0;
  auto release = [&released] { ++released; };
  auto too_small = Tensor::WrapExternal({0x1000, 95, 0, release}, DType::kF32, {2, 3, 4});
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.status().message().find("needs 24 elements of storage"), std::string::npos)
      << too_small.status().message();
  EXPECT_FALSE(Tensor::WrapExternal({0, 16, 0, release}, DType::kF32, {4}).ok());
  EXPECT_FALSE(
      Tensor::WrapExternal({0x1002, 64, 0, release}, DType::kF32, {4}).ok());  // misaligned
  EXPECT_FALSE(Tensor::WrapExternal({0x1000, 64, -1, release}, DType::kF32, {4}).ok());
  EXPECT_FALSE(Tensor::WrapExternal({UINT64_MAX - 8, 64, 0, release}, DType::kU8, {4}).ok());
  EXPECT_EQ(released, 0);

  // Strided wrap: a column of a 4x5 row-major matrix, at offset 2.
  auto column = Tensor::WrapExternal({0x1000, 80, 0, release}, DType::kF32, {4}, {5}, 2);
  ASSERT_TRUE(column.ok()) << column.status().ToString();
  EXPECT_EQ(column->data_address(), 0x1000u + 8);
  auto past_end = Tensor::WrapExternal({0x1000, 80, 0, release}, DType::kF32, {4}, {5}, 5);
  EXPECT_FALSE(past_end.ok());
  column = Expected<Tensor>(InvalidArgument("dropped"));
  EXPECT_EQ(released, 1);
}

TEST(TensorDescTest, CarriesTheViewsAddressAndLayout) {
  auto base = Tensor::WrapExternal({0x10000, 4096, 0, nullptr}, DType::kBF16, {4, 6, 8});
  ASSERT_TRUE(base.ok());
  Tensor view = *(*base->Slice(1, 2, 6, 2)).Permute({2, 0, 1});
  auto desc = view.ToDesc();
  ASSERT_TRUE(desc.ok()) << desc.status().ToString();
  EXPECT_EQ(desc->data, 0x10000u + 2 * 8 * 2);  // element offset 16, 2 bytes each
  EXPECT_EQ(desc->dtype, device::kDTypeBF16);
  EXPECT_EQ(desc->rank, 3);
  EXPECT_EQ(desc->numel, 8 * 4 * 2);
  const long long sizes[] = {8, 4, 2};
  const long long strides[] = {1, 48, 16};
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(desc->sizes[d], sizes[d]) << d;
    EXPECT_EQ(desc->strides[d], strides[d]) << d;
  }
  for (int d = 3; d < device::kMaxRank; ++d) {
    EXPECT_EQ(desc->sizes[d], 0);
    EXPECT_EQ(desc->strides[d], 0);
  }
  EXPECT_EQ(desc->flags, 0u);

  // A contiguous tensor's descriptor equals the ABI header's own builder.
  auto dense = base->ToDesc();
  ASSERT_TRUE(dense.ok());
  const long long dense_sizes[] = {4, 6, 8};
  device::TensorDesc reference =
      device::MakeContiguousTensorDesc(0x10000, device::kDTypeBF16, 3, dense_sizes);
  EXPECT_EQ(std::memcmp(&*dense, &reference, sizeof(reference)), 0);

  auto scalar = base->Select(0, 3);
  ASSERT_TRUE(scalar.ok());
  auto scalar_desc = (*scalar->Select(0, 5)).Select(0, 7);
  ASSERT_TRUE(scalar_desc.ok());
  auto d0 = scalar_desc->ToDesc();
  ASSERT_TRUE(d0.ok());
  EXPECT_EQ(d0->rank, 0);
  EXPECT_EQ(d0->numel, 1);
  EXPECT_EQ(d0->data, 0x10000u + (3 * 48 + 5 * 8 + 7) * 2);
}

TEST(TensorDescTest, FromStorageChecksBounds) {
  auto storage = Storage::WrapExternal({0x2000, 64, 0, nullptr});
  ASSERT_TRUE(storage.ok());
  auto fits = Tensor::FromStorage(*storage, DType::kI32, *Layout::Strided({4, 4}, {4, 1}));
  ASSERT_TRUE(fits.ok());
  auto overflows = Tensor::FromStorage(*storage, DType::kI32, *Layout::Strided({4, 4}, {4, 1}, 1));
  ASSERT_FALSE(overflows.ok());
  EXPECT_NE(overflows.status().message().find("needs 17 elements"), std::string::npos);
  EXPECT_FALSE(Tensor::FromStorage(nullptr, DType::kI32, *Layout::Contiguous(Dims{1})).ok());
  auto null_storage = Storage::WrapExternal({0, 0, 0, nullptr});
  ASSERT_TRUE(null_storage.ok());
  auto empty = Tensor::FromStorage(*null_storage, DType::kF32, *Layout::Contiguous(Dims{0}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->ToDesc().ok());
}

// The example at the top of docs/tensors.md, kept compiling.
Status DocsExample() {
  auto allocator = std::make_shared<gpuos::HostMemoryAllocator>();
  auto arena = std::make_shared<gpuos::DeviceArena>(allocator);
  gpuos::Expected<gpuos::Tensor> x = gpuos::Tensor::Empty(arena, {64, 128}, gpuos::DType::kF16);
  if (!x.ok()) return x.status();
  gpuos::Expected<gpuos::Tensor> xt = x->Transpose(0, 1);  // no copy
  gpuos::Expected<gpuos::device::TensorDesc> desc = xt->ToDesc();
  if (!desc.ok()) return desc.status();
  EXPECT_EQ(desc->strides[0], 1);
  EXPECT_EQ(desc->strides[1], 128);
  return Status::Ok();
}

TEST(DocsTest, ExampleRuns) { EXPECT_TRUE(DocsExample().ok()); }

}  // namespace
}  // namespace gpuos
