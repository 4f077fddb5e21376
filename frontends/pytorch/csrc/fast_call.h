// gpuos._C.FastCallable: the base type of gpuos.compile's callables
// (gpuos/_compile.py, CompiledFunction). Its call runs the program of the
// callable's last call without a Python frame: the arguments tuple goes
// straight to the program (guards, pointers, submission, results), and only
// a miss (a guard, autograd, keyword arguments, no program set) calls the
// Python method `_call_slow(args, kwargs, status)`. A result of another
// structure than one tensor, a tuple or a list is made by a Python callable
// from the list of results (ResultKind::kUnflatten). docs/pytorch.md,
// "The call path".
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

namespace gpuos_torch {

// How a call's result is made from the program's results (the function's
// output structure, gpuos/_compile.py's unflattener).
enum class ResultKind : int {
  kList = 0,   // a list of the results
  kFirst = 1,  // the first result alone (a function returning one tensor)
  kTuple = 2,  // a tuple of the results
  // The callable set with the program, called with the list of the results
  // (any other structure: nested tuples and lists, dicts; the entry's
  // pytree unflatten). Never passed to FastRunner::CallFast, which gets
  // kList for it.
  kUnflatten = 3,
};

// What FastCallable calls: a compiled program.
class FastRunner {
 public:
  virtual ~FastRunner() = default;
  // The call's result (a new reference) for the positional arguments
  // `args` (a tuple). nullptr with no Python error set: the program did not
  // run, *status says why (the extension's GUARD_MISMATCH or
  // NEEDS_AUTOGRAD). nullptr with a Python error set: the call raises it.
  virtual PyObject* CallFast(PyObject* args, ResultKind kind, int* status) = 0;
  // Tasks a run submits (gpuos.stats()["tasks"]).
  virtual unsigned int tasks() const = 0;
};

// The runner of a Python object, borrowed from it (nullptr: not a program).
using FastRunnerOf = FastRunner* (*)(PyObject* object);

// Adds FastCallable and its counters (fast_call_counts,
// reset_fast_call_counts) to the module `m`.
void BindFastCall(pybind11::module_& m, FastRunnerOf runner_of);

}  // namespace gpuos_torch
