// StitchProgram: tasks -> stages (shapes as [batch, rows, columns] products,
// rows, elementwise views), tiles per stage, the waits between stages from
// the byte ranges the stages read and write, then the operator spec
// (stitch_codegen.cpp writes its code).
#include <algorithm>
#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "gpuos/content_hash.h"
#include "gpuos/device/abi.h"
#include "gpuos/registry/codegen.h"
#include "gpuos/registry/fused_elementwise.h"
#include "gpuos/registry/stitched_program.h"
#include "stitch_internal.h"

namespace gpuos::registry {
namespace {

using jit::Access;
using jit::AttentionStage;
using jit::ElementwiseStage;
using jit::ElementwiseView;
using jit::MatmulStage;
using jit::Range;
using jit::ReadRole;
using jit::RowsStage;
using jit::RowView;
using jit::Stage;
using jit::Strided1;
using jit::Strided3;

constexpr std::string_view kHashFormat = "gpuos stitched program 1";
constexpr std::string_view kVirtualFilePrefix = "stitched:";
// The worker's block (stitched stage code is written for it: stitch.cuh).
constexpr int kThreads = static_cast<int>(device::kWorkerThreads);
constexpr long long kScratchBytes = device::kWorkerScratchBytes;
constexpr long long kMaxRowLength = 1024;  // 32 values a lane in registers
constexpr long long kFewRows = 8;          // rows a kKFast tile holds
// The most bytes of b a few-rows product tile reads: past it, a stage takes
// more tiles than TargetTiles() (each tile is a block that loads its part
// of b in about one round trip; 64 KB a tile made a decode step's QKV and
// feed-forward products take 1-3 us longer than the 16 KB tiles of the
// same program's 256 x 256 products).
constexpr long long kMaxProductTileBytes = 32 * 1024;
constexpr std::uint32_t kMaxTiles = 65535;
// The most queries an attention tile takes (QueriesPerTile): its scores and
// sums are kBM registers a thread each.
constexpr long long kMaxQueriesPerTile = 16;
// An attention tile's queries on the tensor cores (stitch_attention_mma.cuh).
constexpr long long kMmaQueriesPerTile = 16;
constexpr long long kCounterStrideBytes = 128;
static_assert(jit::kSlotsPerLine * 8 == kCounterStrideBytes, "a counter takes one line");

// Where a task's problem is reported: "task 3 (cat)".
std::string Where(std::size_t index, const StitchTask& task) {
  return "task " + std::to_string(index) + " (" + (task.op ? task.op->name : "?") + ")";
}

Status Refuse(const std::string& where, const std::string& why) {
  return FailedPrecondition(where + ": cannot be stitched: " + why);
}

// A task's attribute values, checked and decoded by EncodeAttributeSlots
// (defaults, types, ranges): the rules every task of the runtime follows.
class AttributeValues {
 public:
  static Expected<AttributeValues> Of(const StitchTask& task, const std::string& where) {
    auto slots = EncodeAttributeSlots(*task.op, task.attributes);
    if (!slots.ok()) return slots.status().WithContext(where);
    return AttributeValues(task.op, std::move(*slots));
  }
  // REQUIRES: the operator declares `name` (the stage code's operators do).
  double Double(const std::string& name) const { return std::bit_cast<double>(Slot(name)); }
  long long Int(const std::string& name) const { return static_cast<long long>(Slot(name)); }

 private:
  AttributeValues(const OperatorSpec* op, std::vector<std::uint64_t> slots)
      : op_(op), slots_(std::move(slots)) {}
  std::uint64_t Slot(const std::string& name) const {
    for (std::size_t k = 0; k < op_->attributes.size(); ++k) {
      if (op_->attributes[k].name == name) return slots_[k];
    }
    return 0;
  }
  const OperatorSpec* op_;
  std::vector<std::uint64_t> slots_;
};

long long Numel(const std::vector<long long>& sizes) {
  long long n = 1;
  for (long long s : sizes) n *= s;
  return n;
}

// A product operand [batch, rows, columns] from a rank-2 or rank-3 view
// (rank 2: one batch item, batch stride 0); a batch size of 1 broadcasts.
Strided3 ProductOperand(const StitchView& v) {
  Strided3 s;
  s.buffer = v.buffer;
  s.offset = v.offset;
  const std::size_t r = v.sizes.size();
  s.s1 = v.strides[r - 2];
  s.s2 = v.strides[r - 1];
  s.s0 = r == 3 && v.sizes[0] != 1 ? v.strides[0] : 0;
  return s;
}

// Whether a view repeats an element along a dimension (stride 0, size > 1):
// an output like that would have several threads write one element.
bool Broadcasts(const StitchView& v) {
  for (std::size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.strides[d] == 0 && v.sizes[d] > 1) return true;
  }
  return false;
}

constexpr std::string_view kBroadcastOutput =
    "the output broadcasts (a stride of 0): elements would race";

constexpr std::string_view kProducts[] = {"addmm", "baddbmm", "fused_addmm", "matmul", "bmm"};
constexpr std::string_view kRowOperators[] = {"layer_norm", "rms_norm", "softmax", "log_softmax"};

template <std::size_t N>
bool OneOf(std::string_view name, const std::string_view (&names)[N]) {
  for (std::string_view n : names) {
    if (n == name) return true;
  }
  return false;
}

class Planner {
 public:
  explicit Planner(const StitchDesc& desc) : desc_(desc) {}

  Expected<std::vector<Stage>> Run() {
    if (desc_.num_buffers == 0 || desc_.num_buffers > kMaxStitchedBuffers) {
      return FailedPrecondition("a stitched program has 1 to " +
                                std::to_string(kMaxStitchedBuffers) + " buffers; this one has " +
                                std::to_string(desc_.num_buffers));
    }
    if (desc_.tasks.empty()) return FailedPrecondition("the program has no tasks to stitch");
    for (std::uint32_t b : desc_.internal_buffers) {
      if (b >= desc_.num_buffers) {
        return InvalidArgument("internal buffer " + std::to_string(b) +
                               " is not below num_buffers (" + std::to_string(desc_.num_buffers) +
                               ")");
      }
    }
    for (std::size_t i = 0; i < desc_.tasks.size(); ++i) {
      if (desc_.fuse_attention && AddAttention(i)) {
        i += 2;  // the scores' and the softmax's tasks are in the stage
        continue;
      }
      GPUOS_RETURN_IF_ERROR(AddTask(i));
    }
    if (desc_.flag_intermediates) {
      flagged_slots_ = jit::FlagIntermediates(desc_, stages_, accesses_,
                                              (stages_.size() + 1) * jit::kSlotsPerLine);
    }
    if (desc_.drop_unread_intermediates) jit::DropUnreadAttentionStores(desc_, stages_, accesses_);
    // Buffers some stage writes: a product whose b is not one of them may
    // load b before it waits.
    std::vector<bool> written(desc_.num_buffers, false);
    for (const Access& access : accesses_) {
      for (const Range& w : access.writes) written[w.buffer] = true;
    }
    std::uint32_t next_tile = 0;
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      Stage& stage = stages_[s];
      if (stage.kind == Stage::Kind::kMatmul) {
        MatmulStage& mm = stage.matmul;
        const long long k_per_thread = (mm.k + mm.kg - 1) / mm.kg;
        mm.prefetch_b = !written[mm.b.buffer] && (mm.k_fast || k_per_thread <= 64);
        mm.bias_ready = mm.bias && !written[mm.c.buffer];
      } else if (stage.kind == Stage::Kind::kRows) {
        RowsStage& rows = stage.rows;
        rows.parameters_ready = rows.kind > 1 || (!written[rows.weight.buffer] &&
                                                  (rows.kind != 0 || !written[rows.bias.buffer]));
      }
      stage.first_tile = next_tile;
      if (kMaxTiles - next_tile < stage.tiles) {
        return FailedPrecondition("the stitched program needs more than " +
                                  std::to_string(kMaxTiles) + " tiles (task " +
                                  std::to_string(stage.task) + " reaches it)");
      }
      next_tile += stage.tiles;
      stage.waits = Waits(s);
    }
    return std::move(stages_);
  }

  // After Run: the counter buffer's slots that flagged intermediates take
  // after the stage counters.
  std::size_t flagged_slots() const { return flagged_slots_; }

 private:
  static Range RangeOf(const StitchView& v, ReadRole role = ReadRole::kOther) {
    const long long item = static_cast<long long>(DTypeSize(v.dtype));
    const jit::ElementBounds e =
        jit::BoundsOf(v.offset, v.sizes.data(), v.strides.data(), v.sizes.size());
    return Range{v.buffer, e.low * item, (e.high + 1) * item, v, role};
  }

  // Whether two views with the same strides are disjoint, proven as for
  // slices of one tensor: the strides form a mixed radix (each divides the
  // next larger one, which holds the smaller one's whole range for both
  // views), b's offset is a's moved by whole indices that keep b inside
  // that radix, and along some dimension their index ranges do not meet
  // (the two parts of a cat). Then every element has one index in the
  // radix, so the views share none. False when not proven.
  static bool ProvenDisjoint(const StitchView& a, const StitchView& b) {
    if (a.strides != b.strides || a.dtype != b.dtype || a.sizes.size() != b.sizes.size()) {
      return false;
    }
    std::vector<std::size_t> dims;  // by stride, largest first
    for (std::size_t d = 0; d < a.strides.size(); ++d) {
      if (a.strides[d] <= 0) return false;
      dims.push_back(d);
    }
    if (dims.empty()) return false;
    std::sort(dims.begin(), dims.end(),
              [&](std::size_t x, std::size_t y) { return a.strides[x] > a.strides[y]; });
    // radix[d]: how many steps of dimension d fit under the next larger stride.
    std::vector<long long> radix(a.sizes.size(), 0);
    for (std::size_t i = 1; i < dims.size(); ++i) {
      const long long outer = a.strides[dims[i - 1]], stride = a.strides[dims[i]];
      if (outer % stride != 0) return false;
      radix[dims[i]] = outer / stride;
      if (std::max(a.sizes[dims[i]], b.sizes[dims[i]]) > radix[dims[i]]) return false;
    }
    long long delta = b.offset - a.offset;
    std::vector<long long> shift(a.sizes.size(), 0);
    for (std::size_t d : dims) {
      long long q = delta / a.strides[d];
      if (delta - q * a.strides[d] < 0) --q;  // floor
      shift[d] = q;
      delta -= q * a.strides[d];
    }
    if (delta != 0) return false;
    for (std::size_t i = 1; i < dims.size(); ++i) {  // b inside the radix
      if (shift[dims[i]] + b.sizes[dims[i]] > radix[dims[i]]) return false;
    }
    for (std::size_t d = 0; d < a.sizes.size(); ++d) {
      if (shift[d] >= a.sizes[d] || shift[d] + b.sizes[d] <= 0) return true;
    }
    return false;
  }

  static bool Overlap(const std::vector<Range>& x, const std::vector<Range>& y) {
    for (const Range& a : x) {
      for (const Range& b : y) {
        if (a.buffer == b.buffer && a.begin < b.end && b.begin < a.end &&
            !ProvenDisjoint(a.view, b.view)) {
          return true;
        }
      }
    }
    return false;
  }

  // The stages `s` must wait for: every earlier stage whose accesses
  // conflict with its own (read after write, write after read or write),
  // less those another one it waits for already waited for.
  std::vector<std::uint32_t> Waits(std::size_t s) {
    std::vector<bool> before(s, false);  // transitively waited for
    std::vector<std::uint32_t> waits;
    for (std::size_t p = s; p-- > 0;) {
      const bool conflict = Overlap(accesses_[p].writes, accesses_[s].reads) ||
                            Overlap(accesses_[p].reads, accesses_[s].writes) ||
                            Overlap(accesses_[p].writes, accesses_[s].writes);
      if (!conflict || before[p]) continue;
      waits.push_back(static_cast<std::uint32_t>(p));
      before[p] = true;
      for (std::size_t q = 0; q < p; ++q) {
        if (closure_[p][q]) before[q] = true;
      }
    }
    closure_.emplace_back(s + 1, false);
    for (std::size_t q = 0; q < s; ++q) closure_[s][q] = before[q];
    std::reverse(waits.begin(), waits.end());
    return waits;
  }

  Status CheckTask(std::size_t index) {
    const StitchTask& task = desc_.tasks[index];
    const std::string where = Where(index, task);
    if (task.op == nullptr)
      return InvalidArgument(where + ": no operator (StitchTask::op is null)");
    const std::size_t arity = task.op->inputs.size() + task.op->outputs.size();
    if (task.tensors.size() != arity) {
      return InvalidArgument(where + ": " + std::to_string(task.tensors.size()) +
                             " tensors; the operator takes " + std::to_string(arity));
    }
    for (std::size_t k = 0; k < task.tensors.size(); ++k) {
      const StitchView& v = task.tensors[k];
      const std::string which = where + ", tensor " + std::to_string(k);
      if (v.buffer >= desc_.num_buffers) {
        return InvalidArgument(which + ": buffer " + std::to_string(v.buffer) +
                               " is not below num_buffers (" + std::to_string(desc_.num_buffers) +
                               ")");
      }
      if (v.sizes.size() != v.strides.size()) {
        return InvalidArgument(which + ": sizes and strides differ in length");
      }
      for (long long size : v.sizes) {
        if (size < 0) return InvalidArgument(which + ": negative size");
        if (size == 0) return Refuse(where, "tensor " + std::to_string(k) + " is empty");
      }
      if (v.dtype != DType::kF32) {
        return Refuse(where, std::string("tensor ") + std::to_string(k) + " is " +
                                 DTypeName(v.dtype) + "; stage code is written for f32 only");
      }
    }
    if (task.dtype != DType::kF32) {
      return Refuse(where, std::string("dtype ") + DTypeName(task.dtype) +
                               "; stage code is written for f32 only");
    }
    return Status::Ok();
  }

  Status AddTask(std::size_t index) {
    GPUOS_RETURN_IF_ERROR(CheckTask(index));
    const StitchTask& task = desc_.tasks[index];
    const std::string& name = task.op->name;
    if (OneOf(name, kProducts)) return AddMatmul(index);
    if (OneOf(name, kRowOperators)) return AddRows(index);
    if (name == "cat") return AddCat(index);
    if (task.op->kind == OperatorKind::kElementwise) return AddElementwise(index);
    return Refuse(Where(index, task),
                  "no stage code for this operator (stitched: elementwise operators, addmm, "
                  "baddbmm, fused_addmm, matmul, bmm, layer_norm, rms_norm, softmax, "
                  "log_softmax, cat)");
  }

  void Push(Stage stage, Access access) {
    stages_.push_back(std::move(stage));
    accesses_.push_back(std::move(access));
  }

  Status AddMatmul(std::size_t index) {
    const StitchTask& task = desc_.tasks[index];
    const std::string where = Where(index, task);
    const std::string& name = task.op->name;
    const bool fused = name == "fused_addmm";
    const bool with_bias = name == "addmm" || name == "baddbmm" || fused;
    const std::vector<StitchView>& t = task.tensors;
    const StitchView& a = t[0];
    const StitchView& b = t[1];
    const StitchView& out = t.back();
    const std::size_t rank = out.sizes.size();
    if ((rank != 2 && rank != 3) || a.sizes.size() != rank || b.sizes.size() != rank) {
      return Refuse(where, "matrix products of rank 2 or 3 only");
    }
    if (Broadcasts(out)) return Refuse(where, std::string(kBroadcastOutput));
    MatmulStage mm;
    mm.batch = rank == 3 ? out.sizes[0] : 1;
    mm.m = out.sizes[rank - 2];
    mm.n = out.sizes[rank - 1];
    mm.k = a.sizes[rank - 1];
    const bool batch_ok = rank == 2 || ((a.sizes[0] == mm.batch || a.sizes[0] == 1) &&
                                        (b.sizes[0] == mm.batch || b.sizes[0] == 1));
    if (!batch_ok || a.sizes[rank - 2] != mm.m || b.sizes[rank - 2] != mm.k ||
        b.sizes[rank - 1] != mm.n) {
      return Refuse(where, "operand shapes do not form a product");
    }
    mm.a = ProductOperand(a);
    mm.b = ProductOperand(b);
    mm.out = ProductOperand(out);
    Access access;
    access.reads = {RangeOf(a, ReadRole::kProductA), RangeOf(b)};
    access.writes = {RangeOf(out)};
    GPUOS_ASSIGN_OR_RETURN(const AttributeValues attributes, AttributeValues::Of(task, where));
    if (with_bias) {
      mm.alpha = attributes.Double("alpha");
      mm.beta = attributes.Double("beta");
      mm.bias = mm.beta != 0.0;
      if (mm.bias) {
        const StitchView& c = t[2];
        const std::size_t c_rank = c.sizes.size();
        if (c_rank > rank) return Refuse(where, "the bias has a higher rank than the output");
        const long long out_sizes[3] = {mm.batch, mm.m, mm.n};
        long long strides[3] = {0, 0, 0};
        for (std::size_t d = 0; d < c_rank; ++d) {
          const std::size_t axis = 3 - c_rank + d;
          if (c.sizes[d] != out_sizes[axis] && c.sizes[d] != 1) {
            return Refuse(where, "the bias does not broadcast to the output");
          }
          strides[axis] = c.sizes[d] == 1 ? 0 : c.strides[d];
        }
        mm.c = Strided3{c.buffer, c.offset, strides[0], strides[1], strides[2]};
        access.reads.push_back(RangeOf(c));
      }
    }
    if (fused) {
      const long long norm = attributes.Int("norm");
      mm.eps = attributes.Double("eps");
      const long long activation = attributes.Int("activation");
      const long long residual = attributes.Int("add_residual");
      if (norm < 0 || norm > 4 || activation < 0 || activation > 3 || residual < 0 ||
          residual > 1) {
        return Refuse(where,
                      "an attribute is out of range (norm 0-4, activation 0-3, "
                      "add_residual 0-1)");
      }
      mm.norm = static_cast<int>(norm);
      mm.activation = static_cast<int>(activation);
      mm.residual = residual == 1;
      if (mm.norm != 0) {
        for (int k = 3; k <= 4; ++k) {
          if (t[k].sizes.size() != 1 || t[k].sizes[0] != mm.k) {
            return Refuse(where, "the norm's weight and bias must be 1-D of K");
          }
          access.reads.push_back(RangeOf(t[k]));
        }
        mm.norm_weight = Strided1{t[3].buffer, t[3].offset, t[3].strides[0]};
        mm.norm_bias = Strided1{t[4].buffer, t[4].offset, t[4].strides[0]};
      }
      if (mm.residual) {
        if (t[5].sizes != out.sizes) return Refuse(where, "the residual must have out's sizes");
        mm.r = ProductOperand(t[5]);
        access.reads.push_back(RangeOf(t[5], ReadRole::kResidual));
      }
    }
    GPUOS_RETURN_IF_ERROR(TileMatmul(where, mm));
    Stage stage;
    stage.kind = Stage::Kind::kMatmul;
    stage.op = name;
    stage.task = static_cast<std::uint32_t>(index);
    stage.tiles = static_cast<std::uint32_t>(mm.batch * ((mm.m + mm.bm - 1) / mm.bm) *
                                             ((mm.n + mm.bn - 1) / mm.bn));
    stage.matmul = mm;
    Push(std::move(stage), std::move(access));
    return Status::Ok();
  }

  // Whether two views name the same elements in the same order (jit::
  // Coalesce): a softmax's rank-4 view of a product's rank-3 output.
  static bool SameElements(const StitchView& a, const StitchView& b) {
    return a.buffer == b.buffer && a.offset == b.offset && a.dtype == b.dtype &&
           jit::Coalesce(a.sizes, a.strides) == jit::Coalesce(b.sizes, b.strides) &&
           a.sizes.back() == b.sizes.back();
  }

  // Tasks i, i + 1, i + 2 as one attention stage when they are scores = q x
  // kt (bmm or matmul, or baddbmm with beta 0: alpha scales), a softmax of
  // exactly those scores and probs x v (bmm or matmul) of exactly its
  // output, rank 3 (or 2), f32, and the shapes fit the stage code (a tile's
  // q rows and scores in the scratch, v's columns a thread each); the
  // outputs overlap none of q, kt and v. False leaves the tasks to their
  // own stages (and their own errors).
  bool AddAttention(std::size_t i) {
    if (i + 2 >= desc_.tasks.size()) return false;
    const StitchTask& first = desc_.tasks[i];
    const StitchTask& norm = desc_.tasks[i + 1];
    const StitchTask& second = desc_.tasks[i + 2];
    if (first.op == nullptr || norm.op == nullptr || second.op == nullptr) return false;
    const std::string& a = first.op->name;
    const std::string& c = second.op->name;
    if ((a != "bmm" && a != "matmul" && a != "baddbmm") || norm.op->name != "softmax" ||
        (c != "bmm" && c != "matmul")) {
      return false;
    }
    for (std::size_t k = i; k <= i + 2; ++k) {
      if (!CheckTask(k).ok()) return false;
    }
    double alpha = 1.0;
    if (a == "baddbmm") {
      auto attributes = AttributeValues::Of(first, Where(i, first));
      if (!attributes.ok() || attributes->Double("beta") != 0.0) return false;
      alpha = attributes->Double("alpha");
    }
    const StitchView& q = first.tensors[0];
    const StitchView& kt = first.tensors[1];
    const StitchView& scores = first.tensors.back();
    // The probabilities as the product reads them (rank 3 or 2, like the
    // scores; the softmax's own views may have another rank, e.g. 4).
    const StitchView& probs = second.tensors[0];
    const StitchView& v = second.tensors[1];
    const StitchView& out = second.tensors.back();
    const std::size_t rank = out.sizes.size();
    for (const StitchView* view : {&q, &kt, &scores, &probs, &v, &out}) {
      if (view->sizes.size() != rank) return false;
    }
    if ((rank != 2 && rank != 3) || norm.tensors[0].sizes != norm.tensors[1].sizes ||
        !SameElements(scores, norm.tensors[0]) || !SameElements(norm.tensors[1], probs) ||
        probs.sizes != scores.sizes) {
      return false;
    }
    AttentionStage at;
    at.batch = rank == 3 ? out.sizes[0] : 1;
    at.m = out.sizes[rank - 2];
    at.dv = out.sizes[rank - 1];
    at.d = q.sizes[rank - 1];
    at.n = kt.sizes[rank - 1];
    const auto batch_ok = [&](const StitchView& x) {
      return rank == 2 || x.sizes[0] == at.batch || x.sizes[0] == 1;
    };
    if (!batch_ok(q) || !batch_ok(kt) || !batch_ok(v) || scores.sizes[0] != out.sizes[0] ||
        q.sizes[rank - 2] != at.m || kt.sizes[rank - 2] != at.d || scores.sizes[rank - 2] != at.m ||
        scores.sizes[rank - 1] != at.n || v.sizes[rank - 2] != at.n || Broadcasts(scores) ||
        Broadcasts(probs) || Broadcasts(out)) {
      return false;
    }
    at.bm = QueriesPerTile(at);
    if (at.bm < 1 || at.dv > kThreads) return false;
    // Lanes per key: as many as leave every thread a key (at most 8), each
    // with at most 64 of its values.
    at.split = 1;
    while (at.split < 8 && at.d % (at.split * 2) == 0 &&
           (at.n * at.split * 2 <= kThreads || at.d / at.split > 64)) {
      at.split *= 2;
    }
    // More keys than threads at one lane a key (a decode step's 129): four
    // lanes a key, in passes whose keys are all loaded at once (the lanes'
    // 16-byte parts of a key adjacent, not each lane a whole row of its
    // own), where a lane holds them in 64 registers.
    if (at.split == 1 && at.n > kThreads / 2 && at.d % 16 == 0 &&
        at.d / 4 * ((at.n + kThreads / 4 - 1) / (kThreads / 4)) <= 64) {
      at.split = 4;
    }
    if (at.d / at.split > 64 || at.d % at.split != 0) return false;
    at.q = ProductOperand(q);
    at.kt = ProductOperand(kt);
    at.v = ProductOperand(v);
    at.scores = ProductOperand(scores);
    at.probs = ProductOperand(probs);
    at.out = ProductOperand(out);
    at.alpha = alpha;
    // Keys and values read through the cat that wrote them, if one did.
    std::vector<StitchView> key_reads = {kt}, value_reads = {v};
    const auto through_cat = [&](std::size_t consumer, const StitchView& view, int key_axis,
                                 Strided3* part1, Strided3* part2, long long* split,
                                 std::vector<StitchView>* reads) {
      const long long sizes[3] = {rank == 3 ? view.sizes[0] : 1, view.sizes[rank - 2],
                                  view.sizes[rank - 1]};
      *part2 = *part1;
      *split = at.n;
      if (auto parts = ReadThroughCat(desc_, consumer, *part1, sizes, key_axis)) {
        *part1 = parts->first;
        *part2 = parts->second;
        *split = parts->split;
        *reads = std::move(parts->views);
      }
    };
    through_cat(i, kt, 2, &at.kt, &at.kt2, &at.kt_split, &key_reads);
    through_cat(i + 2, v, 1, &at.v, &at.v2, &at.v_split, &value_reads);
    const long long per_lane = at.d / at.split;
    const auto vec_keys = [&](const Strided3& k) {
      return k.s1 == 1 && k.offset % 4 == 0 && k.s0 % 4 == 0 && k.s2 % 4 == 0;
    };
    at.vec = per_lane % 4 == 0 && vec_keys(at.kt) && vec_keys(at.kt2) ? 4 : 1;
    // The tensor cores' stage (stitch_attention_mma.cuh) where it fits: its
    // tiles take 16 queries (an m16 product's rows).
    at.mma = desc_.attention_mma && MmaFits(at, vec_keys(at.kt));
    if (at.mma) {
      at.bm = static_cast<int>(kMmaQueriesPerTile);  // MmaFits: at.m is at least that
      at.vec = 4;
    }
    Access access;
    access.reads = {RangeOf(q)};
    for (const StitchView& r : key_reads) access.reads.push_back(RangeOf(r));
    for (const StitchView& r : value_reads) access.reads.push_back(RangeOf(r));
    access.writes = {RangeOf(scores), RangeOf(probs), RangeOf(out)};
    if (Overlap(access.writes, access.reads)) return false;
    Stage stage;
    stage.kind = Stage::Kind::kAttention;
    stage.op = "attention";
    stage.task = static_cast<std::uint32_t>(i);
    const long long tiles = at.batch * ((at.m + at.bm - 1) / at.bm);
    if (tiles > kMaxTiles / 4) return false;  // leave the task's tiles to the other stages
    stage.tiles = static_cast<std::uint32_t>(tiles);
    stage.attention = at;
    Push(std::move(stage), std::move(access));
    return true;
  }

  // Tile shapes of a product (stitch_matmul.cuh). Prefers more, smaller
  // tiles up to TargetTiles(): each tile is then about one round trip of
  // loads.
  Status TileMatmul(const std::string& where, MatmulStage& mm) const {
    const long long target = TargetTiles();
    const long long row_bytes = mm.k * 4;
    if (row_bytes > kScratchBytes) {
      return Refuse(where, "K = " + std::to_string(mm.k) +
                               " is above the 2048 values a tile's "
                               "row holds in shared memory");
    }
    const long long rows_fit = kScratchBytes / row_bytes;
    mm.k_fast = mm.m <= kFewRows && mm.b.s1 == 1;
    if (mm.k_fast) {
      mm.bm = static_cast<int>(std::min(mm.m, rows_fit));
      const bool aligned =
          mm.k % 4 == 0 && mm.b.offset % 4 == 0 && mm.b.s0 % 4 == 0 && mm.b.s2 % 4 == 0;
      mm.vec = aligned ? 4 : 1;
      // The lane's values of b: (bn / 8) columns x K / 32; at most 64. And
      // at most kMaxProductTileBytes of b a tile.
      const long long max_bn =
          std::max(8ll, std::min(16384 / mm.k, kMaxProductTileBytes / (mm.k * 4)) / 8 * 8);
      const long long m_tiles = (mm.m + mm.bm - 1) / mm.bm;
      mm.bn = 8;
      while (mm.bn * 2 <= max_bn && mm.bn < 64 &&
             mm.batch * m_tiles * ((mm.n + mm.bn - 1) / mm.bn) > target) {
        mm.bn *= 2;
      }
      return Status::Ok();
    }
    // A thread per column: 32 to 256 columns. A few rows take 32 columns a
    // tile, so that eight groups split K (fewer values a thread).
    mm.bn = 32;
    while (mm.m > kFewRows && mm.bn < 256 && mm.bn < mm.n) mm.bn *= 2;
    const int groups = kThreads / mm.bn;
    if (mm.m <= kFewRows) {
      mm.kg = groups;  // the groups split K
      mm.bm = static_cast<int>(std::min(mm.m, rows_fit));
    } else {
      // The groups split K in ranges of at most 64 (b's values of a thread
      // then fit its registers, loaded before the wait when the program
      // does not write b), the rest split the rows, up to 8 each.
      mm.kg = 1;
      while (mm.kg < groups && (mm.k + mm.kg - 1) / mm.kg > 64) mm.kg *= 2;
      const int row_groups = groups / mm.kg;
      long long bm = std::min({mm.m, rows_fit, static_cast<long long>(row_groups) * 8});
      bm = std::max(bm, 1ll);
      auto tiles = [&](long long rows) {
        return mm.batch * ((mm.m + rows - 1) / rows) * ((mm.n + mm.bn - 1) / mm.bn);
      };
      while (bm > row_groups && tiles(bm) < target) bm = (bm + 1) / 2;
      mm.bm = static_cast<int>(bm);
    }
    const long long k_per_thread = (mm.k + mm.kg - 1) / mm.kg;
    const bool aligned = mm.b.s1 == 1 && mm.k % 4 == 0 && k_per_thread % 4 == 0 &&
                         mm.b.offset % 4 == 0 && mm.b.s0 % 4 == 0 && mm.b.s2 % 4 == 0;
    mm.vec = aligned ? 4 : 1;
    return Status::Ok();
  }

  // About how many tiles a stage spreads over: an eighth of the worker's
  // blocks, at least 8. Every tile of a task is one more block that joins
  // it, claims, counts and returns its completion, partly outside the
  // task's device span (docs/pytorch.md, "Stitched programs", has the
  // measurements; GPUOS_STITCH_BLOCKS changes the block count assumed).
  long long TargetTiles() const { return std::max(8u, desc_.worker_blocks / 8); }

  // Queries a tile of attention stage `at` (its batch, m, n, d and dv set):
  // 8, or fewer where q's rows and the scores would not fit the scratch
  // (kBM * (d + n) values). Where that makes more tiles than half the
  // worker's blocks: the fewest tiles a batch item that tiles of up to
  // `full` queries give, with the queries spread evenly over them (the
  // fewest queries a tile for that count). A tile is latency-bound (at 128
  // keys, 10 queries took the same 8.8 us as 8) and every tile is one more
  // block to join, so fewer, fuller tiles start sooner (seq 128: 104 tiles
  // instead of 128, the last started about 0.5 us sooner and the device span
  // was 0.55-2.0 us shorter: bench/results/experiments/
  // gpu_checks_session23.txt). `full` is what the scratch holds, bounded
  // by the value step's partial sums too ((256 / columns - 1) groups of
  // kBM x columns values: stitch_attention.cuh, step 4, whose column count
  // this mirrors) and by kMaxQueriesPerTile (registers; tiles of more than
  // 10 queries have not been timed).
  long long QueriesPerTile(const AttentionStage& at) const {
    constexpr long long kValues = kScratchBytes / 4;
    const auto tiles_of = [&](long long bm) { return (at.m + bm - 1) / bm; };
    const long long fit = kValues / (at.d + at.n);
    const long long small = std::min({8ll, at.m, fit});
    if (small < 1 || at.batch * tiles_of(small) <= desc_.worker_blocks / 2) return small;
    const long long columns = at.dv <= 32 ? 32 : at.dv <= 64 ? 64 : at.dv <= 128 ? 128 : 256;
    const long long groups = kThreads / columns;
    const long long sums_fit = groups > 1 ? kValues / ((groups - 1) * columns) : at.m;
    const long long full = std::min({kMaxQueriesPerTile, at.m, fit, sums_fit});
    if (full <= small) return small;
    return tiles_of(tiles_of(full));  // ceil(m / tiles): the same tiles, evenly filled
  }

  // Whether the attention stage fits stitch_attention_mma.cuh's tensor-core
  // code: f32 (every attention stage is), d a multiple of 16 up to 64, keys
  // a multiple of 16 up to 128, v's columns a multiple of 8 up to 64, at
  // least one full tile of 16 queries, keys contiguous along d and 16-byte
  // aligned (`keys_vec`), keys and values each in one view (no cat's parts).
  static bool MmaFits(const AttentionStage& at, bool keys_vec) {
    return at.d % 16 == 0 && at.d <= 64 && at.n % 16 == 0 && at.n <= 128 && at.dv % 8 == 0 &&
           at.dv <= 64 && at.m >= kMmaQueriesPerTile && keys_vec && at.kt_split == at.n &&
           at.v_split == at.n;
  }

  // A row view of `v` (the last dimension is the row).
  static RowView RowViewOf(const StitchView& v) {
    RowView r;
    r.buffer = v.buffer;
    r.offset = v.offset;
    r.lead_sizes.assign(v.sizes.begin(), v.sizes.end() - 1);
    r.lead_strides.assign(v.strides.begin(), v.strides.end() - 1);
    r.element_stride = v.strides.back();
    return r;
  }

  Status AddRows(std::size_t index) {
    const StitchTask& task = desc_.tasks[index];
    const std::string where = Where(index, task);
    const std::string& name = task.op->name;
    const std::vector<StitchView>& t = task.tensors;
    const StitchView& in = t[0];
    const StitchView& out = t.back();
    if (in.sizes.empty() || in.sizes != out.sizes) {
      return Refuse(where, "input and output must have one shape of rank 1 or more");
    }
    if (Broadcasts(out)) return Refuse(where, std::string(kBroadcastOutput));
    RowsStage rows;
    rows.kind = name == "layer_norm" ? 0 : name == "rms_norm" ? 1 : name == "softmax" ? 2 : 3;
    rows.length = in.sizes.back();
    rows.rows = Numel(in.sizes) / rows.length;
    if (rows.length > kMaxRowLength) {
      return Refuse(where, "rows of " + std::to_string(rows.length) + " elements (at most " +
                               std::to_string(kMaxRowLength) + ")");
    }
    rows.in = RowViewOf(in);
    rows.out = RowViewOf(out);
    Access access;
    access.reads = {RangeOf(in, ReadRole::kRowsIn)};
    access.writes = {RangeOf(out)};
    GPUOS_ASSIGN_OR_RETURN(const AttributeValues attributes, AttributeValues::Of(task, where));
    if (rows.kind <= 1) {
      rows.eps = attributes.Double("eps");
      const int params = rows.kind == 0 ? 2 : 1;
      for (int k = 1; k <= params; ++k) {
        if (t[k].sizes.size() != 1 || t[k].sizes[0] != rows.length) {
          return Refuse(where, "weight and bias must be 1-D of the row's length");
        }
        access.reads.push_back(RangeOf(t[k]));
      }
      rows.weight = Strided1{t[1].buffer, t[1].offset, t[1].strides[0]};
      if (rows.kind == 0) {
        rows.bias = Strided1{t[2].buffer, t[2].offset, t[2].strides[0]};
        const long long act = attributes.Int("activation");
        if (act < 0 || act > 3) return Refuse(where, "activation out of range (0-3)");
        rows.activation = static_cast<int>(act);
      }
    }
    // A warp holds kRowsPerWarp rows of (length / 32) values: at most 32.
    const long long per_lane = (rows.length + 31) / 32;
    const long long max_per_warp = std::max(1ll, 32 / per_lane);
    const long long target_tiles = TargetTiles();
    long long per_warp = (rows.rows + 8 * target_tiles - 1) / (8 * target_tiles);
    per_warp = std::clamp(per_warp, 1ll, max_per_warp);
    rows.rows_per_tile = static_cast<int>(8 * per_warp);
    Stage stage;
    stage.kind = Stage::Kind::kRows;
    stage.op = name;
    stage.task = static_cast<std::uint32_t>(index);
    stage.tiles =
        static_cast<std::uint32_t>((rows.rows + rows.rows_per_tile - 1) / rows.rows_per_tile);
    stage.rows = std::move(rows);
    Push(std::move(stage), std::move(access));
    return Status::Ok();
  }

  // `in` read over `out`'s shape (NumPy broadcasting, aligned at the last
  // dimension): its strides per dimension of out.
  static Expected<ElementwiseView> Broadcast(const StitchView& in, const StitchView& out) {
    const std::size_t rank = out.sizes.size();
    if (in.sizes.size() > rank) return FailedPrecondition("an input has a higher rank than out");
    ElementwiseView v;
    v.buffer = in.buffer;
    v.offset = in.offset;
    v.strides.assign(rank, 0);
    for (std::size_t d = 0; d < in.sizes.size(); ++d) {
      const std::size_t axis = rank - in.sizes.size() + d;
      if (in.sizes[d] != out.sizes[axis] && in.sizes[d] != 1) {
        return FailedPrecondition("an input does not broadcast to out's shape");
      }
      v.strides[axis] = in.sizes[d] == 1 ? 0 : in.strides[d];
    }
    return v;
  }

  // An elementwise stage of `spec` (identity when null) from views.
  Status PushElementwise(std::size_t index, const std::string& op, const OperatorSpec* spec,
                         const std::vector<const StitchView*>& inputs, const StitchView& out) {
    const StitchTask& task = desc_.tasks[index];
    const std::string where = Where(index, task);
    ElementwiseStage ew;
    if (spec != nullptr) ew.spec = *spec;
    ew.sizes = out.sizes;
    ew.numel = Numel(out.sizes);
    Access access;
    for (const StitchView* in : inputs) {
      auto view = Broadcast(*in, out);
      if (!view.ok()) return Refuse(where, view.status().message());
      ew.inputs.push_back(std::move(*view));
      access.reads.push_back(RangeOf(*in));
    }
    if (Broadcasts(out)) return Refuse(where, std::string(kBroadcastOutput));
    ew.out = ElementwiseView{out.buffer, out.offset, out.strides};
    access.writes.push_back(RangeOf(out));
    const long long target_tiles = TargetTiles();
    const long long per_thread =
        (ew.numel + kThreads * target_tiles - 1) / (kThreads * target_tiles);
    ew.per_thread = static_cast<int>(std::clamp(per_thread, 1ll, 16ll));
    const long long per_tile = static_cast<long long>(kThreads) * ew.per_thread;
    Stage stage;
    stage.kind = Stage::Kind::kElementwise;
    stage.op = op;
    stage.task = static_cast<std::uint32_t>(index);
    const long long tiles = (ew.numel + per_tile - 1) / per_tile;
    if (tiles > kMaxTiles) return Refuse(where, "too many elements for one task's tiles");
    stage.tiles = static_cast<std::uint32_t>(tiles);
    stage.elementwise = std::move(ew);
    Push(std::move(stage), std::move(access));
    return Status::Ok();
  }

  Status AddElementwise(std::size_t index) {
    const StitchTask& task = desc_.tasks[index];
    const std::string where = Where(index, task);
    const OperatorSpec& op = *task.op;
    if (op.outputs.size() != 1) return Refuse(where, "elementwise operators with one output only");
    const std::vector<StitchView>& t = task.tensors;
    std::vector<const StitchView*> inputs;
    for (std::size_t k = 0; k + 1 < t.size(); ++k) inputs.push_back(&t[k]);
    if (inputs.empty()) return Refuse(where, "an elementwise operator without inputs");
    // The operator as one fused step: its attributes become literals, so
    // every elementwise stage is a spec with inputs in0.. and output out.
    if (op.attributes.empty() && op.name.rfind(kFusedOperatorPrefix, 0) == 0) {
      return PushElementwise(index, op.name, &op, inputs, t.back());
    }
    FusedElementwiseDesc fused;
    fused.dtype = task.dtype;
    fused.num_inputs = static_cast<int>(inputs.size());
    FusedStep step;
    step.op = &op;
    step.attributes = task.attributes;
    for (int k = 0; k < fused.num_inputs; ++k) step.operands.push_back(FusedOperand::Input(k));
    fused.steps.push_back(std::move(step));
    auto spec = FuseElementwise(fused);
    if (!spec.ok()) return Refuse(where, spec.status().message());
    return PushElementwise(index, op.name, &*spec, inputs, t.back());
  }

  // cat(a, b) along `dim`: two copies into out's slices.
  Status AddCat(std::size_t index) {
    const StitchTask& task = desc_.tasks[index];
    const std::string where = Where(index, task);
    const std::vector<StitchView>& t = task.tensors;
    const StitchView& out = t.back();
    const long long rank = static_cast<long long>(out.sizes.size());
    GPUOS_ASSIGN_OR_RETURN(const AttributeValues attributes, AttributeValues::Of(task, where));
    long long dim = attributes.Int("dim");
    if (dim < 0) dim += rank;
    if (dim < 0 || dim >= rank) return Refuse(where, "dim out of range");
    long long start = 0;
    for (std::size_t k = 0; k + 1 < t.size(); ++k) {
      const StitchView& in = t[k];
      if (static_cast<long long>(in.sizes.size()) != rank) {
        return Refuse(where, "cat of tensors of different ranks");
      }
      StitchView slice = out;
      slice.sizes[dim] = in.sizes[dim];
      slice.offset = out.offset + start * out.strides[dim];
      for (long long d = 0; d < rank; ++d) {
        if (d != dim && in.sizes[d] != out.sizes[d]) {
          return Refuse(where, "cat inputs differ from out outside dim");
        }
      }
      start += in.sizes[dim];
      GPUOS_RETURN_IF_ERROR(PushElementwise(index, "cat", nullptr, {&in}, slice));
    }
    if (start != out.sizes[dim]) return Refuse(where, "cat inputs do not fill out along dim");
    return Status::Ok();
  }

  const StitchDesc& desc_;
  std::vector<Stage> stages_;
  std::vector<Access> accesses_;
  std::vector<std::vector<bool>> closure_;  // closure_[s][q]: s waits for q, transitively
  std::size_t flagged_slots_ = 0;
};

}  // namespace

bool HasOwnStageCode(std::string_view name) {
  return OneOf(name, kProducts) || OneOf(name, kRowOperators) || name == "cat";
}

Expected<StitchedProgram> StitchProgram(const StitchDesc& desc) {
  Planner planner(desc);
  GPUOS_ASSIGN_OR_RETURN(std::vector<Stage> stages, planner.Run());
  StitchedProgram result;
  result.table_entries = desc.num_buffers + 1;
  for (const Stage& stage : stages) result.tiles += stage.tiles;
  result.counter_bytes = (stages.size() + 1) * kCounterStrideBytes + planner.flagged_slots() * 8;
  result.task_counter_offset = stages.size() * kCounterStrideBytes;
  std::string description = "stitched: " + std::to_string(stages.size()) + " stages:";
  std::string flagged;  // the stages whose outputs are flagged intermediates
  std::string on_chip;  // attention stages that store neither scores nor probabilities (or one)
  std::string tensor_cores;  // attention stages on the tensor cores
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    description += (s == 0 ? " " : " -> ") + stage.op + "(" + std::to_string(stage.tiles) + ")";
    StitchStage info;
    info.kind = stage.kind == Stage::Kind::kMatmul      ? "matmul"
                : stage.kind == Stage::Kind::kRows      ? "rows"
                : stage.kind == Stage::Kind::kAttention ? "attention"
                                                        : "elementwise";
    info.op = stage.op;
    info.task = stage.task;
    info.first_tile = stage.first_tile;
    info.tiles = stage.tiles;
    info.waits = stage.waits;
    info.flagged_output = stage.kind == Stage::Kind::kMatmul && stage.matmul.out.flagged;
    if (info.flagged_output) flagged += (flagged.empty() ? "" : ",") + std::to_string(s);
    if (stage.kind == Stage::Kind::kAttention) {
      info.stores_scores = stage.attention.store_scores;
      info.stores_probs = stage.attention.store_probs;
      info.tensor_cores = stage.attention.mma;
      if (info.tensor_cores) tensor_cores += (tensor_cores.empty() ? "" : ",") + std::to_string(s);
      if (!info.stores_scores || !info.stores_probs) {
        on_chip += (on_chip.empty() ? "" : ",") + std::to_string(s) +
                   (info.stores_scores  ? " (probabilities)"
                    : info.stores_probs ? " (scores)"
                                        : "");
      }
    }
    result.stages.push_back(std::move(info));
  }
  if (!flagged.empty()) description += "; flagged outputs: stages " + flagged;
  if (!on_chip.empty())
    description += "; unread scores and probabilities not stored: stages " + on_chip;
  if (!tensor_cores.empty()) description += "; on the tensor cores: stages " + tensor_cores;
  const jit::StitchCode unnamed =
      jit::GenerateStitchCode(stages, result.tiles, std::string(kVirtualFilePrefix));
  ContentHasher hasher;
  hasher.Add(kHashFormat).Add(description).Add(unnamed.device_code).Add(unnamed.body);
  const std::string name = std::string(kStitchedOperatorPrefix) + hasher.Finish().substr(0, 16);
  const std::string file = std::string(kVirtualFilePrefix) + name;
  jit::StitchCode code = jit::GenerateStitchCode(stages, result.tiles, file);

  OperatorSpec& spec = result.op;
  spec.name = name;
  spec.version = SemVer{1, 0, 0};
  spec.kind = OperatorKind::kCustom;
  spec.description = std::move(description);
  spec.dtypes = {DType::kU8};
  TensorParam table;
  table.name = "table";
  table.description =
      "the stage counters, then the program's buffers' addresses "
      "(TaskGraph::AddAddressTableTask)";
  table.dtype = DType::kU8;
  spec.outputs.push_back(std::move(table));
  jit::AttachGeneratedCode(std::move(code), file, &spec);
  return result;
}

}  // namespace gpuos::registry
