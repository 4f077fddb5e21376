// SequenceRecorder: handing a learned sequence to Python for lowering, the
// bounded cache of programs and eager marks, and the runners
// (batching_recorder.h).
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>
#include <torch/extension.h>

#include <stdexcept>
#include <unordered_set>

#include "batching_recorder.h"
#include "batching_recorder_internal.h"

namespace py = pybind11;

namespace gpuos_torch {
namespace {

NativeRunnerFactory g_native_factory = nullptr;

// A program called from Python: runner(externals, outputs) (the reference
// executor, or any object the native factory does not know).
class PythonRunner final : public SequenceRunner {
 public:
  explicit PythonRunner(py::object fn) : fn_(std::move(fn)) {}
  ~PythonRunner() override {
    py::gil_scoped_acquire gil;
    fn_ = py::object();
  }
  void Run(const std::vector<at::Tensor>& externals,
           const std::vector<at::Tensor>& outputs) override {
    py::gil_scoped_acquire gil;
    try {
      fn_(py::cast(externals), py::cast(outputs));
    } catch (py::error_already_set& e) {
      throw std::runtime_error(e.what());
    }
  }

 private:
  py::object fn_;
};

int64_t CountEntries(const SequenceRecorder::Node& node) {
  int64_t n = node.state != SequenceRecorder::Node::kUnknown ? 1 : 0;
  for (const auto& edge : node.edges) {
    if (edge->child) n += CountEntries(*edge->child);
  }
  return n;
}

int64_t CountNodes(const SequenceRecorder::Node& node) {
  int64_t n = 1;
  for (const auto& edge : node.edges) {
    if (edge->child) n += CountNodes(*edge->child);
  }
  return n;
}

void OldestEntry(SequenceRecorder::Node* node, SequenceRecorder::Node** oldest) {
  if (node->state != SequenceRecorder::Node::kUnknown &&
      (*oldest == nullptr || node->last_use < (*oldest)->last_use)) {
    *oldest = node;
  }
  for (const auto& edge : node->edges) {
    if (edge->child) OldestEntry(edge->child.get(), oldest);
  }
}

}  // namespace

void SetNativeRunnerFactory(NativeRunnerFactory factory) { g_native_factory = factory; }

bool FlattenResults(const torch::jit::Stack& stack, int count, std::vector<at::Tensor>* outputs,
                    std::vector<int>* returns, std::string* why) {
  outputs->clear();
  returns->clear();
  for (std::size_t i = stack.size() - count; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor() && v.toTensor().defined()) {
      outputs->push_back(v.toTensor());
      returns->push_back(-1);
    } else if (v.isTensorList()) {
      const auto list = v.toTensorList();
      for (const at::Tensor& t : list) {
        if (!t.defined()) {
          *why = "returns an undefined tensor";
          return false;
        }
        outputs->push_back(t);
      }
      returns->push_back(static_cast<int>(list.size()));
    } else {
      *why = "returns something other than tensors";
      return false;
    }
  }
  return true;
}

bool SharesStorage(const std::vector<c10::IValue>& args, const std::vector<at::Tensor>& outputs) {
  std::unordered_set<const c10::StorageImpl*> storages;
  auto add = [&](const c10::IValue& v) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().has_storage()) {
      storages.insert(v.toTensor().storage().unsafeGetStorageImpl());
    }
  };
  for (const c10::IValue& v : args) {
    add(v);
    if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) add(e);
    }
  }
  for (const at::Tensor& t : outputs) {
    if (t.has_storage() && storages.count(t.storage().unsafeGetStorageImpl()) > 0) return true;
  }
  return false;
}

void SequenceRecorder::Touch(Node* node) { node->last_use = ++clock_; }

py::object SequenceRecorder::PyArgument(const c10::IValue& v, const c10::TypePtr& type,
                                        int step) const {
  if (v.isNone()) return py::none();
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return py::none();
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      switch (t.scalar_type()) {
        case c10::ScalarType::Double:
          return py::float_(*t.const_data_ptr<double>());
        case c10::ScalarType::Long:
          return py::int_(*t.const_data_ptr<int64_t>());
        default:
          return py::bool_(*t.const_data_ptr<bool>());
      }
    }
    // Not against the whole sequence: a view that changes nothing (attention's
    // expand of q to q's own shape) has its argument's storage and layout,
    // and the argument would read as that later result (a step reading its
    // own result: the sequence had no graph and every replay ran eagerly).
    if (const Produced* p = FindProduced(t, step)) return py::make_tuple("s", p->step, p->output);
    return py::make_tuple("e", external_index_.at(t.unsafeGetTensorImpl()));
  }
  c10::TypePtr element = type;
  if (const auto* optional = type->castRaw<c10::OptionalType>())
    element = optional->getElementType();
  if (v.isList()) {
    c10::TypePtr inner = c10::AnyType::get();
    if (const auto* list = element->castRaw<c10::ListType>()) inner = list->getElementType();
    py::list result;
    for (const c10::IValue& e : v.toListRef()) result.append(PyArgument(e, inner, step));
    return std::move(result);
  }
  if (v.isInt()) {
    switch (element->kind()) {
      case c10::TypeKind::ScalarTypeType:
        return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(
            torch::getTHPDtype(static_cast<c10::ScalarType>(v.toInt()))));
      case c10::TypeKind::LayoutType:
        return py::reinterpret_borrow<py::object>(
            reinterpret_cast<PyObject*>(torch::getTHPLayout(static_cast<c10::Layout>(v.toInt()))));
      case c10::TypeKind::MemoryFormatType:
        return py::reinterpret_borrow<py::object>(
            torch::utils::getTHPMemoryFormat(static_cast<c10::MemoryFormat>(v.toInt())));
      default:
        break;
    }
  }
  return torch::jit::toPyObject(v);
}

void SequenceRecorder::MarkEager(Node* node, const std::string& why) {
  py::gil_scoped_acquire gil;  // the runner may hold a Python object
  node->state = Node::kEager;
  node->eager_reason = why;
  node->runner.reset();
  node->bindings.clear();
  node->bound.clear();
  ++stats_.eager_sequences;
  Touch(node);
  stats_.cache_entries = CountEntries(*root_);
  EvictOver();
}

void SequenceRecorder::Learn(Node* node) {
  std::vector<std::vector<bool>> alive = Alive();
  if (node->state == Node::kProgram) {  // learned again: keep what was bound before
    for (std::size_t k = 0; k < alive.size() && k < node->bound.size(); ++k) {
      for (std::size_t j = 0; j < alive[k].size() && j < node->bound[k].size(); ++j) {
        alive[k][j] = alive[k][j] || node->bound[k][j];
      }
    }
  }
  int computing = 0;
  for (const PendingStep& step : steps_) computing += step.edge->view ? 0 : 1;
  if (computing < 2) {
    MarkEager(node, "fewer than 2 ops that compute: one op runs faster eagerly");
    return;
  }
  py::gil_scoped_acquire gil;
  std::string eager_reason;
  std::vector<int> eager_steps;
  try {
    py::list steps;
    for (std::size_t k = 0; k < steps_.size(); ++k) {
      const PendingStep& step = steps_[k];
      const c10::OperatorName& name = step.edge->op.operator_name();
      const auto& arguments = step.edge->op.schema().arguments();
      py::list args;
      for (std::size_t i = 0; i < step.args.size(); ++i) {
        args.append(PyArgument(step.args[i], arguments[i].type(), static_cast<int>(k)));
      }
      py::list keep;
      for (bool a : alive[k]) keep.append(py::bool_(a));
      steps.append(py::make_tuple(name.name, name.overload_name, args, step.edge->view,
                                  py::cast(step.outputs), py::cast(step.edge->returns), keep));
    }
    py::tuple result = lowerer_(steps, py::cast(externals_));
    if (result[0].cast<std::string>() == "program") {
      std::shared_ptr<SequenceRunner> runner =
          g_native_factory != nullptr ? g_native_factory(result[1]) : nullptr;
      if (runner == nullptr) runner = std::make_shared<PythonRunner>(result[1]);
      node->bindings = result[2].cast<std::vector<std::pair<int, int>>>();
      node->bound.assign(steps_.size(), {});
      for (std::size_t k = 0; k < steps_.size(); ++k)
        node->bound[k].assign(steps_[k].outputs.size(), false);
      for (const auto& [k, j] : node->bindings) node->bound.at(k).at(j) = true;
      node->runner = std::move(runner);
      warm_runner_ = node->runner;
      node->tasks = result[3].cast<int64_t>();
      node->state = Node::kProgram;
      node->eager_reason.clear();
      ++stats_.learned_sequences;
      Touch(node);
      stats_.cache_entries = CountEntries(*root_);
      EvictOver();
      return;
    }
    eager_reason = result[1].cast<std::string>();
    eager_steps = result[2].cast<std::vector<int>>();
  } catch (py::error_already_set& e) {
    eager_reason = std::string("lowering the sequence raised: ") + e.what();
  } catch (const std::exception& e) {
    eager_reason = std::string("building the sequence's program failed: ") + e.what();
  }
  // Ops that cannot run on gpuos end the sequence from now on: the ops before
  // them are learned again as a sequence of their own at the next flush.
  std::vector<Edge*> stop;
  for (int k : eager_steps) {
    if (k >= 0 && static_cast<std::size_t>(k) < steps_.size()) stop.push_back(steps_[k].edge);
  }
  MarkEager(node, eager_reason);
  for (Edge* edge : stop) {
    edge->eager_reason = eager_reason;
    edge->child.reset();  // may hold `node`: not used after this
  }
  stats_.cache_entries = CountEntries(*root_);
}

void SequenceRecorder::EvictOver() {
  while (stats_.cache_entries > cache_size_) {
    Node* oldest = nullptr;
    OldestEntry(root_.get(), &oldest);
    if (oldest == nullptr) break;
    oldest->state = Node::kUnknown;
    oldest->runner.reset();
    oldest->bindings.clear();
    oldest->bound.clear();
    ++stats_.evictions;
    --stats_.cache_entries;
    // Prune the prefixes that lead nowhere now.
    Node* node = oldest;
    while (node != root_.get() && node->edges.empty() && node->state == Node::kUnknown) {
      Node* parent = node->parent;
      Edge* via = node->via;
      auto& edges = parent->edges;
      for (auto it = edges.begin(); it != edges.end(); ++it) {
        if (it->get() == via) {
          edges.erase(it);
          break;
        }
      }
      node = parent;
    }
  }
}

void SequenceRecorder::Clear() {
  py::gil_scoped_acquire gil;
  Reset();
  root_ = std::make_unique<Node>();
  warm_runner_.reset();
  stats_.cache_entries = 0;
}

int64_t SequenceRecorder::NumNodes() const { return CountNodes(*root_); }

}  // namespace gpuos_torch
