#include "gpuos/content_hash.h"

#include <gtest/gtest.h>

namespace gpuos {
namespace {

TEST(ContentHashTest, IsStableHexAndSensitive) {
  std::string h = ContentHash("hello");
  EXPECT_EQ(h.size(), 32u);
  EXPECT_EQ(h, ContentHash("hello"));
  EXPECT_NE(h, ContentHash("hellp"));
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(ContentHashTest, HasherSeparatesParts) {
  ContentHasher a, b;
  a.Add("ab").Add("c");
  b.Add("a").Add("bc");
  EXPECT_NE(a.Finish(), b.Finish());
}

}  // namespace
}  // namespace gpuos
