// The persistent worker's queue: the layout shared by the host runtime
// (core/src/runtime) and `gpuos_queue_worker` (device/src/queue_worker.cu).
// Like abi.h it is compiled by NVRTC and by the host compiler, so it uses
// builtin types only; a layout change bumps GPUOS_RUNTIME_ABI_VERSION.
//
// Memory (docs/runtime.md has the protocol):
//   mapped pinned host memory, written by the host: QueueControl::submit_tail,
//     ::stop, the Submission ring and the staging arenas (tasks, tensors,
//     successors) a submission's graph is written into;
//   mapped pinned host memory, written by the device: QueueControl's device
//     half and the per-slot completion words (`done`);
//   device memory: the arenas' mirrors (the worker copies a submission in
//     when it claims it), per-task NodeState, the ready ring, QueueDeviceState.
#pragma once

#include "gpuos/device/abi.h"

namespace gpuos {
namespace device {

// Entries of the image's alias table (gpuos_alias_table): logical operator
// id -> physical slot. Id 0 is reserved (TaskDesc::logical_op == 0 means
// "use opcode").
constexpr unsigned int kMaxLogicalOps = 4096;

// One published graph: ranges of the staging arenas (never wrapping) and its
// sequence number (1, 2, ...). Ring slot = (sequence - 1) % capacity.
struct alignas(16) Submission {
  unsigned long long sequence;
  unsigned int task_begin;  // TaskDesc index in the task arena
  unsigned int task_count;
  unsigned int tensor_begin;  // tasks' tensor indices are absolute already
  unsigned int tensor_count;
  unsigned int successor_begin;  // tasks' successor_begin is absolute already
  unsigned int successor_count;
};

// The control block in mapped pinned host memory. The two halves sit on
// separate 64-byte lines so host and device writes do not share one.
struct alignas(64) QueueControl {
  // Host -> device.
  unsigned long long submit_tail;  // submissions published; written last (release)
  unsigned int stop;               // 1: every block exits as soon as it is idle
  unsigned int reserved0;
  unsigned long long reserved1[6];
  // Device -> host.
  unsigned long long parked_generation;  // generation of the last grid that parked
  unsigned long long completed_tasks;    // tiles finished, mirrored at completions and parks
  WorkerStatus status;                   // first error, mirrored at completions
  unsigned long long sm_clock_khz;       // SM clock of the last block to park (diagnostics)
  unsigned long long reserved2[2];
};

// Per task-arena entry, device memory; initialized when the task is admitted.
struct NodeState {
  unsigned int pending;     // predecessors not finished yet
  unsigned int tiles_next;  // next tile to claim
  unsigned int tiles_done;  // tiles finished
  unsigned int submission;  // ring slot of the task's submission
};

// Device memory, zeroed before the first launch; survives parks. Words that
// idle blocks poll and words that busy blocks update atomically sit on
// separate 128-byte lines: with a thousand blocks polling, one shared line
// saturates its L2 slice and every atomic on it waits (measured: 360 us per
// chain step instead of about 1).
struct alignas(128) QueueDeviceState {
  unsigned long long ready_head;  // ready-ring entries taken
  unsigned long long pad0[15];
  unsigned long long ready_tail;  // ready-ring entries reserved
  unsigned long long pad1[15];
  unsigned long long submit_head;    // submissions claimed
  unsigned long long last_admit_ns;  // %globaltimer when a submission was last claimed
  unsigned int alive;                // blocks running
  unsigned int in_flight;            // submissions claimed and not finished
  unsigned long long pad2[13];
  WorkerStatus status;  // first error (device copy); `completed` is flushed by idle blocks
  // Copies of the host's submit_tail and stop kept by the pollers, so that
  // the other blocks never read host memory (PCIe) while idle.
  unsigned long long host_tail_seen;
  unsigned int stop_seen;
  unsigned int reserved3;
  unsigned long long pad3[12];
};

// The single parameter of `gpuos_queue_worker` (by value).
struct alignas(16) QueueParams {
  unsigned long long control;            // QueueControl* (mapped)
  unsigned long long submissions;        // Submission[submission_capacity] (mapped)
  unsigned long long done;               // unsigned long long[submission_capacity] (mapped)
  unsigned long long staged_tasks;       // TaskDesc[task_capacity] (mapped)
  unsigned long long staged_tensors;     // TensorDesc[tensor_capacity] (mapped)
  unsigned long long staged_successors;  // unsigned int[successor_capacity] (mapped)
  unsigned long long tasks;              // device mirrors of the three arenas
  unsigned long long tensors;
  unsigned long long successors;
  unsigned long long nodes;         // NodeState[task_capacity]
  unsigned long long ready;         // unsigned long long[ready_capacity]; 0 = empty, else task + 1
  unsigned long long state;         // QueueDeviceState*
  unsigned long long remaining;     // unsigned int[submission_capacity]: tasks not finished
  unsigned long long sequences;     // unsigned long long[submission_capacity]
  unsigned long long idle_park_ns;  // park after this long without work
  unsigned long long generation;    // this launch's number (1, 2, ...)
  unsigned int task_capacity;
  unsigned int tensor_capacity;
  unsigned int successor_capacity;
  unsigned int submission_capacity;
  unsigned int ready_capacity;
  unsigned int pollers;  // blocks [0, pollers) poll the host ring at full rate
  unsigned int reserved[2];
};

static_assert(sizeof(Submission) == 32, "Submission layout changed: bump the ABI version");
static_assert(sizeof(QueueControl) == 128, "QueueControl layout changed: bump the ABI version");
static_assert(sizeof(NodeState) == 16, "NodeState layout changed");
static_assert(sizeof(QueueDeviceState) == 512, "QueueDeviceState layout changed");
static_assert(sizeof(QueueParams) == 160, "QueueParams layout changed: bump the ABI version");

}  // namespace device
}  // namespace gpuos
