// Overlap detection and the out= / in-place checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpuos/memory_overlap.h"

namespace gpuos {
namespace {

Tensor Wrap(uint64_t address, const Dims& sizes, DType dtype = DType::kF32) {
  auto t = Tensor::WrapExternal({address, size_t{1} << 20, 0, nullptr}, dtype, sizes);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

void ExpectErrorContaining(const Status& status, const std::string& fragment) {
  ASSERT_FALSE(status.ok()) << "expected an error containing: " << fragment;
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(OverlapTest, Table) {
  Tensor x = Wrap(0x10000, {4, 6});  // one storage
  Tensor other_storage_same_memory = Wrap(0x10000, {4, 6});
  Tensor elsewhere = Wrap(0x20000, {4, 6});
  struct Case {
    const char* name;
    Tensor a, b;
    MemoryOverlap expected;
  };
  const std::vector<Case> cases = {
      {"itself", x, x, MemoryOverlap::kFull},
      {"another storage wrapping the same memory", x, other_storage_same_memory,
       MemoryOverlap::kFull},
      {"separate memory", x, elsewhere, MemoryOverlap::kNone},
      {"row 0 vs row 1", *x.Select(0, 0), *x.Select(0, 1), MemoryOverlap::kNone},
      {"rows 0-1 vs rows 1-2", *x.Slice(0, 0, 2), *x.Slice(0, 1, 3), MemoryOverlap::kPartial},
      {"tensor vs its transpose", x, *x.Transpose(0, 1), MemoryOverlap::kPartial},
      {"tensor vs a row", x, *x.Select(0, 2), MemoryOverlap::kPartial},
      // Interleaved columns share no element but their byte ranges intersect:
      // the conservative answer.
      {"column 0 vs column 1", *x.Select(1, 0), *x.Select(1, 1), MemoryOverlap::kPartial},
      {"empty vs anything", *x.Slice(0, 2, 2), x, MemoryOverlap::kNone},
      {"same address, other dtype size", Wrap(0x10000, {4, 6}, DType::kF64),
       Wrap(0x10000, {4, 6}, DType::kI32), MemoryOverlap::kPartial},
      {"adjacent ranges", Wrap(0x10000, {4}), Wrap(0x10010, {4}), MemoryOverlap::kNone},
      {"last element shared", Wrap(0x10000, {4}), Wrap(0x1000c, {4}), MemoryOverlap::kPartial},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(GetOverlap(c.a, c.b), c.expected) << c.name;
    EXPECT_EQ(GetOverlap(c.b, c.a), c.expected) << c.name << " (swapped)";
  }
}

TEST(OverlapTest, InternalOverlap) {
  Tensor x = Wrap(0x10000, {4, 6});
  EXPECT_FALSE(MayHaveInternalOverlap(x));
  EXPECT_FALSE(MayHaveInternalOverlap(*x.Transpose(0, 1)));
  EXPECT_FALSE(MayHaveInternalOverlap(*x.Slice(1, 0, 6, 2)));
  EXPECT_TRUE(MayHaveInternalOverlap(*Wrap(0x10000, {4, 1}).Expand({4, 5})));
  EXPECT_FALSE(MayHaveInternalOverlap(*Wrap(0x10000, {1, 1}).Expand({1, 1})));
  auto storage = Storage::WrapExternal({0x10000, 4096, 0, nullptr});
  ASSERT_TRUE(storage.ok());
  // Sliding windows: rows of 4 elements starting 2 apart share elements.
  auto windows = Tensor::FromStorage(*storage, DType::kF32, *Layout::Strided({3, 4}, {2, 1}));
  ASSERT_TRUE(windows.ok());
  EXPECT_TRUE(MayHaveInternalOverlap(*windows));
}

TEST(OutputCheckTest, ShapeDtypeAndAliasing) {
  Tensor a = Wrap(0x10000, {2, 3});
  Tensor b = Wrap(0x20000, {3});
  Tensor out = Wrap(0x30000, {2, 3});
  const Tensor inputs[] = {a, b};

  OutputCheck check;
  check.operation = "add";
  check.expected_sizes = *BroadcastShapes(a.sizes(), b.sizes());
  check.computed_dtype = DType::kF32;
  EXPECT_TRUE(CheckOutput(out, inputs, check).ok());

  ExpectErrorContaining(CheckOutput(Wrap(0x30000, {3, 2}), inputs, check),
                        "add: output with shape [3, 2] does not match the result shape [2, 3]");
  ExpectErrorContaining(CheckOutput(Wrap(0x30000, {2, 3}, DType::kI32), inputs, check),
                        "result type f32 cannot be cast to the output's type i32");
  EXPECT_TRUE(CheckOutput(Wrap(0x30000, {2, 3}, DType::kF64), inputs, check).ok());
  ExpectErrorContaining(CheckOutput(*Wrap(0x30000, {1, 3}).Expand({2, 3}), inputs, check),
                        "several elements at one memory location");
  ExpectErrorContaining(CheckOutput(Tensor(), inputs, check), "undefined");

  // out= aliasing an input: allowed for elementwise operations only when it
  // is the same view.
  check.allow_full_alias = true;
  EXPECT_TRUE(CheckOutput(a, inputs, check).ok());
  ExpectErrorContaining(CheckOutput(*Wrap(0x10004, {4, 3}).Slice(0, 0, 2), inputs, check),
                        "overlaps input 0");
  check.allow_full_alias = false;
  ExpectErrorContaining(CheckOutput(a, inputs, check), "(full overlap)");
}

TEST(OutputCheckTest, InPlace) {
  Tensor x = Wrap(0x10000, {2, 3});
  const Tensor row[] = {Wrap(0x20000, {3})};
  EXPECT_TRUE(CheckInPlace(x, row, DType::kF32, "add_").ok());
  const Tensor self_alias[] = {x};
  EXPECT_TRUE(CheckInPlace(x, self_alias, DType::kF32, "mul_").ok());

  const Tensor bigger[] = {Wrap(0x20000, {4, 2, 3})};
  ExpectErrorContaining(CheckInPlace(x, bigger, DType::kF32, "add_"),
                        "add_: in-place output with shape [2, 3] does not match the broadcast "
                        "shape [4, 2, 3]");
  const Tensor mismatched[] = {Wrap(0x20000, {4})};
  ExpectErrorContaining(CheckInPlace(x, mismatched, DType::kF32, "add_"),
                        "add_: shapes [2, 3] and [4] cannot be broadcast");
  Tensor ints = Wrap(0x30000, {2, 3}, DType::kI32);
  ExpectErrorContaining(CheckInPlace(ints, row, DType::kF32, "add_"),
                        "result type f32 cannot be cast to the output's type i32");
  const Tensor transposed[] = {*Wrap(0x10000, {3, 2}).Transpose(0, 1)};
  ExpectErrorContaining(CheckInPlace(x, transposed, DType::kF32, "add_"), "partial overlap");
}

}  // namespace
}  // namespace gpuos
