// The stream query thread (gpuos/runtime/stream_query_thread.h): answers on
// its own thread, one query at a time, sleeps after its spin and wakes when
// asked. The query is a stand-in (no GPU): it answers by the stream handle.
#include "gpuos/runtime/stream_query_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace gpuos::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::microseconds;
using Clock = std::chrono::steady_clock;

CUstream FakeStream(std::uintptr_t n) { return reinterpret_cast<CUstream>(n); }

// Idle for even handles, busy for odd ones.
CUresult AnswerByHandle(CUstream stream) {
  return reinterpret_cast<std::uintptr_t>(stream) % 2 == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

// Waits up to 5 s for `done`.
template <typename Predicate>
bool Eventually(Predicate done) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(microseconds(100));
  }
  return true;
}

TEST(StreamQueryThreadTest, AnswersEachPostedStreamOnItsOwnThread) {
  std::atomic<std::thread::id> queried_on{};
  std::atomic<int> prepared{0};
  StreamQueryThread querier(
      [&](CUstream stream) {
        queried_on = std::this_thread::get_id();
        return AnswerByHandle(stream);
      },
      [&] { ++prepared; }, milliseconds(1000));
  for (std::uintptr_t n = 2; n < 12; ++n) {
    const auto ticket = querier.Post(FakeStream(n));
    ASSERT_NE(ticket, StreamQueryThread::kNoTicket) << n;
    EXPECT_EQ(querier.Take(ticket), AnswerByHandle(FakeStream(n))) << n;
  }
  EXPECT_EQ(prepared.load(), 1);
  EXPECT_NE(queried_on.load(), std::this_thread::get_id());
  EXPECT_EQ(querier.answered(), 10u);
}

TEST(StreamQueryThreadTest, TheQueryOverlapsTheCaller) {
  // A query of 20 ms: Post returns at once, the answer comes later.
  StreamQueryThread querier(
      [](CUstream stream) {
        std::this_thread::sleep_for(milliseconds(20));
        return AnswerByHandle(stream);
      },
      nullptr, milliseconds(1000));
  const auto start = Clock::now();
  const auto ticket = querier.Post(FakeStream(4));
  ASSERT_NE(ticket, StreamQueryThread::kNoTicket);
  EXPECT_LT(Clock::now() - start, milliseconds(10));
  EXPECT_FALSE(querier.Answered(ticket));
  EXPECT_EQ(querier.Take(ticket), CUDA_SUCCESS);
  EXPECT_GE(Clock::now() - start, milliseconds(20));
}

TEST(StreamQueryThreadTest, OneQueryAtATime) {
  std::atomic<bool> release{false};
  StreamQueryThread querier(
      [&](CUstream stream) {
        while (!release) std::this_thread::yield();
        return AnswerByHandle(stream);
      },
      nullptr, milliseconds(1000));
  const auto first = querier.Post(FakeStream(3));
  ASSERT_NE(first, StreamQueryThread::kNoTicket);
  // Outstanding (running, then answered but not taken): refused.
  EXPECT_EQ(querier.Post(FakeStream(2)), StreamQueryThread::kNoTicket);
  release = true;
  ASSERT_TRUE(Eventually([&] { return querier.Answered(first); }));
  EXPECT_EQ(querier.Post(FakeStream(2)), StreamQueryThread::kNoTicket);
  EXPECT_EQ(querier.refused(), 2u);
  EXPECT_EQ(querier.Take(first), CUDA_ERROR_NOT_READY);
  const auto second = querier.Post(FakeStream(2));
  ASSERT_NE(second, StreamQueryThread::kNoTicket);
  EXPECT_NE(second, first);
  EXPECT_EQ(querier.Take(second), CUDA_SUCCESS);
}

TEST(StreamQueryThreadTest, SleepsAfterItsSpinAndWakesWhenAsked) {
  StreamQueryThread querier(AnswerByHandle, nullptr, microseconds(200));
  ASSERT_TRUE(Eventually([&] { return querier.sleeps() == 1; }));
  // Asleep: the caller queries inline; the wake comes later, off its path.
  EXPECT_EQ(querier.Post(FakeStream(2)), StreamQueryThread::kNoTicket);
  querier.WakeIfAsleep();
  StreamQueryThread::Ticket ticket = StreamQueryThread::kNoTicket;
  ASSERT_TRUE(Eventually([&] {
    ticket = querier.Post(FakeStream(2));
    return ticket != StreamQueryThread::kNoTicket;
  }));
  EXPECT_EQ(querier.Take(ticket), CUDA_SUCCESS);
  // Without a refused Post there is nothing to wake.
  ASSERT_TRUE(Eventually([&] { return querier.sleeps() == 2; }));
  querier.WakeIfAsleep();
  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(querier.Post(FakeStream(2)), StreamQueryThread::kNoTicket);
}

TEST(StreamQueryThreadTest, StopsWhileAsleepOrSpinning) {
  {
    StreamQueryThread asleep(AnswerByHandle, nullptr, microseconds(100));
    ASSERT_TRUE(Eventually([&] { return asleep.sleeps() == 1; }));
  }
  {
    StreamQueryThread spinning(AnswerByHandle, nullptr, std::chrono::seconds(60));
    const auto ticket = spinning.Post(FakeStream(6));
    ASSERT_NE(ticket, StreamQueryThread::kNoTicket);
    EXPECT_EQ(spinning.Take(ticket), CUDA_SUCCESS);
  }
}

}  // namespace
}  // namespace gpuos::runtime
