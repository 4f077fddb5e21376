#include <algorithm>

#include "gpuos/shape.h"

namespace gpuos {

Expected<Dims> BroadcastShapes(std::span<const Dims> shapes) {
  int rank = 0;
  for (const Dims& shape : shapes) {
    GPUOS_RETURN_IF_ERROR(CheckedNumel(shape).status());
    rank = std::max(rank, shape.size());
  }
  Dims result;
  for (int i = 0; i < rank; ++i) result.push_back(1);
  // For each result dimension, the input that set a size other than 1 (so an
  // error can name both shapes that disagree).
  int setter[kMaxRank];
  std::fill(setter, setter + kMaxRank, -1);
  for (int s = 0; s < static_cast<int>(shapes.size()); ++s) {
    const Dims& shape = shapes[s];
    for (int d = 0; d < shape.size(); ++d) {
      const int out = rank - shape.size() + d;
      const int64_t size = shape[d];
      if (size == 1) continue;
      if (setter[out] < 0) {
        result[out] = size;
        setter[out] = s;
      } else if (result[out] != size) {
        return InvalidArgument("shapes " + shapes[setter[out]].ToString() + " and " +
                               shape.ToString() + " cannot be broadcast: dimension " +
                               std::to_string(out - rank) + " has sizes " +
                               std::to_string(result[out]) + " and " + std::to_string(size) +
                               " (sizes must be equal or one of them 1)");
      }
    }
  }
  return result;
}

Expected<Dims> BroadcastShapes(const Dims& a, const Dims& b) {
  const Dims shapes[] = {a, b};
  return BroadcastShapes(shapes);
}

Expected<Dims> BroadcastShapes(const Dims& a, const Dims& b, const Dims& c) {
  const Dims shapes[] = {a, b, c};
  return BroadcastShapes(shapes);
}

Expected<Layout> ExpandLayoutTo(const Layout& layout, const Dims& shape) {
  GPUOS_RETURN_IF_ERROR(CheckedNumel(shape).status());
  const int rank = shape.size();
  const int lead = rank - layout.rank();
  if (lead < 0) {
    return InvalidArgument("cannot expand shape " + layout.sizes.ToString() + " to " +
                           shape.ToString() + ": the target has fewer dimensions");
  }
  Layout out{shape, shape, layout.offset};
  for (int d = 0; d < rank; ++d) {
    if (d < lead) {
      out.strides[d] = 0;
      continue;
    }
    const int64_t size = layout.sizes[d - lead];
    if (size == shape[d]) {
      out.strides[d] = layout.strides[d - lead];
    } else if (size == 1) {
      out.strides[d] = 0;
    } else {
      return InvalidArgument("cannot expand shape " + layout.sizes.ToString() + " to " +
                             shape.ToString() + ": dimension " + std::to_string(d - rank) +
                             " has size " + std::to_string(size) + ", which is not 1 and not " +
                             std::to_string(shape[d]));
    }
  }
  return out;
}

}  // namespace gpuos
