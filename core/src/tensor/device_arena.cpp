#include <algorithm>
#include <cassert>
#include <iterator>

#include "gpuos/device_memory.h"

namespace gpuos {
namespace {

constexpr size_t kLargeBlockGranule = size_t{2} << 20;

size_t RoundUp(size_t bytes, size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

std::string MiB(size_t bytes) {
  return std::to_string(bytes / (1 << 20)) + "." +
         std::to_string(bytes % (1 << 20) * 10 / (1 << 20)) + " MiB";
}

}  // namespace

DeviceArena::DeviceArena(std::shared_ptr<DeviceAllocator> allocator, ArenaOptions options)
    : allocator_(std::move(allocator)), options_(options), allocator_name_(allocator_->Name()) {}

DeviceArena::~DeviceArena() {
  for (const auto& [base, block] : blocks_) (void)allocator_->Free(base, block.bytes);
}

Expected<uint64_t> DeviceArena::Allocate(size_t bytes) {
  if (bytes > SIZE_MAX - kLargeBlockGranule) {
    return InvalidArgument("device allocation of " + std::to_string(bytes) + " bytes is too large");
  }
  const size_t rounded = RoundUp(std::max<size_t>(bytes, 1), kArenaAlignment);
  std::lock_guard lock(mutex_);
  return AllocateLocked(rounded);
}

Expected<uint64_t> DeviceArena::AllocateLocked(size_t bytes) {
  auto fit = free_by_size_.lower_bound({bytes, 0});
  if (fit == free_by_size_.end()) {
    Status added = AddBlockLocked(bytes);
    if (!added.ok()) {
      return Unavailable("out of device memory: cannot allocate " + std::to_string(bytes) +
                         " bytes from " + allocator_name_ + " (" + added.message() + "; arena " +
                         DescribeLocked() +
                         "); free tensors, let pending frees be released at the next park, or "
                         "raise the memory limit");
    }
    fit = free_by_size_.lower_bound({bytes, 0});
    assert(fit != free_by_size_.end());
  }
  const auto [range_bytes, address] = *fit;
  EraseFreeLocked(address, range_bytes);
  if (range_bytes > bytes) InsertFreeLocked(address + bytes, range_bytes - bytes);
  allocated_[address] = {bytes, false};
  BlockOfLocked(address).used += bytes;
  stats_.bytes_in_use += bytes;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  ++stats_.allocations;
  ++stats_.total_allocations;
  return address;
}

Status DeviceArena::AddBlockLocked(size_t min_bytes) {
  size_t size = min_bytes > options_.block_bytes / 2 ? RoundUp(min_bytes, kLargeBlockGranule)
                                                     : options_.block_bytes;
  const size_t room = options_.max_reserved_bytes > stats_.bytes_reserved
                          ? options_.max_reserved_bytes - stats_.bytes_reserved
                          : 0;
  if (size > room) size = RoundUp(min_bytes, kArenaAlignment);
  if (size > room) {
    return Unavailable("the arena's limit of " + std::to_string(options_.max_reserved_bytes) +
                       " bytes leaves " + std::to_string(room));
  }
  GPUOS_ASSIGN_OR_RETURN(uint64_t base, allocator_->Allocate(size));
  if (base % kArenaAlignment != 0) {
    (void)allocator_->Free(base, size);
    return Internal(allocator_name_ + " returned a block that is not " +
                    std::to_string(kArenaAlignment) + "-byte aligned");
  }
  blocks_[base] = {size, 0};
  stats_.bytes_reserved += size;
  ++stats_.blocks;
  InsertFreeLocked(base, size);
  return Status::Ok();
}

void DeviceArena::InsertFreeLocked(uint64_t address, size_t bytes) {
  // Coalesce with free neighbours inside the same block (never across a
  // block boundary: blocks are separate driver allocations).
  auto next = free_by_address_.lower_bound(address);
  if (next != free_by_address_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == address && !blocks_.count(address)) {
      address = prev->first;
      bytes += prev->second;
      EraseFreeLocked(prev->first, prev->second);
    }
  }
  next = free_by_address_.lower_bound(address);
  if (next != free_by_address_.end() && next->first == address + bytes &&
      !blocks_.count(next->first)) {
    bytes += next->second;
    EraseFreeLocked(next->first, next->second);
  }
  free_by_address_[address] = bytes;
  free_by_size_.insert({bytes, address});
}

void DeviceArena::EraseFreeLocked(uint64_t address, size_t bytes) {
  free_by_address_.erase(address);
  free_by_size_.erase({bytes, address});
}

DeviceArena::Block& DeviceArena::BlockOfLocked(uint64_t address) {
  auto it = std::prev(blocks_.upper_bound(address));
  return it->second;
}

Status DeviceArena::Free(uint64_t address) {
  std::lock_guard lock(mutex_);
  auto it = allocated_.find(address);
  if (it == allocated_.end() || it->second.pending) {
    return InvalidArgument("free of device address " + std::to_string(address) +
                           (it == allocated_.end() ? ", which the arena did not allocate"
                                                   : ", which was already freed") +
                           " (a double free or a foreign pointer)");
  }
  if (worker_may_run_) {
    it->second.pending = true;
    pending_.emplace_back(address, last_submission_);
    ++stats_.pending_frees;
    stats_.pending_free_bytes += it->second.bytes;
    return Status::Ok();
  }
  ReleaseLocked(address);
  return Status::Ok();
}

void DeviceArena::ReleaseLocked(uint64_t address) {
  auto it = allocated_.find(address);
  const size_t bytes = it->second.bytes;
  allocated_.erase(it);
  BlockOfLocked(address).used -= bytes;
  stats_.bytes_in_use -= bytes;
  --stats_.allocations;
  InsertFreeLocked(address, bytes);
}

void DeviceArena::SetWorkerMayRun(bool may_run) {
  std::lock_guard lock(mutex_);
  worker_may_run_ = may_run;
}

bool DeviceArena::worker_may_run() const {
  std::lock_guard lock(mutex_);
  return worker_may_run_;
}

size_t DeviceArena::ReleaseDeferred() { return ReleaseCompletedThrough(UINT64_MAX); }

void DeviceArena::NoteSubmission(uint64_t sequence) {
  std::lock_guard lock(mutex_);
  worker_may_run_ = true;
  last_submission_ = std::max(last_submission_, sequence);
}

size_t DeviceArena::ReleaseCompletedThrough(uint64_t sequence) {
  std::lock_guard lock(mutex_);
  size_t released = 0;
  auto keep = pending_.begin();
  for (const auto& [address, tag] : pending_) {
    if (tag > sequence) {
      *keep++ = {address, tag};
      continue;
    }
    stats_.pending_free_bytes -= allocated_.at(address).bytes;
    ReleaseLocked(address);
    ++released;
  }
  pending_.erase(keep, pending_.end());
  stats_.pending_frees = pending_.size();
  stats_.deferred_releases += released;
  return released;
}

Expected<size_t> DeviceArena::Trim() {
  std::lock_guard lock(mutex_);
  if (worker_may_run_) {
    return FailedPrecondition(
        "cannot return device memory to the driver while the worker may run (cuMemFree would "
        "wait for it); trim after the worker has parked");
  }
  size_t returned = 0;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    const uint64_t base = it->first;
    const size_t size = it->second.bytes;
    if (it->second.used != 0) {
      ++it;
      continue;
    }
    GPUOS_RETURN_IF_ERROR(allocator_->Free(base, size));
    EraseFreeLocked(base, size);
    it = blocks_.erase(it);
    stats_.bytes_reserved -= size;
    --stats_.blocks;
    returned += size;
  }
  return returned;
}

ArenaStats DeviceArena::Stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::string DeviceArena::DescribeLocked() const {
  return "holds " + MiB(stats_.bytes_reserved) + " in " + std::to_string(stats_.blocks) +
         " blocks, " + MiB(stats_.bytes_in_use) + " in use, " + MiB(stats_.pending_free_bytes) +
         " awaiting release at the next park";
}

}  // namespace gpuos
