#include <cstdlib>

#include "gpuos/device_memory.h"

namespace gpuos {

HostMemoryAllocator::~HostMemoryAllocator() {
  for (const auto& [address, bytes] : live_) std::free(reinterpret_cast<void*>(address));
}

Expected<uint64_t> HostMemoryAllocator::Allocate(size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes > limit_bytes_ - live_bytes_) {
    return Unavailable("host memory allocator limit of " + std::to_string(limit_bytes_) +
                       " bytes reached (" + std::to_string(live_bytes_) + " live, " +
                       std::to_string(bytes) + " requested)");
  }
  const size_t rounded = (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  void* block = std::aligned_alloc(kArenaAlignment, rounded == 0 ? kArenaAlignment : rounded);
  if (block == nullptr)
    return Unavailable("host memory exhausted allocating " + std::to_string(bytes));
  const auto address = reinterpret_cast<uint64_t>(block);
  live_[address] = bytes;
  live_bytes_ += bytes;
  ++total_allocations_;
  return address;
}

Status HostMemoryAllocator::Free(uint64_t address, size_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(address);
  if (it == live_.end() || it->second != bytes) {
    return InvalidArgument("host memory allocator: free of " + std::to_string(address) + " (" +
                           std::to_string(bytes) +
                           " bytes), which is not a live block of that size");
  }
  std::free(reinterpret_cast<void*>(address));
  live_bytes_ -= bytes;
  live_.erase(it);
  return Status::Ok();
}

size_t HostMemoryAllocator::live_blocks() const {
  std::lock_guard lock(mutex_);
  return live_.size();
}

size_t HostMemoryAllocator::live_bytes() const {
  std::lock_guard lock(mutex_);
  return live_bytes_;
}

size_t HostMemoryAllocator::total_allocations() const {
  std::lock_guard lock(mutex_);
  return total_allocations_;
}

}  // namespace gpuos
