// Every built-in operator, every dtype it is instantiated for (every T x U
// pair for cast), on fresh random inputs with strided, transposed and
// broadcast views, against a float64 CPU reference (op_reference.h); outputs
// are poisoned first and work is split into several uneven tasks over
// several blocks. Label `gpu`; skips with the reason where there is no CUDA
// device.
#include "op_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "gpuos/registry/codegen.h"
#include "jit_gpu_util.h"
#include "jit_test_util.h"

namespace gpuos::registry {
namespace {

using testing::Attributes;
using testing::GpuSession;
using testing::HostTensor;

// Relative tolerance for results stored as `dtype` (one or two ulps).
double Tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return 2e-3;
    case DType::kBF16:
      return 1.6e-2;
    case DType::kF32:
      return 2e-5;
    case DType::kF64:
      return 1e-11;
    default:
      return 0;
  }
}

class OpReferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    session_ = new GpuSession();
    if (!session_->available()) return;
    ops_ = new std::vector<OperatorSpec>(testing::BuiltinOperators());
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

  // Random values in [low, high) for `dtype`: integers for integer types,
  // 0/1 for bool.
  std::vector<double> Random(DType dtype, long long n, double low, double high) {
    std::uniform_real_distribution<double> distribution(low, high);
    std::vector<double> values(n);
    for (double& v : values) {
      v = distribution(generator_);
      if (dtype == DType::kBool) v = v > (low + high) / 2 ? 1 : 0;
      if (!IsFloatingPoint(dtype) && dtype != DType::kBool) v = std::floor(v);
    }
    return values;
  }

  // Runs `op` (T = dtype, U = out_dtype) on `tensors` (inputs, then outputs),
  // with the work items [0, work) split into tasks of `tile` over 3 blocks.
  void Run(const OperatorSpec& op, DType dtype, std::optional<DType> out_dtype,
           std::vector<HostTensor*> tensors, long long work, long long tile,
           const Attributes& attributes) {
    const ImageEntry* entry = session_->image().Find(op.name, op.version, dtype, out_dtype);
    ASSERT_NE(entry, nullptr);
    std::vector<std::pair<std::string, std::string>> texts;
    for (const auto& [name, value] : attributes) {
      const bool integral =
          op.attributes.end() !=
          std::find_if(op.attributes.begin(), op.attributes.end(), [&](const AttributeParam& p) {
            return p.name == name &&
                   (p.type == AttributeType::kI32 || p.type == AttributeType::kI64);
          });
      char text[64];
      if (integral) {
        std::snprintf(text, sizeof(text), "%lld", static_cast<long long>(value));
      } else {
        std::snprintf(text, sizeof(text), "%.17g", value);
      }
      texts.emplace_back(name, text);
    }
    auto slots = EncodeAttributeSlots(op, texts);
    ASSERT_TRUE(slots.ok()) << slots.status().ToString();
    std::vector<int> indices;
    for (std::size_t k = 0; k < tensors.size(); ++k) indices.push_back(static_cast<int>(k));
    std::vector<device::TaskDesc> tasks;
    for (long long begin = 0; begin < work; begin += tile) {
      tasks.push_back(
          testing::MakeTask(entry->slot, indices, begin, std::min(work, begin + tile), *slots));
      tasks.back().task_id = static_cast<unsigned>(tasks.size());
    }
    auto status = session_->Run(tasks, tensors, 3);
    ASSERT_TRUE(status.ok()) << status.status().ToString();
    ASSERT_EQ(status->error, 0u) << "task " << status->task_id << " detail " << status->detail;
  }

  void Expect(const HostTensor& out, const std::vector<double>& reference, double tolerance) {
    const std::vector<double> got = out.Values();
    ASSERT_EQ(got.size(), reference.size());
    int reported = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double want = testing::ConvertTo(out.dtype, reference[i]);
      const bool ok = (std::isnan(want) && std::isnan(got[i])) ||
                      (std::isinf(want) && want == got[i]) ||
                      std::fabs(got[i] - want) <= tolerance * (1.0 + std::fabs(want));
      if (!ok && reported++ < 5) {
        ADD_FAILURE() << "element " << i << " is " << got[i] << ", expected " << want;
      }
    }
    ++checked_;
  }

  void Elementwise(const OperatorSpec& op, DType dtype, std::optional<DType> out_dtype);
  void Reduction(const OperatorSpec& op, DType dtype);
  void Custom(const OperatorSpec& op, DType dtype);
  void FusedAddmm(const OperatorSpec& op, DType dtype);

  static GpuSession* session_;
  static std::vector<OperatorSpec>* ops_;
  std::mt19937 generator_{12345};
  int checked_ = 0;
};

GpuSession* OpReferenceTest::session_ = nullptr;
std::vector<OperatorSpec>* OpReferenceTest::ops_ = nullptr;

DType Resolve(const TensorParam& p, DType dtype, std::optional<DType> out_dtype) {
  if (p.dtype) return *p.dtype;
  return p.type_variable == TypeVariable::kU ? out_dtype.value_or(dtype) : dtype;
}

// Input value ranges that keep every operator in its domain and integer
// arithmetic exact.
std::pair<double, double> Domain(const std::string& op, DType dtype) {
  static const std::set<std::string> positive = {"log", "sqrt", "rsqrt",
                                                 "pow", "div",  "reciprocal"};
  if (op == "cast" || dtype == DType::kU8) return {0, 100};
  if (positive.count(op)) return {0.25, 4};
  if (!IsFloatingPoint(dtype) || op == "eq" || op == "ne" || op == "le" || op == "ge" ||
      op == "lt" || op == "gt" || op.rfind("logical_", 0) == 0) {
    return {-3, 4};  // small integers, so equal values occur
  }
  return {-3, 3};
}

Attributes DefaultAttributes(const OperatorSpec& op) {
  Attributes attributes;
  for (const AttributeParam& p : op.attributes) {
    attributes[p.name] = p.default_value ? std::stod(*p.default_value) : 0;
  }
  if (op.name == "clamp") attributes = {{"lo", -1.5}, {"hi", 2}};
  if (op.name == "add" || op.name == "sub") attributes["alpha"] = 2;
  return attributes;
}

// Output [5, 37], written through a transposed view; input 0 a transposed
// view, input 1 broadcast from [37], input 2 broadcast from [5, 1].
void OpReferenceTest::Elementwise(const OperatorSpec& op, DType dtype,
                                  std::optional<DType> out_dtype) {
  const long long rows = 5, cols = 37;
  auto [low, high] = Domain(op.name, dtype);
  const std::vector<std::vector<long long>> shapes = {{cols, rows}, {cols}, {rows, 1}};
  std::vector<HostTensor> tensors;
  for (std::size_t k = 0; k < op.inputs.size(); ++k) {
    const DType d = Resolve(op.inputs[k], dtype, out_dtype);
    const std::vector<long long>& shape = shapes[k % shapes.size()];
    long long n = 1;
    for (long long s : shape) n *= s;
    const double lo = d == DType::kBool ? 0 : low;
    const double hi = d == DType::kBool ? 2 : high;
    HostTensor t = HostTensor::Dense(d, shape, Random(d, n, lo, hi));
    tensors.push_back(k == 0 ? t.Transposed() : t);
  }
  const DType out_type = Resolve(op.outputs[0], dtype, out_dtype);
  tensors.push_back(HostTensor::Poisoned(out_type, {cols, rows}).Transposed());
  std::vector<HostTensor*> pointers;
  for (HostTensor& t : tensors) pointers.push_back(&t);
  const Attributes attributes = DefaultAttributes(op);
  Run(op, dtype, out_dtype, pointers, rows * cols, 64, attributes);
  if (HasFatalFailure()) return;
  std::vector<std::vector<double>> values;
  for (std::size_t k = 0; k < op.inputs.size(); ++k) values.push_back(tensors[k].Values());
  const testing::ElementFunction f = testing::ElementwiseReference(op.name);
  ASSERT_TRUE(f) << "no CPU reference for " << op.name;
  std::vector<double> reference;
  for (long long r = 0; r < rows; ++r) {
    for (long long c = 0; c < cols; ++c) {
      std::vector<double> in;
      for (std::size_t k = 0; k < values.size(); ++k) {
        const std::size_t kind = k % shapes.size();
        in.push_back(kind == 0 ? values[k][r * cols + c] : kind == 1 ? values[k][c] : values[k][r]);
      }
      reference.push_back(f(in, attributes, dtype, out_type));
    }
  }
  Expect(tensors.back(), reference, Tolerance(out_type));
}

// A [7, 9, 11] view of a [11, 9, 7] buffer (strides reversed); the last two
// dimensions reduced into [7], in tasks of 3 slices.
void OpReferenceTest::Reduction(const OperatorSpec& op, DType dtype) {
  const long long a = 7, b = 9, c = 11;
  double low = -3, high = 3;
  if (op.name == "prod") {
    low = IsFloatingPoint(dtype) ? 0.9 : -1;
    high = IsFloatingPoint(dtype) ? 1.1 : 2;
  } else if (dtype == DType::kU8) {
    low = 0, high = 100;
  } else if (!IsFloatingPoint(dtype)) {
    low = -20, high = 20;
  }
  HostTensor input =
      HostTensor::Dense(dtype, {c, b, a}, Random(dtype, a * b * c, low, high)).Transposed();
  const DType out_type = Resolve(op.outputs[0], dtype, std::nullopt);
  HostTensor out = HostTensor::Poisoned(out_type, {a});
  const Attributes attributes = DefaultAttributes(op);
  Run(op, dtype, std::nullopt, {&input, &out}, a, 3, attributes);
  if (HasFatalFailure()) return;
  const testing::SliceFunction f = testing::ReductionReference(op.name);
  ASSERT_TRUE(f) << "no CPU reference for " << op.name;
  const std::vector<double> values = input.Values();
  std::vector<double> reference;
  for (long long s = 0; s < a; ++s) {
    reference.push_back(
        f(std::vector<double>(values.begin() + s * b * c, values.begin() + (s + 1) * b * c),
          attributes));
  }
  // Sums of 99 terms accumulate rounding in the compute type.
  double tolerance = Tolerance(out_type);
  if (dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16) {
    tolerance = std::max(tolerance, 1e-4);
  }
  Expect(out, reference, op.name == "prod" && dtype == DType::kBF16 ? 3e-2 : tolerance);
}

// fused_addmm: (1) a layer_norm + gelu prologue on a transposed [2, 3, 40]
// a (few rows), a broadcast bias, gelu_tanh and a transposed residual in
// the epilogue, tasks of 20 elements (columns straddle them); (2) no
// prologue, [45, 70] x [70, 37] (tiles), relu and a residual; (3) a plain
// layer_norm prologue on one row of 300, more than a thread per element
// (the warp's loop over the row); (4) a layer_norm + gelu prologue on one
// row of 200 (the whole block, a thread per element).
void OpReferenceTest::FusedAddmm(const OperatorSpec& op, DType dtype) {
  const double tolerance = dtype == DType::kF32 ? 1e-4 : Tolerance(dtype);
  {
    const long long batch = 2, m = 3, k = 40, n = 37;
    HostTensor a =
        HostTensor::Dense(dtype, {k, m, batch}, Random(dtype, batch * m * k, -2, 2)).Transposed();
    HostTensor b = HostTensor::Dense(dtype, {batch, k, n}, Random(dtype, batch * k * n, -1, 1));
    HostTensor c = HostTensor::Dense(dtype, {n}, Random(dtype, n, -1, 1));
    c.sizes = {batch, m, n};
    c.strides = {0, 0, 1};
    HostTensor weight = HostTensor::Dense(dtype, {k}, Random(dtype, k, 0.5, 1.5));
    HostTensor bias = HostTensor::Dense(dtype, {k}, Random(dtype, k, -1, 1));
    HostTensor residual =
        HostTensor::Dense(dtype, {n, m, batch}, Random(dtype, batch * m * n, -1, 1)).Transposed();
    HostTensor out = HostTensor::Poisoned(dtype, {batch, m, n});
    const Attributes attributes = {{"alpha", 0.5}, {"beta", -2},      {"norm", 2},
                                   {"eps", 1e-5},  {"activation", 2}, {"add_residual", 1}};
    Run(op, dtype, std::nullopt, {&a, &b, &c, &weight, &bias, &residual, &out}, batch * m * n, 20,
        attributes);
    if (HasFatalFailure()) return;
    const std::vector<double> normalized = testing::NormRowsReference(
        dtype, a.Values(), k, weight.Values(), bias.Values(), attributes.at("eps"), 1);
    const std::vector<double> v = testing::AddmmReference(
        testing::MatmulReference(normalized, b.Values(), batch, m, k, n), c.Values(), 0.5, -2);
    Expect(out, testing::FusedEpilogueReference(dtype, v, 2, residual.Values()), tolerance);
  }
  {
    const long long m = 45, k = 70, n = 37;
    HostTensor a = HostTensor::Dense(dtype, {m, k}, Random(dtype, m * k, -1, 1));
    HostTensor b = HostTensor::Dense(dtype, {n, k}, Random(dtype, n * k, -1, 1)).Transposed();
    HostTensor c = HostTensor::Dense(dtype, {n}, Random(dtype, n, -1, 1));
    HostTensor residual =
        HostTensor::Dense(dtype, {n, m}, Random(dtype, m * n, -1, 1)).Transposed();
    HostTensor out = HostTensor::Poisoned(dtype, {m, n});
    const Attributes attributes = {{"alpha", 1},  {"beta", 1},       {"norm", 0},
                                   {"eps", 1e-5}, {"activation", 3}, {"add_residual", 1}};
    Run(op, dtype, std::nullopt, {&a, &b, &c, &a, &a, &residual, &out}, m * n, 500, attributes);
    if (HasFatalFailure()) return;
    c.sizes = {m, n};
    c.strides = {0, 1};
    const std::vector<double> v = testing::AddmmReference(
        testing::MatmulReference(a.Values(), b.Values(), 1, m, k, n), c.Values(), 1, 1);
    Expect(out, testing::FusedEpilogueReference(dtype, v, 3, residual.Values()), tolerance);
  }
  // One row of k with a layer_norm prologue (`norm`: 1 + its activation),
  // in tasks of `per_task` output elements.
  const auto one_row = [&](long long k, long long n, int norm, long long per_task) {
    HostTensor a = HostTensor::Dense(dtype, {1, k}, Random(dtype, k, -2, 2));
    HostTensor b = HostTensor::Dense(dtype, {n, k}, Random(dtype, n * k, -1, 1)).Transposed();
    HostTensor c = HostTensor::Dense(dtype, {n}, Random(dtype, n, -1, 1));
    HostTensor weight = HostTensor::Dense(dtype, {k}, Random(dtype, k, 0.5, 1.5));
    HostTensor bias = HostTensor::Dense(dtype, {k}, Random(dtype, k, -1, 1));
    HostTensor out = HostTensor::Poisoned(dtype, {1, n});
    const Attributes attributes = {{"alpha", 1},  {"beta", 1},       {"norm", norm},
                                   {"eps", 1e-5}, {"activation", 0}, {"add_residual", 0}};
    Run(op, dtype, std::nullopt, {&a, &b, &c, &weight, &bias, &a, &out}, n, per_task, attributes);
    if (HasFatalFailure()) return;
    c.sizes = {1, n};
    c.strides = {0, 1};
    const std::vector<double> normalized = testing::NormRowsReference(
        dtype, a.Values(), k, weight.Values(), bias.Values(), attributes.at("eps"), norm - 1);
    const std::vector<double> v = testing::AddmmReference(
        testing::MatmulReference(normalized, b.Values(), 1, 1, k, n), c.Values(), 1, 1);
    Expect(out, testing::FusedEpilogueReference(dtype, v, 0, {}), tolerance);
  };
  one_row(300, 9, 1, 4);
  if (HasFatalFailure()) return;
  one_row(200, 7, 2, 3);
}

void OpReferenceTest::Custom(const OperatorSpec& op, DType dtype) {
  const Attributes attributes = DefaultAttributes(op);
  const double tolerance = std::max(Tolerance(dtype), dtype == DType::kF32 ? 1e-4 : 0.0);
  const std::string& name = op.name;
  if (name == "softmax" || name == "log_softmax" || name == "layer_norm" || name == "rms_norm") {
    // [6, 300] rows, the input a transposed view; tasks of 450 elements so
    // rows straddle task boundaries.
    const long long rows = 6, n = 300;
    HostTensor a = HostTensor::Dense(dtype, {n, rows}, Random(dtype, rows * n, -4, 4)).Transposed();
    HostTensor weight = HostTensor::Dense(dtype, {n}, Random(dtype, n, 0.5, 1.5));
    HostTensor bias = HostTensor::Dense(dtype, {n}, Random(dtype, n, -1, 1));
    HostTensor out = HostTensor::Poisoned(dtype, {rows, n});
    std::vector<HostTensor*> tensors = {&a};
    if (name == "layer_norm" || name == "rms_norm") tensors.push_back(&weight);
    if (name == "layer_norm") tensors.push_back(&bias);
    tensors.push_back(&out);
    Run(op, dtype, std::nullopt, tensors, rows * n, 450, attributes);
    if (HasFatalFailure()) return;
    const std::vector<double> x = a.Values();
    std::vector<double> reference;
    if (name == "softmax") reference = testing::SoftmaxReference(x, n);
    if (name == "log_softmax") reference = testing::LogSoftmaxReference(x, n);
    if (name == "layer_norm") {
      reference =
          testing::LayerNormReference(x, n, weight.Values(), bias.Values(), attributes.at("eps"));
    }
    if (name == "rms_norm") {
      reference = testing::RmsNormReference(x, n, weight.Values(), attributes.at("eps"));
    }
    Expect(out, reference, tolerance);
  } else if (name == "matmul" || name == "bmm") {
    // [3, 45, 70] (a transposed view) x [3, 70, 37] where b's batch is a
    // stride-0 broadcast; for matmul also the rank-2 product of batch 0.
    const long long batch = 3, m = 45, k = 70, n = 37;
    HostTensor a =
        HostTensor::Dense(dtype, {k, m, batch}, Random(dtype, batch * m * k, -1, 1)).Transposed();
    HostTensor b = HostTensor::Dense(dtype, {1, k, n}, Random(dtype, k * n, -1, 1));
    b.sizes[0] = batch;
    b.strides[0] = 0;
    HostTensor out = HostTensor::Poisoned(dtype, {batch, m, n});
    Run(op, dtype, std::nullopt, {&a, &b, &out}, batch * m * n, 32 * n, attributes);
    if (HasFatalFailure()) return;
    const double matmul_tolerance = dtype == DType::kF32 ? 1e-4 : Tolerance(dtype);
    Expect(out, testing::MatmulReference(a.Values(), b.Values(), batch, m, k, n), matmul_tolerance);
    if (name == "matmul") {
      HostTensor a2 = HostTensor::Dense(dtype, {m, k}, Random(dtype, m * k, -1, 1));
      HostTensor b2 = HostTensor::Dense(dtype, {n, k}, Random(dtype, n * k, -1, 1)).Transposed();
      HostTensor out2 = HostTensor::Poisoned(dtype, {m, n});
      Run(op, dtype, std::nullopt, {&a2, &b2, &out2}, m * n, 500, attributes);
      if (HasFatalFailure()) return;
      Expect(out2, testing::MatmulReference(a2.Values(), b2.Values(), 1, m, k, n),
             matmul_tolerance);
    }
  } else if (name == "addmm" || name == "baddbmm") {
    // The matmul case's product plus a bias [n] broadcast over batches and
    // rows (strides 0, 0, 1), alpha and beta not 1; for addmm also the rank-2
    // product with a full [m, n] bias read through a transposed view.
    const long long batch = 3, m = 45, k = 70, n = 37;
    const Attributes scaled = {{"alpha", 0.5}, {"beta", -2}};
    HostTensor a =
        HostTensor::Dense(dtype, {k, m, batch}, Random(dtype, batch * m * k, -1, 1)).Transposed();
    HostTensor b = HostTensor::Dense(dtype, {1, k, n}, Random(dtype, k * n, -1, 1));
    b.sizes[0] = batch;
    b.strides[0] = 0;
    HostTensor bias = HostTensor::Dense(dtype, {n}, Random(dtype, n, -1, 1));
    bias.sizes = {batch, m, n};
    bias.strides = {0, 0, 1};
    HostTensor out = HostTensor::Poisoned(dtype, {batch, m, n});
    Run(op, dtype, std::nullopt, {&a, &b, &bias, &out}, batch * m * n, 32 * n, scaled);
    if (HasFatalFailure()) return;
    const double matmul_tolerance = dtype == DType::kF32 ? 1e-4 : Tolerance(dtype);
    Expect(out,
           testing::AddmmReference(testing::MatmulReference(a.Values(), b.Values(), batch, m, k, n),
                                   bias.Values(), scaled.at("alpha"), scaled.at("beta")),
           matmul_tolerance);
    if (name == "addmm") {
      HostTensor a2 = HostTensor::Dense(dtype, {m, k}, Random(dtype, m * k, -1, 1));
      HostTensor b2 = HostTensor::Dense(dtype, {n, k}, Random(dtype, n * k, -1, 1)).Transposed();
      HostTensor bias2 = HostTensor::Dense(dtype, {n, m}, Random(dtype, m * n, -1, 1)).Transposed();
      HostTensor out2 = HostTensor::Poisoned(dtype, {m, n});
      Run(op, dtype, std::nullopt, {&a2, &b2, &bias2, &out2}, m * n, 500, scaled);
      if (HasFatalFailure()) return;
      Expect(out2,
             testing::AddmmReference(testing::MatmulReference(a2.Values(), b2.Values(), 1, m, k, n),
                                     bias2.Values(), scaled.at("alpha"), scaled.at("beta")),
             matmul_tolerance);
    }
  } else if (name == "fused_addmm") {
    FusedAddmm(op, dtype);
  } else if (name == "fill" || name == "arange") {
    HostTensor out = HostTensor::Poisoned(dtype, {13, 7}).Transposed();  // [7, 13], strided
    Attributes values = attributes;
    if (name == "fill") values["value"] = dtype == DType::kBool ? 1 : 3.25;
    if (name == "arange") {
      values["start"] = IsFloatingPoint(dtype) ? -3 : -7;
      values["step"] = IsFloatingPoint(dtype) ? 0.25 : 3;
    }
    Run(op, dtype, std::nullopt, {&out}, out.numel(), 40, values);
    if (HasFatalFailure()) return;
    std::vector<double> reference;
    for (long long i = 0; i < out.numel(); ++i) {
      reference.push_back(name == "fill"
                              ? values["value"]
                              : values["start"] + static_cast<double>(i) * values["step"]);
    }
    Expect(out, reference, Tolerance(dtype));
  } else if (name == "cat") {
    const long long rows = 6, a_cols = 5, b_cols = 9;
    HostTensor a =
        HostTensor::Dense(dtype, {a_cols, rows}, Random(dtype, rows * a_cols, 0, 50)).Transposed();
    HostTensor b = HostTensor::Dense(dtype, {rows, b_cols}, Random(dtype, rows * b_cols, 0, 50));
    HostTensor out = HostTensor::Poisoned(dtype, {rows, a_cols + b_cols});
    Attributes dim = {{"dim", -1}};
    Run(op, dtype, std::nullopt, {&a, &b, &out}, out.numel(), 30, dim);
    if (HasFatalFailure()) return;
    Expect(out, testing::CatReference(a.Values(), a_cols, b.Values(), b_cols, rows), 0);
  } else if (name == "index_select" || name == "gather") {
    const long long rows = 8, cols = 11;
    HostTensor a =
        HostTensor::Dense(dtype, {cols, rows}, Random(dtype, rows * cols, 0, 50)).Transposed();
    if (name == "index_select") {
      HostTensor index = HostTensor::Dense(DType::kI64, {5}, Random(DType::kI64, 5, 0, rows));
      HostTensor out = HostTensor::Poisoned(dtype, {5, cols});
      Run(op, dtype, std::nullopt, {&a, &index, &out}, out.numel(), 16, {{"dim", 0}});
      if (HasFatalFailure()) return;
      Expect(out, testing::IndexSelectReference(a.Values(), cols, index.Values()), 0);
    } else {
      const long long out_cols = 4;
      HostTensor index = HostTensor::Dense(DType::kI64, {rows, out_cols},
                                           Random(DType::kI64, rows * out_cols, 0, cols));
      HostTensor out = HostTensor::Poisoned(dtype, {rows, out_cols});
      Run(op, dtype, std::nullopt, {&a, &index, &out}, out.numel(), 7, {{"dim", 1}});
      if (HasFatalFailure()) return;
      Expect(out, testing::GatherReference(a.Values(), cols, index.Values(), out_cols), 0);
    }
  } else {
    FAIL() << "no reference case for custom operator " << name;
  }
}

TEST_F(OpReferenceTest, EveryBuiltinOperatorEveryDtypeMatchesTheCpuReference) {
  int instantiations = 0;
  for (const OperatorSpec& op : *ops_) {
    std::vector<std::optional<DType>> out_dtypes(op.out_dtypes.begin(), op.out_dtypes.end());
    if (out_dtypes.empty()) out_dtypes.push_back(std::nullopt);
    for (DType dtype : op.dtypes) {
      for (const std::optional<DType>& out_dtype : out_dtypes) {
        SCOPED_TRACE(op.name + " T=" + DTypeName(dtype) +
                     (out_dtype ? std::string(" U=") + DTypeName(*out_dtype) : ""));
        switch (op.kind) {
          case OperatorKind::kElementwise:
            Elementwise(op, dtype, out_dtype);
            break;
          case OperatorKind::kReduction:
            Reduction(op, dtype);
            break;
          case OperatorKind::kCustom:
            Custom(op, dtype);
            break;
        }
        ++instantiations;
      }
    }
  }
  EXPECT_GE(checked_, instantiations);
  std::printf("[ %d instantiations of %zu operators checked against float64 references ]\n",
              instantiations, ops_->size());
}

// ctx.fail codes of the shape checks reach the host.
TEST_F(OpReferenceTest, ShapeErrorsOfCustomOperatorsAreReported) {
  const OperatorSpec* matmul = nullptr;
  for (const OperatorSpec& op : *ops_) {
    if (op.name == "matmul") matmul = &op;
  }
  ASSERT_NE(matmul, nullptr);
  HostTensor a = HostTensor::Dense(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor b = HostTensor::Dense(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor out = HostTensor::Poisoned(DType::kF32, {2, 3});
  const ImageEntry* entry = session_->image().Find("matmul", matmul->version, DType::kF32);
  ASSERT_NE(entry, nullptr);
  auto status =
      session_->Run({testing::MakeTask(entry->slot, {0, 1, 2}, 0, 6, {})}, {&a, &b, &out}, 1);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->error, device::kWorkerOperatorFailed);
  EXPECT_EQ(status->detail, 1u);
}

}  // namespace
}  // namespace gpuos::registry
