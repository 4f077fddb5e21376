// Evicting the CPU's copies of mapped lines that the worker is about to read
// (an A/B switch, session 35; docs/runtime.md, "Lines the CPU just wrote").
//
// The worker reads the host's tail, ring slot and gate word over PCIe. The
// phase timing of session 35 found the poller's read that shows a new tail
// taking about 2.6 us where an idle poll takes 1.3: the CPU had just written
// that line, which then sits modified in its cache. GPUOS_SLOT_FLUSH=1 makes
// Submit and OpenGate write such lines back and evict them right after
// storing them, so that the device's read finds them in memory.
#pragma once

#include <cstddef>

namespace gpuos::runtime {

// Whether GPUOS_SLOT_FLUSH is set to something other than "0" (read at each
// call; the runtime reads it once, when it is created).
bool SlotFlushRequested();

// Writes back and evicts the cache lines of [begin, begin + bytes)
// (clflushopt where the CPU has it, clflush otherwise; nothing on other
// architectures). Unfenced: the flushes may complete after later stores,
// which only means that a device read in between still finds the line in
// the CPU's cache (coherent either way).
void FlushCacheLines(const void* begin, std::size_t bytes);

}  // namespace gpuos::runtime
