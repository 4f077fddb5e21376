#include "op_reference.h"

#include <algorithm>
#include <cmath>

#include "jit_gpu_util.h"

namespace gpuos::registry::testing {
namespace {

bool IsIntegral(DType dtype) { return !IsFloatingPoint(dtype); }

// Arithmetic in an integer compute type truncates attribute values.
double AttributeIn(DType compute_dtype, double value) {
  return IsIntegral(compute_dtype) ? std::trunc(value) : value;
}

double Truthy(double v) { return v != 0 || std::isnan(v) ? 1 : 0; }

}  // namespace

double ConvertTo(DType dtype, double value) {
  if (dtype == DType::kBool) return Truthy(value);
  if (IsIntegral(dtype)) return std::trunc(value);
  return RoundTo(dtype, value);
}

ElementFunction ElementwiseReference(const std::string& op) {
  using V = const std::vector<double>&;
  using A = const Attributes&;
  static const std::map<std::string, ElementFunction> table = {
      {"add",
       [](V x, A at, DType c, DType) { return x[0] + AttributeIn(c, at.at("alpha")) * x[1]; }},
      {"sub",
       [](V x, A at, DType c, DType) { return x[0] - AttributeIn(c, at.at("alpha")) * x[1]; }},
      {"mul", [](V x, A, DType, DType) { return x[0] * x[1]; }},
      {"div", [](V x, A, DType, DType) { return x[0] / x[1]; }},
      {"neg", [](V x, A, DType, DType) { return -x[0]; }},
      {"abs", [](V x, A, DType, DType) { return std::fabs(x[0]); }},
      {"relu", [](V x, A, DType, DType) { return x[0] < 0 ? 0.0 : x[0]; }},
      {"sigmoid", [](V x, A, DType, DType) { return 1 / (1 + std::exp(-x[0])); }},
      {"tanh", [](V x, A, DType, DType) { return std::tanh(x[0]); }},
      {"exp", [](V x, A, DType, DType) { return std::exp(x[0]); }},
      {"log", [](V x, A, DType, DType) { return std::log(x[0]); }},
      {"sqrt", [](V x, A, DType, DType) { return std::sqrt(x[0]); }},
      {"pow", [](V x, A, DType, DType) { return std::pow(x[0], x[1]); }},
      {"maximum", [](V x, A, DType, DType) { return std::max(x[0], x[1]); }},
      {"minimum", [](V x, A, DType, DType) { return std::min(x[0], x[1]); }},
      {"clamp",
       [](V x, A at, DType c, DType) {
         const double lo = AttributeIn(c, at.at("lo"));
         const double hi = AttributeIn(c, at.at("hi"));
         return x[0] < lo ? lo : (x[0] > hi ? hi : x[0]);
       }},
      {"where", [](V x, A, DType, DType) { return x[0] != 0 ? x[1] : x[2]; }},
      {"eq", [](V x, A, DType, DType) { return x[0] == x[1] ? 1.0 : 0.0; }},
      {"ne", [](V x, A, DType, DType) { return x[0] != x[1] ? 1.0 : 0.0; }},
      {"lt", [](V x, A, DType, DType) { return x[0] < x[1] ? 1.0 : 0.0; }},
      {"le", [](V x, A, DType, DType) { return x[0] <= x[1] ? 1.0 : 0.0; }},
      {"gt", [](V x, A, DType, DType) { return x[0] > x[1] ? 1.0 : 0.0; }},
      {"ge", [](V x, A, DType, DType) { return x[0] >= x[1] ? 1.0 : 0.0; }},
      {"logical_and", [](V x, A, DType, DType) { return Truthy(x[0]) * Truthy(x[1]); }},
      {"logical_or", [](V x, A, DType, DType) { return std::max(Truthy(x[0]), Truthy(x[1])); }},
      {"logical_xor",
       [](V x, A, DType, DType) { return Truthy(x[0]) != Truthy(x[1]) ? 1.0 : 0.0; }},
      {"logical_not", [](V x, A, DType, DType) { return 1 - Truthy(x[0]); }},
      {"gelu",
       [](V x, A, DType, DType) { return 0.5 * x[0] * (1 + std::erf(x[0] / std::sqrt(2.0))); }},
      {"gelu_tanh",
       [](V x, A, DType, DType) {
         const double inner = std::sqrt(2 / M_PI) * (x[0] + 0.044715 * x[0] * x[0] * x[0]);
         return 0.5 * x[0] * (1 + std::tanh(inner));
       }},
      {"silu", [](V x, A, DType, DType) { return x[0] / (1 + std::exp(-x[0])); }},
      {"erf", [](V x, A, DType, DType) { return std::erf(x[0]); }},
      {"rsqrt", [](V x, A, DType, DType) { return 1 / std::sqrt(x[0]); }},
      {"reciprocal", [](V x, A, DType, DType) { return 1 / x[0]; }},
      {"square", [](V x, A, DType, DType) { return x[0] * x[0]; }},
      {"sign", [](V x, A, DType, DType) { return x[0] > 0 ? 1.0 : (x[0] < 0 ? -1.0 : x[0]); }},
      {"floor", [](V x, A, DType, DType) { return std::floor(x[0]); }},
      {"ceil", [](V x, A, DType, DType) { return std::ceil(x[0]); }},
      {"round", [](V x, A, DType, DType) { return std::nearbyint(x[0]); }},
      {"copy", [](V x, A, DType, DType) { return x[0]; }},
      {"cast", [](V x, A, DType, DType out) { return ConvertTo(out, x[0]); }},
  };
  auto it = table.find(op);
  return it == table.end() ? ElementFunction() : it->second;
}

SliceFunction ReductionReference(const std::string& op) {
  using V = const std::vector<double>&;
  using A = const Attributes&;
  static const std::map<std::string, SliceFunction> table = {
      {"sum",
       [](V s, A) {
         double acc = 0;
         for (double v : s) acc += v;
         return acc;
       }},
      {"mean",
       [](V s, A) {
         double acc = 0;
         for (double v : s) acc += v;
         return acc / static_cast<double>(s.size());
       }},
      {"prod",
       [](V s, A) {
         double acc = 1;
         for (double v : s) acc *= v;
         return acc;
       }},
      {"amax", [](V s, A) { return *std::max_element(s.begin(), s.end()); }},
      {"amin", [](V s, A) { return *std::min_element(s.begin(), s.end()); }},
      {"argmax",
       [](V s, A) {
         return static_cast<double>(std::max_element(s.begin(), s.end()) - s.begin());
       }},
      {"var",
       [](V s, A at) {
         double mean = 0;
         for (double v : s) mean += v;
         mean /= static_cast<double>(s.size());
         double m2 = 0;
         for (double v : s) m2 += (v - mean) * (v - mean);
         return m2 / std::max(0.0, static_cast<double>(s.size()) - at.at("correction"));
       }},
  };
  auto it = table.find(op);
  return it == table.end() ? SliceFunction() : it->second;
}

std::vector<double> SoftmaxReference(const std::vector<double>& a, long long n) {
  std::vector<double> out(a.size());
  for (std::size_t row = 0; row < a.size() / n; ++row) {
    const double* x = a.data() + row * n;
    const double top = *std::max_element(x, x + n);
    double sum = 0;
    for (long long j = 0; j < n; ++j) sum += std::exp(x[j] - top);
    for (long long j = 0; j < n; ++j) out[row * n + j] = std::exp(x[j] - top) / sum;
  }
  return out;
}

std::vector<double> LogSoftmaxReference(const std::vector<double>& a, long long n) {
  std::vector<double> out(a.size());
  for (std::size_t row = 0; row < a.size() / n; ++row) {
    const double* x = a.data() + row * n;
    const double top = *std::max_element(x, x + n);
    double sum = 0;
    for (long long j = 0; j < n; ++j) sum += std::exp(x[j] - top);
    for (long long j = 0; j < n; ++j) out[row * n + j] = x[j] - top - std::log(sum);
  }
  return out;
}

std::vector<double> LayerNormReference(const std::vector<double>& a, long long n,
                                       const std::vector<double>& weight,
                                       const std::vector<double>& bias, double eps) {
  std::vector<double> out(a.size());
  for (std::size_t row = 0; row < a.size() / n; ++row) {
    const double* x = a.data() + row * n;
    double mean = 0;
    for (long long j = 0; j < n; ++j) mean += x[j];
    mean /= static_cast<double>(n);
    double var = 0;
    for (long long j = 0; j < n; ++j) var += (x[j] - mean) * (x[j] - mean);
    var /= static_cast<double>(n);
    for (long long j = 0; j < n; ++j) {
      out[row * n + j] = (x[j] - mean) / std::sqrt(var + eps) * weight[j] + bias[j];
    }
  }
  return out;
}

std::vector<double> RmsNormReference(const std::vector<double>& a, long long n,
                                     const std::vector<double>& weight, double eps) {
  std::vector<double> out(a.size());
  for (std::size_t row = 0; row < a.size() / n; ++row) {
    const double* x = a.data() + row * n;
    double square = 0;
    for (long long j = 0; j < n; ++j) square += x[j] * x[j];
    const double scale = 1 / std::sqrt(square / static_cast<double>(n) + eps);
    for (long long j = 0; j < n; ++j) out[row * n + j] = x[j] * scale * weight[j];
  }
  return out;
}

std::vector<double> MatmulReference(const std::vector<double>& a, const std::vector<double>& b,
                                    long long batch, long long m, long long k, long long n) {
  std::vector<double> out(batch * m * n, 0.0);
  for (long long p = 0; p < batch; ++p) {
    for (long long i = 0; i < m; ++i) {
      for (long long j = 0; j < n; ++j) {
        double acc = 0;
        for (long long q = 0; q < k; ++q) acc += a[(p * m + i) * k + q] * b[(p * k + q) * n + j];
        out[(p * m + i) * n + j] = acc;
      }
    }
  }
  return out;
}

std::vector<double> AddmmReference(const std::vector<double>& product,
                                   const std::vector<double>& bias, double alpha, double beta) {
  std::vector<double> out(product.size());
  for (std::size_t i = 0; i < product.size(); ++i) {
    out[i] = alpha * product[i] + (beta == 0 ? 0.0 : beta * bias[i]);
  }
  return out;
}

double NormActivationReference(int activation, double x) {
  // The numbering of layer_norm's `activation`; the formulas are the
  // elementwise operators' own references.
  static const char* const kNames[] = {"gelu", "gelu_tanh", "relu"};
  if (activation < 1 || activation > 3) return x;
  return ElementwiseReference(kNames[activation - 1])({x}, Attributes{}, DType::kF64, DType::kF64);
}

std::vector<double> NormRowsReference(DType dtype, const std::vector<double>& a, long long n,
                                      const std::vector<double>& weight,
                                      const std::vector<double>& bias, double eps, int activation) {
  std::vector<double> out = LayerNormReference(a, n, weight, bias, eps);
  for (double& v : out) v = RoundTo(dtype, NormActivationReference(activation, RoundTo(dtype, v)));
  return out;
}

std::vector<double> FusedEpilogueReference(DType dtype, const std::vector<double>& v,
                                           int activation, const std::vector<double>& residual) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out[i] = RoundTo(dtype, NormActivationReference(activation, RoundTo(dtype, v[i])));
    if (!residual.empty()) out[i] += residual[i];
  }
  return out;
}

std::vector<double> CatReference(const std::vector<double>& a, long long a_cols,
                                 const std::vector<double>& b, long long b_cols, long long rows) {
  std::vector<double> out;
  for (long long r = 0; r < rows; ++r) {
    out.insert(out.end(), a.begin() + r * a_cols, a.begin() + (r + 1) * a_cols);
    out.insert(out.end(), b.begin() + r * b_cols, b.begin() + (r + 1) * b_cols);
  }
  return out;
}

std::vector<double> IndexSelectReference(const std::vector<double>& a, long long cols,
                                         const std::vector<double>& index) {
  std::vector<double> out;
  for (double row : index) {
    const long long r = static_cast<long long>(row);
    out.insert(out.end(), a.begin() + r * cols, a.begin() + (r + 1) * cols);
  }
  return out;
}

std::vector<double> GatherReference(const std::vector<double>& a, long long a_cols,
                                    const std::vector<double>& index, long long cols) {
  std::vector<double> out(index.size());
  for (std::size_t i = 0; i < index.size(); ++i) {
    const long long row = static_cast<long long>(i) / cols;
    out[i] = a[row * a_cols + static_cast<long long>(index[i])];
  }
  return out;
}

}  // namespace gpuos::registry::testing
