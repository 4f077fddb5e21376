// Ordering between the runtime and other CUDA streams, both directions
// (docs/runtime.md, "Streams"): a graph submitted with wait_for starts after
// the stream's earlier work; a stream made to wait for a future starts its
// later work after the graph; a graph submitted with open_later starts at
// OpenGate (or completes unrun at DropGated). A host latch (a mapped word the stream waits
// on) holds streams back deterministically, which also shows that no call
// blocks the host. Skips with the reason where there is no GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "runtime_gpu_fixture.h"
#include "runtime_stream_util.h"
#include "runtime_test_util.h"

namespace gpuos::runtime {
namespace {

using testing::DeviceTensor;
using testing::Download;
using testing::Filled;
using testing::FloatBits;
using testing::HostLatch;
using testing::Upload;
using testing::UserStream;

constexpr std::size_t kN = 4096;

class RuntimeStreamsGpuTest : public testing::GpuRuntimeTest {};

// x = 3 written by the stream, out = x + 2 * ones by gpuos: out is 5 only if
// the graph ran after the stream's write.
struct WriteThenAdd {
  DeviceTensor x, ones, out;
};

Expected<WriteThenAdd> MakeBuffers(Runtime& runtime) {
  WriteThenAdd b;
  GPUOS_ASSIGN_OR_RETURN(b.x, Upload(runtime, Filled(kN, NAN)));
  GPUOS_ASSIGN_OR_RETURN(b.ones, Upload(runtime, Filled(kN, 1.0f)));
  GPUOS_ASSIGN_OR_RETURN(b.out, Upload(runtime, Filled(kN, NAN)));
  return b;
}

Status EnqueueWriteThree(const UserStream& stream, const DeviceTensor& x) {
  return CudaStatus(
      stream.driver(),
      stream.driver().cuMemsetD32Async(x.buffer.address, FloatBits(3.0f), kN, stream.get()),
      "cuMemsetD32Async(x)");
}

// A user stream held back by a host latch (until Open), with x = 3 queued
// behind the latch.
struct HeldBackWrite {
  std::unique_ptr<UserStream> stream;
  std::unique_ptr<HostLatch> latch;
};

Expected<HeldBackWrite> HoldBackWriteThree(const DeviceTensor& x) {
  HeldBackWrite held;
  GPUOS_ASSIGN_OR_RETURN(held.stream, UserStream::Create());
  GPUOS_ASSIGN_OR_RETURN(held.latch, HostLatch::Create());
  GPUOS_RETURN_IF_ERROR(held.latch->HoldBack(held.stream->get()));
  GPUOS_RETURN_IF_ERROR(EnqueueWriteThree(*held.stream, x));
  return held;
}

Status Fill(Runtime& runtime, const DeviceTensor& tensor, float value) {
  const std::vector<float> values = Filled(static_cast<std::size_t>(tensor.desc.numel), value);
  return runtime.CopyToDevice(tensor.buffer.address, values.data(), values.size() * sizeof(float));
}

void ExpectAll(const std::vector<float>& values, float expected) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(values[i], expected) << "at " << i;
  }
}

TEST_F(RuntimeStreamsGpuTest, SubmissionWaitsForAStreamWithoutBlockingAnyoneElse) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  auto buffers = MakeBuffers(*runtime);
  ASSERT_TRUE(buffers.ok()) << buffers.status().ToString();
  auto held = HoldBackWriteThree(buffers->x);
  ASSERT_TRUE(held.ok()) << held.status().ToString();

  TaskGraph graph(*runtime);
  ASSERT_TRUE(graph
                  .Add("add", DType::kF32, {buffers->x.desc, buffers->ones.desc, buffers->out.desc},
                       {{"alpha", "2"}})
                  .ok());
  // The stream is held back until the latch opens: had Submit waited for
  // it, this call would never return.
  auto gated = runtime->Submit(graph, SubmitOptions{.wait_for = held->stream->get()});
  ASSERT_TRUE(gated.ok()) << gated.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(gated->Ready());
  EXPECT_EQ(held->stream->Query(), CUDA_ERROR_NOT_READY);

  // Later submissions run while the gated one waits.
  auto other_out = Upload(*runtime, Filled(kN, NAN));
  ASSERT_TRUE(other_out.ok());
  TaskGraph other(*runtime);
  ASSERT_TRUE(
      other.Add("add", DType::kF32, {buffers->ones.desc, buffers->ones.desc, other_out->desc})
          .ok());
  auto other_done = runtime->Submit(other);
  ASSERT_TRUE(other_done.ok());
  ASSERT_OK(other_done->Wait(std::chrono::seconds(10)));
  auto other_values = Download(*runtime, *other_out);
  ASSERT_TRUE(other_values.ok());
  ExpectAll(*other_values, 2.0f);
  EXPECT_FALSE(gated->Ready());

  held->latch->Open();
  ASSERT_OK(gated->Wait(std::chrono::seconds(10)));
  auto out = Download(*runtime, buffers->out);
  ASSERT_TRUE(out.ok());
  ExpectAll(*out, 5.0f);
  // Nothing waits at a gate any more: the worker parks.
  ASSERT_OK(runtime->WaitUntilParked());
}

// The case: a long kernel (memsets over 8 GiB) then a small write on
// a user stream; the graph reads the small write's result.
TEST_F(RuntimeStreamsGpuTest, SubmissionSeesTheResultOfALongStream) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  auto buffers = MakeBuffers(*runtime);
  ASSERT_TRUE(buffers.ok()) << buffers.status().ToString();
  constexpr std::size_t kBigWords = std::size_t{1} << 28;  // 1 GiB
  auto big = runtime->Allocate(kBigWords * 4);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok());
  const CudaDriverApi& cuda = (*stream)->driver();
  for (unsigned int pass = 0; pass < 8; ++pass) {
    ASSERT_EQ(cuda.cuMemsetD32Async(big->address, pass, kBigWords, (*stream)->get()), CUDA_SUCCESS);
  }
  ASSERT_OK(EnqueueWriteThree(**stream, buffers->x));
  TaskGraph graph(*runtime);
  ASSERT_TRUE(graph
                  .Add("add", DType::kF32, {buffers->x.desc, buffers->ones.desc, buffers->out.desc},
                       {{"alpha", "2"}})
                  .ok());
  auto future = runtime->Submit(graph, SubmitOptions{.wait_for = (*stream)->get()});
  ASSERT_TRUE(future.ok()) << future.status().ToString();
  // Submit returned while the stream still had milliseconds of work.
  EXPECT_EQ((*stream)->Query(), CUDA_ERROR_NOT_READY);
  ASSERT_OK(future->Wait(std::chrono::seconds(10)));
  auto out = Download(*runtime, buffers->out);
  ASSERT_TRUE(out.ok());
  ExpectAll(*out, 5.0f);
  ASSERT_OK((*stream)->Synchronize());
  runtime->Free(*big);
}

// A gated graph whose first root is tiled, and two more tiled roots: the
// block that admits it after the gate opens (a retry entry of the ready
// ring) claims the first root's tile 0 and announces its helpers as part of
// the admission, as a submission claimed from the tail does. Each output
// must be x + alpha everywhere: a tile run twice or never shows.
TEST_F(RuntimeStreamsGpuTest, GatedGraphWithTiledRootsRunsEveryTileOnce) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  auto buffers = MakeBuffers(*runtime);
  ASSERT_TRUE(buffers.ok()) << buffers.status().ToString();
  std::vector<DeviceTensor> outs;
  for (int k = 0; k < 3; ++k) {
    auto out = Upload(*runtime, Filled(kN, NAN));
    ASSERT_TRUE(out.ok());
    outs.push_back(*out);
  }
  auto held = HoldBackWriteThree(buffers->x);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  TaskGraph graph(*runtime);
  TaskOptions tiled;
  tiled.tiles = 8;
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(graph
                    .Add("add", DType::kF32, {buffers->x.desc, buffers->ones.desc, outs[k].desc},
                         {{"alpha", std::to_string(k + 1)}}, {}, tiled)
                    .ok());
  }
  ASSERT_EQ(graph.tasks()[0].num_tiles, 8u);
  auto gated = runtime->Submit(graph, SubmitOptions{.wait_for = held->stream->get()});
  ASSERT_TRUE(gated.ok()) << gated.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(gated->Ready());
  held->latch->Open();
  ASSERT_OK(gated->Wait(std::chrono::seconds(10)));
  for (int k = 0; k < 3; ++k) {
    auto out = Download(*runtime, outs[k]);
    ASSERT_TRUE(out.ok());
    ExpectAll(*out, 3.0f + static_cast<float>(k + 1));
  }
  ASSERT_OK(held->stream->Synchronize());
}

// Three-way: stream A (held back) -> gpuos graph -> stream B copies the
// result to the host. Every call returns while A is still held back.
TEST_F(RuntimeStreamsGpuTest, StreamWaitsForASubmission) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  auto buffers = MakeBuffers(*runtime);
  ASSERT_TRUE(buffers.ok()) << buffers.status().ToString();
  auto producer = UserStream::Create();
  auto consumer = UserStream::Create();
  ASSERT_TRUE(producer.ok() && consumer.ok());
  auto latch = HostLatch::Create();
  ASSERT_TRUE(latch.ok()) << latch.status().ToString();
  const CudaDriverApi& cuda = (*producer)->driver();
  void* pinned = nullptr;
  ASSERT_EQ(cuda.cuMemHostAlloc(&pinned, kN * sizeof(float), 0), CUDA_SUCCESS);
  auto* host = static_cast<float*>(pinned);
  for (std::size_t i = 0; i < kN; ++i) host[i] = -1.0f;

  ASSERT_OK((*latch)->HoldBack((*producer)->get()));
  ASSERT_OK(EnqueueWriteThree(**producer, buffers->x));
  TaskGraph graph(*runtime);
  ASSERT_TRUE(graph
                  .Add("add", DType::kF32, {buffers->x.desc, buffers->ones.desc, buffers->out.desc},
                       {{"alpha", "2"}})
                  .ok());
  auto future = runtime->Submit(graph, SubmitOptions{.wait_for = (*producer)->get()});
  ASSERT_TRUE(future.ok()) << future.status().ToString();
  ASSERT_OK(runtime->StreamWaitFor((*consumer)->get(), *future));
  ASSERT_EQ(cuda.cuMemcpyDtoHAsync(host, buffers->out.buffer.address, kN * sizeof(float),
                                   (*consumer)->get()),
            CUDA_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(future->Ready());
  EXPECT_EQ((*consumer)->Query(), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(host[0], -1.0f);

  (*latch)->Open();
  ASSERT_OK((*consumer)->Synchronize());
  EXPECT_TRUE(future->Ready());  // the consumer waited for it
  std::vector<float> copied(host, host + kN);
  ExpectAll(copied, 5.0f);
  ASSERT_OK(future->Wait());
  (void)cuda.cuMemFreeHost(pinned);
}

// Completion words are per ring slot and slots are reused: with 4 slots, a
// stream waits for each of 12 chains in turn (">= sequence" on the slot's
// word) and copies each result.
TEST_F(RuntimeStreamsGpuTest, StreamWaitsAcrossReusedSlots) {
  RuntimeConfig config;
  config.submission_capacity = 4;
  OPEN_OR_SKIP(runtime, Open(config));
  constexpr int kGraphs = 12;
  constexpr int kSteps = 50;
  auto ones = Upload(*runtime, Filled(kN, 1.0f));
  ASSERT_TRUE(ones.ok());
  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok());
  const CudaDriverApi& cuda = (*stream)->driver();
  void* pinned = nullptr;
  ASSERT_EQ(cuda.cuMemHostAlloc(&pinned, kGraphs * kN * sizeof(float), 0), CUDA_SUCCESS);
  auto* host = static_cast<float*>(pinned);
  std::vector<DeviceTensor> outs;
  for (int g = 0; g < kGraphs; ++g) {
    auto out = Upload(*runtime, Filled(kN, 0.0f));
    ASSERT_TRUE(out.ok());
    outs.push_back(*out);
    TaskGraph chain(*runtime);
    for (int step = 0; step < kSteps; ++step) {
      std::vector<TaskId> deps;
      if (step > 0) deps.push_back(static_cast<TaskId>(step - 1));
      ASSERT_TRUE(chain
                      .Add("add", DType::kF32, {out->desc, ones->desc, out->desc},
                           {{"alpha", std::to_string(g)}}, deps)
                      .ok());
    }
    auto future = runtime->Submit(chain);
    ASSERT_TRUE(future.ok()) << future.status().ToString();
    ASSERT_OK(runtime->StreamWaitFor((*stream)->get(), *future));
    ASSERT_EQ(cuda.cuMemcpyDtoHAsync(host + g * kN, out->buffer.address, kN * sizeof(float),
                                     (*stream)->get()),
              CUDA_SUCCESS);
  }
  ASSERT_OK((*stream)->Synchronize());
  for (int g = 0; g < kGraphs; ++g) {
    std::vector<float> copied(host + g * kN, host + (g + 1) * kN);
    ExpectAll(copied, static_cast<float>(kSteps * g));
  }
  (void)cuda.cuMemFreeHost(pinned);
}

TEST_F(RuntimeStreamsGpuTest, RefusesTheLegacyStreamAndAcceptsEmptyFutures) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  auto buffers = MakeBuffers(*runtime);
  ASSERT_TRUE(buffers.ok());
  TaskGraph graph(*runtime);
  ASSERT_TRUE(
      graph.Add("add", DType::kF32, {buffers->ones.desc, buffers->ones.desc, buffers->out.desc})
          .ok());
  auto legacy = runtime->Submit(graph, SubmitOptions{.wait_for = CU_STREAM_LEGACY});
  ASSERT_FALSE(legacy.ok());
  EXPECT_EQ(legacy.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(legacy.status().message().find("CU_STREAM_NON_BLOCKING"), std::string::npos)
      << legacy.status().message();

  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok());
  EXPECT_TRUE(runtime->StreamWaitFor((*stream)->get(), Future{}).ok());
  TaskGraph empty(*runtime);
  auto nothing = runtime->Submit(empty, SubmitOptions{.wait_for = (*stream)->get()});
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->Ready());
  // The refused submission left the queue as it was: a normal one runs.
  auto done = runtime->Submit(graph, SubmitOptions{.wait_for = (*stream)->get()});
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  ASSERT_OK(done->Wait(std::chrono::seconds(10)));
  auto out = Download(*runtime, buffers->out);
  ASSERT_TRUE(out.ok());
  ExpectAll(*out, 2.0f);
  // A finished future: nothing to enqueue.
  EXPECT_TRUE(runtime->StreamWaitFor((*stream)->get(), *done).ok());
}

// SubmitOptions::open_later: the graph is published at once and starts only
// at OpenGate; DropGated completes it without running it. Other
// submissions, and the slot's later submissions, are not affected.
TEST_F(RuntimeStreamsGpuTest, OpenLaterStartsAtOpenGateAndDropGatedRunsNothing) {
  // Two slots: the dropped and the opened graph reuse them.
  RuntimeConfig config;
  config.submission_capacity = 2;
  OPEN_OR_SKIP(runtime, Open(config));
  auto buffers = MakeBuffers(*runtime);
  ASSERT_TRUE(buffers.ok()) << buffers.status().ToString();
  ASSERT_OK(Fill(*runtime, buffers->x, 3.0f));
  TaskGraph graph(*runtime);
  ASSERT_TRUE(graph
                  .Add("add", DType::kF32, {buffers->x.desc, buffers->ones.desc, buffers->out.desc},
                       {{"alpha", "2"}})
                  .ok());
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    ASSERT_OK(Fill(*runtime, buffers->out, NAN));
    auto dropped = runtime->Submit(graph, SubmitOptions{.open_later = true});
    ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(dropped->Ready()) << "started before its gate opened";
    ASSERT_OK(runtime->DropGated(*dropped));
    ASSERT_OK(dropped->Wait(std::chrono::seconds(10)));
    auto untouched = Download(*runtime, buffers->out);
    ASSERT_TRUE(untouched.ok());
    EXPECT_TRUE(std::isnan((*untouched)[0])) << "a dropped graph ran";

    auto opened = runtime->Submit(graph, SubmitOptions{.open_later = true});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(opened->Ready()) << "started before its gate opened";
    ASSERT_OK(runtime->OpenGate(*opened));
    ASSERT_OK(runtime->OpenGate(*opened));   // twice: nothing more
    ASSERT_OK(runtime->DropGated(*opened));  // after opening: nothing
    ASSERT_OK(opened->Wait(std::chrono::seconds(10)));
    auto out = Download(*runtime, buffers->out);
    ASSERT_TRUE(out.ok());
    ExpectAll(*out, 5.0f);
    // A plain submission in the slots the gated ones used runs as before.
    ASSERT_OK(Fill(*runtime, buffers->out, NAN));
    auto plain = runtime->Submit(graph);
    ASSERT_TRUE(plain.ok());
    ASSERT_OK(plain->Wait(std::chrono::seconds(10)));
    auto again = Download(*runtime, buffers->out);
    ASSERT_TRUE(again.ok());
    ExpectAll(*again, 5.0f);
  }
  // An open gate costs nothing once it is open before the worker reads it.
  auto early = runtime->Submit(graph, SubmitOptions{.open_later = true});
  ASSERT_TRUE(early.ok());
  ASSERT_OK(runtime->OpenGate(*early));
  ASSERT_OK(early->Wait(std::chrono::seconds(10)));
  ASSERT_OK(runtime->WaitUntilParked());
}

TEST_F(RuntimeStreamsGpuTest, OpenLaterRefusesWaitForAndAcceptsEmptyFutures) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  auto buffers = MakeBuffers(*runtime);
  ASSERT_TRUE(buffers.ok());
  TaskGraph graph(*runtime);
  ASSERT_TRUE(
      graph.Add("add", DType::kF32, {buffers->ones.desc, buffers->ones.desc, buffers->out.desc})
          .ok());
  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok());
  auto both =
      runtime->Submit(graph, SubmitOptions{.wait_for = (*stream)->get(), .open_later = true});
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(both.status().message().find("one gate"), std::string::npos) << both.status().message();

  EXPECT_TRUE(runtime->OpenGate(Future{}).ok());
  EXPECT_TRUE(runtime->DropGated(Future{}).ok());
  // The refused submission left the queue as it was.
  auto gated = runtime->Submit(graph, SubmitOptions{.open_later = true});
  ASSERT_TRUE(gated.ok());
  ASSERT_OK(runtime->OpenGate(*gated));
  ASSERT_OK(gated->Wait(std::chrono::seconds(10)));
  auto out = Download(*runtime, buffers->out);
  ASSERT_TRUE(out.ok());
  ExpectAll(*out, 2.0f);
}

}  // namespace
}  // namespace gpuos::runtime
