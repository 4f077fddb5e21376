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
  unsigned char* scratch;     // shared memory (required: AssumeShared), 16-byte aligned
  unsigned int scratch_bytes;
  unsigned int num_tensors;  // entries in `tensors`
  WorkerStatus* status;      // may be null
  // The launch's copy of the task's first tensor descriptor (null for a
  // task without tensors). A task added with runtime::TaskGraph::
  // AddTableTask has the rest of its descriptor table right after it:
  // table[1], table[2], ...; one added with AddAddressTableTask its
  // addresses, 8 bytes each (stitched programs, gpuos/device/stitch.cuh).
  // A generic pointer: in device memory, or, for a task of one tensor run as
  // direct tiles whose table fits kMaxTaskTensors descriptors, in the
  // block's shared memory (queue_direct.cuh, StagedTableLength; since
  // session 39). Read it with generic loads (plain C++, or ld without a
  // state space), never with global-only ones (__ldg, __ldcg, ld.global).
  const TensorDesc* table;

  // The k-th tensor of the task (inputs first, then outputs).
  __device__ __forceinline__ const TensorDesc& tensor(int k) const {
    return tensors[task->tensors[k]];
  }
};

typedef void (*OpFunction)(const OpCall&);

// The operators' calling convention (an option, off by default). Under the
// default ABI an operator called through a pointer stores and reloads every
// callee-saved register it uses: 150-230 bytes a thread on every call for the
// matmul and row operators (GPUOS_PTXAS_INFO's "spill stores"). With
// GPUOS_OPERATOR_PRESERVE=N > 0 the pragma `nv_abi preserve_n_data(N)` makes
// the operator preserve only N registers and the worker kernels save what
// they keep live across the call. Measured on the H100 (docs/device-code.md,
// "Register budget"): tiles 0.4-1.0 us shorter at N=16, but ptxas then holds
// the queue worker to 54 registers (178 without) and it spills elsewhere, so
// a call's host-to-host time grew by 5-12 us for chain100 and attention seq
// 128;
// hence the default 0, the default ABI. The definition, every declaration
// and every call through a pointer must carry the same pragma (ptxas
// rejects a unit where they differ; units linked with different ones would
// corrupt registers), so all three use this macro, and every unit of an
// image is compiled from the same headers and options (both are part of
// each unit's cache key; the JIT passes -DGPUOS_OPERATOR_PRESERVE from the
// environment variable of that name, docs/configuration.md).
#ifndef GPUOS_OPERATOR_PRESERVE
#define GPUOS_OPERATOR_PRESERVE 0
#endif
#if GPUOS_OPERATOR_PRESERVE > 0
#define GPUOS_PRAGMA_TEXT_(text) _Pragma(#text)
#define GPUOS_OPERATOR_ABI_(n) GPUOS_PRAGMA_TEXT_(nv_abi preserve_n_data(n) preserve_n_control(1))
#define GPUOS_OPERATOR_ABI GPUOS_OPERATOR_ABI_(GPUOS_OPERATOR_PRESERVE)
#else
#define GPUOS_OPERATOR_ABI
#endif

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
