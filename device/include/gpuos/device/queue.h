// The persistent worker's queue: the layout shared by the host runtime
// (core/src/runtime) and `gpuos_queue_worker` (device/src/queue_worker.cu).
// Like abi.h it is compiled by NVRTC and by the host compiler, so it uses
// builtin types only; a layout change bumps GPUOS_RUNTIME_ABI_VERSION.
//
// Memory (docs/runtime.md has the protocol):
//   mapped pinned host memory, written by the host: QueueControl::submit_tail,
//     ::stop, the ring of SubmissionSlots (a record each, and a small graph
//     inline) and the staging arenas (tasks, tensors, successors) a larger
//     graph is written into;
//   mapped pinned host memory, written by the device: QueueControl's device
//     half, the per-slot completion words (`done`) and error records
//     (SubmissionError);
//   device memory: the arenas' mirrors (the worker copies a submission in
//     when it claims it), per-task NodeState, the ready ring, QueueDeviceState,
//     per-slot WorkerStatus, per-block BlockActivity and trace rings.
#pragma once

#include "gpuos/device/abi.h"

namespace gpuos {
namespace device {

// Entries of the image's alias table (gpuos_alias_table): logical operator
// id -> physical slot. Id 0 is reserved (TaskDesc::logical_op == 0 means
// "use opcode").
constexpr unsigned int kMaxLogicalOps = 4096;

// One published graph: ranges of the arenas (never wrapping) and its
// sequence number (1, 2, ...). Ring slot = (sequence - 1) % capacity.
//
// The graph's entries of the successor arena are its edges
// (successor_count) followed by its roots (root_count, at least 1 when it
// has tasks): the tasks without predecessors, in the order they should start,
// as task arena indices, so that the device needs no scan for them.
//
// Where the device copies the graph from: when inline_words != 0, the
// record's own ring slot (SubmissionSlot::payload: tasks, tensors, then the
// successor entries four to a 16-byte word), read with the record in one
// PCIe round trip; else the staging arenas at the same ranges.
struct alignas(16) Submission {
  unsigned long long sequence;
  unsigned int task_begin;  // TaskDesc index in the task arena
  unsigned int task_count;
  unsigned int tensor_begin;  // tasks' tensor indices are absolute already
  unsigned int tensor_count;
  unsigned int successor_begin;  // tasks' successor_begin is absolute already
  unsigned int successor_count;  // edges; the roots follow them
  // Ordering after another CUDA stream (SubmitOptions::wait_for): the device
  // address of a 64-bit word that stream writes (cuStreamWriteValue64), or 0
  // for none; or kSlotGate: the word is the ring slot's own
  // SubmissionSlot::gate_word, which the host opens (SubmitOptions::
  // open_later, Runtime::OpenGate) and the worker reads with the slot. The
  // submission's tasks start only once the word is "open":
  // (long long)(*gate - gate_value) >= 0, the cyclic >= of cuStreamWaitValue64.
  unsigned long long gate;
  unsigned long long gate_value;
  unsigned int root_count;
  unsigned int inline_words;  // 16-byte payload words in the slot; 0: staged
  // The first root (task arena index; also the first root entry) and its
  // tiles (num_tiles, at least 1): the admitting block claims that task's
  // tile 0 and announces its helpers as part of the admission.
  unsigned int first_root;
  unsigned int first_root_tiles;
};

// Whether a submission's tiles count in its `remaining` one by one: when
// its only task is tiled, the task is done exactly when the submission is,
// so the block finishing a tile adds it to the submission's count (in its
// batched Completions) instead of a task tile counter that the last tile's
// block would then pass on: one L2 round trip and one fence less between
// the last tile and the completion word. The admission sets `remaining` to
// the tiles (plus helpers) and marks the task kTaskTilesCountInSubmission.
// GPUOS_JIT_DEFINES=GPUOS_LONE_TASK_TILES=0: the per-task tile counter for
// every task, as before (an A/B experiment).
#ifndef GPUOS_LONE_TASK_TILES
#define GPUOS_LONE_TASK_TILES 1
#endif
GPUOS_HOST_DEVICE inline bool SubmissionCountsTiles(unsigned int task_count,
                                                    unsigned int first_root_tiles) {
  return GPUOS_LONE_TASK_TILES != 0 && task_count == 1 && first_root_tiles > 1;
}

// Submission::gate of a submission whose gate is its ring slot's gate_word.
constexpr unsigned long long kSlotGate = 1;

// A ring slot in mapped host memory: the record, room for a small graph
// (SubmissionPayloadWords), then the slot's gate word, 8 KiB in all: the
// worker reads a whole slot at once, two 16-byte words per thread, so a
// kSlotGate submission's gate costs no round trip of its own.
constexpr unsigned int kSubmissionSlotWords = 512;
constexpr unsigned int kSubmissionRecordWords = sizeof(Submission) / 16;
constexpr unsigned int kInlinePayloadWords = kSubmissionSlotWords - kSubmissionRecordWords - 1;
struct alignas(16) SubmissionSlot {
  Submission record;
  unsigned int payload[kInlinePayloadWords * 4];
  // The gate of a kSlotGate submission: open once it holds the submission's
  // sequence, ignoring kGateDropped (it only grows: an earlier submission of
  // the slot left a smaller one). Open with kGateDropped set: the host
  // dropped the submission (Runtime::DropGated), which completes without
  // running its tasks. In the slot's last 16-byte word.
  unsigned long long gate_word;
  // The payload cache's entry this submission fills (entry + 1; 0: none):
  // the admitting block that opens it as direct tiles writes its payload
  // into that entry's area instead of the ring slot's and tags the entry
  // with its sequence (queue_direct.cuh, "Cached payloads").
  unsigned long long cache_fill;
};
// SubmissionSlot::gate_word's flag "dropped" (sequences stay below it).
constexpr unsigned long long kGateDropped = 1ull << 62;

// 16-byte words of a graph's inline payload (Submission::inline_words).
GPUOS_HOST_DEVICE inline unsigned int SubmissionPayloadWords(unsigned int tasks,
                                                             unsigned int tensors,
                                                             unsigned int successor_entries) {
  return tasks * (sizeof(TaskDesc) / 16) + tensors * (sizeof(TensorDesc) / 16) +
         (successor_entries + 3) / 4;
}

// The task index a gate-retry entry of the ready ring carries (EncodeReady):
// "admit the submission in this slot once its gate is open".
constexpr unsigned int kGateRetryTask = 0xfffffffeu;

// The control block in mapped pinned host memory. The two halves sit on
// separate 64-byte lines so host and device writes do not share one.
struct alignas(64) QueueControl {
  // Host -> device.
  unsigned long long submit_tail;  // submissions published; written last (release)
  // The newest submission when it is a lone tiled task travelling inline
  // (EncodeLoneHint), else 0 (written before submit_tail by every
  // submission): when it names the
  // submission a poller claims, the poller tells idle blocks to run its
  // tiles directly (QueueDeviceState::direct_board). It shares a 16-byte
  // word with the tail, which a poller reads with one acquire load
  // (TryClaimSubmission): a tail read with it is never newer than the hint.
  // Where the submission's payload is in the device's payload cache, the
  // hint names the entry and whether its gate is open (LoneHintCacheBits;
  // the host sets the open bit when the gate opens, and clears the cache
  // bits when it drops the submission).
  unsigned long long lone_hint;
  // stop and keep_warm: one 8-byte load, in flight with the tail's.
  unsigned int stop;  // 1: every block exits as soon as it is idle
  // Bumped by Runtime::KeepWarm: a poller that sees it change counts it as
  // activity, so the grid does not park for idle_park after it.
  unsigned int keep_warm;
  unsigned long long reserved1[5];
  // Device -> host.
  unsigned long long parked_generation;  // generation of the last grid that parked
  unsigned long long completed_tasks;    // tiles finished, mirrored at completions and parks
  WorkerStatus status;                   // unused since ABI 4: errors are per submission
  unsigned long long sm_clock_khz;       // SM clock of the last block to park (diagnostics)
  // Submissions that ran as direct tiles (queue_direct.cuh), as the block
  // completing the latest one mirrored QueueDeviceState's count (mirrors may
  // land out of order: a lower bound at any moment; diagnostics and tests).
  unsigned long long direct_submissions;
  // Direct openings from the payload cache, without the ring slot's read
  // (queue_direct.cuh, "Cached payloads"), mirrored as direct_submissions
  // is (a lower bound at any moment).
  unsigned long long cached_openings;
};

// Mapped pinned host memory right after QueueControl (allocated with it):
// per payload cache entry, the sequence of the last submission whose
// opening wrote the entry (device -> host), so that the host publishes a
// submission as a use of an entry only once the device confirmed its fill
// (queue_direct.cuh, "Cached payloads").
constexpr unsigned int kCacheFilledWords = 128;

// Per task-arena entry, device memory; initialized when the task is admitted.
struct NodeState {
  unsigned int pending;     // predecessors not finished yet
  unsigned int tiles_next;  // next tile to claim
  unsigned int tiles_done;  // tiles finished
  unsigned int submission;  // ring slot of the task's submission
  // Helper tickets of a tiled task announced on the help board
  // (QueueDeviceState::help_board): set by the block that claims tile 0 (or
  // at the admission, for a submission's first root), taken one each by
  // idle blocks (atomicSub: > 0 before is a ticket; it may go negative),
  // what is left taken back once every tile is claimed.
  int helper_tickets;
  unsigned int reserved[3];
};

// Words of the help board (QueueDeviceState::help_board).
constexpr unsigned int kHelpBoardWords = 8;

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
  unsigned long long submit_head;  // submissions claimed
  // %globaltimer when a submission was last claimed or completed (or the
  // host asked to keep warm): the queue's idle clock (ShouldPark). Not the
  // claim alone: a call longer than idle_park let the blocks it left idle
  // exit at its completion, and the grid parked at every such call.
  unsigned long long last_busy_ns;
  unsigned int alive;      // blocks running
  unsigned int in_flight;  // submissions claimed and not finished
  unsigned long long pad2[13];
  // `completed` is flushed by idle blocks; the error fields are unused since
  // ABI 4 (errors are per submission: QueueParams::slot_status).
  WorkerStatus status;
  // Copies of the host's submit_tail and stop kept by the pollers, so that
  // the other blocks never read host memory (PCIe) while idle.
  unsigned long long host_tail_seen;
  unsigned int stop_seen;
  // Pollers running. A block that finds work nobody polled for becomes a
  // poller only while there are fewer than QueueParams::pollers: were every
  // idle block to poll the host's tail over PCIe at full rate, that traffic
  // stalls the busy blocks' tasks (seen at e18fb50: 2 us tasks took 100-140
  // us in bursts of milliseconds) and the host's own reads of pinned memory.
  unsigned int pollers_alive;
  unsigned int keep_warm_seen;  // the host's keep_warm a poller last saw
  // Low 32 bits of the generation of the last grid that began to park: the
  // block that found the queue drained for idle_park wrote it, and every
  // block of that grid leaves once the park's bound is known and what lies
  // below it is done (queue_worker.cu, ShouldPark).
  unsigned int parking_generation;
  unsigned long long direct_submissions;  // completed as direct tiles (QueueControl mirrors it)
  // The park's bound: the host's tail as the block that began the park read
  // it after announcing the park to the host (QueueControl::parked_generation).
  // The grid claims only submissions below it. Valid once
  // park_bound_generation holds the grid's generation (low 32 bits; written
  // after the bound, with a fence between).
  unsigned long long park_run_until;
  unsigned int park_bound_generation;
  unsigned int pad_park;
  unsigned long long cached_openings;  // QueueControl mirrors it
  unsigned long long pad3[7];
  // Tiled tasks that want helpers: EncodeReady(task, slot, true), 0 = free.
  // Idle blocks read the words and take a helper ticket from the task's
  // NodeState::helper_tickets with one atomicSub each, instead of popping
  // one ready-ring entry per helper with a CAS on ready_head (a herd: 8
  // helpers took ~5 us to start, one CAS round each). A word may be stale:
  // its task done and its arena entry reused; a ticket then belongs to
  // whichever task holds the entry now (it set the tickets), which is what
  // the taker runs.
  unsigned long long help_board[kHelpBoardWords];
  // The last lone tiled task a poller claimed (EncodeDirectBoard), on the
  // help board's line (idle blocks read both in one round trip): the blocks
  // it names read its ring slot themselves and claim its tiles from the
  // slot's DirectSlot (docs/runtime.md, "Direct tiles").
  unsigned long long direct_board;
  unsigned long long pad5[15 - kHelpBoardWords];
};

// Per submission ring slot, device memory (QueueParams::direct), zeroed
// before the first launch: the tiles of a lone tiled task run directly
// (docs/runtime.md, "Direct tiles").
struct alignas(16) DirectSlot {
  // The submission's sequence (low 32 bits), whether its area was kept (1
  // bit), its tiles (15 bits; 0: closed) and the next tile (16 bits):
  // queue_direct.cuh, DirectClaim. The admitting block opens it (exchange:
  // tile 0 taken); the others claim with a 64-bit add, and the returned
  // word says whose tile they got and whether it is one.
  unsigned long long claim;
  unsigned int done;  // tiles finished; back to 0 when the slot's next direct submission opens
  // The area the opening's payload is in (DirectAreaIndex): the ring slot's
  // own or a payload cache entry's; written before the opening's release,
  // read by the blocks that acquired the opening.
  unsigned int area;
};
// Bytes of device memory per ring slot after the DirectSlots: the admitting
// block's copy of a lone tiled task's inline graph (the task, then its
// tensors), which the helpers read instead of the ring slot (PCIe reads of
// the slot by many blocks at once stalled every block's memory traffic for
// 10-40 us: bench/results/experiments/direct_tiles_session24.txt).
constexpr unsigned int kDirectAreaBytes = 8192;

// The payload cache (queue_direct.cuh, "Cached payloads"): after the ring
// slots' areas, `entries` more areas of kDirectAreaBytes. Area index
// i < capacity is ring slot i's; capacity + k is entry k's.
GPUOS_HOST_DEVICE inline unsigned long long DirectRegionBytes(unsigned int capacity,
                                                              unsigned int entries) {
  return static_cast<unsigned long long>(capacity) * 16ull +
         (static_cast<unsigned long long>(capacity) + entries) * kDirectAreaBytes;
}
constexpr unsigned int kMaxPayloadCacheEntries = 127;
// The most tiles a lone task runs as direct tiles with (the claim word's 15
// bits: queue_direct.cuh, DirectClaim); the host's payload cache keys only
// such tasks.
constexpr unsigned int kDirectMaxTiles = (1u << 15) - 1;
static_assert(kMaxPayloadCacheEntries <= kCacheFilledWords, "an entry without a filled word");

// QueueControl::lone_hint: the submission's sequence (low 29 bits: the hint
// only ever names the newest submission, which a claim compares with the
// one it could take, at most a ring of submissions apart), its tiles (16
// bits, at most 65535), the 16-byte words of its ring slot that hold the
// record and the graph (10 bits), and the payload cache's 9 bits
// (LoneHintCacheBits: 0, or the entry that holds the payload and whether
// the submission's gate is open).
constexpr unsigned int kLoneHintSequenceBits = 29;
constexpr unsigned long long kLoneHintCached = 1ull;  // the payload is a cache entry's
constexpr unsigned long long kLoneHintOpen = 2ull;    // and its gate is open
constexpr unsigned long long kLoneHintCacheMask = 0x1ffull;
GPUOS_HOST_DEVICE inline unsigned long long LoneHintCacheBits(unsigned int entry, bool open) {
  return static_cast<unsigned long long>(entry & 0x7fu) << 2 | (open ? kLoneHintOpen : 0ull) |
         kLoneHintCached;
}
GPUOS_HOST_DEVICE inline unsigned long long EncodeLoneHint(unsigned long long sequence,
                                                           unsigned int tiles,
                                                           unsigned int slot_words,
                                                           unsigned long long cache_bits = 0) {
  const unsigned long long t = tiles > 0xffffu ? 0xffffu : tiles;
  return (sequence & ((1ull << kLoneHintSequenceBits) - 1)) << 35 | t << 19 |
         static_cast<unsigned long long>(slot_words & 0x3ffu) << 9 |
         (cache_bits & kLoneHintCacheMask);
}
GPUOS_HOST_DEVICE inline unsigned int LoneHintTiles(unsigned long long hint) {
  return static_cast<unsigned int>((hint >> 19) & 0xffffu);
}
// Whether `hint` is one for submission `sequence` (a tiled task: 2 tiles
// or more, so a zeroed word names nothing).
GPUOS_HOST_DEVICE inline bool LoneHintNames(unsigned long long hint, unsigned long long sequence) {
  return LoneHintTiles(hint) > 1 &&
         (hint >> 35) == (sequence & ((1ull << kLoneHintSequenceBits) - 1));
}
GPUOS_HOST_DEVICE inline unsigned int LoneHintWords(unsigned long long hint) {
  return static_cast<unsigned int>((hint >> 9) & 0x3ffu);
}
GPUOS_HOST_DEVICE inline bool LoneHintCached(unsigned long long hint) {
  return (hint & kLoneHintCached) != 0;
}
GPUOS_HOST_DEVICE inline bool LoneHintOpen(unsigned long long hint) {
  return (hint & kLoneHintOpen) != 0;
}
GPUOS_HOST_DEVICE inline unsigned int LoneHintEntry(unsigned long long hint) {
  return static_cast<unsigned int>(hint >> 2) & 0x7fu;
}

// An idle block's looks at a queue that seemed drained and idle (the
// worker's ShouldPark): a claim and a completion each move in_flight and
// the idle clock (QueueDeviceState::last_busy_ns) with two unfenced
// atomics, so one look can see the queue drained with the clock not yet
// moved. The block parks only when a second look, kParkRecheckNs or more
// after the first, sees the same clock. Times are the low 32 bits of ns
// (they wrap every 4.3 s; differences are taken modulo 2^32).
constexpr unsigned int kParkRecheckNs = 2000;
struct DrainedLook {
  unsigned int at;    // when the first look with this clock was made
  unsigned int busy;  // the idle clock it saw
};
// A look that saw the queue drained and idle at `now_low` with the clock at
// `busy_low`: true when an earlier look kParkRecheckNs or more before saw
// the same clock (park); otherwise false, and a moved clock makes this look
// the first.
GPUOS_HOST_DEVICE inline bool SecondLookConfirms(DrainedLook* look, unsigned int busy_low,
                                                 unsigned int now_low) {
  if (look->busy != busy_low) {
    look->busy = busy_low;
    look->at = now_low;
    return false;
  }
  return now_low - look->at >= kParkRecheckNs;
}

// Where a block's grid is in a park, as far as its claims go.
enum class ParkPhase {
  kRunning,       // not parking
  kBoundUnknown,  // parking; the park's bound (QueueDeviceState::park_run_until) not known yet
  kBounded,       // parking; the bound known
};

// The submissions a block may claim (those below the returned index): all
// while its grid runs; none while the grid parks and the park's bound is
// not known yet; those below the bound (`run_until`, read only when
// kBounded) once it is. A submission at or past the bound was published
// after the host could see the park, so its Submit launches a new grid for
// it.
GPUOS_HOST_DEVICE inline unsigned long long ParkClaimBound(ParkPhase phase,
                                                           unsigned long long run_until) {
  switch (phase) {
    case ParkPhase::kRunning:
      return ~0ull;
    case ParkPhase::kBoundUnknown:
      return 0ull;
    case ParkPhase::kBounded:
      return run_until;
  }
  return 0ull;
}

// QueueDeviceState::direct_board: the sequence (low 42 bits; a reader
// widens it against one it knows, DirectBoardSequence), how many blocks
// should help (12 bits; which blocks: queue_direct.cuh, DirectHelpWanted)
// and the ring slot's words of record and graph (10 bits; helpers read the
// graph's from the slot's area).
struct DirectBoard {
  unsigned long long sequence;  // low 42 bits
  unsigned int helpers;
  unsigned int slot_words;
};
constexpr unsigned long long kDirectBoardSequenceMask = (1ull << 42) - 1;
GPUOS_HOST_DEVICE inline unsigned long long EncodeDirectBoard(const DirectBoard& b) {
  return (b.sequence & kDirectBoardSequenceMask) << 22 |
         static_cast<unsigned long long>(b.helpers & 0xfffu) << 10 | (b.slot_words & 0x3ffu);
}
GPUOS_HOST_DEVICE inline DirectBoard DecodeDirectBoard(unsigned long long word) {
  DirectBoard b;
  b.sequence = word >> 22;
  b.helpers = static_cast<unsigned int>((word >> 10) & 0xfffu);
  b.slot_words = static_cast<unsigned int>(word & 0x3ffu);
  return b;
}
// The full sequence whose low 42 bits are `low`, nearest to `known` (a
// sequence within 2^41 of it).
GPUOS_HOST_DEVICE inline unsigned long long DirectBoardSequence(unsigned long long low,
                                                                unsigned long long known) {
  const unsigned long long delta = (low - known) & kDirectBoardSequenceMask;
  // Sign-extend the 42-bit difference.
  const long long signed_delta = delta >= (1ull << 41) ? static_cast<long long>(delta) - (1ll << 42)
                                                       : static_cast<long long>(delta);
  return known + static_cast<unsigned long long>(signed_delta);
}

// Per submission ring slot, mapped host memory: the first error of the
// submission that last completed in that slot with an error. Written by the
// device at the completion (before `done[slot]`); the host never clears it
// and trusts it only where `sequence` is the submission it asks about.
struct alignas(16) SubmissionError {
  unsigned long long sequence;  // the submission this record belongs to
  unsigned long long reserved;
  WorkerStatus status;  // error, task_id, detail (`completed` unused)
};

// Per worker block, device memory: the task the block runs now, for the
// host's watchdog (read with a copy on the copy stream). Thread 0 writes it
// with one 16-byte store when a task (tile) starts and clears it when the
// block has nothing left to run. The host measures how long the same record
// stays (it cannot read the device clock), so `stamp` only has to tell two
// runs of one task apart: a count, no clock read on the chain path.
struct alignas(16) BlockActivity {
  unsigned int task_id;      // TaskDesc::task_id
  unsigned int op;           // TraceOperator() of the task
  unsigned long long stamp;  // tasks the block started in this launch; 0 = idle
};

// One finished task (tile) in a block's trace ring (device memory; only
// when QueueParams::trace is set). Block b's ring is
// trace[b * trace_per_block, ...), record i at i % trace_per_block;
// trace_counts[b] counts the records b ever wrote.
struct alignas(16) TraceRecord {
  unsigned long long start_ns;  // %globaltimer when the task started
  unsigned int duration_ns;     // saturates at 0xffffffff (4.29 s)
  unsigned int task_id;         // TaskDesc::task_id
  unsigned int sequence;        // low 32 bits of the submission's sequence
  unsigned int op;              // TraceOperator() of the task
  unsigned short tile;          // tile index
  unsigned short num_tiles;     // tiles of the task (1 when untiled)
  unsigned int generation;      // low 32 bits of the grid's launch generation
};

// What BlockActivity::op and TraceRecord::op hold: the logical operator id
// when the task has one, else its slot with the top bit set (0 = no-op).
constexpr unsigned int kTraceSlotBit = 0x80000000u;
// TraceRecord::op of the queue's own records (no slot is this large): a
// submission's admission (start: when a block claimed it; duration: until
// its first task is about to start, the copy of its graph included) and its
// completion (start: when its last task was counted; duration: until the
// completion word was stored, after the system fence). Their task_id is
// kTraceNoTask, their sequence the submission's. A helper's record of a
// submission run as direct tiles (docs/runtime.md, "Direct tiles"): start
// when the block, having read the direct board's word, began to help (it
// saw the board two barriers before; GPUOS_TRACE_IDLE_ROUNDS=1..4 stamp it
// earlier: queue_direct.cuh); duration until it saw the opening, or a
// later submission of the slot open it (the record still names the one the
// board did), or gave up waiting (kDirectOpenWaitNs, 50 us: such a record
// lasts about that long). Written by thread 0 after the block's tiles
// (since session 44; before its first barrier until then), off the path it
// times, so it may land after the submission's completion record: a trace
// read right after a Wait can lack the last submission's help records.
constexpr unsigned int kTraceAdmitOp = 0xfffffff0u;
constexpr unsigned int kTraceCompleteOp = 0xfffffff1u;
constexpr unsigned int kTraceHelpOp = 0xfffffff2u;
constexpr unsigned int kTraceNoTask = 0xffffffffu;
GPUOS_HOST_DEVICE inline unsigned int TraceOperator(unsigned int logical_op, unsigned int opcode) {
  return logical_op != 0 ? logical_op : (opcode == 0 ? 0u : (opcode | kTraceSlotBit));
}

// The single parameter of `gpuos_queue_worker` (by value).
struct alignas(16) QueueParams {
  unsigned long long control;            // QueueControl* (mapped)
  unsigned long long submissions;        // SubmissionSlot[submission_capacity] (mapped)
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
  // Errors and diagnostics (docs/runtime.md, "Errors", "Watchdog", "Chrome trace").
  unsigned long long slot_status;   // WorkerStatus[submission_capacity] (device): first error
  unsigned long long slot_errors;   // SubmissionError[submission_capacity] (mapped)
  unsigned long long activity;      // BlockActivity[diagnostic_blocks]
  unsigned long long trace;         // TraceRecord[diagnostic_blocks * trace_per_block]; 0 = off
  unsigned long long trace_counts;  // unsigned long long[diagnostic_blocks]
  unsigned int task_capacity;
  unsigned int tensor_capacity;
  unsigned int successor_capacity;
  unsigned int submission_capacity;
  unsigned int ready_capacity;
  unsigned int pollers;  // blocks [0, pollers) poll the host ring at full rate
  unsigned int
      diagnostic_blocks;         // entries of activity / trace_counts (blocks >= it record nothing)
  unsigned int trace_per_block;  // records per block's trace ring
  // DirectSlot[submission_capacity], then kDirectAreaBytes per ring slot
  // (device memory, zeroed).
  unsigned long long direct;
  // The fence before a completion word (CompleteSubmission):
  // kCompletionScopeSystem, or kCompletionScopeGpu where every task's
  // outputs are in device memory (RuntimeConfig::device_memory_results).
  unsigned int completion_scope;
  // Entries of the payload cache after the ring slots' areas
  // (DirectRegionBytes; 0: none).
  unsigned int payload_cache_entries;
  unsigned int reserved[2];
};

// QueueParams::completion_scope.
constexpr unsigned int kCompletionScopeSystem = 0;
constexpr unsigned int kCompletionScopeGpu = 1;

static_assert(sizeof(Submission) == 64, "Submission layout changed: bump the ABI version");
static_assert(sizeof(SubmissionSlot) == kSubmissionSlotWords * 16, "SubmissionSlot layout changed");
static_assert(sizeof(QueueControl) == 128, "QueueControl layout changed: bump the ABI version");
static_assert(sizeof(NodeState) == 32, "NodeState layout changed");
static_assert(sizeof(DirectSlot) == 16, "DirectSlot layout changed: bump the ABI version");
static_assert(sizeof(QueueDeviceState) == 640, "QueueDeviceState layout changed");
static_assert(sizeof(QueueParams) == 224, "QueueParams layout changed: bump the ABI version");
static_assert(sizeof(SubmissionError) == 32,
              "SubmissionError layout changed: bump the ABI version");
static_assert(sizeof(BlockActivity) == 16, "BlockActivity layout changed");
static_assert(sizeof(TraceRecord) == 32, "TraceRecord layout changed");

}  // namespace device
}  // namespace gpuos
