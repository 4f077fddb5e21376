// DropUnreadAttentionStores (stitch_internal.h): the scores and the
// probabilities that only their own attention stage reads stay on chip.
#include <cstddef>
#include <vector>

#include "stitch_internal.h"

namespace gpuos::registry::jit {
namespace {

// Whether a stage other than `owner` reads any byte of `range`.
bool ReadElsewhere(const std::vector<Access>& accesses, std::size_t owner, const Range& range) {
  for (std::size_t s = 0; s < accesses.size(); ++s) {
    if (s == owner) continue;
    for (const Range& r : accesses[s].reads) {
      if (Overlaps(r, range)) return true;
    }
  }
  return false;
}

}  // namespace

void DropUnreadAttentionStores(const StitchDesc& desc, std::vector<Stage>& stages,
                               std::vector<Access>& accesses) {
  const std::vector<bool> internal = InternalBufferFlags(desc);
  for (std::size_t p = 0; p < stages.size(); ++p) {
    if (stages[p].kind != Stage::Kind::kAttention) continue;
    AttentionStage& at = stages[p].attention;
    std::vector<Range>& writes = accesses[p].writes;
    if (writes.size() != 3) continue;  // scores, probabilities, out (AddAttention)
    const bool scores_unread = internal[writes[0].buffer] && !ReadElsewhere(accesses, p, writes[0]);
    const bool probs_unread = internal[writes[1].buffer] && !ReadElsewhere(accesses, p, writes[1]);
    at.store_scores = !scores_unread;
    at.store_probs = !probs_unread;
    if (probs_unread) writes.erase(writes.begin() + 1);
    if (scores_unread) writes.erase(writes.begin());
  }
}

}  // namespace gpuos::registry::jit
