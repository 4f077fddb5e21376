#include "gpuos/content_hash.h"

#include <cstdint>
#include <cstdio>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace gpuos {
namespace {

std::string ToHex(XXH128_hash_t h) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return std::string(buf, 32);
}

}  // namespace

std::string ContentHash(std::string_view bytes) {
  return ToHex(XXH3_128bits(bytes.data(), bytes.size()));
}

ContentHasher::ContentHasher() : state_(XXH3_createState()) {
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

ContentHasher::~ContentHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

ContentHasher& ContentHasher::Add(std::string_view part) {
  auto* s = static_cast<XXH3_state_t*>(state_);
  const std::uint64_t size = part.size();
  XXH3_128bits_update(s, &size, sizeof(size));
  XXH3_128bits_update(s, part.data(), part.size());
  return *this;
}

std::string ContentHasher::Finish() {
  return ToHex(XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_)));
}

}  // namespace gpuos
