// PyTorch's type promotion (torch.promote_types, torch.result_type,
// torch.can_cast) over gpuos's nine dtypes. docs/tensors.md has the tables.
//
// Categories order bool < integer < floating. Operands have three priorities,
// as in PyTorch: tensors with at least one dimension, zero-dimensional
// tensors, and Python scalars (bool/int/float, "wrapped numbers"). An operand
// of a lower priority changes the result only when its category is higher
// than the category of every operand of higher priority: `i32 tensor + 2.5`
// is f32 (the default float dtype), `i32 tensor + 2` stays i32, `f16 tensor +
// f64 zero-dim tensor` stays f16, `i32 tensor + f64 zero-dim tensor` is f64.
//
// One departure from PyTorch, because gpuos has no int16: u8 with i8 promotes
// to i32 (PyTorch gives int16). i32 holds every value either operand can hold,
// and arithmetic results agree with PyTorch wherever int16 would not overflow.
//
// Thread safety: pure functions.
#pragma once

#include <span>

#include "gpuos/dtype.h"
#include "gpuos/status.h"

namespace gpuos {

enum class DTypeCategory { kBool = 0, kInteger = 1, kFloating = 2 };

DTypeCategory CategoryOf(DType dtype);

// torch.promote_types: the smallest dtype both convert to without losing the
// category; symmetric. f16 with bf16 is f32; an integer with a float is the
// float; bool with anything is the other; u8 with i8 is i32 (see above).
DType PromoteTypes(DType a, DType b);

// The kind of a Python scalar taking part in an operation.
enum class ScalarKind { kBool, kInt, kFloat };

// One operand of an operation, as far as type promotion cares.
struct PromotionOperand {
  enum class Priority { kDimensioned = 0, kZeroDim = 1, kScalar = 2 };

  DType dtype = DType::kF32;  // for scalars: bool, i64 or f64 (see Scalar)
  Priority priority = Priority::kDimensioned;

  // A tensor of `rank` dimensions (rank 0 is a zero-dim tensor).
  static PromotionOperand Tensor(DType dtype, int rank);
  // A Python scalar: dtype bool, i64 or f64. ResultType counts a float
  // scalar as its `default_float` (PyTorch's default dtype), not as f64.
  static PromotionOperand Scalar(ScalarKind kind);
};

// torch.result_type generalised to any number of operands. `default_float`
// is the dtype a Python float scalar stands for (torch.get_default_dtype(),
// f32 unless changed). Errors: no operands; `default_float` not floating.
Expected<DType> ResultType(std::span<const PromotionOperand> operands,
                           DType default_float = DType::kF32);

// Convenience forms for two operands.
DType ResultType(DType tensor_a, int rank_a, DType tensor_b, int rank_b);
DType ResultType(DType tensor, int rank, ScalarKind scalar);

// torch.can_cast(from, to): whether an operation computing `from` may write
// into an output (out= or in-place) of dtype `to`. Casting to a lower
// category is refused (float -> integer, non-bool -> bool); within and
// up categories anything goes.
bool CanCast(DType from, DType to);

// For operations that always compute in floating point (true division,
// sqrt, exp, mean, ...): `dtype` if floating, else `default_float`
// (PyTorch's "int to float" promotion).
DType PromoteIntegralToFloat(DType dtype, DType default_float = DType::kF32);

}  // namespace gpuos
