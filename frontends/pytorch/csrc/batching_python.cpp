// Python bindings of the batching interception (batching.h); gpuos/_batching.py
// wraps them as gpuos.batching().
#include "batching_python.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "batching.h"
#include "batching_recorder.h"

namespace py = pybind11;

namespace gpuos_torch {
namespace {

// The recorder the outermost block replaced (restored when it closes).
thread_local BatchingRecorder* t_previous_recorder = nullptr;
thread_local bool t_installed = false;

void Enter(SequenceRecorder* recorder) {
  const std::string error = InstallBatchingFallback();
  if (!error.empty()) throw std::runtime_error("gpuos.batching() is unavailable: " + error);
  if (BatchingDepth() == 0) {
    t_installed = recorder != nullptr;
    if (t_installed) t_previous_recorder = SetThreadRecorder(recorder);
  }
  EnterBatching();
}

void Exit() {
  const bool outermost = BatchingDepth() == 1;
  struct Restore {
    bool active;
    ~Restore() {
      if (active && t_installed) {
        SetThreadRecorder(t_previous_recorder);
        t_installed = false;
      }
    }
  } restore{outermost};
  if (!ExitBatching()) {
    throw std::runtime_error(
        "gpuos.batching(): a block was closed on a thread that has none open (each thread "
        "must close the blocks it opened)");
  }
}

void Synchronize() { FlushBatching(FlushReason::kSynchronize); }

py::dict RecorderStatsDict(const SequenceRecorder& recorder) {
  const RecorderStats& s = recorder.stats();
  py::dict d;
  d["learned_ops"] = s.learned_ops;
  d["replayed_ops"] = s.replayed_ops;
  d["view_ops"] = s.view_ops;
  d["learned_sequences"] = s.learned_sequences;
  d["eager_sequences"] = s.eager_sequences;
  d["submissions"] = s.submissions;
  d["tasks"] = s.tasks;
  d["divergences"] = s.divergences;
  d["materialized_ops"] = s.materialized_ops;
  d["liveness_misses"] = s.liveness_misses;
  d["keep_warms"] = s.keep_warms;
  d["reused_outputs"] = s.reused_outputs;
  d["flush_liveness_us"] = static_cast<double>(s.flush_liveness_ns) / 1e3;
  d["flush_submit_us"] = static_cast<double>(s.flush_submit_ns) / 1e3;
  d["flush_release_us"] = static_cast<double>(s.flush_release_ns) / 1e3;
  d["evictions"] = s.evictions;
  d["cache_entries"] = s.cache_entries;
  d["flushes_by_reason"] = s.flushes;
  d["fallbacks"] = s.fallbacks;
  d["fallback_reasons"] = s.fallback_reasons;
  return d;
}

c10::DeviceType DeviceTypeOf(const std::string& name) {
  if (name == "cuda") return c10::DeviceType::CUDA;
  if (name == "cpu") return c10::DeviceType::CPU;
  throw std::invalid_argument("gpuos: a recorder runs on 'cuda' or 'cpu', not '" + name + "'");
}

py::dict CountsDict() {
  const BatchingCounts counts = ThreadBatchingCounts();
  py::dict ops;
  for (const auto& [name, count] : counts.ops) ops[py::str(name)] = count;
  py::dict result;
  result["ops"] = ops;
  result["ran_eagerly"] = counts.ran_eagerly;
  result["recorded"] = counts.recorded;
  result["decomposed"] = counts.decomposed;
  result["flushes"] = counts.flushes;
  result["depth"] = BatchingDepth();
  return result;
}

// A recorder for tests of the recorder protocol: decides "run eagerly" for
// every op and counts the calls it gets.
class ProbeRecorder final : public BatchingRecorder {
 public:
  BatchingAction Decide(const c10::OperatorHandle&, const torch::jit::Stack& stack) override {
    ++decisions_;
    arguments_ += static_cast<int64_t>(stack.size());
    return BatchingAction::kRunEagerly;
  }
  void Record(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack*) override {
    throw std::logic_error("gpuos: the probe recorder never records");
  }
  void Flush(FlushReason) override { ++flushes_; }

  int64_t decisions_ = 0;
  int64_t arguments_ = 0;
  int64_t flushes_ = 0;
};

// The probe installed on the calling thread by _batching_probe(True).
thread_local std::unique_ptr<ProbeRecorder> t_probe;

py::dict Probe(bool install) {
  if (BatchingDepth() > 0) {
    throw std::runtime_error("gpuos: change the probe recorder outside batching blocks only");
  }
  py::dict seen;
  if (t_probe != nullptr) {
    seen["decisions"] = t_probe->decisions_;
    seen["arguments"] = t_probe->arguments_;
    seen["flushes"] = t_probe->flushes_;
  }
  if (install) {
    t_probe = std::make_unique<ProbeRecorder>();
    SetThreadRecorder(t_probe.get());
  } else {
    SetThreadRecorder(nullptr);
    t_probe.reset();
  }
  return seen;
}

}  // namespace

void BindBatching(py::module_& m) {
  m.def("_batching_enter", &Enter, py::arg("recorder") = nullptr,
        "Opens a gpuos.batching() block on this thread; the outermost one installs `recorder` "
        "(None: keep the thread's recorder) until it closes.");
  m.def("_batching_exit", &Exit, "Closes the innermost block of this thread.");
  m.def("_batching_synchronize", &Synchronize,
        "Flushes this thread's recorder: its pending ops run now.");
  m.def("_batching_set_recordable", &SetRecordableOps, py::arg("names"),
        "The aten overloads a recorder may record (\"aten::add.Tensor\", \"aten::relu\").");
  py::class_<SequenceRecorder>(m, "SequenceRecorder")
      .def(py::init([](py::object lowerer, const std::string& device_type, int64_t cache_size) {
             return std::make_unique<SequenceRecorder>(std::move(lowerer),
                                                       DeviceTypeOf(device_type), cache_size);
           }),
           py::arg("lowerer"), py::arg("device_type"), py::arg("cache_size"))
      .def("stats", &RecorderStatsDict)
      .def("reset_stats", &SequenceRecorder::ResetStats)
      .def("clear", &SequenceRecorder::Clear)
      .def("num_nodes", &SequenceRecorder::NumNodes);
  m.def("_batching_depth", &BatchingDepth, "Blocks open on this thread.");
  m.def("_batching_counts", &CountsDict, "What this thread's blocks have intercepted.");
  m.def("_batching_reset_counts", &ResetThreadBatchingCounts);
  m.def("_batching_probe", &Probe, py::arg("install"),
        "Tests: installs (True) or removes (False) a recorder that runs every op eagerly and "
        "counts decisions and flushes; returns the previous probe's counts.");
}

}  // namespace gpuos_torch
