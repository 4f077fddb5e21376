#include "gpuos/memory_overlap.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gpuos/type_promotion.h"

namespace gpuos {
namespace {

struct ByteRange {
  uint64_t begin;
  uint64_t end;  // one past the last byte
};

ByteRange BytesOf(const Tensor& t) {
  const uint64_t begin = t.data_address();
  const uint64_t elements = static_cast<uint64_t>(t.layout().StorageExtent() - t.storage_offset());
  return {begin, begin + elements * t.itemsize()};
}

}  // namespace

const char* MemoryOverlapName(MemoryOverlap overlap) {
  switch (overlap) {
    case MemoryOverlap::kNone:
      return "none";
    case MemoryOverlap::kFull:
      return "full";
    case MemoryOverlap::kPartial:
      return "partial";
  }
  return "unknown";
}

MemoryOverlap GetOverlap(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return MemoryOverlap::kNone;
  const ByteRange ra = BytesOf(a);
  const ByteRange rb = BytesOf(b);
  if (ra.end <= rb.begin || rb.end <= ra.begin) return MemoryOverlap::kNone;
  if (a.data_address() == b.data_address() && a.itemsize() == b.itemsize() &&
      a.sizes() == b.sizes() && a.strides() == b.strides()) {
    return MemoryOverlap::kFull;
  }
  return MemoryOverlap::kPartial;
}

bool MayHaveInternalOverlap(const Tensor& tensor) {
  if (tensor.numel() <= 1) return false;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size), size > 1
  for (int d = 0; d < tensor.rank(); ++d) {
    if (tensor.sizes()[d] == 1) continue;
    if (tensor.strides()[d] == 0) return true;
    dims.emplace_back(tensor.strides()[d], tensor.sizes()[d]);
  }
  std::sort(dims.begin(), dims.end());
  // Provably distinct when each stride exceeds the farthest offset the
  // smaller-strided dimensions reach (a mixed-radix numbering).
  int64_t reach = 0;
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += (size - 1) * stride;
  }
  return false;
}

Status CheckOutput(const Tensor& out, std::span<const Tensor> inputs, const OutputCheck& check) {
  const std::string op = check.operation;
  if (!out.defined()) return InvalidArgument(op + ": the output tensor is undefined");
  if (out.sizes() != check.expected_sizes) {
    return InvalidArgument(op + ": output with shape " + out.sizes().ToString() +
                           " does not match the result shape " + check.expected_sizes.ToString() +
                           " (gpuos does not resize outputs)");
  }
  if (!CanCast(check.computed_dtype, out.dtype())) {
    return InvalidArgument(op + ": result type " + DTypeName(check.computed_dtype) +
                           " cannot be cast to the output's type " + DTypeName(out.dtype()) +
                           " (no float into an integer output, only bool into bool)");
  }
  if (MayHaveInternalOverlap(out)) {
    return InvalidArgument(op + ": the output " + out.ToString() +
                           " may have several elements at one memory location (an expanded or "
                           "self-overlapping view); write into a contiguous tensor instead");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    const MemoryOverlap overlap = GetOverlap(out, inputs[i]);
    if (overlap == MemoryOverlap::kNone) continue;
    if (overlap == MemoryOverlap::kFull && check.allow_full_alias) continue;
    return InvalidArgument(op + ": the output " + out.ToString() + " overlaps input " +
                           std::to_string(i) + " " + inputs[i].ToString() + " (" +
                           MemoryOverlapName(overlap) +
                           " overlap); use a separate output or clone the input first");
  }
  return Status::Ok();
}

Status CheckInPlace(const Tensor& self, std::span<const Tensor> others, DType computed_dtype,
                    const char* operation) {
  const std::string op = operation;
  if (!self.defined()) return InvalidArgument(op + ": in-place on an undefined tensor");
  std::vector<Dims> shapes = {self.sizes()};
  for (const Tensor& other : others) shapes.push_back(other.sizes());
  Expected<Dims> broadcast = BroadcastShapes(shapes);
  if (!broadcast.ok()) return broadcast.status().WithContext(op);
  if (*broadcast != self.sizes()) {
    return InvalidArgument(op + ": in-place output with shape " + self.sizes().ToString() +
                           " does not match the broadcast shape " + broadcast->ToString());
  }
  OutputCheck check;
  check.operation = operation;
  check.expected_sizes = self.sizes();
  check.computed_dtype = computed_dtype;
  check.allow_full_alias = true;
  return CheckOutput(self, others, check);
}

}  // namespace gpuos
