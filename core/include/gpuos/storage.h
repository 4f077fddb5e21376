// The memory behind tensors: one device range shared by every view of it.
//
// A Storage either comes from a DeviceArena (freed back to the arena when the
// last reference goes; deferred while the worker may run) or wraps memory
// owned by someone else (a PyTorch tensor, a cudaMalloc'ed buffer) without
// copying; a wrapped storage calls its release callback exactly once when the
// last reference goes, or never if none was given.
//
// Lifetime contract with the runtime: a submitted task keeps a reference to
// the storages it touches until it has completed, so neither the arena free
// nor the release callback can happen while the device still uses the memory.
//
// Thread safety: immutable after creation; share through shared_ptr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "gpuos/device_memory.h"
#include "gpuos/status.h"

namespace gpuos {

enum class StorageOwner {
  kArena,     // allocated by gpuos from a DeviceArena
  kExternal,  // wrapped; owned by another library
};

// Memory owned elsewhere, to be wrapped.
struct ExternalMemory {
  uint64_t address = 0;  // device address of the first byte
  size_t bytes = 0;      // size of the range the views may touch
  int device = 0;        // CUDA device ordinal the memory lives on
  // Runs once when the last view is dropped (e.g. drops a reference to the
  // owning PyTorch tensor). May be empty. Must not throw; exceptions are
  // swallowed because it runs from a destructor.
  std::function<void()> release;
};

class Storage {
 public:
  // `bytes` from `arena` (any bytes, 0 included: a zero-byte storage has
  // address 0 and takes nothing from the arena).
  static Expected<std::shared_ptr<Storage>> Allocate(std::shared_ptr<DeviceArena> arena,
                                                     size_t bytes, int device = 0);

  // Wraps `memory` without copying. InvalidArgument for a null address with
  // a non-zero size, an address range that wraps around, or a negative
  // device. On error `memory.release` is NOT called (the caller keeps
  // ownership).
  static Expected<std::shared_ptr<Storage>> WrapExternal(ExternalMemory memory);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  uint64_t address() const { return address_; }
  size_t nbytes() const { return bytes_; }
  int device() const { return device_; }
  StorageOwner owner() const { return owner_; }

 private:
  Storage(uint64_t address, size_t bytes, int device, StorageOwner owner)
      : address_(address), bytes_(bytes), device_(device), owner_(owner) {}

  uint64_t address_;
  size_t bytes_;
  int device_;
  StorageOwner owner_;
  std::shared_ptr<DeviceArena> arena_;  // kArena with bytes > 0
  std::function<void()> release_;       // kExternal
};

}  // namespace gpuos
