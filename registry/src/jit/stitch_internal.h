// Stages of a stitched program between planning (stitch_plan.cpp: tasks ->
// stages with shapes, tiles and waits) and code generation
// (stitch_codegen.cpp: stages -> CUDA C++). Internal to gpuos::jit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuos/dtype.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/registry/stitched_program.h"
#include "gpuos/status.h"
#include "source_writer.h"

namespace gpuos::registry::jit {

// A tensor of a matrix product seen as [batch, rows, columns]: element
// (i, j, k) is at offset + i * s0 + j * s1 + k * s2 of its buffer.
// Flagged (FlagIntermediates): the elements are 8-byte slots of the
// stitched task's counter buffer, `offset` counted in slots from its start,
// each holding a value and the run that stored it; `buffer` is then unused.
struct Strided3 {
  std::uint32_t buffer = 0;
  long long offset = 0;
  long long s0 = 0, s1 = 0, s2 = 0;
  bool flagged = false;
};

// A per-column vector (layer_norm's weight and bias).
struct Strided1 {
  std::uint32_t buffer = 0;
  long long offset = 0;
  long long stride = 0;
};

struct MatmulStage {
  long long batch = 1, m = 0, n = 0, k = 0;
  Strided3 a;  // [batch, m, k]
  Strided3 b;  // [batch, k, n]
  bool bias = false;
  Strided3 c;  // [batch, m, n], 0 strides where it broadcasts
  double alpha = 1.0, beta = 0.0;
  int norm = 0;  // 0, or 1 + the prologue's activation
  double eps = 1e-5;
  Strided1 norm_weight, norm_bias;
  int activation = 0;
  bool residual = false;
  Strided3 r;  // [batch, m, n]
  Strided3 out;
  // Tiling (stitch_matmul.cuh).
  bool k_fast = false;
  int vec = 1;
  int bm = 1, bn = 8, kg = 1;
  bool prefetch_b = false;
  bool bias_ready = false;  // no stage writes c
};

// A view of rows: the last dimension is the row.
struct RowView {
  std::uint32_t buffer = 0;
  long long offset = 0;
  std::vector<long long> lead_sizes;  // dimensions before the row
  std::vector<long long> lead_strides;
  long long element_stride = 1;  // along the row
  bool flagged = false;          // as Strided3::flagged
};

struct RowsStage {
  int kind = 0;  // stitch::RowKind: 0 layer_norm, 1 rms_norm, 2 softmax, 3 log_softmax
  long long rows = 0, length = 0;
  int rows_per_tile = 8;
  RowView in, out;
  Strided1 weight, bias;
  double eps = 1e-5;
  int activation = 0;
  bool parameters_ready = false;  // no stage writes weight or bias
};

// An elementwise stage over out's shape: every tensor's strides over out's
// dimensions (0 where it broadcasts).
struct ElementwiseView {
  std::uint32_t buffer = 0;
  long long offset = 0;
  std::vector<long long> strides;  // one per dimension of `sizes`
};
struct ElementwiseStage {
  OperatorSpec spec;  // a fused elementwise spec: inputs in0.., output out, no attributes
  std::vector<long long> sizes;
  std::vector<ElementwiseView> inputs;
  ElementwiseView out;
  long long numel = 0;
  int per_thread = 1;  // elements per thread per tile
};

// Three tasks as one stage (stitch_attention.cuh): scores = alpha * (q x
// kt), probs = softmax(scores) along the last dimension, out = probs x v.
struct AttentionStage {
  long long batch = 1, m = 0, n = 0, d = 0, dv = 0;
  Strided3 q;              // [batch, m, d]
  Strided3 kt;             // [batch, d, n]: keys [0, kt_split)
  Strided3 kt2;            // keys [kt_split, n), key index counted from kt_split
  long long kt_split = 0;  // n: one part
  Strided3 v;              // [batch, n, dv]: keys [0, v_split)
  Strided3 v2;             // keys [v_split, n), counted from v_split
  long long v_split = 0;
  Strided3 scores;  // [batch, m, n]
  Strided3 probs;   // [batch, m, n]
  Strided3 out;     // [batch, m, dv]
  double alpha = 1.0;
  // Tiling (stitch_attention.cuh).
  int bm = 1, split = 1, vec = 1;
  // On the tensor cores (stitch_attention_mma.cuh; split unused there).
  bool mma = false;
  // Whether the scores and the probabilities are stored (false: nothing
  // outside the stage reads them; DropUnreadAttentionStores).
  bool store_scores = true, store_probs = true;
};

struct Stage {
  enum class Kind { kMatmul, kRows, kElementwise, kAttention };
  Kind kind = Kind::kMatmul;
  std::string op;
  std::uint32_t task = 0;
  MatmulStage matmul;
  RowsStage rows;
  ElementwiseStage elementwise;
  AttentionStage attention;
  std::uint32_t tiles = 1;
  std::uint32_t first_tile = 0;
  std::vector<std::uint32_t> waits;
};

// 8-byte slots (a 64-bit counter, a flagged value) in one 128-byte line of
// the counter buffer: each stage counter takes a line, and flagged values
// start on one.
inline constexpr std::size_t kSlotsPerLine = 16;
// The most values a flagged intermediate holds (FlagIntermediates): each
// reader polls its values one 8-byte slot at a time; measured up to 2048
// (mlp_microbatch at batch 8, docs/stitching.md).
inline constexpr long long kMaxFlaggedValues = 1 << 14;

// How a stage reads a byte range of a buffer: the reads whose code can
// take flagged slots (FlagIntermediates) are named.
enum class ReadRole { kOther, kProductA, kResidual, kRowsIn };

// Bytes [begin, end) of a buffer that a view may touch, and the view.
struct Range {
  std::uint32_t buffer = 0;
  long long begin = 0, end = 0;
  StitchView view;
  ReadRole role = ReadRole::kOther;
};
// What a stage reads and writes.
struct Access {
  std::vector<Range> reads, writes;
};

// Whether `r`'s bytes meet [begin, end) of `buffer` (byte ranges only; the
// planner's own test also proves strided views disjoint).
inline bool Overlaps(const Range& r, std::uint32_t buffer, long long begin, long long end) {
  return r.buffer == buffer && r.begin < end && begin < r.end;
}
inline bool Overlaps(const Range& a, const Range& b) {
  return Overlaps(a, b.buffer, b.begin, b.end);
}

// desc.internal_buffers as one flag per buffer.
// REQUIRES: every entry below desc.num_buffers (StitchProgram checks).
inline std::vector<bool> InternalBufferFlags(const StitchDesc& desc) {
  std::vector<bool> internal(desc.num_buffers, false);
  for (std::uint32_t b : desc.internal_buffers) internal[b] = true;
  return internal;
}

// Flagged intermediates (docs/stitching.md, "Flagged intermediates"): the
// output of a product stage that only later product stages (as a or the
// residual) and row stages (as their input) read, and that lies in one of
// desc.internal_buffers (nothing outside the program reads it), moves to
// slots of the counter buffer from slot `first_slot` on, where each value
// carries the run that stored it; its readers poll the values instead of
// waiting for the stage's count, so their reads of it leave `accesses`
// (no wait). Requires the producer's output f32, dense (every element in
// its range written by it), of at most kMaxFlaggedValues values and written
// by no other stage, and every read of that range by a named role, inside
// it, in a later stage. Returns the slots used (whole lines).
// REQUIRES: every desc.internal_buffers entry below desc.num_buffers
// (StitchProgram checks).
std::size_t FlagIntermediates(const StitchDesc& desc, std::vector<Stage>& stages,
                              std::vector<Access>& accesses, std::size_t first_slot);

// Unread intermediates of attention stages: an attention stage's scores
// or probabilities (its accesses' writes 0 and 1, as the planner lists
// them) lie in one of desc.internal_buffers and no other stage reads any
// byte of their range: the stage keeps them on chip (store_scores /
// store_probs false) and the write leaves `accesses` (nothing waits for
// it).
// REQUIRES: every desc.internal_buffers entry below desc.num_buffers.
void DropUnreadAttentionStores(const StitchDesc& desc, std::vector<Stage>& stages,
                               std::vector<Access>& accesses);

// An attention stage's keys or values (`operand`, [batch, rows, columns]
// with `sizes`, the keys along `key_axis`) read from the inputs of the cat
// that wrote them, so that the stage waits for what the cat copies, not
// for the cat (a decode step: the cache needs no wait, the new row its
// product's). Found when the last task before task `consumer` writing the
// operand's buffer is a cat, no task in between writes the cat's inputs'
// buffers, and the keys come from at most two of its inputs, each part a
// strided view (checked element by element, up to 2^20 elements).
struct CatSources {
  Strided3 first;   // keys [0, split)
  Strided3 second;  // keys [split, n), counted from split (first when split == n)
  long long split = 0;
  std::vector<StitchView> views;  // the parts as views: what the stage reads
};
std::optional<CatSources> ReadThroughCat(const StitchDesc& desc, std::size_t consumer,
                                         const Strided3& operand, const long long sizes[3],
                                         int key_axis);

// The stitched operator's device_code and body for `stages` (tiles and
// waits set); `virtual_file` names the code in its #line directives.
using StitchCode = GeneratedCode;
StitchCode GenerateStitchCode(const std::vector<Stage>& stages, std::uint32_t total_tiles,
                              const std::string& virtual_file);

// The lowest and highest element offsets a strided view of `rank`
// dimensions may touch (a negative stride extends it downwards).
struct ElementBounds {
  long long low = 0, high = 0;
};
ElementBounds BoundsOf(long long offset, const long long* sizes, const long long* strides,
                       std::size_t rank);

// `value` as a C++ double literal that reads back exactly.
std::string DoubleLiteral(double value);

// Dimensions of `sizes` with `strides`, size-1 dimensions dropped and
// neighbours merged where the outer stride is the inner one times its size:
// two views with equal Coalesce name the same elements in the same order.
struct Dims {
  std::vector<long long> sizes, strides;
  bool operator==(const Dims&) const = default;
};
Dims Coalesce(const std::vector<long long>& sizes, const std::vector<long long>& strides);

}  // namespace gpuos::registry::jit
