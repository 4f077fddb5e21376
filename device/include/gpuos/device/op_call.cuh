// How the worker calls an operator: every operator instantiation in a kernel
// image is an `extern "C" __device__ void <symbol>(const OpCall&)`, reached
// through the image's operator table `gpuos_op_table` (slot = TaskDesc::
// opcode). All threads of the block make the call together and may use
// __syncthreads() inside it.
//
// OpCall is internal to a kernel image (worker and operators are always
// compiled from the same sources), so it may grow without touching the host.
#pragma once

#include "gpuos/device/abi.h"

namespace gpuos {
namespace device {

struct OpCall {
  const TaskDesc* task;
  const TensorDesc* tensors;  // the launch's table; index with task->tensors[k]
  unsigned char* scratch;     // shared memory, 16-byte aligned
  unsigned int scratch_bytes;
  unsigned int num_tensors;  // entries in `tensors`
  WorkerStatus* status;      // may be null

  // The k-th tensor of the task (inputs first, then outputs).
  __device__ __forceinline__ const TensorDesc& tensor(int k) const {
    return tensors[task->tensors[k]];
  }
};

typedef void (*OpFunction)(const OpCall&);

// Records the first failure of a launch; later ones are dropped.
__device__ __forceinline__ void ReportError(const OpCall& call, unsigned int error,
                                            unsigned int detail) {
  if (call.status == nullptr) return;
  if (atomicCAS(&call.status->error, 0u, error) == 0u) {
    call.status->task_id = call.task->task_id;
    call.status->detail = detail;
  }
}

// Checks that the task passes `count` tensors whose dtypes are `dtypes`;
// reports kWorkerBadArity / kWorkerBadDType (detail = the tensor) and returns
// false otherwise. Uniform across the block: every thread gets the same answer.
__device__ __forceinline__ bool CheckTensors(const OpCall& call, int count, const int* dtypes) {
  if (static_cast<int>(call.task->num_tensors) != count) {
    if (threadIdx.x == 0) ReportError(call, kWorkerBadArity, call.task->num_tensors);
    return false;
  }
  for (int k = 0; k < count; ++k) {
    if (call.tensor(k).dtype != dtypes[k]) {
      if (threadIdx.x == 0) ReportError(call, kWorkerBadDType, static_cast<unsigned int>(k));
      return false;
    }
  }
  return true;
}

}  // namespace device
}  // namespace gpuos
