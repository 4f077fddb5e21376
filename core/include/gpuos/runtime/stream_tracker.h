// Knowing that a CUDA stream has no unfinished work without asking the
// driver (docs/pytorch.md, "Knowing the stream's state without a query").
//
// While the persistent worker runs, every cuStreamQuery of the process costs
// about 1.1 us more (docs/runtime.md, "What a running worker costs every
// stream query"), and a compiled call must know its stream is idle before
// its submission may start. A stream found idle stays idle until something
// is enqueued on it, so counting the driver calls that may enqueue work
// answers the question for free in the common case: nothing was enqueued in
// the whole process since the stream was last found idle.
//
// StreamIdleLedger is that bookkeeping, with no CUDA dependency (tested
// without a GPU). StreamTracker feeds it from CUPTI's driver- and
// runtime-API callbacks (both, in case a runtime call reaches the driver
// by a path CUPTI does not report; NoteDriverCall is the rule): every call
// not known to enqueue nothing counts as an enqueue, on any stream
// (conservative: a call it cannot classify only costs a query), counted
// when it returns, once its work is there for any later query to see; a
// successful stream query or synchronize (or a context or device
// synchronize) notes its stream (or every stream of the context) idle as
// of the count at that call's entry. So an enqueue still in progress while
// a query runs returns after the query's entry and makes its finding
// stale, whether the query saw the new work or not. CUPTI allows one subscriber per process,
// so the tracker is opt-in: while it runs, profilers that use CUPTI (torch.profiler, Nsight
// Systems) cannot subscribe, and every driver call pays the callback.
//
// Status (session 39): the ledger is tested on the CPU and the CUPTI
// subscription on an H200. The PyTorch frontend publishes a call open, with
// no query, when the tracker (GPUOS_TORCH_STREAM_TRACKER=1) knows its
// stream idle. Measured there, CUPTI's callbacks cost every CUDA call of
// the process about 2 us, more than the query a call saves, so the worker's
// read of a submission published open, which would have used it, is not
// built (docs/pytorch.md, "Knowing the stream's state without a query").
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gpuos/status.h"

struct CUstream_st;
struct CUctx_st;

namespace gpuos::runtime {

class StreamIdleLedger {
 public:
  // A call that may have enqueued work on some stream returned.
  void NoteEnqueue() { enqueues_.fetch_add(1, std::memory_order_acq_rel); }
  // The count of such calls so far: read before a query or synchronize, and
  // passed to NoteIdle once it has found the stream idle.
  std::uint64_t Mark() const { return enqueues_.load(std::memory_order_acquire); }
  // `stream` of `context` had no unfinished work at a moment after Mark()
  // returned `mark`. Streams are told apart with their context, since the
  // legacy stream's handles (nullptr and CU_STREAM_LEGACY) exist in every
  // context. CU_STREAM_PER_THREAD names another stream in every thread, so
  // findings of it are not kept (KnownIdle of it is false).
  void NoteIdle(CUctx_st* context, CUstream_st* stream, std::uint64_t mark);
  // Every stream of `context` had no unfinished work then (a context or
  // device synchronize).
  void NoteAllIdle(CUctx_st* context, std::uint64_t mark);
  // Whether `stream` of `context` was found idle and nothing was enqueued in
  // the process since: then it is idle now.
  bool KnownIdle(CUctx_st* context, CUstream_st* stream) const;

 private:
  struct Found {
    CUctx_st* context;
    CUstream_st* stream;  // nullptr here: every stream of the context
    std::uint64_t mark;   // the latest mark it was found idle at
  };
  // Keeps the latest finding of (context, stream); at most 64 are kept,
  // the oldest replaced.
  void Note(CUctx_st* context, CUstream_st* stream, std::uint64_t mark);
  std::atomic<std::uint64_t> enqueues_{0};
  mutable std::mutex mutex_;  // guards found_
  std::vector<Found> found_;  // the streams a process synchronizes: a handful
};

// How StreamTracker classifies one call of the driver or runtime API
// (CUPTI's callback id, as cupti_driver_cbid.h and cupti_runtime_cbid.h
// number them). Exposed for tests.
enum class DriverCallKind {
  kEnqueuesNothing,  // a query of state, a context switch, ...
  kStreamIdleCheck,  // cuStreamQuery, cuStreamSynchronize, their runtime forms
  // The same, per-thread default stream forms (_ptsz): a null stream there
  // is the thread's default stream, not the legacy one.
  kPerThreadStreamIdleCheck,
  kContextIdleCheck,  // cuCtxSynchronize, cudaDeviceSynchronize
  kMayEnqueue,        // everything else
};
DriverCallKind ClassifyDriverCall(std::uint32_t cupti_driver_cbid);
DriverCallKind ClassifyRuntimeCall(std::uint32_t cupti_runtime_cbid);

// What one callback of a call of `kind` tells `ledger` (the tracker's rule,
// exposed for tests). `entering`: the call's entry, else its exit;
// `correlation`: CUPTI's scratch word shared by the two; at the exit,
// `succeeded` (CUresult or cudaError_t 0), the thread's current `context`
// and the call's stream (its first parameter; nullptr also for a call
// without one).
void NoteDriverCall(StreamIdleLedger& ledger, DriverCallKind kind, bool entering,
                    std::uint64_t* correlation, bool succeeded, CUctx_st* context,
                    CUstream_st* stream);

class StreamTracker {
 public:
  // Subscribes to CUPTI's driver- and runtime-API callbacks (libcupti.so
  // loaded at run time and never unloaded). Unavailable naming the reason when CUPTI cannot be
  // loaded, when another subscriber (a profiler) holds it, or where gpuos was built without CUPTI's
  // headers.
  static Expected<std::unique_ptr<StreamTracker>> Start();
  // Unsubscribes. Destroy it only when no other thread makes driver calls
  // (a callback may be running); a frontend keeps one for the process.
  ~StreamTracker();
  StreamTracker(const StreamTracker&) = delete;
  StreamTracker& operator=(const StreamTracker&) = delete;

  bool KnownIdle(CUctx_st* context, CUstream_st* stream) const {
    return ledger_.KnownIdle(context, stream);
  }
  // Calls counted as enqueues so far (diagnostics).
  std::uint64_t enqueues() const { return ledger_.Mark(); }

 private:
  struct Cupti;  // the loaded library and the subscription (stream_tracker.cpp)
  StreamTracker() = default;
  StreamIdleLedger ledger_;
  std::unique_ptr<Cupti> cupti_;
};

}  // namespace gpuos::runtime
