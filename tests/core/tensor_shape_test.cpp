// Shapes, layouts, validation and NumPy broadcasting (gpuos/shape.h).
#include <gtest/gtest.h>

#include <vector>

#include "gpuos/shape.h"

namespace gpuos {
namespace {

TEST(DimsTest, InlineEditing) {
  Dims d = {2, 3};
  EXPECT_EQ(d.size(), 2);
  d.push_back(4);
  d.insert(0, 1);
  EXPECT_EQ(d, (Dims{1, 2, 3, 4}));
  d.erase(2);
  EXPECT_EQ(d, (Dims{1, 2, 4}));
  EXPECT_EQ(d.ToString(), "[1, 2, 4]");
  EXPECT_EQ(Dims().ToString(), "[]");
  EXPECT_NE((Dims{1, 2}), (Dims{1, 2, 1}));
}

TEST(DimsTest, FromSpanRejectsMoreThanMaxRank) {
  std::vector<int64_t> eight(8, 1);
  ASSERT_TRUE(Dims::FromSpan(eight).ok());
  std::vector<int64_t> nine(9, 1);
  auto too_many = Dims::FromSpan(nine);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("at most 8 dimensions, got 9"), std::string::npos)
      << too_many.status().message();
}

TEST(LayoutTest, ContiguousStridesAndNumel) {
  struct Case {
    Dims sizes;
    Dims strides;
    int64_t numel;
  };
  const std::vector<Case> cases = {
      {{}, {}, 1},
      {{5}, {1}, 5},
      {{2, 3, 4}, {12, 4, 1}, 24},
      {{2, 0, 4}, {4, 4, 1}, 0},  // size-0 dimensions count as 1 in strides (PyTorch)
      {{1, 1, 1, 1, 1, 1, 1, 7}, {7, 7, 7, 7, 7, 7, 7, 1}, 7},
  };
  for (const Case& c : cases) {
    auto layout = Layout::Contiguous(c.sizes);
    ASSERT_TRUE(layout.ok()) << c.sizes.ToString();
    EXPECT_EQ(layout->strides, c.strides) << c.sizes.ToString();
    EXPECT_EQ(layout->numel(), c.numel);
    EXPECT_TRUE(layout->IsContiguous());
    EXPECT_EQ(layout->offset, 0);
  }
}

TEST(LayoutTest, ValidationErrors) {
  auto negative = Layout::Contiguous(Dims{2, -1});
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("negative size -1 in dimension 1"), std::string::npos);

  const int64_t big = int64_t{1} << 32;
  auto overflow = Layout::Contiguous(Dims{big, big, 4});
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.status().message().find("64-bit"), std::string::npos);

  // numel 0, but the strides of the other dimensions would overflow.
  auto stride_overflow = Layout::Contiguous(Dims{0, big, big, 4});
  EXPECT_FALSE(stride_overflow.ok());
  // A zero anywhere makes the numel 0, even after an overflowing prefix... as
  // long as the strides fit.
  auto zero = Layout::Contiguous(Dims{big, 0, 4});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->numel(), 0);

  std::vector<int64_t> nine(9, 2);
  EXPECT_FALSE(Layout::Contiguous(std::span<const int64_t>(nine)).ok());

  EXPECT_FALSE(Layout::Strided(Dims{2, 3}, Dims{1}).ok());               // rank mismatch
  EXPECT_FALSE(Layout::Strided(Dims{2, 3}, Dims{3, -1}).ok());           // negative stride
  EXPECT_FALSE(Layout::Strided(Dims{2, 3}, Dims{3, 1}, -4).ok());        // negative offset
  EXPECT_FALSE(Layout::Strided(Dims{3}, Dims{INT64_MAX / 2 + 1}).ok());  // offset overflow
  EXPECT_TRUE(Layout::Strided(Dims{0}, Dims{INT64_MAX}).ok());           // empty: never addressed
}

TEST(LayoutTest, ContiguityAndExtent) {
  struct Case {
    Dims sizes, strides;
    int64_t offset;
    bool contiguous;
    int64_t extent;
  };
  const std::vector<Case> cases = {
      {{2, 3}, {3, 1}, 0, true, 6},   {{2, 3}, {1, 2}, 0, false, 6},  // transposed
      {{2, 3}, {6, 1}, 1, false, 10},                                 // row padding
      {{1, 3}, {100, 1}, 2, true, 5},  // size-1 dims may carry any stride
      {{3, 4}, {0, 1}, 0, false, 4},   // broadcast rows
      {{2, 0}, {5, 7}, 3, true, 3},    // empty
      {{}, {}, 9, true, 10},           // scalar
  };
  for (const Case& c : cases) {
    auto layout = Layout::Strided(c.sizes, c.strides, c.offset);
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    EXPECT_EQ(layout->IsContiguous(), c.contiguous) << layout->ToString();
    EXPECT_EQ(layout->StorageExtent(), c.extent) << layout->ToString();
  }
}

TEST(BroadcastTest, NumPyRules) {
  struct Case {
    Dims a, b, expected;
  };
  const std::vector<Case> cases = {
      {{}, {}, {}},
      {{}, {3}, {3}},
      {{1}, {3}, {3}},
      {{3}, {1}, {3}},
      {{2, 1}, {3}, {2, 3}},
      {{5, 1, 4}, {3, 1}, {5, 3, 4}},
      {{8, 1, 6, 1}, {7, 1, 5}, {8, 7, 6, 5}},  // the NumPy manual's example
      {{256, 256, 3}, {3}, {256, 256, 3}},
      {{15, 3, 5}, {15, 1, 5}, {15, 3, 5}},
      {{0}, {1}, {0}},
      {{0, 3}, {1, 3}, {0, 3}},
      {{2, 3}, {2, 3}, {2, 3}},
      {{1, 1, 1, 1, 1, 1, 1, 2}, {3, 1}, {1, 1, 1, 1, 1, 1, 3, 2}},
  };
  for (const Case& c : cases) {
    auto ab = BroadcastShapes(c.a, c.b);
    ASSERT_TRUE(ab.ok()) << c.a.ToString() << " " << c.b.ToString() << ": "
                         << ab.status().ToString();
    EXPECT_EQ(*ab, c.expected) << c.a.ToString() << " " << c.b.ToString();
    auto ba = BroadcastShapes(c.b, c.a);
    ASSERT_TRUE(ba.ok());
    EXPECT_EQ(*ba, c.expected) << "not symmetric";
  }
}

TEST(BroadcastTest, ErrorsNameBothShapes) {
  struct Case {
    Dims a, b;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{3}, {4}, "shapes [3] and [4] cannot be broadcast: dimension -1 has sizes 3 and 4"},
      {{2, 1},
       {8, 4, 3},
       "shapes [2, 1] and [8, 4, 3] cannot be broadcast: dimension -2 has sizes 2 and 4"},
      {{0}, {2}, "dimension -1 has sizes 0 and 2"},
  };
  for (const Case& c : cases) {
    auto result = BroadcastShapes(c.a, c.b);
    ASSERT_FALSE(result.ok()) << c.a.ToString() << " " << c.b.ToString();
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(result.status().message().find(c.message), std::string::npos)
        << result.status().message();
  }
  auto negative = BroadcastShapes(Dims{-2}, Dims{2});
  EXPECT_FALSE(negative.ok());
}

TEST(BroadcastTest, ManyShapes) {
  auto three = BroadcastShapes(Dims{1, 3}, Dims{2, 1}, Dims{5, 1, 1});
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(*three, (Dims{5, 2, 3}));

  // The error names the two shapes that disagree, not the first one.
  auto bad = BroadcastShapes(Dims{1, 3}, Dims{2, 1}, Dims{4, 1});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("shapes [2, 1] and [4, 1]"), std::string::npos)
      << bad.status().message();

  const std::vector<Dims> none;
  auto empty = BroadcastShapes(none);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, Dims());
}

TEST(ExpandLayoutTest, StrideZeroWhereSizesGrow) {
  auto base = Layout::Strided(Dims{3, 1}, Dims{2, 1}, 5);
  ASSERT_TRUE(base.ok());
  auto expanded = ExpandLayoutTo(*base, Dims{4, 3, 6});
  ASSERT_TRUE(expanded.ok()) << expanded.status().ToString();
  EXPECT_EQ(expanded->sizes, (Dims{4, 3, 6}));
  EXPECT_EQ(expanded->strides, (Dims{0, 2, 0}));
  EXPECT_EQ(expanded->offset, 5);

  auto to_zero = ExpandLayoutTo(*base, Dims{3, 0});
  ASSERT_TRUE(to_zero.ok());
  EXPECT_EQ(to_zero->numel(), 0);

  auto wrong = ExpandLayoutTo(*base, Dims{4, 6});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("dimension -2 has size 3, which is not 1 and not 4"),
            std::string::npos)
      << wrong.status().message();
  auto fewer = ExpandLayoutTo(*base, Dims{3});
  ASSERT_FALSE(fewer.ok());
  EXPECT_NE(fewer.status().message().find("fewer dimensions"), std::string::npos);
}

}  // namespace
}  // namespace gpuos
