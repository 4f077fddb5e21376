// Shapes and strided layouts of gpuos tensors, and NumPy broadcasting.
//
// A layout is what a tensor view adds to its storage: sizes and strides in
// elements (rank 0..kMaxRank, the limit of device::TensorDesc) and an element
// offset into the storage. Strides are >= 0: a stride of 0 repeats one
// element along a dimension (broadcasting); negative strides are not
// supported (PyTorch does not have them either).
//
// Thread safety: values; copy freely.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "gpuos/device/abi.h"
#include "gpuos/status.h"

namespace gpuos {

inline constexpr int kMaxRank = device::kMaxRank;

// Up to kMaxRank 64-bit integers stored inline (sizes, strides, dimension
// lists). No heap allocation, so building views costs no malloc.
class Dims {
 public:
  Dims() = default;
  // REQUIRES: values.size() <= kMaxRank (asserted). For input that may be
  // longer use FromSpan.
  Dims(std::initializer_list<int64_t> values);  // NOLINT: implicit, reads like a shape

  // Error (InvalidArgument) when `values` has more than kMaxRank entries.
  static Expected<Dims> FromSpan(std::span<const int64_t> values);

  int size() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  int64_t& operator[](int i) { return values_[i]; }
  int64_t operator[](int i) const { return values_[i]; }
  const int64_t* data() const { return values_; }
  const int64_t* begin() const { return values_; }
  const int64_t* end() const { return values_ + rank_; }
  std::span<const int64_t> span() const { return {values_, static_cast<size_t>(rank_)}; }
  std::vector<int64_t> ToVector() const { return {begin(), end()}; }

  // REQUIRES: size() < kMaxRank.
  void push_back(int64_t value);
  // Inserts before position `index`. REQUIRES: size() < kMaxRank, 0 <= index <= size().
  void insert(int index, int64_t value);
  // REQUIRES: 0 <= index < size().
  void erase(int index);

  // "[2, 3]"; "[]" for rank 0.
  std::string ToString() const;

  friend bool operator==(const Dims& a, const Dims& b);

 private:
  int rank_ = 0;
  int64_t values_[kMaxRank] = {};
};

// Product of `sizes`; 1 for rank 0. Error on a negative size or when the
// product does not fit in int64.
Expected<int64_t> CheckedNumel(const Dims& sizes);

// Row-major strides for `sizes` (the last dimension has stride 1).
// REQUIRES: sizes valid (CheckedNumel succeeds).
Dims ContiguousStrides(const Dims& sizes);

// Sizes, strides (elements) and element offset of one view.
struct Layout {
  Dims sizes;
  Dims strides;
  int64_t offset = 0;

  // A dense row-major layout at offset 0. Error on negative sizes, more than
  // kMaxRank dimensions or a numel that overflows int64.
  static Expected<Layout> Contiguous(const Dims& sizes);
  static Expected<Layout> Contiguous(std::span<const int64_t> sizes);

  // A validated strided layout: same rank for sizes and strides, sizes >= 0,
  // strides >= 0, offset >= 0, and the largest element offset fits in int64.
  static Expected<Layout> Strided(const Dims& sizes, const Dims& strides, int64_t offset = 0);

  int rank() const { return sizes.size(); }
  // REQUIRES: a validated layout (overflow was ruled out when it was built).
  int64_t numel() const;

  // True when the elements are dense in row-major order: dimensions of size 1
  // may carry any stride, and an empty layout (numel 0) is contiguous.
  // Matches device::IsContiguous.
  bool IsContiguous() const;

  // Largest element offset a view touches plus one (offset + sum of
  // (size - 1) * stride + 1); `offset` when numel() == 0. The storage must
  // hold at least this many elements.
  int64_t StorageExtent() const;

  // "sizes [2, 3] strides [3, 1] offset 0"
  std::string ToString() const;

  friend bool operator==(const Layout& a, const Layout& b) = default;
};

// The broadcast shape of `shapes` by NumPy rules: shapes are aligned at their
// last dimension; in each position the sizes must be equal or 1 (a missing
// dimension counts as 1), and the result takes the size that is not 1.
// Error: InvalidArgument naming both offending shapes and the dimension,
// e.g. "shapes [2, 3] and [4] cannot be broadcast: dimension -1 has sizes 3
// and 4 (sizes must be equal or one of them 1)".
Expected<Dims> BroadcastShapes(std::span<const Dims> shapes);
Expected<Dims> BroadcastShapes(const Dims& a, const Dims& b);
Expected<Dims> BroadcastShapes(const Dims& a, const Dims& b, const Dims& c);

// `layout` broadcast to `shape` without copying: missing leading dimensions
// and dimensions of size 1 that grow get stride 0. Error when `layout` does
// not broadcast to exactly `shape` (a size other than 1 would have to change,
// or `shape` has fewer dimensions).
Expected<Layout> ExpandLayoutTo(const Layout& layout, const Dims& shape);

}  // namespace gpuos
