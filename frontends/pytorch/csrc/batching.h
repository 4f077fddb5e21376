// Transparent batching: intercepting aten operators below Python
// (docs/pytorch.md, "Transparent batching").
//
// A boxed fallback on the dispatch key kBatchingKey sees every operator call
// that reaches that key while a batching block is open on the calling thread.
// The key sits below autograd (autograd records its graph as usual and calls
// the ops it decomposes into) and above the backend kernels (CPU, CUDA), so the
// fallback sees each op on the way to its kernel. Every op is counted by name;
// a BatchingRecorder installed on the thread decides per op "record" or
// "flush, then run eagerly" (batching_recorder.h records sequences of ops and
// submits them to gpuos as one program per flush).
//
// Thread safety: all state is per thread. A block opened on one thread does
// not intercept ops of other threads. Compiled with torch's flags (only the
// extension gpuos._C includes this).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/DispatchKey.h>

#include <cstdint>
#include <map>
#include <string>

namespace gpuos_torch {

// The functionality key the fallback is registered on. `Fake` is reserved for
// torchdistx's (archived) out-of-tree fake tensors and nothing in torch 2.4 to
// 2.11 registers a kernel or fallback on it; see docs/pytorch.md for why no
// other key fits.
inline constexpr c10::DispatchKey kBatchingKey = c10::DispatchKey::Fake;

// Why a recorder is flushed.
enum class FlushReason {
  kEagerOp,      // an op that runs eagerly comes next (the recorder knows which)
  kBlockExit,    // the outermost block of the thread closed
  kSynchronize,  // gpuos.synchronize()
};

// What the fallback does with one operator call.
enum class BatchingAction {
  // Flush the recorder's pending work, then run the kernels below the key.
  kRunEagerly,
  // The recorder takes the call (BatchingRecorder::Record).
  kRecord,
};

// Decides and records ops for one thread (SequenceRecorder in
// batching_recorder.h; without a recorder every op runs eagerly). Every method is called on the
// thread that installed the recorder, with kBatchingKey excluded, so ops it calls itself
// (allocations, copies) run directly and are not intercepted.
class BatchingRecorder {
 public:
  virtual ~BatchingRecorder() = default;
  // REQUIRES: `stack` holds the call's arguments (boxed convention); must not
  // change it.
  virtual BatchingAction Decide(const c10::OperatorHandle& op, const torch::jit::Stack& stack) = 0;
  // Called only after Decide returned kRecord: pops the arguments from `stack`
  // and pushes the results (real tensors whose contents the pending work will
  // produce). `below` is the key set that runs the op's kernels
  // (op.redispatchBoxed(below, stack)), for ops the recorder runs itself.
  virtual void Record(const c10::OperatorHandle& op, c10::DispatchKeySet below,
                      torch::jit::Stack* stack) = 0;
  // Submits the pending work. Called before every op that runs eagerly and
  // when the outermost block on the thread closes.
  virtual void Flush(FlushReason reason) = 0;
};

// Registers the fallback once per process. Returns "" on success, else why it
// is unavailable (e.g. another library already holds a fallback on the key).
// Thread-safe.
std::string InstallBatchingFallback();

// Opens a block on the calling thread: the outermost one includes kBatchingKey
// in the thread-local dispatch key set (the state an IncludeDispatchKeyGuard
// would set, kept open across the Python `with` statement). Blocks nest.
// REQUIRES: InstallBatchingFallback() returned "".
void EnterBatching();
// Closes the innermost block; the outermost one flushes the recorder (if any)
// and restores the key's previous inclusion state. Returns false, changing
// nothing, when no block is open on this thread. A flush that throws
// propagates after the block is closed.
bool ExitBatching();
// Flushes the calling thread's recorder (if any) now (gpuos.synchronize()).
void FlushBatching(FlushReason reason);
// Blocks open on the calling thread.
int BatchingDepth();

// Installs `recorder` (not owned; nullptr for none) on the calling thread and
// returns the previous one. REQUIRES: `recorder` outlives its installation.
BatchingRecorder* SetThreadRecorder(BatchingRecorder* recorder);

// What the calling thread's fallback has seen since the last reset.
struct BatchingCounts {
  std::map<std::string, int64_t> ops;  // "aten::add.Tensor" -> calls seen
  int64_t ran_eagerly = 0;             // calls run by the kernels below the key
  int64_t recorded = 0;                // calls taken by a recorder
  // CompositeImplicitAutograd ops (reached only where autograd is skipped,
  // e.g. inference_mode) passed on to decompose; the ops they decompose into
  // come back through the fallback and are counted there instead.
  int64_t decomposed = 0;
  int64_t flushes = 0;  // recorder flushes
};
BatchingCounts ThreadBatchingCounts();
void ResetThreadBatchingCounts();

}  // namespace gpuos_torch
