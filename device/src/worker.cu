// The worker: the kernel every image exports. This first version is
// one-shot: a launch runs a fixed array of independent tasks and exits (the
// persistent queue, dependency counters and parking build on the same ABI).
//
// Launch: grid = any number of blocks, block = kWorkerThreads threads, no
// dynamic shared memory, one parameter (WorkerParams, by value). Block b
// runs tasks b, b + gridDim.x, ... one after another; each task by calling
// gpuos_op_table[task.opcode] with all its threads.
//
// Image symbols, looked up by the host with cuModuleGetFunction /
// cuModuleGetGlobal:
//   gpuos_worker             this kernel
//   gpuos_op_table           OpFunction[gpuos_op_table_size] (generated manifest)
//   gpuos_image_abi_version  GPUOS_RUNTIME_ABI_VERSION the image was built with
#include "gpuos/device/abi.h"
#include "gpuos/device/op_call.cuh"

extern "C" __device__ gpuos::device::OpFunction gpuos_op_table[];
extern "C" __device__ unsigned int gpuos_op_table_size;

extern "C" __device__ unsigned int gpuos_image_abi_version = GPUOS_RUNTIME_ABI_VERSION;

namespace {

using gpuos::device::OpCall;
using gpuos::device::TaskDesc;
using gpuos::device::WorkerParams;

// Opcode and tensor indices checked before the call, so operators may index
// the descriptor table without checks. Same answer in every thread.
__device__ bool TaskIsRunnable(const OpCall& call) {
  const TaskDesc& task = *call.task;
  if (task.opcode >= gpuos_op_table_size || gpuos_op_table[task.opcode] == nullptr) {
    if (threadIdx.x == 0)
      gpuos::device::ReportError(call, gpuos::device::kWorkerBadOpcode, task.opcode);
    return false;
  }
  if (task.num_tensors > static_cast<unsigned int>(gpuos::device::kMaxTaskTensors)) {
    if (threadIdx.x == 0)
      gpuos::device::ReportError(call, gpuos::device::kWorkerBadArity, task.num_tensors);
    return false;
  }
  for (unsigned int k = 0; k < task.num_tensors; ++k) {
    if (task.tensors[k] < 0 || static_cast<unsigned int>(task.tensors[k]) >= call.num_tensors) {
      if (threadIdx.x == 0)
        gpuos::device::ReportError(call, gpuos::device::kWorkerBadTensorIndex, k);
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(gpuos::device::kWorkerThreads)
    gpuos_worker(const WorkerParams params) {
  __shared__ __align__(16) unsigned char scratch[gpuos::device::kWorkerScratchBytes];
  const TaskDesc* tasks = reinterpret_cast<const TaskDesc*>(params.tasks);
  gpuos::device::WorkerStatus* status =
      reinterpret_cast<gpuos::device::WorkerStatus*>(params.status);

  for (unsigned int t = blockIdx.x; t < params.num_tasks; t += gridDim.x) {
    OpCall call;
    call.task = tasks + t;
    call.tensors = reinterpret_cast<const gpuos::device::TensorDesc*>(params.tensors);
    call.scratch = scratch;
    call.scratch_bytes = gpuos::device::kWorkerScratchBytes;
    call.num_tensors = params.num_tensors;
    call.status = status;
    if (call.task->opcode != 0 && TaskIsRunnable(call)) {
      gpuos_op_table[call.task->opcode](call);
    }
    // The next task may reuse the scratch memory.
    __syncthreads();
    if (threadIdx.x == 0 && status != nullptr) atomicAdd(&status->completed, 1u);
  }
}
