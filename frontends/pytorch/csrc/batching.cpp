// The batching fallback and its per-thread state (batching.h).
#include "batching.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <exception>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace gpuos_torch {
namespace {

struct OpEntry {
  c10::OperatorName name{"", ""};
  int64_t count = 0;
  bool composite_implicit = false;
};

struct ThreadState {
  int depth = 0;
  bool key_was_included = false;  // before the outermost block opened
  BatchingRecorder* recorder = nullptr;
  // Keyed by the address of the operator's name in the dispatcher's table:
  // stable while the operator is registered; the stored name catches an
  // operator deregistered and another registered at the same address.
  std::unordered_map<const c10::OperatorName*, OpEntry> ops;
  std::map<std::string, int64_t> retired;  // counts of such replaced entries
  int64_t ran_eagerly = 0;
  int64_t recorded = 0;
  int64_t decomposed = 0;
  int64_t flushes = 0;
};

thread_local ThreadState t_state;

OpEntry& EntryOf(ThreadState& state, const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.operator_name();
  auto [it, inserted] = state.ops.try_emplace(&name);
  OpEntry& entry = it->second;
  if (inserted || entry.name != name) {
    if (entry.count > 0) state.retired[c10::toString(entry.name)] += entry.count;
    entry =
        OpEntry{name, 0, op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)};
  }
  return entry;
}

void Flush(ThreadState& state, FlushReason reason) {
  ++state.flushes;
  state.recorder->Flush(reason);
}

// Why the key set is passed on as it is: `below` drops this key and every key
// above it, so the call continues exactly where eager dispatch would have gone
// next (Python, BackendSelect, the backend kernel).
void BatchingFallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                      torch::jit::Stack* stack) {
  const c10::DispatchKeySet below =
      keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kBatchingKey);
  ThreadState& state = t_state;
  if (state.depth == 0) {  // the key was included by someone else: not ours
    op.redispatchBoxed(below, stack);
    return;
  }
  OpEntry& entry = EntryOf(state, op);
  if (entry.composite_implicit && !op.hasKernelForDispatchKey(below.highestPriorityTypeId())) {
    // Autograd did not decompose it (inference_mode): the backend slot runs
    // the decomposition, whose ops come back here with the key still included.
    ++state.decomposed;
    op.redispatchBoxed(below, stack);
    return;
  }
  ++entry.count;
  // Ops the kernels or the recorder call themselves are theirs, not the
  // user's: they run directly.
  c10::impl::ExcludeDispatchKeyGuard exclude(kBatchingKey);
  if (state.recorder != nullptr) {
    if (state.recorder->Decide(op, *stack) == BatchingAction::kRecord) {
      ++state.recorded;
      state.recorder->Record(op, below, stack);
      return;
    }
    Flush(state, FlushReason::kEagerOp);
  }
  ++state.ran_eagerly;
  op.redispatchBoxed(below, stack);
}

}  // namespace

std::string InstallBatchingFallback() {
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    try {
      if (c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(kBatchingKey)) {
        error = "another library already registered a fallback on dispatch key " +
                std::string(c10::toString(kBatchingKey)) +
                " (torchdistx's fake tensors?); gpuos.batching() needs that key for itself";
        return;
      }
      // Never destroyed: at exit the dispatcher may outlive this extension's
      // statics, and the registration must stay valid until then.
      auto* library = new torch::Library(torch::Library::IMPL, "_", kBatchingKey, __FILE__,
                                         static_cast<uint32_t>(__LINE__));
      library->fallback(torch::CppFunction::makeFromBoxedFunction<&BatchingFallback>());
    } catch (const std::exception& e) {
      error = std::string("registering the batching fallback failed: ") + e.what();
    }
  });
  return error;
}

void EnterBatching() {
  ThreadState& state = t_state;
  if (state.depth++ == 0) {
    state.key_was_included = c10::impl::tls_is_dispatch_key_included(kBatchingKey);
    c10::impl::tls_set_dispatch_key_included(kBatchingKey, true);
  }
}

bool ExitBatching() {
  ThreadState& state = t_state;
  if (state.depth == 0) return false;
  if (--state.depth == 0) {
    // Restored before the flush, so a flush that throws leaves no block open.
    c10::impl::tls_set_dispatch_key_included(kBatchingKey, state.key_was_included);
    if (state.recorder != nullptr) {
      c10::impl::ExcludeDispatchKeyGuard exclude(kBatchingKey);
      Flush(state, FlushReason::kBlockExit);
    }
  }
  return true;
}

void FlushBatching(FlushReason reason) {
  ThreadState& state = t_state;
  if (state.recorder == nullptr) return;
  c10::impl::ExcludeDispatchKeyGuard exclude(kBatchingKey);
  Flush(state, reason);
}

int BatchingDepth() { return t_state.depth; }

BatchingRecorder* SetThreadRecorder(BatchingRecorder* recorder) {
  return std::exchange(t_state.recorder, recorder);
}

BatchingCounts ThreadBatchingCounts() {
  const ThreadState& state = t_state;
  BatchingCounts counts;
  counts.ops = state.retired;
  for (const auto& [address, entry] : state.ops) {
    if (entry.count > 0) counts.ops[c10::toString(entry.name)] += entry.count;
  }
  counts.ran_eagerly = state.ran_eagerly;
  counts.recorded = state.recorded;
  counts.decomposed = state.decomposed;
  counts.flushes = state.flushes;
  return counts;
}

void ResetThreadBatchingCounts() {
  ThreadState& state = t_state;
  state.ops.clear();
  state.retired.clear();
  state.ran_eagerly = state.recorded = state.decomposed = state.flushes = 0;
}

}  // namespace gpuos_torch
