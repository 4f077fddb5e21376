#include "gpuos/runtime/stream_query_thread.h"

#include <utility>

namespace gpuos::runtime {
namespace {

using Clock = std::chrono::steady_clock;

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

StreamQueryThread::StreamQueryThread(Query query, std::function<void()> prepare,
                                     std::chrono::microseconds spin)
    : query_(std::move(query)), spin_(spin) {
  thread_ = std::thread([this, prepare = std::move(prepare)]() mutable { Loop(std::move(prepare)); });
}

StreamQueryThread::~StreamQueryThread() {
  stop_.store(true, std::memory_order_release);
  std::uint32_t asleep = kAsleep;
  if (state_.compare_exchange_strong(asleep, kFree, std::memory_order_acq_rel)) {
    state_.notify_one();
  }
  thread_.join();
}

void StreamQueryThread::Loop(std::function<void()> prepare) {
  if (prepare) prepare();
  Clock::time_point last = Clock::now();
  unsigned int looks = 0;
  for (;;) {
    const std::uint32_t state = state_.load(std::memory_order_acquire);
    if (state == kRequested) {
      result_ = query_(stream_);
      answered_.fetch_add(1, std::memory_order_relaxed);
      state_.store(kAnswered, std::memory_order_release);
      last = Clock::now();
      continue;
    }
    // Stops only with no query outstanding (the destructor's contract), so
    // that a Take never waits for an answer that will not come.
    if (stop_.load(std::memory_order_acquire) && state != kPosting) return;
    if (state == kFree && (++looks & 63u) == 0 && Clock::now() - last > spin_) {
      std::uint32_t free = kFree;
      if (state_.compare_exchange_strong(free, kAsleep, std::memory_order_acq_rel)) {
        sleeps_.fetch_add(1, std::memory_order_relaxed);
        state_.wait(kAsleep, std::memory_order_acquire);  // until WakeIfAsleep or the destructor
        last = Clock::now();
      }
      continue;
    }
    CpuRelax();
  }
}

StreamQueryThread::Ticket StreamQueryThread::Post(CUstream stream) {
  std::uint32_t expected = kFree;
  if (!state_.compare_exchange_strong(expected, kPosting, std::memory_order_acquire)) {
    if (expected == kAsleep) wake_wanted_.store(true, std::memory_order_relaxed);
    refused_.fetch_add(1, std::memory_order_relaxed);
    return kNoTicket;
  }
  stream_ = stream;
  ticket_ = next_ticket_++;
  const Ticket ticket = ticket_;
  state_.store(kRequested, std::memory_order_release);
  return ticket;
}

bool StreamQueryThread::Answered(Ticket ticket) const {
  return ticket != kNoTicket && state_.load(std::memory_order_acquire) == kAnswered;
}

CUresult StreamQueryThread::Take(Ticket ticket) {
  (void)ticket;  // the outstanding one (one query at a time)
  while (state_.load(std::memory_order_acquire) != kAnswered) CpuRelax();
  const CUresult result = result_;
  state_.store(kFree, std::memory_order_release);
  return result;
}

void StreamQueryThread::WakeIfAsleep() {
  if (!wake_wanted_.exchange(false, std::memory_order_relaxed)) return;
  std::uint32_t asleep = kAsleep;
  if (state_.compare_exchange_strong(asleep, kFree, std::memory_order_acq_rel)) {
    state_.notify_one();
  }
}

}  // namespace gpuos::runtime
