// The queue's ring slot (device/queue.h, docs/runtime.md "The queue"): its
// size, the room a small graph has in it, where its gate word is, and the
// word count the host and the worker both use for an inline graph, and an
// idle block's looks before it parks. No GPU needed.
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

// A poller reads the tail and lone_hint with one 16-byte acquire load, and
// stop and keep_warm with one 8-byte load (TryClaimSubmission).
TEST(QueueLayoutTest, TailAndLoneHintAreOneSixteenByteWord) {
  EXPECT_EQ(offsetof(QueueControl, submit_tail) % 16, 0u);
  EXPECT_EQ(offsetof(QueueControl, lone_hint), offsetof(QueueControl, submit_tail) + 8);
  EXPECT_EQ(offsetof(QueueControl, stop) % 8, 0u);
  EXPECT_EQ(offsetof(QueueControl, keep_warm), offsetof(QueueControl, stop) + 4);
  EXPECT_EQ(sizeof(QueueControl), 128u);
}

// The host's lone_hint and the pollers' direct board (docs/runtime.md,
// "Direct tiles") carry what their readers need in one 8-byte word each.
TEST(QueueLayoutTest, LoneHintNamesOnlyItsSequenceAndKeepsTilesAndWords) {
  const unsigned long long hint = EncodeLoneHint(123456789ull, 104, 4 + 8 + 60 + 1);
  EXPECT_TRUE(LoneHintNames(hint, 123456789ull));
  EXPECT_FALSE(LoneHintNames(hint, 123456788ull));
  EXPECT_FALSE(LoneHintNames(hint, 123456790ull));
  EXPECT_EQ(LoneHintTiles(hint), 104u);
  EXPECT_EQ(LoneHintWords(hint), 73u);
  // Tiles past 16 bits are clamped (helpers are capped by the grid anyway);
  // a whole slot's words fit.
  EXPECT_EQ(LoneHintTiles(EncodeLoneHint(1, 70000, kSubmissionSlotWords)), 0xffffu);
  EXPECT_EQ(LoneHintWords(EncodeLoneHint(1, 70000, kSubmissionSlotWords)), kSubmissionSlotWords);
  // Sequences compare by their low 29 bits: one 2^29 apart share a hint,
  // which the ring never has in flight together.
  EXPECT_TRUE(LoneHintNames(EncodeLoneHint(5, 2, 13), 5 + (1ull << kLoneHintSequenceBits)));
  // An empty hint (the control block is zeroed) names no submission.
  EXPECT_FALSE(LoneHintNames(0, 1));
  EXPECT_FALSE(LoneHintCached(hint));
}

// A use of the payload cache (queue_direct.cuh, "Cached payloads") names its
// entry and its gate in the lone hint, beside what the hint always holds;
// opening the gate or dropping the use changes nothing else.
TEST(QueueLayoutTest, LoneHintCarriesTheCacheEntryAndItsGate) {
  const unsigned long long sequence = (1ull << 40) + 987654321ull;
  const unsigned long long closed =
      EncodeLoneHint(sequence, 0xffff, kSubmissionSlotWords, LoneHintCacheBits(126, false));
  EXPECT_TRUE(LoneHintNames(closed, sequence));
  EXPECT_EQ(LoneHintTiles(closed), 0xffffu);
  EXPECT_EQ(LoneHintWords(closed), kSubmissionSlotWords);
  EXPECT_TRUE(LoneHintCached(closed));
  EXPECT_FALSE(LoneHintOpen(closed));
  EXPECT_EQ(LoneHintEntry(closed), 126u);
  const unsigned long long opened = closed | kLoneHintOpen;
  EXPECT_TRUE(LoneHintOpen(opened));
  EXPECT_EQ(LoneHintEntry(opened), 126u);
  EXPECT_EQ(opened,
            EncodeLoneHint(sequence, 0xffff, kSubmissionSlotWords, LoneHintCacheBits(126, true)));
  const unsigned long long dropped = closed & ~kLoneHintCacheMask;
  EXPECT_FALSE(LoneHintCached(dropped));
  EXPECT_TRUE(LoneHintNames(dropped, sequence));
  EXPECT_EQ(LoneHintWords(dropped), kSubmissionSlotWords);
  EXPECT_EQ(LoneHintEntry(EncodeLoneHint(1, 2, 3, LoneHintCacheBits(0, true))), 0u);
}

TEST(QueueLayoutTest, DirectBoardRoundTripsAndWidensItsSequence) {
  DirectBoard board;
  board.sequence = (5ull << 42) + 0x123456789ull;  // bits past 42 are dropped
  board.helpers = 4095;
  board.slot_words = 512;
  const DirectBoard back = DecodeDirectBoard(EncodeDirectBoard(board));
  EXPECT_EQ(back.sequence, 0x123456789ull);
  EXPECT_EQ(back.helpers, board.helpers);
  EXPECT_EQ(back.slot_words, board.slot_words);
  // Widened against a sequence the reader knows, before or after it, also
  // across a wrap of the 42 bits.
  EXPECT_EQ(DirectBoardSequence(back.sequence, (5ull << 42) + 0x123456700ull),
            (5ull << 42) + 0x123456789ull);
  EXPECT_EQ(DirectBoardSequence(back.sequence, (5ull << 42) + 0x1234567ffull),
            (5ull << 42) + 0x123456789ull);
  EXPECT_EQ(DirectBoardSequence(3, (1ull << 42) - 2), (1ull << 42) + 3);
  EXPECT_EQ(DirectBoardSequence((1ull << 42) - 2, (1ull << 42) + 3), (1ull << 42) - 2);
  EXPECT_EQ(DirectBoardSequence(7, 7), 7u);
  EXPECT_EQ(sizeof(DirectSlot), 16u);
  EXPECT_GE(kDirectAreaBytes, kInlinePayloadWords * 16);
}

// PostDirectBoard posts with an atomic maximum, so a later submission's word
// must be larger whatever the helpers and words fields hold (below 2^42
// submissions).
TEST(QueueLayoutTest, DirectBoardWordGrowsWithItsSequence) {
  for (unsigned long long sequence : {1ull, 2ull, 0x12345ull, (1ull << 42) - 2}) {
    DirectBoard older;
    older.sequence = sequence;
    older.helpers = 4095;
    older.slot_words = 1023;
    DirectBoard newer;
    newer.sequence = sequence + 1;
    newer.helpers = 0;
    newer.slot_words = 0;
    EXPECT_GT(EncodeDirectBoard(newer), EncodeDirectBoard(older)) << sequence;
  }
}

// The worker parks on a second look only (SecondLookConfirms): the first
// look with a clock never parks, a look kParkRecheckNs or more after it with
// the same clock does, a moved clock starts over.
TEST(QueueParkLookTest, ParksOnlyOnASecondLookWithTheSameClock) {
  DrainedLook look{};
  EXPECT_FALSE(SecondLookConfirms(&look, 5000, 300000)) << "the first look parked";
  EXPECT_FALSE(SecondLookConfirms(&look, 5000, 300000 + kParkRecheckNs - 1)) << "too soon";
  EXPECT_TRUE(SecondLookConfirms(&look, 5000, 300000 + kParkRecheckNs));
  // A claim or a completion moved the clock between the looks: start over.
  EXPECT_FALSE(SecondLookConfirms(&look, 5100, 400000));
  EXPECT_EQ(look.busy, 5100u);
  EXPECT_EQ(look.at, 400000u);
  EXPECT_FALSE(SecondLookConfirms(&look, 5100, 400000 + kParkRecheckNs / 2));
  EXPECT_TRUE(SecondLookConfirms(&look, 5100, 400000 + 10 * kParkRecheckNs));
}

// The looks keep the low 32 bits of ns (4.3 s): a first look just before
// they wrap and a second just after is still that far apart.
TEST(QueueParkLookTest, TimesWrapAt32Bits) {
  DrainedLook look{};
  const unsigned int before_wrap = 0xffffffffu - kParkRecheckNs / 4;
  EXPECT_FALSE(SecondLookConfirms(&look, 77, before_wrap));
  const unsigned int soon_after = before_wrap + kParkRecheckNs / 2;  // wrapped
  ASSERT_LT(soon_after, before_wrap);
  EXPECT_FALSE(SecondLookConfirms(&look, 77, soon_after)) << "too soon";
  EXPECT_TRUE(SecondLookConfirms(&look, 77, before_wrap + kParkRecheckNs));
}

// A parking grid claims nothing until the park's bound is known (a
// submission past it is the new grid's: its Submit saw the park), then only
// what lies below the bound; a running grid claims anything.
TEST(QueueParkLookTest, ParkingGridClaimsOnlyBelowItsBound) {
  EXPECT_EQ(ParkClaimBound(ParkPhase::kRunning, 0), ~0ull);
  EXPECT_EQ(ParkClaimBound(ParkPhase::kRunning, 12), ~0ull) << "a running grid is not bounded";
  EXPECT_EQ(ParkClaimBound(ParkPhase::kBoundUnknown, 12), 0ull)
      << "claimed before the bound was known";
  EXPECT_EQ(ParkClaimBound(ParkPhase::kBounded, 12), 12ull);
  EXPECT_EQ(ParkClaimBound(ParkPhase::kBounded, 0), 0ull);
}

}  // namespace
}  // namespace gpuos::device
