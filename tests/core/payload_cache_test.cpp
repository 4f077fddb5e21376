// The host's half of the payload cache (core/src/runtime/payload_cache.h):
// which submissions fill an entry, which run from one, and when an entry
// may be replaced. The device's half runs in runtime_gpu_test.cpp.
#include "payload_cache.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gpuos::runtime {
namespace {

using Kind = PayloadCache::Kind;

// Submissions the test says completed, fills the device confirmed.
struct FakeDevice {
  std::set<std::uint64_t> completed;
  std::set<std::pair<unsigned int, std::uint64_t>> filled;
  PayloadCache::CompletedFn Completed() {
    return [this](std::uint64_t s) { return completed.count(s) != 0; };
  }
  PayloadCache::FilledFn Filled() {
    return [this](unsigned int e, std::uint64_t f) { return filled.count({e, f}) != 0; };
  }
  // Submission `s` ran and, if it filled `entry`, the device confirmed it.
  void Ran(std::uint64_t s, const PayloadCache::Decision& d) {
    completed.insert(s);
    if (d.kind == Kind::kFill) filled.insert({d.entry, s});
  }
};

TEST(PayloadCacheTest, OffWithoutEntries) {
  PayloadCache cache(0);
  FakeDevice device;
  EXPECT_EQ(cache.Choose("a", 1, 10, device.Completed(), device.Filled()).kind, Kind::kNone);
}

TEST(PayloadCacheTest, FillsThenUsesOnceTheFillCompletedAndConfirmed) {
  PayloadCache cache(4);
  FakeDevice device;
  const auto fill = cache.Choose("program", 1, 10, device.Completed(), device.Filled());
  ASSERT_EQ(fill.kind, Kind::kFill);
  // The fill still runs: the next call publishes as before.
  EXPECT_EQ(cache.Choose("program", 2, 11, device.Completed(), device.Filled()).kind, Kind::kNone);
  device.Ran(1, fill);
  device.completed.insert(2);
  const auto use = cache.Choose("program", 3, 12, device.Completed(), device.Filled());
  ASSERT_EQ(use.kind, Kind::kUse);
  EXPECT_EQ(use.entry, fill.entry);
  EXPECT_EQ(use.fill, 1u);
  EXPECT_EQ(use.first_task_id, 10u);  // the fill's task id, which the entry holds
  EXPECT_EQ(cache.uses(), 1u);
  EXPECT_EQ(cache.fills(), 1u);
}

TEST(PayloadCacheTest, AnUnconfirmedFillIsRefilledOnceIdle) {
  PayloadCache cache(1);
  FakeDevice device;
  const auto fill = cache.Choose("program", 1, 10, device.Completed(), device.Filled());
  ASSERT_EQ(fill.kind, Kind::kFill);
  device.completed.insert(1);  // completed, but did not open as direct tiles
  const auto again = cache.Choose("program", 2, 11, device.Completed(), device.Filled());
  ASSERT_EQ(again.kind, Kind::kFill);
  EXPECT_EQ(again.entry, fill.entry);
  device.Ran(2, again);
  const auto use = cache.Choose("program", 3, 12, device.Completed(), device.Filled());
  EXPECT_EQ(use.kind, Kind::kUse);
  EXPECT_EQ(use.fill, 2u);
}

TEST(PayloadCacheTest, NeverReplacesAnEntryInUse) {
  PayloadCache cache(1);
  FakeDevice device;
  const auto fill = cache.Choose("a", 1, 10, device.Completed(), device.Filled());
  device.Ran(1, fill);
  const auto use = cache.Choose("a", 2, 11, device.Completed(), device.Filled());
  ASSERT_EQ(use.kind, Kind::kUse);
  // Submission 2 still runs from the entry: another payload may not take it.
  EXPECT_EQ(cache.Choose("b", 3, 12, device.Completed(), device.Filled()).kind, Kind::kNone);
  device.completed.insert(2);
  device.completed.insert(3);
  const auto b = cache.Choose("b", 4, 13, device.Completed(), device.Filled());
  EXPECT_EQ(b.kind, Kind::kFill);
  device.Ran(4, b);
  // "a" is gone: it fills the entry again, "b" being idle.
  const auto again = cache.Choose("a", 5, 14, device.Completed(), device.Filled());
  EXPECT_EQ(again.kind, Kind::kFill);
  EXPECT_EQ(again.entry, b.entry);
}

// Two uses of one entry in flight that complete out of order (one done word
// per ring slot): the newer one's completion leaves the entry busy while
// the older one may still read it.
TEST(PayloadCacheTest, KeepsAnEntryWhileAnyOfItsUsesRuns) {
  PayloadCache cache(1);
  FakeDevice device;
  const auto fill = cache.Choose("a", 1, 10, device.Completed(), device.Filled());
  device.Ran(1, fill);
  ASSERT_EQ(cache.Choose("a", 2, 11, device.Completed(), device.Filled()).kind, Kind::kUse);
  ASSERT_EQ(cache.Choose("a", 3, 12, device.Completed(), device.Filled()).kind, Kind::kUse);
  device.completed.insert(3);  // the newer use first
  EXPECT_EQ(cache.Choose("b", 4, 13, device.Completed(), device.Filled()).kind, Kind::kNone);
  device.completed.insert(2);
  device.completed.insert(4);
  EXPECT_EQ(cache.Choose("b", 5, 14, device.Completed(), device.Filled()).kind, Kind::kFill);
}

TEST(PayloadCacheTest, ReplacesFreeEntriesFirstThenTheLeastRecentlyUsed) {
  PayloadCache cache(2);
  FakeDevice device;
  const auto a = cache.Choose("a", 1, 10, device.Completed(), device.Filled());
  device.Ran(1, a);
  const auto b = cache.Choose("b", 2, 11, device.Completed(), device.Filled());
  ASSERT_EQ(b.kind, Kind::kFill);
  EXPECT_NE(b.entry, a.entry);  // the free entry, not a's
  device.Ran(2, b);
  ASSERT_EQ(cache.Choose("a", 3, 12, device.Completed(), device.Filled()).kind, Kind::kUse);
  device.completed.insert(3);
  const auto c = cache.Choose("c", 4, 13, device.Completed(), device.Filled());
  ASSERT_EQ(c.kind, Kind::kFill);
  EXPECT_EQ(c.entry, b.entry);  // b was used least recently
}

device::TaskDesc TiledTask(unsigned int tiles, unsigned int tensors) {
  device::TaskDesc task{};
  task.opcode = 3;
  task.num_tiles = tiles;
  task.num_tensors = tensors;
  for (unsigned int k = 0; k < tensors; ++k) task.tensors[k] = static_cast<int>(k);
  task.end = 4096;
  return task;
}

TEST(CachedPayloadKeyTest, LeavesOutTheTaskIdAndSuccessorOffset) {
  device::TensorDesc tensors[2] = {};
  tensors[0].data = 0x1000;
  tensors[1].data = 0x2000;
  device::TaskDesc task = TiledTask(8, 2);
  std::string first, second;
  ASSERT_TRUE(CachedPayloadKey(task, tensors, 2, 8, &first));
  task.task_id = 77;
  task.successor_begin = 5;
  ASSERT_TRUE(CachedPayloadKey(task, tensors, 2, 8, &second));
  EXPECT_EQ(first, second);
  tensors[1].data = 0x3000;  // another output address: another payload
  ASSERT_TRUE(CachedPayloadKey(task, tensors, 2, 8, &second));
  EXPECT_NE(first, second);
}

TEST(CachedPayloadKeyTest, RefusesWhatTheWorkerWouldNotOpenDirectly) {
  device::TensorDesc tensors[2] = {};
  std::string key;
  EXPECT_FALSE(CachedPayloadKey(TiledTask(8, 2), tensors, 2, 4, &key));  // other tiles
  EXPECT_FALSE(CachedPayloadKey(TiledTask(1u << 15, 2), tensors, 2, 1u << 15, &key));
  EXPECT_FALSE(CachedPayloadKey(TiledTask(8, 0), tensors, 2, 8, &key));  // no tensor
  EXPECT_FALSE(CachedPayloadKey(TiledTask(8, 2), tensors, 1, 8, &key));  // index outside
}

}  // namespace
}  // namespace gpuos::runtime
