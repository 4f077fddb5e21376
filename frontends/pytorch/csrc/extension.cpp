// gpuos._C: the per-call path of the PyTorch frontend (docs/pytorch.md).
// A Program holds a task graph built once in libgpuos_torch_bridge; each call
// checks the guards, binds the inputs' and parameters' data pointers, takes
// intermediates and outputs from PyTorch's caching allocator, and submits the
// graph once. Built by torch.utils.cpp_extension against the installed torch.
#include <c10/core/impl/VirtualGuardImpl.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/extension.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "batching_python.h"
#include "batching_recorder.h"
#include "fast_call.h"
#include "gpuos_torch_bridge.h"

namespace py = pybind11;

namespace {

// StatusCode names of gpuos/status.h, in its order.
const char* CodeName(int code) {
  static const char* const kNames[] = {"ok",
                                       "invalid_argument",
                                       "not_found",
                                       "already_exists",
                                       "failed_precondition",
                                       "compile_error",
                                       "io_error",
                                       "corrupt",
                                       "unavailable",
                                       "abi_mismatch",
                                       "internal"};
  return code >= 0 && code < 11 ? kNames[code] : "unknown";
}

void Check(int code, const char* what) {
  if (code == 0) return;
  throw std::runtime_error(std::string("gpuos [") + CodeName(code) + "] " + what + ": " +
                           gpuos_torch_last_error());
}

class Runtime {
 public:
  Runtime(int device, const std::string& repository, const std::string& cache,
          unsigned int trace_capacity)
      : device_(device) {
    py::gil_scoped_release release;  // the first open builds the kernel image (seconds)
    Check(gpuos_torch_runtime_open(device, repository.c_str(), repository.empty() ? 0 : 1,
                                   cache.c_str(), trace_capacity, &handle_),
          "opening the runtime");
  }
  ~Runtime() { gpuos_torch_runtime_close(handle_); }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  std::string StatsJson() const {
    char* text = gpuos_torch_runtime_stats_json(handle_);
    if (text == nullptr) Check(10, "reading runtime statistics");
    std::string result(text);
    gpuos_torch_free_string(text);
    return result;
  }
  void ExportTrace(const std::string& path) const {
    py::gil_scoped_release release;
    Check(gpuos_torch_runtime_export_trace(handle_, path.c_str()), "exporting the task timeline");
  }
  GpuosTorchRuntime* handle() const { return handle_; }
  int device() const { return device_; }

 private:
  int device_;
  GpuosTorchRuntime* handle_ = nullptr;
};

struct Layout {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

// gpuos dtype names (core/include/gpuos/dtype.h) as torch scalar types.
c10::ScalarType ScalarTypeOf(const std::string& name) {
  static const std::pair<const char*, c10::ScalarType> kTypes[] = {
      {"f32", c10::ScalarType::Float},     {"f16", c10::ScalarType::Half},
      {"bf16", c10::ScalarType::BFloat16}, {"f64", c10::ScalarType::Double},
      {"i8", c10::ScalarType::Char},       {"u8", c10::ScalarType::Byte},
      {"i32", c10::ScalarType::Int},       {"i64", c10::ScalarType::Long},
      {"bool", c10::ScalarType::Bool}};
  for (const auto& [type_name, type] : kTypes) {
    if (name == type_name) return type;
  }
  throw std::invalid_argument("gpuos: unknown dtype name '" + name + "'");
}

// (dtype name, sizes, strides)
Layout ToLayout(const py::tuple& t) {
  return {ScalarTypeOf(t[0].cast<std::string>()), t[1].cast<std::vector<int64_t>>(),
          t[2].cast<std::vector<int64_t>>()};
}

// Where a result comes from: a view of an input, a constant or an output
// buffer.
struct Result {
  int kind = 0;  // 0 input, 1 constant, 2 output buffer
  int index = 0;
  bool same = false;  // the source itself, no view
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;  // relative to the source's own offset
};

// Results of Program::Run when it did not run.
constexpr int kGuardMismatch = 1;
constexpr int kNeedsAutograd = 2;

class Program final : public gpuos_torch::FastRunner {
 public:
  // Buffers are numbered: inputs, constants, the workspace (when
  // `workspace_bytes` is set: one buffer for every intermediate, as
  // Program.to_json() writes them), outputs.
  Program(std::shared_ptr<Runtime> runtime, const std::string& program_json,
          const std::vector<py::tuple>& inputs, std::vector<at::Tensor> constants,
          std::optional<int64_t> workspace_bytes, const std::vector<py::tuple>& outputs,
          const std::vector<py::tuple>& results)
      : runtime_(std::move(runtime)),
        constants_(std::move(constants)),
        workspace_bytes_(workspace_bytes) {
    if (workspace_bytes_ && *workspace_bytes_ < 0) {
      throw std::invalid_argument("gpuos: workspace_bytes must be None or >= 0");
    }
    for (const auto& t : inputs) inputs_.push_back(ToLayout(t));
    for (const auto& t : outputs) outputs_.push_back(ToLayout(t));
    for (const Layout& layout : outputs_) {
      int64_t extent = 1;  // elements from the first to the last, inclusive
      for (std::size_t d = 0; d < layout.sizes.size(); ++d) {
        if (layout.sizes[d] == 0) extent = 0;
        if (extent != 0) extent += (layout.sizes[d] - 1) * layout.strides[d];
      }
      spare_output_bytes_ += extent * static_cast<int64_t>(c10::elementSize(layout.dtype));
    }
    for (const auto& t : results) {
      Result r;
      r.kind = t[0].cast<int>();
      r.index = t[1].cast<int>();
      r.same = t[2].cast<bool>();
      r.sizes = t[3].cast<std::vector<int64_t>>();
      r.strides = t[4].cast<std::vector<int64_t>>();
      r.storage_offset = t[5].cast<int64_t>();
      results_.push_back(std::move(r));
    }
    num_buffers_ =
        inputs_.size() + constants_.size() + (workspace_bytes_ ? 1 : 0) + outputs_.size();
    Check(gpuos_torch_program_create(runtime_->handle(), program_json.c_str(), &handle_),
          "building the program");
    if (gpuos_torch_program_num_buffers(handle_) != num_buffers_) {
      throw std::runtime_error("gpuos: the program description has " +
                               std::to_string(gpuos_torch_program_num_buffers(handle_)) +
                               " buffers, the layout " + std::to_string(num_buffers_));
    }
    addresses_.resize(num_buffers_);
  }
  ~Program() override { gpuos_torch_program_destroy(handle_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // The results as a list of tensors, or kGuardMismatch / kNeedsAutograd.
  py::object Run(const std::vector<at::Tensor>& args) {
    int status = 0;
    py::object results = Execute(args, gpuos_torch::ResultKind::kList, &status);
    if (status != 0) return py::int_(status);
    return results;
  }

  // FastCallable's call (fast_call.h): Run's work for a tuple of positional
  // arguments, without pybind's argument conversion, the result shaped as
  // `kind` says.
  PyObject* CallFast(PyObject* args, gpuos_torch::ResultKind kind, int* status) override {
    const Py_ssize_t count = PyTuple_GET_SIZE(args);
    if (static_cast<std::size_t>(count) != inputs_.size()) {
      *status = kGuardMismatch;
      return nullptr;
    }
    std::vector<at::Tensor> tensors;
    tensors.reserve(static_cast<std::size_t>(count));
    for (Py_ssize_t i = 0; i < count; ++i) {
      PyObject* item = PyTuple_GET_ITEM(args, i);
      if (!THPVariable_Check(item)) {
        *status = kGuardMismatch;
        return nullptr;
      }
      tensors.push_back(THPVariable_Unpack(item));
    }
    // Errors become Python exceptions as torch's own C functions make them:
    // a c10 error keeps its Python type (torch.OutOfMemoryError, ...), C++
    // warnings become Python warnings.
    HANDLE_TH_ERRORS
    py::object results = Execute(tensors, kind, status);
    return *status != 0 ? nullptr : results.release().ptr();
    END_HANDLE_TH_ERRORS
  }

  unsigned int tasks() const override { return num_tasks(); }

  // Runs once with the input buffers bound to `args` and the output buffers
  // to `outputs` (caller-given tensors laid out as the program's outputs, by
  // pointer): transparent batching hands its outputs out before the program
  // runs. No guards (the caller matched the layouts) and no Python: callable
  // without the GIL.
  void RunInto(const std::vector<at::Tensor>& args, const std::vector<at::Tensor>& outputs) {
    if (args.size() != inputs_.size() || outputs.size() != outputs_.size()) {
      throw std::invalid_argument("gpuos: Program.run_into got " + std::to_string(args.size()) +
                                  " inputs and " + std::to_string(outputs.size()) +
                                  " outputs; the program has " + std::to_string(inputs_.size()) +
                                  " and " + std::to_string(outputs_.size()));
    }
    const c10::Device device(c10::DeviceType::CUDA,
                             static_cast<c10::DeviceIndex>(runtime_->device()));
    std::size_t b = 0;
    for (const at::Tensor& t : args) {
      addresses_[b++] = reinterpret_cast<unsigned long long>(t.data_ptr());
    }
    for (const at::Tensor& c : constants_) {
      addresses_[b++] = reinterpret_cast<unsigned long long>(c.data_ptr());
    }
    at::Tensor workspace = BindWorkspace(device, &b);
    for (const at::Tensor& t : outputs) {
      addresses_[b++] = reinterpret_cast<unsigned long long>(t.data_ptr());
    }
    LaunchOnCurrentStream(device);
    KeepSpareWorkspace(std::move(workspace));
  }

  // Runtime::KeepWarm of the program's runtime (a run is coming soon).
  void KeepWarm() { Check(gpuos_torch_program_keep_warm(handle_), "keeping the worker warm"); }
  // Testing only: gpuos_torch_program_testing_set_finished_runs.
  void TestingSetFinishedRuns(unsigned long long runs) {
    Check(gpuos_torch_program_testing_set_finished_runs(handle_, runs),
          "setting the finished runs (testing)");
  }

  unsigned int num_tasks() const { return gpuos_torch_program_num_tasks(handle_); }
  bool stitched() const { return gpuos_torch_program_stitched(handle_) != 0; }
  std::string stitch_note() const { return gpuos_torch_program_stitch_note(handle_); }

 private:
  // One run: the results shaped as `kind` says, or *status set
  // (kGuardMismatch, kNeedsAutograd) and None.
  py::object Execute(const std::vector<at::Tensor>& args, gpuos_torch::ResultKind kind,
                     int* status) {
    const bool timed = timing_on_;
    const auto run_start = timed ? Clock::now() : Clock::time_point();
    *status = 0;
    if (args.size() != inputs_.size()) {
      *status = kGuardMismatch;
      return py::none();
    }
    const bool grad = at::GradMode::is_enabled();
    const c10::Device device(c10::DeviceType::CUDA,
                             static_cast<c10::DeviceIndex>(runtime_->device()));
    std::size_t b = 0;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const at::Tensor& t = args[i];
      const Layout& want = inputs_[i];
      if (!t.defined() || t.device() != device || t.scalar_type() != want.dtype ||
          t.sizes() != c10::IntArrayRef(want.sizes) ||
          t.strides() != c10::IntArrayRef(want.strides)) {
        *status = kGuardMismatch;
        return py::none();
      }
      if (grad && t.requires_grad()) {
        *status = kNeedsAutograd;
        return py::none();
      }
      addresses_[b++] = reinterpret_cast<unsigned long long>(t.data_ptr());
    }
    for (const at::Tensor& c : constants_) {
      if (grad && c.requires_grad()) {
        *status = kNeedsAutograd;
        return py::none();
      }
      addresses_[b++] = reinterpret_cast<unsigned long long>(c.data_ptr());
    }
    const auto allocate_start = timed ? Clock::now() : Clock::time_point();
    at::Tensor workspace = BindWorkspace(device, &b);
    void* const stream = CurrentStream(device);
    std::vector<at::Tensor> outputs = TakeOutputs(device, stream);
    for (const at::Tensor& output : outputs) {
      addresses_[b++] = reinterpret_cast<unsigned long long>(output.data_ptr());
    }
    if (timed) Record(GPUOS_TORCH_STEP_ALLOCATE, allocate_start);
    py::object results;
    if (overlap_) {
      {
        py::gil_scoped_release release;
        Check(gpuos_torch_program_start(handle_, addresses_.data(),
                                        static_cast<unsigned int>(addresses_.size()), stream),
              "running the program");
      }
      // While the run goes on: the results' Python objects, and the outputs
      // of the next run. Should either throw (an allocation), the run is
      // finished first: it may still write the workspace and outputs that
      // unwinding hands back to PyTorch's allocator.
      try {
        results = ResultObject(args, outputs, kind);
        PrepareSpareOutputs(device, stream);
      } catch (...) {
        py::gil_scoped_release release;
        (void)gpuos_torch_program_finish(handle_);  // its error is lost to the first one
        throw;
      }
      {
        py::gil_scoped_release release;
        Check(gpuos_torch_program_finish(handle_), "running the program");
      }
    } else {
      {
        py::gil_scoped_release release;
        LaunchOnCurrentStream(device);
      }
      results = ResultObject(args, outputs, kind);
    }
    KeepSpareWorkspace(std::move(workspace));
    if (timed) Record(GPUOS_TORCH_STEP_RUN, run_start);
    return results;
  }

  // A workspace for the intermediates, its address written at
  // addresses_[*b] (then *b advanced): the spare one an earlier run left (KeepSpareWorkspace),
  // else one from PyTorch's caching allocator. The caller keeps the tensor
  // until the launch has been submitted (the allocator orders its reuse on
  // the current stream, which waits for the submission).
  at::Tensor BindWorkspace(const c10::Device& device, std::size_t* b) {
    if (!workspace_bytes_) return at::Tensor();
    at::Tensor workspace = std::move(spare_workspace_);
    spare_workspace_ = at::Tensor();
    if (!workspace.defined()) {
      workspace = at::empty({std::max<int64_t>(*workspace_bytes_, 1)},
                            at::TensorOptions().dtype(at::kByte).device(device));
    }
    addresses_[(*b)++] = reinterpret_cast<unsigned long long>(workspace.data_ptr());
    return workspace;
  }

  // After a launch: when its results were seen on the host (the usual case,
  // GPUOS_TORCH_HOST_WAIT_US), nothing uses its workspace any more, and the
  // next run takes it instead of allocating one (about 1 us less a call).
  // Otherwise the stream still orders the workspace's reuse: it goes back to
  // the allocator.
  void KeepSpareWorkspace(at::Tensor workspace) {
    if (workspace.defined() && gpuos_torch_program_idle(handle_) != 0) {
      spare_workspace_ = std::move(workspace);
    }
  }

  // Submits with addresses_ bound, ordered on PyTorch's current stream
  // (docs/pytorch.md, "Ordering"): after its earlier work, and before its
  // later work on the device, so the results are ready for whatever that
  // stream runs next. Needs no GIL.
  void LaunchOnCurrentStream(const c10::Device& device) {
    Check(gpuos_torch_program_launch(handle_, addresses_.data(),
                                     static_cast<unsigned int>(addresses_.size()),
                                     CurrentStream(device)),
          "running the program");
  }

  // PyTorch's current stream of `device` (a CUstream).
  static void* CurrentStream(const c10::Device& device) {
    c10::impl::VirtualGuardImpl guard(c10::DeviceType::CUDA);
    return guard.getStream(device).native_handle();
  }

  // The run's results: program outputs, inputs or constants, or views of
  // them, as a list, a tuple or the first alone (`kind`).
  py::object ResultObject(const std::vector<at::Tensor>& args,
                          const std::vector<at::Tensor>& outputs,
                          gpuos_torch::ResultKind kind) const {
    if (kind == gpuos_torch::ResultKind::kFirst) {
      if (results_.empty()) throw std::out_of_range("gpuos: the program has no results");
      return py::cast(ResultTensor(results_[0], args, outputs));
    }
    if (kind == gpuos_torch::ResultKind::kTuple) {
      py::tuple tuple(results_.size());
      for (std::size_t i = 0; i < results_.size(); ++i) {
        tuple[i] = py::cast(ResultTensor(results_[i], args, outputs));
      }
      return std::move(tuple);
    }
    py::list list;
    for (const Result& r : results_) list.append(ResultTensor(r, args, outputs));
    return std::move(list);
  }

  // One result: its source, or a view of it.
  at::Tensor ResultTensor(const Result& r, const std::vector<at::Tensor>& args,
                          const std::vector<at::Tensor>& outputs) const {
    const at::Tensor& source =
        r.kind == 0 ? args[r.index] : (r.kind == 1 ? constants_[r.index] : outputs[r.index]);
    if (r.same) return source;
    return at::as_strided(source, r.sizes, r.strides, source.storage_offset() + r.storage_offset);
  }

  // The run's output tensors: those PrepareSpareOutputs allocated during
  // the previous run on the same stream, else new ones.
  std::vector<at::Tensor> TakeOutputs(const c10::Device& device, void* stream) {
    std::vector<at::Tensor> outputs = std::move(spare_outputs_);
    spare_outputs_.clear();
    if (!outputs.empty() && spare_stream_ == stream) return outputs;
    return NewOutputs(device);
  }

  // Output tensors of outputs_'s layouts from PyTorch's caching allocator.
  std::vector<at::Tensor> NewOutputs(const c10::Device& device) const {
    std::vector<at::Tensor> outputs;
    outputs.reserve(outputs_.size());
    for (const Layout& layout : outputs_) {
      outputs.push_back(at::empty_strided(layout.sizes, layout.strides,
                                          at::TensorOptions().dtype(layout.dtype).device(device)));
    }
    return outputs;
  }

  // While a run goes on, the next run's outputs from PyTorch's caching
  // allocator (about 1 us a call less before the next submission), on the
  // current stream, which orders their memory's earlier use as for any
  // allocation. Only for outputs of up to kSpareOutputBytes in all: a large
  // run does not notice the allocation, and its spare would hold memory.
  void PrepareSpareOutputs(const c10::Device& device, void* stream) {
    if (spare_output_bytes_ > kSpareOutputBytes) return;
    spare_outputs_ = NewOutputs(device);
    spare_stream_ = stream;
  }

  using Clock = std::chrono::steady_clock;
  // The host-timing diagnostic (gpuos_torch_host_timing_add).
  static void Record(int step, Clock::time_point start) {
    gpuos_torch_host_timing_add(
        step,
        static_cast<unsigned long long>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count()));
  }

  const bool timing_on_ = gpuos_torch_host_timing_on() != 0;
  // GPUOS_TORCH_OVERLAP=0: no work between a run's start and its finish
  // (for A/B runs; docs/pytorch.md); "1" or unset: on; anything else is a
  // ValueError when the program is made (a misspelt "off" must not leave it
  // on silently).
  const bool overlap_ = [] {
    const char* value = std::getenv("GPUOS_TORCH_OVERLAP");
    const std::string text = value == nullptr ? "" : value;
    if (text != "" && text != "0" && text != "1") {
      throw std::invalid_argument("GPUOS_TORCH_OVERLAP must be 0 or 1 (unset: 1); got '" + text +
                                  "'");
    }
    return text != "0";
  }();
  std::shared_ptr<Runtime> runtime_;
  std::vector<Layout> inputs_;
  std::vector<at::Tensor> constants_;
  std::optional<int64_t> workspace_bytes_;  // none: the program has no intermediates
  std::vector<Layout> outputs_;
  std::vector<Result> results_;
  std::size_t num_buffers_ = 0;
  std::vector<unsigned long long> addresses_;
  at::Tensor spare_workspace_;  // KeepSpareWorkspace's, for the next run
  static constexpr int64_t kSpareOutputBytes = 4 << 20;
  int64_t spare_output_bytes_ = 0;         // the outputs' bytes (set at construction)
  std::vector<at::Tensor> spare_outputs_;  // PrepareSpareOutputs's, for the next run
  void* spare_stream_ = nullptr;           // the stream they were allocated on
  GpuosTorchProgram* handle_ = nullptr;
};

// A Program run by transparent batching without Python per run.
class ProgramSequenceRunner final : public gpuos_torch::SequenceRunner {
 public:
  ProgramSequenceRunner(py::object owner, Program* program)
      : owner_(std::move(owner)), program_(program) {}
  ~ProgramSequenceRunner() override {
    py::gil_scoped_acquire gil;
    owner_ = py::object();
  }
  void Run(const std::vector<at::Tensor>& externals,
           const std::vector<at::Tensor>& outputs) override {
    program_->RunInto(externals, outputs);
  }
  void KeepWarm() override { program_->KeepWarm(); }

 private:
  py::object owner_;  // keeps program_ alive
  Program* program_;
};

std::shared_ptr<gpuos_torch::SequenceRunner> NativeRunnerOf(py::handle object) {
  if (!py::isinstance<Program>(object)) return nullptr;
  return std::make_shared<ProgramSequenceRunner>(py::reinterpret_borrow<py::object>(object),
                                                 object.cast<Program*>());
}

// The fast-path runner of a Program object (fast_call.h), or nullptr.
gpuos_torch::FastRunner* FastRunnerOf(PyObject* object) {
  const py::handle handle(object);
  if (!py::isinstance<Program>(handle)) return nullptr;
  return handle.cast<Program*>();
}

// Parses and checks a program description without a GPU; raises on errors.
void CheckProgram(const std::string& program_json) {
  Check(gpuos_torch_program_check(program_json.c_str()), "checking the program");
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "gpuos C++ extension: runtime and compiled programs (docs/pytorch.md)";
  m.attr("GUARD_MISMATCH") = kGuardMismatch;
  m.attr("NEEDS_AUTOGRAD") = kNeedsAutograd;
  m.def("check_program", &CheckProgram, py::arg("program_json"));
  py::class_<Runtime, std::shared_ptr<Runtime>>(m, "Runtime")
      .def(py::init<int, const std::string&, const std::string&, unsigned int>(), py::arg("device"),
           py::arg("repository") = "", py::arg("cache") = "", py::arg("trace_capacity") = 0)
      .def("stats_json", &Runtime::StatsJson)
      .def("export_trace", &Runtime::ExportTrace, py::arg("path"))
      .def_property_readonly("device", &Runtime::device);
  py::class_<Program>(m, "Program")
      .def(py::init<std::shared_ptr<Runtime>, const std::string&, const std::vector<py::tuple>&,
                    std::vector<at::Tensor>, std::optional<int64_t>, const std::vector<py::tuple>&,
                    const std::vector<py::tuple>&>(),
           py::arg("runtime"), py::arg("program_json"), py::arg("inputs"), py::arg("constants"),
           py::arg("workspace_bytes"), py::arg("outputs"), py::arg("results"))
      .def("run", &Program::Run)
      .def("run_into", &Program::RunInto, py::arg("inputs"), py::arg("outputs"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("num_tasks", &Program::num_tasks)
      .def("_testing_set_finished_runs", &Program::TestingSetFinishedRuns, py::arg("runs"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("stitched", &Program::stitched)
      .def_property_readonly("stitch_note", &Program::stitch_note);
  gpuos_torch::BindBatching(m);
  gpuos_torch::SetNativeRunnerFactory(&NativeRunnerOf);
  gpuos_torch::BindFastCall(m, &FastRunnerOf);
}
