// The runtime's dispatch table on the host (docs/live-update.md): logical
// operator ids, which task graphs carry, and for each one the slot of its
// active version in the active kernel image.
//
// A logical id names (operator, dtype, out_dtype, interface): the interface
// is what a task graph encodes when a task is added (kind, tensors,
// attributes). Flipping an operator to another version with the same
// interface keeps its ids, so graphs built earlier run the new version; a
// version with another interface gets new ids, and the old ones stop
// resolving (their slot becomes 0: Submit rejects such graphs with a clear
// message instead of running them with attributes encoded for another
// version). Ids are never reused.
//
// Not thread safe: the runtime guards it with its mutex. Every change is
// transactional: on error nothing changes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gpuos/registry/kernel_image.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/runtime/runtime.h"
#include "gpuos/status.h"

namespace gpuos::runtime {

// What a task graph depends on when it encodes a task of `spec`: kind,
// tensors, attributes (with defaults). Equal strings: interchangeable.
std::string OperatorInterface(const registry::OperatorSpec& spec);

class OperatorTable {
 public:
  // Makes `image` the active image. `specs` are the operator versions it was
  // built from; they must outlive every use of the table's OperatorRefs (the
  // runtime keeps every spec set it ever loaded). For each instantiation the
  // active version is `active[op]` when the image has it, else the newest
  // in the image. Errors: Internal when an entry has no spec,
  // FailedPrecondition when logical ids run out (kMaxLogicalOps).
  Status Load(const registry::KernelImage& image,
              const std::vector<const registry::OperatorSpec*>& specs,
              const std::map<std::string, registry::SemVer>& active = {});

  // Activates `version` of `op` for every instantiation of `op` the image
  // has in that version; instantiations that exist only in other versions
  // (a version may add or drop dtypes) keep theirs. Errors: NotFound (op not
  // in the image), FailedPrecondition (no instantiation has that version: an
  // epoch switch is needed). Returns whether any slot changed.
  Expected<bool> Activate(const std::string& op, const registry::SemVer& version);

  // The active version of (op, dtype, out_dtype); NotFound names what the
  // image has.
  Expected<OperatorRef> Resolve(const std::string& op, DType dtype,
                                std::optional<DType> out_dtype) const;
  // The ref of a logical id (also of stale ones, whose slot is 0); nullptr
  // for ids never given out.
  const OperatorRef* ByLogical(std::uint32_t logical) const;
  // The slot `logical` dispatches to now; 0 when it does not resolve.
  std::uint32_t Slot(std::uint32_t logical) const {
    return logical != 0 && logical <= t_.refs.size() ? t_.refs[logical - 1].slot : 0;
  }
  std::size_t size() const { return t_.refs.size(); }  // ids given out
  // logical id -> slot, kMaxLogicalOps entries, for the image's alias table.
  std::vector<unsigned int> AliasTable() const;

  // The active version of every operator in the image, by name: the one last
  // asked for (Load's `active`, Activate) where the image has it, else the
  // newest version any instantiation is bound to.
  std::map<std::string, registry::SemVer> ActiveVersions() const;
  // Versions of `op` in the image, oldest first (empty when absent).
  std::vector<registry::SemVer> VersionsInImage(const std::string& op) const;
  bool HasVersion(const std::string& op, const registry::SemVer& version) const;
  // A one-line explanation for a logical id whose slot is 0.
  std::string Unresolvable(std::uint32_t logical) const;

 private:
  using Key = std::tuple<std::string, int, int>;  // op, dtype, out_dtype or -1
  struct Candidate {
    std::uint32_t slot = 0;
    const registry::OperatorSpec* spec = nullptr;
  };
  struct Tables {
    std::vector<OperatorRef> refs;           // index = logical id - 1
    std::vector<std::string> interfaces;     // per ref
    std::map<Key, std::uint32_t> id_by_key;  // the live id of each key
    // Every instantiation in the image: key -> version -> slot and spec.
    std::map<Key, std::map<registry::SemVer, Candidate>> candidates;
    // The version last asked for per operator (Load's `active`, Activate).
    std::map<std::string, registry::SemVer> requested;
  };
  // Points `key` at `version` in `tables` (allocating an id when the
  // interface changes).
  static Status Bind(Tables& tables, const Key& key, const registry::SemVer& version);

  Tables t_;
};

}  // namespace gpuos::runtime
