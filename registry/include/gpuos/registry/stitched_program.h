// Stitched programs: a whole task program compiled into one custom operator
// whose one task runs every stage of the program on many blocks of the
// persistent worker, with code specialized for the program's shapes and
// strides and one counter per stage instead of a task per operator
// (docs/stitching.md; the device side is gpuos/device/stitch.cuh).
//
// The operator's task takes an *address table* (runtime::TaskGraph::
// AddAddressTableTask): its descriptor is that of `counter_bytes` of zeroed
// device memory the stages synchronize through (their counters, then the
// slots of flagged intermediates; only the address is read), and address
// b of the table is buffer b of the program.
// The caller guarantees, at every run: each buffer's address is a multiple
// of 16 bytes; runs of one stitched program do not overlap (start the next
// after the previous finished); all `counter_bytes` are zero before the
// first run and after a run that failed (a run that succeeds leaves them as
// the next run reads them: the counters count on over the runs, and each
// flagged value carries the number of the run that stored it).
//
// Elementwise stages compose their operators' own code (their `body` and
// `device_code`, through FuseElementwise), so a new version of `mul` gives a
// new stitched operator. Matrix products, layer_norm / rms_norm and
// softmax / log_softmax run stage code of the device headers
// (stitch_matmul.cuh, stitch_rows.cuh) that computes what the standard
// operators of those names compute: the caller must stitch only tasks whose
// operator is the standard one (the PyTorch frontend checks the served
// version against the built-in packs).
//
// Pure and deterministic: equal descriptions give byte-equal specs with
// equal names. Thread safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuos/dtype.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry {

// Names of stitched operators start with this, followed by 16 hex digits.
inline constexpr std::string_view kStitchedOperatorPrefix = "stitched_";
// Buffers a stitched program may have (the table has one more entry).
inline constexpr std::uint32_t kMaxStitchedBuffers = 255;

// A strided view of a buffer: element `offset` of the buffer is the view's
// element (0, ..., 0). Sizes and strides in elements.
struct StitchView {
  std::uint32_t buffer = 0;
  long long offset = 0;
  DType dtype = DType::kF32;
  std::vector<long long> sizes;
  std::vector<long long> strides;
};

struct StitchTask {
  // The operator the task runs, as the runtime serves it (not owned; must
  // outlive the StitchProgram call). Elementwise operators (a fused one
  // too), and by name: addmm, baddbmm, fused_addmm, matmul, bmm, layer_norm,
  // rms_norm, softmax, log_softmax, cat.
  const OperatorSpec* op = nullptr;
  DType dtype = DType::kF32;
  std::vector<StitchView> tensors;  // inputs, then outputs, as `op` declares them
  // Attribute name -> value as canonical text; a missing one takes its default.
  std::vector<std::pair<std::string, std::string>> attributes;
};

struct StitchDesc {
  std::uint32_t num_buffers = 0;
  std::vector<StitchTask> tasks;  // in an order that respects their dependencies
  // Blocks of the worker the tiles spread over (tiles per stage are chosen
  // for it; any number of blocks runs the result correctly).
  unsigned int worker_blocks = 132;
  // Whether three consecutive tasks scores = q x kt (bmm, or baddbmm with
  // beta 0), probs = softmax(scores), out = probs x v (bmm) become one
  // attention stage (stitch_attention.cuh) where its shapes fit: the
  // scores and probabilities are still stored unless nothing else reads
  // them (drop_unread_intermediates).
  bool fuse_attention = true;
  // Whether an attention stage whose shapes fit runs its two products on
  // the tensor cores (stitch_attention_mma.cuh: three TF32 products each,
  // about f32's precision); false: on the CUDA cores (an A/B switch).
  bool attention_mma = true;
  // Buffers that only the program's own tasks read (intermediates): a
  // product's output in one of them may become a flagged intermediate
  // (docs/stitching.md, "Flagged intermediates"), whose values carry their
  // own readiness, so that the stages reading it need not wait for its
  // count. Each below num_buffers.
  std::vector<std::uint32_t> internal_buffers;
  bool flag_intermediates = true;  // false: none (an A/B switch)
  // Whether an attention stage whose scores or probabilities lie in
  // internal_buffers, read by no other stage, leaves them unstored (they
  // stay in the tile's shared memory); false: always stored (an A/B switch).
  bool drop_unread_intermediates = true;
};

// One stage of the result (diagnostics and tests).
struct StitchStage {
  std::string kind;        // "matmul", "rows", "elementwise", "attention"
  std::string op;          // the task's operator ("attention": the three tasks')
  std::uint32_t task = 0;  // the (first) task it runs
  std::uint32_t first_tile = 0;
  std::uint32_t tiles = 0;
  std::vector<std::uint32_t> waits;  // stages it waits for (a transitive reduction)
  bool flagged_output = false;       // its output is a flagged intermediate
  // An attention stage's: whether it stores its scores and probabilities
  // (StitchDesc::drop_unread_intermediates).
  bool stores_scores = true, stores_probs = true;
  // An attention stage's: whether its products run on the tensor cores
  // (StitchDesc::attention_mma).
  bool tensor_cores = false;
};

struct StitchedProgram {
  // kind custom, dtypes [u8], one output `table`, no attributes: add its
  // task with TaskGraph::AddAddressTableTask, `tiles` work items in `tiles`
  // tiles.
  OperatorSpec op;
  std::uint32_t tiles = 0;
  std::uint32_t table_entries = 0;  // num_buffers + 1: the counters and the buffers
  // The counter buffer's bytes (zeroed before the first run): a 64-bit
  // counter per stage, then the task's (at task_counter_offset), each on a
  // line of its own, then the flagged intermediates' slots (stitch.cuh).
  std::size_t counter_bytes = 0;
  std::size_t task_counter_offset = 0;
  std::vector<StitchStage> stages;
};

// Whether operator `name` has stage code written after the standard
// operator of that name (products, row operators, cat) rather than composed
// from the served operator's own code (elementwise): a caller stitches such
// a task only when it runs the standard version.
bool HasOwnStageCode(std::string_view name);

// The stitched operator of `desc`. Errors: FailedPrecondition naming the
// task, its operator and why it cannot be stitched (an operator or dtype
// without stage code: every tensor must be f32; shapes the stage code does
// not take: rows longer than 1024, matrix products of rank other than 2
// and 3, an elementwise task that broadcasts its output, ...), and when
// the program needs more tiles or buffers than a task holds;
// InvalidArgument for a malformed description (a null operator, a tensor
// count that differs from the operator's, a buffer or an internal buffer
// out of range, a view with a negative size).
Expected<StitchedProgram> StitchProgram(const StitchDesc& desc);

}  // namespace gpuos::registry
