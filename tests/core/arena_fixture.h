// A DeviceArena over host memory with 1 MiB blocks and no limit, for the
// tensor-memory tests (no GPU).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "gpuos/device_memory.h"

namespace gpuos::testing {

constexpr std::size_t kArenaBlock = std::size_t{1} << 20;

struct ArenaFixture : ::testing::Test {
  std::shared_ptr<HostMemoryAllocator> host = std::make_shared<HostMemoryAllocator>();
  std::shared_ptr<DeviceArena> arena =
      std::make_shared<DeviceArena>(host, ArenaOptions{kArenaBlock, SIZE_MAX});

  std::uint64_t Alloc(std::size_t bytes) {
    auto a = arena->Allocate(bytes);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? *a : 0;
  }
};

}  // namespace gpuos::testing
