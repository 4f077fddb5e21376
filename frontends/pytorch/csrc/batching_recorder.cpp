// SequenceRecorder: recording, replay and flushes (batching_recorder.h).
// Signatures are in batching_recorder_sign.cpp, the hand-over to Python
// (lowering a learned sequence) and the cache in batching_recorder_learn.cpp.
#include "batching_recorder.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/version.h>

#include <unordered_set>

#include "batching_recorder_internal.h"

namespace gpuos_torch {
namespace {

// Whether something other than `ours` references holds `target`. A Python
// wrapper (torch 2.11, "PyObject preservation" in c10/util/intrusive_ptr.h)
// holds one reference, and is itself kept alive by the object while other
// references exist, so Python's own references are read from the wrapper.
// The wrapper's count is read without the GIL: the recorder's tensors belong
// to its thread.
bool HeldElsewhere(c10::intrusive_ptr_target* target, const c10::impl::PyObjectSlot* slot,
                   uint32_t ours) {
  const uint32_t strong = c10::raw::intrusive_ptr::use_count(target);
  PyObject* wrapper = slot->load_pyobj();
  if (wrapper == nullptr) return strong > ours;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
  if (strong - 1 > ours) return true;
  return Py_REFCNT(wrapper) - (strong >= 2 ? 1 : 0) > 0;
#else
  // Older torch owned wrappers differently (not checked here): a tensor that
  // has one counts as in use, which only binds more results.
  return true;
#endif
}

}  // namespace

SequenceRecorder::SequenceRecorder(pybind11::object lowerer, c10::DeviceType device_type,
                                   int64_t cache_size)
    : lowerer_(std::move(lowerer)),
      device_type_(device_type),
      cache_size_(std::max<int64_t>(cache_size, 1)),
      root_(std::make_unique<Node>()) {}

SequenceRecorder::~SequenceRecorder() {
  Reset();
  root_.reset();  // runners release their Python objects with the GIL
}

void SequenceRecorder::ResetStats() {
  const int64_t entries = stats_.cache_entries;
  stats_ = RecorderStats();
  stats_.cache_entries = entries;
}

BatchingAction SequenceRecorder::Decide(const c10::OperatorHandle& op,
                                        const torch::jit::Stack& stack) {
  const OpInfo& info = InfoOf(op);
  current_ = &info;
  if (!info.why.empty()) {
    NoteFallback(info, info.why);
    return BatchingAction::kRunEagerly;
  }
  std::string why;
  if (!Sign(info, stack, &why)) {
    NoteFallback(info, why);
    return BatchingAction::kRunEagerly;
  }
  Node* node = mode_ == Mode::kIdle ? root_.get() : cursor_;
  Edge* edge = FindEdge(node, op);
  if (edge != nullptr && !edge->eager_reason.empty()) {
    NoteFallback(info, edge->eager_reason);
    return BatchingAction::kRunEagerly;
  }
  if (mode_ == Mode::kReplaying && edge == nullptr) {
    ++stats_.divergences;
    if (first_edge_ != nullptr) first_edge_->replays_run = false;
    Materialize();
    mode_ = Mode::kLearning;
  }
  if (mode_ == Mode::kIdle) {
    // A sequence known to end eagerly right after this op (one op alone) is
    // not deferred: materializing it at the flush would cost a copy.
    const bool eager_leaf =
        edge != nullptr && edge->child->state == Node::kEager && edge->child->edges.empty();
    mode_ = edge != nullptr && !eager_leaf ? Mode::kReplaying : Mode::kLearning;
    cursor_ = root_.get();
  }
  edge_ = edge;
  return BatchingAction::kRecord;
}

void SequenceRecorder::Register(int step, const std::vector<at::Tensor>& outputs) {
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    const at::Tensor& t = outputs[j];
    produced_.emplace(t.storage().unsafeGetStorageImpl(),
                      Produced{t.unsafeGetTensorImpl(), step, static_cast<int>(j)});
  }
}

void SequenceRecorder::Record(const c10::OperatorHandle& op, c10::DispatchKeySet below,
                              torch::jit::Stack* stack) {
  const OpInfo& info = *current_;
  PendingStep step;
  step.below = below;
  step.args.assign(stack->end() - info.num_arguments, stack->end());
  const bool replay = mode_ == Mode::kReplaying;
  if (replay && steps_.empty()) first_edge_ = edge_;
  if (replay && !edge_->view) {
    KeepWarmWhileReplaying();
    torch::jit::drop(*stack, info.num_arguments);
    for (std::size_t j = 0; j < edge_->outputs.size(); ++j) {
      at::Tensor spare = TakeSpare(edge_, j);
      if (spare.defined()) {
        ++stats_.reused_outputs;
        step.outputs.push_back(std::move(spare));
        continue;
      }
      const Layout& layout = edge_->outputs[j];
      step.outputs.push_back(
          at::empty_strided(layout.sizes, layout.strides,
                            at::TensorOptions().dtype(layout.dtype).device(layout.device)));
    }
    std::size_t next = 0;
    for (int count : edge_->returns) {
      if (count < 0) {
        stack->emplace_back(step.outputs[next++]);
      } else {
        c10::List<at::Tensor> list;
        for (int i = 0; i < count; ++i) list.push_back(step.outputs[next++]);
        stack->emplace_back(std::move(list));
      }
    }
    ++stats_.replayed_ops;
  } else {
    op.redispatchBoxed(below, stack);
    step.ran = true;
    std::vector<int> returns;
    std::string why;
    if (!FlattenResults(*stack, info.num_returns, &step.outputs, &returns, &why)) {
      // Already run: end the sequence before it, and run it eagerly from now on.
      Edge* edge = edge_ != nullptr ? edge_ : AddEdge(op, {}, {});
      edge->eager_reason = why;
      NoteFallback(info, why);
      if (!replay) --stats_.learned_ops;
      Flush(FlushReason::kEagerOp);
      return;
    }
    if (replay) {
      ++stats_.view_ops;
    } else {
      ++stats_.learned_ops;
      if (edge_ == nullptr) edge_ = AddEdge(op, returns, step.outputs);
      if (info.view_schema || SharesStorage(step.args, step.outputs)) edge_->view = true;
    }
  }
  for (const at::Tensor& t : new_externals_) {
    external_index_.emplace(t.unsafeGetTensorImpl(), static_cast<int>(externals_.size()));
    externals_.push_back(t);
  }
  new_externals_.clear();
  step.edge = edge_;
  steps_.push_back(std::move(step));
  Register(static_cast<int>(steps_.size()) - 1, steps_.back().outputs);
  cursor_ = edge_->child.get();
}

at::Tensor SequenceRecorder::TakeSpare(Edge* edge, std::size_t output) {
  if (output >= edge->spare.size() || !edge->spare[output].defined()) return at::Tensor();
  at::Tensor& spare = edge->spare[output];
  // Only ours (HeldElsewhere: a preserved Python wrapper nobody references
  // does not count), untouched since: no autograd state, the same layout.
  c10::TensorImpl* impl = spare.unsafeGetTensorImpl();
  c10::StorageImpl* storage = spare.storage().unsafeGetStorageImpl();
  const Layout& layout = edge->outputs[output];
  const bool ours = !HeldElsewhere(impl, impl->pyobj_slot(), 1) &&
                    !HeldElsewhere(storage, storage->pyobj_slot(), 1) &&
                    impl->autograd_meta() == nullptr && spare.sizes() == layout.sizes &&
                    spare.strides() == layout.strides &&
                    spare.storage_offset() == layout.storage_offset;
  if (!ours) {
    spare.reset();
    return at::Tensor();
  }
  return std::move(spare);
}

void SequenceRecorder::KeepWarmWhileReplaying() {
  // Often enough that the worker (idle period 200 us) never parks between
  // two calls, rarely enough to cost nothing per op (one clock read).
  constexpr auto kKeepWarmInterval = std::chrono::microseconds(50);
  if (warm_runner_ == nullptr || first_edge_ == nullptr || !first_edge_->replays_run) return;
  const auto now = std::chrono::steady_clock::now();
  if (!steps_.empty() && now - last_keep_warm_ < kKeepWarmInterval) return;
  last_keep_warm_ = now;
  ++stats_.keep_warms;
  try {
    warm_runner_->KeepWarm();
  } catch (const std::exception&) {
    // Only a hint: the flush's own launch reports what went wrong.
    warm_runner_.reset();
  }
}

SequenceRecorder::Edge* SequenceRecorder::AddEdge(const c10::OperatorHandle& op,
                                                  std::vector<int> returns,
                                                  const std::vector<at::Tensor>& outputs) {
  Node* node = mode_ == Mode::kIdle ? root_.get() : cursor_;
  auto edge = std::make_unique<Edge>(op);
  edge->signature = signature_;
  edge->returns = std::move(returns);
  for (const at::Tensor& t : outputs) {
    edge->outputs.push_back(Layout{t.scalar_type(), t.sizes().vec(), t.strides().vec(),
                                   t.storage_offset(), t.device()});
  }
  edge->child = std::make_unique<Node>();
  edge->child->parent = node;
  edge->child->via = edge.get();
  node->edges.push_back(std::move(edge));
  return node->edges.back().get();
}

void SequenceRecorder::Materialize() {
  for (PendingStep& step : steps_) {
    if (step.ran) continue;
    torch::jit::Stack stack(step.args.begin(), step.args.end());
    step.edge->op.redispatchBoxed(step.below, &stack);
    std::vector<at::Tensor> results;
    std::vector<int> returns;
    std::string why;
    FlattenResults(stack, static_cast<int>(step.edge->returns.size()), &results, &returns, &why);
    for (std::size_t j = 0; j < results.size() && j < step.outputs.size(); ++j) {
      step.outputs[j].copy_(results[j]);
    }
    step.ran = true;
    ++stats_.materialized_ops;
  }
}

std::vector<std::vector<bool>> SequenceRecorder::Alive() const {
  // A result is in use when something other than this recorder holds a
  // tensor on its storage: count our own references to each tensor and
  // storage, and compare with their reference counts.
  std::unordered_map<c10::TensorImpl*, uint32_t> ours;
  auto count = [&](const at::Tensor& t) {
    if (t.defined()) ++ours[t.unsafeGetTensorImpl()];
  };
  for (const at::Tensor& t : externals_) count(t);
  for (const PendingStep& step : steps_) {
    for (const at::Tensor& t : step.outputs) count(t);
    for (const c10::IValue& v : step.args) {
      if (v.isTensor()) {
        count(v.toTensor());
      } else if (v.isList()) {
        for (const c10::IValue& e : v.toListRef()) {
          if (e.isTensor()) count(e.toTensor());
        }
      }
    }
  }
  std::unordered_map<c10::StorageImpl*, uint32_t> impls_on;
  std::unordered_set<c10::StorageImpl*> held_elsewhere;
  for (const auto& [impl, refs] : ours) {
    if (!impl->has_storage()) continue;
    c10::StorageImpl* storage = impl->storage().unsafeGetStorageImpl();
    ++impls_on[storage];
    if (HeldElsewhere(impl, impl->pyobj_slot(), refs)) held_elsewhere.insert(storage);
  }
  std::vector<std::vector<bool>> alive;
  for (const PendingStep& step : steps_) {
    alive.emplace_back();
    for (const at::Tensor& t : step.outputs) {
      c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
      // Each TensorImpl on the storage holds one reference to it.
      const bool used = held_elsewhere.count(storage) > 0 ||
                        HeldElsewhere(storage, storage->pyobj_slot(), impls_on[storage]);
      alive.back().push_back(used);
    }
  }
  return alive;
}

bool SequenceRecorder::RunProgram(Node* node) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = Clock::now();
  const std::vector<std::vector<bool>> alive = Alive();
  const Clock::time_point checked = Clock::now();
  stats_.flush_liveness_ns += (checked - started).count();
  for (std::size_t k = 0; k < steps_.size(); ++k) {
    if (steps_[k].edge->view) continue;
    for (std::size_t j = 0; j < alive[k].size(); ++j) {
      if (alive[k][j] && !node->bound[k][j]) {
        ++stats_.liveness_misses;
        return false;
      }
    }
  }
  std::vector<at::Tensor> outputs;
  outputs.reserve(node->bindings.size());
  for (const auto& [k, j] : node->bindings) outputs.push_back(steps_[k].outputs[j]);
  try {
    node->runner->Run(externals_, outputs);
  } catch (const std::exception& e) {
    MarkEager(node, std::string("the program failed: ") + e.what());
    return false;
  }
  stats_.flush_submit_ns += (Clock::now() - checked).count();
  // Results nobody holds and the program did not write: the next replay of
  // the same ops hands them out again (Edge::spare).
  for (std::size_t k = 0; k < steps_.size(); ++k) {
    Edge* edge = steps_[k].edge;
    if (edge->view) continue;
    for (std::size_t j = 0; j < alive[k].size(); ++j) {
      if (alive[k][j] || node->bound[k][j]) continue;
      if (edge->spare.size() <= j) edge->spare.resize(steps_[k].outputs.size());
      edge->spare[j] = steps_[k].outputs[j];
    }
  }
  ++stats_.submissions;
  stats_.tasks += node->tasks;
  warm_runner_ = node->runner;
  for (PendingStep& step : steps_) step.ran = true;
  return true;
}

void SequenceRecorder::Flush(FlushReason reason) {
  if (steps_.empty()) {
    Reset();
    return;
  }
  ++stats_.flushes[reason == FlushReason::kBlockExit     ? std::string("block exit")
                   : reason == FlushReason::kSynchronize ? std::string("synchronize")
                   : flush_op_ != nullptr                ? *flush_op_
                                                         : std::string("eager op")];
  // Resets on every way out; after a program ran, the time it takes (the
  // pending ops' tensors released) is counted in flush_release_ns.
  struct ResetAtEnd {
    SequenceRecorder* recorder;
    int64_t* release_ns = nullptr;
    ~ResetAtEnd() {
      const auto started = std::chrono::steady_clock::now();
      recorder->Reset();
      if (release_ns != nullptr)
        *release_ns += (std::chrono::steady_clock::now() - started).count();
    }
  } reset_at_end{this};
  Node* node = cursor_;
  Edge* first = mode_ == Mode::kReplaying ? first_edge_ : nullptr;
  if (mode_ == Mode::kReplaying && node->state == Node::kProgram && RunProgram(node)) {
    if (first != nullptr) first->replays_run = true;
    Touch(node);
    reset_at_end.release_ns = &stats_.flush_release_ns;
    return;
  }
  if (first != nullptr) first->replays_run = false;
  const bool relearn = node->state == Node::kProgram;  // liveness miss
  Materialize();
  if (node->state == Node::kUnknown || relearn) {
    Learn(node);
  } else {
    Touch(node);
  }
}

void SequenceRecorder::Reset() {
  steps_.clear();
  externals_.clear();
  external_index_.clear();
  produced_.clear();
  new_externals_.clear();
  mode_ = Mode::kIdle;
  cursor_ = nullptr;
  edge_ = nullptr;
  first_edge_ = nullptr;
  flush_op_ = nullptr;
}

}  // namespace gpuos_torch
