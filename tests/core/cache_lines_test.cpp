// cache_lines.h: the switch's parsing, and that evicting lines keeps what
// they hold (the flush is a write-back, never a loss) at any alignment.
#include "cache_lines.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

namespace gpuos::runtime {
namespace {

TEST(CacheLinesTest, SlotFlushIsRequestedByAnyValueButZero) {
  const char* saved = std::getenv("GPUOS_SLOT_FLUSH");
  const std::string restore = saved != nullptr ? saved : "";
  unsetenv("GPUOS_SLOT_FLUSH");
  EXPECT_FALSE(SlotFlushRequested());
  setenv("GPUOS_SLOT_FLUSH", "0", 1);
  EXPECT_FALSE(SlotFlushRequested());
  setenv("GPUOS_SLOT_FLUSH", "", 1);
  EXPECT_FALSE(SlotFlushRequested());
  setenv("GPUOS_SLOT_FLUSH", "1", 1);
  EXPECT_TRUE(SlotFlushRequested());
  if (saved != nullptr) {
    setenv("GPUOS_SLOT_FLUSH", restore.c_str(), 1);
  } else {
    unsetenv("GPUOS_SLOT_FLUSH");
  }
}

TEST(CacheLinesTest, FlushedLinesKeepTheirBytes) {
  std::vector<unsigned char> bytes(1000);
  std::iota(bytes.begin(), bytes.end(), 0);
  const std::vector<unsigned char> expected = bytes;
  // Unaligned starts and lengths, one byte, nothing at all, the whole buffer.
  FlushCacheLines(bytes.data() + 3, 130);
  FlushCacheLines(bytes.data() + 999, 1);
  FlushCacheLines(bytes.data(), 0);
  FlushCacheLines(bytes.data(), bytes.size());
  EXPECT_EQ(bytes, expected);
  bytes[500] = 7;  // still writable after its line was evicted
  FlushCacheLines(bytes.data() + 500, 1);
  EXPECT_EQ(bytes[500], 7);
}

}  // namespace
}  // namespace gpuos::runtime
