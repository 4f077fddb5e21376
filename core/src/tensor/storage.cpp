#include "gpuos/storage.h"

#include <cassert>
#include <string>

namespace gpuos {

Expected<std::shared_ptr<Storage>> Storage::Allocate(std::shared_ptr<DeviceArena> arena,
                                                     size_t bytes, int device) {
  if (arena == nullptr) return InvalidArgument("Storage::Allocate needs an arena, got null");
  if (bytes == 0) {
    return std::shared_ptr<Storage>(new Storage(0, 0, device, StorageOwner::kArena));
  }
  GPUOS_ASSIGN_OR_RETURN(uint64_t address, arena->Allocate(bytes));
  std::shared_ptr<Storage> storage(new Storage(address, bytes, device, StorageOwner::kArena));
  storage->arena_ = std::move(arena);
  return storage;
}

Expected<std::shared_ptr<Storage>> Storage::WrapExternal(ExternalMemory memory) {
  if (memory.address == 0 && memory.bytes != 0) {
    return InvalidArgument("cannot wrap external memory: null address with " +
                           std::to_string(memory.bytes) + " bytes");
  }
  if (memory.address + memory.bytes < memory.address) {
    return InvalidArgument("cannot wrap external memory: address " +
                           std::to_string(memory.address) + " plus " +
                           std::to_string(memory.bytes) + " bytes wraps around");
  }
  if (memory.device < 0) {
    return InvalidArgument("cannot wrap external memory: device ordinal " +
                           std::to_string(memory.device) + " is negative");
  }
  std::shared_ptr<Storage> storage(
      new Storage(memory.address, memory.bytes, memory.device, StorageOwner::kExternal));
  storage->release_ = std::move(memory.release);
  return storage;
}

Storage::~Storage() {
  if (arena_ != nullptr) {
    [[maybe_unused]] Status freed = arena_->Free(address_);
    assert(freed.ok() && "arena storage freed twice");
  }
  if (release_) {
    try {
      release_();
    } catch (...) {
      // A destructor must not throw; the callback broke its contract.
    }
  }
}

}  // namespace gpuos
