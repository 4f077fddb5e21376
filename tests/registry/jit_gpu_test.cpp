// Runs kernel images on a GPU: the worker, the operator table, elementwise
// (dense, broadcast, strided), reductions, custom operators, every built-in
// operator's `tests:` cases, and error reporting. Label `gpu`; skips with
// the reason where there is no CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gpuos/cuda_driver.h"
#include "gpuos/device/abi.h"
#include "gpuos/registry/codegen.h"
#include "jit_gpu_util.h"
#include "jit_test_util.h"

namespace gpuos::registry {
namespace {

using device::TaskDesc;
using device::TensorDesc;
using testing::BuiltinOperators;
using testing::GpuSession;
using testing::HostTensor;

constexpr const char* kCustomPack = R"(gpuos_pack: 1
name: test.custom
version: 1.0.0
operators:
  - name: transpose2d
    version: 1.0.0
    kind: custom
    dtypes: [f32, f16]
    inputs: [{name: src}]
    outputs: [{name: dst}]
    body: |
      ctx.for_each([&](long long i) {
        const long long r = i / dst.size(1);
        const long long c = i % dst.size(1);
        dst(r, c) = src(c, r);
      });
  - name: block_sum
    version: 1.0.0
    kind: custom
    dtypes: [f64]
    inputs: [{name: src}]
    outputs: [{name: dst}]
    attributes: [{name: scale, type: f64, default: 1}]
    body: |
      double* partial = ctx.scratch<double>();
      double mine = 0;
      for (long long i = ctx.thread_index(); i < src.numel(); i += ctx.num_threads()) {
        mine += src.load(i);
      }
      partial[ctx.thread_index()] = mine;
      ctx.sync();
      if (ctx.thread_index() == 0) {
        double total = 0;
        for (int t = 0; t < ctx.num_threads(); ++t) total += partial[t];
        dst.store(0, total * scale);
      }
)";

class JitGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    session_ = new GpuSession();
    if (!session_->available()) return;
    std::vector<OperatorSpec> ops = BuiltinOperators();
    for (OperatorSpec& op : testing::ParseOperators(kCustomPack, "custom.yaml")) {
      ops.push_back(std::move(op));
    }
    ops_ = new std::vector<OperatorSpec>(std::move(ops));
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

  static const OperatorSpec& Op(const std::string& name) {
    for (const OperatorSpec& op : *ops_) {
      if (op.name == name) return op;
    }
    ADD_FAILURE() << "no operator " << name;
    return ops_->front();
  }
  static std::uint32_t Slot(const std::string& name, DType dtype) {
    const OperatorSpec& op = Op(name);
    const ImageEntry* entry = session_->image().Find(op.name, op.version, dtype);
    EXPECT_NE(entry, nullptr) << name << " " << DTypeName(dtype);
    return entry == nullptr ? 0 : entry->slot;
  }

  static GpuSession* session_;
  static std::vector<OperatorSpec>* ops_;
};

GpuSession* JitGpuTest::session_ = nullptr;
std::vector<OperatorSpec>* JitGpuTest::ops_ = nullptr;

std::vector<double> RandomValues(std::size_t n, std::uint32_t seed, double low, double high) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> distribution(low, high);
  std::vector<double> values(n);
  for (double& v : values) v = distribution(generator);
  return values;
}

void ExpectClose(const std::vector<double>& got, const std::vector<double>& want, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(got[i] - want[i]);
    const bool ok = (std::isnan(want[i]) && std::isnan(got[i])) ||
                    error <= tolerance * (1.0 + std::fabs(want[i]));
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
    }
  }
}

TEST_F(JitGpuTest, AddOnThousandRandomElementsInFourTiles) {
  const std::size_t n = 1000;
  const auto a_values = RandomValues(n, 1, -10, 10);
  const auto b_values = RandomValues(n, 2, -10, 10);
  HostTensor a = HostTensor::Dense(DType::kF32, {static_cast<long long>(n)}, a_values);
  HostTensor b = HostTensor::Dense(DType::kF32, {static_cast<long long>(n)}, b_values);
  HostTensor out = HostTensor::Poisoned(DType::kF32, {static_cast<long long>(n)});
  std::vector<TaskDesc> tasks;
  auto slots = EncodeAttributeSlots(Op("add"), {{"alpha", "0.5"}});
  ASSERT_TRUE(slots.ok());
  for (long long begin = 0; begin < static_cast<long long>(n); begin += 256) {
    tasks.push_back(testing::MakeTask(Slot("add", DType::kF32), {0, 1, 2}, begin,
                                      std::min<long long>(begin + 256, n), *slots));
  }
  auto status = session_->Run(tasks, {&a, &b, &out}, /*blocks=*/2);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->error, 0u) << "task " << status->task_id << " detail " << status->detail;
  EXPECT_EQ(status->completed, tasks.size());
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) {
    want[i] = static_cast<float>(a_values[i]) + 0.5 * static_cast<float>(b_values[i]);
  }
  ExpectClose(out.Values(), want, 1e-6, "add f32");
}

// The dense path (vector accesses when every tensor's tile start is aligned,
// element accesses otherwise, partial rounds at the end of a tile) and the
// general path (a transposed output) give the reference results.
TEST_F(JitGpuTest, DenseFastPathHandlesAlignmentAndTailsLikeTheGeneralPath) {
  // add f32: tiles starting aligned, at one element, and unaligned.
  const long long n = 4099;
  const auto a_values = RandomValues(n, 11, -10, 10);
  const auto b_values = RandomValues(n, 12, -10, 10);
  HostTensor a = HostTensor::Dense(DType::kF32, {n}, a_values);
  HostTensor b = HostTensor::Dense(DType::kF32, {n}, b_values);
  HostTensor out = HostTensor::Poisoned(DType::kF32, {n});
  auto slots = EncodeAttributeSlots(Op("add"), {{"alpha", "0.5"}});
  ASSERT_TRUE(slots.ok());
  std::vector<TaskDesc> tasks;
  const long long cuts[] = {0, 1024, 1025, 3001, n};
  for (int t = 0; t + 1 < 5; ++t) {
    tasks.push_back(
        testing::MakeTask(Slot("add", DType::kF32), {0, 1, 2}, cuts[t], cuts[t + 1], *slots));
  }
  auto status = session_->Run(tasks, {&a, &b, &out}, 3);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->error, 0u) << "task " << status->task_id << " detail " << status->detail;
  std::vector<double> want(n);
  for (long long i = 0; i < n; ++i) {
    want[i] = static_cast<float>(static_cast<float>(a_values[i]) +
                                 0.5f * static_cast<float>(b_values[i]));
  }
  ExpectClose(out.Values(), want, 1e-6, "add f32, dense");

  // The same sums through the general path: a [rows, cols] output written
  // through a transposed view.
  const long long rows = 61, cols = 67;
  HostTensor a2 = HostTensor::Dense(DType::kF32, {rows, cols}, a_values);
  HostTensor b2 = HostTensor::Dense(DType::kF32, {rows, cols}, b_values);
  HostTensor out2 = HostTensor::Poisoned(DType::kF32, {cols, rows}).Transposed();
  status = session_->Run(
      {testing::MakeTask(Slot("add", DType::kF32), {0, 1, 2}, 0, rows * cols, *slots)},
      {&a2, &b2, &out2}, 1);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->error, 0u) << "detail " << status->detail;
  ExpectClose(out2.Values(), std::vector<double>(want.begin(), want.begin() + rows * cols), 1e-6,
              "add f32, transposed output");

  // where f16 (bool condition): an unaligned tile start and an odd end.
  const long long m = 1007;
  std::vector<double> conditions(m);
  for (long long i = 0; i < m; ++i) conditions[i] = (i * 7) % 3 == 0 ? 1 : 0;
  HostTensor cond = HostTensor::Dense(DType::kBool, {m}, conditions);
  HostTensor x = HostTensor::Dense(DType::kF16, {m}, a_values);
  HostTensor y = HostTensor::Dense(DType::kF16, {m}, b_values);
  HostTensor picked = HostTensor::Poisoned(DType::kF16, {m});
  status = session_->Run({testing::MakeTask(Slot("where", DType::kF16), {0, 1, 2, 3}, 0, 3, {}),
                          testing::MakeTask(Slot("where", DType::kF16), {0, 1, 2, 3}, 3, m, {})},
                         {&cond, &x, &y, &picked}, 2);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->error, 0u) << "task " << status->task_id << " detail " << status->detail;
  std::vector<double> want_picked(m);
  for (long long i = 0; i < m; ++i) {
    want_picked[i] = testing::RoundTo(DType::kF16, conditions[i] != 0 ? a_values[i] : b_values[i]);
  }
  ExpectClose(picked.Values(), want_picked, 0, "where f16, dense");

  // lt f64 -> bool: two widths (2 and 16 elements per vector) in one task.
  const long long k = 555;
  HostTensor p = HostTensor::Dense(DType::kF64, {k}, a_values);
  HostTensor r = HostTensor::Dense(DType::kF64, {k}, b_values);
  HostTensor less = HostTensor::Poisoned(DType::kBool, {k});
  status = session_->Run({testing::MakeTask(Slot("lt", DType::kF64), {0, 1, 2}, 0, 300, {}),
                          testing::MakeTask(Slot("lt", DType::kF64), {0, 1, 2}, 300, k, {})},
                         {&p, &r, &less}, 2);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->error, 0u) << "task " << status->task_id << " detail " << status->detail;
  std::vector<double> want_less(k);
  for (long long i = 0; i < k; ++i) want_less[i] = a_values[i] < b_values[i] ? 1 : 0;
  ExpectClose(less.Values(), want_less, 0, "lt f64, dense");
}

TEST_F(JitGpuTest, BroadcastAndStridedViews) {
  const long long rows = 37;
  const long long cols = 53;
  // `a` is the transpose of a [cols, rows] buffer: strides (1, rows).
  const auto a_storage = RandomValues(rows * cols, 3, -4, 4);
  HostTensor a = HostTensor::Dense(DType::kF16, {cols, rows}, a_storage).Transposed();
  // `b` has shape [cols]: broadcast over the rows.
  const auto b_values = RandomValues(cols, 4, -4, 4);
  HostTensor b = HostTensor::Dense(DType::kF16, {cols}, b_values);
  // `out` is written through a transposed view too.
  HostTensor out = HostTensor::Poisoned(DType::kF16, {cols, rows}).Transposed();
  auto slots = EncodeAttributeSlots(Op("mul"), {});
  ASSERT_TRUE(slots.ok());
  const TaskDesc task =
      testing::MakeTask(Slot("mul", DType::kF16), {0, 1, 2}, 0, rows * cols, *slots);
  auto status = session_->Run({task}, {&a, &b, &out}, 1);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->error, 0u) << "detail " << status->detail;
  std::vector<double> want;
  std::vector<double> got;
  const std::vector<double> a_view = a.Values();
  const std::vector<double> out_view = out.Values();
  for (long long r = 0; r < rows; ++r) {
    for (long long c = 0; c < cols; ++c) {
      const double x = testing::RoundTo(DType::kF16, a_view[r * cols + c]);
      const double y = testing::RoundTo(DType::kF16, b_values[c]);
      want.push_back(testing::RoundTo(DType::kF16, x * y));
      got.push_back(out_view[r * cols + c]);
    }
  }
  ExpectClose(got, want, 0, "mul f16 broadcast, strided");
}

TEST_F(JitGpuTest, ReductionOverAPermutedView) {
  const long long rows = 300;
  const long long cols = 7;
  const auto values = RandomValues(rows * cols, 5, -1, 1);
  // Sum over dim 0 of a [rows, cols] tensor: the input view is [cols, rows]
  // (the reduced dimension last), strides (1, cols).
  HostTensor input = HostTensor::Dense(DType::kF32, {rows, cols}, values).Transposed();
  HostTensor sums = HostTensor::Poisoned(DType::kF32, {cols});
  HostTensor maxima = HostTensor::Poisoned(DType::kF32, {cols});
  HostTensor argmax = HostTensor::Poisoned(DType::kI64, {cols});
  std::vector<double> want_sum(cols, 0);
  std::vector<double> want_max(cols, -1e300);
  std::vector<double> want_arg(cols, 0);
  for (long long c = 0; c < cols; ++c) {
    for (long long r = 0; r < rows; ++r) {
      const double v = static_cast<float>(values[r * cols + c]);
      want_sum[c] += v;
      if (v > want_max[c]) {
        want_max[c] = v;
        want_arg[c] = static_cast<double>(r);
      }
    }
  }
  std::vector<TaskDesc> tasks = {
      testing::MakeTask(Slot("sum", DType::kF32), {0, 1}, 0, 4, {}),
      testing::MakeTask(Slot("sum", DType::kF32), {0, 1}, 4, cols, {}),
      testing::MakeTask(Slot("amax", DType::kF32), {0, 2}, 0, cols, {}),
      testing::MakeTask(Slot("argmax", DType::kF32), {0, 3}, 0, cols, {}),
  };
  auto status = session_->Run(tasks, {&input, &sums, &maxima, &argmax}, 3);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->error, 0u) << "task " << status->task_id << " detail " << status->detail;
  ExpectClose(sums.Values(), want_sum, 1e-4, "sum over a permuted view");
  ExpectClose(maxima.Values(), want_max, 0, "amax");
  ExpectClose(argmax.Values(), want_arg, 0, "argmax");
}

TEST_F(JitGpuTest, CustomOperatorsUseAccessorsScratchAndSync) {
  const long long rows = 19;
  const long long cols = 45;
  const auto values = RandomValues(rows * cols, 6, -3, 3);
  HostTensor src = HostTensor::Dense(DType::kF32, {rows, cols}, values);
  HostTensor dst = HostTensor::Poisoned(DType::kF32, {cols, rows});
  HostTensor src64 = HostTensor::Dense(DType::kF64, {rows * cols}, values);
  HostTensor total = HostTensor::Poisoned(DType::kF64, {1});
  auto scale = EncodeAttributeSlots(Op("block_sum"), {{"scale", "2"}});
  ASSERT_TRUE(scale.ok());
  const std::vector<TaskDesc> tasks = {
      testing::MakeTask(Slot("transpose2d", DType::kF32), {0, 1}, 0, 500, {}),
      testing::MakeTask(Slot("transpose2d", DType::kF32), {0, 1}, 500, rows * cols, {}),
      testing::MakeTask(Slot("block_sum", DType::kF64), {2, 3}, 0, 1, *scale),
  };
  auto status = session_->Run(tasks, {&src, &dst, &src64, &total}, 2);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->error, 0u) << "task " << status->task_id << " detail " << status->detail;
  std::vector<double> want(rows * cols);
  double sum = 0;
  for (long long r = 0; r < rows; ++r) {
    for (long long c = 0; c < cols; ++c) {
      want[c * rows + r] = static_cast<float>(values[r * cols + c]);
      sum += values[r * cols + c];
    }
  }
  ExpectClose(dst.Values(), want, 0, "transpose2d");
  ExpectClose(total.Values(), {2 * sum}, 1e-12, "block_sum");
}

TEST_F(JitGpuTest, EveryBuiltinOperatorPassesItsTests) {
  int cases = 0;
  for (const OperatorSpec& op : *ops_) {
    for (const OperatorTest& test : op.tests) {
      SCOPED_TRACE(op.name + "/" + test.name + " (" + DTypeName(test.dtype) + ")");
      std::vector<HostTensor> tensors;
      auto find = [](const std::vector<OperatorTest::Tensor>& list, const std::string& name) {
        for (const auto& t : list) {
          if (t.name == name) return &t;
        }
        return static_cast<const OperatorTest::Tensor*>(nullptr);
      };
      // A tensor's dtype: fixed, or the test's T or U.
      auto dtype_of = [&](const TensorParam& param) {
        if (param.dtype) return *param.dtype;
        return param.type_variable == TypeVariable::kU ? test.out_dtype.value_or(test.dtype)
                                                       : test.dtype;
      };
      for (const TensorParam& param : op.inputs) {
        const OperatorTest::Tensor* t = find(test.inputs, param.name);
        ASSERT_NE(t, nullptr) << param.name;
        tensors.push_back(HostTensor::Dense(dtype_of(param), testing::ShapeOf(*t), t->values));
      }
      for (const TensorParam& param : op.outputs) {
        const OperatorTest::Tensor* t = find(test.expected, param.name);
        ASSERT_NE(t, nullptr) << param.name;
        tensors.push_back(HostTensor::Poisoned(dtype_of(param), testing::ShapeOf(*t)));
      }
      auto slots = EncodeAttributeSlots(op, test.attributes);
      ASSERT_TRUE(slots.ok()) << slots.status().ToString();
      std::vector<int> indices;
      std::vector<HostTensor*> pointers;
      for (std::size_t k = 0; k < tensors.size(); ++k) {
        indices.push_back(static_cast<int>(k));
        pointers.push_back(&tensors[k]);
      }
      const long long work = tensors[op.inputs.size()].numel();
      const ImageEntry* entry =
          session_->image().Find(op.name, op.version, test.dtype, test.out_dtype);
      ASSERT_NE(entry, nullptr);
      const TaskDesc task = testing::MakeTask(entry->slot, indices, 0, work, *slots);
      auto status = session_->Run({task}, pointers, 1);
      ASSERT_TRUE(status.ok()) << status.status().ToString();
      ASSERT_EQ(status->error, 0u) << "detail " << status->detail;
      for (std::size_t k = 0; k < op.outputs.size(); ++k) {
        const OperatorTest::Tensor* want = find(test.expected, op.outputs[k].name);
        ExpectClose(tensors[op.inputs.size() + k].Values(), want->values, test.tolerance,
                    op.outputs[k].name);
      }
      ++cases;
    }
  }
  EXPECT_GE(cases, 25);
}

TEST_F(JitGpuTest, ErrorsAreReportedAndNoOpsComplete) {
  HostTensor a = HostTensor::Dense(DType::kF32, {4}, {1, 2, 3, 4});
  HostTensor b = HostTensor::Dense(DType::kF64, {4}, {1, 2, 3, 4});
  HostTensor out = HostTensor::Poisoned(DType::kF32, {4});
  TaskDesc noop = testing::MakeTask(0, {}, 0, 0, {});
  TaskDesc bad_opcode = testing::MakeTask(session_->image().table_size + 5, {0, 1, 2}, 0, 4, {});
  bad_opcode.task_id = 77;
  auto status = session_->Run({noop, bad_opcode, noop}, {&a, &b, &out}, 1);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->error, device::kWorkerBadOpcode);
  EXPECT_EQ(status->task_id, 77u);
  EXPECT_EQ(status->completed, 3u);

  auto slots = EncodeAttributeSlots(Op("add"), {});
  ASSERT_TRUE(slots.ok());
  const TaskDesc wrong_dtype = testing::MakeTask(Slot("add", DType::kF32), {0, 1, 2}, 0, 4, *slots);
  status = session_->Run({wrong_dtype}, {&a, &b, &out}, 1);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->error, device::kWorkerBadDType);
  EXPECT_EQ(status->detail, 1u);

  HostTensor wide = HostTensor::Dense(DType::kF32, {5}, {1, 2, 3, 4, 5});
  const TaskDesc bad_shape = testing::MakeTask(Slot("add", DType::kF32), {0, 1, 2}, 0, 4, *slots);
  status = session_->Run({bad_shape}, {&a, &wide, &out}, 1);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->error, device::kWorkerBadShape);

  const TaskDesc bad_index = testing::MakeTask(Slot("add", DType::kF32), {0, 1, 9}, 0, 4, *slots);
  status = session_->Run({bad_index}, {&a, &a, &out}, 1);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->error, device::kWorkerBadTensorIndex);
}

TEST_F(JitGpuTest, LtoImageRunsToo) {
  GpuSession lto;
  lto.LoadImageOf(testing::ParseOperators(testing::kSmallPackYaml), LinkMode::kLto);
  ASSERT_TRUE(lto.ready()) << lto.error();
  const ImageEntry* axpy = lto.image().Find("axpy", SemVer{1, 0, 0}, DType::kF16);
  ASSERT_NE(axpy, nullptr);
  const auto a_values = RandomValues(300, 7, -2, 2);
  const auto b_values = RandomValues(300, 8, -2, 2);
  HostTensor a = HostTensor::Dense(DType::kF16, {300}, a_values);
  HostTensor b = HostTensor::Dense(DType::kF16, {300}, b_values);
  HostTensor out = HostTensor::Poisoned(DType::kF16, {300});
  const OperatorSpec spec = testing::ParseOperators(testing::kSmallPackYaml)[0];
  auto slots = EncodeAttributeSlots(spec, {});  // alpha = 2
  ASSERT_TRUE(slots.ok());
  auto status =
      lto.Run({testing::MakeTask(axpy->slot, {0, 1, 2}, 0, 300, *slots)}, {&a, &b, &out}, 1);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->error, 0u);
  std::vector<double> want;
  for (std::size_t i = 0; i < a_values.size(); ++i) {
    const float x = static_cast<float>(testing::RoundTo(DType::kF16, a_values[i]));
    const float y = static_cast<float>(testing::RoundTo(DType::kF16, b_values[i]));
    want.push_back(testing::RoundTo(DType::kF16, std::fma(2.0f, x, y)));
  }
  // The device may or may not contract 2 * a + b into one fma: allow one f16 ulp.
  ExpectClose(out.Values(), want, 1.0 / 1024, "axpy f16 (LTO image)");
}

}  // namespace
}  // namespace gpuos::registry
