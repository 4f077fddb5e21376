#include "cache_lines.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace gpuos::runtime {
namespace {

constexpr std::uintptr_t kLineBytes = 64;

#if defined(__x86_64__) || defined(__i386__)
bool HasClflushopt() {
  unsigned int a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return (b & (1u << 23)) != 0;  // CPUID.(EAX=7,ECX=0):EBX[23]
}
#endif

}  // namespace

bool SlotFlushRequested() {
  const char* value = std::getenv("GPUOS_SLOT_FLUSH");
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

void FlushCacheLines(const void* begin, std::size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool clflushopt = HasClflushopt();
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(begin) & ~(kLineBytes - 1);
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(begin) + bytes;
  for (std::uintptr_t line = first; line < end; line += kLineBytes) {
    // clflushopt through the assembler (which knows it whatever -march
    // says), run only where CPUID reports it.
    if (clflushopt) {
      asm volatile("clflushopt %0" : "+m"(*reinterpret_cast<volatile char*>(line)));
    } else {
      _mm_clflush(reinterpret_cast<const void*>(line));
    }
  }
#else
  (void)begin;
  (void)bytes;
#endif
}

}  // namespace gpuos::runtime
