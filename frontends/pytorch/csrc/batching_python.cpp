// Python bindings of the batching interception (batching.h); gpuos/_batching.py
// wraps them as gpuos.batching().
#include "batching_python.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "batching.h"

namespace py = pybind11;

namespace gpuos_torch {
namespace {

void Enter() {
  const std::string error = InstallBatchingFallback();
  if (!error.empty()) throw std::runtime_error("gpuos.batching() is unavailable: " + error);
  EnterBatching();
}

void Exit() {
  if (!ExitBatching()) {
    throw std::runtime_error(
        "gpuos.batching(): a block was closed on a thread that has none open (each thread "
        "must close the blocks it opened)");
  }
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
  void Record(const c10::OperatorHandle&, torch::jit::Stack*) override {
    throw std::logic_error("gpuos: the probe recorder never records");
  }
  void Flush() override { ++flushes_; }

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
  m.def("_batching_enter", &Enter, "Opens a gpuos.batching() block on this thread.");
  m.def("_batching_exit", &Exit, "Closes the innermost block of this thread.");
  m.def("_batching_depth", &BatchingDepth, "Blocks open on this thread.");
  m.def("_batching_counts", &CountsDict, "What this thread's blocks have intercepted.");
  m.def("_batching_reset_counts", &ResetThreadBatchingCounts);
  m.def("_batching_probe", &Probe, py::arg("install"),
        "Tests: installs (True) or removes (False) a recorder that runs every op eagerly and "
        "counts decisions and flushes; returns the previous probe's counts.");
}

}  // namespace gpuos_torch
