#include "demo_workloads.h"

#include <cmath>
#include <random>

namespace gpuos::cli {
namespace {

std::vector<float> Random(std::size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

WorkloadTensor Dense(std::vector<long long> sizes, std::vector<float> values = {}) {
  WorkloadTensor t;
  t.elements = 1;
  for (long long s : sizes) t.elements *= static_cast<std::size_t>(s);
  t.sizes = std::move(sizes);
  t.values = std::move(values);
  return t;
}

}  // namespace

Workload MakeChain100() {
  std::mt19937 rng(std::random_device{}());
  constexpr long long kN = 64 * 64;
  Workload w;
  w.name = "chain100_64x64_f32";
  w.description = "100 dependent elementwise ops (add, mul, tanh) on a 64x64 f32 tensor";
  w.tensors.push_back(Dense({64, 64}, Random(kN, -1, 1, rng)));       // 0: x
  w.tensors.push_back(Dense({64, 64}, Random(kN, -1, 1, rng)));       // 1: c
  w.tensors.push_back(Dense({64, 64}, Random(kN, 0.5f, 1.5f, rng)));  // 2: s
  w.tensors.push_back(Dense({64, 64}));                               // 3: ping
  w.tensors.push_back(Dense({64, 64}));                               // 4: pong
  std::vector<double> t(w.tensors[0].values.begin(), w.tensors[0].values.end());
  const auto& c = w.tensors[1].values;
  const auto& s = w.tensors[2].values;
  int in = 0;
  for (int k = 0; k < 100; ++k) {
    const int out = (k % 2 == 0) ? 3 : 4;
    switch (k % 3) {
      case 0:
        w.steps.push_back({"add", DType::kF32, {in, 1, out}, {{"alpha", "0.5"}}});
        for (long long i = 0; i < kN; ++i) t[i] = t[i] + 0.5 * c[i];
        break;
      case 1:
        w.steps.push_back({"mul", DType::kF32, {in, 2, out}, {}});
        for (long long i = 0; i < kN; ++i) t[i] = t[i] * s[i];
        break;
      default:
        w.steps.push_back({"tanh", DType::kF32, {in, out}, {}});
        for (long long i = 0; i < kN; ++i) t[i] = std::tanh(t[i]);
        break;
    }
    in = out;
  }
  w.output = in;
  w.reference = std::move(t);
  w.tolerance = 1e-4;
  return w;
}

Workload MakeMlp(int batch, int hidden) {
  std::mt19937 rng(std::random_device{}());
  const long long b = batch, h = hidden;
  const float scale = 1.0f / std::sqrt(static_cast<float>(h));
  Workload w;
  w.name = "mlp_b" + std::to_string(batch) + "_h" + std::to_string(hidden) + "_f32";
  w.description = "layer_norm(gelu(x W1 + b1) W2 + b2), batch " + std::to_string(batch) +
                  ", hidden " + std::to_string(hidden);
  w.tensors.push_back(Dense({b, h}, Random(b * h, -1, 1, rng)));          // 0: x
  w.tensors.push_back(Dense({h, h}, Random(h * h, -scale, scale, rng)));  // 1: W1
  w.tensors.push_back(Dense({h}, Random(h, -0.1f, 0.1f, rng)));           // 2: b1
  w.tensors.push_back(Dense({h, h}, Random(h * h, -scale, scale, rng)));  // 3: W2
  w.tensors.push_back(Dense({h}, Random(h, -0.1f, 0.1f, rng)));           // 4: b2
  w.tensors.push_back(Dense({h}, Random(h, 0.5f, 1.5f, rng)));            // 5: gamma
  w.tensors.push_back(Dense({h}, Random(h, -0.5f, 0.5f, rng)));           // 6: beta
  for (int i = 0; i < 5; ++i) w.tensors.push_back(Dense({b, h}));         // 7..11
  // Biases broadcast over the batch: a [b, h] view with row stride 0.
  WorkloadTensor b1 = w.tensors[2], b2 = w.tensors[4];
  for (WorkloadTensor* bias : {&b1, &b2}) {
    bias->sizes = {b, h};
    bias->strides = {0, 1};
  }
  w.tensors.push_back(b1);  // 12: b1 broadcast (shares nothing: its own copy of the values)
  w.tensors.push_back(b2);  // 13: b2 broadcast
  w.steps = {{"matmul", DType::kF32, {0, 1, 7}, {}},
             {"add", DType::kF32, {7, 12, 8}, {}},
             {"gelu", DType::kF32, {8, 9}, {}},
             {"matmul", DType::kF32, {9, 3, 10}, {}},
             {"add", DType::kF32, {10, 13, 7}, {}},
             {"layer_norm", DType::kF32, {7, 5, 6, 11}, {{"eps", "1e-05"}}}};
  w.output = 11;

  const auto& x = w.tensors[0].values;
  auto linear = [&](const std::vector<double>& in, const std::vector<float>& wt,
                    const std::vector<float>& bias) {
    std::vector<double> out(b * h);
    for (long long i = 0; i < b; ++i)
      for (long long j = 0; j < h; ++j) {
        double acc = bias[j];
        for (long long k = 0; k < h; ++k) acc += in[i * h + k] * wt[k * h + j];
        out[i * h + j] = acc;
      }
    return out;
  };
  std::vector<double> x64(x.begin(), x.end());
  auto a1 = linear(x64, w.tensors[1].values, w.tensors[2].values);
  for (auto& v : a1) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  auto a2 = linear(a1, w.tensors[3].values, w.tensors[4].values);
  std::vector<double> y(b * h);
  for (long long i = 0; i < b; ++i) {
    double mean = 0, var = 0;
    for (long long j = 0; j < h; ++j) mean += a2[i * h + j];
    mean /= h;
    for (long long j = 0; j < h; ++j) var += (a2[i * h + j] - mean) * (a2[i * h + j] - mean);
    var /= h;
    for (long long j = 0; j < h; ++j) {
      y[i * h + j] = (a2[i * h + j] - mean) / std::sqrt(var + 1e-5) * w.tensors[5].values[j] +
                     w.tensors[6].values[j];
    }
  }
  w.reference = std::move(y);
  w.tolerance = 2e-3;
  return w;
}

long long CountMismatches(const Workload& w, const std::vector<float>& got, double* max_error) {
  long long bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < w.reference.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - w.reference[i]);
    if (!(err <= w.tolerance * (1.0 + std::fabs(w.reference[i])))) ++bad;
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
  }
  *max_error = worst;
  return bad;
}

}  // namespace gpuos::cli
