// FlagIntermediates (stitch_internal.h): which product outputs become
// flagged intermediates, where their slots go, and the reads that stop
// waiting for their stage.
#include <cstddef>
#include <vector>

#include "stitch_internal.h"

namespace gpuos::registry::jit {
namespace {

constexpr long long kValueBytes = 4;  // f32: flagged values are (stitch.cuh, StoreFlagged)

// Whether stage kind `kind` reads a flagged `role` (its stage code does).
bool TakesFlags(Stage::Kind kind, ReadRole role) {
  switch (role) {
    case ReadRole::kProductA:
    case ReadRole::kResidual:
      return kind == Stage::Kind::kMatmul;
    case ReadRole::kRowsIn:
      return kind == Stage::Kind::kRows;
    case ReadRole::kOther:
      return false;
  }
  return false;
}

// The product operand of stage `stage` that a read of `role` names.
Strided3* OperandOf(Stage& stage, ReadRole role) {
  return role == ReadRole::kProductA ? &stage.matmul.a : &stage.matmul.r;
}

// Whether every element of the product's output range is its own: dense
// row-major [batch, m, n] from out.offset.
bool DenseOutput(const MatmulStage& mm) {
  return mm.out.s2 == 1 && (mm.m == 1 || mm.out.s1 == mm.n) &&
         (mm.batch == 1 || mm.out.s0 == mm.m * mm.n);
}

}  // namespace

std::size_t FlagIntermediates(const StitchDesc& desc, std::vector<Stage>& stages,
                              std::vector<Access>& accesses, std::size_t first_slot) {
  const std::vector<bool> internal = InternalBufferFlags(desc);
  std::size_t used = 0;
  for (std::size_t p = 0; p < stages.size(); ++p) {
    if (stages[p].kind != Stage::Kind::kMatmul) continue;
    MatmulStage& mm = stages[p].matmul;
    const long long numel = mm.batch * mm.m * mm.n;
    if (mm.out.flagged || !internal[mm.out.buffer] || !DenseOutput(mm) ||
        numel > kMaxFlaggedValues || accesses[p].writes.empty() ||
        accesses[p].writes[0].view.dtype != DType::kF32) {
      continue;
    }
    const std::uint32_t buffer = mm.out.buffer;
    const long long begin = mm.out.offset * kValueBytes;
    const long long end = (mm.out.offset + numel) * kValueBytes;
    bool ok = true;
    for (std::size_t s = 0; s < stages.size() && ok; ++s) {
      for (const Range& w : accesses[s].writes) {
        if (s != p && Overlaps(w, buffer, begin, end)) ok = false;
      }
      for (const Range& r : accesses[s].reads) {
        if (!Overlaps(r, buffer, begin, end)) continue;
        ok = ok && s > p && TakesFlags(stages[s].kind, r.role) && r.begin >= begin && r.end <= end;
      }
    }
    if (!ok) continue;
    const long long base = static_cast<long long>(first_slot + used);
    for (std::size_t s = p + 1; s < stages.size(); ++s) {
      std::vector<Range>& reads = accesses[s].reads;
      for (std::size_t i = 0; i < reads.size();) {
        if (!Overlaps(reads[i], buffer, begin, end)) {
          ++i;
          continue;
        }
        const long long shift = base - mm.out.offset;
        if (reads[i].role == ReadRole::kRowsIn) {
          RowView& in = stages[s].rows.in;
          in.offset += shift;
          in.flagged = true;
        } else {
          Strided3* operand = OperandOf(stages[s], reads[i].role);
          operand->offset += shift;
          operand->flagged = true;
        }
        reads.erase(reads.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    mm.out.offset = base;
    mm.out.flagged = true;
    used += (static_cast<std::size_t>(numel) + kSlotsPerLine - 1) / kSlotsPerLine * kSlotsPerLine;
  }
  return used;
}

}  // namespace gpuos::registry::jit
