#include "gpuos/shape.h"

#include <algorithm>
#include <cassert>

namespace gpuos {

Dims::Dims(std::initializer_list<int64_t> values) {
  assert(values.size() <= static_cast<size_t>(kMaxRank) && "Dims: more than kMaxRank values");
  for (int64_t v : values) {
    if (rank_ == kMaxRank) break;
    values_[rank_++] = v;
  }
}

Expected<Dims> Dims::FromSpan(std::span<const int64_t> values) {
  if (values.size() > static_cast<size_t>(kMaxRank)) {
    return InvalidArgument("a tensor has at most " + std::to_string(kMaxRank) +
                           " dimensions, got " + std::to_string(values.size()));
  }
  Dims dims;
  for (int64_t v : values) dims.values_[dims.rank_++] = v;
  return dims;
}

void Dims::push_back(int64_t value) {
  assert(rank_ < kMaxRank);
  values_[rank_++] = value;
}

void Dims::insert(int index, int64_t value) {
  assert(rank_ < kMaxRank && index >= 0 && index <= rank_);
  for (int i = rank_; i > index; --i) values_[i] = values_[i - 1];
  values_[index] = value;
  ++rank_;
}

void Dims::erase(int index) {
  assert(index >= 0 && index < rank_);
  for (int i = index; i + 1 < rank_; ++i) values_[i] = values_[i + 1];
  values_[--rank_] = 0;
}

std::string Dims::ToString() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values_[i]);
  }
  return out + "]";
}

bool operator==(const Dims& a, const Dims& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

Expected<int64_t> CheckedNumel(const Dims& sizes) {
  int64_t numel = 1;
  bool overflow = false;
  for (int d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) {
      return InvalidArgument("shape " + sizes.ToString() + " has a negative size " +
                             std::to_string(sizes[d]) + " in dimension " + std::to_string(d));
    }
    // Keep scanning after an overflow: a later 0 makes the product 0 and a
    // later negative size is the more useful error.
    if (!overflow && __builtin_mul_overflow(numel, sizes[d], &numel)) overflow = true;
  }
  if (overflow && std::find(sizes.begin(), sizes.end(), 0) == sizes.end()) {
    return InvalidArgument("shape " + sizes.ToString() +
                           " has more elements than fit in a 64-bit count");
  }
  return overflow ? 0 : numel;
}

Dims ContiguousStrides(const Dims& sizes) {
  Dims strides = sizes;
  int64_t stride = 1;
  for (int d = sizes.size() - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

Expected<Layout> Layout::Contiguous(const Dims& sizes) {
  GPUOS_RETURN_IF_ERROR(CheckedNumel(sizes).status());
  // Strides skip size-0 dimensions (as PyTorch does); their largest value is
  // bounded by the product of max(size, 1), which can overflow even when the
  // numel (0) does not.
  int64_t product = 1;
  for (int64_t size : sizes) {
    if (__builtin_mul_overflow(product, std::max<int64_t>(size, 1), &product)) {
      return InvalidArgument("shape " + sizes.ToString() +
                             " has strides that do not fit in 64 bits");
    }
  }
  return Layout{sizes, ContiguousStrides(sizes), 0};
}

Expected<Layout> Layout::Contiguous(std::span<const int64_t> sizes) {
  GPUOS_ASSIGN_OR_RETURN(Dims dims, Dims::FromSpan(sizes));
  return Contiguous(dims);
}

Expected<Layout> Layout::Strided(const Dims& sizes, const Dims& strides, int64_t offset) {
  if (sizes.size() != strides.size()) {
    return InvalidArgument("sizes " + sizes.ToString() + " and strides " + strides.ToString() +
                           " have different ranks");
  }
  GPUOS_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(sizes));
  if (offset < 0) {
    return InvalidArgument("negative storage offset " + std::to_string(offset));
  }
  int64_t last = offset;
  for (int d = 0; d < sizes.size(); ++d) {
    if (strides[d] < 0) {
      return InvalidArgument("strides " + strides.ToString() +
                             " have a negative stride in dimension " + std::to_string(d) +
                             " (gpuos, like PyTorch, has no negative strides)");
    }
    int64_t span = 0;
    if (numel > 0 && (__builtin_mul_overflow(sizes[d] - 1, strides[d], &span) ||
                      __builtin_add_overflow(last, span, &last))) {
      return InvalidArgument("sizes " + sizes.ToString() + " strides " + strides.ToString() +
                             " reach an element offset beyond 64 bits");
    }
  }
  if (numel > 0 && last == INT64_MAX) {
    return InvalidArgument("sizes " + sizes.ToString() + " strides " + strides.ToString() +
                           " reach an element offset beyond 64 bits");
  }
  return Layout{sizes, strides, offset};
}

int64_t Layout::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool Layout::IsContiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int d = rank() - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

int64_t Layout::StorageExtent() const {
  if (numel() == 0) return offset;
  int64_t last = offset;
  for (int d = 0; d < rank(); ++d) last += (sizes[d] - 1) * strides[d];
  return last + 1;
}

std::string Layout::ToString() const {
  return "sizes " + sizes.ToString() + " strides " + strides.ToString() + " offset " +
         std::to_string(offset);
}

}  // namespace gpuos
