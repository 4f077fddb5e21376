// Memory overlap between views, and the checks an operation makes on its
// output before writing in place or into an out= tensor.
//
// Overlap is decided from byte ranges, so the answer is conservative: kNone
// is exact (the views share no byte); kPartial means "may share bytes"
// (e.g. x[:, 0] and x[:, 1] interleave without sharing an element, and are
// still reported kPartial). Storage identity is not used: two storages that
// wrap the same external memory overlap like views of one storage.
//
// Thread safety: pure functions.
#pragma once

#include <span>

#include "gpuos/dtype.h"
#include "gpuos/shape.h"
#include "gpuos/status.h"
#include "gpuos/tensor.h"

namespace gpuos {

enum class MemoryOverlap {
  kNone,     // no byte in common (exact)
  kFull,     // the same elements in the same order: same address, itemsize, sizes, strides
  kPartial,  // may share bytes (conservative)
};

const char* MemoryOverlapName(MemoryOverlap overlap);

// REQUIRES: both tensors defined. Empty tensors overlap nothing.
MemoryOverlap GetOverlap(const Tensor& a, const Tensor& b);

// Whether writing through `tensor` could write one memory location twice: a
// stride of 0 on a dimension of size > 1 (an expanded view), or strides that
// are not provably non-overlapping. Conservative: true when unsure.
bool MayHaveInternalOverlap(const Tensor& tensor);

struct OutputCheck {
  const char* operation = "operation";  // named in errors ("add", "relu_")
  Dims expected_sizes;                  // usually the broadcast shape of the inputs
  DType computed_dtype = DType::kF32;   // the result type of the computation
  // Elementwise operations may write over an input they read element by
  // element (kFull overlap, e.g. x.add_(y) or add(x, y, out=x)); reductions,
  // matmul and the like may not.
  bool allow_full_alias = false;
};

// Checks `out` before an operation writes it: defined; sizes equal
// expected_sizes (gpuos never resizes an out= tensor); computed_dtype can be
// cast to out's dtype (CanCast: no float into an integer output, nothing
// but bool into bool); no internal overlap; and no overlap with any input
// except kFull where allowed. Errors name the operation and the tensors.
Status CheckOutput(const Tensor& out, std::span<const Tensor> inputs, const OutputCheck& check);

// In-place form (self.op_(others...)): the broadcast shape of self and
// `others` must be self's shape (an in-place operation cannot grow self),
// then CheckOutput with self as the output and elementwise aliasing allowed.
Status CheckInPlace(const Tensor& self, std::span<const Tensor> others, DType computed_dtype,
                    const char* operation);

}  // namespace gpuos
