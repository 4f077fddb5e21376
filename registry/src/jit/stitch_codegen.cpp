// GenerateStitchCode: the CUDA C++ of a stitched operator. device_code holds
// one namespace per stage (s0, s1, ...) with the stage's constants and a
// `Run(ctx, t, smem)` that waits for the stages it reads, runs tile t of the
// stage and counts it done; the body picks the stage of its tile and runs it:
//
//   namespace s3 {  // baddbmm (task 3): tiles 40..75, waits for s0, s2
//   struct P { using T = float; static constexpr int kBatch = 4, ...; };
//   __device__ __noinline__ void Run(const OpContext& ctx, int t, unsigned char* smem) {
//     const Tile tile(ctx, 5, 80u, true);
//     const auto wait = [&]() { if (threadIdx.x == 0) { constexpr int kStages[] = {0, 2};
//         constexpr unsigned int kTiles[] = {24u, 8u}; tile.Poll(kStages, kTiles); }
//       __syncthreads(); };  // one wait: tile.Poll(0, 24u)
//     ::gpuos::device::stitch::Matmul<P>(tile, t, smem, wait);
//     tile.Done(3);  // tile.DoneUnwaited() where no stage waits for s3
//   }
//   }
//
// Elementwise stages are written out here: each tensor's offset as a
// function of the element number (dimensions merged where the strides
// allow), the operator's code (a fused spec) as `stage_body`.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "source_writer.h"
#include "stitch_internal.h"

namespace gpuos::registry::jit {
namespace {

std::string I(long long v) { return std::to_string(v); }

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ", ") + part;
  return out;
}

// The body of `static __device__ long long F(long long i)`: the offset of
// element i (row-major over `sizes`) of a tensor with `strides`.
std::string OffsetBody(const std::vector<long long>& sizes, const std::vector<long long>& strides) {
  const Dims d = Coalesce(sizes, strides);
  if (d.sizes.empty()) return "(void)i; return 0;";
  if (d.sizes.size() == 1) return "return i * " + I(d.strides[0]) + "ll;";
  std::string code = "long long o = 0; ";
  for (std::size_t k = d.sizes.size(); k-- > 1;) {
    code += "o += (i % " + I(d.sizes[k]) + "ll) * " + I(d.strides[k]) +
            "ll; i /= " + I(d.sizes[k]) + "ll; ";
  }
  code += "o += i * " + I(d.strides[0]) + "ll; return o;";
  return code;
}

void Constant(SourceWriter& w, const std::string& type, const std::string& name,
              const std::string& value) {
  w.Line("  static constexpr " + type + " " + name + " = " + value + ";");
}

// kX, kXOff and the strides kXSb, kX<axis1>, kX<axis2> of operand X.
void Operand3(SourceWriter& w, const std::string& prefix, const Strided3& s,
              const std::string& axis1, const std::string& axis2) {
  Constant(w, "int", "k" + prefix, I(s.buffer));
  Constant(w, "long long", "k" + prefix + "Off", I(s.offset) + "ll");
  Constant(w, "long long", "k" + prefix + "Sb", I(s.s0) + "ll");
  Constant(w, "long long", "k" + prefix + axis1, I(s.s1) + "ll");
  Constant(w, "long long", "k" + prefix + axis2, I(s.s2) + "ll");
  Constant(w, "bool", "k" + prefix + "Flagged", s.flagged ? "true" : "false");
}

void Operand1(SourceWriter& w, const std::string& prefix, const Strided1& s) {
  Constant(w, "int", "k" + prefix, I(s.buffer));
  Constant(w, "long long", "k" + prefix + "Off", I(s.offset) + "ll");
  Constant(w, "long long", "k" + prefix + "S", I(s.stride) + "ll");
}

void WaitLambda(SourceWriter& w, const std::vector<Stage>& stages, const Stage& stage) {
  if (stage.waits.empty()) {
    w.Line("  const ::gpuos::device::stitch::NoWait wait;");
    return;
  }
  std::string poll;
  if (stage.waits.size() == 1) {
    const std::uint32_t p = stage.waits[0];
    poll = "tile.Poll(" + I(p) + ", " + I(stages[p].tiles) + "u);";
  } else {
    // Every counter read at once (Tile::Poll of arrays).
    std::string ids, tiles;
    for (std::uint32_t p : stage.waits) {
      ids += (ids.empty() ? "" : ", ") + I(p);
      tiles += (tiles.empty() ? "" : ", ") + I(stages[p].tiles) + "u";
    }
    poll = "constexpr int kStages[] = {" + ids + "}; constexpr unsigned int kTiles[] = {" + tiles +
           "}; tile.Poll(kStages, kTiles);";
  }
  w.Line("  const auto wait = [&]() { if (threadIdx.x == 0) { " + poll + " } __syncthreads(); };");
}

// The stage's Run(ctx, t, smem) up to its stage code: the tile (its loads
// in flight with the stage's first ones) and the wait. Elementwise stages
// do not use `smem`.
struct RunContext {
  std::uint32_t index = 0;  // the stage's
  std::uint32_t total_tiles = 0;
  bool waited_for = true;  // whether a later stage waits for this one's count
};
void RunHead(SourceWriter& w, const std::vector<Stage>& stages, const Stage& stage,
             const RunContext& run) {
  const bool uses_smem = stage.kind != Stage::Kind::kElementwise;
  w.Line(
      "__device__ __noinline__ void Run(const ::gpuos::device::OpContext& ctx, int t, "
      "unsigned char*" +
      std::string(uses_smem ? " smem" : "") + ") {");
  w.Line("  const ::gpuos::device::stitch::Tile tile(ctx, " +
         I(static_cast<long long>(stages.size())) + ", " + I(run.total_tiles) + "u, " +
         (stage.waits.empty() ? "false" : "true") + ");");
  w.Line("  GPUOS_PHASE_BEGIN(phase_clock);");
  WaitLambda(w, stages, stage);
}

// The end of Run: the tile counted done.
void RunTail(SourceWriter& w, const RunContext& run) {
  w.Line("  GPUOS_PHASE_MARK(phase_clock, 10);");
  w.Line(run.waited_for ? "  tile.Done(" + I(run.index) + ");"
                        : std::string("  tile.DoneUnwaited();"));
  w.Line("  GPUOS_PHASE_MARK(phase_clock, 11);");
  w.Line("}");
}

void MatmulCode(SourceWriter& w, const MatmulStage& mm) {
  w.Line("struct P {");
  w.Line("  using T = float;");
  Constant(w, "int", "kBatch", I(mm.batch));
  Constant(w, "int", "kM", I(mm.m));
  Constant(w, "int", "kN", I(mm.n));
  Constant(w, "int", "kK", I(mm.k));
  Operand3(w, "A", mm.a, "Sm", "Sk");
  Operand3(w, "B", mm.b, "Sk", "Sn");
  Constant(w, "bool", "kBias", mm.bias ? "true" : "false");
  Operand3(w, "C", mm.c, "Sm", "Sn");
  Constant(w, "double", "kAlpha", DoubleLiteral(mm.alpha));
  Constant(w, "double", "kBeta", DoubleLiteral(mm.beta));
  Constant(w, "int", "kNorm", I(mm.norm));
  Constant(w, "double", "kEps", DoubleLiteral(mm.eps));
  Operand1(w, "G", mm.norm_weight);
  Operand1(w, "H", mm.norm_bias);
  Constant(w, "int", "kAct", I(mm.activation));
  Constant(w, "bool", "kResidual", mm.residual ? "true" : "false");
  Operand3(w, "R", mm.r, "Sm", "Sn");
  Operand3(w, "O", mm.out, "Sm", "Sn");
  Constant(w, "bool", "kKFast", mm.k_fast ? "true" : "false");
  Constant(w, "int", "kVec", I(mm.vec));
  Constant(w, "int", "kBM", I(mm.bm));
  Constant(w, "int", "kBN", I(mm.bn));
  Constant(w, "int", "kKG", I(mm.kg));
  Constant(w, "bool", "kPrefetchB", mm.prefetch_b ? "true" : "false");
  Constant(w, "bool", "kBiasReady", mm.bias_ready ? "true" : "false");
  w.Line("};");
}

void RowsCode(SourceWriter& w, const RowsStage& rows) {
  w.Line("struct P {");
  w.Line("  using T = float;");
  Constant(w, "int", "kKind", I(rows.kind));
  Constant(w, "long long", "kRows", I(rows.rows) + "ll");
  Constant(w, "int", "kL", I(rows.length));
  Constant(w, "int", "kRowsPerTile", I(rows.rows_per_tile));
  Constant(w, "int", "kIn", I(rows.in.buffer));
  Constant(w, "long long", "kInOff", I(rows.in.offset) + "ll");
  Constant(w, "long long", "kInSL", I(rows.in.element_stride) + "ll");
  Constant(w, "bool", "kInFlagged", rows.in.flagged ? "true" : "false");
  Constant(w, "int", "kOut", I(rows.out.buffer));
  Constant(w, "long long", "kOutOff", I(rows.out.offset) + "ll");
  Constant(w, "long long", "kOutSL", I(rows.out.element_stride) + "ll");
  Operand1(w, "G", rows.weight);
  Operand1(w, "H", rows.bias);
  Constant(w, "double", "kEps", DoubleLiteral(rows.eps));
  Constant(w, "int", "kAct", I(rows.activation));
  Constant(w, "bool", "kParametersReady", rows.parameters_ready ? "true" : "false");
  w.Line("  static __device__ __forceinline__ long long InRow(long long i) { " +
         OffsetBody(rows.in.lead_sizes, rows.in.lead_strides) + " }");
  w.Line("  static __device__ __forceinline__ long long OutRow(long long i) { " +
         OffsetBody(rows.out.lead_sizes, rows.out.lead_strides) + " }");
  w.Line("};");
}

void AttentionCode(SourceWriter& w, const AttentionStage& at) {
  w.Line("struct P {");
  w.Line("  using T = float;");
  Constant(w, "int", "kBatch", I(at.batch));
  Constant(w, "int", "kM", I(at.m));
  Constant(w, "int", "kN", I(at.n));
  Constant(w, "int", "kD", I(at.d));
  Constant(w, "int", "kDv", I(at.dv));
  Operand3(w, "Q", at.q, "Sm", "Sk");
  Operand3(w, "Kt", at.kt, "Sk", "Sn");
  Operand3(w, "Kt2", at.kt2, "Sk", "Sn");
  Constant(w, "int", "kKtSplit", I(at.kt_split));
  Operand3(w, "V", at.v, "Sk", "Sn");
  Operand3(w, "V2", at.v2, "Sk", "Sn");
  Constant(w, "int", "kVSplit", I(at.v_split));
  Operand3(w, "S", at.scores, "Sm", "Sn");
  Operand3(w, "Pr", at.probs, "Sm", "Sn");
  Operand3(w, "O", at.out, "Sm", "Sn");
  Constant(w, "double", "kAlpha", DoubleLiteral(at.alpha));
  Constant(w, "int", "kBM", I(at.bm));
  Constant(w, "int", "kSplit", I(at.split));
  Constant(w, "int", "kVec", I(at.vec));
  Constant(w, "bool", "kStoreScores", at.store_scores ? "true" : "false");
  Constant(w, "bool", "kStoreProbs", at.store_probs ? "true" : "false");
  w.Line("};");
}

void ElementwiseCode(SourceWriter& w, const ElementwiseStage& ew, const std::vector<Stage>& stages,
                     const Stage& stage, const RunContext& run, const std::string& virtual_file) {
  const std::size_t n = ew.inputs.size();
  w.Line("using T = float;");
  w.Line("using compute_t = ::gpuos::device::compute_type_t<T>;");
  std::vector<std::string> params;
  for (std::size_t k = 0; k < n; ++k) params.push_back("const compute_t in" + I(k));
  params.push_back("compute_t& out");
  if (ew.spec.name.empty()) {  // a copy (a part of a cat)
    w.Line("__device__ __forceinline__ void stage_body(" + Join(params) + ") { out = in0; }");
  } else {
    const std::string suffix = std::string(kInstantiationMarker) + "f32";
    if (!ew.spec.device_code.empty()) w.PackCode(ew.spec.device_code, virtual_file, suffix);
    w.Line("__device__ __forceinline__ void stage_body(" + Join(params) + ") {");
    w.PackCode(ew.spec.body, virtual_file, suffix);
    w.Line("}");
  }
  for (std::size_t k = 0; k <= n; ++k) {
    const ElementwiseView& v = k < n ? ew.inputs[k] : ew.out;
    w.Line("__device__ __forceinline__ long long Offset" + I(k) + "(long long i) { " +
           OffsetBody(ew.sizes, v.strides) + " }");
  }
  RunHead(w, stages, stage, run);
  w.Line("  constexpr long long kNumel = " + I(ew.numel) + "ll;");
  w.Line("  constexpr int kPerThread = " + I(ew.per_thread) + ";");
  for (std::size_t k = 0; k < n; ++k) {
    w.Line("  const T* const in" + I(k) + " = tile.ptr<const T>(" + I(ew.inputs[k].buffer) +
           ") + " + I(ew.inputs[k].offset) + "ll;");
  }
  w.Line("  T* const out = tile.ptr<T>(" + I(ew.out.buffer) + ") + " + I(ew.out.offset) + "ll;");
  w.Line("  wait();");
  w.Line(
      "  const long long first = static_cast<long long>(t) * kPerThread * "
      "::gpuos::device::stitch::kThreads + threadIdx.x;");
  for (std::size_t k = 0; k < n; ++k) w.Line("  compute_t v" + I(k) + "[kPerThread];");
  w.Line("#pragma unroll");
  w.Line("  for (int e = 0; e < kPerThread; ++e) {");
  w.Line(
      "    const long long i = first + static_cast<long long>(e) * "
      "::gpuos::device::stitch::kThreads;");
  for (std::size_t k = 0; k < n; ++k) {
    w.Line("    v" + I(k) +
           "[e] = i < kNumel ? ::gpuos::device::convert<compute_t>("
           "::gpuos::device::stitch::Load(in" +
           I(k) + " + Offset" + I(k) +
           "(i))) : "
           "compute_t(0);");
  }
  w.Line("  }");
  w.Line("#pragma unroll");
  w.Line("  for (int e = 0; e < kPerThread; ++e) {");
  w.Line(
      "    const long long i = first + static_cast<long long>(e) * "
      "::gpuos::device::stitch::kThreads;");
  w.Line("    if (i >= kNumel) continue;");
  w.Line("    compute_t result{};");
  std::vector<std::string> args;
  for (std::size_t k = 0; k < n; ++k) args.push_back("v" + I(k) + "[e]");
  args.push_back("result");
  w.Line("    stage_body(" + Join(args) + ");");
  w.Line("    out[Offset" + I(n) + "(i)] = ::gpuos::device::convert<T>(result);");
  w.Line("  }");
  RunTail(w, run);
}

}  // namespace

std::string DoubleLiteral(double value) {
  if (std::isnan(value)) return "__longlong_as_double(0x7ff8000000000000ll)";
  if (std::isinf(value)) {
    return value > 0 ? "__longlong_as_double(0x7ff0000000000000ll)"
                     : "__longlong_as_double(static_cast<long long>(0xfff0000000000000ull))";
  }
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", value);
  std::string s(text);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

ElementBounds BoundsOf(long long offset, const long long* sizes, const long long* strides,
                       std::size_t rank) {
  ElementBounds bounds{offset, offset};
  for (std::size_t d = 0; d < rank; ++d) {
    const long long extent = (sizes[d] - 1) * strides[d];
    (extent < 0 ? bounds.low : bounds.high) += extent;
  }
  return bounds;
}

Dims Coalesce(const std::vector<long long>& sizes, const std::vector<long long>& strides) {
  Dims d;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (!d.sizes.empty() && d.strides.back() == strides[i] * sizes[i]) {
      d.sizes.back() *= sizes[i];
      d.strides.back() = strides[i];
      continue;
    }
    d.sizes.push_back(sizes[i]);
    d.strides.push_back(strides[i]);
  }
  return d;
}

StitchCode GenerateStitchCode(const std::vector<Stage>& stages, std::uint32_t total_tiles,
                              const std::string& virtual_file) {
  SourceWriter w(virtual_file);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    std::string waits;
    for (std::uint32_t p : stage.waits) waits += (waits.empty() ? "" : ", ") + ("s" + I(p));
    w.Line("namespace s" + I(s) + " {  // " + stage.op + " (task " + I(stage.task) + "): tiles " +
           I(stage.first_tile) + ".." + I(stage.first_tile + stage.tiles - 1) +
           (waits.empty() ? "" : ", waits for " + waits));
    bool waited_for = false;
    for (const Stage& other : stages) {
      for (std::uint32_t p : other.waits) waited_for = waited_for || p == s;
    }
    const RunContext run{static_cast<std::uint32_t>(s), total_tiles, waited_for};
    if (stage.kind == Stage::Kind::kElementwise) {
      ElementwiseCode(w, stage.elementwise, stages, stage, run, virtual_file);
    } else {
      const bool matmul = stage.kind == Stage::Kind::kMatmul;
      const bool attention = stage.kind == Stage::Kind::kAttention;
      if (matmul) {
        MatmulCode(w, stage.matmul);
      } else if (attention) {
        AttentionCode(w, stage.attention);
      } else {
        RowsCode(w, stage.rows);
      }
      RunHead(w, stages, stage, run);
      if (matmul) {
        w.Line("  ::gpuos::device::stitch::Matmul<P>(tile, t, smem, wait);");
      } else if (attention) {
        w.Line(std::string("  ::gpuos::device::stitch::") +
               (stage.attention.mma ? "AttentionMma" : "Attention") + "<P>(tile, t, smem, wait);");
      } else {
        w.Line("  (void)smem;");
        w.Line("  ::gpuos::device::stitch::Rows<P>(tile, t, wait);");
      }
      RunTail(w, run);
    }
    w.Line("}  // namespace s" + I(s));
  }
  StitchCode code = WithDeviceCode(w.Take());

  std::string body;
  body += "(void)table;\n";
  body += "const int t = static_cast<int>(ctx.begin());\n";
  body += "unsigned char* const smem = ctx.scratch<unsigned char>();\n";
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    body += "if (t < " + I(stage.first_tile + stage.tiles) + ") {\n";
    body += "  s" + I(s) + "::Run(ctx, t - " + I(stage.first_tile) + ", smem);\n";
    body += "  return;\n";
    body += "}\n";
  }
  code.body = std::move(body);
  return code;
}

}  // namespace gpuos::registry::jit
