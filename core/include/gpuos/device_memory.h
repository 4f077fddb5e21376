// Device memory for tensors: an arena that sub-allocates from large blocks
// and defers frees to points where no kernel can be running.
//
// Why deferred: while the persistent worker runs, cuMemFree blocks until
// every kernel exits (docs/tensors.md, device facts), and memory handed back
// to the arena could be reused by a new tensor while a queued task still
// reads the old one. So the arena never returns memory to the driver while
// the worker may run, and a Free() made while it may run only queues the
// range; the runtime calls ReleaseDeferred() when the worker is parked.
//
// Addresses are device addresses as integers (CUdeviceptr); the arena never
// dereferences them, so tests run it over host memory (HostMemoryAllocator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpuos/status.h"

namespace gpuos {

// Where the arena's blocks come from (cuMemAlloc on a GPU, host memory in
// tests). Implementations must be thread safe.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // A block of at least `bytes` bytes, aligned to at least kArenaAlignment.
  // Unavailable when the device is out of memory.
  virtual Expected<uint64_t> Allocate(size_t bytes) = 0;
  // Returns a block from Allocate. The arena calls it only at quiescent
  // points (no kernel may be running).
  virtual Status Free(uint64_t address, size_t bytes) = 0;
  // For messages: "cuda device 0", "host memory".
  virtual std::string Name() const = 0;
};

// Every sub-allocation starts at a multiple of this (cudaMalloc's guarantee,
// enough for any vectorised access).
inline constexpr size_t kArenaAlignment = 256;

// Host memory posing as device memory (aligned_alloc), with a byte limit to
// test out-of-memory paths. Counts live blocks, for leak checks in tests.
class HostMemoryAllocator final : public DeviceAllocator {
 public:
  explicit HostMemoryAllocator(size_t limit_bytes = SIZE_MAX) : limit_bytes_(limit_bytes) {}
  ~HostMemoryAllocator() override;  // frees blocks still live

  Expected<uint64_t> Allocate(size_t bytes) override;
  Status Free(uint64_t address, size_t bytes) override;
  std::string Name() const override { return "host memory"; }

  size_t live_blocks() const;
  size_t live_bytes() const;
  size_t total_allocations() const;

 private:
  mutable std::mutex mutex_;
  size_t limit_bytes_;
  size_t live_bytes_ = 0;
  size_t total_allocations_ = 0;
  std::map<uint64_t, size_t> live_;
};

struct ArenaOptions {
  // Blocks are requested from the allocator in this size; a request larger
  // than half of it gets a block of its own (rounded up to 2 MiB).
  size_t block_bytes = size_t{64} << 20;
  // Most bytes the arena holds from the allocator; SIZE_MAX for no limit.
  size_t max_reserved_bytes = SIZE_MAX;
};

struct ArenaStats {
  size_t bytes_in_use = 0;       // allocated, rounded to kArenaAlignment, not freed
  size_t peak_bytes_in_use = 0;  // high-water mark of bytes_in_use
  size_t bytes_reserved = 0;     // held from the allocator (all blocks)
  size_t blocks = 0;             // blocks held from the allocator
  size_t allocations = 0;        // live allocations
  size_t pending_frees = 0;      // freed while the worker may run, not yet released
  size_t pending_free_bytes = 0;
  uint64_t total_allocations = 0;  // since creation
  uint64_t deferred_releases = 0;  // allocations released by ReleaseDeferred
};

// A best-fit sub-allocator over large blocks, with deferred frees.
//
// Thread safety: every member may be called from any thread.
class DeviceArena {
 public:
  // `allocator` must outlive the arena (shared ownership makes that easy).
  explicit DeviceArena(std::shared_ptr<DeviceAllocator> allocator, ArenaOptions options = {});
  // Returns every block to the allocator. REQUIRES: no kernel may be running
  // (the runtime destroys the arena after the worker has exited).
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // `bytes` rounded up to kArenaAlignment (a zero-byte request takes one
  // unit), aligned to kArenaAlignment. Reuses free space (best fit: the
  // smallest free range that holds it) before taking a new block.
  // Unavailable, naming the request and the arena's state, when the
  // allocator or max_reserved_bytes refuses.
  Expected<uint64_t> Allocate(size_t bytes);

  // Frees an address returned by Allocate. While the worker may run (see
  // SetWorkerMayRun) the range goes onto the pending list; otherwise it is
  // free at once. InvalidArgument for an address that is not a live
  // allocation (never allocated, or already freed / pending).
  Status Free(uint64_t address);

  // The runtime says whether a kernel may be using arena memory: true from
  // the first submission after a park, false once the worker is parked and
  // its work completed. Setting false does not release pending frees; call
  // ReleaseDeferred for that.
  void SetWorkerMayRun(bool may_run);
  bool worker_may_run() const;

  // Makes pending frees available for reuse. REQUIRES (not checkable here):
  // every task submitted before the frees has completed, e.g. the worker is
  // parked. Returns the number of allocations released.
  size_t ReleaseDeferred();

  // The runtime's finer-grained form of the two above. NoteSubmission:
  // submission `sequence` (1, 2, ... increasing) may use arena memory from
  // now on; sets worker_may_run, and every later Free is tagged with the
  // newest sequence noted. ReleaseCompletedThrough: makes the pending frees
  // tagged <= `sequence` reusable. REQUIRES (not checkable here): every
  // submission up to `sequence` has completed (they complete out of order:
  // pass the sequence below the oldest still in flight). Returns the number
  // of allocations released. A free made before any NoteSubmission has tag 0.
  void NoteSubmission(uint64_t sequence);
  size_t ReleaseCompletedThrough(uint64_t sequence);

  // Returns wholly free blocks to the allocator. FailedPrecondition while the
  // worker may run (the driver's free would block on it). Returns bytes
  // returned.
  Expected<size_t> Trim();

  ArenaStats Stats() const;
  const std::string& allocator_name() const { return allocator_name_; }

 private:
  struct Block {
    size_t bytes;
    size_t used;  // bytes of live or pending allocations in it
  };
  struct Allocation {
    size_t bytes;
    bool pending;  // freed while the worker may run
  };

  Expected<uint64_t> AllocateLocked(size_t bytes);
  Status AddBlockLocked(size_t min_bytes);
  void InsertFreeLocked(uint64_t address, size_t bytes);
  void EraseFreeLocked(uint64_t address, size_t bytes);
  void ReleaseLocked(uint64_t address);
  Block& BlockOfLocked(uint64_t address);
  std::string DescribeLocked() const;

  std::shared_ptr<DeviceAllocator> allocator_;
  const ArenaOptions options_;
  const std::string allocator_name_;

  mutable std::mutex mutex_;
  bool worker_may_run_ = false;
  std::map<uint64_t, Block> blocks_;                    // by base address
  std::map<uint64_t, size_t> free_by_address_;          // free ranges
  std::set<std::pair<size_t, uint64_t>> free_by_size_;  // (bytes, address), for best fit
  std::map<uint64_t, Allocation> allocated_;            // live and pending, by address
  // Freed while the worker may run: (address, newest submission noted then).
  std::vector<std::pair<uint64_t, uint64_t>> pending_;
  uint64_t last_submission_ = 0;
  ArenaStats stats_;
};

}  // namespace gpuos
