// The std.linalg, std.normalization and std.reduction operators on the
// small and medium shapes of the PyTorch workloads (batch-1 Linear layers
// with and without a bias (addmm),
// attention heads, softmax over many short rows, layer_norm of one or eight
// tokens), with non-contiguous inputs, each split into tasks several ways
// (one task, a uniform split like the host's, one task per work item), on
// several blocks, against float64 CPU references (op_reference.h). Label
// `gpu`; skips with the reason where there is no CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "gpuos/registry/codegen.h"
#include "jit_gpu_util.h"
#include "jit_test_util.h"
#include "op_reference.h"

namespace gpuos::registry {
namespace {

using testing::GpuSession;
using testing::HostTensor;

double Tolerance(DType dtype) {
  return dtype == DType::kF16 ? 4e-3 : dtype == DType::kBF16 ? 3e-2 : 1e-4;
}

class OpShapesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    session_ = new GpuSession();
    if (!session_->available()) return;
    const std::set<std::string> wanted = {"matmul",  "bmm",         "addmm",      "baddbmm",
                                          "softmax", "log_softmax", "layer_norm", "rms_norm",
                                          "sum",     "cat"};
    ops_ = new std::vector<OperatorSpec>();
    for (const OperatorSpec& op : testing::BuiltinOperators()) {
      if (wanted.count(op.name)) ops_->push_back(op);
    }
    session_->LoadImageOf(*ops_);
  }
  static void TearDownTestSuite() {
    delete session_;
    delete ops_;
    session_ = nullptr;
    ops_ = nullptr;
  }
  void SetUp() override {
    if (!session_->available()) GTEST_SKIP() << session_->skip_reason();
    ASSERT_TRUE(session_->ready()) << session_->error();
  }

  std::vector<double> Random(long long n, double low, double high) {
    std::uniform_real_distribution<double> distribution(low, high);
    std::vector<double> values(n);
    for (double& v : values) v = distribution(generator_);
    return values;
  }

  // Runs `name` on `tensors` with [0, work) split into `tasks` tasks of
  // ceil(work / tasks) items (the worker's split of a tiled task) on 8 blocks.
  // The task's tensors are tensors[indices[i]] (default: each in order; a
  // repeated index aliases, e.g. an output written in place of an input).
  void Run(const std::string& name, DType dtype, std::vector<HostTensor*> tensors, long long work,
           long long tasks, const std::vector<std::pair<std::string, std::string>>& attributes,
           std::vector<int> indices = {}) {
    const OperatorSpec* op = nullptr;
    for (const OperatorSpec& o : *ops_) {
      if (o.name == name) op = &o;
    }
    ASSERT_NE(op, nullptr) << name;
    const ImageEntry* entry = session_->image().Find(op->name, op->version, dtype);
    ASSERT_NE(entry, nullptr);
    auto slots = EncodeAttributeSlots(*op, attributes);
    ASSERT_TRUE(slots.ok()) << slots.status().ToString();
    if (indices.empty()) {
      for (std::size_t k = 0; k < tensors.size(); ++k) indices.push_back(static_cast<int>(k));
    }
    const long long chunk = (work + tasks - 1) / tasks;
    std::vector<device::TaskDesc> descs;
    for (long long t = 0; t < tasks; ++t) {
      const long long begin = std::min(work, t * chunk);
      descs.push_back(
          testing::MakeTask(entry->slot, indices, begin, std::min(work, begin + chunk), *slots));
      descs.back().task_id = static_cast<unsigned>(descs.size());
    }
    auto status = session_->Run(descs, tensors, 8);
    ASSERT_TRUE(status.ok()) << status.status().ToString();
    ASSERT_EQ(status->error, 0u) << "task " << status->task_id << " detail " << status->detail;
  }

  void Expect(const HostTensor& out, const std::vector<double>& reference, double tolerance) {
    const std::vector<double> got = out.Values();
    ASSERT_EQ(got.size(), reference.size());
    int reported = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double want = testing::ConvertTo(out.dtype, reference[i]);
      if (!(std::fabs(got[i] - want) <= tolerance * (1.0 + std::fabs(want))) && reported++ < 5) {
        ADD_FAILURE() << "element " << i << " is " << got[i] << ", expected " << want;
      }
    }
  }

  // x [batch, in] times the transpose of a dense weight [out, in], as
  // torch.nn.Linear computes it (b's inner stride is not 1).
  void Linear(DType dtype, long long batch, long long in, long long out_features) {
    HostTensor x = HostTensor::Dense(dtype, {batch, in}, Random(batch * in, -1, 1));
    HostTensor w =
        HostTensor::Dense(dtype, {out_features, in}, Random(out_features * in, -1, 1)).Transposed();
    const std::vector<double> reference =
        testing::MatmulReference(x.Values(), w.Values(), 1, batch, in, out_features);
    for (long long tasks : {1LL, 9LL, batch * out_features}) {
      SCOPED_TRACE("tasks " + std::to_string(tasks));
      HostTensor out = HostTensor::Poisoned(dtype, {batch, out_features});
      Run("matmul", dtype, {&x, &w, &out}, batch * out_features, tasks, {});
      if (HasFatalFailure()) return;
      Expect(out, reference, Tolerance(dtype));
    }
  }

  enum class Layout { kDense, kTransposed };  // storage order of the last two dimensions
  enum Broadcast { kNone = 0, kBroadcastA = 1, kBroadcastB = 2 };

  // A [batch, rows, cols] view of random values (rank 2 when batch == 0);
  // kTransposed stores it as [batch, cols, rows]; `broadcast`: one stored
  // batch item read through a batch stride of 0.
  HostTensor Matrix(DType dtype, long long batch, long long rows, long long cols, Layout layout,
                    bool broadcast) {
    const long long stored = batch == 0 || broadcast ? 1 : batch;
    std::vector<long long> sizes = layout == Layout::kDense ? std::vector<long long>{rows, cols}
                                                            : std::vector<long long>{cols, rows};
    if (batch > 0) sizes.insert(sizes.begin(), stored);
    HostTensor t = HostTensor::Dense(dtype, sizes, Random(stored * rows * cols, -1, 1));
    const std::size_t last = t.sizes.size() - 1;
    if (layout == Layout::kTransposed) {
      std::swap(t.sizes[last - 1], t.sizes[last]);
      std::swap(t.strides[last - 1], t.strides[last]);
    }
    if (batch > 0 && broadcast) {
      t.sizes[0] = batch;
      t.strides[0] = 0;
    }
    return t;
  }

  // `name` (matmul or bmm) on a [batch, m, k] x [batch, k, n] product
  // (rank 2 when batch == 0) with the given layouts, split into 1, 9 and
  // min(items, 1000) tasks, against the float64 reference.
  void Product(const std::string& name, DType dtype, long long batch, long long m, long long k,
               long long n, Layout a_layout, Layout b_layout, int broadcast, Layout out_layout) {
    SCOPED_TRACE(name + " " + DTypeName(dtype) + " batch " + std::to_string(batch) + " m " +
                 std::to_string(m) + " k " + std::to_string(k) + " n " + std::to_string(n));
    HostTensor a = Matrix(dtype, batch, m, k, a_layout, (broadcast & kBroadcastA) != 0);
    HostTensor b = Matrix(dtype, batch, k, n, b_layout, (broadcast & kBroadcastB) != 0);
    const long long batches = batch == 0 ? 1 : batch;
    const std::vector<double> reference =
        testing::MatmulReference(a.Values(), b.Values(), batches, m, k, n);
    const long long items = batches * m * n;
    for (long long tasks : {1LL, 9LL, std::min(items, 1000LL)}) {
      if (tasks < 1) continue;
      SCOPED_TRACE("tasks " + std::to_string(tasks));
      std::vector<long long> sizes = out_layout == Layout::kDense ? std::vector<long long>{m, n}
                                                                  : std::vector<long long>{n, m};
      if (batch > 0) sizes.insert(sizes.begin(), batch);
      HostTensor out = HostTensor::Poisoned(dtype, sizes);
      if (out_layout == Layout::kTransposed) {
        const std::size_t last = out.sizes.size() - 1;
        std::swap(out.sizes[last - 1], out.sizes[last]);
        std::swap(out.strides[last - 1], out.strides[last]);
      }
      Run(name, dtype, {&a, &b, &out}, items, tasks, {});
      if (HasFatalFailure()) return;
      Expect(out, reference, Tolerance(dtype));
    }
  }

  // How addmm's bias is laid out against out [batch, m, n] (or [m, n]).
  enum class Bias {
    kRow,       // one row [n] for every row and batch item (strides 0, 0, 1): nn.Linear
    kPerBatch,  // [batch, 1, n]: one row per batch item (row stride 0)
    kColumn,    // [m, 1]: one value per row (column stride 0)
    kFull,      // out's shape, a transposed view
    kInPlace,   // out's shape, dense, and out IS the bias (written in place)
  };

  // addmm (batch == 0) or baddbmm on a [batch, m, k] x [batch, k, n] product
  // (a dense, b a transposed view as in nn.Linear) plus beta * bias, split
  // into 1, 9 and min(items, 1000) tasks, against the float64 reference.
  void BiasProduct(DType dtype, long long batch, long long m, long long k, long long n,
                   Bias bias_layout, double alpha, double beta) {
    const std::string name = batch == 0 ? "addmm" : "baddbmm";
    SCOPED_TRACE(name + " " + DTypeName(dtype) + " batch " + std::to_string(batch) + " m " +
                 std::to_string(m) + " k " + std::to_string(k) + " n " + std::to_string(n) +
                 " bias " + std::to_string(static_cast<int>(bias_layout)) + " alpha " +
                 std::to_string(alpha) + " beta " + std::to_string(beta));
    HostTensor a = Matrix(dtype, batch, m, k, Layout::kDense, false);
    HostTensor b = Matrix(dtype, batch, k, n, Layout::kTransposed, false);
    const long long batches = batch == 0 ? 1 : batch;
    std::vector<long long> out_sizes = {m, n};
    if (batch > 0) out_sizes.insert(out_sizes.begin(), batch);
    const int rank = static_cast<int>(out_sizes.size());
    HostTensor bias = HostTensor::Poisoned(dtype, out_sizes);
    switch (bias_layout) {
      case Bias::kRow:
        bias = HostTensor::Dense(dtype, {n}, Random(n, -1, 1));
        bias.sizes = out_sizes;
        bias.strides.assign(rank, 0);
        bias.strides[rank - 1] = 1;
        break;
      case Bias::kPerBatch:
        bias = HostTensor::Dense(dtype, {batches, n}, Random(batches * n, -1, 1));
        bias.sizes = out_sizes;
        bias.strides.assign(rank, 0);
        bias.strides[rank - 1] = 1;
        if (batch > 0) bias.strides[0] = n;
        break;
      case Bias::kColumn:
        bias = HostTensor::Dense(dtype, {m, 1}, Random(m, -1, 1));
        if (batch > 0) {
          bias.sizes.insert(bias.sizes.begin(), 1);
          bias.strides.insert(bias.strides.begin(), 0);
        }
        break;
      case Bias::kFull:
        bias = Matrix(dtype, batch, m, n, Layout::kTransposed, false);
        break;
      case Bias::kInPlace:
        bias = Matrix(dtype, batch, m, n, Layout::kDense, false);
        break;
    }
    // The bias at out's shape (a size-1 dimension read as broadcast).
    std::vector<double> bias_values = bias.Values();
    if (bias_layout == Bias::kColumn) {
      std::vector<double> full;
      for (long long p = 0; p < batches; ++p) {
        for (long long r = 0; r < m; ++r) full.insert(full.end(), n, bias_values[r]);
      }
      bias_values = full;
    }
    const std::vector<double> reference =
        testing::AddmmReference(testing::MatmulReference(a.Values(), b.Values(), batches, m, k, n),
                                bias_values, alpha, beta);
    const std::vector<std::pair<std::string, std::string>> attributes = {
        {"alpha", std::to_string(alpha)}, {"beta", std::to_string(beta)}};
    const long long items = batches * m * n;
    for (long long tasks : {1LL, 9LL, std::min(items, 1000LL)}) {
      SCOPED_TRACE("tasks " + std::to_string(tasks));
      if (bias_layout == Bias::kInPlace) {
        HostTensor in_place = bias;  // a fresh copy of the bias for each split
        Run(name, dtype, {&a, &b, &in_place}, items, tasks, attributes, {0, 1, 2, 2});
        if (HasFatalFailure()) return;
        Expect(in_place, reference, Tolerance(dtype));
        continue;
      }
      HostTensor out = HostTensor::Poisoned(dtype, out_sizes);
      Run(name, dtype, {&a, &b, &bias, &out}, items, tasks, attributes);
      if (HasFatalFailure()) return;
      Expect(out, reference, Tolerance(dtype));
    }
  }

  static GpuSession* session_;
  static std::vector<OperatorSpec>* ops_;
  std::mt19937 generator_{2024};
};

GpuSession* OpShapesTest::session_ = nullptr;
std::vector<OperatorSpec>* OpShapesTest::ops_ = nullptr;

TEST_F(OpShapesTest, BatchOneAndEightLinearLayers) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
    SCOPED_TRACE(DTypeName(dtype));
    Linear(dtype, 1, 256, 256);
    Linear(dtype, 8, 256, 256);
    Linear(dtype, 3, 70, 45);  // edges of partial tiles and K slices
  }
}

// Few rows (M <= 16: the columns-and-K path of matmul_few_rows.cuh) up to
// the threshold and one row past it (32 x 32 tiles).
TEST_F(OpShapesTest, FewRowsLinearLayersUpToTheThresholdAndPastIt) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
    SCOPED_TRACE(DTypeName(dtype));
    Linear(dtype, 4, 256, 256);
    Linear(dtype, 16, 256, 256);  // the last M of the few-rows path
    Linear(dtype, 17, 256, 256);  // the first of the tiles
    Linear(dtype, 1, 1024, 256);  // decoder MLP down-projection
  }
  Linear(DType::kF32, 1, 256, 1024);  // decoder MLP up-projection
  Linear(DType::kF32, 5, 33, 7);      // a row chunk of 4 and one of 1, K odd, N < 32
}

// One decoder token's attention: scores q [8, 1, 64] x K^T over a cache of
// 129 (b a transposed view: unit stride along K), then probabilities
// [8, 1, 129] x V [8, 129, 64] (b row-major: unit stride along N); and the
// seq-32 heads, M = 32, on the tiles.
TEST_F(OpShapesTest, FewRowsBmmOfDecoderAttention) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
    Product("bmm", dtype, 8, 1, 64, 129, Layout::kDense, Layout::kTransposed, kNone,
            Layout::kDense);
    Product("bmm", dtype, 8, 1, 129, 64, Layout::kDense, Layout::kDense, kNone, Layout::kDense);
    Product("bmm", dtype, 8, 3, 129, 64, Layout::kTransposed, Layout::kDense, kNone,
            Layout::kDense);
  }
  for (DType dtype : {DType::kF32, DType::kF16}) {
    Product("bmm", dtype, 8, 32, 64, 32, Layout::kDense, Layout::kTransposed, kNone,
            Layout::kDense);
  }
}

TEST_F(OpShapesTest, FewRowsEdges) {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    // No rows; no K (zeros).
    Product("matmul", dtype, 0, 0, 5, 7, Layout::kDense, Layout::kTransposed, kNone,
            Layout::kDense);
    Product("matmul", dtype, 0, 3, 0, 5, Layout::kDense, Layout::kDense, kNone, Layout::kDense);
    // K odd, N not a multiple of 32, transposed a and out, broadcast b.
    Product("bmm", dtype, 3, 5, 7, 37, Layout::kTransposed, Layout::kDense, kBroadcastB,
            Layout::kTransposed);
    Product("matmul", dtype, 4, 13, 70, 45, Layout::kDense, Layout::kTransposed, kBroadcastA,
            Layout::kDense);
    // Long K over few columns: K split over warps, sums meet in the scratch.
    Product("matmul", dtype, 0, 2, 4099, 3, Layout::kDense, Layout::kTransposed, kNone,
            Layout::kDense);
    Product("matmul", dtype, 0, 1, 5000, 1, Layout::kDense, Layout::kDense, kNone, Layout::kDense);
    // Many columns, short K.
    Product("bmm", dtype, 2, 7, 40, 700, Layout::kDense, Layout::kDense, kNone, Layout::kDense);
  }
}

TEST_F(OpShapesTest, AttentionHeadsBmm) {
  // [8, 128, 64] x [8, 64, 128]; b a view with unit stride along K (the
  // transpose of keys), a dense.
  const long long heads = 8, seq = 128, dim = 64;
  for (DType dtype : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    HostTensor q = HostTensor::Dense(dtype, {heads, seq, dim}, Random(heads * seq * dim, -1, 1));
    HostTensor k = HostTensor::Dense(dtype, {heads, seq, dim}, Random(heads * seq * dim, -1, 1));
    std::swap(k.sizes[1], k.sizes[2]);  // [8, 64, 128], strides (seq * dim, 1, dim)
    std::swap(k.strides[1], k.strides[2]);
    const std::vector<double> reference =
        testing::MatmulReference(q.Values(), k.Values(), heads, seq, dim, seq);
    for (long long tasks : {1LL, 32LL, 132LL}) {
      SCOPED_TRACE("tasks " + std::to_string(tasks));
      HostTensor out = HostTensor::Poisoned(dtype, {heads, seq, seq});
      Run("bmm", dtype, {&q, &k, &out}, heads * seq * seq, tasks, {});
      if (HasFatalFailure()) return;
      Expect(out, reference, Tolerance(dtype));
    }
  }
}

// nn.Linear with a bias on the few-rows path (M <= 16) and the tiles, every
// dtype (f16/bf16 on tensor cores past 16 rows), alpha and beta not 1.
TEST_F(OpShapesTest, AddmmAddsTheBiasInTheStore) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
    for (long long m : {1LL, 5LL, 16LL, 17LL, 40LL}) {
      BiasProduct(dtype, 0, m, 256, 96, Bias::kRow, 1, 1);
    }
    BiasProduct(dtype, 0, 4, 70, 45, Bias::kRow, 2, 0.5);
    BiasProduct(dtype, 0, 33, 70, 45, Bias::kRow, 2, 0.5);
  }
  for (DType dtype : {DType::kF32, DType::kF16}) {
    for (long long m : {3LL, 37LL}) {
      BiasProduct(dtype, 0, m, 33, 50, Bias::kColumn, 0.5, -1);
      BiasProduct(dtype, 0, m, 33, 50, Bias::kFull, 1, 0.25);
    }
  }
}

// out aliasing a full-shape bias: each element reads its bias before it is
// written, on both paths and any split.
TEST_F(OpShapesTest, AddmmInPlaceOverItsBias) {
  for (DType dtype : {DType::kF32, DType::kF16}) {
    for (long long m : {5LL, 40LL}) {
      BiasProduct(dtype, 0, m, 64, 70, Bias::kInPlace, 1, 1);
      BiasProduct(dtype, 0, m, 64, 70, Bias::kInPlace, 2, 0.5);
      BiasProduct(dtype, 4, m, 20, 33, Bias::kInPlace, 0.5, 2);
    }
  }
}

// beta == 0 never reads the bias: a bias of NaN leaves no trace.
TEST_F(OpShapesTest, AddmmWithBetaZeroIgnoresNanBias) {
  for (DType dtype : {DType::kF32, DType::kF16}) {
    for (long long m : {2LL, 20LL}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + " m " + std::to_string(m));
      const long long k = 24, n = 40;
      HostTensor a = Matrix(dtype, 0, m, k, Layout::kDense, false);
      HostTensor b = Matrix(dtype, 0, k, n, Layout::kTransposed, false);
      HostTensor bias = HostTensor::Poisoned(dtype, {m, n});  // NaN
      HostTensor out = HostTensor::Poisoned(dtype, {m, n});
      Run("addmm", dtype, {&a, &b, &bias, &out}, m * n, 9, {{"alpha", "2"}, {"beta", "0"}});
      if (HasFatalFailure()) return;
      std::vector<double> reference = testing::MatmulReference(a.Values(), b.Values(), 1, m, k, n);
      for (double& v : reference) v *= 2;
      Expect(out, reference, Tolerance(dtype));
    }
  }
}

// Attention-like baddbmm: few rows and tiles, a per-batch bias row and a
// shared one, every half type on the tensor cores.
TEST_F(OpShapesTest, BaddbmmAddsTheBiasInTheStore) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
    BiasProduct(dtype, 8, 1, 64, 129, Bias::kPerBatch, 0.125, 1);
    BiasProduct(dtype, 8, 32, 64, 32, Bias::kRow, 1, -0.5);
    BiasProduct(dtype, 3, 7, 40, 70, Bias::kColumn, 2, 1);
  }
}

TEST_F(OpShapesTest, SoftmaxOfManyShortRows) {
  const long long rows = 1024, n = 128;
  for (bool transposed : {false, true}) {
    SCOPED_TRACE(transposed ? "transposed input" : "dense input");
    HostTensor a =
        transposed ? HostTensor::Dense(DType::kF32, {n, rows}, Random(rows * n, -4, 4)).Transposed()
                   : HostTensor::Dense(DType::kF32, {rows, n}, Random(rows * n, -4, 4));
    const std::vector<double> reference = testing::SoftmaxReference(a.Values(), n);
    for (long long tasks : {1LL, 132LL, 1000LL}) {
      SCOPED_TRACE("tasks " + std::to_string(tasks));
      HostTensor out = HostTensor::Poisoned(DType::kF32, {rows, n});
      Run("softmax", DType::kF32, {&a, &out}, rows * n, tasks, {});
      if (HasFatalFailure()) return;
      Expect(out, reference, 1e-5);
    }
  }
}

// Every batch shape of the warp path (8, 4, 2 and 1 rows of up to 32, 64,
// 128 and 256 elements per warp; row_batch.cuh), rows that do not fill the
// last batch or the last lane's slots, a few rows longer than a warp's
// limit, dense and transposed inputs, every floating dtype.
TEST_F(OpShapesTest, SoftmaxAndLogSoftmaxOfEveryRowBatchShape) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
    for (long long n : {1LL, 7LL, 32LL, 33LL, 64LL, 100LL, 128LL, 200LL, 256LL, 257LL}) {
      for (long long rows : {1LL, 13LL, 70LL}) {
        for (bool transposed : {false, true}) {
          SCOPED_TRACE(std::string(DTypeName(dtype)) + " rows " + std::to_string(rows) + " n " +
                       std::to_string(n) + (transposed ? " transposed" : " dense"));
          HostTensor a =
              transposed ? HostTensor::Dense(dtype, {n, rows}, Random(rows * n, -6, 6)).Transposed()
                         : HostTensor::Dense(dtype, {rows, n}, Random(rows * n, -6, 6));
          for (long long tasks : {1LL, 5LL}) {
            HostTensor out = HostTensor::Poisoned(dtype, {rows, n});
            Run("softmax", dtype, {&a, &out}, rows * n, std::min(tasks, rows), {});
            if (HasFatalFailure()) return;
            Expect(out, testing::SoftmaxReference(a.Values(), n), Tolerance(dtype));
            HostTensor log_out = HostTensor::Poisoned(dtype, {rows, n});
            Run("log_softmax", dtype, {&a, &log_out}, rows * n, std::min(tasks, rows), {});
            if (HasFatalFailure()) return;
            Expect(log_out, testing::LogSoftmaxReference(a.Values(), n),
                   dtype == DType::kBF16 ? 6e-2 : Tolerance(dtype) * 4);
          }
        }
      }
    }
  }
}

TEST_F(OpShapesTest, LayerNormAndRmsNormOfOneAndEightTokens) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kF64}) {
    for (long long batch : {1LL, 8LL, 13LL}) {
      // 8, 4, 2 and 1 rows per warp batch; one row per block.
      for (long long n : {20LL, 64LL, 100LL, 256LL, 1000LL}) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " batch " + std::to_string(batch) + " n " +
                     std::to_string(n));
        HostTensor a = HostTensor::Dense(dtype, {n, batch}, Random(batch * n, -3, 3)).Transposed();
        HostTensor dense = HostTensor::Dense(dtype, {batch, n}, Random(batch * n, -3, 3));
        HostTensor weight = HostTensor::Dense(dtype, {n}, Random(n, 0.5, 1.5));
        HostTensor bias = HostTensor::Dense(dtype, {n}, Random(n, -1, 1));
        for (HostTensor* input : {&a, &dense}) {
          for (long long tasks : {1LL, 3LL}) {
            HostTensor out = HostTensor::Poisoned(dtype, {batch, n});
            Run("layer_norm", dtype, {input, &weight, &bias, &out}, batch * n,
                std::min(tasks, batch), {{"eps", "1e-5"}});
            if (HasFatalFailure()) return;
            Expect(out,
                   testing::LayerNormReference(input->Values(), n, weight.Values(), bias.Values(),
                                               1e-5),
                   Tolerance(dtype));
            HostTensor rms = HostTensor::Poisoned(dtype, {batch, n});
            Run("rms_norm", dtype, {input, &weight, &rms}, batch * n, std::min(tasks, batch),
                {{"eps", "1e-6"}});
            if (HasFatalFailure()) return;
            Expect(rms, testing::RmsNormReference(input->Values(), n, weight.Values(), 1e-6),
                   Tolerance(dtype));
          }
        }
      }
    }
  }
}

// layer_norm's `activation` (1 gelu, 2 gelu_tanh, 3 relu) applied in its
// store, on the warp path and the block path.
TEST_F(OpShapesTest, LayerNormAppliesItsActivationInTheStore) {
  const auto activate = [](int activation, double x) {
    if (activation == 1) return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    if (activation == 2) {
      return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    }
    return x < 0 ? 0.0 : x;
  };
  for (DType dtype : {DType::kF32, DType::kF16}) {
    for (long long n : {64LL, 256LL, 1000LL}) {
      const long long batch = 8;
      HostTensor a = HostTensor::Dense(dtype, {batch, n}, Random(batch * n, -3, 3));
      HostTensor weight = HostTensor::Dense(dtype, {n}, Random(n, 0.5, 1.5));
      HostTensor bias = HostTensor::Dense(dtype, {n}, Random(n, -1, 1));
      const std::vector<double> normalized =
          testing::LayerNormReference(a.Values(), n, weight.Values(), bias.Values(), 1e-5);
      for (int activation : {1, 2, 3}) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " n " + std::to_string(n) + " activation " +
                     std::to_string(activation));
        std::vector<double> reference;
        for (double v : normalized) reference.push_back(activate(activation, v));
        HostTensor out = HostTensor::Poisoned(dtype, {batch, n});
        Run("layer_norm", dtype, {&a, &weight, &bias, &out}, batch * n, 3,
            {{"eps", "1e-5"}, {"activation", std::to_string(activation)}});
        if (HasFatalFailure()) return;
        Expect(out, reference, Tolerance(dtype));
      }
    }
  }
}

// The decoder step's KV-cache append: [1, 4, 128, 64] and [1, 4, 1, 64]
// joined along dimension 2, dense (the fast path: out as [outer, inner]
// rows) and with the cache transposed (per-element coordinates), in tiles.
TEST_F(OpShapesTest, CatOfTheKvCacheAlongAMiddleDimension) {
  const long long heads = 4, cached = 128, dim = 64;
  for (DType dtype : {DType::kF32, DType::kF16}) {
    for (bool transposed : {false, true}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + (transposed ? " transposed" : " dense"));
      std::vector<double> cache_values = Random(heads * cached * dim, -2, 2);
      HostTensor cache =
          HostTensor::Dense(dtype,
                            transposed ? std::vector<long long>{1, heads, dim, cached}
                                       : std::vector<long long>{1, heads, cached, dim},
                            cache_values);
      if (transposed) {  // the last two dimensions swapped: [1, heads, cached, dim], strided
        std::swap(cache.sizes[2], cache.sizes[3]);
        std::swap(cache.strides[2], cache.strides[3]);
      }
      HostTensor fresh = HostTensor::Dense(dtype, {1, heads, 1, dim}, Random(heads * dim, -2, 2));
      const std::vector<double> reference =
          testing::CatReference(cache.Values(), cached * dim, fresh.Values(), dim, heads);
      for (long long tasks : {1LL, 9LL, 100LL}) {
        HostTensor out = HostTensor::Poisoned(dtype, {1, heads, cached + 1, dim});
        Run("cat", dtype, {&cache, &fresh, &out}, out.numel(), tasks, {{"dim", "2"}});
        if (HasFatalFailure()) return;
        Expect(out, reference, 0);
      }
    }
  }
}

TEST_F(OpShapesTest, SumOfShortSlicesByWarpsAndLongSlicesByTheBlock) {
  for (const auto& [rows, n] : {std::pair<long long, long long>{1024, 128}, {3, 3000}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(n));
    HostTensor a = HostTensor::Dense(DType::kF32, {n, rows}, Random(rows * n, -1, 1)).Transposed();
    const std::vector<double> values = a.Values();
    std::vector<double> reference(rows, 0.0);
    for (long long r = 0; r < rows; ++r) {
      for (long long j = 0; j < n; ++j) reference[r] += values[r * n + j];
    }
    for (long long tasks : {1LL, 17LL}) {
      HostTensor out = HostTensor::Poisoned(DType::kF32, {rows});
      Run("sum", DType::kF32, {&a, &out}, rows, std::min(tasks, rows), {});
      if (HasFatalFailure()) return;
      Expect(out, reference, 1e-4);
    }
  }
}

}  // namespace
}  // namespace gpuos::registry
