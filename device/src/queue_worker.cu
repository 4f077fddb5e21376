// The persistent worker: `gpuos_queue_worker`, one long-lived grid per GPU
// fed through the queue in gpuos/device/queue.h (docs/runtime.md).
//
// Every block loops: take a ready task from the device ready ring; else claim
// the next published submission, copy its graph from mapped host memory into
// the device mirrors, initialize its dependency counters and push its root
// tasks; else, after idle_park_ns without work anywhere, exit (park). A block
// that finishes a task decrements its successors' counters, runs the first
// successor that becomes ready itself and pushes the others. A task with
// num_tiles > 1 is split into tiles: the first block to claim one pushes
// min(num_tiles, gridDim.x) - 1 more references so other blocks help, and
// the block finishing the last tile completes the task.
//
// Launch: grid = blocks that fit (all resident), block = kWorkerThreads, no
// dynamic shared memory, one parameter (QueueParams, by value).
#include "gpuos/device/abi.h"
#include "gpuos/device/op_call.cuh"
#include "gpuos/device/queue.h"

extern "C" __device__ void gpuos_run_task(const gpuos::device::OpCall& call);

namespace {

using gpuos::device::kMaxTaskTensors;
using gpuos::device::kNoDependencyCounter;
using gpuos::device::NodeState;
using gpuos::device::OpCall;
using gpuos::device::QueueControl;
using gpuos::device::QueueDeviceState;
using gpuos::device::QueueParams;
using gpuos::device::Submission;
using gpuos::device::TaskDesc;
using gpuos::device::TensorDesc;

constexpr unsigned long long kNone = ~0ull;
constexpr unsigned long long kContended = ~0ull - 1;  // lost a race: try again at once

enum Action : int { kIdle = 0, kAgain, kRun, kAdmit, kExit };

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Acquire at system scope: the host's writes before its release of *p are
// visible after this load.
__device__ __forceinline__ unsigned long long LoadAcquireSys(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

template <typename T>
__device__ __forceinline__ T Volatile(const T* p) {
  return *reinterpret_cast<const volatile T*>(p);
}

template <typename T>
__device__ __forceinline__ void StoreVolatile(T* p, T v) {
  *reinterpret_cast<volatile T*>(p) = v;
}

struct Queue {
  QueueControl* control;
  const Submission* submissions;
  unsigned long long* done;
  const TaskDesc* staged_tasks;
  const TensorDesc* staged_tensors;
  const unsigned int* staged_successors;
  TaskDesc* tasks;
  TensorDesc* tensors;
  unsigned int* successors;
  NodeState* nodes;
  unsigned long long* ready;
  QueueDeviceState* state;
  unsigned int* remaining;
  unsigned long long* sequences;
  unsigned long long idle_park_ns;
  unsigned long long generation;
  unsigned int tensor_capacity;
  unsigned int submission_capacity;
  unsigned int ready_capacity;
};

__device__ Queue Unpack(const QueueParams& p) {
  Queue q;
  q.control = reinterpret_cast<QueueControl*>(p.control);
  q.submissions = reinterpret_cast<const Submission*>(p.submissions);
  q.done = reinterpret_cast<unsigned long long*>(p.done);
  q.staged_tasks = reinterpret_cast<const TaskDesc*>(p.staged_tasks);
  q.staged_tensors = reinterpret_cast<const TensorDesc*>(p.staged_tensors);
  q.staged_successors = reinterpret_cast<const unsigned int*>(p.staged_successors);
  q.tasks = reinterpret_cast<TaskDesc*>(p.tasks);
  q.tensors = reinterpret_cast<TensorDesc*>(p.tensors);
  q.successors = reinterpret_cast<unsigned int*>(p.successors);
  q.nodes = reinterpret_cast<NodeState*>(p.nodes);
  q.ready = reinterpret_cast<unsigned long long*>(p.ready);
  q.state = reinterpret_cast<QueueDeviceState*>(p.state);
  q.remaining = reinterpret_cast<unsigned int*>(p.remaining);
  q.sequences = reinterpret_cast<unsigned long long*>(p.sequences);
  q.idle_park_ns = p.idle_park_ns;
  q.generation = p.generation;
  q.tensor_capacity = p.tensor_capacity;
  q.submission_capacity = p.submission_capacity;
  q.ready_capacity = p.ready_capacity;
  return q;
}

// One thread. The host reserves ready-ring room for every push of the
// submissions in flight, so the slot is free or about to be freed by the
// consumer of the entry one lap earlier.
__device__ void PushReady(const Queue& q, unsigned long long task) {
  const unsigned long long position = atomicAdd(&q.state->ready_tail, 1ull);
  unsigned long long* slot = q.ready + position % q.ready_capacity;
  while (Volatile(slot) != 0) __nanosleep(32);
  __threadfence();
  atomicExch(slot, task + 1);
}

// One thread: a ready task, kNone, or kContended.
__device__ unsigned long long TryPopReady(const Queue& q) {
  const unsigned long long head = Volatile(&q.state->ready_head);
  if (head >= Volatile(&q.state->ready_tail)) return kNone;
  if (atomicCAS(&q.state->ready_head, head, head + 1) != head) return kContended;
  unsigned long long* slot = q.ready + head % q.ready_capacity;
  unsigned long long value;
  while ((value = Volatile(slot)) == 0) __nanosleep(16);
  atomicExch(slot, 0ull);
  __threadfence();
  return value - 1;
}

// One thread: the index of a newly claimed submission, kNone or kContended.
__device__ unsigned long long TryClaimSubmission(const Queue& q) {
  const unsigned long long tail = LoadAcquireSys(&q.control->submit_tail);
  const unsigned long long head = Volatile(&q.state->submit_head);
  if (head >= tail) return kNone;
  if (atomicCAS(&q.state->submit_head, head, head + 1) != head) return kContended;
  atomicAdd(&q.state->in_flight, 1u);
  atomicMax(&q.state->last_admit_ns, GlobalTimerNs());
  return head;
}

// One thread: mirrors the status into mapped memory, then publishes the
// completion of ring slot `slot`.
__device__ void CompleteSubmission(const Queue& q, unsigned int slot) {
  QueueControl* c = q.control;
  const QueueDeviceState* s = q.state;
  StoreVolatile(&c->status.task_id, Volatile(&s->status.task_id));
  StoreVolatile(&c->status.detail, Volatile(&s->status.detail));
  StoreVolatile(&c->status.error, Volatile(&s->status.error));
  StoreVolatile(&c->completed_tasks,
                static_cast<unsigned long long>(Volatile(&s->status.completed)));
  __threadfence_system();
  StoreVolatile(q.done + slot, Volatile(q.sequences + slot));
  atomicSub(&q.state->in_flight, 1u);
}

// Copies `count` 16-byte words from mapped host memory (never cached: the
// staging arenas are reused) to device memory, four loads in flight per
// thread.
__device__ void CopyFromHost(int4* dst, const int4* src, unsigned int count) {
  const unsigned int stride = blockDim.x;
  unsigned int i = threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const int4 a = __ldcv(src + i);
    const int4 b = __ldcv(src + i + stride);
    const int4 c = __ldcv(src + i + 2 * stride);
    const int4 d = __ldcv(src + i + 3 * stride);
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < count; i += stride) dst[i] = __ldcv(src + i);
}

// All threads: copy submission `index` in, initialize its tasks, push roots.
__device__ void Admit(const Queue& q, unsigned long long index) {
  __shared__ Submission sub;
  const unsigned int slot = static_cast<unsigned int>(index % q.submission_capacity);
  if (threadIdx.x == 0) {
    const volatile Submission* record = q.submissions + slot;
    sub.sequence = record->sequence;
    sub.task_begin = record->task_begin;
    sub.task_count = record->task_count;
    sub.tensor_begin = record->tensor_begin;
    sub.tensor_count = record->tensor_count;
    sub.successor_begin = record->successor_begin;
    sub.successor_count = record->successor_count;
  }
  __syncthreads();
  CopyFromHost(reinterpret_cast<int4*>(q.tasks + sub.task_begin),
               reinterpret_cast<const int4*>(q.staged_tasks + sub.task_begin),
               sub.task_count * (sizeof(TaskDesc) / 16));
  CopyFromHost(reinterpret_cast<int4*>(q.tensors + sub.tensor_begin),
               reinterpret_cast<const int4*>(q.staged_tensors + sub.tensor_begin),
               sub.tensor_count * (sizeof(TensorDesc) / 16));
  for (unsigned int i = threadIdx.x; i < sub.successor_count; i += blockDim.x) {
    q.successors[sub.successor_begin + i] = __ldcv(q.staged_successors + sub.successor_begin + i);
  }
  __syncthreads();
  for (unsigned int i = threadIdx.x; i < sub.task_count; i += blockDim.x) {
    const unsigned int task = sub.task_begin + i;
    unsigned int deps = q.tasks[task].dependency_counter;
    if (deps == kNoDependencyCounter) deps = 0;
    NodeState node;
    node.pending = deps;
    node.tiles_next = 0;
    node.tiles_done = 0;
    node.submission = slot;
    q.nodes[task] = node;
  }
  if (threadIdx.x == 0) {
    q.remaining[slot] = sub.task_count;
    q.sequences[slot] = sub.sequence;
  }
  __threadfence();
  __syncthreads();
  if (sub.task_count == 0) {
    if (threadIdx.x == 0) CompleteSubmission(q, slot);
    return;
  }
  for (unsigned int i = threadIdx.x; i < sub.task_count; i += blockDim.x) {
    // From the descriptor, not the live counter: successors of roots pushed
    // already may be counting down.
    const unsigned int task = sub.task_begin + i;
    const unsigned int deps = q.tasks[task].dependency_counter;
    if (deps == 0 || deps == kNoDependencyCounter) PushReady(q, task);
  }
  __syncthreads();
}

// All threads: runs tiles of `task` and then of successors that became
// ready, until there is nothing left to run in this block.
__device__ void RunChain(const Queue& q, unsigned long long first, unsigned char* scratch,
                         unsigned int* completed) {
  __shared__ __align__(16) TaskDesc tile;
  __shared__ __align__(16) TensorDesc descs[kMaxTaskTensors];
  __shared__ unsigned long long next_task;
  __shared__ int claimed;
  __shared__ int bad_tensor;
  unsigned long long task = first;
  while (task != kNone) {
    if (threadIdx.x < sizeof(TaskDesc) / 16) {
      reinterpret_cast<int4*>(&tile)[threadIdx.x] =
          __ldcg(reinterpret_cast<const int4*>(q.tasks + task) + threadIdx.x);
    }
    __syncthreads();
    const unsigned int tiles = tile.num_tiles == 0 ? 1u : tile.num_tiles;
    if (threadIdx.x == 0) {
      // An untiled task is pushed or handed over exactly once: no claim.
      const unsigned int t = tiles == 1 ? 0u : atomicAdd(&q.nodes[task].tiles_next, 1u);
      claimed = t < tiles;
      bad_tensor = -1;
      if (claimed) {
        if (t == 0 && tiles > 1) {
          const unsigned int helpers = (tiles < gridDim.x ? tiles : gridDim.x) - 1;
          for (unsigned int h = 0; h < helpers; ++h) PushReady(q, task);
        }
        const long long items = tile.end - tile.begin;
        const long long chunk = (items + tiles - 1) / tiles;
        const long long begin = tile.begin + chunk * t;
        tile.begin = begin < tile.end ? begin : tile.end;
        tile.end = begin + chunk < tile.end ? begin + chunk : tile.end;
      }
    }
    __syncthreads();
    if (!claimed) return;
    const unsigned int num_tensors =
        tile.num_tensors <= kMaxTaskTensors ? tile.num_tensors : kMaxTaskTensors;
    constexpr unsigned int kWords = sizeof(TensorDesc) / 16;
    for (unsigned int w = threadIdx.x; w < num_tensors * kWords; w += blockDim.x) {
      const int index = tile.tensors[w / kWords];
      if (index < 0 || static_cast<unsigned int>(index) >= q.tensor_capacity) {
        bad_tensor = static_cast<int>(w / kWords);
        continue;
      }
      reinterpret_cast<int4*>(descs)[w] =
          __ldcg(reinterpret_cast<const int4*>(q.tensors + index) + w % kWords);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (unsigned int k = 0; k < num_tensors; ++k) tile.tensors[k] = static_cast<int>(k);
    }
    __syncthreads();
    OpCall call;
    call.task = &tile;
    call.tensors = descs;
    call.scratch = scratch;
    call.scratch_bytes = gpuos::device::kWorkerScratchBytes;
    call.num_tensors = num_tensors;
    call.status = &q.state->status;
    if (bad_tensor < 0) {
      gpuos_run_task(call);
    } else if (threadIdx.x == 0) {
      gpuos::device::ReportError(call, gpuos::device::kWorkerBadTensorIndex,
                                 static_cast<unsigned int>(bad_tensor));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      ++*completed;  // flushed when the block goes idle: a shared counter is a hot spot
      __threadfence();
      unsigned long long next = kNone;
      const unsigned int done = tiles == 1 ? 1u : atomicAdd(&q.nodes[task].tiles_done, 1u) + 1;
      if (done < tiles) {
        next = task;  // claim another tile if one is left
      } else {
        const unsigned int begin = tile.successor_begin;
        const unsigned int count = tile.successor_count;
        for (unsigned int s = 0; s < count; ++s) {
          const unsigned int successor = __ldcg(q.successors + begin + s);
          if (atomicSub(&q.nodes[successor].pending, 1u) == 1u) {
            if (next == kNone) {
              next = successor;
            } else {
              PushReady(q, successor);
            }
          }
        }
        const unsigned int slot = __ldcg(&q.nodes[task].submission);
        if (atomicSub(q.remaining + slot, 1u) == 1u) CompleteSubmission(q, slot);
      }
      if (next != kNone) __threadfence();  // acquire the predecessors' results
      next_task = next;
    }
    __syncthreads();
    task = next_task;
  }
}

// Thread 0 of an idle block: true when the block should exit now.
__device__ bool ShouldPark(const Queue& q, unsigned long long idle_since, bool* poller) {
  const bool stop = Volatile(&q.control->stop) != 0;
  if (!stop) {
    const unsigned long long now = GlobalTimerNs();
    if (now < idle_since || now - idle_since < q.idle_park_ns) return false;
    const unsigned long long last_admit = Volatile(&q.state->last_admit_ns);
    if (now < last_admit || now - last_admit < q.idle_park_ns) return false;
    if (Volatile(&q.state->in_flight) != 0) return false;
    if (LoadAcquireSys(&q.control->submit_tail) != Volatile(&q.state->submit_head)) {
      *poller = true;  // work waits and the pollers may have parked: claim it
      return false;
    }
  }
  if (atomicSub(&q.state->alive, 1u) != 1u) return true;
  // The last block: announce the park, then look once more. The host
  // publishes then reads parked_generation; this block writes it then reads
  // the tail: one of the two sees the other, so no submission is stranded
  // (both may act: then an extra grid is launched, which is harmless).
  StoreVolatile(&q.control->completed_tasks,
                static_cast<unsigned long long>(Volatile(&q.state->status.completed)));
  StoreVolatile(&q.control->parked_generation, q.generation);
  __threadfence_system();
  if (!stop && LoadAcquireSys(&q.control->submit_tail) > Volatile(&q.state->submit_head)) {
    atomicAdd(&q.state->alive, 1u);
    *poller = true;
    return false;
  }
  return true;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(gpuos::device::kWorkerThreads)
    gpuos_queue_worker(const QueueParams params) {
  __shared__ __align__(16) unsigned char scratch[gpuos::device::kWorkerScratchBytes];
  __shared__ int action;
  __shared__ unsigned long long argument;
  const Queue q = Unpack(params);
  if (threadIdx.x == 0) atomicAdd(&q.state->alive, 1u);
  unsigned long long idle_since = GlobalTimerNs();
  unsigned int idle_rounds = 0;
  unsigned int completed = 0;  // thread 0's count of tiles run, not yet flushed
  // Only pollers read the host's tail (a PCIe round trip each); the others
  // take work from the ready ring. A last block that resumes after parking
  // becomes a poller.
  bool poller = blockIdx.x < params.pollers;
  for (;;) {
    if (threadIdx.x == 0) {
      int next = kIdle;
      unsigned long long value = TryPopReady(q);
      if (value == kContended) {
        next = kAgain;
      } else if (value != kNone) {
        next = kRun;
      } else if (poller) {
        value = TryClaimSubmission(q);
        if (value == kContended) {
          next = kAgain;
        } else if (value != kNone) {
          next = kAdmit;
        }
      }
      if (next == kIdle) {
        if (completed != 0) {
          atomicAdd(&q.state->status.completed, completed);
          completed = 0;
        }
        if ((poller || (idle_rounds & 7u) == 0) && ShouldPark(q, idle_since, &poller)) {
          next = kExit;
        }
      }
      action = next;
      argument = value;
    }
    __syncthreads();
    const int current = action;
    const unsigned long long value = argument;
    __syncthreads();
    if (current == kExit) return;
    if (current == kRun) RunChain(q, value, scratch, &completed);
    if (current == kAdmit) Admit(q, value);
    if (current == kRun || current == kAdmit) {
      idle_since = GlobalTimerNs();
      idle_rounds = 0;
    } else if (current == kIdle) {
      ++idle_rounds;
      // Idle blocks back off (up to 16 us): a thousand blocks polling the
      // same few lines saturate their L2 slice and slow every busy block.
      if (threadIdx.x == 0) {
        const unsigned int sleep = 64u << (idle_rounds < 8u ? idle_rounds : 8u);
        __nanosleep(poller ? 64u : sleep);
      }
    }
  }
}
