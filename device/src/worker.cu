// The one-shot worker and what both workers share (the alias table and the
// checked call of an operator). The persistent worker is
// device/src/queue_worker.cu.
//
// One-shot launch (`gpuos_worker`): grid = any number of blocks, block =
// kWorkerThreads threads, no dynamic shared memory, one parameter
// (WorkerParams, by value). Block b runs tasks b, b + gridDim.x, ... one after
// another; each task by calling the operator of its slot with all threads.
// Dependency fields of TaskDesc are ignored: the tasks of one launch must be
// independent. Used by tests, `gpuos demo` and the cuda_launch baselines.
//
// Tile launch (`gpuos_tiles_worker_<N>`, since ABI 13): the tiles of one task
// as a kernel of their own on a stream the host chooses (TileLaunchParamsOf,
// abi.h; runtime::Runtime::LaunchTiles), each tile run as the persistent
// worker runs it (the same items, tile_split.cuh).
//
// Image symbols, looked up by the host with cuModuleGetFunction /
// cuModuleGetGlobal:
//   gpuos_worker             this kernel
//   gpuos_tiles_worker_<N>   the tile launcher, N in kLaunchTableSizes
//   gpuos_queue_worker       the persistent worker
//   gpuos_op_table           OpFunction[gpuos_op_table_size] (generated manifest)
//   gpuos_alias_table        unsigned int[kMaxLogicalOps]: logical operator -> slot
//   gpuos_image_abi_version  GPUOS_RUNTIME_ABI_VERSION the image was built with
#include "gpuos/device/abi.h"
#include "gpuos/device/op_call.cuh"
#include "gpuos/device/phase_timing.cuh"
#include "gpuos/device/queue.h"
#include "gpuos/device/tile_split.cuh"

extern "C" __device__ gpuos::device::OpFunction gpuos_op_table[];
extern "C" __device__ unsigned int gpuos_op_table_size;

extern "C" __device__ unsigned int gpuos_image_abi_version = GPUOS_RUNTIME_ABI_VERSION;

#if defined(GPUOS_PHASE_TIMING) && GPUOS_PHASE_TIMING
extern "C" __device__ unsigned long long gpuos_phase_cycles[gpuos::device::kPhaseSlots] = {};
extern "C" __device__ unsigned long long gpuos_phase_counts[gpuos::device::kPhaseSlots] = {};
#endif

// Written by the host while no worker runs (and, later, by live updates).
extern "C" __device__ unsigned int gpuos_alias_table[gpuos::device::kMaxLogicalOps] = {};

using gpuos::device::OpCall;
using gpuos::device::TaskDesc;
using gpuos::device::WorkerParams;

// The operator of `task`: its slot (through the alias table when logical_op
// != 0) in *slot, and the function there; nullptr for a no-op (slot 0) and
// for a slot outside the table or empty (then *slot != 0).
extern "C" __device__ __noinline__ gpuos::device::OpFunction gpuos_resolve_operator(
    const TaskDesc& task, unsigned int* slot) {
  unsigned int s = task.opcode;
  if (task.logical_op != 0) {
    s = task.logical_op < gpuos::device::kMaxLogicalOps ? gpuos_alias_table[task.logical_op]
                                                        : 0xffffffffu;
  }
  *slot = s;
  if (s == 0 || s >= gpuos_op_table_size) return nullptr;
  return gpuos_op_table[s];
}

// Resolves the task's operator (gpuos_resolve_operator) and checks opcode and
// tensor indices so operators may index the descriptor table without checks.
// Returns the operator to call with every thread of the block, or nullptr:
// for a no-op (slot 0), and after reporting an error through call.status.
// The kernel makes the call itself: a kernel has no caller whose registers
// it must preserve, so under the operators' calling convention
// (GPUOS_OPERATOR_ABI, when set) it saves only what it keeps live across the
// call, where a function in between would save all it must preserve.
extern "C" __device__ __noinline__ gpuos::device::OpFunction gpuos_task_operator(
    const OpCall& call) {
  const TaskDesc& task = *call.task;
  unsigned int slot = 0;
  const gpuos::device::OpFunction op = gpuos_resolve_operator(task, &slot);
  if (slot == 0) return nullptr;
  if (op == nullptr) {
    if (threadIdx.x == 0) gpuos::device::ReportError(call, gpuos::device::kWorkerBadOpcode, slot);
    return nullptr;
  }
  if (task.num_tensors > static_cast<unsigned int>(gpuos::device::kMaxTaskTensors)) {
    if (threadIdx.x == 0)
      gpuos::device::ReportError(call, gpuos::device::kWorkerBadArity, task.num_tensors);
    return nullptr;
  }
  for (unsigned int k = 0; k < task.num_tensors; ++k) {
    if (task.tensors[k] < 0 || static_cast<unsigned int>(task.tensors[k]) >= call.num_tensors) {
      if (threadIdx.x == 0)
        gpuos::device::ReportError(call, gpuos::device::kWorkerBadTensorIndex, k);
      return nullptr;
    }
  }
  return op;
}

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
    call.table = nullptr;
    const int first_tensor = call.task->num_tensors != 0 ? call.task->tensors[0] : -1;
    if (first_tensor >= 0 && static_cast<unsigned int>(first_tensor) < params.num_tensors) {
      call.table = call.tensors + first_tensor;
    }
    GPUOS_PHASE_BEGIN(phase);
    const gpuos::device::OpFunction op = gpuos_task_operator(call);
    if (op != nullptr) {
      GPUOS_OPERATOR_ABI
      op(call);
    }
    GPUOS_PHASE_MARK(phase, 6);
    // The next task may reuse the scratch memory.
    __syncthreads();
    if (threadIdx.x == 0 && status != nullptr) atomicAdd(&status->completed, 1u);
    GPUOS_PHASE_MARK(phase, 7);
  }
}

// The tile launcher's body (gpuos_tiles_worker_<kTable>): stages the table
// and the task in shared memory, where the operators read them with
// generic loads (OpCall::table), then runs this block's tiles with the
// operator the host resolved and checked (TileLaunchParamsOf::function).
template <unsigned int kTable>
__device__ __forceinline__ void RunLaunchedTiles(
    const gpuos::device::TileLaunchParamsOf<kTable>& params) {
  using gpuos::device::TensorDesc;
  __shared__ __align__(16) unsigned char scratch[gpuos::device::kWorkerScratchBytes];
  __shared__ __align__(16) TensorDesc table[kTable];
  __shared__ __align__(16) TaskDesc tile;
  const unsigned int num_tensors = params.num_tensors < kTable ? params.num_tensors : kTable;
  constexpr unsigned int kDescWords = sizeof(TensorDesc) / 16;
  for (unsigned int w = threadIdx.x; w < num_tensors * kDescWords; w += blockDim.x) {
    reinterpret_cast<int4*>(table)[w] = reinterpret_cast<const int4*>(params.table)[w];
  }
  for (unsigned int w = threadIdx.x; w < sizeof(TaskDesc) / 16; w += blockDim.x) {
    reinterpret_cast<int4*>(&tile)[w] = reinterpret_cast<const int4*>(&params.task)[w];
  }
  __syncthreads();  // staged before thread 0 sets a tile's items
  OpCall call;
  call.task = &tile;
  call.tensors = table;
  call.scratch = scratch;
  call.scratch_bytes = gpuos::device::kWorkerScratchBytes;
  call.num_tensors = num_tensors;
  call.status = reinterpret_cast<gpuos::device::WorkerStatus*>(params.status);
  call.table = params.task.num_tensors != 0 ? table + params.task.tensors[0] : nullptr;
  const auto run = reinterpret_cast<gpuos::device::OpFunction>(params.function);
  const unsigned int tiles = params.task.num_tiles != 0 ? params.task.num_tiles : 1u;
  const long long chunk = gpuos::device::TileChunk(params.task, tiles);
  for (unsigned int t = blockIdx.x; t < tiles; t += gridDim.x) {
    if (threadIdx.x == 0) {
      gpuos::device::ChunkItems(params.task, chunk, t, &tile.begin, &tile.end);
    }
    __syncthreads();  // this tile's items
    GPUOS_OPERATOR_ABI
    run(call);
    // The next tile rewrites the items and may reuse the scratch memory.
    __syncthreads();
  }
}

#define GPUOS_TILES_WORKER(kTable)                                                    \
  extern "C" __global__ void __launch_bounds__(gpuos::device::kWorkerThreads)         \
      gpuos_tiles_worker_##kTable(                                                    \
          const __grid_constant__ gpuos::device::TileLaunchParamsOf<kTable> params) { \
    RunLaunchedTiles<kTable>(params);                                                 \
  }
GPUOS_TILES_WORKER(4)
GPUOS_TILES_WORKER(16)
static_assert(gpuos::device::kLaunchTableSizes[0] == 4 && gpuos::device::kLaunchTableSizes[1] == 16,
              "one gpuos_tiles_worker_<N> per size of kLaunchTableSizes");
