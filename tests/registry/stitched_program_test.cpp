// StitchProgram: stages, tiles and waits of the PyTorch workloads' programs,
// every generated operator compiled with the real NVRTC (no GPU), names,
// and every refusal. The GPU runs them in frontends/pytorch/tests.
#include "gpuos/registry/stitched_program.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "jit_test_util.h"

namespace gpuos::registry {
namespace {

using testing::BuiltinOperators;
using testing::ScopedEnv;
using testing::TestOptions;

class StitchedProgramTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ops_ = new std::vector<OperatorSpec>(BuiltinOperators()); }
  static void TearDownTestSuite() {
    delete ops_;
    ops_ = nullptr;
  }

  static const OperatorSpec* Op(const std::string& name) {
    return testing::FindOperatorOrFail(*ops_, name);
  }

  // A dense row-major view of `sizes` at `offset` of `buffer`.
  static StitchView Dense(std::uint32_t buffer, std::vector<long long> sizes,
                          long long offset = 0) {
    StitchView v;
    v.buffer = buffer;
    v.offset = offset;
    v.sizes = sizes;
    v.strides.assign(sizes.size(), 1);
    for (std::size_t d = sizes.size(); d-- > 1;) v.strides[d - 1] = v.strides[d] * sizes[d];
    return v;
  }
  static StitchView View(std::uint32_t buffer, std::vector<long long> sizes,
                         std::vector<long long> strides, long long offset = 0) {
    StitchView v;
    v.buffer = buffer;
    v.offset = offset;
    v.sizes = std::move(sizes);
    v.strides = std::move(strides);
    return v;
  }
  static StitchTask Task(const std::string& op, std::vector<StitchView> tensors,
                         std::vector<std::pair<std::string, std::string>> attributes = {}) {
    StitchTask task;
    task.op = Op(op);
    task.tensors = std::move(tensors);
    task.attributes = std::move(attributes);
    return task;
  }

  // A Linear layer over `rows` tokens: x [rows, 256] @ W^T + b, W [256, 256].
  static StitchTask Linear(const std::string& op, std::uint32_t x, std::uint32_t w, std::uint32_t b,
                           std::uint32_t out, long long rows, long long k, long long n) {
    std::vector<StitchView> t = {Dense(x, {rows, k}), View(w, {k, n}, {1, k}),
                                 View(b, {rows, n}, {0, 1})};
    if (op == "fused_addmm") {
      t.push_back(View(b, {k}, {1}));  // norm weight and bias: any 1-D of K
      t.push_back(View(b, {k}, {1}));
      t.push_back(Dense(x, {rows, k}));
    }
    t.push_back(Dense(out, {rows, n}));
    return Task(op, std::move(t));
  }

  // mlp_microbatch's program at batch `rows`: addmm, three fused_addmm with
  // a layer_norm + gelu prologue, a layer_norm with gelu (buffers: input 0,
  // parameters, intermediates, output 21; as gpuos/_lowering.py numbers them).
  static StitchDesc Mlp(long long rows) {
    StitchDesc desc;
    desc.num_buffers = 22;
    desc.tasks.push_back(Linear("addmm", 0, 1, 2, 3, rows, 256, 256));
    std::uint32_t in = 3;
    for (std::uint32_t layer = 0; layer < 3; ++layer) {
      const std::uint32_t base = 4 + layer * 5;
      StitchTask t = Linear("fused_addmm", in, base + 2, base + 3, base + 4, rows, 256, 256);
      t.tensors[3] = Dense(base, {256});
      t.tensors[4] = Dense(base + 1, {256});
      t.attributes = {{"norm", "2"}, {"eps", "1e-05"}};
      desc.tasks.push_back(std::move(t));
      in = base + 4;
    }
    desc.tasks.push_back(
        Task("layer_norm",
             {Dense(in, {rows, 256}), Dense(19, {256}), Dense(20, {256}), Dense(21, {rows, 256})},
             {{"eps", "1e-05"}, {"activation", "1"}}));
    return desc;
  }

  // attention_small: scores = q k^T / 8 (baddbmm, beta 0), softmax, @ v.
  static StitchDesc Attention(long long seq) {
    StitchDesc desc;
    desc.num_buffers = 7;
    const long long h = 8, d = 64;
    desc.tasks.push_back(Task("baddbmm",
                              {Dense(0, {h, seq, d}), View(1, {h, d, seq}, {seq * d, 1, d}),
                               Dense(4, {h, seq, seq}), Dense(3, {h, seq, seq})},
                              {{"alpha", "0.125"}, {"beta", "0.0"}}));
    desc.tasks.push_back(Task("softmax", {Dense(3, {1, h, seq, seq}), Dense(5, {1, h, seq, seq})}));
    desc.tasks.push_back(
        Task("bmm", {Dense(5, {h, seq, seq}), Dense(2, {h, seq, d}), Dense(6, {h, seq, d})}));
    return desc;
  }

  // One decoder layer's attention over a KV cache of 128: the new key and
  // value rows come from the QKV product (buffer 9, [1, 768]).
  static StitchDesc DecoderAttention() {
    StitchDesc desc;
    desc.num_buffers = 16;
    desc.tasks.push_back(Linear("addmm", 0, 7, 8, 9, 1, 256, 768));
    for (std::uint32_t part = 0; part < 2; ++part) {
      const std::uint32_t cache = 1 + part, out = 10 + part;
      desc.tasks.push_back(Task(
          "cat",
          {Dense(cache, {1, 4, 128, 64}),
           View(9, {1, 4, 1, 64}, {768, 64, 64, 1}, 256 + 256 * part), Dense(out, {1, 4, 129, 64})},
          {{"dim", "2"}}));
    }
    desc.tasks.push_back(
        Task("baddbmm",
             {View(9, {4, 1, 64}, {64, 64, 1}), View(10, {4, 64, 129}, {8256, 1, 64}),
              Dense(13, {4, 1, 129}), Dense(12, {4, 1, 129})},
             {{"alpha", "0.125"}, {"beta", "0.0"}}));
    desc.tasks.push_back(Task("softmax", {Dense(12, {1, 4, 1, 129}), Dense(14, {1, 4, 1, 129})}));
    desc.tasks.push_back(
        Task("bmm", {Dense(14, {4, 1, 129}), Dense(11, {4, 129, 64}), Dense(15, {4, 1, 64})}));
    return desc;
  }

  static void ExpectCompiles(const StitchedProgram& program) {
    ASSERT_TRUE(ValidateOperator(program.op).ok());
    JitBuilder builder(nullptr, TestOptions("sm_90"));
    BuildStats stats;
    const Status compiled = builder.Compile({program.op}, &stats);
    EXPECT_TRUE(compiled.ok()) << compiled.ToString();
  }

  static std::vector<OperatorSpec>* ops_;
};

std::vector<OperatorSpec>* StitchedProgramTest::ops_ = nullptr;

// Batch 3: fewer rows than warps and not a power of two.
TEST_F(StitchedProgramTest, MlpIsOneStagePerTaskInAChainAndCompiles) {
  for (long long rows : {1, 3, 8}) {
    SCOPED_TRACE("batch " + std::to_string(rows));
    auto program = StitchProgram(Mlp(rows));
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    ASSERT_EQ(program->stages.size(), 5u);
    std::uint32_t tiles = 0;
    for (std::size_t s = 0; s < program->stages.size(); ++s) {
      const StitchStage& stage = program->stages[s];
      EXPECT_EQ(stage.task, s);
      EXPECT_EQ(stage.first_tile, tiles);
      tiles += stage.tiles;
      if (s == 0) {
        EXPECT_TRUE(stage.waits.empty());
      } else {
        EXPECT_EQ(stage.waits, std::vector<std::uint32_t>{static_cast<std::uint32_t>(s - 1)});
      }
    }
    EXPECT_EQ(program->stages[0].kind, "matmul");
    EXPECT_EQ(program->stages[4].kind, "rows");
    EXPECT_EQ(program->stages[4].tiles, 1u);
    EXPECT_GE(program->stages[1].tiles, 8u);  // a Linear spreads over blocks
    EXPECT_EQ(program->tiles, tiles);
    EXPECT_EQ(program->table_entries, 23u);
    EXPECT_EQ(program->counter_bytes, 6u * 128u);
    EXPECT_EQ(program->task_counter_offset, 5u * 128u);  // after the 5 stages' counters
    EXPECT_EQ(program->op.kind, OperatorKind::kCustom);
    EXPECT_EQ(program->op.dtypes, std::vector<DType>{DType::kU8});
    EXPECT_EQ(program->op.name.rfind(kStitchedOperatorPrefix, 0), 0u);
    ExpectCompiles(*program);
  }
}

// Few-rows products whose warps hold 7 (one column a warp), 40 and 64
// outputs (64 columns a tile, two outputs a lane after the reduce-scatter:
// stitch.cuh, WarpReduceScatter); the GPU test of the same shapes compares
// them with eager (test_gpu_stitch.py, test_few_rows_products_match_eager).
TEST_F(StitchedProgramTest, FewRowsProductsOfEveryOutputCountCompile) {
  struct Shape {
    long long rows, k, n;
    std::uint32_t tiles;  // of the first product
  };
  for (const Shape& shape :
       {Shape{7, 64, 96, 12}, Shape{5, 128, 1024, 16}, Shape{8, 128, 1024, 16}}) {
    SCOPED_TRACE(std::to_string(shape.rows) + " x " + std::to_string(shape.k) + " x " +
                 std::to_string(shape.n));
    StitchDesc desc;
    desc.num_buffers = 7;
    desc.tasks.push_back(Linear("addmm", 0, 1, 2, 3, shape.rows, shape.k, shape.n));
    desc.tasks.push_back(Linear("addmm", 3, 4, 5, 6, shape.rows, shape.n, 64));
    auto program = StitchProgram(desc);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    ASSERT_EQ(program->stages.size(), 2u);
    EXPECT_EQ(program->stages[0].tiles, shape.tiles);
    ExpectCompiles(*program);
  }
}

TEST_F(StitchedProgramTest, AttentionIsOneStageAndCompilesAtBothSequenceLengths) {
  struct Case {
    bool mma;
    long long seq;
  };
  for (const Case c : {Case{true, 32}, Case{true, 128}, Case{false, 32}, Case{false, 128}}) {
    const bool mma = c.mma;
    const long long seq = c.seq;
    SCOPED_TRACE("seq " + std::to_string(seq) + (mma ? ", tensor cores" : ", CUDA cores"));
    StitchDesc desc = Attention(seq);
    desc.attention_mma = mma;
    auto program = StitchProgram(desc);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    ASSERT_EQ(program->stages.size(), 1u);
    EXPECT_EQ(program->stages[0].kind, "attention");
    EXPECT_EQ(program->stages[0].task, 0u);
    EXPECT_EQ(program->stages[0].tensor_cores, mma);
    EXPECT_EQ(program->op.description.find("; on the tensor cores: stages 0") != std::string::npos,
              mma)
        << program->op.description;
    // 8 heads. On the tensor cores 16 queries a tile (an m16 product's
    // rows). On the CUDA cores 8 a tile at seq 32, 10 at seq 128 (13 tiles a
    // head: QueriesPerTile takes as many as fit once tiles would outnumber
    // half the 132 blocks).
    EXPECT_EQ(program->stages[0].tiles, mma ? (seq == 32 ? 16u : 64u) : (seq == 32 ? 32u : 104u));
    EXPECT_NE(program->op.device_code.code.find(mma ? "AttentionMma<P>" : "Attention<P>"),
              std::string::npos);
    EXPECT_EQ(program->counter_bytes, 2u * 128u);
    // The probabilities are stored per head, at the strides the product
    // reads them with (the softmax's views are rank 4: no batch stride).
    const std::string& code = program->op.device_code.code;
    EXPECT_NE(code.find("kPrSb = " + std::to_string(seq * seq) + "ll;"), std::string::npos)
        << code.substr(0, 4000);
    ExpectCompiles(*program);
  }
}

// The tensor cores' stage only where its shapes fit (stitch_plan.cpp,
// MmaFits): d and the keys multiples of 16 up to 64 and 128, v's columns
// multiples of 8 up to 64, 16 queries or more, keys contiguous along d, no
// cat's parts; the others keep the CUDA-core stage. Each compiles.
TEST_F(StitchedProgramTest, AttentionTakesTheTensorCoresOnlyWhereItsShapesFit) {
  struct Shape {
    long long m, n, d, dv;
    bool keys_contiguous, fits;
  };
  const Shape shapes[] = {{32, 32, 64, 64, true, true},   {97, 128, 64, 64, true, true},
                          {16, 16, 16, 8, true, true},    {48, 48, 48, 40, true, true},
                          {8, 32, 64, 64, true, false},   {32, 40, 64, 64, true, false},
                          {32, 144, 64, 64, true, false}, {32, 32, 72, 64, true, false},
                          {32, 32, 128, 64, true, false}, {32, 32, 64, 96, true, false},
                          {32, 32, 64, 12, true, false},  {32, 32, 64, 64, false, false}};
  for (const Shape& shape : shapes) {
    SCOPED_TRACE("m " + std::to_string(shape.m) + ", n " + std::to_string(shape.n) + ", d " +
                 std::to_string(shape.d) + ", dv " + std::to_string(shape.dv) +
                 (shape.keys_contiguous ? "" : ", keys strided"));
    const long long h = 2, m = shape.m, n = shape.n, d = shape.d, dv = shape.dv;
    StitchDesc desc;
    desc.num_buffers = 7;
    const StitchView kt =
        shape.keys_contiguous ? View(1, {h, d, n}, {n * d, 1, d}) : Dense(1, {h, d, n});
    desc.tasks.push_back(Task("baddbmm",
                              {Dense(0, {h, m, d}), kt, Dense(4, {h, m, n}), Dense(3, {h, m, n})},
                              {{"alpha", "0.125"}, {"beta", "0.0"}}));
    desc.tasks.push_back(Task("softmax", {Dense(3, {h, m, n}), Dense(5, {h, m, n})}));
    desc.tasks.push_back(
        Task("bmm", {Dense(5, {h, m, n}), Dense(2, {h, n, dv}), Dense(6, {h, m, dv})}));
    auto program = StitchProgram(desc);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    ASSERT_EQ(program->stages.size(), 1u);
    ASSERT_EQ(program->stages[0].kind, "attention");
    EXPECT_EQ(program->stages[0].tensor_cores, shape.fits);
    if (shape.fits) {
      EXPECT_EQ(program->stages[0].tiles, h * ((m + 15) / 16));
    }
    ExpectCompiles(*program);
  }
  auto decoder = StitchProgram(DecoderAttention());  // one query, keys through a cat
  ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
  for (const StitchStage& stage : decoder->stages) EXPECT_FALSE(stage.tensor_cores);
}

// One query a tile of odd shapes: warps without keys and dimensions that
// are no multiple of 32 (5 keys of 48, values of 40), 250 keys of 32, 600
// keys (more than one pass of lanes holds at once); each compiles.
TEST_F(StitchedProgramTest, OneQueryAttentionCompilesForOddShapes) {
  const auto one_query = [&](long long heads, long long keys, long long d, long long dv) {
    StitchDesc desc;
    desc.num_buffers = 7;
    desc.tasks.push_back(Task("baddbmm",
                              {Dense(0, {heads, 1, d}), View(1, {heads, d, keys}, {keys * d, 1, d}),
                               Dense(4, {heads, 1, keys}), Dense(3, {heads, 1, keys})},
                              {{"alpha", "0.125"}, {"beta", "0.0"}}));
    desc.tasks.push_back(Task("softmax", {Dense(3, {heads, 1, keys}), Dense(5, {heads, 1, keys})}));
    desc.tasks.push_back(Task("bmm", {Dense(5, {heads, 1, keys}), Dense(2, {heads, keys, dv}),
                                      Dense(6, {heads, 1, dv})}));
    return desc;
  };
  for (const StitchDesc& desc :
       {one_query(3, 5, 48, 40), one_query(2, 250, 32, 24), one_query(2, 600, 64, 64)}) {
    auto program = StitchProgram(desc);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    ASSERT_EQ(program->stages.size(), 1u);
    EXPECT_EQ(program->stages[0].kind, "attention");
    ExpectCompiles(*program);
  }
}

// Scores and probabilities in the program's own workspace that no other
// stage reads stay in the tile's shared memory (docs/stitching.md,
// "Attention"); read by a later task, or outside the workspace, they are
// stored as the unfused tasks would store them.
TEST_F(StitchedProgramTest, AttentionStoresOnlyTheIntermediatesSomethingElseReads) {
  const auto stitch = [&](const StitchDesc& desc) {
    auto program = StitchProgram(desc);
    EXPECT_TRUE(program.ok()) << program.status().ToString();
    return program.ok() ? *program : StitchedProgram{};
  };
  const auto has = [](const StitchedProgram& p, const std::string& text) {
    return p.op.device_code.code.find(text) != std::string::npos;
  };
  StitchDesc internal = Attention(32);
  internal.internal_buffers = {3, 4, 5};
  const StitchedProgram on_chip = stitch(internal);
  ASSERT_EQ(on_chip.stages.size(), 1u);
  EXPECT_FALSE(on_chip.stages[0].stores_scores);
  EXPECT_FALSE(on_chip.stages[0].stores_probs);
  EXPECT_TRUE(has(on_chip, "kStoreScores = false;"));
  EXPECT_TRUE(has(on_chip, "kStoreProbs = false;"));
  EXPECT_NE(on_chip.op.description.find("; unread scores and probabilities not stored: stages 0"),
            std::string::npos)
      << on_chip.op.description;
  ExpectCompiles(on_chip);

  // A later task reads the scores (relu into buffer 7): they are stored,
  // the probabilities still are not.
  StitchDesc scores_read = internal;
  scores_read.num_buffers = 8;
  scores_read.tasks.push_back(Task("relu", {Dense(3, {8, 32, 32}), Dense(7, {8, 32, 32})}));
  const StitchedProgram read = stitch(scores_read);
  ASSERT_EQ(read.stages.size(), 2u);
  EXPECT_TRUE(read.stages[0].stores_scores);
  EXPECT_FALSE(read.stages[0].stores_probs);
  EXPECT_TRUE(has(read, "kStoreScores = true;"));
  EXPECT_NE(read.op.description.find("not stored: stages 0 (probabilities)"), std::string::npos)
      << read.op.description;
  EXPECT_EQ(read.stages[1].waits, std::vector<std::uint32_t>{0});
  ExpectCompiles(read);

  // Not in the workspace (the program's caller may read them), or the
  // switch off: both stored.
  for (bool inside : {false, true}) {
    StitchDesc desc = Attention(32);
    if (inside) {
      desc.internal_buffers = {3, 4, 5};
      desc.drop_unread_intermediates = false;
    }
    const StitchedProgram stored = stitch(desc);
    ASSERT_EQ(stored.stages.size(), 1u);
    EXPECT_TRUE(stored.stages[0].stores_scores);
    EXPECT_TRUE(stored.stages[0].stores_probs);
    EXPECT_TRUE(has(stored, "kStoreProbs = true;"));
    EXPECT_EQ(stored.op.description.find("not stored"), std::string::npos);
  }
}

TEST_F(StitchedProgramTest, AttentionUnfusedIsThreeStagesAndCompiles) {
  for (long long seq : {32, 128}) {
    SCOPED_TRACE("seq " + std::to_string(seq));
    StitchDesc desc = Attention(seq);
    desc.fuse_attention = false;
    auto program = StitchProgram(desc);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    ASSERT_EQ(program->stages.size(), 3u);
    EXPECT_EQ(program->stages[1].waits, std::vector<std::uint32_t>{0});
    EXPECT_EQ(program->stages[2].waits, std::vector<std::uint32_t>{1});
    ExpectCompiles(*program);
  }
}

// Queries a tile, lanes per key and vector loads follow the shapes: every
// thread a key where the keys allow (up to 8 lanes each), at most 64 values
// of a key a lane, and 8 queries a tile unless q's rows and the scores
// would not fit the scratch, or more where tiles of 8 would outnumber half
// the blocks (QueriesPerTile).
// The CUDA-core stage's tiling (StitchDesc::attention_mma off: the tensor
// cores' tiles are 16 queries, AttentionIsOneStageAndCompilesAtBoth...).
TEST_F(StitchedProgramTest, AttentionTilingFollowsTheShapes) {
  const auto code_of = [](StitchDesc desc) {
    desc.attention_mma = false;
    auto program = StitchProgram(desc);
    EXPECT_TRUE(program.ok()) << program.status().ToString();
    EXPECT_EQ(program.ok() ? program->stages.size() : 0u, 1u);
    return program.ok() ? program->op.device_code.code : std::string();
  };
  const auto has = [](const std::string& code, const std::string& constant) {
    return code.find(constant) != std::string::npos;
  };
  const std::string seq32 = code_of(Attention(32));
  EXPECT_TRUE(has(seq32, "kSplit = 8;") && has(seq32, "kBM = 8;") && has(seq32, "kVec = 4;"))
      << seq32.substr(0, 3000);
  // 128 tiles of 8 queries would be more than half of 132 blocks: as many
  // queries as the scratch holds (10: 2048 values / (64 + 128), and the
  // value step's sums 3 x 10 x 64 <= 2048), 104 tiles.
  const std::string seq128 = code_of(Attention(128));
  EXPECT_TRUE(has(seq128, "kSplit = 2;") && has(seq128, "kBM = 10;")) << seq128.substr(0, 3000);
  StitchDesc many_blocks = Attention(128);
  many_blocks.worker_blocks = 264;
  many_blocks.attention_mma = false;
  auto spread = StitchProgram(many_blocks);
  ASSERT_TRUE(spread.ok()) << spread.status().ToString();
  EXPECT_TRUE(has(spread->op.device_code.code, "kBM = 8;"));
  EXPECT_EQ(spread->stages[0].tiles, 128u);
  // 64 heads of 36 queries (5 tiles of 8 a head: 320 tiles), keys of 8
  // values (2048 / 44 = 46 rows of q and scores fit). With 32 columns of v
  // the value step's sums allow 2048 / (7 x 32) = 9 queries: 4 tiles of 9.
  // With 256 columns (no sums) the cap, 16, gives 3 tiles a head, filled
  // evenly: 12 queries each. With 32 queries a head, 9 would not save a
  // tile over 8 (4 either way), so 8 stays.
  const auto small_heads = [](long long m, long long dv) {
    StitchDesc desc = Attention(32);
    desc.tasks[0].tensors = {Dense(0, {64, m, 8}), Dense(1, {64, 8, m}), Dense(4, {64, m, m}),
                             Dense(3, {64, m, m})};
    desc.tasks[1].tensors = {Dense(3, {64, m, m}), Dense(5, {64, m, m})};
    desc.tasks[2].tensors = {Dense(5, {64, m, m}), Dense(2, {64, m, dv}), Dense(6, {64, m, dv})};
    return desc;
  };
  struct Case {
    long long m, dv;
    int bm;
    std::uint32_t tiles;
  };
  for (const Case& c : {Case{36, 32, 9, 256}, Case{36, 256, 12, 192}, Case{32, 32, 8, 256}}) {
    SCOPED_TRACE("m " + std::to_string(c.m) + ", dv " + std::to_string(c.dv));
    auto program = StitchProgram(small_heads(c.m, c.dv));
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    EXPECT_TRUE(has(program->op.device_code.code, "kBM = " + std::to_string(c.bm) + ";"))
        << program->op.device_code.code.substr(0, 3000);
    EXPECT_EQ(program->stages[0].tiles, c.tiles);
    ExpectCompiles(*program);
  }
  // 1000 keys of 128 values: 2 lanes a key (64 values each), 1 query a tile.
  StitchDesc long_keys = Attention(32);
  long_keys.tasks[0].tensors = {Dense(0, {8, 32, 128}), View(1, {8, 128, 1000}, {128000, 1, 128}),
                                Dense(4, {8, 32, 1000}), Dense(3, {8, 32, 1000})};
  long_keys.tasks[1].tensors = {Dense(3, {8, 32, 1000}), Dense(5, {8, 32, 1000})};
  long_keys.tasks[2].tensors = {Dense(5, {8, 32, 1000}), Dense(2, {8, 1000, 64}),
                                Dense(6, {8, 32, 64})};
  const std::string wide = code_of(long_keys);
  EXPECT_TRUE(has(wide, "kSplit = 2;") && has(wide, "kBM = 1;") && has(wide, "kVec = 4;"))
      << wide.substr(0, 3000);
  // Its 8 passes of 64 values a lane are loaded one after another.
  auto wide_program = StitchProgram(long_keys);
  ASSERT_TRUE(wide_program.ok()) << wide_program.status().ToString();
  ExpectCompiles(*wide_program);
  // Keys whose values are not contiguous along D: scalar loads.
  StitchDesc strided = Attention(32);
  strided.tasks[0].tensors[1] = Dense(1, {8, 64, 32});
  EXPECT_TRUE(has(code_of(strided), "kVec = 1;"));
}

// The attention stage only where the three tasks are exactly scores,
// their softmax and its product, and the stage code takes the shapes.
TEST_F(StitchedProgramTest, AttentionFusesOnlyTheExactPattern) {
  const auto stages = [](const StitchDesc& desc) {
    auto program = StitchProgram(desc);
    EXPECT_TRUE(program.ok()) << program.status().ToString();
    return program.ok() ? program->stages.size() : 0u;
  };
  StitchDesc bias = Attention(32);
  bias.tasks[0].attributes = {{"alpha", "0.125"}, {"beta", "1.0"}};
  EXPECT_EQ(stages(bias), 3u) << "scores plus a bias";
  StitchDesc other_rows = Attention(32);
  other_rows.tasks[1].tensors[0] = Dense(4, {1, 8, 32, 32});
  EXPECT_EQ(stages(other_rows), 3u) << "a softmax of another tensor";
  StitchDesc transposed = Attention(32);
  transposed.tasks[1].tensors[0] = View(3, {1, 8, 32, 32}, {8192, 1024, 1, 32});
  EXPECT_EQ(stages(transposed), 3u) << "a softmax of the scores' columns";
  StitchDesc wide_values = Attention(32);
  wide_values.num_buffers = 8;
  wide_values.tasks[2] =
      Task("bmm", {Dense(5, {8, 32, 32}), Dense(2, {8, 32, 512}), Dense(7, {8, 32, 512})});
  EXPECT_EQ(stages(wide_values), 3u) << "more columns of v than threads";
  StitchDesc in_place = Attention(32);
  in_place.tasks[2].tensors[2] = Dense(0, {8, 32, 64});
  EXPECT_EQ(stages(in_place), 3u) << "out overwrites q";
  // One head of 300000 queries: 18750 tiles of 16 on the tensor cores,
  // 30000 of 10 on the CUDA cores.
  StitchDesc many_queries = Attention(32);
  const long long rows = 300000;
  many_queries.tasks[0].tensors = {Dense(0, {1, rows, 64}), View(1, {1, 64, 32}, {2048, 1, 64}),
                                   Dense(4, {1, rows, 32}), Dense(3, {1, rows, 32})};
  many_queries.tasks[1].tensors = {Dense(3, {1, rows, 32}), Dense(5, {1, rows, 32})};
  many_queries.tasks[2].tensors = {Dense(5, {1, rows, 32}), Dense(2, {1, 32, 64}),
                                   Dense(6, {1, rows, 64})};
  EXPECT_EQ(stages(many_queries), 3u) << "more tiles than a stage should take";
  StitchDesc matmul = Attention(32);
  matmul.tasks[0] = Task(
      "bmm", {Dense(0, {8, 32, 64}), View(1, {8, 64, 32}, {2048, 1, 64}), Dense(3, {8, 32, 32})});
  EXPECT_EQ(stages(matmul), 1u) << "unscaled scores (bmm)";
}

// The shared-scratch hint is on by default in the stitched stages
// (op_context.cuh, AssumeShared) and opt-in in OpContext::scratch(): the
// stage code compiles without it (GPUOS_NO_SHARED_SCRATCH_HINT), and the
// standard operators that read the scratch with it
// (GPUOS_OPERATOR_SCRATCH_HINT).
TEST_F(StitchedProgramTest, ScratchReadersCompileWithTheHintSwitchedEitherWay) {
  {
    ScopedEnv defines("GPUOS_JIT_DEFINES", "GPUOS_NO_SHARED_SCRATCH_HINT");
    for (const StitchDesc& desc : {Mlp(1), Attention(128), DecoderAttention()}) {
      auto program = StitchProgram(desc);
      ASSERT_TRUE(program.ok()) << program.status().ToString();
      ExpectCompiles(*program);
    }
  }
  ScopedEnv defines("GPUOS_JIT_DEFINES", "GPUOS_OPERATOR_SCRATCH_HINT");
  std::vector<OperatorSpec> readers;
  for (const char* name : {"matmul", "fused_addmm", "softmax", "layer_norm"}) {
    readers.push_back(*Op(name));
  }
  JitBuilder builder(nullptr, TestOptions("sm_90"));
  BuildStats stats;
  const Status compiled = builder.Compile(readers, &stats);
  EXPECT_TRUE(compiled.ok()) << compiled.ToString();
}

// The attention stage's A/B switches (JIT defines, stitch_attention.cuh and
// stitch_attention_mma.cuh):
// each still compiles at the benchmark's shapes, alone and with the one it
// pairs with (the q rows' padding applies to the blocked key layout).
TEST_F(StitchedProgramTest, AttentionCompilesWithEachOfItsSwitches) {
  for (const char* switches :
       {"GPUOS_STITCH_KEYS_BLOCKED", "GPUOS_STITCH_KEYS_BLOCKED GPUOS_STITCH_Q_UNPADDED",
        "GPUOS_STITCH_VALUE_CHUNK_32", "GPUOS_STITCH_STORE_UNREAD",
        "GPUOS_STITCH_MMA_EARLY_VALUES"}) {
    SCOPED_TRACE(switches);
    ScopedEnv defines("GPUOS_JIT_DEFINES", switches);
    for (const StitchDesc& desc : {Attention(32), Attention(128), DecoderAttention()}) {
      auto program = StitchProgram(desc);
      ASSERT_TRUE(program.ok()) << program.status().ToString();
      ExpectCompiles(*program);
    }
  }
}

// Flagged intermediates (docs/stitching.md): with the intermediates named
// internal, each product's output moves to slots after the counters and
// the stages that read it stop waiting for it.
TEST_F(StitchedProgramTest, MlpIntermediatesAreFlaggedAndWaitForNothing) {
  for (long long rows : {1, 3, 8}) {
    SCOPED_TRACE("batch " + std::to_string(rows));
    StitchDesc desc = Mlp(rows);
    desc.internal_buffers = {3, 8, 13, 18};
    auto program = StitchProgram(desc);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    ASSERT_EQ(program->stages.size(), 5u);
    for (std::size_t s = 0; s < 5; ++s) {
      EXPECT_TRUE(program->stages[s].waits.empty()) << "stage " << s;
      EXPECT_EQ(program->stages[s].flagged_output, s < 4) << "stage " << s;
    }
    const std::size_t slots = (rows * 256 + 15) / 16 * 16;
    EXPECT_EQ(program->counter_bytes, 6u * 128u + 4u * slots * 8u);
    const std::string& code = program->op.device_code.code;
    // Stage 1 reads stage 0's slots (after the 6 counters' 96) and writes its own.
    EXPECT_NE(code.find("kAOff = 96ll;"), std::string::npos);
    EXPECT_NE(code.find("kOOff = " + std::to_string(96 + slots) + "ll;"), std::string::npos);
    EXPECT_NE(code.find("kInFlagged = true;"), std::string::npos);
    EXPECT_NE(program->op.description.find("; flagged outputs: stages 0,1,2,3"), std::string::npos)
        << program->op.description;
    ExpectCompiles(*program);

    desc.flag_intermediates = false;
    auto plain = StitchProgram(desc);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    EXPECT_EQ(plain->counter_bytes, 6u * 128u);
    EXPECT_EQ(plain->stages[4].waits, std::vector<std::uint32_t>{3});
    EXPECT_FALSE(plain->stages[0].flagged_output);
    EXPECT_NE(plain->op.name, program->op.name);
  }
}

TEST_F(StitchedProgramTest, OnlyInternalOutputsWithFlagReadersAreFlagged) {
  {  // one intermediate named internal: the others keep their waits
    StitchDesc desc = Mlp(1);
    desc.internal_buffers = {8};
    auto program = StitchProgram(desc);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    const auto& s = program->stages;
    EXPECT_EQ(s[1].waits, std::vector<std::uint32_t>{0});
    EXPECT_TRUE(s[1].flagged_output);
    EXPECT_TRUE(s[2].waits.empty());
    EXPECT_EQ(s[3].waits, std::vector<std::uint32_t>{2});
    EXPECT_EQ(program->counter_bytes, 6u * 128u + 256u * 8u);
  }
  {  // q, the cat's new rows: read by an attention stage and a copy
    StitchDesc desc = DecoderAttention();
    desc.internal_buffers = {9, 10, 11, 12, 13, 14};
    auto program = StitchProgram(desc);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    for (const StitchStage& stage : program->stages) EXPECT_FALSE(stage.flagged_output);
    EXPECT_EQ(program->counter_bytes, (program->stages.size() + 1) * 128u);
  }
}

// Each rule of FlagIntermediates on its own: one product writes buffer 3
// (internal), a second task reads it; only the last case is flagged.
TEST_F(StitchedProgramTest, FlagsOnlyWhatEveryReaderCanPoll) {
  const auto plan = [](StitchDesc desc) {
    desc.internal_buffers = {3};
    auto program = StitchProgram(desc);
    EXPECT_TRUE(program.ok()) << program.status().ToString();
    return program.ok() ? *program : StitchedProgram{};
  };
  const auto expect_kept = [](const StitchedProgram& program, const std::string& why) {
    SCOPED_TRACE(why);
    for (const StitchStage& stage : program.stages) EXPECT_FALSE(stage.flagged_output);
    ASSERT_EQ(program.stages.size(), 2u);
    EXPECT_EQ(program.stages[1].waits, std::vector<std::uint32_t>{0});
    EXPECT_EQ(program.counter_bytes, 3u * 128u);
  };
  StitchDesc base;
  base.num_buffers = 6;
  base.tasks.push_back(Linear("addmm", 0, 1, 2, 3, 1, 256, 256));
  {  // read as a product's b (its weights): a load path without flags
    StitchDesc desc = base;
    desc.tasks.push_back(
        Task("matmul", {Dense(0, {1, 256}), Dense(3, {256, 1}), Dense(4, {1, 1})}));
    expect_kept(plan(desc), "b");
  }
  {  // read by an elementwise task
    StitchDesc desc = base;
    desc.tasks.push_back(Task("relu", {Dense(3, {1, 256}), Dense(4, {1, 256})}));
    expect_kept(plan(desc), "elementwise");
  }
  {  // a reader's view reaches past the producer's range
    StitchDesc desc = base;
    desc.tasks.push_back(Linear("addmm", 3, 1, 2, 4, 1, 256, 256));
    desc.tasks[1].tensors[0] = Dense(3, {2, 256});
    desc.tasks[1].tensors[2] = View(2, {2, 256}, {0, 1});
    desc.tasks[1].tensors.back() = Dense(4, {2, 256});
    expect_kept(plan(desc), "past the range");
  }
  {  // not dense: the product writes every other column of its range
    StitchDesc desc = base;
    desc.tasks[0].tensors.back() = View(3, {1, 256}, {512, 2});
    desc.tasks.push_back(Linear("addmm", 3, 1, 2, 4, 1, 256, 256));
    desc.tasks[1].tensors[0] = View(3, {1, 256}, {512, 2});
    expect_kept(plan(desc), "not dense");
  }
  {  // a second writer of the range
    StitchDesc desc = base;
    desc.tasks.push_back(Linear("addmm", 0, 1, 2, 3, 1, 256, 256));
    StitchedProgram program = plan(desc);
    for (const StitchStage& stage : program.stages) EXPECT_FALSE(stage.flagged_output);
  }
  {  // too many values to poll one by one
    StitchDesc desc;
    desc.num_buffers = 6;
    desc.tasks.push_back(Linear("addmm", 0, 1, 2, 3, 128, 256, 256));  // 32768 values
    desc.tasks.push_back(Linear("addmm", 3, 1, 2, 4, 128, 256, 256));
    expect_kept(plan(desc), "too large");
  }
  {  // the same reader as an addmm's a: flagged, no wait
    StitchDesc desc = base;
    desc.tasks.push_back(Linear("addmm", 3, 1, 2, 4, 1, 256, 256));
    StitchedProgram program = plan(desc);
    ASSERT_EQ(program.stages.size(), 2u);
    EXPECT_TRUE(program.stages[0].flagged_output);
    EXPECT_TRUE(program.stages[1].waits.empty());
    EXPECT_EQ(program.counter_bytes, 3u * 128u + 256u * 8u);
  }
}

TEST_F(StitchedProgramTest, AResidualAndAnOperandOfOneFlaggedOutputCompile) {
  // h = x W + b (internal); out = layer_norm(h) W2 + b2 + h; rows 3.
  StitchDesc desc;
  desc.num_buffers = 5;
  desc.internal_buffers = {3};
  desc.tasks.push_back(Linear("addmm", 0, 1, 2, 3, 3, 256, 256));
  StitchTask fused = Linear("fused_addmm", 3, 1, 2, 4, 3, 256, 256);
  fused.attributes = {{"norm", "1"}, {"add_residual", "1"}};
  desc.tasks.push_back(std::move(fused));
  auto program = StitchProgram(desc);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  EXPECT_TRUE(program->stages[0].flagged_output);
  EXPECT_FALSE(program->stages[1].flagged_output) << "buffer 4 is not internal";
  EXPECT_TRUE(program->stages[1].waits.empty());
  const std::string& code = program->op.device_code.code;
  EXPECT_NE(code.find("kAFlagged = true;"), std::string::npos);
  EXPECT_NE(code.find("kRFlagged = true;"), std::string::npos);
  ExpectCompiles(*program);
}

TEST_F(StitchedProgramTest, CatPartsWaitOnlyForWhatTheyRead) {
  StitchDesc desc = DecoderAttention();
  desc.fuse_attention = false;
  auto program = StitchProgram(desc);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  // addmm, cat(cache), cat(new row) for keys, the same for values, scores,
  // softmax, product.
  ASSERT_EQ(program->stages.size(), 8u);
  const auto& s = program->stages;
  EXPECT_TRUE(s[1].waits.empty()) << "the cache copy reads nothing the program writes";
  EXPECT_EQ(s[2].waits, std::vector<std::uint32_t>{0});
  EXPECT_TRUE(s[3].waits.empty());
  EXPECT_EQ(s[4].waits, std::vector<std::uint32_t>{0});
  // Scores read q (stage 0, also waited for through the key row) and keys.
  EXPECT_EQ(s[5].waits, (std::vector<std::uint32_t>{1, 2}));
  EXPECT_EQ(s[6].waits, std::vector<std::uint32_t>{5});
  EXPECT_EQ(s[7].waits, (std::vector<std::uint32_t>{3, 4, 6}));
  ExpectCompiles(*program);
}

TEST_F(StitchedProgramTest, DecoderAttentionWaitsForTheKeysAndValues) {
  auto program = StitchProgram(DecoderAttention());
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  ASSERT_EQ(program->stages.size(), 6u);
  const StitchStage& attention = program->stages[5];
  EXPECT_EQ(attention.kind, "attention");
  EXPECT_EQ(attention.task, 3u);  // tasks: addmm, cat, cat, scores, softmax, product
  EXPECT_EQ(attention.tiles, 4u) << "one query of each of 4 heads";
  // 129 keys of 64 values: four lanes a key (coalesced loads), in three
  // passes loaded at once, not a lane a key (a 256-byte row each).
  EXPECT_NE(program->op.device_code.code.find("kSplit = 4;"), std::string::npos);
  // The QKV product (1 x 256 x 768): tiles of 32 columns read 32 KB of the
  // weight each (kMaxProductTileBytes), not 12 tiles of 64 KB.
  EXPECT_EQ(program->stages[0].tiles, 24u);
  // Keys and values are read from the cats' inputs: the caches (program
  // inputs: nothing to wait for) and the new rows in the QKV product's
  // output (stage 0), not from the cats' outputs, so the stage waits for
  // the product only, not for the copies.
  EXPECT_EQ(attention.waits, std::vector<std::uint32_t>{0});
  const std::string& code = program->op.device_code.code;
  for (const char* constant : {"kKtSplit = 128;", "kKt2 = 9;", "kKt2Off = 256ll;", "kVSplit = 128;",
                               "kV2 = 9;", "kV2Off = 512ll;", "kKt = 1;", "kV = 2;"}) {
    EXPECT_NE(code.find(constant), std::string::npos) << constant;
  }
  ExpectCompiles(*program);
}

// The same with every intermediate in one workspace buffer (as the PyTorch
// frontend lays them out): what a task writes is a range, not a buffer.
TEST_F(StitchedProgramTest, DecoderAttentionReadsThroughTheCatsInOneWorkspace) {
  StitchDesc desc = DecoderAttention();
  for (StitchTask& task : desc.tasks) {
    for (StitchView& view : task.tensors) {
      if (view.buffer > 9) {
        view.offset += 40960ll * (view.buffer - 9);  // disjoint regions of buffer 9
        view.buffer = 9;
      }
    }
  }
  auto program = StitchProgram(desc);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  ASSERT_EQ(program->stages.size(), 6u);
  EXPECT_EQ(program->stages[5].waits, std::vector<std::uint32_t>{0});
  const std::string& code = program->op.device_code.code;
  for (const char* constant : {"kKtSplit = 128;", "kKt2Off = 256ll;", "kVSplit = 128;",
                               "kV2Off = 512ll;", "kKt = 1;", "kV = 2;"}) {
    EXPECT_NE(code.find(constant), std::string::npos) << constant;
  }
}

// A task between a cat and the attention that writes the cat's input: the
// keys are read from the cat's output (waiting for its copies), the values
// still through their own cat.
TEST_F(StitchedProgramTest, AttentionReadsACatOutputWhenItsInputChangedSince) {
  StitchDesc desc = DecoderAttention();
  desc.tasks.insert(desc.tasks.begin() + 3,
                    Task("copy", {Dense(3, {1, 4, 128, 64}), Dense(1, {1, 4, 128, 64})}));
  desc.num_buffers = 16;
  auto program = StitchProgram(desc);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  ASSERT_EQ(program->stages.size(), 7u);
  const StitchStage& attention = program->stages[6];
  ASSERT_EQ(attention.kind, "attention");
  // The keys' cat copies (stages 1 and 2, the new row's after the product);
  // the values' through their cat: no wait for stages 3 and 4.
  EXPECT_EQ(attention.waits, (std::vector<std::uint32_t>{1, 2}));
  const std::string& code = program->op.device_code.code;
  EXPECT_NE(code.find("kKtSplit = 129;"), std::string::npos);
  EXPECT_NE(code.find("kVSplit = 128;"), std::string::npos);
  ExpectCompiles(*program);
}

// A cat whose output overlaps its own input (the new key row written over
// the end of the product it came from): the keys are read from the cat's
// output, since the input no longer holds what the cat copied.
TEST_F(StitchedProgramTest, AttentionReadsACatOutputThatOverwroteItsInput) {
  StitchDesc desc = DecoderAttention();
  // The keys' cat writes its output over the start of buffer 9 (the QKV
  // product, whose key row it reads at 256..319): out [1, 4, 129, 64] there.
  desc.tasks[1].tensors.back() = Dense(9, {1, 4, 129, 64});
  desc.tasks[3].tensors[1] = View(9, {4, 64, 129}, {8256, 1, 64});
  auto program = StitchProgram(desc);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const StitchStage& attention = program->stages.back();
  ASSERT_EQ(attention.kind, "attention");
  EXPECT_EQ(program->op.device_code.code.find("kKtSplit = 128;"), std::string::npos)
      << "keys read through a cat that overwrote its input";
}

// Regression: two views of one buffer with strides (10, 1) and sizes (2, 5)
// at offsets 0 and 8 share elements 10-12 (b's second row spills past the
// radix of 10), so the reader of one must wait for the writer of the other.
TEST_F(StitchedProgramTest, ViewsThatSpillPastTheRadixOverlap) {
  StitchDesc desc;
  desc.num_buffers = 3;
  desc.tasks.push_back(Task("relu", {Dense(0, {2, 5}), View(1, {2, 5}, {10, 1}, 0)}));
  desc.tasks.push_back(Task("relu", {View(1, {2, 5}, {10, 1}, 8), Dense(2, {2, 5})}));
  auto program = StitchProgram(desc);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  EXPECT_EQ(program->stages[1].waits, std::vector<std::uint32_t>{0});
  // At offset 5 instead, b is the other half of each row (5-9, 15-19):
  // their byte ranges meet, the elements do not.
  desc.tasks[1].tensors[0] = View(1, {2, 5}, {10, 1}, 5);
  auto disjoint = StitchProgram(desc);
  ASSERT_TRUE(disjoint.ok()) << disjoint.status().ToString();
  EXPECT_TRUE(disjoint->stages[1].waits.empty());
}

TEST_F(StitchedProgramTest, ElementwiseTasksComposeTheirOperatorsCode) {
  StitchDesc desc;
  desc.num_buffers = 4;
  // add(x, row broadcast, alpha=2) -> gelu -> copy into a transposed view
  desc.tasks.push_back(
      Task("add", {Dense(0, {64, 32}), View(1, {32}, {1}), Dense(2, {64, 32})}, {{"alpha", "2"}}));
  desc.tasks.push_back(Task("gelu", {Dense(2, {64, 32}), Dense(2, {64, 32})}));
  desc.tasks.push_back(Task("copy", {Dense(2, {64, 32}), View(3, {64, 32}, {1, 64})}));
  auto program = StitchProgram(desc);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  ASSERT_EQ(program->stages.size(), 3u);
  EXPECT_EQ(program->stages[1].waits, std::vector<std::uint32_t>{0});  // in place: RAW and WAW
  EXPECT_EQ(program->stages[2].waits, std::vector<std::uint32_t>{1});
  EXPECT_NE(program->op.device_code.code.find("erf"), std::string::npos)
      << "gelu's own body is in the stitched code";
  ExpectCompiles(*program);
}

TEST_F(StitchedProgramTest, NameIsDeterministicAndFollowsShapes) {
  auto a = StitchProgram(Mlp(1));
  auto b = StitchProgram(Mlp(1));
  auto c = StitchProgram(Mlp(4));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->op.name, b->op.name);
  EXPECT_EQ(a->op.body.code, b->op.body.code);
  EXPECT_NE(a->op.name, c->op.name);
}

TEST_F(StitchedProgramTest, RefusesWhatItHasNoStageCodeFor) {
  const auto refused = [](const StitchDesc& desc, const std::string& words) {
    auto program = StitchProgram(desc);
    ASSERT_FALSE(program.ok());
    EXPECT_EQ(program.status().code(), StatusCode::kFailedPrecondition)
        << program.status().ToString();
    EXPECT_NE(program.status().message().find(words), std::string::npos)
        << program.status().message();
  };
  StitchDesc half = Attention(32);
  for (StitchTask& t : half.tasks) {
    t.dtype = DType::kF16;
    for (StitchView& v : t.tensors) v.dtype = DType::kF16;
  }
  refused(half, "f32 only");
  StitchDesc gather;
  gather.num_buffers = 3;
  gather.tasks.push_back(Task("index_select", {Dense(0, {4, 8}), Dense(1, {2}), Dense(2, {2, 8})}));
  gather.tasks[0].tensors[1].dtype = DType::kF32;
  refused(gather, "no stage code for this operator");
  StitchDesc long_rows;
  long_rows.num_buffers = 2;
  long_rows.tasks.push_back(Task("softmax", {Dense(0, {2, 2048}), Dense(1, {2, 2048})}));
  refused(long_rows, "rows of 2048 elements");
  StitchDesc broadcast_out;
  broadcast_out.num_buffers = 2;
  broadcast_out.tasks.push_back(Task("relu", {Dense(0, {4, 8}), View(1, {4, 8}, {0, 1})}));
  refused(broadcast_out, "output broadcasts");
  StitchDesc broadcast_product;
  broadcast_product.num_buffers = 3;
  broadcast_product.tasks.push_back(
      Task("matmul", {Dense(0, {4, 8}), Dense(1, {8, 2}), View(2, {4, 2}, {0, 1})}));
  refused(broadcast_product, "output broadcasts");
  StitchDesc empty;
  empty.num_buffers = 1;
  refused(empty, "no tasks");
}

TEST_F(StitchedProgramTest, RejectsMalformedDescriptions) {
  StitchDesc desc = Attention(32);
  desc.tasks[1].tensors.pop_back();
  auto arity = StitchProgram(desc);
  ASSERT_FALSE(arity.ok());
  EXPECT_EQ(arity.status().code(), StatusCode::kInvalidArgument);
  desc = Attention(32);
  desc.tasks[2].tensors[0].buffer = 7;
  auto buffer = StitchProgram(desc);
  ASSERT_FALSE(buffer.ok());
  EXPECT_NE(buffer.status().message().find("num_buffers"), std::string::npos);
  desc = Attention(32);
  desc.tasks[0].op = nullptr;
  EXPECT_EQ(StitchProgram(desc).status().code(), StatusCode::kInvalidArgument);
  desc = Attention(32);
  desc.internal_buffers = {3, 7};
  auto internal = StitchProgram(desc);
  ASSERT_FALSE(internal.ok());
  EXPECT_EQ(internal.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(internal.status().message().find("internal buffer 7"), std::string::npos);
}

}  // namespace
}  // namespace gpuos::registry
