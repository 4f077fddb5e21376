// View operations: each computes a new Layout over the same storage.
#include <algorithm>
#include <optional>
#include <string>

#include "gpuos/tensor.h"

namespace gpuos {
namespace {

// `dim` in [-rank, rank) mapped to [0, rank).
Expected<int> WrapDim(const char* operation, const Dims& sizes, int64_t dim, int rank) {
  if (dim < -rank || dim >= rank) {
    return InvalidArgument(std::string(operation) + ": dimension " + std::to_string(dim) +
                           " is out of range for shape " + sizes.ToString() + " (expected " +
                           (rank == 0 ? std::string("none: the tensor has no dimensions")
                                      : std::to_string(-rank) + ".." + std::to_string(rank - 1)) +
                           ")");
  }
  return static_cast<int>(dim < 0 ? dim + rank : dim);
}

// torch.view's stride computation: splits the old dimensions into chunks
// that are contiguous with one another and maps the new sizes onto them.
// nullopt when a new dimension would span two chunks.
std::optional<Dims> ViewStrides(const Layout& old, const Dims& new_sizes, int64_t numel) {
  Dims new_strides = new_sizes;
  if (old.rank() == 0) {
    for (int d = 0; d < new_sizes.size(); ++d) new_strides[d] = 1;
    return new_strides;
  }
  if (numel == 0) return ContiguousStrides(new_sizes);
  int view_d = new_sizes.size() - 1;
  int64_t chunk_base_stride = old.strides[old.rank() - 1];
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int tensor_d = old.rank() - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old.sizes[tensor_d];
    const bool chunk_ends =
        tensor_d == 0 || (old.sizes[tensor_d - 1] != 1 &&
                          old.strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_sizes[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = old.strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace

Expected<Tensor> Tensor::Permute(const Dims& order) const {
  GPUOS_RETURN_IF_ERROR(CheckDefined("Permute"));
  if (order.size() != rank()) {
    return InvalidArgument("Permute: order " + order.ToString() + " has " +
                           std::to_string(order.size()) + " entries but shape " +
                           sizes().ToString() + " has " + std::to_string(rank()) + " dimensions");
  }
  Layout out = layout_;
  bool seen[kMaxRank] = {};
  for (int i = 0; i < rank(); ++i) {
    GPUOS_ASSIGN_OR_RETURN(int d, WrapDim("Permute", sizes(), order[i], rank()));
    if (seen[d]) {
      return InvalidArgument("Permute: order " + order.ToString() + " names dimension " +
                             std::to_string(d) + " twice");
    }
    seen[d] = true;
    out.sizes[i] = layout_.sizes[d];
    out.strides[i] = layout_.strides[d];
  }
  return WithLayout(out);
}

Expected<Tensor> Tensor::Transpose(int64_t dim0, int64_t dim1) const {
  GPUOS_RETURN_IF_ERROR(CheckDefined("Transpose"));
  GPUOS_ASSIGN_OR_RETURN(int a, WrapDim("Transpose", sizes(), dim0, rank()));
  GPUOS_ASSIGN_OR_RETURN(int b, WrapDim("Transpose", sizes(), dim1, rank()));
  Layout out = layout_;
  std::swap(out.sizes[a], out.sizes[b]);
  std::swap(out.strides[a], out.strides[b]);
  return WithLayout(out);
}

Expected<Tensor> Tensor::Slice(int64_t dim, int64_t start, int64_t stop, int64_t step) const {
  GPUOS_RETURN_IF_ERROR(CheckDefined("Slice"));
  GPUOS_ASSIGN_OR_RETURN(int d, WrapDim("Slice", sizes(), dim, rank()));
  if (step <= 0) {
    return InvalidArgument("Slice: step " + std::to_string(step) +
                           " must be positive (gpuos, like PyTorch, has no negative strides)");
  }
  const int64_t size = layout_.sizes[d];
  auto clamp = [size](int64_t index) {
    if (index < 0) index = index < -size ? 0 : index + size;
    return std::min(index, size);
  };
  const int64_t begin = clamp(start);
  const int64_t end = std::max(begin, clamp(stop));
  Layout out = layout_;
  // Written so that a huge step cannot overflow (end - begin + step).
  out.sizes[d] = end > begin ? 1 + (end - begin - 1) / step : 0;
  if (out.numel() > 0) out.offset += begin * layout_.strides[d];
  // Step multiplies the stride; it stays within the old extent, so no overflow.
  out.strides[d] = out.sizes[d] > 1 ? layout_.strides[d] * step : layout_.strides[d];
  return WithLayout(out);
}

Expected<Tensor> Tensor::Select(int64_t dim, int64_t index) const {
  GPUOS_RETURN_IF_ERROR(CheckDefined("Select"));
  GPUOS_ASSIGN_OR_RETURN(int d, WrapDim("Select", sizes(), dim, rank()));
  const int64_t size = layout_.sizes[d];
  if (index < -size || index >= size) {
    return InvalidArgument("Select: index " + std::to_string(index) +
                           " is out of range for dimension " + std::to_string(d) + " of size " +
                           std::to_string(size) + " (shape " + sizes().ToString() + ")");
  }
  if (index < 0) index += size;
  Layout out = layout_;
  out.offset += index * layout_.strides[d];
  out.sizes.erase(d);
  out.strides.erase(d);
  return WithLayout(out);
}

Expected<Tensor> Tensor::Unsqueeze(int64_t dim) const {
  GPUOS_RETURN_IF_ERROR(CheckDefined("Unsqueeze"));
  if (rank() == kMaxRank) {
    return InvalidArgument("Unsqueeze: shape " + sizes().ToString() + " already has " +
                           std::to_string(kMaxRank) + " dimensions, the most a tensor can have");
  }
  GPUOS_ASSIGN_OR_RETURN(int d, WrapDim("Unsqueeze", sizes(), dim, rank() + 1));
  // The stride of a size-1 dimension is never used to address memory; this
  // choice (PyTorch's) keeps a contiguous tensor's strides row-major.
  const int64_t stride = d >= rank() ? 1 : layout_.sizes[d] * layout_.strides[d];
  Layout out = layout_;
  out.sizes.insert(d, 1);
  out.strides.insert(d, stride);
  return WithLayout(out);
}

Expected<Tensor> Tensor::Squeeze(int64_t dim) const {
  GPUOS_RETURN_IF_ERROR(CheckDefined("Squeeze"));
  if (rank() == 0 && (dim == 0 || dim == -1)) return *this;
  GPUOS_ASSIGN_OR_RETURN(int d, WrapDim("Squeeze", sizes(), dim, rank()));
  if (layout_.sizes[d] != 1) return *this;
  Layout out = layout_;
  out.sizes.erase(d);
  out.strides.erase(d);
  return WithLayout(out);
}

Tensor Tensor::Squeeze() const {
  Layout out;
  out.offset = layout_.offset;
  for (int d = 0; d < rank(); ++d) {
    if (layout_.sizes[d] == 1) continue;
    out.sizes.push_back(layout_.sizes[d]);
    out.strides.push_back(layout_.strides[d]);
  }
  return WithLayout(out);
}

Expected<Tensor> Tensor::Expand(const Dims& new_sizes) const {
  GPUOS_RETURN_IF_ERROR(CheckDefined("Expand"));
  if (new_sizes.size() < rank()) {
    return InvalidArgument("Expand: sizes " + new_sizes.ToString() +
                           " have fewer dimensions than shape " + sizes().ToString());
  }
  Dims target = new_sizes;
  const int lead = new_sizes.size() - rank();
  for (int d = 0; d < target.size(); ++d) {
    if (target[d] != -1) continue;
    if (d < lead) {
      return InvalidArgument("Expand: sizes " + new_sizes.ToString() +
                             " use -1 in new leading dimension " + std::to_string(d) +
                             ", which has no size to keep");
    }
    target[d] = layout_.sizes[d - lead];
  }
  GPUOS_ASSIGN_OR_RETURN(Layout out, ExpandLayoutTo(layout_, target));
  return WithLayout(out);
}

Expected<Tensor> Tensor::ExpandTo(const Dims& shape) const {
  GPUOS_RETURN_IF_ERROR(CheckDefined("ExpandTo"));
  GPUOS_ASSIGN_OR_RETURN(Layout out, ExpandLayoutTo(layout_, shape));
  return WithLayout(out);
}

Expected<Tensor> Tensor::View(const Dims& new_sizes) const {
  GPUOS_RETURN_IF_ERROR(CheckDefined("View"));
  const std::string what =
      "View: cannot view shape " + sizes().ToString() + " as " + new_sizes.ToString();
  Dims target = new_sizes;
  int inferred = -1;
  int64_t known = 1;
  for (int d = 0; d < target.size(); ++d) {
    if (target[d] == -1) {
      if (inferred >= 0) return InvalidArgument(what + ": only one size may be -1");
      inferred = d;
    } else if (target[d] < 0) {
      return InvalidArgument(what + ": negative size " + std::to_string(target[d]));
    } else if (__builtin_mul_overflow(known, target[d], &known)) {
      return InvalidArgument(what + ": too many elements");
    }
  }
  const int64_t count = numel();
  if (inferred >= 0) {
    if (known == 0) {
      return InvalidArgument(what +
                             ": the size -1 is ambiguous when the other sizes multiply to 0");
    }
    if (count % known != 0)
      return InvalidArgument(what + ": " + std::to_string(count) + " elements do not divide");
    target[inferred] = count / known;
    known = count;
  }
  if (known != count) {
    return InvalidArgument(what + ": " + std::to_string(count) + " elements cannot take shape " +
                           target.ToString() + " (" + std::to_string(known) + " elements)");
  }
  std::optional<Dims> view_strides = ViewStrides(layout_, target, count);
  if (!view_strides) {
    return InvalidArgument(what + " with strides " + strides().ToString() +
                           ": the new shape spans dimensions that are not contiguous with each "
                           "other; make a contiguous copy first");
  }
  return WithLayout(Layout{target, *view_strides, layout_.offset});
}

}  // namespace gpuos
