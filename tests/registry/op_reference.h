// CPU references for the built-in operators, in float64: one function per
// operator name. Inputs are the element values as the device sees them
// (already rounded to their dtype); callers round results to the output's
// dtype. Used by registry_op_reference_test.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gpuos/dtype.h"

namespace gpuos::registry::testing {

using Attributes = std::map<std::string, double>;

// out = f(inputs at the same coordinates, broadcast applied), for the
// elementwise operators; `out_dtype` is the output's dtype (cast, copy and
// integer arithmetic truncate to it). Empty function: no reference.
using ElementFunction =
    std::function<double(const std::vector<double>& in, const Attributes& attributes,
                         DType compute_dtype, DType out_dtype)>;
ElementFunction ElementwiseReference(const std::string& op_name);

// out = fold of one reduced slice, for the reduction operators.
using SliceFunction =
    std::function<double(const std::vector<double>& slice, const Attributes& attributes)>;
SliceFunction ReductionReference(const std::string& op_name);

// Value conversion like the device's convert<To> from a compute value:
// truncation toward zero for integers, != 0 for bool, rounding for floats.
double ConvertTo(DType dtype, double value);

// Row-wise operators along the last dimension of a [rows, n] row-major
// array; `weight` / `bias` have n entries.
std::vector<double> SoftmaxReference(const std::vector<double>& a, long long n);
std::vector<double> LogSoftmaxReference(const std::vector<double>& a, long long n);
std::vector<double> LayerNormReference(const std::vector<double>& a, long long n,
                                       const std::vector<double>& weight,
                                       const std::vector<double>& bias, double eps);
std::vector<double> RmsNormReference(const std::vector<double>& a, long long n,
                                     const std::vector<double>& weight, double eps);

// out[b] = a[b] x b[b] for row-major [batch, m, k] and [batch, k, n].
std::vector<double> MatmulReference(const std::vector<double>& a, const std::vector<double>& b,
                                    long long batch, long long m, long long k, long long n);
// beta * bias + alpha * product, element by element (bias already at the
// product's shape, e.g. HostTensor::Values() of a broadcast view); beta == 0
// ignores bias (NaN included), as torch.addmm does.
std::vector<double> AddmmReference(const std::vector<double>& product,
                                   const std::vector<double>& bias, double alpha, double beta);

// layer_norm's / fused_addmm's activation number (0 none, 1 gelu, 2
// gelu_tanh, 3 relu) applied to x.
double NormActivationReference(int activation, double x);

// fused_addmm's prologue: each row of n values normalized as by
// LayerNormReference, rounded to `dtype`, then `activation` and rounded
// again, as the separate layer_norm task would have stored it.
std::vector<double> NormRowsReference(DType dtype, const std::vector<double>& a, long long n,
                                      const std::vector<double>& weight,
                                      const std::vector<double>& bias, double eps, int activation);

// fused_addmm's epilogue on addmm's result v: rounded to `dtype`, then
// `activation` and rounded again, plus the residual (empty: none).
std::vector<double> FusedEpilogueReference(DType dtype, const std::vector<double>& v,
                                           int activation, const std::vector<double>& residual);

// Row-major [rows, a_cols] and [rows, b_cols] joined along dim 1.
std::vector<double> CatReference(const std::vector<double>& a, long long a_cols,
                                 const std::vector<double>& b, long long b_cols, long long rows);
// Row-major [rows, cols]; rows picked by `index` (dim 0).
std::vector<double> IndexSelectReference(const std::vector<double>& a, long long cols,
                                         const std::vector<double>& index);
// Row-major a [rows, a_cols], index [rows, cols]; gather along dim 1.
std::vector<double> GatherReference(const std::vector<double>& a, long long a_cols,
                                    const std::vector<double>& index, long long cols);

}  // namespace gpuos::registry::testing
