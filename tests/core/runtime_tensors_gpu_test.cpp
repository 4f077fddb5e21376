// Tensors through the runtime (docs/runtime.md, "Tensors"): allocation from
// the runtime's arena, views and broadcasting in tasks, wrapping external
// memory, and the keep-alive contract: a tensor dropped right after Submit
// stays allocated (and is not reused) until its submission is done. Graphs
// are held back at a stream gate so that "not run yet" is certain. Skips
// with the reason where there is no GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "runtime_gpu_fixture.h"
#include "runtime_stream_util.h"
#include "runtime_test_util.h"

namespace gpuos::runtime {
namespace {

using testing::HostLatch;
using testing::UserStream;

class RuntimeTensorsGpuTest : public testing::GpuRuntimeTest {};

std::vector<float> Ramp(std::size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>(i % 101);
  return v;
}

Expected<Tensor> Filled(Runtime& runtime, const Dims& sizes, const std::vector<float>& values) {
  GPUOS_ASSIGN_OR_RETURN(Tensor t, runtime.Empty(sizes, DType::kF32));
  GPUOS_RETURN_IF_ERROR(runtime.CopyToDevice(t, values.data(), values.size() * sizeof(float)));
  return t;
}

Expected<std::vector<float>> Read(Runtime& runtime, const Tensor& t) {
  std::vector<float> values(static_cast<std::size_t>(t.numel()));
  GPUOS_RETURN_IF_ERROR(runtime.CopyToHost(values.data(), t, values.size() * sizeof(float)));
  return values;
}

// allocate -> fill -> add -> drop the inputs (and the graph) right after
// Submit -> allocate and overwrite new tensors -> result still right.
TEST_F(RuntimeTensorsGpuTest, TensorsDroppedAfterSubmitStayAliveUntilDone) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  constexpr std::size_t kN = 256 * 64;
  const std::vector<float> a_values = Ramp(kN, 0.5f, 1.0f);
  const std::vector<float> b_values = Ramp(kN, -0.25f, 3.0f);
  auto a = Filled(*runtime, {256, 64}, a_values);
  auto b = Filled(*runtime, {256, 64}, b_values);
  auto out = Filled(*runtime, {256, 64}, std::vector<float>(kN, NAN));
  ASSERT_TRUE(a.ok() && b.ok() && out.ok()) << a.status().ToString();
  const std::uint64_t a_address = a->data_address();
  const std::uint64_t b_address = b->data_address();

  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok());
  auto latch = HostLatch::Create();
  ASSERT_TRUE(latch.ok());
  ASSERT_OK((*latch)->HoldBack((*stream)->get()));
  Expected<Future> future = Future{};
  {
    TaskGraph graph(*runtime);
    ASSERT_TRUE(graph.Add("add", DType::kF32, {*a, *b, *out}, {{"alpha", "3"}}).ok());
    EXPECT_EQ(graph.storages().size(), 3u);
    future = runtime->Submit(graph, SubmitOptions{.wait_for = (*stream)->get()});
    ASSERT_TRUE(future.ok()) << future.status().ToString();
  }
  *a = Tensor();
  *b = Tensor();
  auto arena = runtime->TensorArena();
  ASSERT_TRUE(arena.ok());
  EXPECT_EQ((*arena)->Stats().allocations, 3u);  // a and b are held by the submission
  // New tensors of the same size must not get a's or b's memory; fill them
  // with garbage before the graph runs.
  auto c = Filled(*runtime, {256, 64}, std::vector<float>(kN, -1000.0f));
  auto d = Filled(*runtime, {256, 64}, std::vector<float>(kN, -2000.0f));
  ASSERT_TRUE(c.ok() && d.ok());
  for (std::uint64_t address : {c->data_address(), d->data_address()}) {
    EXPECT_NE(address, a_address);
    EXPECT_NE(address, b_address);
  }
  EXPECT_FALSE(future->Ready());

  (*latch)->Open();
  ASSERT_OK(future->Wait(std::chrono::seconds(10)));
  auto result = Read(*runtime, *out);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  for (std::size_t i = 0; i < kN; ++i) {
    ASSERT_EQ((*result)[i], a_values[i] + 3.0f * b_values[i]) << "at " << i;
  }
  // Once parked and done, a's and b's ranges are reusable again.
  ASSERT_OK(runtime->WaitUntilParked());
  const ArenaStats stats = (*arena)->Stats();
  EXPECT_EQ(stats.allocations, 3u);  // out, c, d
  EXPECT_EQ(stats.pending_frees, 0u);
  auto e = runtime->Empty({256, 64}, DType::kF32);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->data_address() == a_address || e->data_address() == b_address)
      << e->data_address() << " is neither " << a_address << " nor " << b_address;
}

// A transposed (non-contiguous) input, a broadcast (stride 0) input and a
// strided output view, checked against the CPU; elements the output view
// skips keep their poison.
TEST_F(RuntimeTensorsGpuTest, ViewsBroadcastAndStridedOutputs) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  const std::vector<float> m_values = Ramp(64 * 32, 0.125f, -2.0f);  // m: [64, 32]
  const std::vector<float> bias_values = Ramp(64, 1.5f, 0.5f);       // bias: [64]
  auto m = Filled(*runtime, {64, 32}, m_values);
  auto bias = Filled(*runtime, {64}, bias_values);
  auto big = Filled(*runtime, {32, 128}, std::vector<float>(32 * 128, NAN));
  ASSERT_TRUE(m.ok() && bias.ok() && big.ok());
  auto mt = m->Transpose(0, 1);               // [32, 64], strides [1, 32]
  auto bias_rows = bias->ExpandTo({32, 64});  // strides [0, 1]
  auto out = big->Slice(1, 0, kSliceEnd, 2);  // [32, 64], strides [128, 2]
  ASSERT_TRUE(mt.ok() && bias_rows.ok() && out.ok());
  ASSERT_FALSE(mt->IsContiguous());
  TaskGraph graph(*runtime);
  ASSERT_TRUE(graph.Add("add", DType::kF32, {*mt, *bias_rows, *out}, {{"alpha", "-1"}}).ok());
  auto future = runtime->Submit(graph);
  ASSERT_TRUE(future.ok());
  ASSERT_OK(future->Wait(std::chrono::seconds(10)));
  auto values = Read(*runtime, *big);
  ASSERT_TRUE(values.ok());
  for (int i = 0; i < 32; ++i) {
    for (int j = 0; j < 128; ++j) {
      const float got = (*values)[i * 128 + j];
      if (j % 2 == 1) {
        ASSERT_TRUE(std::isnan(got)) << "(" << i << ", " << j << ") was written";
        continue;
      }
      const int k = j / 2;
      ASSERT_EQ(got, m_values[k * 32 + i] - bias_values[k]) << "at (" << i << ", " << j << ")";
    }
  }
}

TEST_F(RuntimeTensorsGpuTest, WrapsExternalMemoryWithoutCopying) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  constexpr std::size_t kN = 8192;
  const std::vector<float> values = Ramp(kN, 0.75f, -10.0f);
  auto raw = runtime->Allocate(kN * sizeof(float));  // memory "another library" owns
  ASSERT_TRUE(raw.ok());
  ASSERT_OK(runtime->CopyToDevice(raw->address, values.data(), kN * sizeof(float)));
  bool released = false;
  auto wrapped = runtime->Wrap(raw->address, DType::kF32, {kN}, {}, [&] { released = true; });
  ASSERT_TRUE(wrapped.ok()) << wrapped.status().ToString();
  EXPECT_EQ(wrapped->data_address(), raw->address);
  EXPECT_EQ(wrapped->storage()->owner(), StorageOwner::kExternal);
  // Every other element, as a strided wrap of the same memory.
  auto evens = runtime->Wrap(raw->address, DType::kF32, {kN / 2}, {2});
  ASSERT_TRUE(evens.ok()) << evens.status().ToString();
  auto doubled = runtime->Empty({kN}, DType::kF32);
  auto evens_doubled = runtime->Empty({kN / 2}, DType::kF32);
  ASSERT_TRUE(doubled.ok() && evens_doubled.ok());

  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok());
  auto latch = HostLatch::Create();
  ASSERT_TRUE(latch.ok());
  ASSERT_OK((*latch)->HoldBack((*stream)->get()));
  Expected<Future> future = Future{};
  {
    TaskGraph graph(*runtime);
    ASSERT_TRUE(graph.Add("add", DType::kF32, {*wrapped, *wrapped, *doubled}).ok());
    ASSERT_TRUE(graph.Add("add", DType::kF32, {*evens, *evens, *evens_doubled}).ok());
    future = runtime->Submit(graph, SubmitOptions{.wait_for = (*stream)->get()});
    ASSERT_TRUE(future.ok()) << future.status().ToString();
  }
  *wrapped = Tensor();
  EXPECT_FALSE(released);  // the submission holds the storage
  (*latch)->Open();
  ASSERT_OK(future->Wait(std::chrono::seconds(10)));
  ASSERT_OK(runtime->Synchronize());  // reclaims the finished submission
  EXPECT_TRUE(released);
  auto all = Read(*runtime, *doubled);
  auto half = Read(*runtime, *evens_doubled);
  ASSERT_TRUE(all.ok() && half.ok());
  for (std::size_t i = 0; i < kN; ++i) ASSERT_EQ((*all)[i], 2.0f * values[i]) << "at " << i;
  for (std::size_t i = 0; i < kN / 2; ++i) {
    ASSERT_EQ((*half)[i], 2.0f * values[2 * i]) << "at " << i;
  }
  *evens = Tensor();
  runtime->Free(*raw);
}

TEST_F(RuntimeTensorsGpuTest, BadWrapsCopiesAndTasksAreErrors) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  std::vector<float> host(64, 1.0f);
  bool released = false;
  auto on_host = runtime->Wrap(reinterpret_cast<std::uint64_t>(host.data()), DType::kF32, {64}, {},
                               [&] { released = true; });
  ASSERT_FALSE(on_host.ok());
  EXPECT_EQ(on_host.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(on_host.status().message().find("not host memory"), std::string::npos)
      << on_host.status().message();
  EXPECT_FALSE(released);  // on error the caller keeps ownership
  auto raw = runtime->Allocate(1024);
  ASSERT_TRUE(raw.ok());
  EXPECT_FALSE(runtime->Wrap(raw->address + 1, DType::kF32, {4}).ok());      // misaligned
  EXPECT_FALSE(runtime->Wrap(raw->address, DType::kF32, {4, 4}, {4}).ok());  // rank mismatch
  EXPECT_FALSE(runtime->Wrap(raw->address, DType::kF32, {-1}).ok());

  auto m = runtime->Empty({8, 4}, DType::kF32);
  ASSERT_TRUE(m.ok());
  auto mt = m->Transpose(0, 1);
  ASSERT_TRUE(mt.ok());
  std::vector<float> buffer(32);
  Status copy = runtime->CopyToHost(buffer.data(), *mt, buffer.size() * sizeof(float));
  EXPECT_EQ(copy.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(copy.message().find("not contiguous"), std::string::npos) << copy.message();
  EXPECT_EQ(runtime->CopyToDevice(*m, buffer.data(), 4).code(), StatusCode::kInvalidArgument);

  TaskGraph graph(*runtime);
  auto undefined = graph.Add("add", DType::kF32, {*m, Tensor(), *m});
  ASSERT_FALSE(undefined.ok());
  EXPECT_NE(undefined.status().message().find("tensor 1 is undefined"), std::string::npos)
      << undefined.status().message();
  EXPECT_TRUE(graph.empty());
  EXPECT_TRUE(graph.storages().empty());
  runtime->Free(*raw);
}

TEST_F(RuntimeTensorsGpuTest, TrimReturnsFreeBlocksOnlyWhenNothingRuns) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  auto x = runtime->Empty({1024}, DType::kF32);
  auto y = runtime->Empty({1024}, DType::kF32);
  ASSERT_TRUE(x.ok() && y.ok());
  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok());
  auto latch = HostLatch::Create();
  ASSERT_TRUE(latch.ok());
  ASSERT_OK((*latch)->HoldBack((*stream)->get()));
  TaskGraph graph(*runtime);
  ASSERT_TRUE(graph.Add("mul", DType::kF32, {*x, *x, *y}).ok());
  auto future = runtime->Submit(graph, SubmitOptions{.wait_for = (*stream)->get()});
  ASSERT_TRUE(future.ok());
  auto busy = runtime->TrimTensorMemory();
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), StatusCode::kFailedPrecondition);
  (*latch)->Open();
  ASSERT_OK(future->Wait(std::chrono::seconds(10)));
  ASSERT_OK(runtime->WaitUntilParked());
  auto arena = runtime->TensorArena();
  ASSERT_TRUE(arena.ok());
  const std::size_t reserved = (*arena)->Stats().bytes_reserved;
  EXPECT_GT(reserved, 0u);
  auto kept = runtime->TrimTensorMemory();  // x and y are live: their block stays
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, 0u);
  *x = Tensor();
  *y = Tensor();
  graph = TaskGraph(*runtime);  // the graph held them too
  auto trimmed = runtime->TrimTensorMemory();
  ASSERT_TRUE(trimmed.ok()) << trimmed.status().ToString();
  EXPECT_EQ(*trimmed, reserved);
  EXPECT_EQ((*arena)->Stats().blocks, 0u);
}

}  // namespace
}  // namespace gpuos::runtime
