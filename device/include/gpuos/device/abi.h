// The data layout shared by the host and the kernel image: tensor and task
// descriptors and the worker's launch parameters.
//
// This header is compiled twice, from the same text: by NVRTC into every
// kernel image, and by the host compiler into gpuos itself. It therefore uses
// builtin types only (no standard headers: NVRTC has none), and every struct
// is a fixed-size POD whose size and field offsets are checked below. A change
// to any layout here must bump GPUOS_RUNTIME_ABI_VERSION: the version is part
// of every build-cache key and is stored in each image
// (`gpuos_image_abi_version`) so the host can refuse an image built for
// another layout.
#pragma once

#define GPUOS_RUNTIME_ABI_VERSION 13

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GPUOS_HOST_DEVICE __host__ __device__
#else
#define GPUOS_HOST_DEVICE
#endif

namespace gpuos {
namespace device {

constexpr unsigned int kRuntimeAbiVersion = GPUOS_RUNTIME_ABI_VERSION;
constexpr int kMaxRank = 8;         // dimensions of a tensor descriptor
constexpr int kMaxTaskTensors = 8;  // inputs + outputs of one task
constexpr int kMaxTaskScalars = 6;  // attribute slots of one task

// Threads per block the worker is compiled for (__launch_bounds__); the host
// launches exactly this many.
constexpr unsigned int kWorkerThreads = 256;
// Shared memory each block offers the running operator (OpCall::scratch).
constexpr unsigned int kWorkerScratchBytes = 8192;
// Registers per thread the persistent worker may use. The worker keeps one
// block on every SM, so what it leaves of an SM's 65536 registers is all
// that other kernels get while it runs: at 216, 10240 (a 256-thread block
// of up to 40 registers). The linked worker takes the most registers that
// any function it may call uses, so every unit of a kernel image is compiled
// with -maxrregcount of this (registry/src/jit/toolchain.cpp). Uncapped it
// took 254 (for the f64 tiled matmul): nothing fitted beside it, and a
// stream that a gated graph waits for ran only if its kernels started before
// the worker's blocks filled the SMs (the gated-graph tests of
// runtime_streams_gpu_test hung at 590bdbc on an H200; docs/runtime.md,
// "Streams").
constexpr unsigned int kWorkerMaxRegisters = 216;

// Element type codes. Equal to gpuos::DType's values (core/include/gpuos/
// dtype.h); the host checks that with static_asserts.
enum DTypeCode : int {
  kDTypeF32 = 0,
  kDTypeF16 = 1,
  kDTypeBF16 = 2,
  kDTypeF64 = 3,
  kDTypeI8 = 4,
  kDTypeU8 = 5,
  kDTypeI32 = 6,
  kDTypeI64 = 7,
  kDTypeBool = 8,
};

// A strided view of a tensor in device memory. Sizes and strides are in
// elements; a stride of 0 broadcasts along that dimension. Dimensions past
// `rank` are ignored (keep them 0).
struct alignas(16) TensorDesc {
  unsigned long long data;  // device address of element (0, ..., 0)
  int dtype;                // DTypeCode
  int rank;                 // 0..kMaxRank; 0 is a scalar (one element)
  long long numel;          // product of sizes[0..rank) (1 for rank 0)
  unsigned int flags;       // reserved, 0
  unsigned int reserved;    // 0
  long long sizes[kMaxRank];
  long long strides[kMaxRank];
};

// One 8-byte attribute slot. f32/f64 attributes travel as f64, i32/i64/bool
// as i64 (bool: 0 or 1); operator code receives them converted to the type
// declared in the pack.
union ScalarSlot {
  double f64;
  long long i64;
  unsigned long long bits;
};

constexpr unsigned int kNoDependencyCounter = 0xffffffffu;

// One unit of work for one thread block: a tile [begin, end) of an
// operator's work items (output elements for elementwise operators, output
// elements = reduced slices for reductions, operator-defined for custom
// ones). Large operators are split into many tasks; a block runs a task with
// all its threads.
struct alignas(16) TaskDesc {
  unsigned int opcode;           // physical slot in the image's operator table; 0 = no-op
  unsigned int num_tiles;        // persistent queue: tiles [begin, end) is split into (0 = 1)
  unsigned int task_id;          // host-chosen; reported with errors
  unsigned short num_tensors;    // entries of `tensors` in use: inputs, then outputs
  unsigned short flags;          // TaskFlags: what the host checked (0: nothing)
  long long begin;               // first work item of this tile
  long long end;                 // one past the last work item
  int tensors[kMaxTaskTensors];  // indices into the launch's TensorDesc table
  ScalarSlot scalars[kMaxTaskScalars];  // attributes, in declaration order
  // Dependency information for the persistent queue (ignored by the one-shot
  // worker): the initial value of this task's dependency counter (its number
  // of predecessors; kNoDependencyCounter also means none) and its
  // successors, as task indices in the queue's task arena.
  unsigned int dependency_counter;
  unsigned int successor_begin;  // first index in the queue's successor arena
  unsigned int successor_count;
  // When not 0: dispatch through the image's alias table
  // (gpuos_alias_table[logical_op] is the slot) instead of `opcode`.
  unsigned int logical_op;
};

// TaskDesc::flags: facts about a task's tensors that the host established
// when the task was added, so operators need not recheck them per task.
enum TaskFlags : unsigned short {
  // The host checked the elementwise layout (below); without this bit the
  // operator checks it itself.
  kTaskLayoutChecked = 1u << 0,
  // Every tensor is dense row-major with exactly the first output's shape
  // and [begin, end) lies inside it (any tile of it too): work item i is
  // offset i in every tensor. Only meaningful with kTaskLayoutChecked.
  kTaskDenseElementwise = 1u << 1,
  // Set by the persistent worker (never by the host: the admission sets or
  // clears it in its copy) on the only task of a submission when that task
  // is tiled: each tile counts in the submission's `remaining` directly,
  // with no per-task tile counter (queue.h, SubmissionCountsTiles).
  kTaskTilesCountInSubmission = 1u << 2,
};

// Error codes a worker reports in WorkerStatus::error (first error wins).
enum WorkerError : unsigned int {
  kWorkerOk = 0,
  kWorkerBadOpcode = 1,        // opcode outside the table or an empty slot
  kWorkerBadTensorIndex = 2,   // a tensor index outside the launch's table
  kWorkerBadArity = 3,         // num_tensors differs from the operator's signature
  kWorkerBadDType = 4,         // a tensor's dtype differs from the instantiation's
  kWorkerBadShape = 5,         // shapes that do not broadcast / reduce as required
  kWorkerScratchTooSmall = 6,  // an accumulator larger than the scratch slot
  kWorkerOperatorFailed = 7,   // custom operator code called ctx.fail()
};

// How long a stitched program's tile waits for the stages it reads
// (stitch.cuh, WaitClock), and the ctx.fail() code (WorkerStatus::detail of
// kWorkerOperatorFailed) it then reports: a producer that never finished,
// or runs of one program that overlapped.
constexpr unsigned long long kStitchWaitLimitNs = 2000000000ull;
constexpr unsigned int kStitchWaitTimedOut = 0x5717;

// Written by the device; zero it before a launch.
struct alignas(16) WorkerStatus {
  unsigned int error;      // WorkerError of the first failure
  unsigned int task_id;    // TaskDesc::task_id of that failure
  unsigned int detail;     // which tensor / operand, or the ctx.fail() code
  unsigned int completed;  // tasks finished (no-ops included)
};

// The single parameter of `gpuos_worker` (passed by value).
struct alignas(16) WorkerParams {
  unsigned long long tasks;    // const TaskDesc*, num_tasks entries
  unsigned long long tensors;  // const TensorDesc*, num_tensors entries
  unsigned long long status;   // WorkerStatus*, or 0 to not report
  unsigned int num_tasks;
  unsigned int num_tensors;
  unsigned long long reserved[4];  // 0
};

// The tile launcher's one parameter (`gpuos_tiles_worker_<N>`, worker.cu;
// since ABI 13): one tiled task and its descriptor table, by value, so that
// a launch carries everything its tiles read and needs no copy before it.
// grid = any number of blocks, block = kWorkerThreads threads; block b runs
// tiles b, b + gridDim.x, ... of `task` (TaskDesc::num_tiles, 0 = 1), each
// over the items that the persistent worker gives that tile (tile_split.cuh).
// The task's dependency fields are ignored. One kernel per table size in
// kLaunchTableSizes: a launch takes the smallest that holds its table (a
// parameter of 800 bytes instead of 2.7 KB for a stitched program of up to
// 60 buffers).
template <unsigned int kTable>
struct alignas(16) TileLaunchParamsOf {
  TaskDesc task;              // bound to its operator's slot (opcode)
  TensorDesc table[kTable];   // task.tensors[k] index this
  unsigned long long status;  // WorkerStatus*, or 0 to not report
  // The operator's function (the image's gpuos_op_table[task.opcode], read
  // by the host once an image), its tensors checked by the host: the
  // kernel calls it without resolving or checking the task.
  unsigned long long function;
  unsigned int num_tensors;  // entries of `table` in use
  unsigned int reserved0;    // 0
  unsigned long long reserved;
};
constexpr unsigned int kLaunchTableSizes[] = {4, 16};
constexpr unsigned int kLaunchTableMax = kLaunchTableSizes[1];  // the largest size

static_assert(sizeof(long long) == 8 && sizeof(int) == 4 && sizeof(double) == 8,
              "gpuos ABI assumes LP64");
static_assert(sizeof(TensorDesc) == 160, "TensorDesc layout changed: bump the ABI version");
static_assert(sizeof(ScalarSlot) == 8, "ScalarSlot");
static_assert(sizeof(TaskDesc) == 128, "TaskDesc layout changed: bump the ABI version");
static_assert(alignof(TaskDesc) == 16, "TaskDesc alignment");
static_assert(sizeof(WorkerStatus) == 16, "WorkerStatus layout changed");
static_assert(sizeof(WorkerParams) == 64, "WorkerParams layout changed");
static_assert(sizeof(TileLaunchParamsOf<kLaunchTableMax>) <= 4096,
              "a kernel parameter is at most 4 KiB");
// NVRTC cannot evaluate offsetof in a constant expression, so field offsets
// are checked by the host compiler only (both sides lay out these PODs by
// the same rules; the sizes above are checked on both).
#if !defined(__CUDACC_RTC__)
static_assert(__builtin_offsetof(TensorDesc, data) == 0, "TensorDesc::data");
static_assert(__builtin_offsetof(TensorDesc, dtype) == 8, "TensorDesc::dtype");
static_assert(__builtin_offsetof(TensorDesc, rank) == 12, "TensorDesc::rank");
static_assert(__builtin_offsetof(TensorDesc, numel) == 16, "TensorDesc::numel");
static_assert(__builtin_offsetof(TensorDesc, sizes) == 32, "TensorDesc::sizes");
static_assert(__builtin_offsetof(TensorDesc, strides) == 96, "TensorDesc::strides");
static_assert(__builtin_offsetof(TaskDesc, opcode) == 0, "opcode must be the first word");
static_assert(__builtin_offsetof(TaskDesc, flags) == 14,
              "TaskDesc::flags: the high half of the first word's last 4 bytes");
static_assert(__builtin_offsetof(TaskDesc, begin) == 16, "TaskDesc::begin");
static_assert(__builtin_offsetof(TaskDesc, end) == 24, "TaskDesc::end");
static_assert(__builtin_offsetof(TaskDesc, tensors) == 32, "TaskDesc::tensors");
static_assert(__builtin_offsetof(TaskDesc, scalars) == 64, "TaskDesc::scalars");
static_assert(__builtin_offsetof(TaskDesc, dependency_counter) == 112,
              "TaskDesc::dependency_counter");
static_assert(__builtin_offsetof(TaskDesc, logical_op) == 124, "TaskDesc::logical_op");
static_assert(__builtin_offsetof(WorkerParams, num_tasks) == 24, "WorkerParams::num_tasks");
#endif

// A descriptor for a dense row-major tensor. REQUIRES: 0 <= rank <=
// kMaxRank, `sizes` has `rank` entries.
GPUOS_HOST_DEVICE inline TensorDesc MakeContiguousTensorDesc(unsigned long long data, int dtype,
                                                             int rank, const long long* sizes) {
  TensorDesc desc = {};
  desc.data = data;
  desc.dtype = dtype;
  desc.rank = rank;
  long long stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    desc.sizes[d] = sizes[d];
    desc.strides[d] = stride;
    stride *= sizes[d];
  }
  desc.numel = stride;
  return desc;
}

}  // namespace device
}  // namespace gpuos
