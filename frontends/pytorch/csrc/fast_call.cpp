// gpuos._C.FastCallable (fast_call.h): a heap type made with PyType_FromSpec,
// so that gpuos.compile's Python class can derive from it and keep its own
// attributes, while its tp_call runs the last program without Python.
#include "fast_call.h"

#include <string>

namespace py = pybind11;

namespace gpuos_torch {
namespace {

FastRunnerOf g_runner_of = nullptr;
// Calls that ran on the fast path and the tasks they submitted (the GIL
// guards them); gpuos.stats() adds them to the Python counters.
unsigned long long g_calls = 0;
unsigned long long g_tasks = 0;

struct FastCallable {
  PyObject_HEAD PyObject* program;  // a strong reference, or nullptr: every call is slow
  FastRunner* runner;               // program's
  int kind;                         // ResultKind
  unsigned int tasks;
  PyObject* unflatten;  // kUnflatten's callable (a strong reference), else nullptr
};

PyObject* CallSlow(PyObject* self, PyObject* args, PyObject* kwargs, int status) {
  return PyObject_CallMethod(self, "_call_slow", "OOi", args, kwargs != nullptr ? kwargs : Py_None,
                             status);
}

PyObject* Call(PyObject* self_object, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<FastCallable*>(self_object);
  int status = 0;
  if (self->runner != nullptr && (kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0)) {
    // The run releases the GIL: another thread may replace the program meanwhile.
    PyObject* program = self->program;
    Py_INCREF(program);
    const unsigned int tasks = self->tasks;
    const auto kind = static_cast<ResultKind>(self->kind);
    PyObject* unflatten = self->unflatten;  // nullptr unless kind is kUnflatten
    Py_XINCREF(unflatten);
    PyObject* result = self->runner->CallFast(
        args, kind == ResultKind::kUnflatten ? ResultKind::kList : kind, &status);
    Py_DECREF(program);
    if (result != nullptr) {
      // The run happened: it counts whether or not the structure is made.
      ++g_calls;
      g_tasks += tasks;
      if (unflatten == nullptr) return result;
      PyObject* shaped = PyObject_CallOneArg(unflatten, result);
      Py_DECREF(result);
      Py_DECREF(unflatten);
      return shaped;  // nullptr with the callable's error set
    }
    Py_XDECREF(unflatten);
    if (PyErr_Occurred() != nullptr) return nullptr;
  }
  return CallSlow(self_object, args, kwargs, status);
}

// _set_fast(program, kind[, unflatten]): the program the call runs first
// (None: none) and how its results are shaped (ResultKind; kind 3 takes the
// callable that makes the result from their list).
PyObject* SetFast(PyObject* self_object, PyObject* const* args, Py_ssize_t nargs) {
  auto* self = reinterpret_cast<FastCallable*>(self_object);
  if (nargs != 2 && nargs != 3) {
    PyErr_SetString(PyExc_TypeError,
                    "_set_fast(program, kind[, unflatten]) takes 2 or 3 arguments");
    return nullptr;
  }
  const long kind = PyLong_AsLong(args[1]);
  if (kind == -1 && PyErr_Occurred() != nullptr) return nullptr;
  if (kind < static_cast<long>(ResultKind::kList) ||
      kind > static_cast<long>(ResultKind::kUnflatten)) {
    PyErr_SetString(PyExc_ValueError,
                    "_set_fast: kind must be 0 (list), 1 (first), 2 (tuple) or 3 (unflatten)");
    return nullptr;
  }
  PyObject* const unflatten = nargs == 3 && args[2] != Py_None ? args[2] : nullptr;
  if ((kind == static_cast<long>(ResultKind::kUnflatten)) != (unflatten != nullptr)) {
    PyErr_SetString(PyExc_TypeError,
                    "_set_fast: kind 3 (unflatten) takes a callable as its third argument, and "
                    "only kind 3 does");
    return nullptr;
  }
  if (unflatten != nullptr && PyCallable_Check(unflatten) == 0) {
    PyErr_SetString(PyExc_TypeError, "_set_fast: unflatten must be callable");
    return nullptr;
  }
  FastRunner* runner = nullptr;
  if (args[0] != Py_None) {
    runner = g_runner_of(args[0]);
    if (runner == nullptr) {
      PyErr_SetString(PyExc_TypeError, "_set_fast: program must be a gpuos._C.Program or None");
      return nullptr;
    }
  }
  PyObject* old = self->program;
  self->program = args[0] == Py_None ? nullptr : args[0];
  Py_XINCREF(self->program);
  self->runner = runner;
  self->kind = static_cast<int>(kind);
  self->tasks = runner != nullptr ? runner->tasks() : 0u;
  PyObject* old_unflatten = self->unflatten;
  self->unflatten = unflatten;
  Py_XINCREF(unflatten);
  Py_XDECREF(old);
  Py_XDECREF(old_unflatten);
  Py_RETURN_NONE;
}

// _runs_fast(): whether a program is set (the next call tries it first).
PyObject* RunsFast(PyObject* self_object, PyObject* /*unused*/) {
  return PyBool_FromLong(reinterpret_cast<FastCallable*>(self_object)->runner != nullptr ? 1 : 0);
}

void Dealloc(PyObject* self_object) {
  PyTypeObject* type = Py_TYPE(self_object);
  auto* self = reinterpret_cast<FastCallable*>(self_object);
  self->runner = nullptr;
  Py_CLEAR(self->program);
  Py_CLEAR(self->unflatten);
  type->tp_free(self_object);
  Py_DECREF(type);  // a heap type's instances hold a reference to it
}

PyMethodDef g_methods[] = {
    {"_set_fast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&SetFast)),
     METH_FASTCALL,
     "_set_fast(program, kind[, unflatten]): the program a call runs first (None: none) and how "
     "its results are shaped."},
    {"_runs_fast", &RunsFast, METH_NOARGS, "_runs_fast(): whether _set_fast set a program."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void BindFastCall(py::module_& m, FastRunnerOf runner_of) {
  g_runner_of = runner_of;
  static const std::string doc =
      "Base type of gpuos.compile's callables: a call runs the program set by _set_fast "
      "without Python, and calls self._call_slow(args, kwargs, status) otherwise.";
  PyType_Slot slots[] = {{Py_tp_call, reinterpret_cast<void*>(&Call)},
                         {Py_tp_dealloc, reinterpret_cast<void*>(&Dealloc)},
                         {Py_tp_methods, g_methods},
                         {Py_tp_new, reinterpret_cast<void*>(&PyType_GenericNew)},
                         {Py_tp_doc, const_cast<char*>(doc.c_str())},
                         {0, nullptr}};
  PyType_Spec spec = {"gpuos._C.FastCallable", static_cast<int>(sizeof(FastCallable)), 0,
                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, slots};
  PyObject* type = PyType_FromSpec(&spec);
  if (type == nullptr) throw py::error_already_set();
  m.add_object("FastCallable", py::reinterpret_steal<py::object>(type));
  m.def(
      "fast_call_counts", [] { return py::make_tuple(g_calls, g_tasks); },
      "(calls, tasks) that ran on FastCallable's fast path since the last reset");
  m.def(
      "reset_fast_call_counts",
      [] {
        g_calls = 0;
        g_tasks = 0;
      },
      "Zeroes fast_call_counts (gpuos.reset_stats).");
}

}  // namespace gpuos_torch
