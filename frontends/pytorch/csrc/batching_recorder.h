// Transparent batching, step 2: recording sequences of aten ops and running
// each learned sequence as one gpuos program per flush (docs/pytorch.md,
// "Transparent batching").
//
// The first time a sequence of recordable ops is seen (learning) every op runs
// eagerly while the recorder notes it in a trie keyed per op by its signature
// (overload; each tensor argument as "output j of step k" or "external e" with
// dtype, sizes, strides, storage offset and device; every other argument by
// value). At the flush that ends it, a Python callback lowers the noted
// sequence to a program, stored at the trie node. The next time the same ops
// come (replay), each op only follows the trie's edge and allocates its
// outputs with the noted layouts (at::empty_strided: PyTorch's caching
// allocator) without running; the flush runs the node's program once, bound
// by pointer to the external inputs and the outputs handed out. View ops run
// eagerly in both modes (they read no data) and stay part of the sequence.
// An op that does not match the next edge while replaying materializes the
// pending prefix eagerly (each op redispatched below the key and copied into
// the tensors handed out), then learning continues from there.
//
// Thread safety: a recorder belongs to one thread (installed with
// SetThreadRecorder by gpuos/_batching.py, which owns it). Every method runs
// on that thread with kBatchingKey excluded. Python objects (the lowering
// callback, programs) are touched only with the GIL acquired.
#pragma once

#include <ATen/ATen.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "batching.h"

namespace gpuos_torch {

// A built program of one learned sequence.
class SequenceRunner {
 public:
  virtual ~SequenceRunner() = default;
  // Runs the program once: input buffers bound to `externals` (in order of
  // first use in the sequence), output buffers to `outputs` (by pointer, the
  // program's output order). Ordered on PyTorch's current stream like a
  // compiled call. Throws std::exception on failure.
  virtual void Run(const std::vector<at::Tensor>& externals,
                   const std::vector<at::Tensor>& outputs) = 0;
  // A run is expected soon: keep (or get) the executor ready, e.g. the
  // persistent worker launched and not parking (Runtime::KeepWarm). Called
  // without the GIL while a learned sequence replays. Throws on failure.
  virtual void KeepWarm() {}
};

// Turns a Python program object into a runner that needs no Python per run
// (gpuos._C.Program, registered by extension.cpp); returns nullptr for other
// objects, which are then called from Python as runner(externals, outputs).
// REQUIRES: the GIL is held.
using NativeRunnerFactory = std::shared_ptr<SequenceRunner> (*)(pybind11::handle program);
void SetNativeRunnerFactory(NativeRunnerFactory factory);

// The aten overloads recordable at all ("aten::add.Tensor", "aten::relu"):
// gpuos.coverage()'s names. Process-wide; replaces the previous set.
void SetRecordableOps(const std::vector<std::string>& names);

struct RecorderStats {
  int64_t learned_ops = 0;        // recordable ops run eagerly while learning
  int64_t replayed_ops = 0;       // recorded without running (outputs allocated)
  int64_t view_ops = 0;           // view ops run eagerly inside recorded sequences
  int64_t learned_sequences = 0;  // sequences lowered to a program
  int64_t eager_sequences = 0;    // sequences cached as "run eagerly" (with the reason)
  int64_t submissions = 0;        // program runs (one per flush of a replayed sequence)
  int64_t tasks = 0;              // tasks of those programs
  int64_t divergences = 0;        // replays that met an op off the learned path
  int64_t materialized_ops = 0;   // replayed ops run eagerly after all
  int64_t liveness_misses = 0;    // replays whose unbound outputs were still in use
  int64_t evictions = 0;          // cache entries dropped by the bound
  int64_t cache_entries = 0;      // programs and eager marks held now
  int64_t keep_warms = 0;         // SequenceRunner::KeepWarm calls while replaying
  int64_t reused_outputs = 0;     // replayed results handed out again (Edge::spare)
  // Host time of the flushes that ran a program, by part: the liveness
  // check, the program's submission, and releasing the pending ops' tensors.
  int64_t flush_liveness_ns = 0, flush_submit_ns = 0, flush_release_ns = 0;
  std::map<std::string, int64_t> flushes;               // reason -> flushes with pending ops
  std::map<std::string, int64_t> fallbacks;             // op -> calls run eagerly, not recorded
  std::map<std::string, std::string> fallback_reasons;  // op -> first reason
};

// Hidden like pybind11's own types: it holds Python objects.
class __attribute__((visibility("hidden"))) SequenceRecorder final : public BatchingRecorder {
 public:
  // `lowerer(steps, externals, alive)` builds the program of a learned sequence
  // (gpuos/_batching.py documents the protocol). `device_type`: the device the
  // executor runs on (CUDA for gpuos, CPU for the reference executor);
  // `cache_size`: entries (programs or eager marks) kept, LRU.
  SequenceRecorder(pybind11::object lowerer, c10::DeviceType device_type, int64_t cache_size);
  ~SequenceRecorder() override;
  SequenceRecorder(const SequenceRecorder&) = delete;
  SequenceRecorder& operator=(const SequenceRecorder&) = delete;

  BatchingAction Decide(const c10::OperatorHandle& op, const torch::jit::Stack& stack) override;
  void Record(const c10::OperatorHandle& op, c10::DispatchKeySet below,
              torch::jit::Stack* stack) override;
  void Flush(FlushReason reason) override;

  const RecorderStats& stats() const { return stats_; }
  void ResetStats();
  // Drops every learned sequence. REQUIRES: nothing pending (outside blocks).
  void Clear();
  // Trie nodes held now (tests of the bound).
  int64_t NumNodes() const;

  struct Node;
  struct Edge;
  struct Layout {
    c10::ScalarType dtype = c10::ScalarType::Float;
    std::vector<int64_t> sizes, strides;
    int64_t storage_offset = 0;
    c10::Device device{c10::DeviceType::CPU};
  };

 private:
  struct PendingStep {
    Edge* edge = nullptr;
    c10::DispatchKeySet below;
    std::vector<c10::IValue> args;
    std::vector<at::Tensor> outputs;  // flat, in return order
    bool ran = false;                 // outputs hold their values
  };
  struct Produced {
    const c10::TensorImpl* impl;  // the output handed out (identity only)
    int step, output;             // steps_[step].outputs[output]
  };
  enum class Mode { kIdle, kLearning, kReplaying };

  struct OpInfo;
  const OpInfo& InfoOf(const c10::OperatorHandle& op);
  bool Sign(const OpInfo& info, const torch::jit::Stack& stack, std::string* why);
  bool SignValue(const c10::IValue& value, std::string* why);
  bool SignTensor(const at::Tensor& t, std::string* why);
  // The pending result `t` is (by TensorImpl, else one of the same storage
  // and layout), among the results of steps before `before_step` (the
  // default: all registered so far, which at Sign time are the earlier
  // steps'); nullptr: none.
  const Produced* FindProduced(const at::Tensor& t,
                               int before_step = std::numeric_limits<int>::max()) const;
  Edge* FindEdge(Node* node, const c10::OperatorHandle& op) const;
  Edge* AddEdge(const c10::OperatorHandle& op, std::vector<int> returns,
                const std::vector<at::Tensor>& outputs);
  void NoteFallback(const OpInfo& info, const std::string& why);
  void Register(int step, const std::vector<at::Tensor>& outputs);
  // While replaying a sequence whose last replay ran its program
  // (Edge::replays_run): at the sequence's first op and then at most every
  // kKeepWarmInterval, asks the last program's runner to keep its executor
  // ready, so the flush finds the persistent worker running instead of
  // relaunching it (23-57 us on the H100, docs/pytorch.md; a replay of 100 ops lasts
  // longer than the worker's idle period).
  void KeepWarmWhileReplaying();
  // Edge::spare[output] when only this recorder holds it (moved out), else
  // an undefined tensor.
  at::Tensor TakeSpare(Edge* edge, std::size_t output);

  // Flush helpers.
  void Materialize();
  std::vector<std::vector<bool>> Alive() const;
  bool RunProgram(Node* node);
  void Learn(Node* node);
  // Argument `value` of step `step` for the lowering, resolved as Sign
  // resolved it when the step was recorded (against earlier steps only).
  pybind11::object PyArgument(const c10::IValue& value, const c10::TypePtr& type, int step) const;
  void MarkEager(Node* node, const std::string& why);
  void Touch(Node* node);
  void EvictOver();
  void Reset();

  pybind11::object lowerer_;
  c10::DeviceType device_type_;
  int64_t cache_size_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;

  // The sequence being recorded.
  Mode mode_ = Mode::kIdle;
  Node* cursor_ = nullptr;
  std::vector<PendingStep> steps_;
  std::vector<at::Tensor> externals_;
  std::unordered_map<const c10::TensorImpl*, int> external_index_;
  std::unordered_multimap<const c10::StorageImpl*, Produced> produced_;

  // Decide -> Record of the current op.
  const OpInfo* current_ = nullptr;
  std::vector<int64_t> signature_;
  std::vector<at::Tensor> new_externals_;
  int64_t op_device_index_ = -2;  // -2: no tensor seen yet
  Edge* edge_ = nullptr;
  Edge* first_edge_ = nullptr;             // the replayed sequence's first edge
  const std::string* flush_op_ = nullptr;  // the eager op that causes the next flush

  std::unordered_map<const c10::OperatorName*, std::unique_ptr<OpInfo>> infos_;
  int64_t infos_generation_ = -1;
  RecorderStats stats_;
  // The runner of the program learned or run last (any runner of this
  // recorder's device reaches the same executor) and when it was last asked.
  std::shared_ptr<SequenceRunner> warm_runner_;
  std::chrono::steady_clock::time_point last_keep_warm_{};
};

}  // namespace gpuos_torch
