// View operations: each checked element by element against the coordinates
// it should map to, and every error path.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gpuos/tensor.h"

namespace gpuos {
namespace {

constexpr uint64_t kFakeAddress = 0x100000;  // never dereferenced

Tensor MakeTensor(const Dims& sizes, DType dtype = DType::kF32) {
  auto t = Tensor::WrapExternal({kFakeAddress, size_t{1} << 20, 0, nullptr}, dtype, sizes);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

// Storage offset (elements) of the element at `coords`.
int64_t OffsetOf(const Tensor& t, const std::vector<int64_t>& coords) {
  int64_t offset = t.storage_offset();
  for (int d = 0; d < t.rank(); ++d) offset += coords[d] * t.strides()[d];
  return offset;
}

// Calls `fn` with every coordinate vector of `sizes`, in row-major order.
void ForEachIndex(const Dims& sizes, const std::function<void(const std::vector<int64_t>&)>& fn) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  std::vector<int64_t> coords(sizes.size(), 0);
  for (int64_t i = 0; i < numel; ++i) {
    int64_t rest = i;
    for (int d = sizes.size() - 1; d >= 0; --d) {
      coords[d] = rest % sizes[d];
      rest /= sizes[d];
    }
    fn(coords);
  }
}

template <typename T>
void ExpectError(const Expected<T>& result, const std::string& fragment) {
  ASSERT_FALSE(result.ok()) << "expected an error containing: " << fragment;
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find(fragment), std::string::npos)
      << result.status().message();
}

TEST(TensorViewsTest, ViewsShareStorage) {
  Tensor t = MakeTensor({2, 3});
  auto v = t.Transpose(0, 1);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->storage().get(), t.storage().get());
  EXPECT_EQ(t.storage().use_count(), 2);
}

TEST(TensorViewsTest, Permute) {
  Tensor t = MakeTensor({2, 3, 4});
  auto p = t.Permute({2, 0, -2});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->sizes(), (Dims{4, 2, 3}));
  EXPECT_FALSE(p->IsContiguous());
  ForEachIndex(p->sizes(), [&](const std::vector<int64_t>& c) {
    EXPECT_EQ(OffsetOf(*p, c), OffsetOf(t, {c[1], c[2], c[0]}));
  });
  ExpectError(t.Permute({0, 1}), "has 2 entries but shape [2, 3, 4] has 3 dimensions");
  ExpectError(t.Permute({0, 1, 1}), "names dimension 1 twice");
  ExpectError(t.Permute({0, 1, 3}),
              "dimension 3 is out of range for shape [2, 3, 4] (expected -3..2)");
}

TEST(TensorViewsTest, Transpose) {
  Tensor t = MakeTensor({2, 3});
  auto tt = t.Transpose(-1, 0);
  ASSERT_TRUE(tt.ok());
  EXPECT_EQ(tt->sizes(), (Dims{3, 2}));
  EXPECT_EQ(tt->strides(), (Dims{1, 3}));
  auto back = tt->Transpose(0, 1);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->layout(), t.layout());
  ExpectError(t.Transpose(0, 2), "dimension 2 is out of range");
  ExpectError(MakeTensor({}).Transpose(0, 0), "the tensor has no dimensions");
}

TEST(TensorViewsTest, SliceFollowsPythonRules) {
  struct Case {
    int64_t start, stop, step;
    std::vector<int64_t> indices;  // of the sliced dimension (size 10)
  };
  const std::vector<Case> cases = {
      {0, kSliceEnd, 1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
      {2, 8, 3, {2, 5}},
      {-3, kSliceEnd, 1, {7, 8, 9}},
      {1, -1, 4, {1, 5}},
      {-100, 2, 1, {0, 1}},
      {8, 100, 1, {8, 9}},
      {5, 3, 1, {}},
      {10, 20, 1, {}},
      {0, 10, 20, {0}},
      // Review finding: (end - begin + step - 1) overflowed for a huge step.
      {3, 10, std::numeric_limits<int64_t>::max(), {3}},
  };
  Tensor t = MakeTensor({4, 10});
  for (const Case& c : cases) {
    auto s = t.Slice(1, c.start, c.stop, c.step);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_EQ(s->sizes(), (Dims{4, static_cast<int64_t>(c.indices.size())}))
        << c.start << ":" << c.stop << ":" << c.step;
    ForEachIndex(s->sizes(), [&](const std::vector<int64_t>& i) {
      EXPECT_EQ(OffsetOf(*s, i), OffsetOf(t, {i[0], c.indices[i[1]]}));
    });
  }
  auto rows = t.Slice(0, 1, 3);
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->IsContiguous());
  EXPECT_EQ(rows->storage_offset(), 10);
  ExpectError(t.Slice(1, 0, 5, 0), "step 0 must be positive");
  ExpectError(t.Slice(1, 0, 5, -1), "step -1 must be positive");
  ExpectError(t.Slice(2, 0, 1), "dimension 2 is out of range");
}

TEST(TensorViewsTest, Select) {
  Tensor t = MakeTensor({3, 4, 5});
  auto s = t.Select(1, -1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->sizes(), (Dims{3, 5}));
  ForEachIndex(s->sizes(), [&](const std::vector<int64_t>& c) {
    EXPECT_EQ(OffsetOf(*s, c), OffsetOf(t, {c[0], 3, c[1]}));
  });
  auto scalar = MakeTensor({7}).Select(0, 4);
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->rank(), 0);
  EXPECT_EQ(scalar->numel(), 1);
  EXPECT_EQ(scalar->storage_offset(), 4);
  ExpectError(t.Select(1, 4), "index 4 is out of range for dimension 1 of size 4");
  ExpectError(t.Select(1, -5), "index -5 is out of range");
  ExpectError(MakeTensor({}).Select(0, 0), "no dimensions");
}

TEST(TensorViewsTest, UnsqueezeAndSqueeze) {
  Tensor t = MakeTensor({2, 3});
  struct Case {
    int64_t dim;
    Dims sizes, strides;
  };
  const std::vector<Case> cases = {
      {0, {1, 2, 3}, {6, 3, 1}},  {1, {2, 1, 3}, {3, 3, 1}},  {2, {2, 3, 1}, {3, 1, 1}},
      {-1, {2, 3, 1}, {3, 1, 1}}, {-3, {1, 2, 3}, {6, 3, 1}},
  };
  for (const Case& c : cases) {
    auto u = t.Unsqueeze(c.dim);
    ASSERT_TRUE(u.ok()) << c.dim;
    EXPECT_EQ(u->sizes(), c.sizes) << c.dim;
    EXPECT_EQ(u->strides(), c.strides) << c.dim;
    EXPECT_TRUE(u->IsContiguous());
    auto s = u->Squeeze(c.dim);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->layout(), t.layout()) << c.dim;
  }
  ExpectError(t.Unsqueeze(3), "dimension 3 is out of range");
  ExpectError(MakeTensor({1, 1, 1, 1, 1, 1, 1, 1}).Unsqueeze(0), "already has 8 dimensions");

  auto not_one = t.Squeeze(0);  // size 2: unchanged, as in PyTorch
  ASSERT_TRUE(not_one.ok());
  EXPECT_EQ(not_one->sizes(), t.sizes());
  Tensor ones = MakeTensor({1, 3, 1, 2, 1});
  EXPECT_EQ(ones.Squeeze().sizes(), (Dims{3, 2}));
  EXPECT_EQ(ones.Squeeze().strides(), (Dims{2, 1}));
  EXPECT_EQ(MakeTensor({1, 1}).Squeeze().rank(), 0);
  EXPECT_TRUE(MakeTensor({}).Squeeze(0).ok());
  ExpectError(t.Squeeze(2), "dimension 2 is out of range");
}

TEST(TensorViewsTest, ExpandAndExpandTo) {
  Tensor column = MakeTensor({3, 1});
  auto e = column.Expand({2, -1, 4});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->sizes(), (Dims{2, 3, 4}));
  EXPECT_EQ(e->strides(), (Dims{0, 1, 0}));
  ForEachIndex(e->sizes(), [&](const std::vector<int64_t>& c) {
    EXPECT_EQ(OffsetOf(*e, c), OffsetOf(column, {c[1], 0}));
  });
  ExpectError(column.Expand({-1, 3, 4}), "-1 in new leading dimension 0");
  ExpectError(column.Expand({4}), "fewer dimensions");
  ExpectError(column.Expand({4, 4}), "dimension -2 has size 3, which is not 1 and not 4");

  auto b = column.ExpandTo({5, 3, 7});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->strides(), (Dims{0, 1, 0}));
  ExpectError(column.ExpandTo({2, 7}), "cannot expand shape [3, 1] to [2, 7]");
}

// Every successful View must list the same elements in the same row-major
// order as the tensor it views.
void ExpectSameElementOrder(const Tensor& base, const Tensor& view) {
  std::vector<int64_t> base_offsets, view_offsets;
  ForEachIndex(base.sizes(), [&](const auto& c) { base_offsets.push_back(OffsetOf(base, c)); });
  ForEachIndex(view.sizes(), [&](const auto& c) { view_offsets.push_back(OffsetOf(view, c)); });
  EXPECT_EQ(base_offsets, view_offsets) << base.ToString() << " as " << view.ToString();
}

TEST(TensorViewsTest, ViewWhenStridesAllow) {
  Tensor t = MakeTensor({2, 3, 4});
  Tensor transposed = *t.Transpose(0, 1);                // [3, 2, 4] strides [4, 12, 1]
  Tensor expanded = *MakeTensor({3, 1}).Expand({3, 4});  // strides [1, 0]
  Tensor sliced = *t.Slice(2, 0, 3);                     // [2, 3, 3] strides [12, 4, 1]
  Tensor strided = *t.Slice(2, 0, 4, 2);                 // [2, 3, 2] strides [12, 4, 2]: uniform
  struct Case {
    Tensor base;
    Dims sizes;
    Dims expected_sizes;
    bool ok;
  };
  const std::vector<Case> cases = {
      {t, {6, 4}, {6, 4}, true},
      {t, {24}, {24}, true},
      {t, {-1}, {24}, true},
      {t, {4, -1, 2}, {4, 3, 2}, true},
      {t, {1, 2, 1, 12, 1}, {1, 2, 1, 12, 1}, true},
      {transposed, {3, 2, 2, 2}, {3, 2, 2, 2}, true},  // splits the contiguous last dim
      {transposed, {6, 4}, {}, false},                 // merges dims 0 and 1: not contiguous
      {transposed, {3, 8}, {}, false},
      {expanded, {3, 2, 2}, {3, 2, 2}, true},
      {expanded, {12}, {}, false},
      {sliced, {6, 3}, {6, 3}, true},
      {sliced, {2, 9}, {}, false},
      {sliced, {18}, {}, false},
      {strided, {2, 6}, {2, 6}, true},  // every element 2 apart: one chunk
      {strided, {12}, {12}, true},
      {MakeTensor({}), {1, 1}, {1, 1}, true},
      {MakeTensor({1, 1}), {}, {}, true},
      {MakeTensor({0, 3}), {3, 0}, {3, 0}, true},
  };
  for (const Case& c : cases) {
    auto v = c.base.View(c.sizes);
    if (!c.ok) {
      ExpectError(v, "make a contiguous copy first");
      continue;
    }
    ASSERT_TRUE(v.ok()) << c.base.ToString() << " as " << c.sizes.ToString() << ": "
                        << v.status().ToString();
    EXPECT_EQ(v->sizes(), c.expected_sizes);
    ExpectSameElementOrder(c.base, *v);
  }
}

TEST(TensorViewsTest, ViewErrors) {
  Tensor t = MakeTensor({2, 3});
  ExpectError(t.View({4, 2}), "6 elements cannot take shape [4, 2]");
  ExpectError(t.View({-1, -1}), "only one size may be -1");
  ExpectError(t.View({4, -1}), "do not divide");
  ExpectError(t.View({-2, 3}), "negative size -2");
  ExpectError(MakeTensor({0, 3}).View({0, -1}), "ambiguous");
}

TEST(TensorViewsTest, UndefinedTensor) {
  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  ExpectError(undefined.Transpose(0, 1), "Transpose of an undefined tensor");
  ExpectError(undefined.View({1}), "undefined");
  ExpectError(undefined.ToDesc(), "undefined");
}

}  // namespace
}  // namespace gpuos
