// A thread that queries a CUDA stream ahead of a submission (docs/runtime.md,
// "Speculative slot reads"). A frontend that orders a submission after the
// work a caller enqueued on a stream (docs/pytorch.md, "Ordering with
// PyTorch's streams") must know whether that stream is idle before its
// submission may start; cuStreamQuery took 1.7-2.3 us of host time on the
// H200 machines (session 32), on the call's path. Posted when a call
// begins, the query runs here while the caller does the rest of its host
// work (guards, allocation, binding), and the caller takes the answer just
// before it submits.
//
// The thread spins (a pause instruction per look) for `spin` after its last
// query, then sleeps; a Post that finds it asleep returns kNoTicket (the
// caller queries inline) and asks for a wake-up, which the caller's
// WakeIfAsleep performs off its critical path (a futex wake is a system
// call). One query at a time: a Post while another caller's query is
// outstanding returns kNoTicket as well. Thread safe.
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

namespace gpuos::runtime {

class StreamQueryThread {
 public:
  using Query = std::function<CUresult(CUstream)>;
  using Ticket = std::uint64_t;
  static constexpr Ticket kNoTicket = 0;

  // `query` answers for a stream (cuStreamQuery; tests pass their own);
  // `prepare` runs once on the thread before its first query (making the
  // streams' context current). The thread starts awake.
  StreamQueryThread(Query query, std::function<void()> prepare, std::chrono::microseconds spin);
  // Stops and joins the thread. No ticket may be outstanding.
  ~StreamQueryThread();
  StreamQueryThread(const StreamQueryThread&) = delete;
  StreamQueryThread& operator=(const StreamQueryThread&) = delete;

  // Asks for a query of `stream`, to begin now. Returns its ticket, which
  // the caller must Take, or kNoTicket (nothing posted) while another query
  // is outstanding or the thread sleeps.
  Ticket Post(CUstream stream);
  // Whether `ticket`'s answer is there (Take would not wait).
  bool Answered(Ticket ticket) const;
  // `ticket`'s answer, waiting (spinning) until the thread has it; then the
  // thread takes the next Post. `ticket` must be the outstanding one.
  CUresult Take(Ticket ticket);
  // Wakes the thread if a Post found it asleep since the last call.
  void WakeIfAsleep();

  // Counts since construction (diagnostics and tests).
  std::uint64_t answered() const { return answered_.load(std::memory_order_relaxed); }
  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  std::uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  enum State : std::uint32_t { kFree, kPosting, kRequested, kAnswered, kAsleep };
  void Loop(std::function<void()> prepare);

  Query query_;
  const std::chrono::microseconds spin_;
  std::atomic<std::uint32_t> state_{kFree};
  std::atomic<bool> stop_{false};
  std::atomic<bool> wake_wanted_{false};
  CUstream stream_ = nullptr;    // written under kPosting, read at kRequested
  CUresult result_ = CUDA_SUCCESS;  // written before kAnswered
  Ticket ticket_ = kNoTicket;    // the outstanding one
  Ticket next_ticket_ = 1;       // under kPosting
  std::atomic<std::uint64_t> answered_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> sleeps_{0};
  std::thread thread_;
};

}  // namespace gpuos::runtime
