// Python bindings of the batching interception (batching.h).
#pragma once

#include <torch/extension.h>

namespace gpuos_torch {

// Adds the _batching_* functions to the extension module `m`.
void BindBatching(pybind11::module_& m);

}  // namespace gpuos_torch
