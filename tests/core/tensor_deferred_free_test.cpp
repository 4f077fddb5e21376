// The arena's frees tagged with submissions (DeviceArena::NoteSubmission /
// ReleaseCompletedThrough), as the runtime drives them: a range freed while
// submissions may use it becomes reusable only once every submission up to
// the newest one noted before the free has finished.
#include <gtest/gtest.h>

#include <vector>

#include "arena_fixture.h"
#include "gpuos/device_memory.h"
#include "gpuos/tensor.h"

namespace gpuos {
namespace {

constexpr size_t kBlock = testing::kArenaBlock;

struct TaggedFreeTest : testing::ArenaFixture {};

TEST_F(TaggedFreeTest, AFreeWaitsForTheNewestSubmissionNotedBeforeIt) {
  const uint64_t a = Alloc(1000);
  const uint64_t b = Alloc(3000);
  arena->NoteSubmission(1);
  EXPECT_TRUE(arena->worker_may_run());
  ASSERT_TRUE(arena->Free(a).ok());  // tagged 1
  arena->NoteSubmission(2);
  ASSERT_TRUE(arena->Free(b).ok());  // tagged 2
  ArenaStats stats = arena->Stats();
  EXPECT_EQ(stats.pending_frees, 2u);
  EXPECT_EQ(stats.pending_free_bytes, 1024u + 3072u);

  EXPECT_EQ(arena->ReleaseCompletedThrough(0), 0u);
  EXPECT_EQ(arena->ReleaseCompletedThrough(1), 1u);  // a only
  stats = arena->Stats();
  EXPECT_EQ(stats.pending_frees, 1u);
  EXPECT_EQ(stats.pending_free_bytes, 3072u);
  EXPECT_EQ(stats.allocations, 1u);
  EXPECT_EQ(stats.deferred_releases, 1u);
  // a's range is free again: a request of its size gets it back (best fit).
  EXPECT_EQ(Alloc(1000), a);
  // b is still pending: it cannot be handed out or freed twice.
  EXPECT_FALSE(arena->Free(b).ok());
  EXPECT_EQ(arena->ReleaseCompletedThrough(2), 1u);
  EXPECT_EQ(arena->Stats().pending_frees, 0u);
  EXPECT_EQ(arena->Stats().pending_free_bytes, 0u);
  EXPECT_EQ(Alloc(3000), b);
}

TEST_F(TaggedFreeTest, ReleaseKeepsLaterFreesInOrderAndRepeats) {
  std::vector<uint64_t> addresses;
  for (int i = 0; i < 6; ++i) addresses.push_back(Alloc(256));
  for (uint64_t s = 1; s <= 6; ++s) {
    arena->NoteSubmission(s);
    ASSERT_TRUE(arena->Free(addresses[s - 1]).ok());
  }
  EXPECT_EQ(arena->ReleaseCompletedThrough(3), 3u);
  EXPECT_EQ(arena->ReleaseCompletedThrough(3), 0u);  // nothing new
  EXPECT_EQ(arena->Stats().pending_frees, 3u);
  // Noting an older sequence never lowers the tag of later frees.
  arena->NoteSubmission(2);
  const uint64_t late = Alloc(256);
  ASSERT_TRUE(arena->Free(late).ok());
  EXPECT_EQ(arena->ReleaseCompletedThrough(5), 2u);  // 4 and 5; 6 and `late` (tag 6) wait
  EXPECT_EQ(arena->ReleaseCompletedThrough(6), 2u);
  EXPECT_EQ(arena->Stats().allocations, 0u);
  EXPECT_EQ(arena->Stats().bytes_in_use, 0u);
}

TEST_F(TaggedFreeTest, ParkedWorkerFreesAtOnceAndTrimWorksAgain) {
  const uint64_t a = Alloc(5000);
  arena->NoteSubmission(7);
  EXPECT_EQ(arena->Trim().status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(arena->Free(a).ok());
  // What the runtime does at a park with nothing in flight.
  arena->SetWorkerMayRun(false);
  EXPECT_EQ(arena->ReleaseCompletedThrough(7), 1u);
  const uint64_t b = Alloc(100);
  ASSERT_TRUE(arena->Free(b).ok());  // immediate: no submission can use it
  EXPECT_EQ(arena->Stats().pending_frees, 0u);
  EXPECT_EQ(arena->Stats().allocations, 0u);
  auto trimmed = arena->Trim();
  ASSERT_TRUE(trimmed.ok()) << trimmed.status().ToString();
  EXPECT_EQ(*trimmed, kBlock);
  EXPECT_EQ(host->live_blocks(), 0u);
}

TEST_F(TaggedFreeTest, ReleaseDeferredStillReleasesEverything) {
  arena->NoteSubmission(100);
  ASSERT_TRUE(arena->Free(Alloc(10)).ok());
  ASSERT_TRUE(arena->Free(Alloc(20)).ok());
  EXPECT_EQ(arena->ReleaseCompletedThrough(99), 0u);
  EXPECT_EQ(arena->ReleaseDeferred(), 2u);
  EXPECT_EQ(arena->Stats().pending_frees, 0u);
  EXPECT_EQ(arena->Stats().deferred_releases, 2u);
}

// The runtime's keep-alive path: a storage dropped while a submission holds
// it is freed into the arena only when the last reference goes, and then
// waits for the submissions noted before.
TEST_F(TaggedFreeTest, StorageDroppedAfterSubmitWaitsForItsSubmission) {
  auto tensor = Tensor::Empty(arena, {64, 64}, DType::kF32);
  ASSERT_TRUE(tensor.ok());
  const uint64_t address = tensor->data_address();
  std::vector<std::shared_ptr<Storage>> kept_by_submission = {tensor->storage()};
  arena->NoteSubmission(1);
  *tensor = Tensor();  // the caller drops its tensor right after Submit
  EXPECT_EQ(arena->Stats().allocations, 1u);
  EXPECT_EQ(arena->Stats().pending_frees, 0u);  // still referenced
  arena->NoteSubmission(2);
  kept_by_submission.clear();  // submission 1 reclaimed while 2 is in flight
  EXPECT_EQ(arena->Stats().pending_frees, 1u);
  EXPECT_EQ(arena->ReleaseCompletedThrough(1), 0u);  // tagged 2
  EXPECT_EQ(arena->ReleaseCompletedThrough(2), 1u);
  auto again = Tensor::Empty(arena, {64, 64}, DType::kF32);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data_address(), address);
}

}  // namespace
}  // namespace gpuos
