// Content hashes used to identify sources, cache keys and stored blobs.
//
// XXH3-128 rendered as 32 lowercase hex digits. Not cryptographic: it detects
// corruption and deduplicates content; it does not authenticate it.
#pragma once

#include <string>
#include <string_view>

namespace gpuos {

// 32 hex digits of XXH3-128 over `bytes`.
std::string ContentHash(std::string_view bytes);

// Incremental form for keys built from several parts. Each part is length-
// prefixed so ("ab","c") and ("a","bc") hash differently.
class ContentHasher {
 public:
  ContentHasher();
  ~ContentHasher();
  ContentHasher(const ContentHasher&) = delete;
  ContentHasher& operator=(const ContentHasher&) = delete;

  ContentHasher& Add(std::string_view part);
  std::string Finish();

 private:
  void* state_;  // XXH3_state_t*, kept opaque so xxhash.h stays private.
};

}  // namespace gpuos
