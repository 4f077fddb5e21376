// A valid shared library that is not a gpuos plugin: it lacks the entry point.
#include "gpuos/plugin_abi.h"

GPUOS_PLUGIN_EXTERN_C GPUOS_PLUGIN_VISIBLE int gpuos_test_some_other_function(void) { return 7; }
