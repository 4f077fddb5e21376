// The queue's ring slot (device/queue.h, docs/runtime.md "The queue"): its
// size, the room a small graph has in it, where its gate word is, and the
// word count the host and the worker both use for an inline graph. No GPU
// needed.
#include <gtest/gtest.h>

#include <cstddef>

#include "gpuos/device/queue.h"

namespace gpuos::device {
namespace {

TEST(QueueLayoutTest, ASlotIsEightKibOfRecordPayloadAndGate) {
  EXPECT_EQ(sizeof(SubmissionSlot), 8192u);
  EXPECT_EQ(kSubmissionRecordWords, 4u);
  EXPECT_EQ(offsetof(SubmissionSlot, payload), sizeof(Submission));
  EXPECT_EQ(kInlinePayloadWords * 16 + sizeof(Submission) + 16, sizeof(SubmissionSlot));
  // The gate word is the slot's last 16-byte word: the worker's Admit takes
  // it from the words the block's last thread reads.
  EXPECT_EQ(offsetof(SubmissionSlot, gate_word), 8192u - 16u);
  // Two words per thread of a 256-thread worker block read the whole slot.
  EXPECT_EQ(kSubmissionSlotWords % kWorkerThreads, 0u);
}

TEST(QueueLayoutTest, PayloadWordsCountTasksTensorsAndFourEntriesAWord) {
  EXPECT_EQ(SubmissionPayloadWords(0, 0, 0), 0u);
  EXPECT_EQ(SubmissionPayloadWords(1, 0, 1), 8u + 1u);
  EXPECT_EQ(SubmissionPayloadWords(1, 2, 4), 8u + 20u + 1u);
  EXPECT_EQ(SubmissionPayloadWords(1, 2, 5), 8u + 20u + 2u);
  EXPECT_EQ(SubmissionPayloadWords(3, 0, 0) * 16, 3 * sizeof(TaskDesc));
}

// docs/runtime.md: one task and 49 tensors (a stitched program of 48
// buffers and its counters) travel in the slot; one tensor more does not.
TEST(QueueLayoutTest, OneTaskAndFortyNineTensorsFitTheSlot) {
  EXPECT_LE(SubmissionPayloadWords(1, 49, 1), kInlinePayloadWords);
  EXPECT_GT(SubmissionPayloadWords(1, 50, 1), kInlinePayloadWords);
}

}  // namespace
}  // namespace gpuos::device
