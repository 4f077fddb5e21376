// The recorder's trie and per-operator facts, shared by batching_recorder.cpp
// (recording, replay) and batching_recorder_learn.cpp (lowering, the cache).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "batching_recorder.h"

namespace gpuos_torch {

// What the recorder knows of one operator (computed once per thread).
struct SequenceRecorder::OpInfo {
  c10::OperatorName name{"", ""};
  std::string qualified;  // "aten::add.Tensor"
  std::string why;        // why it is never recorded; "" when it may be
  int num_arguments = 0;
  int num_returns = 0;
  int device_argument = -1;  // index of an argument named "device"
  bool view_schema = false;  // a result aliases an argument (Tensor(a))
};

// One recorded op of a sequence: the trie edge from the prefix before it.
struct SequenceRecorder::Edge {
  explicit Edge(const c10::OperatorHandle& handle) : op(handle) {}
  c10::OperatorHandle op;
  std::vector<int64_t> signature;
  bool view = false;            // its results alias its arguments: runs eagerly when replayed
  std::vector<int> returns;     // per return: -1 a tensor, n >= 0 a list of n tensors
  std::vector<Layout> outputs;  // flat, as eager laid them out
  std::string eager_reason;     // not "": this op runs eagerly and ends the sequence
  std::unique_ptr<Node> child;  // null once eager_reason is set
  // Per output: a result of an earlier replay that nobody held when its
  // program ran, and that the program did not write (unbound), handed out
  // again by the next replay instead of allocating (and later freeing) a
  // new tensor: about 1 us each way through the caching allocator. Used
  // only while this recorder holds its only reference.
  std::vector<at::Tensor> spare;
  // On a sequence's first edge: the last replay that started here ended in
  // its program (no eager op, divergence or liveness miss). Only such
  // replays keep the worker warm: eager kernels on PyTorch's legacy default
  // stream wait until the running worker parks.
  bool replays_run = false;
};

// A recorded prefix; a flush that ends there leaves a program or an eager mark.
struct SequenceRecorder::Node {
  enum State { kUnknown, kProgram, kEager };
  Node* parent = nullptr;
  Edge* via = nullptr;
  std::vector<std::unique_ptr<Edge>> edges;
  State state = kUnknown;
  std::shared_ptr<SequenceRunner> runner;
  std::vector<std::pair<int, int>> bindings;  // program output buffer -> (step, output)
  std::vector<std::vector<bool>> bound;       // [step][output]: in bindings
  std::string eager_reason;
  int64_t tasks = 0;
  uint64_t last_use = 0;
};

// The results `count` returns left on top of `stack`, flattened; `returns`
// gets their shape (batching_recorder_internal.h, Edge::returns). False (with
// `why`) when a result is not a defined tensor or a list of them.
bool FlattenResults(const torch::jit::Stack& stack, int count, std::vector<at::Tensor>* outputs,
                    std::vector<int>* returns, std::string* why);
// Whether a result shares storage with a tensor argument (a view).
bool SharesStorage(const std::vector<c10::IValue>& args, const std::vector<at::Tensor>& outputs);

}  // namespace gpuos_torch
