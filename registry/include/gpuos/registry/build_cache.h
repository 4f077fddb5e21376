// Where the JIT build service keeps compiled artifacts (LTO-IR of single
// operators, linked cubins of whole kernel images).
//
// Keys are content hashes computed by the build service from everything that
// determines the bytes: sources, options, architecture, NVRTC and nvJitLink
// versions, and the runtime ABI version (see jit docs). An entry is immutable
// once written; writing the same key again replaces a corrupt entry.
//
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "gpuos/status.h"

namespace gpuos::registry {

struct BuildArtifact {
  std::string kind;   // "ltoir" or "cubin"
  std::string arch;   // "sm_90", "sm_90a", ...
  std::string bytes;  // the artifact itself
};

class BuildCache {
 public:
  virtual ~BuildCache() = default;

  // The artifact stored under `key`, or nullopt when there is none. An entry
  // whose bytes fail their stored hash is reported as absent (and dropped or
  // marked by the implementation), never returned: the caller rebuilds.
  virtual Expected<std::optional<BuildArtifact>> Get(const std::string& key) = 0;

  // Stores `artifact` under `key`, replacing any entry with that key.
  virtual Status Put(const std::string& key, const BuildArtifact& artifact) = 0;
};

// A cache in process memory, for tests and for runs without a repository.
class InMemoryBuildCache final : public BuildCache {
 public:
  Expected<std::optional<BuildArtifact>> Get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::optional<BuildArtifact>();
    return std::optional<BuildArtifact>(it->second);
  }
  Status Put(const std::string& key, const BuildArtifact& artifact) override {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[key] = artifact;
    return Status::Ok();
  }
  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, BuildArtifact> entries_;
};

}  // namespace gpuos::registry
